"""The vector cache: embeddings keyed by (model identity, SHA-256 of the embedded text).

One binary file per model identity under ``.runtime/cache/vectors/``: a small header, the
32-byte text digests (sorted, so lookups are one vectorised binary search), then the vectors
as float32 rows (a 10,000-entry corpus of 384-dim vectors is 15 MB, read once per process and
copied once more only when its rows are not aligned in the file, so that scoring multiplies
it with BLAS and no per-call conversion). Keys are content hashes, so a one-node edit
changes one key: one new embedding, nothing else recomputed. Writers hold a file lock and
replace the file atomically; readers never see a partial file. Rows no longer used are
dropped when they outnumber the live ones.

A few new vectors (a one-node edit's) are appended to a log beside the file (``.log``: a
header naming the model and dimension, then key and vector records) instead of rewriting
15 MB; the file is rewritten with the log merged in, and the log removed, once the log
holds :data:`LOG_ROWS` rows or a larger batch arrives. Readers merge the log's whole
records (a torn last record is left out) into the sorted rows they search.

A long-lived process (the warm service, the MCP server) retrieves many times over the same
file: the parsed file is kept per process while its signature (size, mtime, inode) holds, and
so is the row lookup of the last key set asked for, so a warm call neither reads 15 MB nor
searches 10,000 keys again (warm retrieval latency; docs/architecture.md,
"The warm local embedding service"). Shared arrays are read-only; writers build new ones.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from rmtui.engine.fsutil import atomic_write_bytes
from rmtui.engine.locks import file_lock
from rmtui.engine.retrieval import coarse

T = TypeVar("T")
MAGIC = b"RMTVEC03"
LOG_MAGIC = b"RMTVLG01"
KEY_DTYPE = np.dtype("S32")
_HEAD = struct.Struct("<8sII")
#: Rows the log beside a vector file takes before the file is rewritten with them.
LOG_ROWS = 256


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def as_keys(keys) -> np.ndarray:
    """Keys as a numpy array of 32-byte strings (what lookups take)."""
    if isinstance(keys, np.ndarray) and keys.dtype == KEY_DTYPE:
        return keys
    return np.frombuffer(b"".join(keys), dtype=KEY_DTYPE) if len(keys) else np.zeros(0, dtype=KEY_DTYPE)


@dataclass
class _Loaded:
    """One parsed cache file, shared by the instances of this process while the file is unchanged."""

    keys: np.ndarray
    matrix: np.ndarray
    dim: int
    #: the last lookup: (the asked keys' bytes, rows, missing, the asked keys)
    last_rows: tuple[bytes, np.ndarray, list[int], np.ndarray] | None = None
    log_rows: int = 0  # rows merged in from the log
    merged: dict[tuple[int, ...], _Loaded] = field(default_factory=dict)  # log signature -> this file with that log
    projection: coarse.Slot = field(default_factory=coarse.Slot)  # built only in a long-lived process


def signature(st: os.stat_result) -> tuple[int, ...]:
    """What tells a file changed: size, times and inode (a replaced file has a new inode)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def cache_name(identity: str) -> str:
    """The file name stem of a model identity's cache files."""
    return hashlib.sha256(identity.encode()).hexdigest()[:24]


class ParsedFiles(Generic[T]):
    """Parsed cache files of this process, each kept while its file's signature holds (the
    few most recently used): a warm process does not read or parse an unchanged file again."""

    def __init__(self, size: int = 8) -> None:
        self._items: OrderedDict[tuple[Path, str], tuple[tuple[int, ...], T]] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def get(self, key: tuple[Path, str], sig: tuple[int, ...]) -> T | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None or hit[0] != sig:
                return None
            self._items.move_to_end(key)
            return hit[1]

    def put(self, key: tuple[Path, str], sig: tuple[int, ...], value: T) -> None:
        with self._lock:
            self._items[key] = (sig, value)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_SHARED: ParsedFiles[_Loaded] = ParsedFiles()


