"""The main screen's table of receipts of finished operations: diffs and corrections of a landing."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from rmtui.tui.widgets.fitted_columns import Column
from rmtui.tui.widgets.keyed_table import KeyedTable
from rmtui.tui.widgets.operations_table import OperationsTable
from rmtui.tui.wording import op_kind, op_tail


class ReceiptsTable(KeyedTable):
    """Receipts of finished operations, newest first."""

    BINDINGS: ClassVar = [Binding("d", "diff", "Diff", id="receipts.diff"),
                          Binding("c", "correct", "Correct landing", id="receipts.correct")]
    #: what ran and how it ended always show whole; in a narrow pane the id leaves first, then
    #: the landed commit, then what changed (a correction's question first), clipped before
    FITTED: ClassVar = (Column("operation", "operation"), Column("phase", "phase"),
                        Column("changed", "changed", drop=2, flex=True), Column("landed", "landed", drop=3),
                        Column("id", "id", drop=4))

    class CorrectionRequested(Message):
        """``c`` on a landed Update: send it back for correction (the main screen asks why)."""

        def __init__(self, receipt) -> None:
            super().__init__()
            self.receipt = receipt

    def set_receipts(self, receipts: list) -> None:
        rows = []
        for r in receipts:
            changed = ", ".join(r.changed_paths) or (r.error or "-")
            corr = getattr(r, "correction", None) or {}
            if corr.get("status"):  # the last correction round; a question waits for an answer
                changed = (f"asks: {corr.get('message')}" if corr["status"] == "needs_input"
                           else f"correction {corr['status']} · {changed}")
            rows.append((r.operation_id, r, (op_kind(r.kind), r.phase, changed, (r.landed_commit or "-")[:10],
                                             op_tail(r.operation_id))))
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
