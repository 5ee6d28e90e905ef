"""The main screen: graph tree and preview, evidence, operations and receipts, all live.

Following an edge: ``enter`` on a tree item with edges opens its edge list (or follows its
only edge), ``[`` goes back, and the preview's title is the breadcrumb of the path followed.
Decisions on evidence (approve, reject, undo, Update now, corrections of a landing) are the
evidence pane's (:mod:`rmtui.tui.widgets.evidence_pane`); the screen reads the root and hands
the queue to it. On a small terminal the right column shows the evidence and one other pane
(preview, operations or receipts; ``o`` cycles).
"""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.timer import Timer
from textual.widgets import Header, Input, Static, Tree
from textual.worker import Worker, WorkerState, get_current_worker

from rmtui.engine.host import watch
from rmtui.tui import readers
from rmtui.tui.context import workbench
from rmtui.tui.heap import HeapKeeper, collector_paused
from rmtui.tui.keys import key_of
from rmtui.tui.messages import FilterTyped, FollowItem, GraphLoaded, ItemHistoryLoaded, OperationsLoaded, QueueLoaded
from rmtui.tui.models import GraphState
from rmtui.tui.screens.base import LiveScreen
from rmtui.tui.screens.dialogs import PromptScreen
from rmtui.tui.widgets.evidence_pane import EvidencePane
from rmtui.tui.widgets.filter_input import FilterInput
from rmtui.tui.widgets.footer import KeysFooter
from rmtui.tui.widgets.memory_tree import Entry, MemoryTree, item_key
from rmtui.tui.widgets.operations_table import OperationsTable
from rmtui.tui.widgets.preview import EdgeList, ItemPreview
from rmtui.tui.widgets.progress_line import ProgressLine
from rmtui.tui.widgets.receipts_table import ReceiptsTable
from rmtui.tui.wording import fit_line

PREVIEW_DELAY = 0.05  # seconds the tree cursor rests before the preview follows it
#: ... and after a filter keystroke: a preview shown lays the screen out (tens of ms on a big
#: root), so while a person types the filter the keys go first and the preview follows the
#: first match once typing rests.
FILTER_PREVIEW_DELAY = 0.3
#: below this size the right column shows the evidence and one other pane
COMPACT_WIDTH = 110
COMPACT_HEIGHT = 34
SLOTS = ("preview", "operations", "receipts")
BREADCRUMB_STEPS = 4
AGE_TICK = 1.0  # seconds between refreshes of the age cells (only cells whose text changed are redrawn)


