"""The main screen: graph tree and preview, evidence, operations and receipts, all live."""

from __future__ import annotations

from pathlib import Path

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Input, Static, Tree
from textual.worker import get_current_worker

from rmtui.engine import watch
from rmtui.tui import readers
from rmtui.tui.messages import (
    EngineDone,
    EngineFailed,
    FollowItem,
    GraphLoaded,
    ItemHistoryLoaded,
    OperationsLoaded,
    QueueLoaded,
)
from rmtui.tui.screens.base import LiveScreen, error_text
from rmtui.tui.screens.dialogs import EvidenceScreen, PromptScreen
from rmtui.tui.widgets.memory_tree import Entry, MemoryTree, item_key
from rmtui.tui.widgets.preview import ItemPreview
from rmtui.tui.widgets.tables import EvidenceTable, OperationsTable, ReceiptsTable


PREVIEW_DELAY = 0.05  # seconds the tree cursor rests before the preview follows it


class MainScreen(LiveScreen):
    CSS_PATH = Path(__file__).parent / "main.tcss"
    WATCH_KINDS = frozenset({watch.GRAPH, watch.HEAD, watch.STATE, watch.QUEUE})
    BINDINGS: ClassVar = [
        Binding("slash", "filter", "Filter", id="main.filter"),
        Binding("g", "goto", "Go to id", id="main.goto"),
        Binding("left_square_bracket,backspace", "back", "Back", id="main.back"),
        Binding("escape", "clear_filter", "Clear filter", id="main.clear_filter", show=False),
        Binding("ctrl+r", "reload", "Reload", id="main.reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="main")
        self.state = None  # GraphState
        self.history: list[str] = []
        self.evidence: list = []
        self.loaded: set[str] = set()  # which of graph/queue/operations arrived at least once
        self._signatures: dict[str, object] = {}
        self._pending_entry: Entry | None = None
        self._preview_timer = None

    def compose(self) -> ComposeResult:
        clock = self.app.clock
        yield Header()
        yield Static("loading…", id="status")
        with Horizontal(id="main-body"):
            with Vertical(id="left-pane"):
                yield Input(placeholder="filter by id or title", id="filter", classes="-hidden")
                yield MemoryTree(id="graph")
            with Vertical(id="right-pane"):
                yield ItemPreview(id="preview")
                yield EvidenceTable(clock=clock, id="evidence")
                with Horizontal(id="activity"):
                    yield OperationsTable(clock=clock, id="operations")
                    yield ReceiptsTable(id="receipts")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#graph").border_title = "Memory graph"
        self.query_one("#preview").border_title = "Preview"
        self.query_one("#evidence").border_title = "Evidence"
        self.query_one("#operations").border_title = "Operations & tasks"
        self.query_one("#receipts").border_title = "Receipts"
        self.query_one("#graph", MemoryTree).focus()
        self.set_interval(30, self._refresh_ages)

    # -- loading -------------------------------------------------------------
    def reload(self, kinds: set[str]) -> None:
        if kinds & {watch.GRAPH, watch.HEAD}:
            self.load_graph()
        if kinds & {watch.STATE, watch.QUEUE, watch.HEAD}:
            self.load_queue()
            self.load_operations()

    @work(thread=True, exclusive=True, group="main-graph")
    def load_graph(self) -> None:
        state = readers.read_graph(self.app.root)
        signature = (state.graph.fingerprint(), state.head, tuple(map(str, state.issues)))
        if not get_current_worker().is_cancelled:
            self.post_message(GraphLoaded(state, signature))

    @work(thread=True, exclusive=True, group="main-queue")
    def load_queue(self) -> None:
        evidence, counts = readers.read_queue(self.app.root)
        signature = tuple((e.uid, e.state, e.reason) for e in evidence)
        if not get_current_worker().is_cancelled:
            self.post_message(QueueLoaded(evidence, counts, signature))

    @work(thread=True, exclusive=True, group="main-ops")
    def load_operations(self) -> None:
        ops, receipts = readers.read_operations(self.app.root)
        signature = (tuple((o.id, o.phase, o.error, repr(o.lease)) for o in ops),
                     tuple((r.operation_id, r.phase) for r in receipts))
        if not get_current_worker().is_cancelled:
            self.post_message(OperationsLoaded(ops, receipts, signature))

    @work(thread=True, exclusive=True, group="main-history")
    def load_history(self, key: str, file: str, start: int, end: int, backing: str | None) -> None:
        try:
            commit = readers.last_commit(self.app.root, file, start, end, backing)
        except Exception:
            commit = None
        if not get_current_worker().is_cancelled:
            self.post_message(ItemHistoryLoaded(key, commit))

    def _unchanged(self, what: str, signature: object) -> bool:
        """True when a reload read exactly what is shown (a burst touched something else)."""
        self.loaded.add(what)
        if signature is not None and self._signatures.get(what) == signature:
            return True
        self._signatures[what] = signature
        return False

    def on_graph_loaded(self, message: GraphLoaded) -> None:
        if self._unchanged("graph", message.signature):
            return
        self.state = message.state
        tree = self.query_one(MemoryTree)
        tree.set_graph(message.state.graph, message.state.index)
        self._update_status()
        self._preview_cursor(force=True)

    def on_queue_loaded(self, message: QueueLoaded) -> None:
        if self._unchanged("queue", message.signature):
            return
        self.evidence = message.evidence
        self.counts = message.counts
        table = self.query_one(EvidenceTable)
        table.set_evidence(message.evidence)
        inbox = message.counts.get("inbox", 0)
        table.border_title = f"Evidence · {inbox} waiting for approval · {message.counts.get('queued', 0)} queued"
        self._update_status()

    def on_operations_loaded(self, message: OperationsLoaded) -> None:
        if self._unchanged("operations", message.signature):
            return
        ops = self.query_one(OperationsTable)
        ops.set_operations(message.operations)
        ops.border_subtitle = "" if message.operations else "none active"
        receipts = self.query_one(ReceiptsTable)
        receipts.set_receipts(message.receipts)
        receipts.border_subtitle = f"{len(message.receipts)} latest" if message.receipts else "none yet"

    def on_item_history_loaded(self, message: ItemHistoryLoaded) -> None:
        self.query_one(ItemPreview).set_commit(message.key, message.commit)

    def _refresh_ages(self) -> None:
        if self.evidence:
            self.query_one(EvidenceTable).set_evidence(self.evidence)

    def _update_status(self) -> None:
        parts = []
        st = self.state
        if st is not None:
            counts = st.counts
            parts.append(f"head {st.head[:10] if st.head else 'none'}")
            parts.append(f"{counts['headings']} headings · {counts['nodes']} nodes")
            parts.append("valid" if not st.issues else f"{len(st.issues)} validation errors (first: {st.issues[0]})")
        counts = getattr(self, "counts", None)
        if counts:
            waiting = ", ".join(f"{k} {v}" for k, v in counts.items() if v and k != "consumed")
            parts.append(f"evidence: {waiting or 'none waiting'}")
        tree = self.query_one(MemoryTree)
        if tree.filter_text:
            parts.append(f"filter {tree.filter_text!r}: {tree.match_count} matches")
        status = self.query_one("#status", Static)
        status.update(" · ".join(parts), layout=False)  # one line, fixed height
        status.set_class(bool(st and st.issues), "-invalid")
        if st is not None:
            self.sub_title = st.root_name

    # -- preview and navigation ---------------------------------------------
    @on(Tree.NodeHighlighted, "#graph")
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        # The preview follows the cursor after a short pause, so holding a key or typing a
        # filter moves the tree at full speed without re-rendering the preview each step.
        self._pending_entry = event.node.data
        if self._preview_timer is None:
            self._preview_timer = self.set_timer(PREVIEW_DELAY, self._flush_preview)
        else:
            self._preview_timer.reset()

    def _flush_preview(self) -> None:
        self._preview_timer = None
        entry = self._pending_entry
        if self.query_one(ItemPreview).current_key != (entry.key if entry is not None else None):
            self._show_entry(entry)

    def _preview_cursor(self, force: bool = False) -> None:
        node = self.query_one(MemoryTree).cursor_node
        entry = node.data if node is not None else None
        preview = self.query_one(ItemPreview)
        if force or entry is None or preview.current_key != entry.key:
            self._show_entry(entry)

    def _show_entry(self, entry: Entry | None) -> None:
        preview = self.query_one(ItemPreview)
        preview.show(entry, self.state)
        if entry is not None and entry.kind == "item" and entry.item is not None:
            item = entry.item
            self.load_history(item_key(item), item.file, item.line, item.end_line, item.backing_file)

    def on_follow_item(self, message: FollowItem) -> None:
        message.stop()
        self.go_to(message.item_id, push=message.push)

    def go_to(self, item_id: str, *, push: bool = True) -> bool:
        if self.state is None:
            return False
        item = self.state.graph.items.get(item_id)
        if item is None:
            self.notify(f"no item with id {item_id!r}", severity="warning")
            return False
        tree = self.query_one(MemoryTree)
        current = self.query_one(ItemPreview).current_key
        if tree.filter_text and tree.node_for(item_key(item)) is None:
            self._clear_filter()
        node = tree.reveal_item(item)
        if node is None:
            return False
        if push and current and current != item_key(item) and current in self.state.graph.items:
            self.history.append(current)
        self.refresh_bindings()
        tree.focus()
        self._show_entry(node.data)
        return True

    def action_back(self) -> None:
        while self.history:
            key = self.history.pop()
            if self.state is not None and key in self.state.graph.items:
                self.go_to(key, push=False)
                return
        self.notify("no earlier item", severity="information")

    def action_goto(self) -> None:
        ids = sorted(self.state.graph.items) if self.state is not None else []

        def done(value: str | None) -> None:
            if value:
                self.go_to(value)

        self.app.push_screen(PromptScreen("Go to", "Item id:", placeholder="e.g. ing-poll", suggestions=ids,
                                          input_id="goto-input"), done)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("-hidden")
        box.focus()

    def action_clear_filter(self) -> None:
        self._clear_filter()
        self.query_one(MemoryTree).focus()

    def _clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        with box.prevent(Input.Changed):
            box.value = ""
        box.add_class("-hidden")
        self.query_one(MemoryTree).apply_filter("")
        self._update_status()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        tree = self.query_one(MemoryTree)
        tree.apply_filter(event.value)
        self._update_status()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.query_one(MemoryTree).focus()
        if not event.value.strip():
            self._clear_filter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return True if self.history else None
        if action == "clear_filter":
            return True if self.query_one(MemoryTree).filter_text or self.query_one("#filter").has_focus else None
        return True

    def action_reload(self) -> None:
        self.reload(set(self.WATCH_KINDS))

    # -- evidence ------------------------------------------------------------
    def on_evidence_table_requested(self, message: EvidenceTable.Requested) -> None:
        message.stop()
        if message.action == "approve":
            self.approve(message.uids)
        elif message.action == "reject":
            self.ask_reject(message.uids)
        elif message.action == "view":
            ev = next((e for e in self.evidence if e.uid == message.uids[0]), None)
            if ev is not None:
                self.app.push_screen(EvidenceScreen(ev), lambda answer: self._after_view(ev.uid, answer))

    def _after_view(self, uid: str, answer: str | None) -> None:
        if answer == "approve":
            self.approve([uid])
        elif answer == "reject":
            self.ask_reject([uid])

    def ask_reject(self, uids: list[str]) -> None:
        def done(reason: str | None) -> None:
            if reason:
                self.reject(uids, reason)

        what = uids[0][:8] if len(uids) == 1 else f"{len(uids)} pieces of evidence"
        self.app.push_screen(PromptScreen("Reject evidence", f"Why is {what} rejected? (kept with this reason)",
                                          placeholder="reason", empty_error="A rejection needs a reason.",
                                          input_id="reject-reason"), done)

    @work(thread=True, exclusive=True, group="main-evidence-write")
    def approve(self, uids: list[str]) -> None:
        from rmtui.engine.queue import EvidenceQueue

        try:
            q = EvidenceQueue(self.app.root)
            try:
                q.approve(uids)
            finally:
                q.close()
        except Exception as exc:
            self.post_message(EngineFailed("approve", error_text(exc)[0]))
            return
        self.post_message(EngineDone(f"approved {len(uids)} piece{'s' if len(uids) != 1 else ''} of evidence",
                                     reload=("queue",)))

    @work(thread=True, exclusive=True, group="main-evidence-write")
    def reject(self, uids: list[str], reason: str) -> None:
        from rmtui.engine.queue import EvidenceQueue

        try:
            q = EvidenceQueue(self.app.root)
            try:
                q.reject(uids, reason)
            finally:
                q.close()
        except Exception as exc:
            self.post_message(EngineFailed("reject", error_text(exc)[0]))
            return
        self.post_message(EngineDone(f"rejected {len(uids)}: {reason}", reload=("queue",)))

    def on_engine_done(self, message: EngineDone) -> None:
        self.notify(message.text)
        if "queue" in message.reload:
            self.load_queue()

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.notify(f"{message.action}: {message.text}", severity="error", timeout=8)
        self.load_queue()

    # -- diffs ---------------------------------------------------------------
    def on_operations_table_diff_requested(self, message: OperationsTable.DiffRequested) -> None:
        message.stop()
        from rmtui.tui.screens.diff import DiffScreen

        self.app.push_screen(DiffScreen(message.op_id))
