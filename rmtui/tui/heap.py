"""Keeping the garbage collector's full passes off the graph the workbench shows.

A full collection walks every container object the process holds. With a 10,000-node root
read that is over 100 ms, and it lands on whatever happens to allocate next: often a filter
keystroke (each one allocates tree nodes and painted lines), so one key in a few took 100 ms
longer than the rest. Once a graph is shown, everything alive is moved out of the collector's
generations (``gc.freeze``): later full passes walk only what was made since, a few
milliseconds. A new reading of the graph turns the old one into garbage the frozen set would
keep for ever (its items point at each other, so only the collector frees them): when the
workbench has been idle a moment, the frozen objects go back to the collector, one full pass
frees the old graph, and what is left is frozen again.

Reading a graph makes ~100,000 objects that all outlive the read; the collector, counting
them as they come, ran ~185 passes over them during a 10,000-node read: a fifth to a third
of the read's time, at start and on every reload. A worker reads with the collector paused
(:func:`collector_paused`); it runs again, and finds any garbage of the read, after.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from textual.message_pump import MessagePump
from textual.timer import Timer

SETTLE_DELAY = 2.0  # seconds without a new reading or a keystroke before the one full pass

_pause_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection inside the block (any thread's); overlapping blocks (two
    workers reading at once) resume it when the last one ends, and only if it was on."""
    global _pauses, _was_enabled
    with _pause_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()


class HeapKeeper:
    """Freezes the long-lived objects once a graph shows; frees superseded ones when idle."""

    def __init__(self, owner: MessagePump, delay: float = SETTLE_DELAY) -> None:
        self.owner = owner
        self.delay = delay
        self.frozen = False
        self._timer: Timer | None = None

    def graph_shown(self) -> None:
        if not self.frozen:  # the first reading: nothing older to free
            gc.freeze()
            self.frozen = True
            return
        if self._timer is None:
            self._timer = self.owner.set_timer(self.delay, self._settle)
        else:
            self._timer.reset()

    def reading_dropped(self) -> None:
        """A reading equal to the one shown is being dropped (the watcher's first reading, made
        once it is in place, usually is). Its objects point at each other, so only a collector
        pass frees them, and the next pass over the young generations would find all of them:
        35-80 ms on a 10,000-node root, landing on whatever allocates next, often the first
        filter keystroke. Frozen with the rest, they wait for the idle pass (as a replaced graph
        does)."""
        if self.frozen:
            gc.freeze()
            self.graph_shown()

    def busy(self) -> None:
        """The person is typing: the full pass waits until they stop."""
        if self._timer is not None:
            self._timer.reset()

    def _settle(self) -> None:
        self._timer = None
        gc.unfreeze()
        gc.collect()
        gc.freeze()

    def release(self) -> None:
        """The workbench closes: hand everything back to the collector."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self.frozen:
            self.frozen = False
            gc.unfreeze()
