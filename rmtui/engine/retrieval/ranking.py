"""Ranking: BM25 (bm25.py) fused with dense similarity, smoothed over neighbouring entries.

Why each piece is here:
- BM25 finds exact identifiers, file names and error strings that embeddings blur.
- Dense similarity finds paraphrases that share no word with the need.
- Each entry is indexed with the titles of its enclosing headings (scope, dates), and its
  score borrows a share of its neighbours' scores: a memory is often only understandable
  with the entries around it (an answer right after the question it answers).
- BM25 also scores each entry as a window with its neighbours' words (a second index):
  the words of a need are often split between adjacent entries (a question and its
  answer, a note and its follow-up). Results stay exact entries; only scoring widens.
- Dense vectors embed the entry's own text without heading titles: a short entry's
  vector is otherwise dominated by the shared heading (measured: dense-only R@10 +0.01).
- A word capitalised inside the need (not the first word of a sentence) -- a name, a
  module, an acronym -- counts twice in the BM25 query: it is what the need is about.
- Fusion is a weighted sum of per-query normalised scores; weights are general, measured
  on the LoCoMo bench (bench/locomo.py), never tuned per file.

The postings (bm25.py) are updated only when the corpus changes, from term counts kept
per passage so that only changed passages are tokenised again; they are stored in
``.runtime/cache/`` and a query scores the postings of its own terms with numpy alone.
"""

from __future__ import annotations

import hashlib
import marshal
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rmtui.engine.retrieval import bm25
from rmtui.engine.retrieval.bm25 import TermRows
from rmtui.engine.retrieval.corpus import Corpus, Entry, EntryList, collector_paused, slug_words, split_passages
from rmtui.engine.retrieval.subjects import dense_label
from rmtui.engine.retrieval.topk import largest

LEXICAL_VERSION = 11  # 11: ids and counts stored narrow; 10: a CRC-32 of the arrays; 9: counts by term
_TOKEN_RE = re.compile(r"(?u)\b\w[\w.]*\w\b|\b\w\w+\b")

# English stop words (those of bm25s plus question words): dropped from documents and
# queries alike, so "what did she say" does not match every turn of a conversation.
STOPWORDS = frozenset("""
a an and are as at be but by for if in into is it no not of on or such that the their then there
these they this to was will with i me my myself we our ours ourselves you your yours yourself
yourselves he him his himself she her hers herself its itself them theirs themselves what which who
whom those am were been being have has had having do does did doing because until while about
against between through during before after above below from up down out off over under again
further once here when where why how all any both each few more most other some nor only own same
so than too very s t can just don should now would could also
""".split())


@dataclass(frozen=True)
class RankParams:
    """Knobs of the ranking; the defaults are the measured best general setting."""

    lexical_weight: float = 0.4  # share of the lexical score in the fused score
    neighbour_weight: float = 0.1  # share of each neighbour's score an entry borrows
    context_in_lexical: bool = True  # index heading titles with each entry
    context_in_dense: bool = False  # embed "heading titles: text" (off: titles blur short entries)
    lexical_window: int = 2  # BM25 also on each entry with this many neighbours' words per side
    window_weight: float = 0.5  # share of that window score (each normalised) in the lexical score
    window_in_dense: int = 0  # embed this many neighbours on each side with the entry
    stem: bool = True
    lexical_only: bool = False
    dense_only: bool = False
    fusion: str = "weighted"  # "weighted" sum of normalised scores, or "rrf" (reciprocal rank, k=60)
    neighbour_span: int = 2  # how many neighbours on each side lend score (each further one half as much)
    heading_weight: float = 0.3  # share of the best score under the same heading an entry borrows
    proper_noun_repeat: int = 2  # a capitalised word inside the need counts this many times in BM25
    bm25_k1: float = 1.5
    bm25_b: float = 0.3  # entries are short and uneven: length says little about relevance
    learned: bool = True  # re-order the best candidates by the learned second stage (stage2.py)
    first_pass: str = "static"  # "static": passages the model has not embedded yet get static scores (static_pass.py)


DEFAULT_PARAMS = RankParams()


# -- tokens -------------------------------------------------------------------

_stemmer = None


def _stem_words(words: list[str]) -> list[str]:
    global _stemmer
    if _stemmer is None:
        import Stemmer  # PyStemmer: a small C extension, cheap to import

        _stemmer = Stemmer.Stemmer("english")
    return _stemmer.stemWords(words)


