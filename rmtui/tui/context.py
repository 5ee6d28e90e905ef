"""What screens and widgets need from the running workbench, without importing the app.

The app (:mod:`rmtui.tui.app`) imports the screens, so a screen that imported the app back
would close a circle. Screens and widgets instead see the app through :class:`Workbench`:
the memory root it serves, its clock and the signal it re-publishes root changes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

from textual.dom import DOMNode
from textual.signal import Signal

from rmtui.engine.host.watch import ChangeSet
from rmtui.engine.memory.roots import MemoryRoot


class Workbench(Protocol):
    """The part of the workbench app that screens and widgets use."""

    root: MemoryRoot
    clock: Callable[[], float]
    root_changed: Signal[ChangeSet]

    def screen_shown(self) -> None:
        """The first screen shows what it read: the workbench's background work may start."""


def workbench(node: DOMNode) -> Workbench:
    """The running workbench, typed: Textual types ``node.app`` as any ``App``, and every rmtui
    screen and widget runs inside the workbench app (its root, clock, signals)."""
    return cast(Workbench, node.app)
