"""The coarse dense pass of a long-lived process over a large root: the best passages and
what fusion reads around them are scored exactly, a one-shot process never builds the
projection, and retrieval answers as the exact scan does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmtui.engine.retrieval import coarse, topk, vectors
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.retrieve import search, warm_up
from rmtui.engine.retrieval.vectors import VectorCache
from tests.test_retrieve_incremental import write_root


def _matrix(n: int, dim: int = 48, rank: int = 12, seed: int = 1) -> np.ndarray:
    """Unit rows mostly in a low-rank subspace, as sentence embeddings are."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, dim)) + 0.3 * rng.standard_normal((n, dim))
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=400), st.integers(1, 40), st.integers(0, 20_000))
def test_largest_is_a_full_sort_with_ties_in_position_order(values, k, pad):
    x = np.asarray(values + [0] * pad, dtype=np.float32)  # long arrays take the sampled threshold
    want = sorted(range(len(x)), key=lambda i: (-float(x[i]), i))[:k]
    assert topk.largest(x, k).tolist() == want
    kth = float(x[want[-1]])
    assert set(topk.at_least(x, k).tolist()) >= {i for i in range(len(x)) if x[i] >= kth}


def test_the_best_passages_and_those_fusion_reads_are_exact_the_rest_close(monkeypatch):
    monkeypatch.setattr(coarse, "RESCORED", 200)
    monkeypatch.setattr(coarse, "BEST", 16)
    m = _matrix(3000)
    proj = coarse.project(m, dim=16)
    rows = np.arange(len(m))[::-1].copy()  # the passages need not be in matrix order
    q = m[17] + 0.1 * m[2000]
    exact = (m @ q)[rows]
    asked: list[np.ndarray] = []

    def widen(best: np.ndarray) -> np.ndarray:
        asked.append(best)
        return np.union1d(best, [5, 6, 7])  # the caller's own picks (lexical leaders, neighbours)

    got = coarse.scores(proj, m, q, rows, widen)
    truth = topk.largest(exact, 50)
    assert np.allclose(got[truth], exact[truth], atol=1e-6)  # the true top 50: exact scores
    assert set(topk.largest(got, 50).tolist()) == set(truth.tolist())
    assert np.allclose(got[[5, 6, 7]], exact[[5, 6, 7]], atol=1e-6)
    assert len(asked[0]) >= 16 and set(asked[0].tolist()) >= set(truth[:16].tolist())
    assert np.abs(got - exact).mean() < 0.05  # the rest: coarse, yet close
    assert not np.allclose(got, exact, atol=1e-6)  # and truly coarse (16 of 48 directions)


def test_a_small_matrix_or_a_single_call_never_builds_a_projection(monkeypatch):
    monkeypatch.setattr(coarse, "COARSE_ROWS", 1000)
    monkeypatch.setattr(coarse, "DIM", 16)
    small, narrow, large = coarse.Slot(), coarse.Slot(), coarse.Slot()
    for _ in range(3):
        assert small.get(_matrix(999)) is None
        assert narrow.get(_matrix(1200, dim=16)) is None  # nothing to leave out
    m = _matrix(1200)
    assert large.get(m) is None  # a one-shot process scores once: no build, no thread
    assert large._thread is None
    assert large.get(m) is None  # the second time: built in the background
    built = large.build(m)  # waits for it rather than building twice
    assert built is not None and large.get(m) is built and built.rows.shape == (1200, coarse.DIM)
    broken = m.copy()
    broken[3] = np.nan  # a projection that cannot be made: the matrix keeps its exact scan
    damaged = coarse.Slot()
    assert damaged.build(broken) is None and damaged.get(broken) is None
    q = m[0]
    assert np.allclose(coarse.scan(broken, q, np.arange(5, 10), damaged), broken[5:10] @ q)


def test_a_long_lived_process_answers_from_the_coarse_pass_as_the_exact_scan_does(root, plain_backend,
                                                                                   monkeypatch):
    write_root(root.path, nodes=120)
    corpus = load_corpus(root.path)
    cfg = root.config()
    needs = ["ledger parser retry", "the cache of the build", "worker queue latency budget"]
    exact = [[(r.index, r.score) for r in search(root, n, top=8, corpus=corpus, backend=plain_backend,
                                                 cfg=cfg).ranked] for n in needs]
    calls: list[int] = []
    real = coarse.scores

    def counting(proj, matrix, *a, **kw):
        calls.append(proj.rows.shape[1])
        return real(proj, matrix, *a, **kw)

    monkeypatch.setattr(coarse, "scores", counting)
    monkeypatch.setattr(coarse, "COARSE_ROWS", 50)  # the root's hundred-odd passages count as large
    monkeypatch.setattr(coarse, "RESCORED", 8)
    monkeypatch.setattr(coarse, "DIM", 383)  # all directions but the weakest: near exact
    vectors._SHARED.clear()
    warm_up(root, plain_backend)  # as the MCP server warms up: the projection's build starts
    cache = VectorCache.open(root.runtime / "cache", plain_backend.info().embedding_model)
    assert len(cache.matrix) >= 50
    assert cache._loaded is not None and cache._loaded.projection.build(cache.matrix) is not None  # waits
    calls.clear()
    got = [[(r.index, r.score) for r in search(root, n, top=8, corpus=corpus, backend=plain_backend,
                                               cfg=cfg).ranked] for n in needs]
    assert calls == [383] * len(needs)  # each answered from the coarse pass
    for a, b in zip(exact, got, strict=True):
        assert [i for i, _ in a] == [i for i, _ in b]
        assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-5)
