"""The retrieve playground: a need in, ranked results and the exact text an agent gets.

The playground never records a delivery (``record=False``), so trying needs here does not
change what a real session receives next; the session field only chooses whose delivery
history decides what counts as already returned. ``escape`` leaves a text box, after which
the screen keys (1-4, ?) work again; the first retrieval shows what the engine is doing
(starting the embedding model, embedding passages) on a progress line.

The results are listed in the order the agent receives them (``#``); the table says what
ordered them: the score, or the learned second stage re-ordering the best candidates (whose
``score`` stays the first stage's). The results sit above the agent's text, each at the full
width, so no column is cut off.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Header, Input, Label, Static, Switch

from rmtui.engine.errors import EngineError
from rmtui.tui.context import workbench
from rmtui.tui.messages import EngineProgress, RetrieveAnswered
from rmtui.tui.screens.base import WorkbenchScreen, error_text
from rmtui.tui.widgets.footer import KeysFooter
from rmtui.tui.widgets.progress_line import ProgressLine
from rmtui.tui.wording import count, score_text

DEFAULT_SESSION = "workbench-playground"
#: below this width the need gets a row of its own (beside the session and the switch it kept
#: about a dozen cells at 80 columns)
NARROW_WIDTH = 100
COLUMNS = (("#", "rank"), ("score", "score"), ("id", "id"), ("kind", "kind"), ("lines", "lines"),
           ("status", "status"))


def set_columns(table: DataTable, rows: Sequence[tuple[str, ...]]) -> None:
    """Empty ``table`` and give it columns as wide as their widest cell of ``rows``. A
    DataTable measures auto-width columns only when it is next idle, and a busy app could
    paint the new rows at the labels' widths first (``ing-dedupe`` as ``in``)."""
    table.clear(columns=True)
    for i, (label, key) in enumerate(COLUMNS):
        table.add_column(label, key=key, width=max([cell_len(label), *(cell_len(row[i]) for row in rows)]))


def order_note(results: list[dict]) -> str:
    """What orders the list: its scores, or the second stage (scores out of order)."""
    scores = [float(r.get("score") or 0) for r in results]
    if all(a >= b for a, b in zip(scores, scores[1:], strict=False)):
        return "# = order received, by score"
    return "# = order received: the learned second stage re-orders the best; score is the first stage's"


class RetrieveScreen(WorkbenchScreen):
    CSS_PATH = Path(__file__).parent / "retrieve.tcss"
    BINDINGS: ClassVar = [
        Binding("ctrl+r", "run", "Retrieve", id="retrieve.run"),
        Binding("ctrl+l", "focus_need", "Edit need", id="retrieve.focus_need"),
        Binding("escape", "leave_input", "Leave the text box", id="retrieve.leave_input"),
    ]

    def __init__(self) -> None:
        super().__init__(id="retrieve")
        self.running = False
        self.answer: RetrieveAnswered | None = None
        self.sub_title = "Retrieve playground"

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="retrieve-form"):
            yield Input(placeholder="What does the agent need? (enter to retrieve)", id="need")
            yield Input(value=DEFAULT_SESSION, placeholder="session id", id="session", select_on_focus=False)
            yield Label("include returned", id="returned-label")
            yield Switch(value=False, id="include-returned")
        yield Static("Type a need and press enter.", id="retrieve-status")
        with Vertical(id="retrieve-body"):
            yield DataTable(cursor_type="row", id="results")
            with VerticalScroll(id="agent-text-box"):
                yield Static("", id="agent-text")
        yield ProgressLine(id="retrieve-progress")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#results", DataTable)
        table.border_title = "Ranked results"
        set_columns(table, [])
        self.query_one("#agent-text-box").border_title = "What the agent receives"
        self.query_one("#need", Input).focus()

    def on_resize(self, event) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "run":
            return None if self.running else True
        if action == "leave_input":
            return isinstance(self.app.focused, Input)
        return True

    def action_focus_need(self) -> None:
        self.query_one("#need", Input).focus()

    def action_leave_input(self) -> None:
        self.query_one("#results", DataTable).focus()

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()  # escape applies in a text box only

    def on_descendant_blur(self) -> None:
        self.refresh_bindings()

    def action_run(self) -> None:
        need = self.query_one("#need", Input).value.strip()
        session = self.query_one("#session", Input).value.strip() or DEFAULT_SESSION
        if not need:
            self.query_one("#retrieve-status", Static).update("Type a need first.")
            return
        self.running = True
        self.refresh_bindings()
        self.query_one("#retrieve-status", Static).update(f"retrieving {need!r}…")
        self.query_one(ProgressLine).start("Retrieving")
        self.run_retrieve(need, session, self.query_one("#include-returned", Switch).value)

    @work(thread=True, exclusive=True, group="retrieve", exit_on_error=False)
    def run_retrieve(self, need: str, session: str, include_returned: bool) -> None:
        from rmtui.engine import progress
        from rmtui.engine.retrieval.retrieve import retrieve

        def report(step: progress.Progress) -> None:
            self.post_message(EngineProgress("retrieve", step))

        try:
            with progress.reporting(report):
                result = retrieve(workbench(self).root, session, need, include_returned=include_returned, record=False)
        except EngineError as exc:
            self.post_message(RetrieveAnswered(need, [], "", error=error_text(exc)[0]))
            return
        status = f"{count(len(result.results), 'result')} · mode {result.mode}"
        if result.skipped:
            status += f" · {len(result.skipped)} already returned to {session}"
        if result.timings.get("total") is not None:
            status += f" · {result.timings['total'] * 1000:.0f} ms"
        for w in result.warnings:
            status += f"\nwarning: {w}"
        self.post_message(RetrieveAnswered(need, result.results, result.text, status=status))

    def on_engine_progress(self, message: EngineProgress) -> None:
        self.query_one(ProgressLine).show(message.progress)

    def worker_failed(self, worker) -> None:
        self.running = False
        self.query_one(ProgressLine).stop()
        self.refresh_bindings()
        self.query_one("#retrieve-status", Static).update("retrieve failed with an unexpected error.")

    def on_retrieve_answered(self, message: RetrieveAnswered) -> None:
        self.running = False
        self.query_one(ProgressLine).stop()
        self.refresh_bindings()
        self.answer = message
        table = self.query_one("#results", DataTable)
        rows = [] if message.error else [
            (str(i), score_text(float(r.get("score") or 0)), str(r.get("id") or r.get("key")), str(r.get("kind", "")),
             f"{r.get('file')}:{r.get('start_line')}-{r.get('end_line')}", str(r.get("status", "")))
            for i, r in enumerate(message.results, 1)]
        set_columns(table, rows)
        if message.error:
            self.query_one("#retrieve-status", Static).update(Text(f"retrieve failed: {message.error}"))
            self.query_one("#agent-text", Static).update("")
            return
        self.query_one("#retrieve-status", Static).update(message.status)
        table.border_subtitle = order_note(message.results) if message.results else ""
        for row, r in zip(rows, message.results, strict=True):
            table.add_row(*row, key=r.get("key") or row[0])
        self.query_one("#agent-text", Static).update(Text(message.text))
