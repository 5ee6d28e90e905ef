"""The memory graph as a tree: Memory and Pursuit roots, headings, nodes, backing files.

Tree nodes are created lazily, when their parent is first expanded, so a 10,000-node root
costs only what is on screen. The same laziness serves jumps: revealing an item expands
just the headings above it. The filter searches every item (id and title) and shows the
matches with their headings; it never walks the tree widget, only the parsed graph.
Labels are built at render time from component classes, so a theme switch restyles them.
``enter`` on an item with edges opens its edge list (or follows its only edge); on any
other node it opens or closes the node, as in any tree.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from rmtui.engine.memory.graph import MEMORY_ROOT_FILE, PURSUIT_ROOT_FILE, Graph, Item
from rmtui.tui.widgets.labelled_tree import LabelledTree

DOMAINS = (("memory", "Memory", MEMORY_ROOT_FILE), ("pursuit", "Pursuit", PURSUIT_ROOT_FILE))
FILTER_LIMIT = 100
LABEL_WIDTH = 90


def item_key(item: Item) -> str:
    return item.id if item.id is not None else f"{item.file}:{item.line}"


@dataclass(eq=False)
class Entry:
    """What a tree node shows: a domain root, an item, a backing file or a notice."""

    kind: str  # domain | item | backing | notice
    item: Item | None = None
    domain: str | None = None
    file: str | None = None
    text: str = ""
    loaded: bool = False

    @property
    def key(self) -> str:
        if self.kind == "item" and self.item is not None:
            return item_key(self.item)
        if self.kind == "domain":
            return f"domain:{self.domain}"
        if self.kind == "backing":
            return f"file:{self.file}"
        return f"notice:{self.text}"


def _lifted(graph: Graph, file: str) -> list[Item]:
    """Top-level items of a root file; a bare title heading (``# Memory``) is skipped."""
    gf = graph.files.get(file)
    if gf is None:
        return []
    out: list[Item] = []
    for item in gf.items:
        if (item.kind == "heading" and item.id is None and item.level == 1
                and item.title.strip().lower() in ("memory", "pursuits", "pursuit")):
            out.extend(item.children)
        else:
            out.append(item)
    return out


def children_of(graph: Graph, entry: Entry) -> list[Entry]:
    if entry.kind == "domain":
        file = MEMORY_ROOT_FILE if entry.domain == "memory" else PURSUIT_ROOT_FILE
        return [Entry("item", item=i) for i in _lifted(graph, file)]
    if entry.kind == "item" and entry.item is not None:
        item = entry.item
        out: list[Entry] = []
        if item.backing_file and item.heading_kind != "F#":
            out.append(Entry("backing", file=item.backing_file, item=item))
        out.extend(Entry("item", item=c) for c in item.children)
        return out
    return []


def edge_targets(entry: Entry | None, graph: Graph | None, incoming: dict[str, list]) -> list[str]:
    """Ids an item's edges lead to: outgoing targets that exist, then incoming sources."""
    if entry is None or entry.kind != "item" or entry.item is None or graph is None:
        return []
    item = entry.item
    out = [e.target for e in item.edges if e.target in graph.items]
    if item.id:
        out += [source.id for source, _edge in incoming.get(item.id, []) if source.id]
    return out


class MemoryTree(LabelledTree[Entry]):
    # The subclass's enter bindings replace Tree's: edges first, else open or close the node.
    BINDINGS: ClassVar = [
        Binding("enter", "edges", "Edges", id="tree.edges"),
        Binding("enter", "follow_edge", "Follow edge", id="tree.follow"),
        Binding("enter", "select_cursor", "Open/close", show=False, id="tree.toggle"),
    ]

    class EdgesRequested(Message):
        """The person asked for the edges of ``key`` (``follow``: it has one, go there)."""

        def __init__(self, key: str, targets: list[str], *, follow: bool) -> None:
            super().__init__()
            self.key = key
            self.targets = targets
            self.follow = follow

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "memory-tree--domain", "memory-tree--kind", "memory-tree--id", "memory-tree--title",
        "memory-tree--uncertain", "memory-tree--file", "memory-tree--notice",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__("graph", **kwargs)
        self.show_root = False
        self.graph: Graph | None = None
        self.incoming: dict[str, list] = {}  # target id -> [(item, edge)]
        self.filter_text = ""
        self.match_count = 0
        self._index: list[tuple[Item, str]] = []
        self._by_key: dict[str, TreeNode[Entry]] = {}
        self._saved: tuple[set[str], str | None] | None = None  # full-tree state while filtering
        #: the matches of each prefix of the filter text (typing on narrows them, deleting goes back)
        self._prefix_matches: dict[str, list[tuple[Item, str]]] = {}

    # -- building ------------------------------------------------------------
    def _add(self, parent: TreeNode[Entry], entry: Entry, *, expand: bool = False) -> TreeNode[Entry]:
        """Add a node; ``expand`` opens it at once (without an expand message per node)."""
        graph = self.graph
        assert graph is not None
        expandable = entry.kind == "domain" or (entry.kind == "item" and entry.item is not None and (
            bool(entry.item.children) or bool(entry.item.backing_file and entry.item.heading_kind != "F#")))
        if expandable:
            node = parent.add(entry.key, data=entry, allow_expand=True, expand=expand)
        else:
            node = parent.add_leaf(entry.key, data=entry)
        self._by_key.setdefault(entry.key, node)
        return node

    def populate(self, node: TreeNode[Entry]) -> None:
        """Create a node's children the first time they are needed."""
        entry = node.data
        if entry is None or entry.loaded or self.graph is None:
            return
        entry.loaded = True
        node.remove_children()
        for child in children_of(self.graph, entry):
            self._add(node, child)

    def _on_tree_node_expanded(self, event: Tree.NodeExpanded[Entry]) -> None:
        self.populate(event.node)

    def set_graph(self, graph: Graph, index: list[tuple[Item, str]] | None = None,
                  incoming: dict[str, list] | None = None) -> None:
        """Show a new reading of the graph, keeping what was expanded and the cursor.

        ``index`` is the filter's haystack ([(item, "id title" lower-cased)]) and ``incoming``
        the edges by target, both built off the UI thread by the caller when it can be.
        """
        expanded, cursor = self._state() if self._saved is None else self._saved
        self.graph = graph
        self.incoming = incoming if incoming is not None else {}
        self._index = index if index is not None else [(i, f"{i.id or ''} {i.title}".lower()) for i in graph.ordered]
        self._prefix_matches = {}  # a new reading: its own matches
        if self.filter_text:
            self._saved = (expanded, cursor)
            self._build_filtered(self.filter_text)
        else:
            self._build_full(expanded, cursor)

    def _state(self) -> tuple[set[str], str | None]:
        expanded = {n.data.key for n in self._by_key.values() if n.data is not None and n.is_expanded}
        cur = self.cursor_node
        return expanded, (cur.data.key if cur is not None and cur.data is not None else None)

    def _build_full(self, expanded: set[str], cursor: str | None) -> None:
        with self.rebuilding():
            self._build_full_nodes(expanded, cursor)

    def _build_full_nodes(self, expanded: set[str], cursor: str | None) -> None:
        graph = self.graph
        assert graph is not None
        self.clear()
        self._by_key = {}
        first = not expanded and cursor is None
        for domain, _title, _file in DOMAINS:
            entry = Entry("domain", domain=domain)
            node = self._add(self.root, entry, expand=first or entry.key in expanded)
            if node.is_expanded:
                self.populate(node)
        # re-open what was open, outermost first (children exist once the parent is populated)
        reopen = [graph.items[k] for k in expanded if k in graph.items]
        if any(":" in k and not k.startswith("domain:") and k not in graph.items for k in expanded):
            reopen += [i for i in graph.ordered if i.id is None and item_key(i) in expanded]
        for item in sorted(reopen, key=lambda i: len(i.ancestors())):
            opened = self.reveal_item(item, select=False)
            if opened is not None:
                self.populate(opened)
                opened.expand()
        if cursor:
            target = self._by_key.get(cursor)
            if target is None and cursor in graph.items:
                target = self.reveal_item(graph.items[cursor], select=False)
            if target is not None:
                self.move_to(target)
                return
        self.cursor_line = 0

    def move_to(self, node: TreeNode[Entry]) -> None:
        """Put the cursor on a node that may have been added a moment ago."""
        self._tree_lines  # noqa: B018 - rebuilds line numbers of nodes added since the last paint
        self.move_cursor(node, animate=False)

    # -- revealing -----------------------------------------------------------
    def node_for(self, key: str) -> TreeNode[Entry] | None:
        return self._by_key.get(key)

    def reveal_item(self, item: Item, *, select: bool = True) -> TreeNode[Entry] | None:
        """Expand the headings above ``item`` and return its node (moving the cursor)."""
        domain_node = self._by_key.get(f"domain:{item.domain}")
        if domain_node is None:
            return None
        chain = [a for a in item.heading_path()] + [item]
        node = domain_node
        for step in chain:
            key = item_key(step)
            found = self._by_key.get(key)
            if found is None:
                self.populate(node)
                if not node.is_expanded:
                    node.expand()
                found = self._by_key.get(key)
            if found is None:
                continue  # a lifted title heading has no node of its own
            if step is not item:
                self.populate(found)
                if not found.is_expanded:
                    found.expand()
            node = found
        target = self._by_key.get(item_key(item))
        if target is not None and select:
            self.move_to(target)
        return target

    # -- filtering -----------------------------------------------------------
    def apply_filter(self, text: str) -> int:
        """Show only items whose id or title contains ``text``; returns the match count."""
        text = text.strip()
        if text == self.filter_text:
            return self.match_count
        if self.graph is None:
            self.filter_text = text
            return 0
        if text and not self.filter_text:
            self._saved = self._state()
        self.filter_text = text
        if not text:
            expanded, cursor = self._saved or (set(), None)
            self._saved = None
            self._build_full(expanded, cursor)
            self.match_count = 0
            return 0
        return self._build_filtered(text)

    def _build_filtered(self, text: str) -> int:
        with self.rebuilding():
            return self._build_filtered_nodes(text)

    def _matching(self, needle: str) -> list[tuple[Item, str]]:
        """The index entries holding ``needle``. Typing on only narrows, so the matches of the
        longest remembered prefix are searched, not the whole index; deleting a key finds its
        shorter text's matches remembered. The entries are the index's own (no copy per match:
        a wide filter on a 10,000-node root allocated 10,000 tuples a key)."""
        memo = self._prefix_matches
        for known in [k for k in memo if not needle.startswith(k)]:
            del memo[known]  # only the prefixes of the text being typed are kept
        found = memo.get(needle)
        if found is None:
            base = max((k for k in memo), key=len, default=None)
            haystack = memo[base] if base is not None else self._index
            found = memo[needle] = [pair for pair in haystack if needle in pair[1]]
        return found

    def _build_filtered_nodes(self, text: str) -> int:
        graph = self.graph
        assert graph is not None
        hits = self._matching(text.lower())
        self.match_count = len(hits)
        matches = [item for item, _hay in hits[:FILTER_LIMIT]]
        self.clear()
        self._by_key = {}
        for domain, _title, _file in DOMAINS:
            self._add(self.root, Entry("domain", domain=domain, loaded=True), expand=True)
        shown = {id(i) for file in (MEMORY_ROOT_FILE, PURSUIT_ROOT_FILE) for i in _lifted(graph, file)}
        for item in matches:
            parent = self._by_key[f"domain:{item.domain}"]
            for step in item.heading_path() + [item]:
                key = item_key(step)
                if step.parent is None and id(step) not in shown:
                    continue  # the skipped title heading
                found = self._by_key.get(key)
                if found is None:
                    found = self._add(parent, Entry("item", item=step, loaded=step is not item),
                                      expand=step is not item)
                elif step is not item and not found.is_expanded and found.data is not None:
                    found.data.loaded = True  # an earlier match is also the heading of this one
                    found.remove_children()
                    found.expand()
                parent = found
        if self.match_count > FILTER_LIMIT:
            more = f"… {self.match_count - FILTER_LIMIT:,} more matches; type more to narrow"
            self.root.add_leaf("more", data=Entry("notice", text=more))
        # the cursor always lands on a node of this build; left alone it would keep naming
        # a node of the cleared tree until the next paint
        notice = None
        if not matches:
            notice = self.root.add_leaf("none", data=Entry("notice", text=f"nothing matches {text!r}"))
        first = next((self._by_key[k] for k in map(item_key, matches) if k in self._by_key), notice)
        self.move_to(first if first is not None else self.root.children[0])
        return self.match_count

    # -- edges ---------------------------------------------------------------
    def cursor_edges(self) -> list[str]:
        node = self.cursor_node
        return edge_targets(node.data if node is not None else None, self.graph, self.incoming)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # False (not None) hides the binding and lets enter fall through to the next one
        if action == "edges":
            return len(self.cursor_edges()) > 1
        if action == "follow_edge":
            return len(self.cursor_edges()) == 1
        return True

    def edge_binding_state(self) -> int:
        """0, 1 or 2 (several): which enter binding applies under the cursor now."""
        return min(len(self.cursor_edges()), 2)

    def action_edges(self) -> None:
        self._request_edges(follow=False)

    def action_follow_edge(self) -> None:
        self._request_edges(follow=True)

    def _request_edges(self, *, follow: bool) -> None:
        node = self.cursor_node
        targets = self.cursor_edges()
        if node is not None and node.data is not None and targets:
            self.post_message(self.EdgesRequested(node.data.key, targets, follow=follow))

    # -- labels --------------------------------------------------------------
    def _entry_words(self, entry: Entry | None) -> Hashable | None:
        if entry is None:
            return None
        item = entry.item
        if item is None:
            return (entry.kind, entry.domain, entry.file, entry.text)
        return (entry.kind, entry.domain, entry.file, entry.text, item.kind, item.id, item.title, item.heading_kind)

    def _label_parts(self, entry: Entry | None) -> list[tuple[str, Style]] | None:
        if entry is None:
            return None
        cs = self.get_component_rich_style
        if entry.kind == "domain":
            title = "Memory" if entry.domain == "memory" else "Pursuit"
            file = MEMORY_ROOT_FILE if entry.domain == "memory" else PURSUIT_ROOT_FILE
            return [(title, cs("memory-tree--domain")), ("  " + file, cs("memory-tree--file"))]
        if entry.kind == "backing":
            return [("file ", cs("memory-tree--kind")), (entry.file or "", cs("memory-tree--file"))]
        if entry.kind == "notice":
            return [(entry.text, cs("memory-tree--notice"))]
        item = entry.item
        assert item is not None
        if item.kind == "heading":
            parts: list[tuple[str, Style]] = []
            if item.id is not None:
                parts.append((f"{item.heading_kind or '#'} ", cs("memory-tree--kind")))
            parts.append((item.title or "(untitled)", cs("memory-tree--title")))
            if item.id is not None:
                parts.append((f"  {item.id}", cs("memory-tree--id")))
            return parts
        title = item.title
        if len(title) > LABEL_WIDTH:
            title = title[: LABEL_WIDTH - 1] + "…"
        style = cs("memory-tree--uncertain") if item.uncertain else cs("memory-tree--title")
        return [(item.id or "", cs("memory-tree--id")), ("  " + title, style)]
