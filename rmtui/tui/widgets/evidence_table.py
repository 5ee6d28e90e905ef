"""The evidence table of the main screen: the inbox and the queue, with marks for bulk decisions."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from rmtui.engine.display import printable  # evidence text is shown, never obeyed
from rmtui.tui.widgets.keyed_table import KeyedTable
from rmtui.tui.wording import age, clip

FIRST_LINE_WIDTH = 72
#: what the evidence table's other columns take before its text column (mark, state, age,
#: each with one cell of padding either side, and the scrollbar)
FIXED_COLUMNS = 3 + 10 + 6 + 2 + 1
SESSION_AND_UID = 24 + 10  # the columns right of the text, shown when the text keeps 40 cells
#: the machine column (a lease holder's short device id, ``here``, ``upstream``): only while
#: some row has one, so a root without sync keeps every cell for the text
MACHINE_WIDTH = 8
MACHINE_COLUMN = MACHINE_WIDTH + 2


class EvidenceTable(KeyedTable):
    """The evidence inbox and queue: approve, reject with a reason, bulk decisions, view.

    After a decision the cursor stays in the inbox, on the next undecided row (the decided
    one moves to the queued or rejected group); a bulk decision without marks asks first.
    """

    BINDINGS: ClassVar = [
        Binding("a", "approve", "Approve", id="evidence.approve"),
        Binding("x", "reject", "Reject", id="evidence.reject"),
        Binding("m", "mark", "Mark", id="evidence.mark"),
        Binding("A", "approve_all", "Approve marked/all", id="evidence.approve_all"),
        Binding("X", "reject_all", "Reject marked/all", id="evidence.reject_all"),
        Binding("v", "view", "View", id="evidence.view"),
    ]

    class Requested(Message):
        """The person asked for ``action`` on evidence ``uids``; ``confirm``: ask first (a bulk
        decision over the whole inbox, nothing marked)."""

        def __init__(self, action: str, uids: list[str], *, confirm: bool = False) -> None:
            super().__init__()
            self.action = action
            self.uids = uids
            self.confirm = confirm

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.marked: set[str] = set()
        self.evidence: list = []
        self.machines: dict[str, str] = {}  # uid -> machine column text
        self.machine_column = False
        self.text_width = FIRST_LINE_WIDTH
        self._decided: tuple[set[str], int] | None = None  # (uids, their inbox position)
        self._cursor_to: str | None = None

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        self.add_column(" ", key="mark", width=1)
        self.add_column("state", key="state", width=8)
        if self.machine_column:
            self.add_column("machine", key="machine", width=MACHINE_WIDTH)
        self.add_column("age", key="age", width=4)
        self.add_column("evidence", key="first")
        self.add_column("session", key="session")
        self.add_column("uid", key="uid", width=8)

    def _fit_text(self) -> bool:
        """Give the evidence column what the fixed columns leave (session and uid scroll off to
        the right on a narrow terminal rather than squeezing the text); True when it changed."""
        room = self.scrollable_content_region.width - FIXED_COLUMNS - (MACHINE_COLUMN if self.machine_column else 0)
        if room - SESSION_AND_UID >= 40:
            room -= SESSION_AND_UID
        width = max(16, min(FIRST_LINE_WIDTH, room))
        changed = width != self.text_width
        self.text_width = width
        return changed

    def on_resize(self) -> None:
        if self._fit_text() and self.evidence:
            self.set_evidence(self.evidence)

    @property
    def inbox(self) -> list:
        return [e for e in self.evidence if e.state == "inbox"]

    def expect_decision(self, uids: list[str]) -> None:
        """A decision on ``uids`` is on its way: when it shows, keep the cursor in the inbox."""
        order = [e.uid for e in self.inbox]
        positions = [order.index(u) for u in uids if u in order]
        self._decided = (set(uids), min(positions) if positions else 0)

    def forget_decision(self) -> None:
        self._decided = None

    def put_cursor_on(self, uid: str) -> None:
        """Move the cursor to ``uid`` now, or when a refresh brings it."""
        if uid in self.rows_by_key:
            self.move_cursor(row=self.get_row_index(uid), animate=False)
        else:
            self._cursor_to = uid

    def set_evidence(self, evidence: list, *, machines: dict[str, str] | None = None) -> None:
        """Show ``evidence``; ``machines`` (uid -> machine) replaces the machine column's
        texts, None keeps the last ones (a refresh of ages)."""
        self.evidence = evidence
        if machines is not None:
            self.machines = machines
        self._machine_column(any(self.machines.get(e.uid) for e in evidence))
        now = self.clock()
        uids = {e.uid for e in evidence if e.state == "inbox"}
        self.marked &= uids
        rows = []
        for e in evidence:
            first = e.first_line if e.state != "rejected" else f"{e.first_line}  (rejected: {e.reason})"
            state = Text(e.state, style="bold" if e.state == "inbox" else "")
            machine = (Text(clip(printable(self.machines.get(e.uid, "")), MACHINE_WIDTH)),) \
                if self.machine_column else ()
            rows.append((e.uid, e, ("•" if e.uid in self.marked else " ", state, *machine, age(now - e.created_at),
                                    Text(clip(printable(first), self.text_width)),
                                    Text(clip(e.session, 22)), e.uid[:8])))
        self.replace_rows(rows)
        self._place_cursor()

    def refresh_ages(self) -> None:
        """Rewrite the age cells whose text changed (a timer calls this: ages move on their own)."""
        now = self.clock()
        for e in self.evidence:
            if e.uid not in self.rows_by_key:
                continue
            text = age(now - e.created_at)
            if self.get_cell(e.uid, "age") != text:
                self.update_cell(e.uid, "age", text)

    def _machine_column(self, show: bool) -> None:
        """Add or drop the machine column (the columns are rebuilt: it sits after the state)."""
        if show == self.machine_column:
            return
        self.machine_column = show
        if self._cursor_to is None and self.current_key is not None:
            self._cursor_to = self.current_key  # the rebuild empties the table: keep the row
        self.clear(columns=True)
        self.rows_by_key = {}
        self._add_columns()
        self._fit_text()

    def _place_cursor(self) -> None:
        if self._cursor_to is not None and self._cursor_to in self.rows_by_key:
            self.move_cursor(row=self.get_row_index(self._cursor_to), animate=False)
            self._cursor_to = None
            return
        if self._decided is None:
            return
        uids, position = self._decided
        states = {e.uid: e.state for e in self.evidence if e.uid in uids}
        if any(s == "inbox" for s in states.values()):
            return  # the decision has not shown yet
        self._decided = None
        inbox = self.inbox
        if inbox:
            target = inbox[min(position, len(inbox) - 1)].uid
            self.move_cursor(row=self.get_row_index(target), animate=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        ev = self.current
        if action in ("approve", "mark"):
            return True if ev is not None and ev.state == "inbox" else None
        if action == "reject":
            return True if ev is not None and ev.state in ("inbox", "queued") else None
        if action in ("approve_all", "reject_all"):
            return True if any(e.state == "inbox" for e in self.evidence) else None
        if action == "view":
            return True if ev is not None else None
        return True

    def action_approve(self) -> None:
        if self.current is not None:
            self.post_message(self.Requested("approve", [self.current.uid]))

    def action_reject(self) -> None:
        if self.current is not None:
            self.post_message(self.Requested("reject", [self.current.uid]))

    def _bulk(self) -> tuple[list[str], bool]:
        """The marked inbox evidence, else the whole inbox (which needs a confirmation)."""
        marked = [e.uid for e in self.inbox if e.uid in self.marked]
        return (marked, False) if marked else ([e.uid for e in self.inbox], True)

    def action_approve_all(self) -> None:
        uids, confirm = self._bulk()
        if uids:
            self.post_message(self.Requested("approve", uids, confirm=confirm))

    def action_reject_all(self) -> None:
        uids, confirm = self._bulk()
        if uids:
            self.post_message(self.Requested("reject", uids, confirm=confirm))

    def action_mark(self) -> None:
        ev = self.current
        if ev is None:
            return
        self.marked ^= {ev.uid}
        self.update_cell(ev.uid, "mark", "•" if ev.uid in self.marked else " ")
        self.update_bindings()
        if self.cursor_row < self.row_count - 1:  # marking walks down, as in a file manager
            self.move_cursor(row=self.cursor_row + 1, animate=False)

    def action_view(self) -> None:
        if self.current is not None:
            self.post_message(self.Requested("view", [self.current.uid]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_view()
