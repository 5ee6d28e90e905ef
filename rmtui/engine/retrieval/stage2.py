"""The learned second stage: re-order the first stage's best candidates by a linear model.

Why: the first stage (``ranking.fuse``) adds a few normalised signals with fixed shares.
What makes an entry the answer is subtler -- a strong BM25 match whose neighbour holds the
words, a long entry that covers most of the need, a vector close to the other top results --
and a linear model over such general features of each candidate weighs them better than
hand-set shares (measured on ``bench/locomo.py``: R@5 +0.02, R@10 +0.01, also on the held-out
conversations). The features describe text, scores and neighbourhood only; nothing in them
knows about a dataset.

What a neighbour lends is weighed by how much it is about the same thing: each ``*_prev`` /
``*_next`` score is scaled by the square root of the cosine between the two entries' vectors
(``coherence_prev`` / ``coherence_next``, also features). In a conversation the answer sits
beside its question and the two are close; in a list of unrelated facts a match does not
spill onto the fact after it (measured: R@10 +0.002, held out +0.007, and "who owns billing"
no longer ranks the note after Bob's above it).

Features beyond scores (each measured on the development sets, see below):
- ``lead``: a word of the need in a node's lead label, the few words before a colon at its
  start (``Staging DB: moved to 5433``, ``Ana: we chose postgres``; not headings, not a
  colon inside a sentence or in ``**State:**`` markup). An entry *about* what the need names
  beats one that only mentions it.
- ``subject``: the same question asked of the node's subject wherever the note puts it: the
  lead label, a short label in parentheses at its end, the short heading it sits under, else
  its first words, where a sentence puts its subject (``subjects.py``). Real notes rarely
  start with a label; without this the stage rewarded one way of writing notes over the
  others.
- ``context_cover``: the IDF-weighted share of the need's words in the node's ancestor heading
  titles -- what a group of notes is about, whichever way each note is written.
- ``named_subject``: the same question as ``subject`` asked of the need's names only (its
  capitalised words inside a sentence, ``ranking.need_names``): "what did Ana choose" is about
  Ana's notes, not about every note whose subject holds "choose" (measured by ``--cv``: R@5
  +0.004 to +0.010 on the four layouts and +0.007 on the notes; R@10 within 0.005).
- ``maxsim``: late interaction -- each token state of the need matched to its closest token
  state of the entry's best passage, averaged (ColBERT's MaxSim over the embedding model's own
  token states, kept as int8 in ``tokens.TokenStore``). It sees which word matches which,
  where one pooled vector per passage blurs them. Only a model host that can return token
  states gives it (ours do; a foreign embedding service does not): without them the weights
  fitted without the feature are used.
- ``dated`` and ``dated_when``: the node states a time ("yesterday", "last March", "in 2022"),
  and the same for a need that asks when (``stage2_time.py``): BM25 drops "when" as a stop
  word, yet the answer to it is the note that says when (measured by ``--cv``: R@5 +0.005 to
  +0.013 on the four layouts, notes R@5 / R@10 +0.002 / +0.005).

A fit over fewer features than these (one made before a feature was added) is applied to its
own columns, picked by name, so the benches can score it beside today's.

Every feature also comes times ``thread`` (the pool's mean coherence with the node before,
less :data:`THREAD_CENTRE`): one linear model then weighs the features one way in a running
conversation, where a node follows from the one before, and another way in a list of separate
facts, where it does not -- without knowing which kind of memory it is reading. Measured by
``--cv`` with each notes project scored by a model that never saw it: notes R@5 +0.04 and
R@10 +0.02; LoCoMo R@10 -0.003 to +0.014, the four layouts 0.004 apart instead of 0.018.
Left out: ``own_top`` and ``need_words`` (the same for every candidate of a question, so of no
weight in a listwise fit), and the best score under a node's heading (``heading_fused`` /
``heading_dense``): what it means depends on how finely a note is headed -- a session of
turns, a run of one speaker's turns, a section of facts -- and without it the layouts' R@10
are 0.004 apart instead of 0.009 (notes R@5 -0.004, R@10 +0.006). Held out, the notes gained
(``bench/notes.py``: R@5 +0.056, R@10 +0.032 over the fit before) but the conversations did
not (``bench/locomo.py``: R@10 0.008 to 0.022 lower per layout): the development gain on them
came mostly from one of the three development conversations.

The weights live in ``stage2_weights.py``, written by ``bench/fit_stage2.py`` from development
data only: the LoCoMo development conversations rendered in four layouts of the speaker (label
first, inside the sentence, last, only in a heading) and six notes-shaped projects
(``bench/notes/``), the conversations weighing 0.6 and the notes 0.4; the held-out
conversations and the held-out notes project are only scored. The fit also records the span of
``thread`` over its pools (``Weights.thread_span``), which the stage keeps ``thread`` in. The
model is fitted listwise (one softmax over each question's candidates), since only their order
within a question matters. Features, shares and the penalty were chosen by cross-validation on
the development sets alone (``bench/fit_stage2.py --cv``). The stage needs dense scores
(several features are vector ones); without them the first-stage order stands.

Several features are cosines, whose spread differs from one embedding model to another, so a
model named in :data:`MODEL_WEIGHTS` reads weights fitted on its own scores
(``bench/fit_stage2.py --model``); any other model reads ``stage2_weights.py`` (MiniLM's).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from rmtui.engine.retrieval.corpus import Corpus
from rmtui.engine.retrieval.ranking import LexicalIndex, tokenize_many
from rmtui.engine.retrieval.stage2_time import dated
from rmtui.engine.retrieval.subjects import lead_label, subject_label
from rmtui.engine.retrieval.tokens import dequantize
from rmtui.engine.retrieval.topk import largest

#: How many first-stage candidates the second stage re-orders.
POOL = 60

#: What each candidate is scored on, alone ...
BASE = (
    "own", "window", "lexical", "dense", "dense_gap", "dense_prev", "dense_next", "own_prev", "own_next",
    "fused", "coverage", "length", "fused_prev", "fused_next", "rank_fused", "rank_dense", "rank_lexical",
    "centroid", "first", "own_raw", "lexical_prev", "lexical_next", "coherence_prev", "coherence_next", "lead",
    "subject", "context_cover", "named_subject", "dated", "dated_when",
)
#: ... and each of those times :func:`thread`, so one model weighs them one way in a running
#: conversation and another way in a list of separate facts.
FEATURES = BASE + tuple(f"{f}*thread" for f in BASE)
#: Features that need token states (the model used when every candidate has them).
TOKEN_FEATURES = ("maxsim", "maxsim*thread")
#: The pool's mean coherence with the previous node that :func:`thread` counts from (between a
#: list of facts, about 0.40 in the notes sets, and a conversation, about 0.51 in LoCoMo).
THREAD_CENTRE = 0.45


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
    stem: bool = True  # how ``query_tokens`` were made (lead labels are tokenized the same way)
    need_states: np.ndarray | None = None  # the need's token states (unit rows), when the host gives them
    # entry indexes -> int8 token states of each one's best passage
    states: Callable[[np.ndarray], list[np.ndarray | None]] | None = None
    names: frozenset[str] = frozenset()  # tokens of the need's names (``ranking.need_names``)
    asks_time: bool = False  # whether the need asks when (``stage2_time.asks_time``)
    model: str = ""  # the embedding model's identity (``<name>@<digest>``): whose weights apply


def _top(x: np.ndarray) -> float:
    """What a score is divided by to read 1 at the best entry (0: every entry reads 0)."""
    top = float(x.max()) if x.size else 0.0
    return top if top > 0 else 0.0


def _at(x: np.ndarray, idx: np.ndarray, top: float | None = None) -> np.ndarray:
    """``x`` at ``idx`` (divided by ``top``, :func:`_top`, when given), 0 where ``idx`` is -1
    (no neighbour): only the entries a feature reads are gathered and scaled, not every entry."""
    got = x[np.where(idx >= 0, idx, 0)]
    if top is not None:
        got = got / top if top > 0 else np.zeros_like(got)
    return np.where(idx >= 0, got, np.float32(0))


def _log_rank(x: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """log(1 + how many entries score higher) for each candidate, without sorting the entries
    (at 50,000 entries three full sorts cost more than the rest of the stage): each entry is
    placed among the few sorted candidate values, and an entry placed after the j-th of them
    beats it and every one before it."""
    v = x[cand]
    if not len(v):
        return np.zeros(0, dtype=np.float32)
    above = x[x > v.min()]  # only these can beat any candidate
    sv = np.sort(v)
    beats = np.bincount(np.searchsorted(sv, above, side="left"), minlength=len(sv) + 1)
    higher_sorted = np.cumsum(beats[::-1])[::-1][1:]  # entries above sv[j]: placed after it
    higher = higher_sorted[np.searchsorted(sv, v, side="left")]
    return np.log1p(higher.astype(np.float32))


def candidates(fused: np.ndarray, pool: int = POOL) -> np.ndarray:
    """The first stage's best ``pool`` entries, best first (ties in source order)."""
    return largest(fused, pool).astype(np.int64, copy=False)


