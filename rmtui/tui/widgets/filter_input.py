"""The graph filter's text box, which lays out nothing but itself when a key is typed.

Textual's ``Input`` records the width of its text as its virtual size on every change of its
value, and a widget's virtual size is declared to lay out the whole screen when it changes:
each filter keystroke laid out and redrew every pane (about 30 ms on a 10,000-node root, more
than the tree's own rebuild). The box has a fixed size in its pane (``main.tcss``), so its
text width matters only to its own horizontal scrolling, which reads the virtual size when it
scrolls: a repaint of the box is all a new width needs.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Input


class FilterInput(Input):
    """An ``Input`` whose text width repaints the box instead of laying out the screen."""

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), repaint=True, layout=False)
