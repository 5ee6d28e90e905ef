"""The MCP server's first retrieve: the local warm service answers it when it is the root's model
host (the server launched it before importing the SDK); otherwise the background indexer the
server starts (with the same warm model) holds the indexer lock at once but reads nothing until
that first answer is out."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from rmtui import mcp_retriever
from rmtui.engine.errors import UsageError
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.retrieval import retrieve as retrieve_mod
from rmtui.engine.retrieval.modelhost import embeddings
from rmtui.engine.retrieval.modelhost.embed_client import stop_local_service
from tests.retrieve_kit import service_pids, write_small_root


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
    warm = mcp_retriever.WarmRetriever(root)
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


def test_the_warm_up_loads_the_model_before_the_first_call_and_records_nothing(root, plain_backend, monkeypatch):
    write_small_root(root)
    loaded_on: list[str] = []

    def from_config(cls, cfg):
        loaded_on.append(threading.current_thread().name)
        return plain_backend

    monkeypatch.setattr(embeddings.InProcessBackend, "from_config", classmethod(from_config))
    warm = mcp_retriever.WarmRetriever(root).start()
    warm._warming.join(60)
    assert loaded_on == ["rmtui-warm-up"]  # loaded while the server would be importing the SDK
    db = root.runtime / "state.sqlite3"
    delivered = _deliveries(db)
    assert delivered == 0  # the warm-up answered nobody
    first = warm("first-session", "billing owner")
    assert loaded_on == ["rmtui-warm-up"]  # the first call used the warm model
    assert "billing" in first.text.lower()
    assert _deliveries(db) > 0  # the first call, unlike the warm-up, recorded what it delivered


def test_a_warm_up_that_fails_leaves_the_error_to_the_first_call(root, monkeypatch):
    (root.path / "rightmemory.toml").write_text("[retrieve\n")  # malformed: the config cannot be read
    warm = mcp_retriever.WarmRetriever(root).start()
    warm._warming.join(60)
    assert warm.backend is None
    with pytest.raises(UsageError, match="rightmemory.toml"):
        warm("first-session", "billing owner")


def _deliveries(db) -> int:
    import sqlite3

    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        return sum(conn.execute(f"select count(*) from {t}").fetchone()[0] for t in tables if t.startswith("retrieve_"))


async def test_a_root_with_cached_vectors_gets_its_first_answers_from_the_warm_service(root, plain_backend,
                                                                                         tmp_path):
    write_small_root(root)
    set_config_value(root.path, "embedding.dense_budget_seconds", 90)
    set_config_value(root.path, "embedding.idle_timeout_seconds", 60)
    retrieve_mod.retrieve(root, "earlier-session", "billing owner", backend=plain_backend)  # vectors cached
    services = tmp_path / "services"
    env = {**os.environ, "RMTUI_SERVICE_DIR": str(services), "RMTUI_CLIENT_TRACE": "1"}
    params = StdioServerParameters(command=sys.executable, env=env,
                                   args=["-m", "rmtui", "--headless", "mcp", "--root", str(root.path)])
    errlog = tmp_path / "server-stderr.txt"
    try:
        with errlog.open("w") as err:
            async with Client(stdio_client(params, errlog=err), read_timeout_seconds=120) as client:
                first = await client.call_tool("rightmemory_retrieve", {"session_id": "s1", "need": "who owns billing"})
                assert not first.is_error and "Bob owns the billing service" in first.content[0].text
                assert "answered by the local service" in errlog.read_text()
                (pid,) = service_pids(services)  # launched by the server, not by any CLI call
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                assert argv[argv.index(b"--warm-root") + 1] == str(root.path).encode()  # read while it loads
                # meanwhile the model loads in the server too: later calls answer there, the same way
                deadline, n = time.monotonic() + 90, 1
                while "answered in this process" not in errlog.read_text():
                    assert time.monotonic() < deadline, errlog.read_text()
                    n += 1  # a new session each time: one session is never sent the same item twice
                    later = await client.call_tool("rightmemory_retrieve",
                                                   {"session_id": f"s{n}", "need": "does anyone have a dog"})
                    assert not later.is_error and "golden retriever" in later.content[0].text
                    time.sleep(0.2)
        assert "Traceback" not in errlog.read_text() and "terminate" not in errlog.read_text()
    finally:
        for state_dir in services.iterdir() if services.is_dir() else ():
            stop_local_service(state_dir)


def test_a_new_root_launches_no_service_and_warms_up_here(root, tmp_path, monkeypatch):
    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    write_small_root(root)  # no vectors cached yet: it may not need the model at all
    warm = mcp_retriever.WarmRetriever(root).prepare()
    assert warm.via_service is False
    assert service_pids(tmp_path / "services") == []
