"""Caches follow content: a one-node change re-embeds one passage and rebuilds BM25 once."""

from __future__ import annotations

import numpy as np

from rmtui.engine.memory.config import set_config_value
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.ranking import DEFAULT_PARAMS, LexicalIndex, best_per_entry, lexical_key, run_starts
from rmtui.engine.retrieval.retrieve import dense_index, retrieve
from rmtui.engine.retrieval.vectors import VectorCache, text_key
from tests.retrieve_kit import PEOPLE, write_small_root


class Counting:
    """Wraps a backend and records every text sent for embedding."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.passages: list[str] = []
        self.reranked = 0

    def info(self):
        return self.inner.info()

    def embed(self, texts, kind):
        if kind == "passage":
            self.passages.extend(texts)
        return self.inner.embed(texts, kind)

    def rerank(self, query, documents):
        self.reranked += 1
        return self.inner.rerank(query, documents)


def test_one_node_change_reembeds_one_node(root, plain_backend):
    write_small_root(root)
    counting = Counting(plain_backend)
    first = retrieve(root, "a", "billing owner", backend=counting)
    assert first.mode == "hybrid" and first.dense_coverage == 1.0
    corpus = load_corpus(root.path)
    assert len(counting.passages) == len(corpus.entries)  # every entry embedded once
    counting.passages.clear()
    retrieve(root, "b", "billing owner", backend=counting)
    assert counting.passages == []  # warm: nothing re-embedded

    (root.path / "MEMORY_people.md").write_text(PEOPLE.replace("golden retriever", "beagle"))
    out = retrieve(root, "c", "which dog breed does Carol have", backend=counting)
    assert len(counting.passages) == 1 and "beagle" in counting.passages[0]
    assert out.results[0]["id"] == "carol-dog" and "beagle" in out.text

    # the cache file is binary float32 keyed by text hash, and holds the live vectors
    info = plain_backend.info()
    cache = VectorCache.open(root.runtime / "cache", info.embedding_model)
    assert cache.path.read_bytes()[:8] == b"RMTVEC03" and cache.matrix.dtype == np.float32
    idx = dense_index(load_corpus(root.path), DEFAULT_PARAMS, root.runtime / "cache")
    assert cache.rows(idx.keys)[1] == []


def test_vector_cache_is_per_model_identity(tmp_path):
    a = VectorCache.open(tmp_path, "model-a@1")
    a.add({text_key("hello"): np.ones(4, dtype=np.float32) / 2})
    assert VectorCache.open(tmp_path, "model-a@1").lookup([text_key("hello")])[1] == []
    other = VectorCache.open(tmp_path, "model-b@1")
    _, missing = other.lookup([text_key("hello")])
    assert missing == [0]  # another identity never sees those vectors


def test_vector_cache_drops_dead_rows_when_they_dominate(tmp_path):
    c = VectorCache.open(tmp_path, "m@1")
    c.add({text_key(f"t{i}"): np.full(2, i + 1, dtype=np.float32) for i in range(10)})
    live = {text_key("t0"), text_key("new")}
    c.add({text_key("new"): np.ones(2, dtype=np.float32)}, live=live)
    again = VectorCache.open(tmp_path, "m@1")
    blob = again.keys.tobytes()
    assert {blob[i:i + 32] for i in range(0, len(blob), 32)} == live


def test_lexical_index_rebuilt_only_when_corpus_changes(root):
    from rmtui.engine.memory.config import set_config_value

    write_small_root(root)
    set_config_value(root.path, "embedding.local_service", False)  # no model host: BM25 alone
    retrieve(root, "a", "docker cache", backend=None)
    path = root.runtime / "cache" / "bm25.bin"
    before = path.read_bytes()
    retrieve(root, "b", "docker cache", backend=None)
    assert path.read_bytes() == before
    (root.path / "MEMORY.md").write_text((root.path / "MEMORY.md").read_text().replace("CACHE_EPOCH", "CACHE_GEN"))
    out = retrieve(root, "c", "CACHE_GEN", backend=None, top=1)
    assert out.results[0]["id"] == "docker-cache" and out.mode == "lexical" and out.warnings
    idx = LexicalIndex.loads(path.read_bytes())
    assert idx.key == lexical_key(load_corpus(root.path), DEFAULT_PARAMS)


def test_reranker_reorders_the_head(root, backend):
    write_small_root(root)
    from rmtui.engine.memory.config import set_config_value

    set_config_value(root.path, "embedding.reranker_path", "/configured/by/test")
    counting = Counting(backend)
    out = retrieve(root, "r", "billing owner", backend=counting, top=3)
    assert counting.reranked == 1 and len(out.results) == 3


def test_memory_changing_during_ranking_is_retried_once(root, plain_backend):
    write_small_root(root)

    class Editing(Counting):
        edits = 0

        def embed(self, texts, kind):
            if kind == "query" and Editing.edits < 1:
                Editing.edits += 1
                (root.path / "MEMORY_people.md").write_text(PEOPLE.replace("Lisbon", "Porto"))
            return super().embed(texts, kind)

    out = retrieve(root, "x", "where does Alice work from", backend=Editing(plain_backend), top=1)
    assert Editing.edits == 1
    assert "Porto" in out.text  # rendered from the corpus after the change, never a mix


def test_empty_memory_is_no_strong_match_without_starting_a_model(root, monkeypatch, tmp_path):
    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    out = retrieve(root, "e", "anything at all")
    assert out.text == "no strong match" and out.results == []
    assert not (tmp_path / "services").exists()


def test_a_warm_fingerprint_check_sees_an_edit_that_keeps_size_and_mtime(root, monkeypatch):
    """The status fast path trusts a file only while its change time holds: an edit of the
    same length with the modification time set back is still seen."""
    import os
    import time

    from rmtui.engine.retrieval import corpus as corpus_mod

    write_small_root(root)
    corpus = load_corpus(root.path)
    assert corpus_mod.current_fingerprint(root.path, corpus)  # hashed (just written: not trusted yet)
    assert "MEMORY_people.md" not in corpus.checked
    # a 50 ms guard instead of two seconds (file times move by the kernel's tick, a few ms)
    monkeypatch.setattr(corpus_mod, "RACY_NS", 50_000_000)
    time.sleep(0.2)
    assert corpus_mod.current_fingerprint(root.path, corpus)
    assert "MEMORY_people.md" in corpus.checked
    people = root.path / "MEMORY_people.md"
    st = people.stat()
    people.write_text(people.read_text().replace("Lisbon", "Madrid"))  # same length
    os.utime(people, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert people.stat().st_size == st.st_size and people.stat().st_mtime_ns == st.st_mtime_ns
    assert not corpus_mod.current_fingerprint(root.path, corpus)
    fresh = load_corpus(root.path)
    assert any("Madrid" in e.text for e in fresh.entries)


def test_delivery_connection_is_kept_and_reopened_when_the_database_is_replaced(root):
    from rmtui.engine.retrieval import delivery

    write_small_root(root)
    set_config_value(root.path, "embedding.local_service", False)
    first = retrieve(root, "s1", "docker cache", backend=None)
    assert first.results
    again = retrieve(root, "s1", "docker cache", backend=None)
    assert again.results == [] and again.skipped  # the kept connection saw the first delivery
    for name in ("state.sqlite3", "state.sqlite3-wal", "state.sqlite3-shm"):
        (root.runtime / name).unlink(missing_ok=True)  # a reset runtime: a new database file
    third = retrieve(root, "s1", "docker cache", backend=None)
    assert third.results and not third.skipped  # the new database has no history
    kept = [k for k in delivery._OPEN if k[1].startswith(str(root.runtime))]
    assert len(kept) == 1


def test_best_per_entry_is_the_maximum_of_each_entrys_passages():
    rng = np.random.default_rng(1)
    for trial in range(300):
        n = int(rng.integers(0, 30))
        owner = np.arange(n) if trial % 3 == 0 else np.sort(rng.integers(0, max(n, 1), int(rng.integers(0, 60))))
        if trial % 3 == 1:  # one passage for some entries, none for the others
            owner = np.unique(owner)
        if not n:
            owner = np.zeros(0, np.int64)
        scores = rng.normal(size=len(owner)).astype(np.float32)
        expected = np.zeros(n, np.float32)
        for i in range(n):
            mine = scores[owner == i]
            expected[i] = mine.max() if mine.size else 0.0
        assert np.array_equal(best_per_entry(scores, owner, n), expected)
        assert np.array_equal(best_per_entry(scores, owner, n, run_starts(owner)), expected)  # as indexes keep them
