"""The main screen: graph tree and preview, evidence, operations and receipts, all live.

Following an edge: ``enter`` on a tree item with edges opens its edge list (or follows its
only edge), ``[`` goes back, and the preview's title is the breadcrumb of the path followed.
Decisions on evidence keep the cursor in the inbox, ask before a bulk decision over the whole
inbox, and can be undone (``u``) until a batch claims the evidence. The evidence pane's
header says why queued evidence is not moving and what moves it; ``U`` runs Update now when a
model is configured, with a progress line while it runs. On a small terminal the right
column shows the evidence and one other pane (preview, operations or receipts; ``o`` cycles).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.widgets import Footer, Header, Input, Static, Tree
from textual.worker import get_current_worker

from rmtui.engine.errors import EngineError
from rmtui.engine.host import watch
from rmtui.tui import readers
from rmtui.tui.messages import (
    EngineDone,
    EngineFailed,
    EngineProgress,
    EvidenceDecided,
    FollowItem,
    GraphLoaded,
    ItemHistoryLoaded,
    OperationsLoaded,
    QueueLoaded,
    QueueWaitingLoaded,
)
from rmtui.tui.screens.base import LiveScreen, error_text
from rmtui.tui.screens.dialogs import ConfirmScreen, EvidenceScreen, PromptScreen
from rmtui.tui.widgets.memory_tree import Entry, MemoryTree, item_key
from rmtui.tui.widgets.preview import EdgeList, ItemPreview
from rmtui.tui.widgets.progress_line import ProgressLine
from rmtui.tui.widgets.evidence_table import EvidenceTable, OperationsTable, ReceiptsTable
from rmtui.tui.wording import count

if TYPE_CHECKING:
    from rmtui.engine.host.waiting import QueueWaiting

PREVIEW_DELAY = 0.05  # seconds the tree cursor rests before the preview follows it
#: below this size the right column shows the evidence and one other pane
COMPACT_WIDTH = 110
COMPACT_HEIGHT = 34
SLOTS = ("preview", "operations", "receipts")
BREADCRUMB_STEPS = 4


class MainScreen(LiveScreen):
    CSS_PATH = Path(__file__).parent / "main.tcss"
    WATCH_KINDS = frozenset({watch.GRAPH, watch.HEAD, watch.STATE, watch.QUEUE})
    BINDINGS: ClassVar = [
        Binding("slash", "filter", "Filter", id="main.filter"),
        Binding("g", "goto", "Go to id", id="main.goto"),
        Binding("e", "focus('evidence')", "Evidence", id="main.focus_evidence"),
        Binding("t", "focus('graph')", "Tree", id="main.focus_tree"),
        Binding("left_square_bracket,backspace", "back", "Back", id="main.back"),
        Binding("u", "undo", "Undo decision", id="main.undo"),
        Binding("U", "run_update", "Update now", id="main.run_update"),
        Binding("o", "next_pane", "Next pane", id="main.next_pane"),
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
        self._edge_state = 0
        self.counts: dict[str, int] = {}
        self.waiting: QueueWaiting | None = None
        self.decisions: list[EvidenceDecided] = []  # what `u` can undo, newest last
        self.updating = False
        self.compact = False
        self.slot = "preview"  # the pane the compact layout shows beside the evidence

    def compose(self) -> ComposeResult:
        clock = self.app.clock
        yield Header()
        yield Static("loading…", id="status")
        # a grid (main.tcss): the tree down the left; preview, activity and evidence on the
        # right; compact: tree and one other pane side by side, the evidence across below
        with Container(id="main-body"):
            with Vertical(id="left-pane"):
                yield Input(placeholder="filter by id or title", id="filter", classes="-hidden")
                yield MemoryTree(id="graph")
            yield ItemPreview(id="preview")
            with Horizontal(id="activity"):
                yield OperationsTable(clock=clock, id="operations")
                yield ReceiptsTable(id="receipts")
            with Vertical(id="evidence-pane", classes="pane"):
                yield Static("", id="queue-header")
                yield EvidenceTable(clock=clock, id="evidence")
        yield ProgressLine(id="main-progress")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#graph").border_title = "Memory graph"
        self.query_one("#preview").border_title = "Preview"
        self.query_one("#evidence-pane").border_title = "Evidence"
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

    @work(thread=True, exclusive=True, group="main-graph", exit_on_error=False)
    def load_graph(self) -> None:
        state = readers.read_graph(self.app.root)
        signature = (state.graph.fingerprint(), state.head, tuple(map(str, state.issues)))
        if not get_current_worker().is_cancelled:
            self.post_message(GraphLoaded(state, signature))

    @work(thread=True, exclusive=True, group="main-queue", exit_on_error=False)
    def load_queue(self) -> None:
        evidence, counts = readers.read_queue(self.app.root)
        machines = readers.read_queue_machines(self.app.root, evidence)
        signature = (tuple((e.uid, e.state, e.reason) for e in evidence), tuple(sorted(machines.items())))
        if not get_current_worker().is_cancelled:
            self.post_message(QueueLoaded(evidence, counts, signature, machines=machines))

    @work(thread=True, exclusive=True, group="main-waiting", exit_on_error=False)
    def load_waiting(self) -> None:
        waiting = readers.read_waiting(self.app.root, now=self.app.clock())
        if not get_current_worker().is_cancelled:
            self.post_message(QueueWaitingLoaded(waiting))

    def _want_waiting(self) -> None:
        """Read why queued evidence waits, once the graph is shown (so a large root's first
        paint never shares the interpreter with it)."""
        if not (self.counts.get("queued") or self.counts.get("claimed")):
            if self.waiting is not None:
                self.waiting = None
                self._queue_header()
                self.refresh_bindings()
            return
        if "graph" in self.loaded:
            self.load_waiting()

    @work(thread=True, exclusive=True, group="main-ops", exit_on_error=False)
    def load_operations(self) -> None:
        ops, receipts = readers.read_operations(self.app.root)
        signature = (tuple((o.id, o.phase, o.error, repr(o.lease)) for o in ops),
                     tuple((r.operation_id, r.phase) for r in receipts))
        if not get_current_worker().is_cancelled:
            self.post_message(OperationsLoaded(ops, receipts, signature))

    @work(thread=True, exclusive=True, group="main-history", exit_on_error=False)
    def load_history(self, key: str, file: str, start: int, end: int, backing: str | None) -> None:
        commit = readers.last_commit(self.app.root, file, start, end, backing)
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
        first = self.state is None
        self.state = message.state
        if first:
            self._want_waiting()
        tree = self.query_one(MemoryTree)
        tree.set_graph(message.state.graph, message.state.index, message.state.incoming)
        self._update_status()
        self._preview_cursor(force=True)
        self._edge_bindings()

    def on_queue_loaded(self, message: QueueLoaded) -> None:
        self.counts = message.counts
        self._want_waiting()  # even when the queue reads the same: the config or a lease may have changed
        if self._unchanged("queue", message.signature):
            return
        self.evidence = message.evidence
        self.counts = message.counts
        table = self.query_one(EvidenceTable)
        table.set_evidence(message.evidence, machines=message.machines)
        c = message.counts
        title = f"Evidence · {c.get('inbox', 0)} inbox · {c.get('queued', 0)} queued"
        if c.get("claimed"):
            title += f" · {c['claimed']} claimed"
        self.query_one("#evidence-pane").border_title = title
        self._queue_header()
        self._update_status()

    def on_queue_waiting_loaded(self, message: QueueWaitingLoaded) -> None:
        if message.waiting == self.waiting:
            return
        self.waiting = message.waiting
        self._queue_header()
        self.refresh_bindings()

    def key_of(self, binding_id: str, default: str) -> str:
        """The key a binding has now (after the user's remaps), as the footer shows it."""
        from textual.binding import Binding as _Binding

        key = self.app.keymap_overrides.get(binding_id, default).split(",")[0]
        return self.app.get_key_display(_Binding(key, ""))

    def _queue_header(self) -> None:
        """What waits for whom: the inbox for the person, queued evidence for an Update."""
        c = self.counts
        text = Text()
        inbox = c.get("inbox", 0)
        if inbox:
            text.append(f"{inbox} wait for your approval", style="bold")
        if inbox and not self.compact:  # compact: the footer has the keys, the lines go to the queue
            text.append(f": {self.key_of('evidence.approve', 'a')} approve · {self.key_of('evidence.reject', 'x')} "
                        f"reject · {self.key_of('evidence.approve_all', 'A')} all · "
                        f"{self.key_of('evidence.view', 'v')} view")
        w = self.waiting
        if w is not None:
            if text:
                text.append("\n")
            text.append(f"{w.queued} queued" if w.queued else f"{w.claimed} claimed", style="bold")
            text.append(f": {w.reason}.")
            if w.move in ("run_now", "retry"):
                verb = "retry" if w.move == "retry" else "run Update now"
                text.append(f" Press {self.key_of('main.run_update', 'U')} to {verb}", style="bold")
                text.append(f" (or `{w.command}`).")
            elif w.move == "configure":
                text.append(f" To move it: {w.command}.")
            elif w.command:
                text.append(f" Next: `{w.command}`.")
        if not text:
            text.append("Nothing waits: evidence that agents submit shows here.")
        self.query_one("#queue-header", Static).update(text)

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
        if self.waiting is not None and self.waiting.until is not None and self.app.clock() >= self.waiting.until:
            self.load_queue()  # the wait it named is over: say what it waits for now

    def _update_status(self) -> None:
        parts = []
        st = self.state
        if st is not None:
            counts = st.counts
            parts.append(f"head {st.head[:10] if st.head else 'none'}")
            parts.append(f"{counts['headings']} headings · {counts['nodes']} nodes")
            errors = [i for i in st.issues if i.is_error]  # warnings never make the root invalid
            warned = len(st.issues) - len(errors)
            parts.append(f"{len(errors)} validation errors (first: {errors[0]})" if errors else
                         "valid" + (f" ({warned} warning{'s' if warned != 1 else ''})" if warned else ""))
        counts = self.counts
        if counts:
            waiting = ", ".join(f"{k} {v}" for k, v in counts.items() if v and k != "consumed")
            parts.append(f"evidence: {waiting or 'none waiting'}")
        tree = self.query_one(MemoryTree)
        if tree.filter_text:
            parts.append(f"filter {tree.filter_text!r}: {tree.match_count} matches")
        status = self.query_one("#status", Static)
        status.update(" · ".join(parts), layout=False)  # one line, fixed height
        status.set_class(bool(st and any(i.is_error for i in st.issues)), "-invalid")
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
            return bool(self.history)  # hidden, not dimmed, while there is nothing to go back to
        if action == "clear_filter":
            return True if self.query_one(MemoryTree).filter_text or self.query_one("#filter").has_focus else None
        if action == "undo":
            return bool(self.decisions)
        if action == "run_update":
            # shown only when it would move queued evidence (a model is configured)
            w = self.waiting
            return (not self.updating) if w is not None and w.move in ("run_now", "retry") else False
        if action == "next_pane":
            return self.compact  # only the compact layout hides panes
        if action == "focus":
            target = parameters[0] if parameters else None
            focused = self.app.focused
            return focused is None or focused.id != target
        return True

    def action_focus(self, widget_id: str) -> None:
        self.query_one(f"#{widget_id}").focus()

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()  # e and t show only away from their pane

    def action_reload(self) -> None:
        self.reload(set(self.WATCH_KINDS))

    # -- layout --------------------------------------------------------------
    def on_resize(self, event) -> None:
        compact = event.size.width < COMPACT_WIDTH or event.size.height < COMPACT_HEIGHT
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
            self._apply_slot()
            self._queue_header()
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
            self.query_one(f"#{self.slot}").border_subtitle = f"{self.key_of('main.next_pane', 'o')}: {others}"
        elif self.query_one("#preview").border_subtitle:
            self.query_one("#preview").border_subtitle = ""

    # -- evidence ------------------------------------------------------------
    def on_evidence_table_requested(self, message: EvidenceTable.Requested) -> None:
        message.stop()
        uids = message.uids
        n = len(uids)
        if message.action == "approve" and message.confirm:
            self.app.push_screen(
                ConfirmScreen("Approve all", f"Nothing is marked: approve all {count(n, 'piece')} of evidence in "
                                             f"the inbox? Approved evidence is queued for Update.",
                              yes=f"Approve {n}"),
                lambda yes: self.approve(uids) if yes else None)
        elif message.action == "approve":
            self.approve(uids)
        elif message.action == "reject" and message.confirm:
            self.app.push_screen(
                ConfirmScreen("Reject all", f"Nothing is marked: reject all {count(n, 'piece')} of evidence in the "
                                            f"inbox? They leave the inbox and are kept with the reason you give next.",
                              yes=f"Reject {n}", destructive=True),
                lambda yes: self.ask_reject(uids) if yes else None)
        elif message.action == "reject":
            self.ask_reject(uids)
        elif message.action == "view":
            ev = next((e for e in self.evidence if e.uid == uids[0]), None)
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

        what = uids[0][:8] if len(uids) == 1 else f"each of the {count(len(uids), 'piece')} of evidence"
        self.app.push_screen(PromptScreen("Reject evidence", f"Why is {what} rejected? (kept with this reason)",
                                          placeholder="reason", empty_error="A rejection needs a reason.",
                                          input_id="reject-reason"), done)

    def approve(self, uids: list[str]) -> None:
        self.query_one(EvidenceTable).expect_decision(uids)
        self._approve(uids)

    def reject(self, uids: list[str], reason: str) -> None:
        self.query_one(EvidenceTable).expect_decision(uids)
        self._reject(uids, reason)

    @work(thread=True, exclusive=True, group="main-evidence-write", exit_on_error=False)
    def _approve(self, uids: list[str]) -> None:
        from rmtui.engine.evidence.queue import EvidenceQueue

        try:
            with EvidenceQueue(self.app.root) as q:
                q.approve(uids)
        except EngineError as exc:
            self.post_message(EngineFailed("approve", error_text(exc)[0]))
            return
        self.post_message(EvidenceDecided("approve", uids, dict.fromkeys(uids, "inbox"),
                                          f"approved {count(len(uids), 'piece')} of evidence"))

    @work(thread=True, exclusive=True, group="main-evidence-write", exit_on_error=False)
    def _reject(self, uids: list[str], reason: str) -> None:
        from rmtui.engine.evidence.queue import EvidenceQueue

        try:
            with EvidenceQueue(self.app.root) as q:
                before = {u: q.get(u).state for u in uids}
                q.reject(uids, reason)
        except EngineError as exc:
            self.post_message(EngineFailed("reject", error_text(exc)[0]))
            return
        self.post_message(EvidenceDecided("reject", uids, before, f"rejected {len(uids)}: {reason}"))

    def action_undo(self) -> None:
        if not self.decisions:
            return
        decision = self.decisions.pop()
        self.refresh_bindings()
        self.query_one(EvidenceTable).put_cursor_on(decision.uids[0])
        self._undo(decision)

    @work(thread=True, exclusive=True, group="main-evidence-write", exit_on_error=False)
    def _undo(self, decision: EvidenceDecided) -> None:
        from rmtui.engine.evidence.queue import EvidenceQueue

        try:
            with EvidenceQueue(self.app.root) as q:
                if decision.action == "approve":
                    q.unapprove(decision.uids)
                else:
                    for state in ("inbox", "queued"):
                        group = [u for u in decision.uids if decision.before.get(u) == state]
                        if group:
                            q.unreject(group, to=state)
        except EngineError as exc:
            text = error_text(exc)[0]
            if "claimed" in text:
                text += ": a batch has it now, so the approval stands"
            self.post_message(EngineFailed("undo", text))
            return
        verb = "approval" if decision.action == "approve" else "rejection"
        back = "the inbox" if set(decision.before.values()) == {"inbox"} else "where it was"
        self.post_message(EvidenceDecided("undo", decision.uids, {},
                                          f"undid the {verb} of {count(len(decision.uids), 'piece')} of evidence: "
                                          f"back in {back}"))

    def on_evidence_decided(self, message: EvidenceDecided) -> None:
        if message.action != "undo":
            self.decisions.append(message)
            self.notify(f"{message.text} · {self.key_of('main.undo', 'u')} undoes")
        else:
            self.notify(message.text)
        self.refresh_bindings()
        self.load_queue()

    # -- running Update ------------------------------------------------------
    def action_run_update(self) -> None:
        w = self.waiting
        if w is None or w.move not in ("run_now", "retry") or self.updating:
            return
        self.updating = True
        self.refresh_bindings()
        self.query_one(ProgressLine).start("Update")
        self._run_update(w.move)

    @work(thread=True, exclusive=True, group="main-update", exit_on_error=False)
    def _run_update(self, move: str) -> None:
        from rmtui.engine import progress
        from rmtui.engine.roles.update_driver import UpdateDriver

        try:
            with progress.reporting(lambda p: self.post_message(EngineProgress("update", p))):
                driver = UpdateDriver(self.app.root)
                out = driver.retry() if move == "retry" else driver.run_once(force=True)
        except EngineError as exc:
            self.post_message(EngineFailed("update", error_text(exc)[0]))
            return
        if out["state"] == "failed":
            self.post_message(EngineFailed("update", f"batch {out['batch_id'][:12]} failed: {out['error']['message']}"
                                                     f" (it is now {out['batch_state']})"))
        elif out["state"] == "idle":
            self.post_message(EngineDone("Update: nothing to run", reload=("queue", "operations")))
        else:
            r = out.get("receipt") or {}
            landed = (r.get("landed_commit") or "")[:10]
            changed = ", ".join(r.get("changed_paths") or []) or "no memory change"
            self.post_message(EngineDone(f"Update {out['state']}" + (f" as {landed}" if landed else "")
                                         + f": {changed}", reload=("queue", "operations")))

    def on_engine_progress(self, message: EngineProgress) -> None:
        self.query_one(ProgressLine).show(message.progress)

    def _update_ended(self) -> None:
        if self.updating:
            self.updating = False
            self.query_one(ProgressLine).stop()
            self.refresh_bindings()

    def worker_failed(self, worker) -> None:
        if worker.group == "main-update":
            self._update_ended()

    def on_engine_done(self, message: EngineDone) -> None:
        self._update_ended()
        self.notify(message.text)
        if "queue" in message.reload:
            self.load_queue()
        if "operations" in message.reload:
            self.load_operations()

    def on_engine_failed(self, message: EngineFailed) -> None:
        if message.action == "update":
            self._update_ended()
        if message.action in ("approve", "reject"):
            self.query_one(EvidenceTable).forget_decision()
        self.notify(f"{message.action}: {message.text}", severity="error", timeout=8)
        self.load_queue()

    # -- corrections of a landing (receipts: c) ------------------------------
    def on_receipts_table_correction_requested(self, message: ReceiptsTable.CorrectionRequested) -> None:
        message.stop()
        r = message.receipt
        asked = (r.correction or {}) if r.correction and r.correction.get("status") == "needs_input" else {}
        prompt = (f"It asks: {asked['message']}\nYour answer:" if asked
                  else f"What is wrong with {r.operation_id[:28]}? (the update-correction role reworks it)")

        def done(comment: str | None) -> None:
            if comment:
                self.notify(f"correcting {r.operation_id[:28]} …")
                self._correct(r.operation_id, comment)

        self.app.push_screen(PromptScreen("Correct a landing", prompt, placeholder="comment",
                                          empty_error="A correction needs a comment.", input_id="correct-comment"),
                             done)

    @work(thread=True, exclusive=True, group="main-correct", exit_on_error=False)
    def _correct(self, op_id: str, comment: str) -> None:
        from rmtui.engine.cycles.corrections import correct_landing

        try:
            out = correct_landing(self.app.root, op_id, comment)
        except EngineError as exc:
            self.post_message(EngineFailed("correct", error_text(exc)[0]))
            return
        if out["status"] == "failed":
            self.post_message(EngineFailed("correct", out["message"]))
            return
        text = {"applied": "correction applied", "no_change": "the landing stands",
                "needs_input": "the correction asks"}[out["status"]]
        self.post_message(EngineDone(f"{text}: {out['message']}", reload=("operations",)))

    # -- diffs ---------------------------------------------------------------
    def on_operations_table_diff_requested(self, message: OperationsTable.DiffRequested) -> None:
        message.stop()
        from rmtui.tui.screens.diff import DiffScreen

        self.app.push_screen(DiffScreen(message.op_id))
