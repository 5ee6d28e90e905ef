"""The diff of one operation or receipt, file by file."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Header, Static

from rmtui.engine.errors import EngineError
from rmtui.tui import readers
from rmtui.tui.context import workbench
from rmtui.tui.messages import DiffLoaded, EngineFailed
from rmtui.tui.screens.base import WorkbenchScreen, error_text
from rmtui.tui.widgets.diff_view import DiffView
from rmtui.tui.widgets.footer import KeysFooter
from rmtui.tui.wording import count


class DiffScreen(WorkbenchScreen):
    CSS_PATH = Path(__file__).parent / "diff.tcss"
    BINDINGS: ClassVar = [
        Binding("escape,q", "close", "Close", id="diff.close"),
        Binding("n", "next_file", "Next file", id="diff.next_file"),
        Binding("p", "previous_file", "Previous file", id="diff.previous_file"),
    ]

    def __init__(self, op_id: str) -> None:
        super().__init__()
        self.op_id = op_id
        self.loaded = False
        self.file_count = 0
        self.sub_title = f"diff {op_id}"

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"loading the diff of {self.op_id}…", id="diff-header")
        yield DiffView(id="diff")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def load(self) -> None:
        try:
            header, files = readers.read_diff(workbench(self).root, self.op_id)
        except EngineError as exc:
            self.post_message(EngineFailed("diff", error_text(exc)[0]))
            return
        self.post_message(DiffLoaded(self.op_id, header, files))

    async def on_diff_loaded(self, message: DiffLoaded) -> None:
        h = message.header
        text = Text()
        text.append(h["id"], style="bold")
        text.append(f"  {h['kind']} · {h['role']} · {h['phase']}\n")
        landed = h["landed"][:10] if h["landed"] else ("worktree, so far" if h.get("live") else "none")
        text.append(f"base {h['base'][:10]} → {landed} · {count(len(message.files), 'file')} · "
                    f"+{sum(f.added for f in message.files)} −{sum(f.removed for f in message.files)}")
        if h["summary"]:
            text.append(f"\n{h['summary']}")
        if h["error"]:
            text.append(f"\n{h['error']}")
        self.query_one("#diff-header", Static).update(text)
        empty = "no landed change" if h["phase"] in ("committed", "no_change") else "no candidate commit yet"
        await self.query_one(DiffView).show(message.files, empty=empty)
        self.file_count = len(message.files)
        self.loaded = True
        self.refresh_bindings()

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.query_one("#diff-header", Static).update(f"cannot show the diff: {message.text}")
        self.loaded = True

    def worker_failed(self, worker) -> None:
        self.query_one("#diff-header", Static).update(
            "cannot show the diff: an unexpected error (see the error dialog)")
        self.loaded = True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("next_file", "previous_file"):
            return True if self.file_count > 1 else None
        return True

    def action_close(self) -> None:
        self.app.pop_screen()

    def action_next_file(self) -> None:
        self.query_one(DiffView).step(1)

    def action_previous_file(self) -> None:
        self.query_one(DiffView).step(-1)
