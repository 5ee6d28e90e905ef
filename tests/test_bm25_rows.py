"""The shortcuts of a BM25 update (bm25.py) against the plain rule they stand for: a key is
matched to a row of the same key wherever it sits, and rows copied as runs of slices are
the rows a gather copies."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rmtui.engine.retrieval import bm25

KEYS = [bytes([k]) * 16 for k in range(1, 9)]


def _rows(keys: list[bytes], rnd: np.random.Generator) -> bm25.TermRows:
    lens = rnd.integers(0, 4, len(keys))
    ptr = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    return bm25.TermRows(np.array(keys, dtype=bm25.KEY_DTYPE), ptr, rnd.integers(0, 50, ptr[-1]).astype(np.int32),
                         rnd.integers(1, 5, ptr[-1]).astype(np.int32), lens.astype(np.int64) * 2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(KEYS), max_size=30), st.lists(st.sampled_from(KEYS), max_size=30))
def test_a_key_is_matched_to_a_row_with_the_same_key(new, old):
    rows = _rows(old, np.random.default_rng(0)) if old else None
    got = bm25.match_keys(np.array(new, dtype=bm25.KEY_DTYPE), rows)
    for k, at in zip(new, got.tolist(), strict=True):
        if k in old:
            assert at >= 0 and old[at] == k
        else:
            assert at == -1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(KEYS), min_size=1, max_size=40), st.integers(0, 2**16))
def test_rows_copied_in_runs_are_the_rows_a_gather_copies(keys, seed):
    rnd = np.random.default_rng(seed)
    old = _rows(keys, rnd)
    n = len(keys)
    # an update's mapping: most rows kept in order (some dropped, some new in between), or shuffled
    src = np.arange(n)
    src = src[rnd.random(n) > 0.2] if seed % 3 else rnd.permutation(n)
    dest = np.sort(rnd.choice(len(src) + 3, len(src), replace=False))
    new_keys = np.zeros(len(src) + 3, bm25.KEY_DTYPE)
    new_keys[dest] = old.keys[src]
    fresh = {i: ([1, 2], [3, 1], 4) for i in range(len(new_keys)) if i not in set(dest.tolist())}
    got = bm25.stack_rows(new_keys, [(old, dest, src)], fresh)
    for i in range(len(new_keys)):
        row = slice(got.ptr[i], got.ptr[i + 1])
        if i in fresh:
            assert got.terms[row].tolist() == [1, 2] and got.counts[row].tolist() == [3, 1] and got.lengths[i] == 4
        else:
            j = int(src[np.flatnonzero(dest == i)[0]])
            was = slice(old.ptr[j], old.ptr[j + 1])
            assert got.terms[row].tolist() == old.terms[was].tolist()
            assert got.counts[row].tolist() == old.counts[was].tolist() and got.lengths[i] == old.lengths[j]


def test_many_moved_keys_are_matched_by_the_sorted_search_too():
    rnd = np.random.default_rng(1)
    old_keys = [rnd.bytes(16) for _ in range(3000)]
    old = _rows(old_keys, rnd)
    new = [rnd.bytes(16)] + old_keys[::-1]  # every key moved: no shortcut applies
    got = bm25.match_keys(np.array(new, dtype=bm25.KEY_DTYPE), old)
    assert got[0] == -1
    assert [old_keys[i] for i in got[1:].tolist()] == new[1:]


def test_ids_and_counts_are_stored_in_the_narrowest_type_that_holds_them():
    assert bm25.narrow(np.array([0, 255], np.int32)).dtype == np.uint8
    assert bm25.narrow(np.array([3, 256], np.int32)).dtype == np.uint16
    assert bm25.narrow(np.array([70000], np.int64)).dtype == np.uint32
    for kept in (np.array([-1, 5], np.int32), np.array([1.5]), np.zeros(0, np.int32)):  # not ids: as they are
        assert bm25.narrow(kept) is kept
    values = np.array([7, 65535, 0], np.int64)
    assert bm25.narrow(values).tolist() == values.tolist()