def _read_aligned(fh) -> memoryview:
    """The whole file, read into a buffer placed so that its vector matrix starts on a
    16-byte boundary: where the matrix starts depends on the model name's length in the
    header, and a misaligned matrix would have to be copied (about 30 ms at 10,000 rows)."""
    head = fh.read(_HEAD.size + 4)
    size = os.fstat(fh.fileno()).st_size
    matrix_at = 0
    if len(head) == _HEAD.size + 4:
        _, n, _ = _HEAD.unpack_from(head)
        matrix_at = _HEAD.size + 4 + int.from_bytes(head[_HEAD.size:], "little") + n * KEY_DTYPE.itemsize
    pad = -matrix_at % 16
    buf = np.empty(size + pad, dtype=np.uint8)  # numpy's allocations are at least 16-byte aligned
    fh.seek(0)
    got = fh.readinto(buf.data[pad:])
    return buf.data[pad:pad + got].toreadonly()  # arrays made on it stay read-only, as on bytes


@dataclass
class VectorCache:
    """The cached vectors of one model identity; keys kept sorted for vectorised lookup."""

    path: Path
    identity: str
    dim: int = 0
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=KEY_DTYPE))
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    _loaded: _Loaded | None = field(default=None, repr=False, compare=False)

    @classmethod
    def open(cls, cache_dir: Path, identity: str) -> VectorCache:
        cache = cls(Path(cache_dir) / "vectors" / f"{cache_name(identity)}.bin", identity)
        cache.reload()
        return cache

    @property
    def log_path(self) -> Path:
        return self.path.with_suffix(".log")

    def reload(self) -> None:
        base = self._read_base()
        if base is None:
            return
        try:
            log_sig = signature(os.stat(self.log_path))
        except OSError:
            self._use(base)
            return
        merged = base.merged.get(log_sig)
        if merged is None:
            merged = self._with_log(base)
            base.merged.clear()
            base.merged[log_sig] = merged
        self._use(merged)

    def _with_log(self, base: _Loaded) -> _Loaded:
        """``base`` with the log's rows it lacks merged in (sorted again); ``base`` itself when
        the log is empty, damaged or of another model or dimension."""
        try:
            raw = self.log_path.read_bytes()
        except OSError:
            return base
        head = self._log_head(base.dim)
        if not raw.startswith(head):
            return base
        size = 32 + 4 * base.dim
        n = (len(raw) - len(head)) // size  # a torn last record is left out
        if not n:
            return base
        recs = np.frombuffer(raw, dtype=np.uint8, count=n * size, offset=len(head)).reshape(n, size)
        keys = np.frombuffer(recs[:, :32].tobytes(), dtype=KEY_DTYPE)
        _, first = np.unique(keys, return_index=True)
        first = np.sort(first)
        if len(base.keys):
            pos = np.minimum(np.searchsorted(base.keys, keys[first]), len(base.keys) - 1)
            first = first[base.keys[pos] != keys[first]]
        if not len(first):
            return base
        first = first[np.argsort(keys[first], kind="stable")]  # the log's new keys in key order
        vecs = np.frombuffer(recs[first, 32:].tobytes(), dtype=np.float32).reshape(len(first), base.dim)
        # each slid into its place among the sorted rows: one copy of the matrix, no sort of it
        at = np.searchsorted(base.keys, keys[first])
        matrix = np.insert(base.matrix, at, vecs, axis=0)
        matrix.flags.writeable = False
        out_keys = np.insert(base.keys, at, keys[first])
        out_keys.flags.writeable = False
        return _Loaded(out_keys, matrix, base.dim, log_rows=len(first))

    def _log_head(self, dim: int) -> bytes:
        ident = self.identity.encode()
        return LOG_MAGIC + dim.to_bytes(4, "little") + len(ident).to_bytes(4, "little") + ident

    def _read_base(self) -> _Loaded | None:
        memo_key = (self.path, self.identity)
        try:
            with self.path.open("rb") as fh:
                sig = signature(os.fstat(fh.fileno()))
                hit = _SHARED.get(memo_key, sig)
                if hit is not None:
                    return hit
                raw = _read_aligned(fh)
        except OSError:
            return None
        if len(raw) < _HEAD.size:
            return None
        magic, n, dim = _HEAD.unpack_from(raw)
        ident_len = int.from_bytes(raw[_HEAD.size:_HEAD.size + 4], "little")
        off = _HEAD.size + 4
        ident = bytes(raw[off:off + ident_len]).decode("utf-8", "replace")
        off += ident_len
        if magic != MAGIC or ident != self.identity or len(raw) != off + n * 32 + n * dim * 4:
            return None  # another model's file or a damaged one: start afresh
        matrix = np.frombuffer(raw, dtype=np.float32, count=n * dim, offset=off + n * 32).reshape(n, dim)
        if not matrix.flags.aligned:  # BLAS takes only aligned rows (5x faster); _read_aligned sees to it
            matrix = matrix.copy()
            matrix.flags.writeable = False
        loaded = _Loaded(np.frombuffer(raw, dtype=KEY_DTYPE, count=n, offset=off), matrix, dim)
        _SHARED.put(memo_key, sig, loaded)
        return loaded

    def _use(self, loaded: _Loaded) -> None:
        self.keys, self.matrix, self.dim = loaded.keys, loaded.matrix, loaded.dim
        self._loaded = loaded

    def __contains__(self, key: bytes) -> bool:
        return not self.rows([key])[1]

    def rows(self, keys) -> tuple[np.ndarray, list[int]]:
        """Row of each key in :attr:`matrix` (0 where missing) and the positions missing."""
        q = as_keys(keys)
        if not len(self.keys):
            return np.zeros(len(q), dtype=np.int64), list(range(len(q)))
        loaded = self._loaded if self._loaded is not None and self._loaded.keys is self.keys else None
        last = loaded.last_rows if loaded is not None else None
        if last is not None and last[3] is q and not q.flags.writeable:  # the same read-only key set
            return last[1], list(last[2])
        asked = q.tobytes() if loaded is not None else b""
        if last is not None and last[0] == asked:
            return last[1], list(last[2])
        pos = np.searchsorted(self.keys, q)
        pos = np.minimum(pos, len(self.keys) - 1)
        hit = self.keys[pos] == q
        missing = np.flatnonzero(~hit).tolist()
        pos[~hit] = 0
        out = pos.astype(np.int64)
        if loaded is not None:
            out.flags.writeable = False  # handed to every later caller asking for the same keys
            loaded.last_rows = (asked, out, missing, q)
        return out, list(missing)

    def prepare(self, *, wait: bool = False) -> None:
        """Start building the coarse projection of a large matrix (:mod:`coarse`): for a
        process that knows it will retrieve many times, warming up. ``wait``: until it is
        built (the benches, measuring the steady state)."""
        if self._loaded is not None and self._loaded.matrix is self.matrix:
            if wait:
                self._loaded.projection.build(self.matrix)
            else:
                self._loaded.projection.start(self.matrix)

    def lookup(self, keys) -> tuple[np.ndarray, list[int]]:
        """Vectors for ``keys`` (zeros where missing) and the positions that are missing."""
        if not self.dim:
            return np.zeros((len(keys), 0), dtype=np.float32), list(range(len(keys)))
        idx, missing = self.rows(keys)
        out = self.matrix[idx]
        if missing:
            out[missing] = 0.0
        return out, missing

    def scores(self, keys, query: np.ndarray, widen: coarse.Widen | None = None) -> tuple[np.ndarray, list[int]]:
        """Dot product of ``query`` with the vector of each key (0 where missing). A large
        matrix shared in a long-lived process is scored by :mod:`coarse` first: exact for the
        best keys and for the positions ``widen`` adds, coarse for the rest."""
        if not self.dim:
            return np.zeros(len(keys), dtype=np.float32), list(range(len(keys)))
        idx, missing = self.rows(keys)
        shared = self._loaded if self._loaded is not None and self._loaded.matrix is self.matrix else None
        out = coarse.scan(self.matrix, query, idx, shared.projection if shared is not None else None, widen)
        if missing:
            out[missing] = 0.0
        return out, missing

    def add(self, new: dict[bytes, np.ndarray], live=None) -> None:
        """Store new vectors (under the cache lock, merged with what others stored meanwhile).

        ``live``: the keys the corpus uses now; dead rows are dropped when they outnumber them.
        """
        if not new:
            return
        lock = self.path.with_suffix(".lock")
        with file_lock(lock):
            self.reload()
            dim = len(next(iter(new.values())))
            if self.dim and dim != self.dim:
                self.keys, self.matrix, self.dim = np.zeros(0, KEY_DTYPE), np.zeros((0, dim), np.float32), 0
            new_keys = as_keys(list(new))
            _, fresh = self.rows(new_keys)
            log_rows = self._loaded.log_rows if self._loaded is not None else 0
            if fresh and self.dim == dim and len(self.keys) and log_rows + len(fresh) <= LOG_ROWS \
                    and (live is None or len(self.keys) + len(fresh) <= 2 * max(len(live), 1)):
                self._append(new_keys, fresh, list(new.values()), dim)
                return
            keys = np.concatenate([self.keys, new_keys[fresh]]) if fresh else self.keys
            parts = [self.matrix.reshape(len(self.keys), dim)] if len(self.keys) else []
            if fresh:
                vals = list(new.values())
                parts.append(np.asarray([vals[i] for i in fresh], dtype=np.float32).reshape(len(fresh), dim))
            matrix = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
            if live is not None:
                live_keys = np.unique(as_keys(list(live)))
                if len(keys) > 2 * max(len(live_keys), 1):
                    pos = np.minimum(np.searchsorted(live_keys, keys), max(len(live_keys) - 1, 0))
                    keep = live_keys[pos] == keys if len(live_keys) else np.zeros(len(keys), bool)
                    keys, matrix = keys[keep], matrix[keep]
            order = np.argsort(keys, kind="stable")
            self._write(keys[order], matrix[order], dim)

    def _write(self, keys: np.ndarray, matrix: np.ndarray, dim: int) -> None:
        ident = self.identity.encode()
        blob = b"".join([_HEAD.pack(MAGIC, len(keys), dim), len(ident).to_bytes(4, "little"), ident,
                         np.ascontiguousarray(keys).tobytes(),
                         np.ascontiguousarray(matrix, dtype=np.float32).tobytes()])
        atomic_write_bytes(self.path, blob)
        self.log_path.unlink(missing_ok=True)  # its rows are in the file now
        self.keys, self.dim = np.ascontiguousarray(keys), dim
        self.matrix = np.asarray(matrix, dtype=np.float32)
        self._loaded = None  # the next reload of another instance reads the new file

    def _append(self, keys: np.ndarray, fresh: list[int], vecs: list[np.ndarray], dim: int) -> None:
        """The new rows appended to the log (under the cache lock), then read back as others will."""
        rows = np.empty((len(fresh), 32 + 4 * dim), np.uint8)
        rows[:, :32] = np.frombuffer(keys[fresh].tobytes(), np.uint8).reshape(len(fresh), 32)
        rows[:, 32:] = np.asarray([vecs[i] for i in fresh], dtype="<f4").reshape(len(fresh), dim).view(np.uint8)
        recs = rows.tobytes()
        head = self._log_head(dim)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size < len(head):  # new, or a torn header: start it again
                os.ftruncate(fd, 0)
                recs = head + recs
            else:
                step = 32 + 4 * dim
                torn = (size - len(head)) % step
                if torn:  # a writer died mid-record: that record is dropped, the next starts whole
                    os.ftruncate(fd, size - torn)
            view = memoryview(recs)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        self.reload()
