"""The warm service reads the launching root's indexes while its model loads: its first
retrieval finds them in memory, and a root it cannot read costs nothing but the preload."""

from __future__ import annotations

import time

import pytest

from rmtui.engine.retrieval import corpus, ranking, retrieve, tokens, vectors
from rmtui.engine.retrieval.modelhost import embed_client
from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path
from tests.test_retrieve_incremental import write_root


def _as_a_new_process() -> None:
    for memo in (corpus._MEMO, ranking._LEXICAL_MEMO, ranking._LEXICAL_STATUS, retrieve._DENSE_MEMO):
        memo.clear()
    vectors._SHARED.clear()
    tokens._SHARED.clear()


def test_after_a_preload_a_retrieve_reads_no_index_again(root, plain_backend, monkeypatch):
    write_root(root.path, nodes=60)
    retrieve.retrieve(root, "first", "ledger parser", backend=plain_backend)  # the caches on disk
    _as_a_new_process()
    retrieve.preload(root, plain_backend.info().embedding_model)

    def read(*_a, **_kw):
        raise AssertionError("read again after the preload")

    monkeypatch.setattr(corpus, "_read_cache", read)
    monkeypatch.setattr(corpus, "build_corpus", read)
    monkeypatch.setattr(ranking.LexicalIndex, "loads", read)
    monkeypatch.setattr(vectors, "_read_aligned", read)
    res = retrieve.retrieve(root, "second", "ledger parser", backend=plain_backend)
    assert res.mode == "hybrid" and res.results


def _wait_for_state(state_dir, seconds: float = 60.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = embed_client.read_state(state_dir)
        if state is not None:
            return state
        time.sleep(0.05)
    pytest.fail((state_dir / "service.log").read_text())


def test_a_service_launched_for_a_root_answers_it_and_an_unreadable_root_does_not_stop_it(root, tmp_path,
                                                                                          monkeypatch):
    write_root(root.path, nodes=60)
    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    cfg = root.config()
    model = resolve_model_path(None, None)
    state_dir = embed_client.service_dir(model, None)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "rightmemory.toml").write_text("[retrieve\nnot toml")
    try:
        for warm in (broken, root.path):
            assert embed_client.start_local_service(model, None, idle_timeout=60, warm_root=warm)
            _wait_for_state(state_dir)
            answer = embed_client.delegate_retrieve(root.path, cfg, f"s-{warm.name}", "ledger parser", top=3,
                                                    include_returned=False)
            assert answer is not None and answer["ok"], answer
            assert answer["data"]["mode"] == "hybrid" and answer["data"]["results"]
            assert embed_client.stop_local_service(state_dir)
        assert "Traceback" not in (state_dir / "service.log").read_text()
    finally:
        embed_client.stop_local_service(state_dir)