class MainScreen(LiveScreen):
    # (main.tcss is read with the app's CSS: see RmtuiApp.CSS_PATH)
    WATCH_KINDS = frozenset({watch.GRAPH, watch.HEAD, watch.STATE, watch.QUEUE})
    BINDINGS: ClassVar = [
        Binding("slash", "filter", "Filter", id="main.filter"),
        Binding("g", "goto", "Go to id", id="main.goto"),
        Binding("e", "focus_pane('evidence')", "Evidence", id="main.focus_evidence"),
        Binding("t", "focus_pane('graph')", "Tree", id="main.focus_tree"),
        Binding("left_square_bracket,backspace", "back", "Back", id="main.back"),
        Binding("u", "undo", "Undo decision", id="main.undo"),
        Binding("U", "run_update", "Update now", id="main.run_update"),
        Binding("o", "next_pane", "Next pane", id="main.next_pane"),
        Binding("escape", "clear_filter", "Clear filter", id="main.clear_filter", show=False),
        Binding("ctrl+r", "reload", "Reload", id="main.reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="main")
        self.state: GraphState | None = None
        self.history: list[str] = []
        self.loaded: set[str] = set()  # which of graph/queue/operations arrived at least once
        self._signatures: dict[str, object] = {}
        self._preview_timer: Timer | None = None
        self._edge_state = 0
        self.compact = False
        self.slot = "preview"  # the pane the compact layout shows beside the evidence
        self.heap = HeapKeeper(self)
        self._graph_reading: Worker | None = None
        self._graph_again = False  # a change arrived while the graph was being read

    def compose(self) -> ComposeResult:
        clock = workbench(self).clock
        yield Header()
        yield Static("loading…", id="status")
        # a grid (main.tcss): the tree down the left; preview, activity and evidence on the
        # right; compact: tree and one other pane side by side, the evidence across below
        with Container(id="main-body"):
            with Vertical(id="left-pane"):
                yield FilterInput(placeholder="filter by id or title", id="filter", classes="-hidden")
                yield MemoryTree(id="graph")
            yield ItemPreview(id="preview")
            with Horizontal(id="activity"):
                yield OperationsTable(clock=clock, id="operations")
                yield ReceiptsTable(id="receipts")
            yield EvidencePane(clock=clock, id="evidence-pane", classes="pane")
        yield ProgressLine(id="main-progress")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#graph").border_title = "Memory graph"
        self.query_one("#preview").border_title = "Preview"
        self.query_one("#operations").border_title = "Operations & tasks"
        self.query_one("#receipts").border_title = "Receipts"
        self.query_one("#graph", MemoryTree).focus()
        self.set_interval(AGE_TICK, self._refresh_ages)

    def on_unmount(self) -> None:
        self.heap.release()

    # -- loading -------------------------------------------------------------
    def reload(self, kinds: set[str]) -> None:
        if kinds & {watch.GRAPH, watch.HEAD}:
            self._want_graph()
        if kinds & {watch.STATE, watch.QUEUE, watch.HEAD}:
            self.load_queue()
            self.load_operations()

    def _want_graph(self) -> None:
        """Read the graph, or once more after the reading under way: that reading is shown
        when it ends, not dropped (at start the watch's first wake-up asks for a reading while
        the first is still under way; dropping it left the tree empty until a second full
        reading), and the next one scans only the files changed since."""
        reading = self._graph_reading
        if reading is not None and not reading.is_finished:
            self._graph_again = True
            return
        self._graph_again = False
        self._graph_reading = self.load_graph()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        super().on_worker_state_changed(event)
        # (a cancelled reading: the screen is going away, as only one reading runs at a time)
        if event.worker is self._graph_reading and event.state in (WorkerState.SUCCESS, WorkerState.ERROR) \
                and self._graph_again:
            self._want_graph()

    @work(thread=True, exclusive=True, group="main-graph", exit_on_error=False)
    def load_graph(self) -> None:
        with collector_paused():  # everything the read makes outlives it: no passes over it meanwhile
            state = readers.read_graph(workbench(self).root)
        signature = (state.graph.fingerprint(), state.head, tuple(map(str, state.issues)))
        if not get_current_worker().is_cancelled:
            self.post_message(GraphLoaded(state, signature))

    @work(thread=True, exclusive=True, group="main-queue", exit_on_error=False)
    def load_queue(self) -> None:
        evidence, counts = readers.read_queue(workbench(self).root)
        machines = readers.read_queue_machines(workbench(self).root, evidence)
        signature = (tuple((e.uid, e.state, e.reason) for e in evidence), tuple(sorted(machines.items())))
        if not get_current_worker().is_cancelled:
            self.post_message(QueueLoaded(evidence, counts, signature, machines=machines))

    def _want_waiting(self) -> None:
        self.query_one(EvidencePane).want_waiting(graph_shown="graph" in self.loaded)

    @work(thread=True, exclusive=True, group="main-ops", exit_on_error=False)
    def load_operations(self) -> None:
        ops, receipts = readers.read_operations(workbench(self).root)
        signature = (tuple((o.id, o.phase, o.error, repr(o.lease)) for o in ops),
                     tuple((r.operation_id, r.phase) for r in receipts))
        if not get_current_worker().is_cancelled:
            self.post_message(OperationsLoaded(ops, receipts, signature))

    @work(thread=True, exclusive=True, group="main-history", exit_on_error=False)
    def load_history(self, key: str, file: str, start: int, end: int, backing: str | None) -> None:
        commit = readers.last_commit(workbench(self).root, file, start, end, backing)
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
            self.heap.reading_dropped()
            return
        first = self.state is None
        self.state = message.state
        if first:
            self._want_waiting()
            self.call_after_refresh(workbench(self).screen_shown)  # once the tree is painted
        tree = self.query_one(MemoryTree)
        tree.set_graph(message.state.graph, message.state.index, message.state.incoming)
        self.heap.graph_shown()
        self._update_status()
        self._preview_cursor(force=True)
        self._edge_bindings()

    def on_queue_loaded(self, message: QueueLoaded) -> None:
        pane = self.query_one(EvidencePane)
        pane.counts = message.counts
        self._want_waiting()  # even when the queue reads the same: the config or a lease may have changed
        if self._unchanged("queue", message.signature):
            return
        pane.show_queue(message.evidence, message.counts, message.machines)
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
        self.query_one(EvidencePane).refresh_ages()

    def _update_status(self) -> None:
        # (text, priority): on a narrow terminal the counts leave the line before its notices
        parts: list[tuple[str, int]] = []
        st = self.state
        if st is not None:
            counts = st.counts
            parts.append((f"head {st.head[:10] if st.head else 'none'}", 1))
            parts.append((f"{counts['headings']} headings · {counts['nodes']} nodes", 0))
            errors = [i for i in st.issues if i.is_error]  # warnings never make the root invalid
            warned = len(st.issues) - len(errors)
            parts.append((f"{len(errors)} validation errors (first: {errors[0]})" if errors else
                          "valid" + (f" ({warned} warning{'s' if warned != 1 else ''})" if warned else ""), 4))
        counts = self.query_one(EvidencePane).counts
        if counts:
            waiting = ", ".join(f"{k} {v}" for k, v in counts.items() if v and k != "consumed")
            parts.append((f"evidence: {waiting or 'none waiting'}", 2))
        tree = self.query_one(MemoryTree)
        if tree.filter_text:
            parts.append((f"filter {tree.filter_text!r}: {tree.match_count} matches", 5))
        status = self.query_one("#status", Static)
        width = status.size.width or self.app.size.width - 2  # not laid out yet: the screen less its padding
        status.update(fit_line(parts, width), layout=False)  # one line, fixed height
        status.set_class(bool(st and any(i.is_error for i in st.issues)), "-invalid")
        if st is not None:
            self.sub_title = st.root_name

    # -- preview and navigation ---------------------------------------------
    @on(Tree.NodeHighlighted, "#graph")
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        # The preview follows the cursor after a short pause, so holding a key or typing a
        # filter moves the tree at full speed without re-rendering the preview each step.
        self._follow(FILTER_PREVIEW_DELAY if self.query_one("#filter").has_focus else PREVIEW_DELAY)

    def _follow_cursor(self) -> None:
        """After the tree was rebuilt (a filter typed or cleared): the preview follows the
        cursor even when the cursor's line number stayed (Textual then reports no move)."""
        self._follow(FILTER_PREVIEW_DELAY)

    @property
    def preview_due(self) -> bool:
        """Whether the preview still waits out its pause before it follows the cursor."""
        return self._preview_timer is not None

    def _follow(self, delay: float = PREVIEW_DELAY) -> None:
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.set_timer(delay, self._flush_preview)

    def _flush_preview(self) -> None:
        # Read the cursor now, not from the event that started the pause: a highlight event
        # handled after a rebuild names a node of the tree that was cleared.
        self._preview_timer = None
        node = self.query_one(MemoryTree).cursor_node
        entry = node.data if node is not None else None
        if self.query_one(ItemPreview).current_key != (entry.key if entry is not None else None):
            self._show_entry(entry)
        self._edge_bindings()

    def _edge_bindings(self) -> None:
        """Refresh the footer when enter changes meaning (edges, follow, open/close)."""
        tree = self.query_one(MemoryTree)
        state = tree.edge_binding_state()
        if state != self._edge_state:
            self._edge_state = state
            tree.refresh_bindings()

    def _preview_cursor(self, force: bool = False) -> None:
        node = self.query_one(MemoryTree).cursor_node
        entry = node.data if node is not None else None
        preview = self.query_one(ItemPreview)
        if force or entry is None or preview.current_key != entry.key:
            self._show_entry(entry)

    def _show_entry(self, entry: Entry | None) -> None:
        preview = self.query_one(ItemPreview)
        preview.show(entry, self.state)
        self._breadcrumb()
        if entry is not None and entry.kind == "item" and entry.item is not None:
            item = entry.item
            self.load_history(item_key(item), item.file, item.line, item.end_line, item.backing_file)

    def _breadcrumb(self) -> None:
        """The preview's title: the path followed to the item shown (``[`` walks it back)."""
        preview = self.query_one(ItemPreview)
        current = preview.current_key
        if not self.history or current is None or current.startswith(("domain:", "file:", "notice:")):
            preview.border_title = "Preview"
            return
        trail = [*self.history, current]
        shown = trail[-BREADCRUMB_STEPS:]
        preview.border_title = "Preview · " + ("… › " if len(trail) > len(shown) else "") + " › ".join(shown)

    def on_follow_item(self, message: FollowItem) -> None:
        message.stop()
        self.go_to(message.item_id, push=message.push)

    def on_memory_tree_edges_requested(self, message: MemoryTree.EdgesRequested) -> None:
        message.stop()
        if message.follow:
            self.go_to(message.targets[0])
            return
        self._show_slot("preview")
        tree = self.query_one(MemoryTree)
        if self.query_one(ItemPreview).current_key != message.key:
            self._show_entry(tree.cursor_node.data if tree.cursor_node is not None else None)
        self.query_one(EdgeList).open()

    def on_edge_list_left(self, message: EdgeList.Left) -> None:
        message.stop()
        self.query_one(MemoryTree).focus()

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
        self._show_slot("preview")
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
        ids: list[str] = sorted(self.state.graph.items) if self.state is not None else []

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
        self.call_after_refresh(self._follow_cursor)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.post_message(FilterTyped(event.value))  # a burst of keys merges into one rebuild

    def on_filter_typed(self, message: FilterTyped) -> None:
        self.heap.busy()
        box = self.query_one("#filter", Input)
        if message.text != box.value or box.has_class("-hidden"):
            return  # typed on since, or the filter was cleared: that text is not wanted any more
        self.query_one(MemoryTree).apply_filter(message.text)
        self._update_status()
        self.call_after_refresh(self._follow_cursor)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.query_one(MemoryTree).focus()
        if not event.value.strip():
            self._clear_filter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return bool(self.history)  # hidden, not dimmed, while there is nothing to go back to
        if action == "clear_filter":
            return True if self.query_one(MemoryTree).filter_text or self.query_one("#filter").has_focus else None
        if action == "undo":
            return self.query_one(EvidencePane).can_undo
        if action == "run_update":  # always offered: when it cannot run, U says why and what would make it work
            return True
        if action == "next_pane":
            return self.compact  # only the compact layout hides panes
        if action == "focus_pane":
            target = parameters[0] if parameters else None
            focused = self.app.focused
            return focused is None or focused.id != target
        return True

    def action_focus_pane(self, widget_id: str) -> None:
        self.query_one(f"#{widget_id}").focus()

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()  # e and t show only away from their pane

    def action_reload(self) -> None:
        self.reload(set(self.WATCH_KINDS))

    # -- layout --------------------------------------------------------------
    def on_resize(self, event) -> None:
        compact = event.size.width < COMPACT_WIDTH or event.size.height < COMPACT_HEIGHT
        self.call_after_refresh(self._update_status)  # the status line fits the new width
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
            self._apply_slot()
            pane = self.query_one(EvidencePane)
            pane.compact = compact
            pane.show_header()
            self.refresh_bindings()

    def action_next_pane(self) -> None:
        self._show_slot(SLOTS[(SLOTS.index(self.slot) + 1) % len(SLOTS)], focus=True)

    def _show_slot(self, slot: str, *, focus: bool = False) -> None:
        if slot == self.slot:
            return
        self.slot = slot
        self._apply_slot()
        if not self.compact:
            return
        focused = self.app.focused
        if focus or (focused is not None and not focused.display):
            target = {"preview": "#graph", "operations": "#operations", "receipts": "#receipts"}[slot]
            self.query_one(target).focus()

    def _apply_slot(self) -> None:
        """In the compact layout only the slot's pane shows beside the evidence."""
        for name in SLOTS:
            self.query_one(f"#{name}").set_class(self.compact and name != self.slot, "-slot-hidden")
        self.query_one("#activity").set_class(self.compact and self.slot == "preview", "-slot-hidden")
        if self.compact:
            names = {"preview": "Preview", "operations": "Operations", "receipts": "Receipts"}
            others = " · ".join(names[n] for n in SLOTS if n != self.slot)
            self.query_one(f"#{self.slot}").border_subtitle = f"{key_of(self.app, 'main.next_pane', 'o')}: {others}"
        elif self.query_one("#preview").border_subtitle:
            self.query_one("#preview").border_subtitle = ""

    # -- evidence (the pane owns the decisions; u and U work from every pane) ----
    def on_evidence_pane_reload(self, message: EvidencePane.Reload) -> None:
        message.stop()
        if "queue" in message.kinds:
            self.load_queue()
        if "operations" in message.kinds:
            self.load_operations()

    def action_undo(self) -> None:
        self.query_one(EvidencePane).undo()

    def action_run_update(self) -> None:
        self.query_one(EvidencePane).run_update()

    def on_receipts_table_correction_requested(self, message: ReceiptsTable.CorrectionRequested) -> None:
        message.stop()
        self.query_one(EvidencePane).correct(message.receipt)

    # -- diffs ---------------------------------------------------------------
    def on_operations_table_diff_requested(self, message: OperationsTable.DiffRequested) -> None:
        message.stop()
        from rmtui.tui.screens.diff import DiffScreen

        self.app.push_screen(DiffScreen(message.op_id))
