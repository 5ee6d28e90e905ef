"""BM25 from per-document term counts, so a changed corpus re-scores without re-tokenising.

Why not bm25s's own ``index``: it tokenises, counts and scores every document in Python
loops each time (about a second at 10,000 entries, plus the scipy import), and has no way
to update an index. Here each document's distinct terms and counts are one row, keyed by a
digest of what the document was made from (and each entry's keys are kept by what its
text is made from, :class:`DocKeys`); after a change only the rows whose key is new
are tokenised and counted, and the postings are grouped by term again (one sort). Scores are
not stored: the collection statistics (document count, mean length, document frequencies)
move with any change, so a query scores the postings of its own terms only, a few
thousand pairs. A full build is the same code with no rows to reuse, so an updated index
scores exactly as a rebuilt one.

The scores are bm25s's "lucene" variant (the one rmtui used through bm25s before):
``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` times ``tf / (k1 * (1 - b + b * len / avglen) + tf)``;
tests/test_retrieve_incremental.py checks them against bm25s itself.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: A row key: 16 bytes (BLAKE2b of a text, or a combination of such keys).
KEY_DTYPE = np.dtype("S16")


@dataclass
class TermRows:
    """Documents as rows of (term id, count) pairs in one vocabulary, each row under its key."""

    keys: np.ndarray  # KEY_DTYPE, one per document (compare as bytes: numpy strips trailing NULs)
    ptr: np.ndarray  # int64, row i is terms[ptr[i]:ptr[i + 1]]
    terms: np.ndarray  # int32 term ids
    counts: np.ndarray  # int32 occurrences of the term in the document
    lengths: np.ndarray  # int64 tokens per document, repeats included

    def __len__(self) -> int:
        return len(self.lengths)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.keys, self.ptr, self.terms, self.counts, self.lengths

    def consistent(self, vocab_size: int) -> bool:
        """Whether the arrays fit together and every term id is in the vocabulary."""
        n = len(self.lengths)
        return (self.keys.dtype == KEY_DTYPE and len(self.keys) == n and len(self.ptr) == n + 1
                and int(self.ptr[0]) == 0 and int(self.ptr[-1]) == len(self.terms) == len(self.counts)
                and bool((np.diff(self.ptr) >= 0).all())
                and (not len(self.terms) or (int(self.terms.min()) >= 0 and int(self.terms.max()) < vocab_size)))


def narrow(a: np.ndarray) -> np.ndarray:
    """A non-negative integer array in the smallest unsigned type that holds its values: what
    the cache file stores of term ids, counts and documents (at 10,000 nodes 6 MB, not 16, to
    write, read and checksum). Any array works in every step here whatever its integer type."""
    if a.dtype.kind not in "iu" or not len(a) or int(a.min()) < 0:
        return a
    top = int(a.max())
    for dt in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dt).max:
            return a if a.dtype == dt else a.astype(dt)
    return a


def count_tokens(tokens: list[str], vocab: dict[str, int]) -> tuple[list[int], list[int], int]:
    """One document's (term ids, counts, length); new words join ``vocab``."""
    c = Counter(tokens)
    ids = [vocab.setdefault(t, len(vocab)) for t in c]
    return ids, list(c.values()), len(tokens)


#: A freshly counted document: (term ids, counts, length).
Counted = tuple[list[int], list[int], int]
#: Rows taken from an existing :class:`TermRows`: (source, destination positions, source rows).
Taken = tuple[TermRows, np.ndarray, np.ndarray]


def stack_rows(keys: np.ndarray, taken: list[Taken], fresh: dict[int, Counted]) -> TermRows:
    """Rows in ``keys`` order, each copied from an existing :class:`TermRows` (one vectorised
    gather per source) or counted anew (``fresh``)."""
    n = len(keys)
    seg_len = np.zeros(n, np.int64)
    lengths = np.zeros(n, np.int64)
    for rows, dest, src in taken:
        seg_len[dest] = rows.ptr[src + 1] - rows.ptr[src]
        lengths[dest] = rows.lengths[src]
    for i, (ids, _, length) in fresh.items():
        seg_len[i] = len(ids)
        lengths[i] = length
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(seg_len, out=ptr[1:])
    terms = np.empty(int(ptr[-1]), np.int32)
    counts = np.empty(int(ptr[-1]), np.int32)
    for rows, dest, src in taken:
        runs = _runs(dest, src)
        if runs is not None:  # a few runs of consecutive rows (an update): slices, not gathers
            for d0, d1, s0 in runs:
                a, b, c = int(ptr[d0]), int(ptr[d1]), int(rows.ptr[s0])
                terms[a:b] = rows.terms[c:c + b - a]
                counts[a:b] = rows.counts[c:c + b - a]
            continue
        take = _ranges(rows.ptr[src], rows.ptr[src + 1])
        put = _ranges(ptr[dest], ptr[dest + 1])
        terms[put] = rows.terms[take]
        counts[put] = rows.counts[take]
    for i, (ids, cnt, _) in fresh.items():
        a, b = int(ptr[i]), int(ptr[i + 1])
        terms[a:b] = ids
        counts[a:b] = cnt
    return TermRows(keys, ptr, terms, counts, lengths)


