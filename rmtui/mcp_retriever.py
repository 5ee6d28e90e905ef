"""Retrieval kept warm in the MCP server's process (docs/architecture.md, "Retrieval").

Start to first answer is about half a second of the SDK's import and tool registration,
then the model load and the index reads: all Python on one interpreter, so a thread does
not overlap them. When this root's retrievals are the local warm service's (the default
model host), :meth:`WarmRetriever.prepare` therefore launches that service, if it does not
run, before the server imports the SDK: it loads its model on the other core meanwhile, and
the first calls are delegated to it. After the first delegated answer the model loads here
too, in a thread, and later calls run in this process (no HTTP hop, and a service that
exits when idle costs nothing). Where the service is not the host, or cannot answer, the
model loads here as soon as the server runs (:meth:`WarmRetriever.start`) and a call sent
at once waits for that. A module apart from ``mcp_server`` so tests drive it without the SDK.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmtui.engine.display import printable
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.thin_client import trace

if TYPE_CHECKING:
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend

#: How long the background indexer waits for the first retrieve to answer before it starts,
#: and how long that retrieve waits for the indexer to hold its lock (or find it taken).
FIRST_ANSWER_WAIT_SECONDS = 60.0
LOCK_WAIT_SECONDS = 2.0


@dataclass(frozen=True)
class ServedAnswer:
    """A retrieve the local warm service ran: what the MCP tool shows of it."""

    text: str
    warnings: list[str] = field(default_factory=list)


class WarmRetriever:
    """Retrieval for one root in this long-lived process: the model stays loaded between calls,
    unless a configured embedding service is the model host."""

    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.backend: InProcessBackend | None = None
        self.via_service = False  # the local warm service answers until the model is warm here
        self._warming: threading.Thread | None = None
        self._indexing = False
        self._lock = threading.Lock()

    def prepare(self) -> WarmRetriever:
        """Before the SDK's import: launch the local warm service if it is this root's model
        host and the root's vectors are cached (a new root may not need the model at all)."""
        from rmtui.engine.retrieval.modelhost.embed_client import launch_for_root

        try:
            self.via_service = launch_for_root(self.root.path, self.root.config())
        except Exception:  # noqa: BLE001 - an optimisation only: the first call meets and reports the error
            self.via_service = False
        return self

    def start(self) -> WarmRetriever:
        """Once the server runs: load the model and read what a retrieve reads, in the
        background, unless the local warm service answers the first calls."""
        if not self.via_service:
            self._start_warming()
        return self

    def _start_warming(self) -> None:
        with self._lock:
            if self._warming is None:
                self._warming = threading.Thread(target=self._warm, name="rmtui-warm-up", daemon=True)
                self._warming.start()

    def close(self, timeout: float = 30.0) -> None:
        """Let a warm-up still loading the model finish before the process exits (the model's
        native runtime aborts the process if the interpreter stops under it)."""
        if self._warming is not None:
            self._warming.join(timeout)

    def _warm(self) -> None:
        from rmtui.engine.memory.config import embedding_service
        from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend
        from rmtui.engine.retrieval.retrieve import warm_up

        try:
            cfg = self.root.config()
            if embedding_service(cfg) is not None or cfg.get("retrieve.backend") == "agent":
                return  # another model host answers
            backend = InProcessBackend.from_config(cfg)
            self.backend = backend
            warm_up(self.root, backend)
        except Exception:  # noqa: BLE001 - an optimisation only: the first call meets and reports the error
            pass

    def __call__(self, session_id: str, need: str, include_pending: bool = True):
        from rmtui.engine.memory.config import embedding_service

        root = self.root
        cfg = root.config()
        if cfg.get("sync.enabled") or (root.path / "shared_views.toml").is_file():
            from rmtui.engine.host import retrieve_upkeep

            retrieve_upkeep.start(root)  # other machines' memory and the views' packages: in the background
        warm = self.backend is not None and not (self._warming is not None and self._warming.is_alive())
        if self.via_service and not warm and embedding_service(cfg) is None:
            served = self._delegated(cfg, session_id, need, include_pending)
            if served is not None:
                return served
        # numpy, the indexes and the model: imported only here, or a delegated call pays for them
        from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend
        from rmtui.engine.retrieval.retrieve import retrieve

        if embedding_service(cfg) is not None:  # a configured service stays the model host
            return retrieve(root, session_id, need, include_pending=include_pending)
        if self._warming is not None:
            self._warming.join()  # what it has not finished, this call would have to do anyway
        if self.backend is None:
            self.backend = InProcessBackend.from_config(cfg)
        trace("mcp retrieve answered in this process")
        if not self._indexing:
            self._indexing = True
            # embed what the vector cache lacks in the background, with the same warm model,
            # so later calls only embed the need. It takes the indexer lock before this call
            # reads the corpus (which then leaves the rest to it) and starts its work once this
            # call has answered: sharing the interpreter, it would only delay the answer
            locked, answered = threading.Event(), threading.Event()
            threading.Thread(target=_index_quietly, args=(root, self.backend, locked, answered), daemon=True).start()
            locked.wait(LOCK_WAIT_SECONDS)
            try:
                return retrieve(root, session_id, need, backend=self.backend, include_pending=include_pending)
            finally:
                answered.set()
        return retrieve(root, session_id, need, backend=self.backend, include_pending=include_pending)

    def _delegated(self, cfg, session_id: str, need: str, include_pending: bool) -> ServedAnswer | None:
        """The local warm service's answer (waiting for it while it starts), then the model
        starts loading here for later calls; None if it cannot answer (retrieve here)."""
        from rmtui.engine.retrieval.modelhost.embed_client import delegate_retrieve, delegated_result

        answer = delegate_retrieve(self.root.path, cfg, session_id, need, top=None, include_returned=False,
                                   include_pending=include_pending,
                                   wait_seconds=float(cfg.get("embedding.dense_budget_seconds")))
        if answer is None:
            return None
        data, text = delegated_result(answer)  # an error it reports is this call's error
        trace("mcp retrieve answered by the local service")
        self._start_warming()
        warnings = data.get("warnings")
        return ServedAnswer(text, [w for w in warnings if isinstance(w, str)] if isinstance(warnings, list) else [])


def _index_quietly(root: MemoryRoot, backend, locked: threading.Event, answered: threading.Event) -> None:
    from rmtui.engine.retrieval.retrieve import index_root

    def hold() -> None:
        locked.set()
        answered.wait(FIRST_ANSWER_WAIT_SECONDS)

    try:
        index_root(root, backend, once_locked=hold)
    except Exception as exc:  # noqa: BLE001 - indexing is an optimisation; retrieval works (lexically) without it
        sys.stderr.write(f"rmtui mcp: background indexing stopped: {printable(str(exc))}\n")
    finally:
        locked.set()  # another indexer held the lock, or this one failed: the first call waits no longer
