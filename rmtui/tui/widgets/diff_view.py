"""A unified diff shown file by file, highlighted from the theme's diff variables."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from rmtui.tui.models import DiffFile


class DiffFileView(Static):
    """One file of a diff; line styles come from component classes (theme variables)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "diff-file--added", "diff-file--removed", "diff-file--hunk", "diff-file--meta",
    }

    def __init__(self, diff: DiffFile, **kwargs) -> None:
        super().__init__(**kwargs)
        self.diff = diff
        self.border_title = diff.path
        self.border_subtitle = f"+{diff.added} −{diff.removed}"

    def render(self) -> Text:
        cs = self.get_component_rich_style
        styles = {"+": cs("diff-file--added"), "-": cs("diff-file--removed"), "@": cs("diff-file--hunk")}
        meta = cs("diff-file--meta")
        text = Text(no_wrap=False)
        for i, line in enumerate(self.diff.lines):
            if i:
                text.append("\n")
            if line.startswith(("diff --git", "index ", "+++", "---", "new file", "deleted file", "similarity",
                                "rename ", "old mode", "new mode")):
                text.append(line, style=meta)
            else:
                text.append(line, style=styles.get(line[:1], ""))
        return text


class DiffView(Horizontal):
    """File list on the left, the files' diffs on the right; choosing a file scrolls to it."""

    def compose(self) -> ComposeResult:
        yield OptionList(id="diff-files")
        yield VerticalScroll(id="diff-body")

    async def show(self, files: list[DiffFile], empty: str = "no change") -> None:
        names = self.query_one("#diff-files", OptionList)
        names.clear_options()
        body = self.query_one("#diff-body", VerticalScroll)
        await body.remove_children()
        if not files:
            await body.mount(Static(empty, classes="diff-empty"))
            return
        names.add_options([Option(Text.assemble(f.path, (f"  +{f.added} −{f.removed}", "dim")), id=f"file-{i}")
                           for i, f in enumerate(files)])
        await body.mount_all([DiffFileView(f, id=f"diff-file-{i}", classes="diff-file") for i, f in enumerate(files)])
        names.highlighted = 0

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.scroll_to_file(event.option_index)

    def scroll_to_file(self, index: int) -> None:
        views = list(self.query(DiffFileView))
        if 0 <= index < len(views):
            self.query_one("#diff-body", VerticalScroll).scroll_to_widget(views[index], top=True, animate=False)

    def step(self, delta: int) -> None:
        names = self.query_one("#diff-files", OptionList)
        if names.option_count == 0:
            return
        current = names.highlighted if names.highlighted is not None else 0
        names.highlighted = max(0, min(names.option_count - 1, current + delta))
