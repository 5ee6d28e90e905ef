"""The preview of the item under the tree cursor: text, edges to follow, provenance."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from rmtui.engine.memory.graph import Graph, Item
from rmtui.tui.messages import FollowItem
from rmtui.tui.models import LastCommit
from rmtui.tui.widgets.memory_tree import Entry, item_key
from rmtui.tui.wording import count

PREVIEW_LINES = 400


class EdgeList(OptionList):
    """Outgoing and incoming edges; choosing one follows it, escape goes back to the tree."""

    BINDINGS: ClassVar = [
        Binding("enter", "select", "Follow edge", id="preview.follow"),
        Binding("escape", "leave", "Back to tree", id="preview.leave"),
    ]

    class Left(Message):
        """The person left the edge list without following an edge."""

    def action_leave(self) -> None:
        self.post_message(self.Left())

    def open(self) -> None:
        """Focus the list on its first edge that can be followed."""
        first = next((i for i, o in enumerate(self._options) if not o.disabled), None)
        self.focus()
        if first is not None:
            self.highlighted = first

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        target = (event.option.id or "").split(":", 2)[-1]  # "out|in:type:target"
        if target:
            self.post_message(FollowItem(target))


class ItemPreview(Vertical):
    """Meta line, the item's text, and its edges as links."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.entry: Entry | None = None
        self.commit_text = ""
        self._meta_rows = -1  # rows of the item block last shown in #preview-meta (-1: something else)

    def compose(self) -> ComposeResult:
        yield Static(id="preview-meta")
        with VerticalScroll(id="preview-scroll"):
            yield Static(id="preview-text")
        yield EdgeList(id="preview-edges")

    @property
    def current_key(self) -> str | None:
        return self.entry.key if self.entry is not None else None

    def show(self, entry: Entry | None, state) -> None:
        """Show ``entry`` of the graph reading ``state`` (a GraphState, or None while loading)."""
        graph: Graph | None = state.graph if state is not None else None
        incoming: dict[str, list] = state.incoming if state is not None else {}
        self.entry = entry
        self.commit_text = "…" if entry is not None and entry.kind == "item" else ""
        meta = self.query_one("#preview-meta", Static)
        text = self.query_one("#preview-text", Static)
        edges = self.query_one(EdgeList)
        edges.clear_options()
        if entry is None or entry.kind != "item" or entry.item is None or graph is None:
            self._meta_rows = -1  # the block below shows something else: the next item lays out
            meta.set_class(False, "-rows")  # a summary wraps; an item's rows do not
        if entry is None or graph is None:
            meta.update("")
            text.update("Nothing selected.")
            edges.display = False
            return
        if entry.kind == "domain":
            self._show_domain(entry, graph, state.domains.get(entry.domain or "", {}))
            edges.display = False
            return
        if entry.kind == "backing":
            gf = graph.files.get(entry.file or "")
            meta.update(Text.assemble(("backing file ", "bold"), entry.file or ""))
            body = "\n".join(gf.lines[:PREVIEW_LINES]) if gf else f"{entry.file} is missing"
            text.update(Text(body))
            edges.display = False
            return
        if entry.kind == "notice" or entry.item is None:
            meta.update("")
            text.update(entry.text)
            edges.display = False
            return
        item = entry.item
        self._render_meta(item)
        lines = item.text.split("\n")
        more = f"\n… {len(lines) - PREVIEW_LINES} more lines" if len(lines) > PREVIEW_LINES else ""
        body = "\n".join(lines[:PREVIEW_LINES]) + more
        text.update(Text(body))
        options: list[Option] = []
        for edge in item.edges:
            target = graph.items.get(edge.target)
            title = target.title if target is not None else "(missing)"
            options.append(Option(Text.assemble(("→ ", "bold"), (f"{edge.type:<5}", "italic"), (edge.target, "bold"),
                                                f"  {_short(title)}"),
                                  id=f"out:{edge.type}:{edge.target}", disabled=target is None))
        if item.id:
            for source, edge in incoming.get(item.id, []):
                options.append(Option(Text.assemble(("← ", "bold"), (f"{edge.type:<5}", "italic"),
                                                    (source.id or "", "bold"), f"  {_short(source.title)}"),
                                      id=f"in:{edge.type}:{source.id}"))
        if options:
            edges.add_options(options)
        edges.display = bool(options)

    def set_commit(self, key: str, commit: LastCommit | None) -> None:
        if self.entry is None or self.entry.key != key or self.entry.item is None:
            return
        self.commit_text = f"{commit.sha[:10]} {commit.date} {commit.subject}" if commit else "not committed"
        self._render_meta(self.entry.item)

    def _render_meta(self, item: Item) -> None:
        kind = (item.heading_kind or "#") if item.kind == "heading" else "node"
        rows = [
            ("id", item.id or "(no anchor)"),
            ("kind", f"{kind}{' · uncertain' if item.uncertain else ''} in {item.domain}"),
            ("file", f"{item.file}:{item.line}" + (f"-{item.end_line}" if item.end_line > item.line else "")),
        ]
        if item.backing_file:
            rows.append(("backing", item.backing_file))
        rows.append(("hash", item.hash[:16]))
        rows.append(("changed", self.commit_text or "…"))
        # one line per row, never wrapped (main.tcss, ``-rows``; a Static wraps by its CSS, not by
        # the Text's own flags): the block's height is its row count, so a new commit line (or
        # another item with as many rows) repaints it without laying the screen out
        text = Text()
        for i, (label, value) in enumerate(rows):
            if i:
                text.append("\n")
            text.append(f"{label:>8} ", style="bold")
            text.append(value)
        meta = self.query_one("#preview-meta", Static)
        meta.set_class(True, "-rows")
        meta.update(text, layout=len(rows) != self._meta_rows)
        self._meta_rows = len(rows)

    def _show_domain(self, entry: Entry, graph: Graph, summary: dict) -> None:
        files = summary.get("files", [])
        meta = Text.assemble(("Memory" if entry.domain == "memory" else "Pursuit", "bold"),
                             f"  {summary.get('headings', 0)} headings · {summary.get('nodes', 0)} nodes · "
                             f"{summary.get('uncertain', 0)} uncertain · {count(len(files), 'file')}")
        self.query_one("#preview-meta", Static).update(meta)
        body = "\n".join(files[:PREVIEW_LINES]) + (f"\n… {count(len(files) - PREVIEW_LINES, 'more file')}"
                                                  if len(files) > PREVIEW_LINES else "")
        if entry.domain == "pursuit" and graph.focus:
            body = "Focus: " + ", ".join(graph.focus) + "\n\n" + body
        self.query_one("#preview-text", Static).update(Text(body))

    def key_of(self, item: Item) -> str:
        return item_key(item)


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