def _runs(dest: np.ndarray, src: np.ndarray, most: int = 64) -> list[tuple[int, int, int]] | None:
    """``dest`` and ``src`` as runs where both go up by one: (dest start, dest end, src start)
    each; None when there are more than ``most`` (then one gather is cheaper)."""
    if not len(dest):
        return []
    cuts = np.flatnonzero((np.diff(dest) != 1) | (np.diff(src) != 1)) + 1
    if len(cuts) >= most:
        return None
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(dest)]
    return [(int(dest[a]), int(dest[b - 1]) + 1, int(src[a])) for a, b in zip(starts, ends, strict=True)]


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of ``range(starts[i], ends[i])`` for every i, without a Python loop."""
    lens = ends - starts
    total = int(lens.sum())
    if not total:
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return np.arange(total, dtype=np.int64) + offsets


def _halves(keys: np.ndarray) -> np.ndarray:
    """Keys as (n, 2) uint64, compared exactly (no NUL stripping)."""
    return np.frombuffer(keys.tobytes(), dtype=np.uint64).reshape(-1, 2) if len(keys) else np.zeros((0, 2), np.uint64)


def match_keys(keys: np.ndarray, old: TermRows | None) -> np.ndarray:
    """For each key, the row of ``old`` with the same key, or -1."""
    out = np.full(len(keys), -1, np.int64)
    if old is None or not len(old) or not len(keys):
        return out
    new_h, old_h = _halves(keys), _halves(old.keys)
    m = min(len(keys), len(old))
    same = np.flatnonzero((new_h[:m] == old_h[:m]).all(axis=1))  # most rows stay where they were
    out[same] = same
    rest = np.flatnonzero(out < 0)
    if len(rest) * len(old) <= 1 << 22:  # the few others against every old key at once
        eq = (new_h[rest, None, 0] == old_h[None, :, 0]) & (new_h[rest, None, 1] == old_h[None, :, 1])
        found = eq.any(axis=1)
        out[rest[found]] = eq[found].argmax(axis=1)
        return out
    order = np.lexsort((old_h[:, 1], old_h[:, 0]))
    sorted_h = old_h[order]
    at = np.searchsorted(sorted_h[:, 0], new_h[:, 0])
    at = np.minimum(at, len(order) - 1)
    hit = (sorted_h[at, 0] == new_h[:, 0]) & (sorted_h[at, 1] == new_h[:, 1])
    out[hit] = order[at[hit]]
    return out


def combine_keys(slots: list[np.ndarray]) -> np.ndarray:
    """One key per document from the keys in its slots (zero where a slot is empty), each
    slot weighed by its own odd multiplier so that order counts: a window's key from its
    parts' keys without hashing every window."""
    acc = np.zeros((len(slots[0]), 2), np.uint64)
    with np.errstate(over="ignore"):
        for s, keys in enumerate(slots):
            m = np.uint64((0x9E3779B97F4A7C15 * (2 * s + 1)) % 2**64 | 1)
            acc = (acc * np.uint64(0x100000001B3) + _halves(keys) * m).astype(np.uint64)
    return np.frombuffer(acc.tobytes(), dtype=KEY_DTYPE).copy()


def update_rows(keys: np.ndarray, old: TermRows | None, tokens_of: Callable[[list[int]], list[list[str]]],
                vocab: dict[str, int]) -> tuple[TermRows, int]:
    """Rows for documents ``keys``: an old row reused wherever its key is the same, the rest
    tokenised by ``tokens_of(positions)`` and counted. Returns the rows and how many were new."""
    src = match_keys(keys, old)
    todo = np.flatnonzero(src < 0).tolist()
    fresh = {i: count_tokens(toks, vocab) for i, toks in zip(todo, tokens_of(todo), strict=True)} if todo else {}
    taken: list[Taken] = []
    if old is not None:
        dest = np.flatnonzero(src >= 0)
        taken.append((old, dest, src[dest]))
    return stack_rows(keys, taken, fresh), len(todo)


