"""The token store: int8 token matrices per passage, append-only data, an atomically replaced index."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from rmtui.engine.retrieval import tokens
from rmtui.engine.retrieval.tokens import TokenStore, quantize
from rmtui.engine.retrieval.vectors import text_key

REPO = Path(__file__).resolve().parents[1]
DIM = 8

#: The same deterministic matrix, from the key alone, in the test and in the writer processes.
MATRIX_SRC = textwrap.dedent("""
    def matrix_for(key, dim=8):
        import hashlib
        import numpy as np
        rows = key[0] % 7  # 0..6 tokens
        stream = b"".join(hashlib.sha256(key + bytes([i])).digest() for i in range(rows * dim // 32 + 1))
        return np.frombuffer(stream[:rows * dim], dtype=np.int8).reshape(rows, dim).copy()
""")
_ns: dict = {}
exec(MATRIX_SRC, _ns)
matrix_for = _ns["matrix_for"]


@pytest.fixture(autouse=True)
def fresh_memo():
    """Each test starts as a fresh process would: nothing parsed yet."""
    tokens._SHARED.clear()
    yield
    tokens._SHARED.clear()


def rand(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-127, 128, size=(n, dim)).astype(np.int8)


def keys_of(*names: str) -> list[bytes]:
    return [text_key(n) for n in names]


def data_files(store: TokenStore) -> list[Path]:
    return sorted(store.path.parent.glob(f"{store.name}.*.dat"))


def run_writer(cache: Path, identity: str, tag: str, count: int, batch: int, go: Path | None = None):
    code = MATRIX_SRC + textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        from rmtui.engine.retrieval.tokens import TokenStore
        from rmtui.engine.retrieval.vectors import text_key
        go = {str(go) if go else ""!r}
        while go and not os.path.exists(go):
            time.sleep(0.005)
        keys = [text_key({tag!r} + "-" + str(i)) for i in range({count})]
        for start in range(0, len(keys), {batch}):
            store = TokenStore.open(Path({str(cache)!r}), {identity!r})
            store.add({{k: matrix_for(k) for k in keys[start:start + {batch}]}})
        print("ok")
    """)
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


# 1 -------------------------------------------------------------------------------------------

def test_round_trip_with_a_passage_of_no_tokens(tmp_path):
    a, b, c, absent = keys_of("a", "b", "c", "absent")
    mats = {a: rand(5, seed=1), b: rand(0), c: rand(1, seed=2)}
    TokenStore.open(tmp_path, "model-x").add(mats)

    tokens._SHARED.clear()
    store = TokenStore.open(tmp_path, "model-x")
    got = store.get([a, absent, b, c])
    assert got[1] is None
    for key, arr in zip([a, b, c], [got[0], got[2], got[3]], strict=True):
        assert arr is not None
        assert arr.dtype == np.int8 and arr.shape == mats[key].shape
        np.testing.assert_array_equal(arr, mats[key])
        assert not arr.flags.writeable
    assert got[2] is not None and got[2].shape == (0, DIM)
    with pytest.raises(ValueError):
        got[0][0, 0] = 1  # type: ignore[index]
    assert store.missing([absent, a, text_key("other"), c]) == [0, 2]
    assert store.missing(np.frombuffer(b"".join([a, b]), dtype="S32")) == []
    assert a in store and b in store and absent not in store
    assert len(store) == 3 and store.dim == DIM
    assert TokenStore.open(tmp_path, "model-y").missing([a]) == [0]  # another identity: another store


def test_only_empty_passages_and_an_empty_query(tmp_path):
    k = text_key("nothing to embed")
    TokenStore.open(tmp_path, "m").add({k: np.zeros((0, DIM), np.int8)})
    tokens._SHARED.clear()
    store = TokenStore.open(tmp_path, "m")
    arr = store.get([k])[0]
    assert arr is not None and arr.shape == (0, DIM)
    assert store.get([]) == [] and store.missing([]) == []


def test_quantize_round_trips_a_unit_vector_within_one_step():
    v = np.random.default_rng(3).normal(size=(4, 64)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    q = quantize(v)
    assert q.dtype == np.int8 and q.shape == v.shape
    assert np.abs(q.astype(np.float32) / 127 - v).max() <= 1 / 127
    np.testing.assert_array_equal(quantize(np.array([[2.0, -2.0, 0.5, 0.0]])), [[127, -127, 64, 0]])


def test_add_refuses_float_matrices_and_bad_keys(tmp_path):
    store = TokenStore.open(tmp_path, "m")
    with pytest.raises(ValueError):
        store.add({text_key("a"): np.ones((2, DIM), np.float32)})
    with pytest.raises(ValueError):
        store.add({b"short": rand(2)})
    with pytest.raises(ValueError):
        store.add({text_key("a"): rand(2, 8), text_key("b"): rand(2, 4)})
    assert len(TokenStore.open(tmp_path, "m")) == 0


# 2 -------------------------------------------------------------------------------------------

def test_adding_one_passage_appends_one_record(tmp_path):
    many = {text_key(f"p{i}"): rand(1 + i % 9, seed=i) for i in range(300)}
    store = TokenStore.open(tmp_path, "m")
    store.add(many)
    data = store.data_path()
    before = data.read_bytes()
    index_before = store.path.stat().st_size
    assert len(before) == sum(len(m) for m in many.values()) * DIM

    extra = rand(7, seed=999)
    TokenStore.open(tmp_path, "m").add({text_key("one more"): extra})
    after = data.read_bytes()
    assert len(after) == len(before) + extra.size
    assert after[:len(before)] == before  # earlier records untouched
    assert after[len(before):] == extra.tobytes()
    assert store.path.stat().st_size == index_before + 32 + 8 + 4
    assert data_files(store) == [data]

    tokens._SHARED.clear()
    again = TokenStore.open(tmp_path, "m")
    np.testing.assert_array_equal(again.get([text_key("one more")])[0], extra)
    # adding a key already there changes nothing on disk
    sig = os.stat(data).st_mtime_ns, os.stat(again.path).st_ino
    again.add({text_key("p5"): rand(3, seed=1)})
    assert (os.stat(data).st_mtime_ns, os.stat(again.path).st_ino) == sig
    np.testing.assert_array_equal(again.get([text_key("p5")])[0], many[text_key("p5")])


# 3 -------------------------------------------------------------------------------------------

def test_two_writer_processes_at_once(tmp_path):
    go = tmp_path / "go"
    procs = [run_writer(tmp_path, "m", tag, 200, 10, go) for tag in ("left", "right")]
    time.sleep(0.3)  # both interpreters up and waiting
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        assert out.decode().strip() == "ok"

    store = TokenStore.open(tmp_path, "m")
    keys = [text_key(f"{tag}-{i}") for tag in ("left", "right") for i in range(200)]
    assert len(store) == 400 and store.missing(keys) == []
    for key, arr in zip(keys, store.get(keys), strict=True):
        assert arr is not None
        np.testing.assert_array_equal(arr, matrix_for(key))
    assert store.data_path().stat().st_size == store.covered
    assert store.covered == sum(matrix_for(k).size for k in keys)


# 4 -------------------------------------------------------------------------------------------

def test_a_writer_killed_mid_append_leaves_a_tail_that_is_ignored_then_cut(tmp_path):
    first = {text_key(f"k{i}"): rand(2 + i, seed=i) for i in range(5)}
    store = TokenStore.open(tmp_path, "m")
    store.add(first)
    covered = store.covered
    with store.data_path().open("ab") as fh:  # half a record, no index update
        fh.write(b"\x55" * (3 * DIM + 5))
    assert store.data_path().stat().st_size > covered

    tokens._SHARED.clear()
    reader = TokenStore.open(tmp_path, "m")
    for key, arr in zip(first, reader.get(list(first)), strict=True):
        np.testing.assert_array_equal(arr, first[key])

    later = {text_key("after-1"): rand(4, seed=50), text_key("after-2"): rand(1, seed=51)}
    reader.add(later)
    assert reader.covered == covered + 5 * DIM
    assert reader.data_path().stat().st_size == reader.covered  # the torn tail is gone
    tokens._SHARED.clear()
    both = {**first, **later}
    fresh = TokenStore.open(tmp_path, "m")
    for key, arr in zip(both, fresh.get(list(both)), strict=True):
        np.testing.assert_array_equal(arr, both[key])
    assert b"\x55" * 8 not in fresh.data_path().read_bytes()


def test_a_writer_killed_mid_append_for_real(tmp_path):
    """A subprocess is SIGKILLed while it writes; the store still reads and accepts adds."""
    done = [text_key(f"pre{i}") for i in range(20)]
    TokenStore.open(tmp_path, "m").add({k: matrix_for(k) for k in done})
    proc = run_writer(tmp_path, "m", "victim", 100000, 50)
    time.sleep(1.0)
    proc.kill()
    proc.wait(timeout=30)
    store = TokenStore.open(tmp_path, "m")
    for key, arr in zip(done, store.get(done), strict=True):
        np.testing.assert_array_equal(arr, matrix_for(key))
    store.add({text_key("survivor"): rand(3, seed=7)})
    assert store.data_path().stat().st_size == store.covered
    tokens._SHARED.clear()
    np.testing.assert_array_equal(TokenStore.open(tmp_path, "m").get([text_key("survivor")])[0], rand(3, seed=7))


# 5 -------------------------------------------------------------------------------------------

def _truncate(idx: Path, store: TokenStore) -> None:
    idx.write_bytes(idx.read_bytes()[:-7])


def _random(idx: Path, store: TokenStore) -> None:
    idx.write_bytes(os.urandom(idx.stat().st_size))


def _short_header(idx: Path, store: TokenStore) -> None:
    idx.write_bytes(b"RMTTOK01\x01")


def _foreign(idx: Path, store: TokenStore) -> None:
    other = TokenStore.open(idx.parent.parent, "another-model")
    other.add({text_key("theirs"): rand(2, seed=8)})
    shutil.copyfile(other.path, idx)


def _offset_out_of_range(idx: Path, store: TokenStore) -> None:
    raw = bytearray(idx.read_bytes())
    at = tokens._HEAD.size + len(store.identity.encode()) + len(store) * 32
    raw[at:at + 8] = (10**12).to_bytes(8, "little")
    idx.write_bytes(bytes(raw))


def _data_short(idx: Path, store: TokenStore) -> None:
    with store.data_path().open("r+b") as fh:
        fh.truncate(store.covered - 1)


def _data_gone(idx: Path, store: TokenStore) -> None:
    store.data_path().unlink()


@pytest.mark.parametrize("damage", [_truncate, _random, _short_header, _foreign, _offset_out_of_range,
                                    _data_short, _data_gone])
def test_a_damaged_index_reads_as_empty_then_rebuilds(tmp_path, damage):
    old = {text_key(f"o{i}"): rand(3, seed=i) for i in range(6)}
    store = TokenStore.open(tmp_path, "m")
    store.add(old)
    damage(store.path, store)
    tokens._SHARED.clear()  # as a fresh process would

    broken = TokenStore.open(tmp_path, "m")
    assert len(broken) == 0
    assert broken.get(list(old)) == [None] * len(old)
    assert broken.missing(list(old)) == list(range(len(old)))
    assert text_key("o1") not in broken

    new = {text_key("n1"): rand(4, seed=20), text_key("n2"): rand(0)}
    broken.add(new)
    tokens._SHARED.clear()
    rebuilt = TokenStore.open(tmp_path, "m")
    assert len(rebuilt) == 2
    for key, arr in zip(new, rebuilt.get(list(new)), strict=True):
        np.testing.assert_array_equal(arr, new[key])
    assert data_files(rebuilt) == [rebuilt.data_path()]
    assert rebuilt.data_path().stat().st_size == rebuilt.covered == 4 * DIM


# 6 -------------------------------------------------------------------------------------------

def test_compaction_keeps_only_live_records_in_a_new_generation(tmp_path):
    names = "ABCDEFGHIJ"
    mats = {text_key(n): rand(4, seed=i) for i, n in enumerate(names)}
    store = TokenStore.open(tmp_path, "m")
    store.add(mats)
    gen = store.generation
    old_data = store.data_path()

    # every key still live: an append, not a compaction
    l_key = text_key("L")
    store.add({l_key: rand(2, seed=40)}, live=[*mats, l_key])
    assert store.generation == gen and old_data.exists()

    a, k = text_key("A"), text_key("K")
    k_mat = rand(3, seed=30)
    TokenStore.open(tmp_path, "m").add({k: k_mat}, live={k, a})

    tokens._SHARED.clear()
    after = TokenStore.open(tmp_path, "m")
    assert after.generation != gen
    assert not old_data.exists()
    assert data_files(after) == [after.data_path()]
    assert len(after) == 2
    assert after.missing([text_key(n) for n in names[1:]] + [l_key]) == list(range(10))
    np.testing.assert_array_equal(after.get([a])[0], mats[a])
    np.testing.assert_array_equal(after.get([k])[0], k_mat)
    assert after.data_path().stat().st_size == after.covered == (4 + 3) * DIM

    # appends continue in the new generation
    after.add({text_key("M"): rand(1, seed=41)})
    assert after.covered == (4 + 3 + 1) * DIM and data_files(after) == [after.data_path()]


def test_a_reader_mapped_before_compaction_keeps_reading(tmp_path):
    mats = {text_key(n): rand(4, seed=i) for i, n in enumerate("ABCDEFGHIJ")}
    TokenStore.open(tmp_path, "m").add(mats)
    reader = TokenStore.open(tmp_path, "m")
    before = reader.get([text_key("C")])[0]
    tokens._SHARED.clear()
    TokenStore.open(tmp_path, "m").add({text_key("K"): rand(1)}, live=[text_key("K")])
    np.testing.assert_array_equal(before, mats[text_key("C")])
    np.testing.assert_array_equal(reader.get([text_key("D")])[0], mats[text_key("D")])


# 7 -------------------------------------------------------------------------------------------

def test_a_new_dim_starts_afresh(tmp_path):
    small = {text_key(f"s{i}"): rand(3, 8, seed=i) for i in range(4)}
    store = TokenStore.open(tmp_path, "m")
    store.add(small)
    old_data, gen = store.data_path(), store.generation

    wide = rand(5, 16, seed=9)
    TokenStore.open(tmp_path, "m").add({text_key("w"): wide, text_key("s0"): rand(2, 16, seed=3)})
    tokens._SHARED.clear()
    after = TokenStore.open(tmp_path, "m")
    assert after.dim == 16 and after.generation > gen
    assert not old_data.exists() and data_files(after) == [after.data_path()]
    assert after.missing(list(small)) == [1, 2, 3]  # s0 stored again, at the new dim
    np.testing.assert_array_equal(after.get([text_key("w")])[0], wide)
    np.testing.assert_array_equal(after.get([text_key("s0")])[0], rand(2, 16, seed=3))


# 8 -------------------------------------------------------------------------------------------

def test_a_warm_process_parses_the_index_once_and_sees_other_writers(tmp_path, monkeypatch):
    mats = {text_key(f"q{i}"): rand(2, seed=i) for i in range(60)}
    TokenStore.open(tmp_path, "m").add(mats)
    tokens._SHARED.clear()

    calls = []
    real = tokens._parse_index

    def counting(raw, identity):
        calls.append(len(raw))
        return real(raw, identity)

    monkeypatch.setattr(tokens, "_parse_index", counting)
    one = TokenStore.open(tmp_path, "m")
    two = TokenStore.open(tmp_path, "m")
    assert len(calls) == 1
    assert one.keys is two.keys  # the shared parse
    got = two.get(list(mats))
    assert all(g is not None for g in got) and len(calls) == 1

    proc = run_writer(tmp_path, "m", "elsewhere", 3, 3)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    three = TokenStore.open(tmp_path, "m")
    assert len(calls) == 2
    new_keys = [text_key(f"elsewhere-{i}") for i in range(3)]
    assert three.missing(new_keys) == []
    np.testing.assert_array_equal(three.get(new_keys[:1])[0], matrix_for(new_keys[0]))
    assert one.missing(new_keys) == [0, 1, 2]  # an open instance keeps its view until reload
    one.reload()
    assert one.missing(new_keys) == [] and len(calls) == 2


def test_identity_names_the_files(tmp_path):
    store = TokenStore.open(tmp_path, "some/model@v1")
    store.add({text_key("x"): rand(1)})
    name = hashlib.sha256(b"some/model@v1").hexdigest()[:24]
    assert store.path == tmp_path / "tokens" / f"{name}.idx"
    assert store.path.exists() and (tmp_path / "tokens" / f"{name}.lock").exists()
    assert store.data_path() == tmp_path / "tokens" / f"{name}.{store.generation}.dat"


def test_compaction_follows_bytes_not_only_counts(tmp_path):
    a, b, c, d = keys_of("big-dead", "b", "c", "d")
    store = TokenStore.open(tmp_path, "m")
    store.add({a: rand(100, seed=1), b: rand(1, seed=2)})
    gen = store.generation
    # 3 records, 2 live: too few dead to compact by count, but the dead one holds most bytes
    store.add({c: rand(1, seed=3)}, live=[b, c])
    assert store.generation != gen and a not in store and len(store) == 2
    assert store.covered == 2 * DIM
    gen = store.generation
    # one dead 1-token record among 3 (4 tokens in all, 3 live): nothing dropped
    store.add({d: rand(2, seed=4)}, live=[c, d])
    assert store.generation == gen and b in store and len(store) == 3