def _label_hits(labels: list[str], query_tokens: list[str], stem: bool) -> np.ndarray:
    need = set(query_tokens)
    return np.asarray([float(bool(need.intersection(words))) for words in tokenize_many(labels, stem=stem)],
                      dtype=np.float32)


def lead_hits(corpus: Corpus, query_tokens: list[str], cand: np.ndarray, *, stem: bool = True) -> np.ndarray:
    """1 for each candidate whose lead label holds a word of the need, else 0."""
    return _label_hits([lead_label(corpus.entries[int(i)]) for i in cand.tolist()], query_tokens, stem)


def subject_words(corpus: Corpus, cand: np.ndarray, *, stem: bool = True) -> list[set[str]]:
    """The tokens of each candidate's subject (``subjects.subject_label``: lead, tail or heading
    label, or opening words)."""
    return [set(t) for t in tokenize_many([subject_label(corpus, corpus.entries[int(i)]) for i in cand.tolist()],
                                          stem=stem)]


def subject_hits(corpus: Corpus, query_tokens: list[str], cand: np.ndarray, *, stem: bool = True,
                 words: list[set[str]] | None = None) -> np.ndarray:
    """1 for each candidate whose subject (:func:`subject_words`, or ``words`` given) holds a
    word of the need, else 0."""
    need = set(query_tokens)
    words = subject_words(corpus, cand, stem=stem) if words is None else words
    return np.asarray([float(bool(need & w)) for w in words], dtype=np.float32)


