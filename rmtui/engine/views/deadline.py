"""One time budget for everything an operation waits on over the network (requests, Git runs).

A per-read timeout bounds only the gap between two reads: a peer that sends its answer a few
bytes at a time never trips it. A :class:`Deadline` is a point in time that every wait of one
operation (``pull``, ``accept``, retrieve's view refresh) shares, so the operation as a whole
ends by it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic() by which the operation ends
    seconds: float  # the budget as given, for messages

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + max(0.0, seconds), seconds)

    def left(self) -> float:
        return self.at - time.monotonic()

    def sooner(self, other: Deadline | None) -> Deadline:
        """The earlier of the two (``other`` may be None)."""
        return other if other is not None and other.at < self.at else self

    def too_slow(self, who: str) -> str:
        """The one-line reason an operation gives when its budget ran out."""
        return f"{who} was too slow: no complete answer within {self.seconds:g} s"
