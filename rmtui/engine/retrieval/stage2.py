"""The learned second stage: re-order the first stage's best candidates by a linear model.

Why: the first stage (``ranking.fuse``) adds a few normalised signals with fixed shares.
What makes an entry the answer is subtler -- a strong BM25 match whose neighbour holds the
words, a long entry that covers most of the need, a vector close to the other top results --
and a logistic model over such general features of each candidate weighs them better than
hand-set shares (measured on ``bench/locomo.py``: R@5 +0.02, R@10 +0.01, also on the held-out
conversations). The features describe text, scores and neighbourhood only; nothing in them
knows about a dataset.

The weights live in ``stage2_weights.py``, written by ``bench/fit_stage2.py`` from the
development conversations (held-out ones kept for the figure). The stage needs dense scores
(several features are vector ones); without them the first-stage order stands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rmtui.engine.retrieval.corpus import Corpus
from rmtui.engine.retrieval.ranking import LexicalIndex

#: How many first-stage candidates the second stage re-orders.
POOL = 60

FEATURES = (
    "own", "window", "lexical", "dense", "dense_gap", "dense_prev", "dense_next", "own_prev", "own_next",
    "fused", "heading_fused", "heading_dense", "coverage", "length", "own_top", "need_words",
    "fused_prev", "fused_next", "rank_fused", "rank_dense", "rank_lexical", "centroid", "first",
    "own_raw", "lexical_prev", "lexical_next",
)


@dataclass
class Signals:
    """Everything the first stage scored, per entry, kept for the second stage."""

    index: LexicalIndex
    query_tokens: list[str]
    own: np.ndarray  # BM25 of each entry's own text (raw)
    window: np.ndarray  # BM25 of each entry with its neighbours' words (raw; zeros without a window index)
    lexical: np.ndarray  # the first stage's lexical score
    dense: np.ndarray  # cosine of the need with each entry's best passage
    vectors: Callable[[np.ndarray], np.ndarray]  # entry indexes -> unit vector of each one's best passage


def _norm(x: np.ndarray) -> np.ndarray:
    top = float(x.max()) if x.size else 0.0
    return x / top if top > 0 else np.zeros_like(x)


def _log_rank(x: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """log(1 + how many entries score higher) for each candidate: one sort, no argsort."""
    higher = len(x) - np.searchsorted(np.sort(x), x[cand], side="right")
    return np.log1p(higher.astype(np.float32))


def candidates(fused: np.ndarray, pool: int = POOL) -> np.ndarray:
    """The first stage's best ``pool`` entries, best first (ties in source order)."""
    k = min(pool, len(fused))
    top = np.argpartition(-fused, k - 1)[:k] if k < len(fused) else np.arange(len(fused))
    return np.asarray(sorted(top.tolist(), key=lambda i: (-float(fused[i]), i)), dtype=np.int64)


def features(corpus: Corpus, sig: Signals, fused: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """One row of :data:`FEATURES` per candidate (``cand``: entry indexes, best first)."""
    prev, nxt, group = corpus.neighbour_arrays()
    group = group + 1
    own, win, lex, dense = _norm(sig.own), _norm(sig.window), _norm(sig.lexical), sig.dense

    def pad(x: np.ndarray) -> np.ndarray:  # index -1 (no neighbour) reads 0
        return np.append(x, np.float32(0))

    p, n = prev[cand], nxt[cand]
    heading_f = np.zeros(int(group.max()) + 1, dtype=np.float32)
    np.maximum.at(heading_f, group, fused)
    heading_d = np.zeros_like(heading_f)
    np.maximum.at(heading_d, group, dense)
    vec = sig.vectors(cand)
    centre = vec[:5].mean(axis=0)
    centre = centre / (float(np.linalg.norm(centre)) or 1.0)
    length = np.log1p(np.asarray([len(corpus.entries[int(i)].text) for i in cand], dtype=np.float32))
    cols = {
        "own": own[cand], "window": win[cand], "lexical": lex[cand], "dense": dense[cand],
        "dense_gap": dense[cand] - float(dense.max()), "dense_prev": pad(dense)[p], "dense_next": pad(dense)[n],
        "own_prev": pad(own)[p], "own_next": pad(own)[n], "fused": fused[cand],
        "heading_fused": heading_f[group[cand]], "heading_dense": heading_d[group[cand]],
        "coverage": sig.index.coverage(sig.query_tokens, weighted=True)[cand], "length": length,
        "own_top": np.full(len(cand), np.log1p(float(sig.own.max())), dtype=np.float32),
        "need_words": np.full(len(cand), len(set(sig.query_tokens)), dtype=np.float32),
        "fused_prev": pad(fused)[p], "fused_next": pad(fused)[n],
        "rank_fused": _log_rank(fused, cand), "rank_dense": _log_rank(dense, cand),
        "rank_lexical": _log_rank(sig.lexical, cand),
        "centroid": vec @ centre, "first": vec @ vec[0], "own_raw": sig.own[cand],
        "lexical_prev": pad(lex)[p], "lexical_next": pad(lex)[n],
    }
    return np.stack([np.asarray(cols[f], dtype=np.float32) for f in FEATURES], axis=1)


def rerank(corpus: Corpus, sig: Signals, fused: np.ndarray) -> np.ndarray | None:
    """The first stage's best :data:`POOL` entries in the learned order (None: no weights)."""
    from rmtui.engine.retrieval import stage2_weights as w

    if tuple(w.FEATURES) != FEATURES or not len(fused):
        return None  # weights fitted for other features: keep the first stage
    cand = candidates(fused)
    x = (features(corpus, sig, fused, cand) - np.asarray(w.MEAN, np.float32)) / np.asarray(w.SCALE, np.float32)
    score = x @ np.asarray(w.COEF, np.float32)
    return cand[np.argsort(-score, kind="stable")]