def context_cover(corpus: Corpus, sig: Signals, cand: np.ndarray) -> np.ndarray:
    """IDF-weighted share of the need's words in each candidate's ancestor heading titles: the
    headings say what a group of notes is about, whichever way each note is written."""
    words = list(dict.fromkeys(sig.query_tokens))
    index = sig.index
    n = max(len(index.owner), 1)
    idf = {}
    for tok in words:
        t = index.vocab.get(tok)
        df = int(index.indptr[t + 1]) - int(index.indptr[t]) if t is not None else 0
        idf[tok] = float(np.log1p(n / max(df, 1)))
    total = sum(idf.values())
    if not total:
        return np.zeros(len(cand), dtype=np.float32)
    toks = tokenize_many([corpus.entries[int(i)].context for i in cand.tolist()], stem=sig.stem)
    return np.asarray([sum(idf[w] for w in set(t).intersection(idf)) / total for t in toks], dtype=np.float32)


def named_subject(sig: Signals, words: list[set[str]]) -> np.ndarray:
    """1 for each candidate whose subject (``words``) holds one of the need's names, else 0."""
    return np.asarray([float(bool(sig.names & w)) for w in words], dtype=np.float32)


def time_columns(corpus: Corpus, sig: Signals, cand: np.ndarray) -> dict[str, np.ndarray]:
    """``dated``: 1 for each candidate that states a time (``stage2_time.dated``); ``dated_when``:
    the same, for a need that asks when (else 0)."""
    stated = np.asarray([dated(corpus.entries[int(i)].text) for i in cand.tolist()], dtype=np.float32)
    return {"dated": stated, "dated_when": stated if sig.asks_time else np.zeros_like(stated)}