def _expand(tok: str) -> list[str]:
    """The index words of one raw token (before stemming): identifiers also as their parts."""
    tok = tok.strip("._")
    if not tok:
        return []
    parts = [p for p in re.split(r"[._]+", tok) if p]
    if len(parts) > 1:
        return [tok] + [p for p in parts if len(p) > 1 and p not in STOPWORDS]
    return [tok] if len(tok) > 1 and tok not in STOPWORDS else []


def tokenize_many(texts: list[str], *, stem: bool = True,
                  memo: dict[str, list[str]] | None = None) -> list[list[str]]:
    """Tokenize many texts; each distinct raw token is expanded and stemmed once (per ``memo``)."""
    memo = {} if memo is None else memo
    out: list[list[str]] = []
    for text in texts:
        toks: list[str] = []
        for raw in _TOKEN_RE.findall(text.lower()):
            words = memo.get(raw)
            if words is None:
                words = _expand(raw)
                if stem and words:
                    words = _stem_words(words)
                memo[raw] = words
            toks.extend(words)
        out.append(toks)
    return out


def tokenize(text: str, *, stem: bool = True) -> list[str]:
    """Lower-case words without stop words; identifiers also split into their parts."""
    return tokenize_many([text], stem=stem)[0]


# a capitalised word that does not start the text or a sentence
_PROPER_RE = re.compile(r"(?<!^)(?<![.?!] )\b[A-Z][\w'-]*")


def need_names(need: str, *, stem: bool = True) -> frozenset[str]:
    """The tokens of a need's capitalised words inside a sentence: the names, modules and
    acronyms it asks about."""
    return frozenset(t for words in tokenize_many(_PROPER_RE.findall(need.strip()), stem=stem) for t in words)


def query_tokens(need: str, params: RankParams) -> list[str]:
    """The BM25 query of a need: its tokens, those of capitalised words inside a sentence
    (names, modules, acronyms) repeated ``proper_noun_repeat`` times in all."""
    need = need.strip()
    toks = tokenize(need, stem=params.stem)
    if params.proper_noun_repeat <= 1:
        return toks
    proper = need_names(need, stem=params.stem)
    extra = [t for t in toks if t in proper] * (params.proper_noun_repeat - 1)
    return toks + extra


# -- what each entry is scored on ------------------------------------------------

def lexical_text(entry: Entry, params: RankParams) -> str:
    parts = [slug_words(entry.id) if entry.kind != "source" else entry.label, entry.text]
    if params.context_in_lexical and entry.context:
        parts.insert(0, entry.context)
    return "\n".join(p for p in parts if p)


def dense_text(corpus: Corpus, index: int, params: RankParams) -> str:
    entry = corpus.entries[index]
    body = entry.text
    if params.window_in_dense:
        before: list[str] = []
        after: list[str] = []
        cur = entry.prev
        for _ in range(params.window_in_dense):
            if cur < 0:
                break
            before.insert(0, corpus.entries[cur].text)
            cur = corpus.entries[cur].prev
        cur = entry.next
        for _ in range(params.window_in_dense):
            if cur < 0:
                break
            after.append(corpus.entries[cur].text)
            cur = corpus.entries[cur].next
        body = "\n".join([*before, body, *after])
    if params.context_in_dense and entry.context:
        return f"{entry.context}: {body}"
    if label := dense_label(corpus, entry):
        return f"{label}: {body}"  # the subject written last or only in its heading, first (subjects.py)
    return body


def passages(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """Split entry texts into scoring passages; return them and their entry index."""
    out: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        for p in split_passages(text):
            out.append(p)
            owner.append(i)
    return out, np.asarray(owner, dtype=np.int64)


def run_starts(owner: np.ndarray) -> np.ndarray:
    """Where each entry's run of passages starts in ``owner`` (:func:`best_per_entry`)."""
    if not len(owner):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))


