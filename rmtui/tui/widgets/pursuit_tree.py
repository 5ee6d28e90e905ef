"""The Pursuit map as a tree: the Focus order first (numbered), then every Pursuit as nested
in ``PURSUITS.md``. Built from the Pursuit editor's ``show`` state, so it shows the pending
(journal) view, not the committed file. A Pursuit in Focus appears in both groups; the cursor
keeps its group across reloads, so a reload never jumps between them.
Labels are built at render time from component classes, so a theme switch restyles them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.widgets.tree import TreeNode

from rmtui.tui.widgets.labelled_tree import LabelledTree

if TYPE_CHECKING:
    from rmtui.engine.pursuit import PursuitState

FOCUS = "focus"
MAP = "map"


@dataclass(frozen=True)
class PursuitEntry:
    """What a tree node shows: a group heading, a Pursuit (in one group) or a notice."""

    kind: str  # group | pursuit | notice
    group: str = MAP
    pursuit_id: str | None = None
    text: str = ""


def nested(pursuits: list[dict]) -> list[tuple[dict, list]]:
    """The flat ``show`` list as a forest of (pursuit, children), in file order."""
    by_id: dict[str, tuple[dict, list]] = {p["id"]: (p, []) for p in pursuits}
    forest: list[tuple[dict, list]] = []
    for p in pursuits:
        parent = by_id.get(p["parent_id"]) if p["parent_id"] else None
        (parent[1] if parent is not None else forest).append(by_id[p["id"]])
    return forest


class PursuitTree(LabelledTree[PursuitEntry]):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "pursuit-tree--group", "pursuit-tree--kind", "pursuit-tree--id", "pursuit-tree--title",
        "pursuit-tree--focus", "pursuit-tree--notice",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__("pursuits", **kwargs)
        self.show_root = False
        self.by_id: dict[str, dict] = {}
        self.focus_order: list[str] = []
        self._by_key: dict[tuple[str, str], TreeNode[PursuitEntry]] = {}

    # -- building ------------------------------------------------------------
    def set_state(self, state: PursuitState, select: str | None = None) -> None:
        """Show ``state`` (from ``pursuit.show``); the cursor goes to ``select`` if given,
        else stays on the Pursuit it was on, in the same group."""
        group, current = self.cursor_target()
        target = select or current
        self.by_id = {p["id"]: p for p in state.pursuits}
        self.focus_order = [i for i in state.focus if i in self.by_id]
        self.clear()
        self._by_key = {}
        if self.focus_order:
            node = self.root.add("focus", data=PursuitEntry("group", FOCUS), expand=True)
            for pid in self.focus_order:
                self._by_key[(FOCUS, pid)] = node.add_leaf(pid, data=PursuitEntry("pursuit", FOCUS, pid))
        top = self.root.add("map", data=PursuitEntry("group", MAP), expand=True)
        forest = nested(state.pursuits)
        self._add_forest(top, forest)
        if not forest:
            top.add_leaf("none", data=PursuitEntry("notice", text="No Pursuits yet: n creates one"))
        cursor: TreeNode[PursuitEntry] | None = None
        if target is not None:
            cursor = self._by_key.get((group or MAP, target)) or self._by_key.get((MAP, target))
        if cursor is None and state.pursuits:
            cursor = self._by_key.get((MAP, state.pursuits[0]["id"]))
        self._tree_lines  # noqa: B018 - rebuilds line numbers of the nodes just added
        if cursor is not None:
            self.move_cursor(cursor, animate=False)
        else:
            self.cursor_line = 0

    def _add_forest(self, parent: TreeNode[PursuitEntry], forest: list[tuple[dict, list]]) -> None:
        for p, children in forest:
            entry = PursuitEntry("pursuit", MAP, p["id"])
            if children:
                node = parent.add(p["id"], data=entry, expand=True)
                self._add_forest(node, children)
            else:
                node = parent.add_leaf(p["id"], data=entry)
            self._by_key[(MAP, p["id"])] = node

    # -- reading the cursor --------------------------------------------------
    def cursor_target(self) -> tuple[str | None, str | None]:
        """(group, Pursuit id) under the cursor; (None, None) off a Pursuit."""
        node = self.cursor_node
        entry = node.data if node is not None else None
        if entry is None or entry.kind != "pursuit":
            return None, None
        return entry.group, entry.pursuit_id

    @property
    def highlighted_id(self) -> str | None:
        return self.cursor_target()[1]

    # -- labels --------------------------------------------------------------
    def _label(self, entry: PursuitEntry) -> Text:
        cs = self.get_component_rich_style
        if entry.kind == "group":
            if entry.group == FOCUS:
                return Text.assemble(("Focus", cs("pursuit-tree--group")),
                                     (f"  {len(self.focus_order)} in order", cs("pursuit-tree--notice")))
            return Text.assemble(("Pursuits", cs("pursuit-tree--group")), ("  PURSUITS.md", cs("pursuit-tree--notice")))
        if entry.kind == "notice":
            return Text(entry.text, style=cs("pursuit-tree--notice"))
        p = self.by_id.get(entry.pursuit_id or "")
        if p is None:
            return Text(entry.pursuit_id or "")
        parts: list[tuple[str, Style]] = []
        if entry.group == FOCUS and p["id"] in self.focus_order:
            parts.append((f"{self.focus_order.index(p['id']) + 1}. ", cs("pursuit-tree--focus")))
        if p["kind"] != "#":
            parts.append((f"{p['kind']} ", cs("pursuit-tree--kind")))
        parts.append((p["title"] or "(untitled)", cs("pursuit-tree--title")))
        parts.append((f"  {p['id']}", cs("pursuit-tree--id")))
        if entry.group == MAP and p["id"] in self.focus_order:
            parts.append((f"  focus {self.focus_order.index(p['id']) + 1}", cs("pursuit-tree--focus")))
        return Text.assemble(*parts)
