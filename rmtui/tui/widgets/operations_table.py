"""The main screen's table of active operations and native assistant tasks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from rmtui.tui.widgets.fitted_columns import Column
from rmtui.tui.widgets.keyed_table import KeyedTable
from rmtui.tui.wording import age, op_kind, op_tail


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


class OperationsTable(KeyedTable):
    """Active operations and native assistant tasks, with phase and lease."""

    BINDINGS: ClassVar = [Binding("d", "diff", "Diff", id="operations.diff")]
    #: what runs and its phase always show whole; in a narrow pane the id leaves first, then
    #: the role (mostly the kind again), then the lease, which is clipped before it leaves
    FITTED: ClassVar = (Column("operation", "operation"), Column("phase", "phase"),
                        Column("lease", "lease", drop=2, flex=True), Column("role", "role", drop=3),
                        Column("id", "id", drop=4))

    class DiffRequested(Message):
        def __init__(self, op_id: str) -> None:
            super().__init__()
            self.op_id = op_id

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock

    def set_operations(self, operations: list) -> None:
        now = self.clock()
        rows = []
        for op in operations:
            lease = lease_text(op.lease, now)
            note = lease if not op.error else f"{lease} · {op.error}" if op.lease else op.error
            rows.append((op.id, op, (op_kind(op.kind), op.phase, note, op.role, op_tail(op.id))))
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
