"""A tree whose nodes carry entries that draw their own labels (the memory graph, the Pursuit map)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from rich.style import Style
from rich.text import Text, TextType
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

EntryT = TypeVar("EntryT")


class LabelledTree(Tree[EntryT], Generic[EntryT]):
    """Textual's expand icon, then ``_label(entry)`` styled as the cursor and hover ask.

    A rebuild (a filter keystroke, a new reading of the graph) adds its nodes inside
    :meth:`rebuilding`: Textual's tree invalidates its lines and asks for a layout on every
    node added, a hundred times per keystroke; there it does so once, at the end.
    """

    _batching = False
    _invalidated = False

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
        super()._invalidate()

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
