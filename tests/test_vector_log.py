"""A few new vectors go to a log beside the vector file instead of a rewrite of the whole
file; every reader sees them, a torn record is left out, and the file takes them in once the
log is full."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest

from rmtui.engine.retrieval import vectors
from rmtui.engine.retrieval.vectors import VectorCache, as_keys, text_key


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return v / np.linalg.norm(v)


def _fresh(tmp_path) -> VectorCache:
    """The cache as a new process opens it (nothing parsed yet in this one)."""
    vectors._SHARED.clear()
    return VectorCache.open(tmp_path, "model@1")


def _all_there(cache: VectorCache, seeds) -> None:
    keys = as_keys([text_key(f"t{i}") for i in seeds])
    got, missing = cache.lookup(keys)
    assert missing == []
    for row, i in zip(got, seeds, strict=True):
        assert np.array_equal(row, _vec(i))


def test_one_new_vector_is_appended_and_seen_by_a_new_process(tmp_path):
    _fresh(tmp_path).add({text_key(f"t{i}"): _vec(i) for i in range(50)})
    base = _fresh(tmp_path).path
    before = os.stat(base)
    _fresh(tmp_path).add({text_key("t50"): _vec(50)}, live=[text_key(f"t{i}") for i in range(51)])
    after = os.stat(base)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    log = base.with_suffix(".log")
    assert log.stat().st_size < 200  # a header and one record, not 51 rows again
    reader = _fresh(tmp_path)
    _all_there(reader, range(51))
    assert list(reader.keys) == sorted(reader.keys)  # merged in key order: one binary search


def test_a_full_log_is_merged_into_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(vectors, "LOG_ROWS", 3)
    _fresh(tmp_path).add({text_key(f"t{i}"): _vec(i) for i in range(10)})
    for i in range(10, 13):
        _fresh(tmp_path).add({text_key(f"t{i}"): _vec(i)})
    cache = _fresh(tmp_path)
    assert cache.log_path.exists() and cache.path.stat().st_size < 10 * (32 + 32) + 200
    _fresh(tmp_path).add({text_key("t13"): _vec(13)})  # a fourth row: the file takes the log in
    assert not cache.log_path.exists()
    _all_there(_fresh(tmp_path), range(14))
    _fresh(tmp_path).add({text_key(f"b{i}"): _vec(100 + i) for i in range(5)})  # a batch over the limit: rewritten
    assert not cache.log_path.exists()


def test_a_torn_record_is_left_out_and_the_next_append_starts_whole(tmp_path):
    _fresh(tmp_path).add({text_key(f"t{i}"): _vec(i) for i in range(5)})
    _fresh(tmp_path).add({text_key("t5"): _vec(5)})
    _fresh(tmp_path).add({text_key("t6"): _vec(6)})
    log = _fresh(tmp_path).log_path
    with log.open("r+b") as fh:  # a writer killed in the middle of its record
        fh.truncate(log.stat().st_size - 7)
    cache = _fresh(tmp_path)
    _all_there(cache, range(6))
    assert cache.lookup(as_keys([text_key("t6")]))[1] == [0]  # the torn one is missing, nothing wrong is read
    cache.add({text_key("t7"): _vec(7)})
    reader = _fresh(tmp_path)
    _all_there(reader, [*range(6), 7])
    assert (log.stat().st_size - len(reader._log_head(8))) % (32 + 4 * 8) == 0


@pytest.mark.parametrize("header", ["another model", "another dimension", "garbage"])
def test_a_log_that_is_not_this_files_is_ignored(tmp_path, header):
    _fresh(tmp_path).add({text_key(f"t{i}"): _vec(i) for i in range(5)})
    cache = _fresh(tmp_path)
    record = text_key("x") + _vec(9).tobytes()
    if header == "another model":
        raw = VectorCache(cache.path, "model@2")._log_head(8) + record
    elif header == "another dimension":
        raw = cache._log_head(4) + text_key("x") + _vec(9)[:4].tobytes()
    else:
        raw = os.urandom(300)
    cache.log_path.write_bytes(raw)
    reader = _fresh(tmp_path)
    _all_there(reader, range(5))
    assert len(reader.keys) == 5


def _writer(path: str, start: int) -> None:
    for i in range(start, start + 15):
        vectors._SHARED.clear()
        VectorCache.open(path, "model@1").add({text_key(f"t{i}"): _vec(i)})


def test_concurrent_writers_lose_nothing(tmp_path):
    _fresh(tmp_path).add({text_key(f"t{i}"): _vec(i) for i in range(20)})
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), s)) for s in (100, 200)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    _all_there(_fresh(tmp_path), [*range(20), *range(100, 115), *range(200, 215)])
