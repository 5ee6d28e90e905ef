"""A tree whose nodes carry entries that draw their own labels (the memory graph, the Pursuit map)."""

from __future__ import annotations

from typing import Generic, TypeVar

from rich.style import Style
from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

EntryT = TypeVar("EntryT")


class LabelledTree(Tree[EntryT], Generic[EntryT]):
    """Textual's expand icon, then ``_label(entry)`` styled as the cursor and hover ask."""

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

    def _label(self, entry: EntryT) -> Text:
        raise NotImplementedError