def maxsim(need_states: np.ndarray, states: list[np.ndarray]) -> np.ndarray:
    """For each candidate: the mean over the need's tokens of the best cosine with one of its tokens."""
    out = np.zeros(len(states), dtype=np.float32)
    sizes = [len(s) for s in states]
    if not need_states.size or not sum(sizes):
        return out
    stacked = dequantize(np.concatenate([s for s in states if len(s)]))
    sims = np.asarray(need_states, dtype=np.float32) @ stacked.T  # need tokens x all candidate tokens
    starts = np.cumsum([0] + [n for n in sizes if n])[:-1]
    best = np.maximum.reduceat(sims, starts, axis=1).mean(axis=0)
    out[np.asarray([i for i, n in enumerate(sizes) if n], dtype=np.int64)] = best
    return out


def token_states(sig: Signals, cand: np.ndarray) -> list[np.ndarray] | None:
    """The candidates' token states, or None unless the need and every candidate have them."""
    if sig.need_states is None or sig.states is None or not len(sig.need_states):
        return None
    got = sig.states(cand)
    if any(s is None for s in got):
        return None
    return [s for s in got if s is not None]


def features(corpus: Corpus, sig: Signals, fused: np.ndarray, cand: np.ndarray,
             states: list[np.ndarray] | None = None, *, span: tuple[float, float] | None = None) -> np.ndarray:
    """One row of :data:`FEATURES` per candidate (``cand``: entry indexes, best first), then
    one of :data:`TOKEN_FEATURES` when ``states`` (the candidates' token states) are given;
    ``span`` bounds :func:`thread` (a model's ``thread_span``; None for fitting rows)."""
    prev, nxt, _ = corpus.neighbour_arrays()
    dense = sig.dense
    own, win, lex = (partial(_at, x, top=_top(x)) for x in (sig.own, sig.window, sig.lexical))
    p, n = prev[cand], nxt[cand]
    vec = sig.vectors(cand)
    coh_p, coh_n = (np.where(side >= 0, (sig.vectors(np.where(side >= 0, side, cand)) * vec).sum(axis=1), 0.0)
                    .astype(np.float32) for side in (p, n))
    gate_p, gate_n = (np.sqrt(np.clip(c, 0.0, None)) for c in (coh_p, coh_n))
    centre = vec[:5].mean(axis=0)
    centre = centre / (float(np.linalg.norm(centre)) or 1.0)
    length = np.log1p(np.asarray([len(corpus.entries[int(i)].text) for i in cand], dtype=np.float32))
    subject = subject_words(corpus, cand, stem=sig.stem)
    cols = {
        "own": own(cand), "window": win(cand), "lexical": lex(cand), "dense": dense[cand],
        "dense_gap": dense[cand] - float(dense.max()), "dense_prev": gate_p * _at(dense, p),
        "dense_next": gate_n * _at(dense, n), "own_prev": gate_p * own(p), "own_next": gate_n * own(n),
        "fused": fused[cand],
        "coverage": sig.index.coverage(sig.query_tokens, weighted=True)[cand], "length": length,
        "fused_prev": gate_p * _at(fused, p), "fused_next": gate_n * _at(fused, n),
        "rank_fused": _log_rank(fused, cand), "rank_dense": _log_rank(dense, cand),
        "rank_lexical": _log_rank(sig.lexical, cand),
        "centroid": vec @ centre, "first": vec @ vec[0], "own_raw": sig.own[cand],
        "lexical_prev": gate_p * lex(p), "lexical_next": gate_n * lex(n),
        "coherence_prev": coh_p, "coherence_next": coh_n,
        "lead": lead_hits(corpus, sig.query_tokens, cand, stem=sig.stem),
        "subject": subject_hits(corpus, sig.query_tokens, cand, stem=sig.stem, words=subject),
        "context_cover": context_cover(corpus, sig, cand),
        "named_subject": named_subject(sig, subject),
        **time_columns(corpus, sig, cand),
    }
    names: tuple[str, ...] = BASE
    if states is not None and sig.need_states is not None:
        cols["maxsim"] = maxsim(sig.need_states, states)
        names = BASE + ("maxsim",)
    x = np.stack([np.asarray(cols[f], dtype=np.float32) for f in names], axis=1)
    t, k = np.float32(thread(coh_p, span)), len(BASE)
    return np.concatenate([x[:, :k], x[:, :k] * t, x[:, k:], x[:, k:] * t], axis=1)  # no maxsim: empty x[:, k:]


