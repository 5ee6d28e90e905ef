"""Progress of long engine work (a model starting, passages being embedded, an Update run).

Engine code calls :func:`report` at the steps a person waits on; whoever started the work
(a workbench worker, a CLI) listens with :func:`reporting` around the call. Without a
listener a report costs one context-variable lookup. The listener is per thread (context),
so concurrent engine calls never see each other's progress.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    what: str  # what the engine is doing, e.g. "starting the local embedding model"
    done: int | None = None  # how far, where known
    total: int | None = None


_listener: ContextVar[Callable[[Progress], None] | None] = ContextVar("rmtui_progress", default=None)


def report(what: str, done: int | None = None, total: int | None = None) -> None:
    listener = _listener.get()
    if listener is not None:
        listener(Progress(what, done, total))


@contextmanager
def reporting(listener: Callable[[Progress], None]) -> Iterator[None]:
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
