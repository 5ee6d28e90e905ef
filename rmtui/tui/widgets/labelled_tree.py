"""A tree whose nodes carry entries that draw their own labels (the memory graph, the Pursuit map)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Generic, Self, TypeVar

from rich.style import Style
from rich.text import Text, TextType
from textual.cache import LRUCache
from textual.css.styles import RenderStyles
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from rmtui.tui.widgets.steady_scroll import sizes_unchanged

EntryT = TypeVar("EntryT")
DRAWN_LINES = 1024  # lines kept drawn: a few screens' worth of rows, each in a few states


class LabelledTree(Tree[EntryT], Generic[EntryT]):
    """Textual's expand icon, then ``_label(entry)`` styled as the cursor and hover ask.

    A rebuild (a filter keystroke, a new reading of the graph) adds its nodes inside
    :meth:`rebuilding`: Textual's tree invalidates its lines and asks for a layout on every
    node added, a hundred times per keystroke; there it does so once, at the end.

    New lines never lay the screen out: the tree's size is the screen grid's, not its
    lines'. Textual asks for a layout whenever the lines change, and a layout repaints the
    scrollbars of every scrolling pane on the screen (the evidence table's too), so a
    keystroke redrew the whole screen instead of the tree. Here the tree repaints itself and
    updates its own scrollbar; only a scrollbar appearing or going lays the screen out.
    """

    _batching = False
    _invalidated = False
    #: what every line of one paint shares, worked out once per paint instead of once a line
    _pass_style: Style | None = None
    _pass_components: dict[tuple[str, ...], RenderStyles] | None = None
    _content_only = False  # inside a change of lines: a layout request only repaints
    _scrollbar_due = False

    def __init__(self, *args, **kwargs) -> None:
        self._drawn: LRUCache[Hashable, Strip] = LRUCache(DRAWN_LINES)
        super().__init__(*args, **kwargs)

    @contextmanager
    def _lines_changing(self) -> Iterator[None]:
        self._content_only = True
        try:
            yield
        finally:
            self._content_only = False
        if self._scrollbar_due:
            self._scrollbar_due = False
            self._scroll_update(self.virtual_size)  # may show or hide the scrollbar: that lays out

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Self:
        if layout and self._content_only and self.size:  # laid out before: the size stays
            layout, self._scrollbar_due = False, True
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        if sizes_unchanged(self, size, container_size):  # a layout elsewhere: the scrollbar stays
            return False
        return super()._size_updated(size, virtual_size, container_size, layout)

    def _build(self) -> None:
        with self._lines_changing():
            super()._build()

    @contextmanager
    def rebuilding(self) -> Iterator[None]:
        self._batching, self._invalidated = True, False
        try:
            yield
        finally:
            self._batching = False
            if self._invalidated:
                self._invalidate()

    def _invalidate(self) -> None:
        if self._batching:  # the lines are rebuilt when next read (a cursor move in the batch)
            self._tree_lines_cached = None
            self._invalidated = True
            return
        with self._lines_changing():
            super()._invalidate()

    def render_lines(self, crop: Region) -> list[Strip]:
        """One paint: the widget's style (a walk up every ancestor) and the guide styles Textual
        asks for again on each line are read once, not once per line (45 lines a keystroke)."""
        self._pass_style, self._pass_components = self.rich_style, {}
        try:
            return super().render_lines(crop)
        finally:
            self._pass_style, self._pass_components = None, None

    def render_line(self, y: int) -> Strip:
        style = self._pass_style if self._pass_style is not None else self.rich_style
        scroll_x, scroll_y = self.scroll_offset
        return self._render_line(y + scroll_y, scroll_x, scroll_x + self.size.width, style)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """A line drawn before is drawn again from what it shows, not from when it was drawn.

        Textual keys its line cache on the tree's change count, so every rebuild (each filter
        keystroke) draws all its lines anew, though typing on mostly keeps the rows at the top
        (the domains, the headings above the first matches). Here a line is keyed on what draws
        it: its position and width, the focus, cursor and hover, and for each node on its path
        the node's id, place and state, and the entry's own words (``_entry_words``).
        """
        lines = self._tree_lines
        words = self._entry_words(lines[y].node.data) if y < len(lines) else None
        if words is None:
            return super()._render_line(y, x1, x2, base_style)
        line = lines[y]
        key = (y, x1, x2, self.size.width, base_style, self._pseudo_class_state, self.has_focus,
               self.cursor_line == y, self.hover_line == y, self.hover_line >= 0, self.guide_depth,
               line.last, words,
               tuple((n._id, n.is_last, n._hover_, n._selected_, n.allow_expand, n._expanded) for n in line.path))
        strip = self._drawn.get(key)
        if strip is None:
            strip = self._drawn[key] = super()._render_line(y, x1, x2, base_style)
        return strip

    def _entry_words(self, entry: EntryT | None) -> Hashable | None:
        """Everything of ``entry`` its label shows (None: do not reuse its lines)."""
        return None

    def notify_style_update(self) -> None:
        self._drawn.clear()  # a theme or stylesheet change redraws every line
        super().notify_style_update()

    def get_component_styles(self, *names: str) -> RenderStyles:
        memo = self._pass_components
        if memo is None:
            return super().get_component_styles(*names)
        found = memo.get(names)
        if found is None:
            found = memo[names] = super().get_component_styles(*names)
        return found

    def process_label(self, label: TextType) -> Text:
        """A node's own label is only its key (``render_label`` draws the entry): no markup to
        parse, for every node added."""
        return label if isinstance(label, Text) else Text(label)

    def render_label(self, node: TreeNode[EntryT], base_style: Style, style: Style) -> Text:
        entry = node.data
        if entry is None:
            return super().render_label(node, base_style, style)
        label = self._label(entry)
        label.stylize(style)
        if node.allow_expand:
            prefix = (self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE, base_style)
        else:
            prefix = ("  ", base_style)
        return Text.assemble(prefix, label)

    def get_label_width(self, node: TreeNode[EntryT]) -> int:
        """Textual renders every label of the tree once more on each rebuild only to measure the
        widest line, for a sideways scroll these trees never do (their long labels are clipped,
        no horizontal scrollbar): a filter keystroke rebuilt and measured the whole tree."""
        return 0

    def _label(self, entry: EntryT) -> Text:
        raise NotImplementedError
