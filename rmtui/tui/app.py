"""The rmtui workbench app (minimal: the full workbench grows screen by screen)."""

from __future__ import annotations

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Header, Static, Tree

from rmtui.engine.graph import Graph, Item
from rmtui.engine.roots import MemoryRoot


class GraphLoaded(Message):
    def __init__(self, status: dict, graph: Graph) -> None:
        super().__init__()
        self.status = status
        self.graph = graph


class RmtuiApp(App):
    TITLE = "rmtui"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("r", "reload", "Reload", id="app.reload"),
    ]

    def __init__(self, root: MemoryRoot) -> None:
        super().__init__()
        self.root = root

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("loading…", id="status")
        yield Tree("Memory", id="graph")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = str(self.root.path)
        self.action_reload()

    def action_reload(self) -> None:
        self.load_graph()

    @work(thread=True, exclusive=True)
    def load_graph(self) -> None:
        from rmtui.engine.status import root_status
        from rmtui.engine.validation import validate_root

        report = validate_root(self.root.path)
        self.post_message(GraphLoaded(root_status(self.root), report.graph))

    def on_graph_loaded(self, message: GraphLoaded) -> None:
        st = message.status
        ev = ", ".join(f"{k} {v}" for k, v in st["evidence"].items() if v)
        self.query_one("#status", Static).update(
            f"head {str(st['head'])[:10]} · {st['items']['headings']} headings · {st['items']['nodes']} nodes"
            f" · {'valid' if st['valid'] else str(st['errors']) + ' errors'} · evidence: {ev or 'none'}"
        )
        tree = self.query_one("#graph", Tree)
        tree.clear()

        def add(parent, item: Item) -> None:
            label = item.title if item.kind == "heading" else f"{item.id}  {item.title}"
            if item.children:
                node = parent.add(label, data=item, expand=item.level <= 1)
                for child in item.children:
                    add(node, child)
            else:
                parent.add_leaf(label, data=item)

        for item in message.graph.roots:
            add(tree.root, item)
        tree.root.expand()


def run_app(root: MemoryRoot) -> int:
    RmtuiApp(root).run()
    return 0
