"""The main screen's table of active operations and native assistant tasks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from rmtui.tui.widgets.keyed_table import KeyedTable
from rmtui.tui.wording import age, clip, short_op


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
            phase = op.phase if not op.error else f"{op.phase} ({clip(op.error, 30)})"
            rows.append((op.id, op, (clip(label, 44), op.role, phase, lease_text(op.lease, now))))
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
