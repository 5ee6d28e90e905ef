"""Retrieval orchestration, called by every front (docs/architecture.md, "Retrieval").

``retrieve(root, session, need)``: snapshot the corpus under the memory lock, rank outside
it (BM25 here, dense vectors from the cache plus the model host for what is missing and
for the query), re-check the corpus fingerprint under the lock (one retry if it changed),
render the chosen entries as source text, and record the delivery for the session.

Model hosts: a configured embedding service (``[retrieve.embedding]`` in rightmemory.toml, as
RightMemory has it, or rmtui's ``embedding.service_url``), else the local warm service started
on demand (the CLI never imports torch), or an in-process backend handed in by a
long-lived front (MCP server, TUI). With ``[retrieve.embedding]`` the service's reranker
reorders the top ``candidate_count`` candidates and ``result_count`` of them are returned.
When none can be reached, retrieval degrades to BM25 alone with a warning
(``embedding.fallback_lexical = false`` makes it an error instead); agent retrieval as a
fallback plugs in through :data:`AGENT_FALLBACK`.

Evidence not yet reconciled into memory (pending: inbox, queued, claimed) is scored too, as
a small corpus of its own, and returned apart from memory (``RetrieveResult.pending``, a
separate section after the memory text), at most :data:`PENDING_SHOWN` items that clear a
floor; ``include_pending=False`` leaves it out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np

from rmtui.engine import progress
from rmtui.engine.errors import ConflictError, EngineError, UsageError
from rmtui.engine.gitutil import head_commit
from rmtui.engine.locks import file_lock, try_lock
from rmtui.engine.memory.config import embedding_service
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.retrieval import stage2
from rmtui.engine.retrieval.bm25 import DocKeys, doc_keys
from rmtui.engine.retrieval.corpus import (
    Corpus,
    EntryList,
    collector_paused,
    current_fingerprint,
    load_corpus,
    load_pending,
    split_passages,
)
from rmtui.engine.retrieval.delivery import DeliveryHistory, already_delivered_text, filter_delivered
from rmtui.engine.retrieval.modelhost.embed_client import ServiceClient, ServiceError, ensure_local_service
from rmtui.engine.retrieval.ranking import (
    LexicalIndex,
    Ranked,
    RankParams,
    best_per_entry,
    dense_text,
    fuse,
    lexical_key,
    load_lexical,
    need_names,
    passages,
    query_tokens,
    rank,
    run_starts,
)
from rmtui.engine.retrieval.render import NO_STRONG_MATCH, PendingItem, Unit, pending_section, render, unit_of
from rmtui.engine.retrieval.result import RetrieveResult
from rmtui.engine.retrieval.stage2 import Signals
from rmtui.engine.retrieval.stage2_time import asks_time
from rmtui.engine.retrieval.static_pass import blend, check_first_pass, fill_static
from rmtui.engine.retrieval.static_pass import worth_it as static_worth_it
from rmtui.engine.retrieval.tokens import TokenStore, dequantize, quantize
from rmtui.engine.retrieval.topk import at_least
from rmtui.engine.retrieval.vectors import KEY_DTYPE, VectorCache, text_key

# Agent retrieval (rmtui.engine.retrieval.agent_retrieve) serves retrieve.backend = "agent" and, when a
# retrieve model is configured, stands in for an unreachable embedding service.
AGENT_FALLBACK: Callable[..., RetrieveResult] | None = None


class Stages(dict):
    """Seconds spent in each step of one retrieve, in order: what the benches print."""

    def __init__(self) -> None:
        super().__init__()
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self[name] = self.get(name, 0.0) + now - self._t
        self._t = now


class _UseAgent(Exception):
    """The embedding service is unavailable and a retrieve model is configured."""


def _agent(root: MemoryRoot, session: str, need: str, top, include_returned: bool, warnings: list[str],
           include_pending: bool = True):
    if AGENT_FALLBACK is not None:
        return AGENT_FALLBACK(root, session, need, top, include_returned, include_pending=include_pending)
    from rmtui.engine.retrieval.agent_retrieve import agent_retrieve

    return agent_retrieve(root, session, need, top=top, include_returned=include_returned, warnings=warnings,
                          include_pending=include_pending)


def _agent_fallback_ready(cfg) -> bool:
    from rmtui.engine.roles.executors.config import resolve_role_executor

    if not cfg.get("retrieve.fallback_to_agent"):
        return False
    resolved = resolve_role_executor(cfg, "retrieve")
    return resolved is not None and not resolved.borrowed  # a retrieve executor of its own


@dataclass
class SearchOutcome:
    corpus: Corpus
    ranked: list[Ranked]
    mode: str
    warnings: list[str]
    dense_coverage: float | None
    matched: bool  # something clears the relevance gate
    query_vec: np.ndarray | None = None  # the need's embedding, reused to score pending evidence
    states_missing: int = 0  # passages the background indexer still owes token states
    stages: Stages = field(default_factory=lambda: Stages())  # seconds per step


def counts_from_config(cfg) -> tuple[int, int, bool]:
    """(items returned by default, rerank window, whether to rerank): ``[retrieve.embedding]``
    result_count / candidate_count with the service's reranker, else rmtui's own settings."""
    svc = embedding_service(cfg)
    if svc is not None and svc.original:
        return svc.result_count, svc.candidate_count, True
    return (int(cfg.get("retrieve.top_k")), int(cfg.get("embedding.rerank_top")),
            bool(cfg.get("embedding.reranker_path")))


def params_from_config(cfg) -> RankParams:
    return RankParams(lexical_weight=float(cfg.get("retrieve.lexical_weight")),
                      neighbour_weight=float(cfg.get("retrieve.neighbour_weight")),
                      learned=bool(cfg.get("retrieve.learned_rerank")),
                      first_pass=check_first_pass(str(cfg.get("embedding.first_pass"))))


# -- model host ----------------------------------------------------------------------------

def cli_backend(root: MemoryRoot, cfg, *, wait_seconds: float | None = None):
    """The model host for a short-lived process: configured service, else the local warm one."""
    svc = embedding_service(cfg)
    if svc is not None:
        return ServiceClient(svc.url, svc.api_key, timeout=svc.timeout_seconds)
    if not cfg.get("embedding.local_service"):
        raise ServiceError("no embedding service is configured ([retrieve.embedding] url in rightmemory.toml "
                           "or embedding.service_url in rmtui.toml) and embedding.local_service is off")
    from rmtui.engine.retrieval.modelhost.embeddings import resolve_model_path

    path = resolve_model_path(cfg.get("embedding.model"), cfg.get("embedding.model_path"))
    wait = float(cfg.get("embedding.dense_budget_seconds")) if wait_seconds is None else wait_seconds
    local = ensure_local_service(path, cfg.get("embedding.reranker_path"),
                                 idle_timeout=float(cfg.get("embedding.idle_timeout_seconds")), wait_seconds=wait,
                                 backend=str(cfg.get("embedding.backend")), device=str(cfg.get("embedding.device")),
                                 precision=str(cfg.get("embedding.precision")))
    return ServiceClient(local.url, local.token or None, timeout=60.0, info=local.info)


# -- dense scores -------------------------------------------------------------------------

@dataclass
class DenseIndex:
    """The passages to embed for a corpus: their cache keys, owners, and (lazily) texts."""

    keys: np.ndarray  # "S32" digests; never index single elements (numpy strips trailing NULs)
    owner: np.ndarray
    _corpus: Corpus
    _params: RankParams
    _parts: list[str] | None = None
    _starts: np.ndarray | None = None

    @property
    def starts(self) -> np.ndarray:
        """Where each entry's passages start (asked by every query's dense scores)."""
        if self._starts is None:
            self._starts = run_starts(self.owner)
        return self._starts

    @property
    def parts(self) -> list[str]:
        if self._parts is None:
            texts = [dense_text(self._corpus, i, self._params) for i in range(len(self._corpus.entries))]
            self._parts, _ = passages(texts)
        return self._parts

    def part(self, i: int) -> str:
        """The text of passage ``i`` (only its entry's dense text is made, unless all were)."""
        if self._parts is not None:
            return self._parts[i]
        entry = int(self.owner[i])
        first = int(np.searchsorted(self.owner, entry))
        return split_passages(dense_text(self._corpus, entry, self._params))[i - first]


DENSE_VERSION = 4  # 4: each entry's keys ride along, by what its dense text is made from (bm25.DocKeys)


def _dense_idents(corpus: Corpus) -> list[str]:
    """What an entry's dense text is made from (without neighbours in it): content hash, kind,
    the nearest heading's title (the heading label, subjects.py) and all of them, as one string
    (the title's length before it, so no title can pass for another)."""
    titles = [h.title for h in corpus.headings]
    entries = corpus.entries
    cols: Iterable[tuple] = (zip(entries.column(6), entries.column(2), entries.column(11), entries.column(10),
                                 strict=True) if isinstance(entries, EntryList)
                             else ((e.hash, e.kind, e.context, e.ancestors) for e in entries))
    out = []
    for h, k, c, a in cols:
        t = titles[a[-1]] if a else ""
        out.append(f"{h}\0{k}\0{len(t)}\0{t}\0{c}")
    return out


def dense_index(corpus: Corpus, params: RankParams, cache_dir: Path | None = None) -> DenseIndex:
    """Passage keys of the corpus; cached per corpus fingerprint so a warm call hashes nothing,
    and kept in memory by a long-lived process, which then reads nothing either (at 50,000
    nodes the file's read and unmarshalling cost ~10 ms, half the dense stage)."""
    import hashlib
    import marshal

    settings = f"{DENSE_VERSION}|{params.context_in_dense}|{params.window_in_dense}"
    key = hashlib.sha256(f"{settings}|{corpus.fingerprint}".encode()).hexdigest()
    path = cache_dir / "dense.bin" if cache_dir is not None else None
    memo = _DENSE_MEMO.get(str(path)) if path is not None else None
    if memo is not None and memo[0] == key:
        return DenseIndex(memo[1], memo[2], corpus, params, _starts=memo[3])
    previous = None
    if path is not None:
        try:
            with collector_paused():
                head = marshal.loads(path.read_bytes())
            if head.get("key") == key:
                found = DenseIndex(np.frombuffer(head["keys"], dtype=KEY_DTYPE),
                                   np.frombuffer(head["owner"], dtype=np.int64), corpus, params)
                _DENSE_MEMO[str(path)] = (key, found.keys, found.owner, found.starts)
                return found
            if head.get("settings") == settings and not params.window_in_dense:  # neighbours' words: no reuse
                old_keys = np.frombuffer(head["entry_keys"], dtype=KEY_DTYPE)
                previous = DocKeys(head["idents"], old_keys, np.zeros(len(old_keys), KEY_DTYPE),
                                   np.frombuffer(head["owner"], dtype=np.int64), np.frombuffer(head["keys"], KEY_DTYPE))
                previous = previous if previous.consistent(KEY_DTYPE) else None
        except (OSError, EOFError, ValueError, TypeError, KeyError, AttributeError):
            pass
    with collector_paused():
        idents = _dense_idents(corpus)

        def texts_of(i: int) -> tuple[str, list[str], None]:
            text = dense_text(corpus, i, params)
            return text, split_passages(text), None

        docs = doc_keys(idents, previous, texts_of, text_key, KEY_DTYPE)
    index = DenseIndex(docs.keys, docs.owner, corpus, params)
    if path is not None:
        from rmtui.engine.fsutil import atomic_write_bytes

        try:
            atomic_write_bytes(path, marshal.dumps({"key": key, "settings": settings, "keys": index.keys.tobytes(),
                                                    "owner": docs.owner.astype(np.int64).tobytes(), "idents": idents,
                                                    "entry_keys": docs.entry_keys.tobytes()}), durable=False)
        except (OSError, ValueError):
            pass
        index.keys.flags.writeable = index.owner.flags.writeable = False
        _DENSE_MEMO[str(path)] = (key, index.keys, index.owner, index.starts)
    return index


#: The last passage keys and owners of each cache folder, by the key of what they were made
#: from (settings and corpus fingerprint): read-only arrays, shared by every call that fits.
_DENSE_MEMO: dict[str, tuple[str, np.ndarray, np.ndarray, np.ndarray]] = {}


def fill_vectors(cache: VectorCache, index: DenseIndex, backend, *, deadline: float | None,
                 tokens: TokenStore | None = None,
                 lengths: Callable[[list[str]], list[int]] | None = None) -> int:
    """Embed what the caches lack, in batches, until done or past ``deadline``; return how many.

    ``tokens``: also the passages' token states (one forward pass gives both), when the model
    host can return them; a host that cannot leaves that store as it is. Passages that have a
    vector and lack only token states (a root cached before them) are embedded only without a
    ``deadline`` -- by the background indexer -- never inside a query's budget.

    Passages go shortest first, by ``lengths`` (the model's token counts) or else their text's
    length: each request, and each forward pass in it, then holds texts of about one length and
    the model pads little (at 10,000 nodes a quarter more tokens when they came in corpus order,
    a tenth by text length, a fifth of a percent by token count)."""
    _, missing = cache.rows(index.keys)
    lacking = set(missing)
    if tokens is not None and deadline is None:
        lacking.update(tokens.missing(index.keys))
    if not lacking:
        return 0
    blob = index.keys.tobytes()
    todo: dict[bytes, str] = {}
    for i in sorted(lacking):
        key = blob[32 * i:32 * i + 32]
        if key not in todo:
            todo[key] = index.part(i)
    live = [blob[i:i + 32] for i in range(0, len(blob), 32)]
    items = list(todo.items())
    size = lengths([t for _, t in items]) if lengths is not None and len(items) > 1 else [len(t) for _, t in items]
    items = [items[i] for i in sorted(range(len(items)), key=size.__getitem__)]
    done = 0
    batch = max(1, min(64, backend.info().max_batch_size))
    pending: dict[bytes, np.ndarray] = {}
    pending_states: dict[bytes, np.ndarray] = {}
    last_flush = time.monotonic()

    def flush() -> None:
        # token states first: a concurrent query that sees a passage's vector sees its states too
        # (else it would rank with the weights fitted without them)
        if tokens is not None:
            tokens.add(pending_states, live)
        cache.add(pending, live)

    for off in range(0, len(items), batch):
        if deadline is not None and time.monotonic() >= deadline:
            break
        chunk = items[off:off + batch]
        got = backend.embed_tokens([t for _, t in chunk], "passage") if tokens is not None else None
        if got is None:
            tokens = None  # the host has no token states: vectors only
            vecs = backend.embed([t for _, t in chunk], "passage")
        else:
            vecs, states = got
            pending_states.update((k, quantize(st)) for (k, _), st in zip(chunk, states, strict=True))
        for (k, _), v in zip(chunk, vecs, strict=True):
            pending[k] = v
        done += len(chunk)
        progress.report("embedding memory passages", done, len(items))
        if time.monotonic() - last_flush > 5.0:  # long fills persist progress as they go
            flush()
            pending, pending_states, last_flush = {}, {}, time.monotonic()
    flush()
    return done


def token_store(cache_dir: Path, backend, identity: str) -> TokenStore | None:
    """The passages' token states of this model, when the host can give them."""
    return TokenStore.open(cache_dir, identity) if hasattr(backend, "embed_tokens") else None


@dataclass
class DenseScores:
    """Cosine of the need with each entry's best passage, and what it was computed from."""

    scores: np.ndarray
    coverage: float  # share of the passages with a cached vector
    index: DenseIndex
    per_passage: np.ndarray
    cache: VectorCache
    tokens: TokenStore | None = None  # the passages' token states, when the host gives them
    states_missing: int = 0  # passages without token states (left to the background indexer)
    static: bool = False  # the missing passages were scored by the static first pass
    static_note: str | None = None  # why the static first pass could not serve

    def _best(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each entry's best passage for the need, and whether it has one."""
        owner = self.index.owner
        start = np.searchsorted(owner, entries, side="left")
        end = np.searchsorted(owner, entries, side="right")
        best = np.asarray([a + int(np.argmax(self.per_passage[a:b])) if b > a else 0
                           for a, b in zip(start.tolist(), end.tolist(), strict=True)], dtype=np.int64)
        return best, end > start

    def best_vectors(self, entries: np.ndarray) -> np.ndarray:
        """The vector of each entry's best passage for the need (zeros where not embedded)."""
        best, has = self._best(entries)
        if not self.cache.dim:
            return np.zeros((len(entries), 0), dtype=np.float32)
        # the rows of the whole key set: the lookup scoring just made (memoised), not a new one
        rows, missing = self.cache.rows(self.index.keys)
        vecs = np.array(self.cache.matrix[rows[best]], dtype=np.float32)
        absent = np.zeros(len(rows), dtype=bool)
        absent[missing] = True
        vecs[absent[best] | ~has] = 0.0
        return vecs

    def best_states(self, entries: np.ndarray) -> list[np.ndarray | None]:
        """The int8 token states of each entry's best passage (None where not stored)."""
        if self.tokens is None:
            return [None] * len(entries)
        best, has = self._best(entries)
        got = self.tokens.get(self.index.keys[best])
        return [g if h else None for g, h in zip(got, has.tolist(), strict=True)]


def dense_scores(corpus: Corpus, need: str, backend, params: RankParams, cache_dir: Path,
                 *, deadline: float | None, query: np.ndarray | None = None, states: bool = True,
                 lexical: np.ndarray | None = None) -> DenseScores:
    """Cosine of the need (``query``: its vector, when already embedded) with each entry's
    best passage; coverage of the cached vectors. ``states``: also keep the passages' token
    states (for the second stage) when the host gives them. ``lexical``: the entries' BM25
    scores, whose leaders are scored exactly where a large root is scored coarsely first.

    With ``params.first_pass == "static"`` and passages still lacking a vector, every passage
    gets a static vector first (seconds; static_pass.py) and the missing ones are scored by it,
    mapped onto the model's cosines by rank; a complete index never touches the static model."""
    info = backend.info()
    index = dense_index(corpus, params, cache_dir)
    cache = VectorCache.open(cache_dir, info.embedding_model)
    tokens = token_store(cache_dir, backend, info.embedding_model) if states else None
    first = None
    note = None
    if params.first_pass == "static" and static_worth_it(len(cache.rows(index.keys)[1])):
        try:
            first = fill_static(cache_dir, index.keys, index.part)
        except EngineError as exc:
            note = f"{exc.message}; the passages not yet embedded are ranked lexically"
    fill_vectors(cache, index, backend, deadline=deadline, tokens=tokens)
    q = backend.embed([need], "query")[0] if query is None else query
    per_passage, missing = cache.scores(index.keys, q, partial(_exactly_scored, corpus, index, lexical,
                                                                  params.neighbour_span))
    if first is not None and missing:
        per_passage = blend(per_passage, missing, first.scores(index.keys, need))
    scores = best_per_entry(per_passage, index.owner, len(corpus.entries), index.starts)
    coverage = 1.0 - (len(missing) / len(index.keys)) if len(index.keys) else 1.0
    gap = len(tokens.missing(index.keys)) if tokens is not None else 0
    return DenseScores(scores, coverage, index, per_passage, cache, tokens, gap,
                       static=first is not None and bool(missing), static_note=note)


#: Entries by BM25 score whose passages a coarse dense pass scores exactly (fusion may lift them).
LEXICAL_LEADERS = 128


def _exactly_scored(corpus: Corpus, index: DenseIndex, lexical: np.ndarray | None, span: int,
                    best: np.ndarray) -> np.ndarray:
    """The passages whose exact dense score fusion reads near the top (:mod:`coarse`): the
    best passages' (``best``), the :data:`LEXICAL_LEADERS`', and those of the neighbours
    (``span`` on each side) each of their entries borrows from."""
    want = np.zeros(len(corpus.entries), dtype=bool)
    want[index.owner[best]] = True
    if lexical is not None and len(lexical):
        lead = at_least(lexical, LEXICAL_LEADERS)
        want[lead[lexical[lead] > 0]] = True
    prev, nxt, _ = corpus.neighbour_arrays()
    back = ahead = np.flatnonzero(want)
    for _ in range(max(1, span)):
        back, ahead = prev[back], nxt[ahead]
        back, ahead = back[back >= 0], ahead[ahead >= 0]
        want[back] = want[ahead] = True
    return np.flatnonzero(want[index.owner])


@dataclass
class FirstStage:
    """The scores of the first stage, and the signals the second stage reads (hybrid only)."""

    lexical: np.ndarray
    dense: np.ndarray | None
    coverage: float | None
    query_vec: np.ndarray | None
    mode: str
    signals: Signals | None
    states_missing: int = 0
    stages: Stages = field(default_factory=lambda: Stages())
    static: bool = False  # the passages the model has not embedded yet were scored by the static first pass
    static_note: str | None = None


def embed_need(backend, need: str, *, states: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """The need's vector, and its token states (int8-rounded, as the passages' are stored)
    when ``states`` and the host gives them: one forward pass for both."""
    got = backend.embed_tokens([need], "query") if states and hasattr(backend, "embed_tokens") else None
    if got is None:
        return backend.embed([need], "query")[0], None
    return got[0][0], dequantize(quantize(got[1][0]))


def first_stage(root: MemoryRoot, need: str, *, corpus: Corpus, backend, params: RankParams,
                deadline: float | None = None) -> FirstStage:
    """BM25 (own text and neighbour window) and dense scores of every entry for ``need``."""
    stages = Stages()
    cache_dir = root.runtime / "cache"
    lex_index = load_lexical(corpus, params, cache_dir)
    qtokens = query_tokens(need, params)
    zeros = np.zeros(len(corpus.entries), np.float32)
    own, window = lex_index.score_parts(qtokens) if not params.dense_only else (zeros, zeros)
    lexical = lex_index.combine(own, window) if not params.dense_only else zeros
    stages.lap("bm25")
    if backend is None or params.lexical_only or not corpus.entries:
        return FirstStage(lexical, None, None, None, "lexical", None, stages=stages)
    # token states serve only the learned second stage: without it none are asked or stored
    qvec, need_states = embed_need(backend, need, states=params.learned and not params.dense_only)
    stages.lap("query embedding")
    got = dense_scores(corpus, need, backend, params, cache_dir, deadline=deadline, query=qvec,
                       states=need_states is not None, lexical=lexical)
    stages.lap("dense")
    if params.dense_only:
        return FirstStage(lexical, got.scores, got.coverage, qvec, "dense", None, stages=stages,
                          static=got.static, static_note=got.static_note)
    sig = Signals(lex_index, qtokens, own, window, lexical, got.scores, got.best_vectors, params.stem,
                  need_states, got.best_states if got.tokens is not None else None,
                  names=need_names(need, stem=params.stem), asks_time=asks_time(need), model=got.cache.identity)
    return FirstStage(lexical, got.scores, got.coverage, qvec, "hybrid", sig, got.states_missing, stages,
                      got.static, got.static_note)


def search(root: MemoryRoot, need: str, *, top: int, corpus: Corpus, backend, cfg,
           params: RankParams | None = None, deadline: float | None = None) -> SearchOutcome:
    """Rank the corpus for ``need``: the product's ranking path (the bench calls it too)."""
    params = params or params_from_config(cfg)
    warnings: list[str] = []
    first = first_stage(root, need, corpus=corpus, backend=backend, params=params, deadline=deadline)
    lexical, dense, coverage, qvec, mode = first.lexical, first.dense, first.coverage, first.query_vec, first.mode
    second = partial(stage2.rerank, corpus, first.signals) if params.learned and first.signals else None
    if coverage is not None and coverage < 1.0:
        rest = "by the static first pass" if first.static else "lexically"
        warnings.append(f"dense index incomplete ({coverage:.0%} of passages embedded); "
                        f"the rest is ranked {rest} while indexing continues")
    if first.static_note:
        warnings.append(first.static_note)
    svc = embedding_service(cfg)
    _, window, rerank = counts_from_config(cfg)
    limit = max(top, window)
    stages = first.stages
    ranked = rank(corpus, lexical, dense, params, limit, second)
    stages.lap("fusion and second stage")
    min_sim = float(cfg.get("retrieve.min_similarity"))
    matched = bool(corpus.entries) and (bool((lexical > 0).any())
                                        or (dense is not None and bool((dense >= min_sim).any())))
    if backend is not None and ranked and rerank and not params.lexical_only:
        ranked = _rerank(corpus, need, ranked, backend, params, window,
                         strict=svc is not None and svc.original)
        stages.lap("reranker")
    min_score = float(cfg.get("retrieve.min_score"))
    ranked = [r for r in ranked if r.score > min_score][:top]  # a zero score is no match at all
    return SearchOutcome(corpus, ranked, mode, warnings, coverage, matched and bool(ranked), qvec,
                         first.states_missing, stages)


def _rerank(corpus: Corpus, need: str, ranked: list[Ranked], backend, params: RankParams, k: int,
            *, strict: bool = False) -> list[Ranked]:
    info = backend.info()
    if strict and k > info.max_candidates:
        raise UsageError(f"[retrieve.embedding] candidate_count = {k} exceeds what the embedding service's "
                         f"reranker takes (max_candidates {info.max_candidates})")
    if not info.reranker_is_cross_encoder:
        return ranked
    head = ranked[:min(k, info.max_candidates)]
    docs = [split_passages(dense_text(corpus, r.index, params))[0] or corpus.entries[r.index].key for r in head]
    order = backend.rerank(need, docs)
    return [head[i] for i in order] + ranked[len(head):]


# -- pending evidence -----------------------------------------------------------------------
#
# Evidence waits in the queue until an Update reconciles it, often for an hour or more; until
# then an agent could not find what it (or another agent) just reported. Pending evidence is
# therefore scored too, by the same BM25 and dense backends, as a small corpus of its own
# (``.runtime/cache/pending/``), and shown after memory, apart from it.

#: At most this many pending items are shown, so that fresh evidence never crowds out memory.
PENDING_SHOWN = 3
#: A pending item is shown only when it holds at least this share of the need's words ...
PENDING_MIN_COVERAGE = 0.5
#: ... or when its best passage is at least this close to the need (cosine).
PENDING_MIN_SIMILARITY = 0.4
#: Time to embed pending evidence not yet in its vector cache (a few short texts, once each).
PENDING_BUDGET_SECONDS = 5.0


def search_pending(root: MemoryRoot, need: str, *, backend, params: RankParams, query: np.ndarray | None,
                   deadline: float | None, warnings: list[str]) -> list[PendingItem]:
    """The pending evidence that matters for ``need``: best first, at most :data:`PENDING_SHOWN`."""
    pending = load_pending(root)
    if not pending.refs:
        return []
    corpus = pending.corpus
    cache_dir = root.runtime / "cache" / "pending"
    # pending items have no neighbours to widen with; the few missing vectors the model embeds
    params = replace(params, lexical_window=0, first_pass="off")
    lex_key = lexical_key(corpus, params)
    lex_index = pending.indexes.get(lex_key)
    if not isinstance(lex_index, LexicalIndex):
        lex_index = pending.indexes[lex_key] = load_lexical(corpus, params, None)
    qtokens = query_tokens(need, params)
    lexical = lex_index.scores(qtokens) if not params.dense_only else np.zeros(len(corpus.entries), np.float32)
    dense = None
    if backend is not None and not params.lexical_only:
        try:
            dense = dense_scores(corpus, need, backend, params, cache_dir, deadline=deadline, query=query,
                                 states=False).scores
        except ServiceError as exc:
            warnings.append(f"{exc.message}; pending evidence ranked with BM25 only")
    # no neighbours or headings among pending items: each stands alone
    fused = fuse(corpus, lexical, dense, replace(params, neighbour_weight=0.0, heading_weight=0.0))
    # the share of the need's words: a floor that, unlike BM25 normalised over a handful of
    # items, does not depend on what else is pending
    shown = lex_index.coverage(qtokens) >= PENDING_MIN_COVERAGE
    if dense is not None:
        shown |= dense >= PENDING_MIN_SIMILARITY
    shown &= fused > 0
    order = sorted(np.flatnonzero(shown).tolist(), key=lambda i: (-float(fused[i]), -i))  # ties: newest first
    out = []
    for i in order[:PENDING_SHOWN]:
        ref = pending.refs[i]
        out.append(PendingItem(ref.uid, ref.session, ref.display_id, ref.submitted_at, ref.state,
                               pending.text(i), float(fused[i])))
    return out


def _with_pending(result: RetrieveResult, items: list[PendingItem], max_chars: int) -> None:
    """Add the pending section after the memory text, as many items as fit the output limit
    (memory always comes first: pending evidence never makes a retrieval fail)."""
    blocks = [item.block() for item in items]
    while blocks:
        section = pending_section(blocks)
        if len(result.text) + 2 + len(section) <= max_chars:
            result.text = f"{result.text}\n\n{section}"
            break
        blocks.pop()
    if len(blocks) < len(items):
        result.warnings.append(f"{len(items) - len(blocks)} pending evidence item(s) left out: "
                               "retrieve.max_output_chars reached")
    result.pending = [item.to_json() for item in items[:len(blocks)]]


# -- retrieve --------------------------------------------------------------------------------

def _choose_backend(root: MemoryRoot, cfg, backend, warnings: list[str]):
    """Resolve the model host; degrade to BM25 with a warning when none can be had."""
    if backend is not None:
        return backend
    try:
        b = cli_backend(root, cfg)
        b.info()
        return b
    except ServiceError as exc:
        if _agent_fallback_ready(cfg):
            raise _UseAgent(exc.message) from exc
        if not cfg.get("embedding.fallback_lexical"):
            raise
        warnings.append(f"{exc.message}; ranking with BM25 only")
        return None


def retrieve(root: MemoryRoot, session: str, need: str, *, top: int | None = None,
             include_returned: bool = False, backend=None, params: RankParams | None = None,
             record: bool = True, include_pending: bool = True) -> RetrieveResult:
    """The memory that matters for ``need``, as exact source text, for ``session``; with
    ``include_pending``, also the best matching evidence not yet reconciled, apart from it."""
    from rmtui.engine.evidence.queue import check_session_id

    t0 = time.monotonic()
    check_session_id(session)
    if not need or not need.strip():
        raise UsageError("the need must not be empty")
    cfg = root.config()
    if cfg.get("retrieve.backend") == "agent":
        return _agent(root, session, need, top, include_returned, [], include_pending)
    top = int(top if top is not None else counts_from_config(cfg)[0])
    if top < 1:
        raise UsageError("--top must be at least 1")
    max_chars = int(cfg.get("retrieve.max_output_chars"))
    warnings: list[str] = []
    deadline = time.monotonic() + float(cfg.get("embedding.dense_budget_seconds"))
    if indexer_running(root):
        deadline = time.monotonic()  # the background indexer is on it: embed only the need
    chosen = None
    tried = False
    timings: dict = {}
    for _attempt in (0, 1):
        with file_lock(root.lock_path, shared=True):
            corpus = load_corpus(root.path)
            commit = head_commit(root.path)
        timings["corpus"] = time.monotonic() - t0
        if not tried and len(corpus.entries):  # an empty memory needs no model
            tried = True
            try:
                chosen = _choose_backend(root, cfg, backend, warnings)
            except _UseAgent as exc:
                return _agent(root, session, need, top, include_returned,
                              warnings + [f"{exc}; answered by agent retrieval"], include_pending)
            timings["backend"] = time.monotonic() - t0
        try:
            outcome = search(root, need, top=top, corpus=corpus, backend=chosen, cfg=cfg, params=params,
                             deadline=deadline)
        except ServiceError as exc:
            if backend is not None or not cfg.get("embedding.fallback_lexical"):
                raise
            warnings.append(f"{exc.message}; ranking with BM25 only")
            chosen = None
            outcome = search(root, need, top=top, corpus=corpus, backend=None, cfg=cfg, params=params)
        timings["search"] = time.monotonic() - t0
        stages = outcome.stages
        with file_lock(root.lock_path, shared=True):
            if not current_fingerprint(root.path, corpus):
                continue  # memory changed while we ranked: once more on the new corpus
            stages.lap("fingerprint re-check")
            result = _deliver(root, session, outcome, commit, include_returned, max_chars, record)
        stages.lap("render and record")
        result.warnings = warnings + outcome.warnings
        if include_pending:  # read after memory, so evidence consumed by a landed Update is gone
            items = search_pending(root, need, backend=chosen, params=params or params_from_config(cfg),
                                   query=outcome.query_vec, deadline=time.monotonic() + PENDING_BUDGET_SECONDS,
                                   warnings=result.warnings)
            _with_pending(result, items, max_chars)
            timings["pending"] = time.monotonic() - t0
            stages.lap("pending evidence")
        if (outcome.dense_coverage is not None and outcome.dense_coverage < 1.0) or outcome.states_missing:
            spawn_indexer(root)
        timings["total"] = time.monotonic() - t0
        timings["stages"] = dict(stages)
        result.timings = timings
        return result
    raise ConflictError("memory changed during both retrieval attempts; retry the query")


def warm_up(root: MemoryRoot, backend) -> None:
    """Read what a retrieve reads (corpus, BM25 and dense indexes, vector and token caches,
    pending evidence) and run the model once, answering nobody and recording nothing: a
    long-lived front calls it while it starts, so its first answer costs what a warm one does.
    It embeds only its own need; the corpus's missing vectors are the indexer's."""
    cfg = root.config()
    with file_lock(root.lock_path, shared=True):
        corpus = load_corpus(root.path)
    params = params_from_config(cfg)
    need = "warm up retrieval"
    outcome = search(root, need, top=1, corpus=corpus, backend=backend, cfg=cfg, params=params,
                     deadline=time.monotonic())
    search_pending(root, need, backend=backend, params=params, query=outcome.query_vec, deadline=time.monotonic(),
                   warnings=[])
    if outcome.mode == "hybrid":  # a large root's later calls scan its vectors coarsely first
        VectorCache.open(root.runtime / "cache", backend.info().embedding_model).prepare()


def preload(root: MemoryRoot, identity: str) -> None:
    """Read what a retrieve of ``root`` reads before it needs the model (corpus, BM25 and
    dense indexes, the vector and token caches of the model ``identity``), into this
    process's memos: the warm service does it while its model loads, so that its first
    answer does not wait for these reads after the model is ready."""
    params = params_from_config(root.config())
    with file_lock(root.lock_path, shared=True):
        corpus = load_corpus(root.path)
    cache_dir = root.runtime / "cache"
    load_lexical(corpus, params, cache_dir)
    if params.lexical_only or not corpus.entries:
        return
    index = dense_index(corpus, params, cache_dir)
    VectorCache.open(cache_dir, identity).rows(index.keys)  # the file, and the row lookup memo
    if params.learned:
        TokenStore.open(cache_dir, identity)


def _deliver(root: MemoryRoot, session: str, outcome: SearchOutcome, commit: str | None,
             include_returned: bool, max_chars: int, record: bool) -> RetrieveResult:
    corpus = outcome.corpus
    units: list[Unit] = []
    status: dict[str, str] = {}
    skipped: list[str] = []
    notices: list[dict] = []
    notice_lines: list[str] = []
    with DeliveryHistory(root.runtime) as hist:
        prev = hist.delivered(session)
        if outcome.matched:
            ranked = [unit_of(corpus.entries[r.index], r.score) for r in outcome.ranked]
            units, skipped, status = filter_delivered(ranked, prev, include_returned)
            notices += [{"id": u.id, "key": u.key, "change": "changed", "selected": True}
                        for u in units if status[u.key] == "changed"]
        selected = {u.key for u in units} | set(skipped)
        current = corpus.key_hashes() if prev else {}
        noticed: dict[str, str] = {}
        for key, d in sorted(prev.items()):
            if key in selected or key.startswith("recent:"):
                continue
            now = current.get(key)
            if now is None and d.noticed_hash != "removed":
                noticed[key] = "removed"
                notices.append({"id": d.item_id, "key": key, "change": "removed", "selected": False})
                notice_lines.append(f"Notice: `{key}`, delivered earlier in this session, no longer exists.")
            elif now is not None and now != d.hash and d.noticed_hash != now:
                noticed[key] = now
                notices.append({"id": d.item_id, "key": key, "change": "changed", "selected": False})
                notice_lines.append(f"Notice: `{key}`, delivered earlier in this session, has changed "
                                    "(retrieve it again to see the current text).")
        if units:
            rendered = render(corpus, units, max_chars=max_chars, notices=notice_lines)
            text = rendered.text
        elif skipped:
            text = already_delivered_text(skipped)
            if notice_lines:
                text += "\n\n" + "\n".join(notice_lines)
        else:
            text = render(corpus, [], max_chars=max_chars, notices=notice_lines,
                          empty_text=NO_STRONG_MATCH).text if notice_lines else NO_STRONG_MATCH
            if notice_lines:
                text = NO_STRONG_MATCH + "\n\n" + text
        if record:
            hist.record(session, [(u.key, u.id, u.hash) for u in units], commit, noticed)
    results = [{"id": u.id, "key": u.key, "kind": u.kind, "score": round(float(u.score or 0.0), 6),
                "file": u.file, "start_line": u.start_line, "end_line": u.end_line, "status": status[u.key]}
               for u in units]
    return RetrieveResult(text, results, commit, corpus.fingerprint, outcome.mode, notices, skipped,
                          dense_coverage=outcome.dense_coverage)


# -- background indexing ------------------------------------------------------------------------

def indexer_running(root: MemoryRoot) -> bool:
    fd = try_lock(root.runtime / "cache" / "indexer.lock")
    if fd is None:
        return True
    os.close(fd)
    return False


def spawn_indexer(root: MemoryRoot) -> bool:
    """Start a detached process that embeds the rest of the corpus, unless one runs."""
    lock = root.runtime / "cache" / "indexer.lock"
    fd = try_lock(lock)
    if fd is None:
        return False
    os.close(fd)
    argv = [sys.executable, "-m", "rmtui", "--headless", "retrieve-index", "--root", str(root.path)]
    try:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        return False
    return True


def _token_counter(cfg) -> Callable[[list[str]], list[int]] | None:
    """The local model's tokenizer, counting (for the order of the index build's requests); None
    for a configured service, whose model this process does not know. The tokenizer is read on
    the first count: a re-index after a one-node change orders nothing and never reads it."""
    if embedding_service(cfg) is not None:
        return None
    counter: list[Callable[[list[str]], list[int]] | None] = []

    def count(texts: list[str]) -> list[int]:
        if not counter:
            from rmtui.engine.retrieval.modelhost.onnx_model import token_counter
            from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path

            try:
                counter.append(token_counter(resolve_model_path(cfg.get("embedding.model"),
                                                                cfg.get("embedding.model_path"))))
            except EngineError:
                counter.append(None)
        found = counter[0]
        return found(texts) if found is not None else [len(t) for t in texts]

    return count


def index_root(root: MemoryRoot, backend=None, *, params: RankParams | None = None,
               once_locked: Callable[[], object] | None = None) -> dict:
    """Embed every passage of the current corpus that the cache lacks (one indexer at a time).

    ``once_locked`` runs when this indexer holds the indexer lock, before it reads anything:
    a long-lived front waits there for its first answer, so the indexer's work does not take
    the interpreter from it (retrieve sees the lock and leaves the rest to the indexer)."""
    lock = root.runtime / "cache" / "indexer.lock"
    fd = try_lock(lock)
    if fd is None:
        return {"indexed": 0, "state": "busy"}
    try:
        if once_locked is not None:
            once_locked()
        cfg = root.config()
        params = params or params_from_config(cfg)
        with file_lock(root.lock_path, shared=True):
            corpus = load_corpus(root.path)
        index = dense_index(corpus, params, root.runtime / "cache")
        if backend is None:
            backend = cli_backend(root, cfg, wait_seconds=120.0)
        info = backend.info()
        cache = VectorCache.open(root.runtime / "cache", info.embedding_model)
        static = 0
        # seconds, before the model's minute: the queries meanwhile rank every passage with it
        if params.first_pass == "static" and static_worth_it(len(cache.rows(index.keys)[1])):
            try:
                static = fill_static(root.runtime / "cache", index.keys, index.part).filled
            except EngineError:
                pass  # the queries say why; the model's index is built all the same
        n = fill_vectors(cache, index, backend, deadline=None,
                         tokens=token_store(root.runtime / "cache", backend, info.embedding_model)
                         if params.learned else None, lengths=_token_counter(cfg))
        load_lexical(corpus, params, root.runtime / "cache")
        return {"indexed": n, "state": "done", "entries": len(corpus.entries), "model": info.embedding_model,
                "static_indexed": static}
    finally:
        os.close(fd)
