"""Tables of the workbench: evidence, active operations, receipts (main screen); shared
views (Sharing screen).

Each table owns its bindings, so the footer shows the keys of the focused pane; an action
that does not apply to the row under the cursor is disabled (dimmed in the footer), never
an error after the fact. Actions only post messages: the screen does the engine call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from rmtui.engine.display import printable  # evidence text is shown, never obeyed

FIRST_LINE_WIDTH = 72
#: what the evidence table's other columns take before its text column (mark, state, age,
#: each with one cell of padding either side, and the scrollbar)
FIXED_COLUMNS = 3 + 10 + 6 + 2 + 1
SESSION_AND_UID = 24 + 10  # the columns right of the text, shown when the text keeps 40 cells
#: the machine column (a lease holder's short device id, ``here``, ``upstream``): only while
#: some row has one, so a root without sync keeps every cell for the text
MACHINE_WIDTH = 8
MACHINE_COLUMN = MACHINE_WIDTH + 2


def age(seconds: float) -> str:
    """A short age: 45s, 12m, 3h, 2d."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def lease_text(lease: dict | None, now: float) -> str:
    if not lease:
        return "-"
    holder = lease.get("holder") or (f"pid {lease['pid']}" if lease.get("pid") else "?")
    until = lease.get("until")
    if until is not None:
        left = until - now
        return f"{holder}, {'expires in ' + age(left) if left > 0 else 'expired'}"
    host = lease.get("host")
    return f"{holder}@{host}" if host else holder


