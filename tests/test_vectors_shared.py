"""The vector cache in a long-lived process: the parsed file and the last row lookup are reused
while the file is unchanged, and never once another writer replaced it (warm latency)."""

from __future__ import annotations

import numpy as np
import pytest

from rmtui.engine.retrieval import vectors
from rmtui.engine.retrieval.vectors import VectorCache, as_keys, text_key


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return v / np.linalg.norm(v)


def test_reopening_an_unchanged_file_reuses_it_and_a_rewrite_is_seen(tmp_path):
    vectors._SHARED.clear()
    a = VectorCache.open(tmp_path, "model@1")
    a.add({text_key(f"t{i}"): _vec(i) for i in range(5)})
    b = VectorCache.open(tmp_path, "model@1")
    c = VectorCache.open(tmp_path, "model@1")
    assert b.matrix is c.matrix and b.keys is c.keys  # parsed once
    assert not b.matrix.flags.writeable

    keys = as_keys([text_key(f"t{i}") for i in (4, 0, 9)])
    rows1, missing1 = b.rows(keys)
    rows2, missing2 = c.rows(keys)
    assert rows2 is rows1 and missing1 == missing2 == [2]  # the lookup is reused too
    missing2.append(99)  # a caller's list is its own
    assert c.rows(keys)[1] == [2]
    with pytest.raises(ValueError):
        rows1[0] = 3  # shared: read-only
    assert np.allclose(b.lookup(keys)[0][0], _vec(4))

    other = VectorCache.open(tmp_path, "model@1")  # another writer adds the missing text
    other.add({text_key("t9"): _vec(9)})
    d = VectorCache.open(tmp_path, "model@1")
    assert d.matrix is not b.matrix
    rows, missing = d.rows(keys)
    assert missing == [] and np.allclose(d.lookup(keys)[0][2], _vec(9))
    scores, _ = d.scores(keys, _vec(0))
    assert scores[1] == pytest.approx(1.0, abs=1e-5)


def test_another_identity_never_shares(tmp_path):
    vectors._SHARED.clear()
    VectorCache.open(tmp_path, "model@1").add({text_key("x"): _vec(1)})
    assert VectorCache.open(tmp_path, "model@2").dim == 0  # its own (absent) file


@pytest.mark.parametrize("name_len", range(16))
def test_a_reopened_matrix_is_aligned_read_only_and_exact_whatever_the_model_name(tmp_path, name_len):
    vectors._SHARED.clear()
    identity = "m" * (name_len + 1)  # where the matrix starts in the file moves with the name's length
    VectorCache.open(tmp_path, identity).add({text_key(f"t{i}"): _vec(i) for i in range(7)})
    vectors._SHARED.clear()  # as a new process: the file is read again
    cache = VectorCache.open(tmp_path, identity)
    assert cache.matrix.flags.aligned and cache.matrix.ctypes.data % 16 == 0
    assert cache.matrix.base is not None  # a view of the file's buffer, not a copy made to align it
    assert not cache.matrix.flags.writeable and not cache.keys.flags.writeable
    got, missing = cache.lookup(as_keys([text_key(f"t{i}") for i in range(7)]))
    assert missing == [] and np.array_equal(got, np.stack([_vec(i) for i in range(7)]))
    with pytest.raises(ValueError):
        cache.matrix[0, 0] = 1.0
