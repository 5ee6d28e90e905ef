"""The MCP server's first retrieve: the background indexer it starts (with the same warm model)
holds the indexer lock at once but reads nothing until that first answer is out."""

from __future__ import annotations

import threading
import time

from rmtui import mcp_server
from rmtui.engine.retrieval import retrieve as retrieve_mod
from rmtui.engine.retrieval.modelhost import embeddings
from tests.retrieve_kit import write_small_root


def test_the_background_indexer_starts_its_work_after_the_first_answer(root, plain_backend, monkeypatch):
    write_small_root(root)
    (root.path / "MEMORY.md").write_text((root.path / "MEMORY.md").read_text()
                                         + "\n- `fresh-note` A note no vector exists for yet. → []\n")
    events: list[tuple[str, bool]] = []
    main = threading.current_thread()
    real_retrieve, real_dense_index = retrieve_mod.retrieve, retrieve_mod.dense_index

    def slow_retrieve(*a, **kw):
        events.append(("answer starts", retrieve_mod.indexer_running(root)))
        time.sleep(0.3)  # time enough for an indexer that did not wait to read the corpus
        out = real_retrieve(*a, **kw)
        events.append(("answer ends", True))
        return out

    def watched_dense_index(*a, **kw):
        events.append(("dense index", threading.current_thread() is main))
        return real_dense_index(*a, **kw)

    monkeypatch.setattr(retrieve_mod, "retrieve", slow_retrieve)
    monkeypatch.setattr(retrieve_mod, "dense_index", watched_dense_index)
    monkeypatch.setattr(embeddings.InProcessBackend, "from_config", classmethod(lambda cls, cfg: plain_backend))
    warm = mcp_server._WarmRetriever(root)
    result = warm("first-session", "billing owner")
    assert "billing" in result.text.lower()
    deadline = time.monotonic() + 60
    while not any(name == "dense index" and not on_main for name, on_main in events):
        assert time.monotonic() < deadline, events
        time.sleep(0.05)
    names = [name for name, on_main in events if name != "dense index" or not on_main]
    assert names.index("answer ends") < names.index("dense index")  # the indexer read after the answer
    assert events[0] == ("answer starts", True)  # it held the lock: the answer left the rest to it
    while retrieve_mod.indexer_running(root):  # the indexer finishes and lets the lock go
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "fresh-note" in warm("second-session", "a note no vector exists for yet").text
