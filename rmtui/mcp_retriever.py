"""Retrieval kept warm in the MCP server's process (docs/architecture.md, "Retrieval").

The server starts :meth:`WarmRetriever.start` as soon as it runs: the model loads and the
indexes are read in a thread while the main thread recovers, registers the tools and
answers the client's first requests (building the model's session runs outside the GIL).
An agent's first retrieve, which comes seconds after it started the server, then costs what
a warm one does (``bench/mcp_retrieve.py``: 54 ms instead of 0.8 s); one sent at once waits
for the warm-up to finish. Started before the SDK's import
instead, the two imports only took turns on the GIL and the server answered ``initialize``
later. A module apart from ``mcp_server`` so tests drive it without the SDK.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from rmtui.engine.display import printable
from rmtui.engine.memory.roots import MemoryRoot

if TYPE_CHECKING:
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend

#: How long the background indexer waits for the first retrieve to answer before it starts,
#: and how long that retrieve waits for the indexer to hold its lock (or find it taken).
FIRST_ANSWER_WAIT_SECONDS = 60.0
LOCK_WAIT_SECONDS = 2.0


class WarmRetriever:
    """Retrieval for one root in this long-lived process: the model stays loaded between calls,
    unless a configured embedding service is the model host."""

    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.backend: InProcessBackend | None = None
        self._warming: threading.Thread | None = None
        self._indexing = False

    def start(self) -> WarmRetriever:
        """Load the model and read what a retrieve reads, in the background."""
        self._warming = threading.Thread(target=self._warm, name="rmtui-warm-up", daemon=True)
        self._warming.start()
        return self

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
        from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend
        from rmtui.engine.retrieval.retrieve import retrieve

        if self._warming is not None:
            self._warming.join()  # what it has not finished, this call would have to do anyway
            self._warming = None
        root = self.root
        cfg = root.config()
        if cfg.get("sync.enabled"):  # other machines' memory: a bounded pull check
            from rmtui.engine.sync import maybe_pull

            maybe_pull(root)
        if (root.path / "shared_views.toml").is_file():  # imported views: a bounded refresh first
            from rmtui.engine.views import refresh_before_retrieve

            refresh_before_retrieve(root)
        if embedding_service(cfg) is not None:  # a configured service stays the model host
            return retrieve(root, session_id, need, include_pending=include_pending)
        if self.backend is None:
            self.backend = InProcessBackend.from_config(cfg)
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