def thread(coherence_prev: np.ndarray, span: tuple[float, float] | None = None) -> float:
    """How much the pool's nodes run on one thread with the node before them: their mean
    coherence with it, less :data:`THREAD_CENTRE`, kept within ``span`` when given. Turns of a
    conversation or entries of a log follow from each other; separate facts under a heading do
    not, and what makes a candidate the answer differs (a neighbour's words lend more, a
    subject label weighs otherwise). A model reads it within the span it was fitted on
    (``Weights.thread_span``): a root of a few nodes, most of them first under their heading,
    has a mean near 0, far below any fitted pool, and extrapolated interaction weights there
    put a pursuit above the one note that answers."""
    if not len(coherence_prev):
        return 0.0
    t = float(coherence_prev.mean()) - THREAD_CENTRE
    return t if span is None else min(max(t, span[0]), span[1])


#: Embedding models (by the name in their identity) with weights of their own, and the module
#: under ``rmtui.engine.retrieval`` that holds them.
MODEL_WEIGHTS = {"all-mpnet-base-v2": "stage2_weights_mpnet"}


def weights_module(model: str) -> str:
    """The weights module for the embedding model whose identity is ``model``."""
    return MODEL_WEIGHTS.get(model.partition("@")[0], "stage2_weights")


def rerank(corpus: Corpus, sig: Signals, fused: np.ndarray) -> np.ndarray | None:
    """The first stage's best :data:`POOL` entries in the learned order (None: no weights)."""
    w = importlib.import_module(f"rmtui.engine.retrieval.{weights_module(sig.model)}")
    if not len(fused):
        return None
    cand = candidates(fused)
    states = token_states(sig, cand)
    if states is not None and set(w.TOKENS.features) <= set(FEATURES + TOKEN_FEATURES):
        model = w.TOKENS
    elif set(w.PLAIN.features) <= set(FEATURES):
        model, states = w.PLAIN, None  # no token states (or no weights for them)
    else:
        return None  # weights fitted for features this code does not compute: keep the first stage
    x = features(corpus, sig, fused, cand, states, span=model.thread_span)
    if len(model.features) < x.shape[1]:  # a fit over fewer features (an earlier one): its columns
        names = FEATURES + (TOKEN_FEATURES if states is not None else ())
        x = x[:, [names.index(f) for f in model.features]]
    x = (x - np.asarray(model.mean, np.float32)) / np.asarray(model.scale, np.float32)
    score = x @ np.asarray(model.coef, np.float32)
    return cand[np.argsort(-score, kind="stable")]