def best_per_entry(passage_scores: np.ndarray, owner: np.ndarray, n: int,
                   starts: np.ndarray | None = None) -> np.ndarray:
    """An entry scores as its best passage (0 without one). ``owner`` is in entry order, as
    :func:`passages` makes it, so each entry's passages are one run: one ``reduceat``.
    ``starts``: :func:`run_starts` of ``owner``, kept by an index that asks every query."""
    out = np.full(n, -np.inf if passage_scores.size else 0.0, dtype=np.float32)
    if passage_scores.size:
        scores = passage_scores.astype(np.float32, copy=False)
        starts = run_starts(owner) if starts is None else starts
        if len(starts) == len(scores):  # one passage per entry: each run is its own best
            out[owner] = scores
        else:
            out[owner[starts]] = np.maximum.reduceat(scores, starts)
    out[~np.isfinite(out)] = 0.0
    return out


# -- lexical index ---------------------------------------------------------------

@dataclass
class LexicalIndex:
    """The postings of every term (which passages hold it, how often), and the term counts
    of each passage they were grouped from (bm25.py): a changed corpus re-tokenises only its
    changed passages, and a query scores only the postings of its own terms."""

    key: str
    vocab: dict[str, int]
    tf: np.ndarray  # occurrences, grouped by term (term t's are [indptr[t]:indptr[t + 1]]); any integer type
    indices: np.ndarray  # the passage of each posting
    indptr: np.ndarray
    owner: np.ndarray  # passage -> entry index
    num_entries: int
    k1: float = 1.5
    b: float = 0.75
    window: LexicalIndex | None = None  # the same entries with their neighbours' words
    window_weight: float = 0.0
    rows: TermRows | None = None  # each passage's term counts, keyed by its text
    bare: TermRows | None = None  # the own words of entries that are neighbours (window parts)
    rows_key: str = ""  # what the rows depend on besides the text (tokenizer, settings)
    rebuilt: int = 0  # passages and windows tokenised or summed by this build (0: all reused)
    docs: bm25.DocKeys | None = None  # each entry's keys, by what its text is made from
    #: (idf per term, length norm per passage), made from the postings on the first query
    _weights: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)
    _starts: np.ndarray | None = field(default=None, repr=False, compare=False)  # run_starts(owner)

    @classmethod
    def build(cls, corpus: Corpus, params: RankParams, key: str,
              previous: LexicalIndex | None = None) -> LexicalIndex:
        """The index of ``corpus``; rows of ``previous`` (an index of an earlier version of
        it) are reused wherever a passage's text is the same."""
        rkey = rows_key(params)
        if previous is not None and (previous.rows_key != rkey or previous.rows is None):
            previous = None
        entries = corpus.entries
        docs = bm25.doc_keys(_idents(corpus), previous.docs if previous is not None else None,
                             lambda i: _texts(entries[i], params))
        owner = docs.owner
        if not len(owner):
            none = np.zeros(0, dtype=np.int32)
            return cls(key, {}, none, none, np.zeros(1, dtype=np.int64), owner, 0, params.bm25_k1, params.bm25_b)
        vocab = dict(previous.vocab) if previous is not None else {}
        memo: dict[str, list[str]] = {}
        first = np.searchsorted(owner, np.arange(len(entries)))  # an entry's first passage

        def part(j: int) -> str:  # the text of passage j, made only for a passage tokenised anew
            i = int(owner[j])
            return split_passages(lexical_text(entries[i], params))[j - int(first[i])]

        rows, made = bm25.update_rows(
            docs.keys, previous.rows if previous is not None else None,
            lambda pos: [t or ["\x00empty"] for t in tokenize_many([part(j) for j in pos], stem=params.stem,
                                                                     memo=memo)], vocab)
        window_rows = bare = None
        if params.lexical_window > 0 and params.window_weight > 0:
            old_window = previous.window if previous is not None else None
            window_rows, bare, more = _window_rows(
                corpus, rows, docs, params, vocab, memo, previous.bare if previous is not None else None,
                old_window.rows if old_window is not None else None)
            made += more
        vocab = bm25.compact(vocab, [r for r in (rows, bare) if r is not None],
                             (window_rows,) if window_rows is not None else ())
        idx = cls._scored(key, vocab, rows, owner, len(corpus.entries), params)
        idx.bare, idx.rows_key, idx.rebuilt, idx.docs = bare, rkey, made, docs
        if window_rows is not None:
            n = len(corpus.entries)
            idx.window = cls._scored(key, vocab, window_rows, np.arange(n, dtype=np.int64), n, params)
            idx.window_weight = params.window_weight
        return idx

    @classmethod
    def _scored(cls, key: str, vocab: dict[str, int], rows: TermRows, owner: np.ndarray, n: int,
                params: RankParams) -> LexicalIndex:
        indices, tf, indptr = bm25.by_term(rows, len(vocab))
        return cls(key, vocab, tf, indices, indptr, owner, n, params.bm25_k1, params.bm25_b, rows=rows)

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """(idf per term, length norm per passage): the collection statistics, made once."""
        if self._weights is None:
            lengths = self.rows.lengths if self.rows is not None else np.zeros(len(self.owner), np.int64)
            self._weights = bm25.collection_weights(lengths, self.indptr, self.k1, self.b)
        return self._weights

    def own_scores(self, query_tokens: list[str]) -> np.ndarray:
        """BM25 score of each entry (its best passage) for the query tokens, this index alone:
        each token's postings scored now (a repeated token counts again)."""
        per_passage = np.zeros(len(self.owner), dtype=np.float32)
        idf, norm = self.weights()
        made: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for tok in query_tokens:
            t = self.vocab.get(tok)
            if t is None:
                continue
            got = made.get(t)
            if got is None:
                a, b = self.indptr[t], self.indptr[t + 1]
                docs = self.indices[a:b]
                got = made[t] = docs, bm25.term_scores(float(idf[t]), norm, docs, self.tf[a:b])
            per_passage[got[0]] += got[1]  # a term's passages are distinct: no repeated index
        if self._starts is None:
            self._starts = run_starts(self.owner)
        return best_per_entry(per_passage, self.owner, self.num_entries, self._starts)

    def score_parts(self, query_tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(own BM25, window BM25) of each entry; the window part is zeros without a window index."""
        own = self.own_scores(query_tokens)
        if self.window is None or not self.window_weight:
            return own, np.zeros_like(own)
        return own, self.window.own_scores(query_tokens)

    def combine(self, own: np.ndarray, window: np.ndarray) -> np.ndarray:
        """Lexical score of each entry: its own BM25 plus a share of its window's (each
        normalised to the best entry, so the share means the same in every corpus)."""
        if self.window is None or not self.window_weight:
            return own
        return _normalise(own) + self.window_weight * _normalise(window)

    def scores(self, query_tokens: list[str]) -> np.ndarray:
        return self.combine(*self.score_parts(query_tokens))

    def coverage(self, query_tokens: list[str], *, weighted: bool = False) -> np.ndarray:
        """Share of the need's distinct words each entry holds (``weighted``: each word
        counted by its IDF, so a rare word covers more than a common one)."""
        words = list(dict.fromkeys(query_tokens))
        hits = np.zeros(self.num_entries, dtype=np.float32)
        n = max(len(self.owner), 1)
        total = 0.0
        for tok in words:
            t = self.vocab.get(tok)
            a, b = (int(self.indptr[t]), int(self.indptr[t + 1])) if t is not None else (0, 0)
            w = float(np.log1p(n / max(b - a, 1))) if weighted else 1.0
            total += w
            if b > a:
                # buffered fancy indexing adds w once per entry however many of its
                # passages hold the word: np.unique's sort (and numpy.ma's import) not needed
                hits[self.owner[self.indices[a:b]]] += w
        return hits / total if total else hits

    # persistence: one binary file, arrays as raw bytes, vocabulary as marshal
    def dumps(self) -> bytes:
        return b"".join(self.dump_parts())

    def dump_parts(self) -> list:
        """:meth:`dumps` as the buffers it joins (the arrays' own memory): a file takes them
        one after the other without a 14 MB copy being made first."""
        # the postings' bulk (ids and counts) in the narrowest type that holds it
        arrays = [bm25.narrow(self.tf), bm25.narrow(self.indices), self.indptr, self.owner]
        for rows in (self.rows, self.bare):
            if rows is not None:
                arrays += [rows.keys, rows.ptr, bm25.narrow(rows.terms), bm25.narrow(rows.counts), rows.lengths]
        arrays.extend(self.docs.arrays() if self.docs is not None else ())
        inner = self.window.dump_parts() if self.window is not None else []
        body: list = []
        crc = 0
        for a in arrays:  # each array starts 8-byte aligned: numpy reads unaligned arrays slowly
            raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            body += [raw, _pad(raw.nbytes)]
            crc = zlib.crc32(body[-1], zlib.crc32(raw.data, crc))
        head = {"version": LEXICAL_VERSION, "crc": crc, "key": self.key, "vocab": self.vocab, "rows_key": self.rows_key,
                "num_entries": self.num_entries, "window_weight": self.window_weight, "k1": self.k1, "b": self.b,
                "window_bytes": sum(len(p) if isinstance(p, bytes) else p.nbytes for p in inner),
                "has_rows": self.rows is not None, "has_bare": self.bare is not None,
                "idents": self.docs.idents if self.docs is not None else None,
                "arrays": [(a.dtype.str, a.shape[0]) for a in arrays]}
        h = marshal.dumps(head)
        return [len(h).to_bytes(8, "little"), h, _pad(8 + len(h)), *body, *inner]

    @classmethod
    def loads(cls, raw: bytes | memoryview) -> LexicalIndex | None:
        try:
            n = int.from_bytes(raw[:8], "little")
            head = marshal.loads(raw[8:8 + n])
            if head.get("version") != LEXICAL_VERSION:
                return None
            off = start = 8 + n + len(_pad(8 + n))
            arrays = []
            for dt, count in head["arrays"]:
                dtype = np.dtype(dt)
                arrays.append(np.frombuffer(raw, dtype=dtype, count=count, offset=off))
                off += dtype.itemsize * count
                off += len(_pad(off))
            if len(raw) < off or zlib.crc32(raw[start:off]) != head["crc"]:
                return None  # torn or damaged: a value could be wrong however well the arrays fit
            tf, indices, indptr, owner = arrays[:4]
            rest = arrays[4:]
            idx = cls(head["key"], head["vocab"], tf, indices, indptr, owner, head["num_entries"],
                      float(head["k1"]), float(head["b"]), rows_key=head["rows_key"])
            if head["has_rows"]:
                idx.rows, rest = TermRows(*rest[:5]), rest[5:]
            if head["has_bare"]:
                idx.bare, rest = TermRows(*rest[:5]), rest[5:]
            if head["idents"] is not None:
                idx.docs = bm25.DocKeys(head["idents"], rest[0], rest[1], rest[2], rest[3])
            if head["window_bytes"]:
                window = cls.loads(memoryview(raw)[off:off + head["window_bytes"]])
                if window is None:
                    return None
                window.vocab = idx.vocab  # one vocabulary: window rows are sums of the others
                idx.window, idx.window_weight = window, float(head["window_weight"])
            return idx if idx._consistent() else None
        except (ValueError, EOFError, TypeError, KeyError, AttributeError):
            return None

    def _consistent(self) -> bool:
        """Whether the arrays read from a cache file fit together (a damaged file is rebuilt,
        never indexed out of bounds)."""
        v, p = len(self.vocab), len(self.owner)
        if not (isinstance(self.vocab, dict) and len(self.indptr) == v + 1 and self.indptr[0] == 0
                and self.indptr[-1] == len(self.tf) == len(self.indices) and bool((np.diff(self.indptr) >= 0).all())
                and (not len(self.indices) or (int(self.indices.min()) >= 0 and int(self.indices.max()) < p))
                and (not p or (int(self.owner.min()) >= 0 and int(self.owner.max()) < self.num_entries))):
            return False
        if p and (self.rows is None or len(self.rows) != p):
            return False  # the length norms of the passages come from their rows
        for rows in (self.rows, self.bare):
            if rows is not None and not rows.consistent(v):
                return False
        if self.docs is not None and not (self.docs.consistent() and len(self.docs.idents) == self.num_entries
                                          and self.rows is not None and len(self.docs.keys) == len(self.rows)):
            return False
        return self.window is None or self.window._consistent()


def _pad(size: int) -> bytes:
    return b"\0" * (-size % 8)


def _idents(corpus: Corpus) -> list[str]:
    """What each entry's lexical text is made from (bm25.DocKeys): content hash, id, kind, label,
    context, as one string (only the context may hold a NUL, and it comes last)."""
    entries = corpus.entries
    cols: Iterable[tuple] = (zip(entries.column(6), entries.column(1), entries.column(2), entries.column(15),
                                 entries.column(11), strict=True) if isinstance(entries, EntryList)
                             else ((e.hash, e.id, e.kind, e.label, e.context) for e in entries))
    return [f"{h}\0{i or ''}\0{k}\0{label}\0{c}" for h, i, k, label, c in cols]


def _texts(entry: Entry, params: RankParams) -> tuple[str, list[str], str]:
    text = lexical_text(entry, params)
    return text, split_passages(text), entry.text


def _window_rows(corpus: Corpus, rows: TermRows, docs: bm25.DocKeys, params: RankParams,
                 vocab: dict[str, int], memo: dict[str, list[str]], old_bare: TermRows | None,
                 old_window: TermRows | None) -> tuple[TermRows, TermRows, int]:
    """Each entry's window: the counts of its own passages plus the own words of
    ``lexical_window`` neighbours per side (their text only: they share the heading).
    Returns (window rows, the neighbours' own rows, how many of either were made anew)."""
    n = len(corpus.entries)
    entry_keys, owner = docs.entry_keys, docs.owner
    prev, nxt, _ = corpus.neighbour_arrays()
    wanted = np.unique(np.concatenate([prev[prev >= 0], nxt[nxt >= 0]]))  # entries that are neighbours
    bare, made = bm25.update_rows(docs.own_keys[wanted], old_bare,
                                  lambda pos: tokenize_many([corpus.entries[int(wanted[j])].text for j in pos],
                                                            stem=params.stem, memo=memo), vocab)
    bare_at = np.full(n + 1, -1, np.int64)  # entry -> its row in ``bare``; index -1 (no neighbour) reads -1
    bare_at[wanted] = np.arange(len(wanted))
    no_key = np.zeros(1, bm25.KEY_DTYPE)
    bare_keys = np.concatenate([bare.keys, no_key])  # row -1: no neighbour in that slot
    # per slot (p1, q1, p2, q2, ...): the neighbour entry or -1
    steps = corpus.neighbour_steps(params.lexical_window) if params.lexical_window > 0 else []
    slots: list[np.ndarray] = [side for step in steps for side in step]
    # the key of a window: its own text's and each slot's neighbour text's, slot by slot
    window_keys = bm25.combine_keys([entry_keys] + [bare_keys[bare_at[s]] for s in slots])

    def members(positions: np.ndarray) -> list[bm25.Taken]:
        local = np.full(n, -1, np.int64)
        local[positions] = np.arange(len(positions))
        mine = np.flatnonzero(local[owner] >= 0)  # the passages of those entries
        parts: list[bm25.Taken] = [(rows, local[owner[mine]], mine)]
        for s in slots:
            s = s[positions]
            ok = s >= 0
            parts.append((bare, np.flatnonzero(ok), bare_at[s[ok]]))
        return parts

    window, more = bm25.update_sums(window_keys, old_window, members, len(vocab))
    return window, bare, made + more


def rows_key(params: RankParams) -> str:
    """What a passage's term counts depend on besides its text."""
    return f"{LEXICAL_VERSION}|{params.context_in_lexical}|{params.stem}|{params.lexical_window}"


def lexical_key(corpus: Corpus, params: RankParams) -> str:
    h = hashlib.sha256(f"{LEXICAL_VERSION}|{params.context_in_lexical}|{params.stem}|{params.bm25_k1}|"
                       f"{params.bm25_b}|{params.lexical_window}|{params.window_weight}|".encode())
    h.update(corpus.fingerprint.encode())
    return h.hexdigest()


def load_lexical(corpus: Corpus, params: RankParams, cache_dir: Path | None) -> LexicalIndex:
    """The BM25 index of this corpus: kept in memory or read from the cache when it matches,
    else updated from the last index (only changed passages re-tokenised) and stored."""
    key = lexical_key(corpus, params)
    path = cache_dir / "bm25.bin" if cache_dir else None
    memo = _LEXICAL_MEMO.get(str(path)) if path is not None else None
    if memo is not None and memo.key == key:
        return memo
    previous = memo
    raw = None
    # the file as this process last wrote or read it holds the memo's (stale) index: not read
    # again (16 MB at 10,000 nodes); if another process replaced it, its status differs
    if path is not None and not (memo is not None and _status(path) == _LEXICAL_STATUS.get(str(path))):
        try:
            raw = path.read_bytes()
        except OSError:
            pass  # none yet (or replaced just now): built, or updated from the memo
    if raw is not None and path is not None:
        with collector_paused():  # as for a corpus build: what it allocates stays alive
            idx = LexicalIndex.loads(raw)
        if idx is not None and idx.key == key:
            _remember(path, idx)
            return idx
        previous = previous or idx
    with collector_paused():
        idx = LexicalIndex.build(corpus, params, key, previous)
    if path is not None:
        from rmtui.engine.fsutil import atomic_write_bytes

        try:
            atomic_write_bytes(path, idx.dump_parts(), durable=False)  # a derived cache, checked when read
        except OSError:
            pass
        _remember(path, idx)
    return idx


def _status(path: Path) -> tuple[int, ...] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _remember(path: Path, idx: LexicalIndex) -> None:
    _LEXICAL_MEMO[str(path)] = idx
    _LEXICAL_STATUS[str(path)] = _status(path)


#: The last BM25 index per cache file in this process (a long-lived front reads it once).
_LEXICAL_MEMO: dict[str, LexicalIndex] = {}
#: The status of each cache file when this process last wrote or read it (see load_lexical).
_LEXICAL_STATUS: dict[str, tuple[int, ...] | None] = {}


# -- fusion -----------------------------------------------------------------------

@dataclass
class Ranked:
    index: int
    score: float
    lexical: float
    dense: float | None


def _normalise(x: np.ndarray) -> np.ndarray:
    top = float(x.max()) if x.size else 0.0
    return x / top if top > 0 else np.zeros_like(x)


def smooth(scores: np.ndarray, corpus: Corpus, weight: float, span: int = 1) -> np.ndarray:
    """Each entry borrows ``weight`` of its neighbours' scores (halved per further step)."""
    if weight <= 0 or not scores.size:
        return scores
    padded = np.append(scores, np.float32(0))  # index -1 reads the zero pad
    out, w = scores.copy(), weight
    for p, n in corpus.neighbour_steps(span):
        out = out + w * (padded[p] + padded[n])
        w = w / 2
    return out


def heading_boost(scores: np.ndarray, corpus: Corpus, weight: float) -> np.ndarray:
    """Each entry borrows ``weight`` of the best score among entries under the same heading."""
    if weight <= 0 or not scores.size:
        return scores
    group = corpus.neighbour_arrays()[2] + 1
    best = np.zeros(int(group.max()) + 1, dtype=np.float32)
    np.maximum.at(best, group, scores)
    return scores + weight * best[group]


def fuse(corpus: Corpus, lexical: np.ndarray, dense: np.ndarray | None, params: RankParams) -> np.ndarray:
    lex = _normalise(lexical)
    if dense is None or params.lexical_only:
        fused = lex
    elif params.dense_only:
        fused = np.clip(dense, 0, None)
    elif params.fusion == "rrf":
        fused = params.lexical_weight * _rrf(lexical) + (1 - params.lexical_weight) * _rrf(dense)
        fused = fused / fused.max() if fused.max() > 0 else fused
    else:
        den = np.clip(dense, 0, None)
        fused = params.lexical_weight * lex + (1 - params.lexical_weight) * den
    fused = smooth(fused.astype(np.float32), corpus, params.neighbour_weight, params.neighbour_span)
    return heading_boost(fused, corpus, params.heading_weight)


def _rrf(scores: np.ndarray, k: int = 60) -> np.ndarray:
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.float32)
    ranks[order] = np.arange(1, len(scores) + 1, dtype=np.float32)
    return 1.0 / (k + ranks)


def rank(corpus: Corpus, lexical: np.ndarray, dense: np.ndarray | None, params: RankParams,
         limit: int, second: Callable[[np.ndarray], np.ndarray | None] | None = None) -> list[Ranked]:
    """Entries ordered by fused score (ties in source order); at most ``limit``.

    ``second``: given the fused scores, the best candidates in a better order (the learned
    second stage); the entries it leaves out follow in fused order."""
    if not corpus.entries:
        return []
    fused = fuse(corpus, lexical, dense, params)
    n = len(fused)
    k = min(limit, n)
    if k <= 0:
        return []
    head = second(fused) if second is not None else None
    seen = set(head.tolist()) if head is not None else set()
    order = [] if head is None else head.tolist()[:k]
    if len(order) < k:
        order += [i for i in largest(fused, k).tolist() if i not in seen]
    order = order[:k]
    return [Ranked(i, float(fused[i]), float(lexical[i]),
                   None if dense is None else float(dense[i])) for i in order]


def with_overrides(params: RankParams, **kw) -> RankParams:
    return replace(params, **kw)
