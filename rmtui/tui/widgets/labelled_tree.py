"""A tree whose nodes carry entries that draw their own labels (the memory graph, the Pursuit map)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Self, TypeVar

from rich.cells import cell_len
from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text, TextType
from textual._segment_tools import line_pad
from textual.cache import LRUCache
from textual.css.styles import RenderStyles
from textual.geometry import Region, Size
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from rmtui.tui.widgets.steady_scroll import sizes_unchanged

if TYPE_CHECKING:
    from textual.widgets._tree import _TreeLine

EntryT = TypeVar("EntryT")
DRAWN_LINES = 1024  # lines kept drawn: a few screens' worth of rows, each in a few states


@dataclass
class _GuideKit:
    """The component styles a tree line is drawn with, read once per paint."""

    guide: Style
    guide_hover: Style
    guide_selected: Style
    guide_hidden: bool
    hover_hidden: bool
    selected_hidden: bool
    highlight_line: Style
    label: Style
    highlight: Style
    cursor: Style
    _guides: dict[tuple[Style, bool, bool, int], tuple[str, str, str, str]] = field(default_factory=dict)

    @classmethod
    def read(cls, tree: Tree) -> _GuideKit:
        rich, styles = tree.get_component_rich_style, tree.get_component_styles
        guide = rich("tree--guides", partial=True)
        return cls(guide=guide, guide_hover=guide + rich("tree--guides-hover", partial=True),
                   guide_selected=guide + rich("tree--guides-selected", partial=True),
                   guide_hidden=styles("tree--guides").color.a == 0,
                   hover_hidden=styles("tree--guides-hover").color.a == 0,
                   selected_hidden=styles("tree--guides-selected").color.a == 0,
                   highlight_line=rich("tree--highlight-line"), label=rich("tree--label", partial=True),
                   highlight=rich("tree--highlight", partial=True), cursor=rich("tree--cursor", partial=False))

    def guides(self, style: Style, hidden: bool, tree: Tree) -> tuple[str, str, str, str]:
        """Space, vertical, terminator and cross for guides drawn in ``style`` (as Textual's)."""
        key = (style, hidden, tree.show_guides, tree.guide_depth)
        found = self._guides.get(key)
        if found is None:
            lines: tuple[str, str, str, str] = ("  ", "  ", "  ", "  ")
            if tree.show_guides and not hidden:
                lines = tree.LINES["bold" if style.bold else "double" if style.underline2 else "default"]
            depth = max(0, tree.guide_depth - 2)
            space, vertical, terminator, cross = (f"{c[0]}{c[1] * depth} " for c in lines)
            found = self._guides[key] = (space, vertical, terminator, cross)
        return found


class _GutterScrollBar(ScrollBar):
    """A vertical scrollbar that, while every line fits, draws as its tree's own background.

    With ``overflow-y: scroll`` the scrollbar always holds its column, so its coming and going
    (the first filter key overflows a tree that fitted, clearing the filter makes it fit again)
    is a repaint of one column, where Textual's ``auto`` shows and hides it with a layout of the
    whole screen, narrows the tree's text by a column, and moves the compositor's cuts on every
    row beside it (each pane's rows then divided anew). Textual draws a scrollbar with nothing to
    scroll as an empty track; this one draws the empty column of a reserved gutter instead.
    """

    def render(self) -> RenderableType:
        parent = self.parent
        if self.window_virtual_size <= self.window_size and isinstance(parent, Tree):
            background = parent.background_colors[1].rich_color  # an empty track in the tree's colour
            return self.renderer(vertical=True, thickness=self.thickness, style=Style(bgcolor=background))
        return super().render()


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
    _pass_kit: _GuideKit | None = None
    _content_only = False  # inside a change of lines: a layout request only repaints
    _scrollbar_due = False

    def __init__(self, *args, **kwargs) -> None:
        self._drawn: LRUCache[Hashable, Strip] = LRUCache(DRAWN_LINES)  # lines as placed on a row
        #: the same lines before they are placed on a row: segments, and where the label's are
        self._looks: LRUCache[Hashable, tuple[list[Segment], int, int]] = LRUCache(DRAWN_LINES)
        super().__init__(*args, **kwargs)

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """Textual's vertical scrollbar, drawn as a reserved gutter while every line fits (it
        shows so only where the stylesheet keeps it in place: ``overflow-y: scroll``)."""
        if self._vertical_scrollbar is None:
            self._vertical_scrollbar = bar = _GutterScrollBar(vertical=True, name="vertical",
                                                              thickness=self.scrollbar_size_vertical)
            bar.display = False
            self.app._start_widget(self, bar)
        return self._vertical_scrollbar

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
        self._pass_style, self._pass_components, self._pass_kit = self.rich_style, {}, None
        try:
            return super().render_lines(crop)
        finally:
            self._pass_style, self._pass_components, self._pass_kit = None, None, None

    def render_line(self, y: int) -> Strip:
        style = self._pass_style if self._pass_style is not None else self.rich_style
        scroll_x, scroll_y = self.scroll_offset
        return self._render_line(y + scroll_y, scroll_x, scroll_x + self.size.width, style)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """A line is drawn from what it shows, not from where or when it was drawn.

        Textual keys its line cache on the tree's change count and each line's place, so every
        rebuild (each filter keystroke) composed all its lines anew through a Rich ``Text``,
        though typing on mostly keeps the rows (the domains, the headings above the first
        matches) and only moves some up or down. Here a line's look is keyed on what draws it:
        the width, focus, cursor and hover, the shape of its guides and the entry's own words
        (``_entry_words``); a look met before, at any row, is reused and only given the row's
        mouse data (which line and node a click lands on). A new look is composed straight
        into segments (:meth:`_draw_line`), a few times cheaper than Textual's way.
        """
        lines = self._tree_lines
        words = self._entry_words(lines[y].node.data) if y < len(lines) else None
        if words is None:
            return super()._render_line(y, x1, x2, base_style)
        line = lines[y]
        node = line.node
        hover_line = self.hover_line
        path = line.path
        is_hover = hover_line >= 0 and any(n._hover_ for n in path)
        look = (max(self.virtual_size.width, self.size.width), base_style, self._pseudo_class_state, self.has_focus,
                self.cursor_line == y, hover_line == y, is_hover, self.guide_depth, self.show_guides,
                line.last, node.allow_expand, node._expanded, words,
                tuple((n.is_last, n._hover_, n._selected_) for n in path))
        placed = (look, y, node._id, x1, x2)
        strip = self._drawn.get(placed)
        if strip is None:
            drawn = self._looks.get(look)
            if drawn is None:
                drawn = self._looks[look] = self._draw_line(line, y, base_style, is_hover)
            segments, start, end = drawn
            # the row's mouse data, as Textual gives it: the line on every cell, the node on its label
            on_line, on_node = Style.from_meta({"line": y}), Style.from_meta({"line": y, "node": node._id})
            strip = self._drawn[placed] = Strip(
                [Segment(text, style + (on_node if start <= i < end else on_line))  # type: ignore[operator]
                 for i, (text, style, _control) in enumerate(segments)]).crop(x1, x2)
        return strip

    def _guide_kit(self) -> _GuideKit:
        """The guide and label styles of one paint (Textual reads them again for each line)."""
        kit = self._pass_kit
        if kit is None:
            kit = _GuideKit.read(self)
            if self._pass_style is not None:  # inside a paint: good until it ends
                self._pass_kit = kit
        return kit

    def _draw_line(self, line: _TreeLine[EntryT], y: int, base_style: Style,
                   is_hover: bool) -> tuple[list[Segment], int, int]:
        """One line as Textual's ``Tree._render_line`` draws it (guides, then the label, padded
        to the width) without its mouse data, in segments rather than through a Rich ``Text``:
        the same styles, combined in the same order (a test holds the two equal). Returns the
        segments and where the label's begin and end."""
        kit = self._guide_kit()
        has_focus = self.has_focus
        line_style = kit.highlight_line if is_hover else base_style
        path = line.path
        segments: list[Segment] = []
        add = segments.append
        width = 0
        hover = path[0]._hover_
        selected = path[0]._selected_ and has_focus
        guide_style, hidden = kit.guide, True
        last = path[-1]
        for node in path[1:]:
            hidden = kit.guide_hidden
            if hover:
                guide_style, hidden = kit.guide_hover, kit.hover_hidden
            if selected:
                guide_style, hidden = kit.guide_selected, kit.selected_hidden
            if node is not last:
                guide = kit.guides(guide_style, hidden, self)[0 if node.is_last else 1]
                add(Segment(guide, line_style + guide_style))
                width += cell_len(guide)
            hover = hover or node._hover_
            selected = (selected or node._selected_) and has_focus
        if len(path) > 1:
            guide = kit.guides(guide_style, hidden, self)[2 if line.last else 3]
            add(Segment(guide, line_style + guide_style))
            width += cell_len(guide)
        label_style = kit.label
        if self.hover_line == y:
            label_style += kit.highlight
        if self.cursor_line == y:
            label_style += kit.cursor
        start = len(segments)
        parts = self._label_parts(last.data)
        if parts is None:
            label = self.render_label(last, line_style, label_style)
            label.style = line_style  # what Textual's line text adds under every span of the label
            segments.extend(label.render(self.app.console))
            width += label.cell_len
        else:  # what rendering render_label's Text gives, without building one
            icon = (self.ICON_NODE_EXPANDED if last.is_expanded else self.ICON_NODE) if last.allow_expand else "  "
            add(Segment(icon, line_style + line_style))
            width += cell_len(icon)
            for text, style in parts:
                if text:
                    add(Segment(text, line_style + style + label_style))
                    width += cell_len(text)
        end = len(segments)
        pad_width = max(self.virtual_size.width, self.size.width)
        return line_pad(segments, 0, pad_width - width, line_style), start, end

    def _entry_words(self, entry: EntryT | None) -> Hashable | None:
        """Everything of ``entry`` its label shows (None: do not reuse its lines)."""
        return None

    def notify_style_update(self) -> None:
        self._drawn.clear()  # a theme or stylesheet change redraws every line
        self._looks.clear()
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

    def _label_parts(self, entry: EntryT | None) -> list[tuple[str, Style]] | None:
        """The runs of text ``entry``'s label shows and their styles (None: ask ``_label``)."""
        return None

    def _label(self, entry: EntryT) -> Text:
        parts = self._label_parts(entry)
        if parts is None:
            raise NotImplementedError
        return Text.assemble(*parts)