def update_sums(keys: np.ndarray, old: TermRows | None, members_of: Callable[[np.ndarray], list[Taken]],
                vocab_size: int) -> tuple[TermRows, int]:
    """Like :func:`update_rows` for rows that are sums of other rows: ``members_of(positions)``
    gives the rows they sum, as :func:`sum_rows` takes them (documents numbered in ``positions`` order)."""
    src = match_keys(keys, old)
    taken: list[Taken] = []
    if old is not None:
        dest = np.flatnonzero(src >= 0)
        taken.append((old, dest, src[dest]))
    todo = np.flatnonzero(src < 0)
    if len(todo):
        made = sum_rows(keys[todo], members_of(todo), vocab_size)
        taken.append((made, todo, np.arange(len(todo), dtype=np.int64)))
    return stack_rows(keys, taken, {}), len(todo)


def compact(vocab: dict[str, int], rows: list[TermRows], sums: tuple[TermRows, ...] = ()) -> dict[str, int]:
    """Drop the words no row uses any more (left by updates) once they are a quarter of the
    vocabulary; term ids are renumbered in ``rows`` and ``sums`` (rows that are sums of
    ``rows``: they use no other word, so they are not scanned) in place. Scores do not change."""
    used = np.zeros(len(vocab), bool)
    for r in rows:
        used[r.terms] = True
    if int(used.sum()) >= 0.75 * len(vocab):
        return vocab
    remap = np.cumsum(used) - 1
    for r in (*rows, *sums):
        r.terms = remap[r.terms].astype(np.int32)
    return {w: int(remap[i]) for w, i in vocab.items() if used[i]}