def short_op(op_id: str) -> str:
    """``maintenance-20250601T101500Z-55ac76d8`` as ``maintenance …55ac76d8`` (the id is the row key)."""
    parts = op_id.split("-")
    if len(parts) >= 3:
        return f"{'-'.join(parts[:-2])} …{parts[-1]}"
    return op_id


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class _KeyedTable(DataTable):
    """A row-cursor table that keeps the cursor on the same key across refreshes."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.rows_by_key: dict[str, object] = {}

    @property
    def current_key(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    @property
    def current(self):
        key = self.current_key
        return self.rows_by_key.get(key) if key is not None else None

    def replace_rows(self, rows: list[tuple[str, object, tuple]]) -> None:
        keep = self.current_key
        keep_index = self.cursor_row
        self._replacing = True
        try:
            self.clear()
            self.rows_by_key = {}
            for key, obj, cells in rows:
                self.rows_by_key[key] = obj
                self.add_row(*cells, key=key)
            if keep is not None and keep in self.rows_by_key:
                self.move_cursor(row=self.get_row_index(keep), animate=False)
            elif self.row_count:
                self.move_cursor(row=min(keep_index, self.row_count - 1), animate=False)
        finally:
            self._replacing = False
        self.update_bindings()

    def watch_cursor_coordinate(self, old, new) -> None:
        super().watch_cursor_coordinate(old, new)
        if not getattr(self, "_replacing", False):
            self.update_bindings()

    def update_bindings(self) -> None:
        """Refresh the footer only when an action became (un)available: a refresh rebuilds it."""
        state = tuple(bool(self.check_action(b.action.split("(")[0], ())) for b in self.BINDINGS)
        if state != getattr(self, "_binding_state", None):
            self._binding_state = state
            self.refresh_bindings()


class EvidenceTable(_KeyedTable):
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
            machine = (Text(_clip(printable(self.machines.get(e.uid, "")), MACHINE_WIDTH)),) \
                if self.machine_column else ()
            rows.append((e.uid, e, ("•" if e.uid in self.marked else " ", state, *machine, age(now - e.created_at),
                                    Text(_clip(printable(first), self.text_width)), Text(_clip(e.session, 22)), e.uid[:8])))
        self.replace_rows(rows)
        self._place_cursor()

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


class OperationsTable(_KeyedTable):
    """Active operations and native assistant tasks, with phase and lease."""

    BINDINGS: ClassVar = [Binding("d", "diff", "Diff", id="operations.diff")]

    class DiffRequested(Message):
        def __init__(self, op_id: str) -> None:
            super().__init__()
            self.op_id = op_id

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock

    def on_mount(self) -> None:
        self.add_column("operation", key="id")
        self.add_column("role", key="role")
        self.add_column("phase", key="phase")
        self.add_column("lease", key="lease")

    def set_operations(self, operations: list) -> None:
        now = self.clock()
        rows = []
        for op in operations:
            label = short_op(op.id) if op.kind != "assistant" else f"task {short_op(op.id)}"
            phase = op.phase if not op.error else f"{op.phase} ({_clip(op.error, 30)})"
            rows.append((op.id, op, (_clip(label, 44), op.role, phase, lease_text(op.lease, now))))
        self.replace_rows(rows)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "diff":
            return True if self.current is not None else None
        return True

    def action_diff(self) -> None:
        if self.current is not None:
            self.post_message(self.DiffRequested(self.current.id))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_diff()


class ReceiptsTable(_KeyedTable):
    """Receipts of finished operations, newest first."""

    BINDINGS: ClassVar = [Binding("d", "diff", "Diff", id="receipts.diff"),
                          Binding("c", "correct", "Correct landing", id="receipts.correct")]

    class CorrectionRequested(Message):
        """``c`` on a landed Update: send it back for correction (the main screen asks why)."""

        def __init__(self, receipt) -> None:
            super().__init__()
            self.receipt = receipt

    def on_mount(self) -> None:
        self.add_column("operation", key="id")
        self.add_column("phase", key="phase")
        self.add_column("landed", key="landed", width=10)
        self.add_column("changed", key="changed")

    def set_receipts(self, receipts: list) -> None:
        rows = []
        for r in receipts:
            changed = ", ".join(r.changed_paths) or (r.error or "-")
            corr = getattr(r, "correction", None) or {}
            if corr.get("status"):  # the last correction round; a question waits for an answer
                changed = (f"asks: {corr.get('message')}" if corr["status"] == "needs_input"
                           else f"correction {corr['status']} · {changed}")
            rows.append((r.operation_id, r, (short_op(r.operation_id), r.phase, (r.landed_commit or "-")[:10],
                                             _clip(changed, 60))))
        self.replace_rows(rows)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "diff":
            return True if self.current is not None and self.current.landed_commit else None
        if action == "correct":
            r = self.current
            return True if r is not None and r.phase == "committed" and r.kind in ("update", "assistant") else None
        return True

    def action_diff(self) -> None:
        if self.current is not None and self.current.landed_commit:
            self.post_message(OperationsTable.DiffRequested(self.current.operation_id))

    def action_correct(self) -> None:
        if self.check_action("correct", ()):
            self.post_message(self.CorrectionRequested(self.current))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_diff()


#: how a connection reaches its provider (``shared_views.toml`` target kinds)
TRANSPORTS = {"git-file": "git share", "http-file": "http", "http-question": "http", "none": "no transport",
              "revoked": "revoked by the provider"}


class SharedViewsTable(_KeyedTable):
    """Shared-view connections (MF file views, MQ question views) with their freshness:
    pull the file view under the cursor or every file view, ask the question view under it.
    ``?`` is the app's help key, so asking is ``a``."""

    BINDINGS: ClassVar = [
        Binding("p", "pull", "Pull view", id="views.pull"),
        Binding("r", "pull_all", "Pull all", id="views.pull_all"),
        Binding("a", "ask", "Ask", id="views.ask"),
    ]

    class PullRequested(Message):
        """Pull ``view_id``, or every file view when None."""

        def __init__(self, view_id: str | None) -> None:
            super().__init__()
            self.view_id = view_id

    class AskRequested(Message):
        def __init__(self, view_id: str) -> None:
            super().__init__()
            self.view_id = view_id

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.views: list = []
        self.busy: set[str] = set()  # "pull", "ask": what the screen is doing (the keys wait)

    def on_mount(self) -> None:
        self.add_column("view", key="view")
        self.add_column("kind", key="kind", width=4)
        self.add_column("status", key="status", width=11)
        self.add_column("items", key="items", width=5)
        self.add_column("pulled", key="pulled")
        self.add_column("reason / via", key="reason")

    def set_views(self, views: list) -> None:
        self.views = views
        now = self.clock()
        rows = []
        for v in views:
            status = Text(v.status, style="bold" if v.status != "fresh" else "")
            items = str(v.items) if v.items is not None else "-"
            pulled = when(v.last_success_at, now) if v.is_file else "-"
            note = v.reason if v.status != "fresh" and v.reason else TRANSPORTS.get(v.transport, v.transport)
            rows.append((v.view_id, v, (Text(_clip(printable(v.view_id), 24)), v.kind, status, items, pulled,
                                        Text(_clip(printable(note), 60)))))
        self.replace_rows(rows)

    def set_busy(self, what: str, busy: bool) -> None:
        if busy:
            self.busy.add(what)
        else:
            self.busy.discard(what)
        self.update_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        v = self.current
        if action in ("pull", "pull_all", "ask") and not self.views:
            return False  # nothing connected: the pane says how to connect a view
        if action == "pull":
            return True if v is not None and v.is_file and "pull" not in self.busy else None
        if action == "pull_all":
            return True if any(x.is_file for x in self.views) and "pull" not in self.busy else None
        if action == "ask":
            return True if v is not None and not v.is_file and "ask" not in self.busy else None
        return True

    def action_pull(self) -> None:
        if self.check_action("pull", ()):
            self.post_message(self.PullRequested(self.current.view_id))

    def action_pull_all(self) -> None:
        if self.check_action("pull_all", ()):
            self.post_message(self.PullRequested(None))

    def action_ask(self) -> None:
        if self.check_action("ask", ()):
            self.post_message(self.AskRequested(self.current.view_id))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_ask()  # enter on a question view asks it; on a file view it does nothing


def when(iso: str | None, now: float) -> str:
    """An ISO time of the engine's state files as ``06-02 09:30Z (5m ago)``; ``never`` for None."""
    if not iso:
        return "never"
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    ts = t.timestamp()
    shown = datetime.fromtimestamp(ts, UTC).strftime("%m-%d %H:%MZ")
    return f"{shown} ({age(now - ts)} ago)" if now >= ts else shown


def timestamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
