"""Scrolling widgets whose scrollbars repaint only when something about them changed.

On every layout of the screen Textual hands each scroll view the size it laid out and a
"virtual size" that, for a view drawing its own lines (a table, a tree), is never the view's
own, so each one takes its sizes for changed and repaints its scrollbars. One repainted
scrollbar at the screen's right edge widens what the screen redraws to the full width: a
filter keystroke in the tree on the left redrew the evidence, the preview and the activity
panes with it. A view calls :func:`sizes_unchanged` first in its ``_size_updated``: its
scrollbars are updated when its size, its own virtual size or its container's size differ
from the last update, as only then would they change.

(A mixin class would be neater, but Textual reads a widget's CSS and component classes
through each class's first base only.)
"""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView


def sizes_unchanged(view: ScrollView, size: Size, container_size: Size) -> bool:
    """True when a layout hands ``view`` what it had at its last update (then skip it)."""
    sizes = (size, view.virtual_size, container_size)
    if view.size == size and getattr(view, "_steady_sizes", None) == sizes:
        return True
    view._steady_sizes = sizes  # type: ignore[attr-defined]
    return False