def sum_rows(keys: np.ndarray, parts: list[Taken], vocab_size: int) -> TermRows:
    """Rows that are each the sum of other rows: ``parts`` adds row ``src[j]`` of a source to
    document ``dest[j]`` (a document may take several rows of one source)."""
    vocab_size = max(vocab_size, 1)
    lengths = np.zeros(len(keys), np.int64)
    docs, terms, counts = [], [], []
    for rows, dest, src in parts:
        take = _ranges(rows.ptr[src], rows.ptr[src + 1])
        docs.append(np.repeat(dest, rows.ptr[src + 1] - rows.ptr[src]))
        terms.append(rows.terms[take].astype(np.int64))
        counts.append(rows.counts[take])
        np.add.at(lengths, dest, rows.lengths[src])
    flat = np.concatenate(docs) * vocab_size + np.concatenate(terms) if docs else np.zeros(0, np.int64)
    uniq, inverse = np.unique(flat, return_inverse=True)
    summed = np.zeros(len(uniq), np.int64)
    if docs:
        np.add.at(summed, inverse, np.concatenate(counts))
    ptr = np.zeros(len(keys) + 1, np.int64)
    np.cumsum(np.bincount(uniq // vocab_size, minlength=len(keys)), out=ptr[1:])
    return TermRows(keys, ptr, (uniq % vocab_size).astype(np.int32), summed.astype(np.int32), lengths)


def by_term(rows: TermRows, vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The postings of ``rows`` grouped by term: (documents, counts, term offsets); term ``t``'s
    are ``[offsets[t]:offsets[t + 1]]``, documents in order. No score is computed here: the
    collection statistics move with any change, so scores are made per query term at query
    time (:func:`term_scores`), and a change costs one sort, not a score for every pair."""
    n = len(rows)
    df = np.bincount(rows.terms, minlength=vocab_size)[:vocab_size] if n else np.zeros(vocab_size, np.int64)
    indptr = np.zeros(vocab_size + 1, np.int64)
    np.cumsum(df, out=indptr[1:])
    if not n:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), indptr
    # documents in order within a term; a stable sort of 16-bit ids is a radix sort
    order = np.argsort(rows.terms.astype(np.uint16) if vocab_size <= 1 << 16 else rows.terms, kind="stable")
    doc = np.repeat(np.arange(n, dtype=np.int32), np.diff(rows.ptr))[order]
    return doc, rows.counts[order], indptr


def collection_weights(lengths: np.ndarray, indptr: np.ndarray, k1: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """(idf per term, length norm per document) of a collection, both float64."""
    n = len(lengths)
    df = np.diff(indptr)
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
    norm = k1 * ((1.0 - b) + b * lengths / float(lengths.mean())) if n else np.zeros(0)
    return idf, norm


def term_scores(idf: float, norm: np.ndarray, docs: np.ndarray, tf: np.ndarray) -> np.ndarray:
    """The BM25 score of one term in each of its documents (float32)."""
    tf64 = tf.astype(np.float64)
    return (idf * (tf64 / (norm[docs] + tf64))).astype(np.float32)


@dataclass
class DocKeys:
    """The keys of a corpus's documents, each entry's taken from the previous build when its
    identity (what its lexical text is made from: content hash, name, kind, context) is the
    same, so after a change only the changed entries' texts are built, split and hashed."""

    idents: list  # per entry: a string (a string is no object the collector walks, a tuple is)
    entry_keys: np.ndarray  # per entry: key of its whole lexical text
    own_keys: np.ndarray  # per entry: key of its own words (the part a neighbour's window takes)
    owner: np.ndarray  # int64 per passage: its entry
    keys: np.ndarray  # per passage: key of its text
    made: int = 0  # entries whose keys were computed by this build

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.entry_keys, self.own_keys, self.owner, self.keys

    def consistent(self, dtype: np.dtype = KEY_DTYPE) -> bool:
        n = len(self.idents)
        return (isinstance(self.idents, list)  # its items are dict keys: doc_keys refuses unhashable ones
                and len(self.entry_keys) == len(self.own_keys) == n and len(self.owner) == len(self.keys)
                and self.entry_keys.dtype == self.own_keys.dtype == self.keys.dtype == dtype
                and (not len(self.owner) or (int(self.owner.min()) >= 0 and int(self.owner.max()) < n
                                             and bool((np.diff(self.owner) >= 0).all()))))


def doc_keys(idents: list, previous: DocKeys | None,
             texts_of: Callable[[int], tuple[str, list[str], str | None]],
             key: Callable[[str], bytes] | None = None, dtype: np.dtype = KEY_DTYPE) -> DocKeys:
    """Keys for entries ``idents``: reused from ``previous`` wherever an identity is the same,
    else from ``texts_of(i)``: (the entry's text, its passages, its own words or None when no
    one asks), each made a key by ``key`` (16 bytes of BLAKE2b unless told; the dense index
    takes SHA-256, the vector cache's keys, with ``dtype`` S32)."""
    key = key or _key
    n = len(idents)
    src = np.full(n, -1, np.int64)
    if previous is not None:
        prev = previous.idents
        # most entries are where they were: compared in place, the others looked up by identity
        same = np.flatnonzero(np.fromiter((a == b for a, b in zip(idents, prev, strict=False)), bool,
                                          min(n, len(prev))))
        src[same] = same
        misses = np.flatnonzero(src < 0).tolist()
        if misses:
            try:
                before = {ident: i for i, ident in enumerate(prev)}
                src[misses] = [before.get(idents[j], -1) for j in misses]
            except TypeError:  # not what a build stores (an unhashable identity): nothing reused
                previous = None
                src[:] = -1
    counts = np.zeros(n, np.int64)
    hit = np.flatnonzero(src >= 0)
    if len(hit):
        assert previous is not None
        starts = np.searchsorted(previous.owner, np.arange(len(previous.idents) + 1))
        counts[hit] = starts[src[hit] + 1] - starts[src[hit]]
    fresh: dict[int, tuple[bytes, list[bytes], bytes]] = {}
    for j in np.flatnonzero(src < 0).tolist():
        text, parts, own = texts_of(j)
        whole = key(text)
        fresh[j] = (whole, [whole if p == text else key(p) for p in parts], key(own) if own is not None else b"")
        counts[j] = len(parts)
    entry_keys = np.zeros(n, dtype)
    own_keys = np.zeros(n, dtype)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    keys = np.zeros(len(owner), dtype)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    hit = np.flatnonzero(src >= 0)
    if len(hit):
        assert previous is not None
        entry_keys[hit] = previous.entry_keys[src[hit]]
        own_keys[hit] = previous.own_keys[src[hit]]
        keys[_ranges(ptr[hit], ptr[hit + 1])] = previous.keys[_ranges(starts[src[hit]], starts[src[hit] + 1])]
    for j, (whole, part_keys, own_key) in fresh.items():
        entry_keys[j], own_keys[j] = whole, own_key
        keys[ptr[j]:ptr[j + 1]] = part_keys
    return DocKeys(idents, entry_keys, own_keys, owner, keys, len(fresh))


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
