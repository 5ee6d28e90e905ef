"""The token store: per-passage token embeddings keyed by (model identity, SHA-256 of the text).

The second stage's late-interaction feature ("maxsim": for each query token, its best match
among a passage's tokens) needs every token vector of every candidate passage, about 40 times
the size of the one-vector-per-passage cache in :mod:`vectors`. So rows are stored as int8
(``round(x * 127)`` of L2-normalised floats, a quarter of float32, with a maxsim error well
under a percent), and the store is append-only: a one-passage change appends one record and
replaces a small index, instead of rewriting the data.

Files under ``.runtime/cache/tokens/``, ``name`` being the first 24 hex digits of the SHA-256
of the model identity:

``name.idx``
    the index, replaced atomically (readers see the old or the new one, never a part)::

        header   "<8sIIIQQ": magic b"RMTTOK01", identity length, dim, generation,
                             covered data length (bytes), count n
        identity UTF-8, identity-length bytes
        keys     n x 32-byte SHA-256 text keys, sorted (lookups are one np.searchsorted)
        offsets  n x little-endian int64: byte offset of each record in the data file
        counts   n x little-endian int32: tokens in each record (0 allowed)

``name.<generation>.dat``
    the records, ``count * dim`` int8 bytes each, back to back; append-only below the
    covered length. Memory-mapped by readers, never read whole.

``name.lock``
    held by writers only. Readers take no lock.

A writer, under the lock: reloads the index (others may have added), skips keys already
stored, truncates the data file to the covered length (dropping a torn tail left by a
process killed mid-append), appends, fsyncs, then replaces the index. A crash at any point
leaves the old index over intact data. When the data holds more than twice the bytes of the
records the corpus still uses (or the index more than twice their count), the live records
are copied to a new generation's data file, the index is pointed at it, and the old data file
is removed; a different dim starts a new generation afresh. A missing, foreign or damaged
index reads as an empty store and the next ``add`` rebuilds from scratch.

A long-lived process keeps the parsed index and the mapping of its data file while the index
file's signature (size, mtime, ctime, inode) holds, so a warm query's ``open`` + ``get`` reads
nothing. Returned arrays are read-only views into the mapping.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rmtui.engine.fsutil import atomic_write_bytes
from rmtui.engine.locks import file_lock
from rmtui.engine.retrieval.vectors import KEY_DTYPE, ParsedFiles, as_keys, cache_name, signature

MAGIC = b"RMTTOK01"
SCALE = 127
_HEAD = struct.Struct("<8sIIIQQ")
_OFF_DTYPE = np.dtype("<i8")
_CNT_DTYPE = np.dtype("<i4")
_ENTRY = KEY_DTYPE.itemsize + _OFF_DTYPE.itemsize + _CNT_DTYPE.itemsize


def quantize(matrix: np.ndarray) -> np.ndarray:
    """float rows (already L2-normalised) -> int8 (``round(x * 127)``, clipped to [-127, 127])."""
    scaled = np.rint(np.asarray(matrix, dtype=np.float32) * SCALE)
    return np.clip(scaled, -SCALE, SCALE).astype(np.int8)


def dequantize(matrix: np.ndarray) -> np.ndarray:
    """int8 rows of :func:`quantize` -> float32 (``x / 127``)."""
    return np.asarray(matrix, dtype=np.float32) * np.float32(1 / SCALE)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _empty_data() -> np.ndarray:
    return _readonly(np.zeros(0, dtype=np.int8))


@dataclass
class _Index:
    """One parsed index file."""

    dim: int
    generation: int
    covered: int
    keys: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray
    #: (asked keys, answer, the key array asked): a warm query asks the same
    last_missing: tuple[bytes, list[int], np.ndarray] | None = None


@dataclass
class _Loaded:
    """A parsed index and the mapping of its data file, shared by this process while the index is unchanged."""

    index: _Index
    data: np.ndarray


_SHARED: ParsedFiles[_Loaded] = ParsedFiles()


def _parse_index(raw: bytes, identity: str) -> _Index | None:
    """The index in ``raw``, or None when it is short, foreign or damaged."""
    if len(raw) < _HEAD.size:
        return None
    magic, ident_len, dim, generation, covered, n = _HEAD.unpack_from(raw)
    off = _HEAD.size
    if magic != MAGIC or dim <= 0 or generation <= 0 or len(raw) != off + ident_len + n * _ENTRY:
        return None
    if raw[off:off + ident_len].decode("utf-8", "replace") != identity:
        return None
    off += ident_len
    keys = np.frombuffer(raw, dtype=KEY_DTYPE, count=n, offset=off)
    off += n * KEY_DTYPE.itemsize
    offsets = np.frombuffer(raw, dtype=_OFF_DTYPE, count=n, offset=off)
    off += n * _OFF_DTYPE.itemsize
    counts = np.frombuffer(raw, dtype=_CNT_DTYPE, count=n, offset=off)
    if n:
        ends = offsets + counts.astype(np.int64) * dim
        if (offsets < 0).any() or (counts < 0).any() or (ends < offsets).any() or int(ends.max()) > covered:
            return None
        if n > 1 and not bool((keys[1:] > keys[:-1]).all()):
            return None
    return _Index(dim, generation, covered, keys, offsets, counts)


def _map(path: Path, length: int) -> np.ndarray | None:
    """The first ``length`` bytes of ``path`` as a read-only int8 array, or None if it is shorter."""
    try:
        with path.open("rb") as fh:
            if os.fstat(fh.fileno()).st_size < length:
                return None
            if not length:
                return _empty_data()
            mm = mmap.mmap(fh.fileno(), length, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    return np.frombuffer(mm, dtype=np.int8, count=length)  # read-only: the map is


@dataclass
class TokenStore:
    """The stored token matrices of one model identity."""

    path: Path  # the index file
    identity: str
    dim: int = 0
    generation: int = 0  # 0: no valid index on disk
    covered: int = 0
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=KEY_DTYPE))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=_OFF_DTYPE))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=_CNT_DTYPE))
    _data: np.ndarray = field(default_factory=_empty_data, repr=False, compare=False)
    _index: _Index | None = field(default=None, repr=False, compare=False)

    @classmethod
    def open(cls, cache_dir: Path, identity: str) -> TokenStore:
        store = cls(Path(cache_dir) / "tokens" / f"{cache_name(identity)}.idx", identity)
        store.reload()
        return store

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(f"{self.name}.lock")

    def data_path(self, generation: int | None = None) -> Path:
        gen = self.generation if generation is None else generation
        return self.path.with_name(f"{self.name}.{gen}.dat")

    # -- reading -------------------------------------------------------------------------

    def reload(self) -> None:
        """Read the index (or reuse this process's parse of it); an unreadable one is an empty store."""
        for _ in range(3):  # a compaction between reading the index and mapping its data: read again
            loaded = self._load()
            if isinstance(loaded, _Loaded):
                self._use(loaded)
                return
            if loaded is None:
                break
        self._use(None)

    def _load(self) -> _Loaded | None | bool:
        memo_key = (self.path, self.identity)
        try:
            with self.path.open("rb") as fh:
                sig = signature(os.fstat(fh.fileno()))
                hit = _SHARED.get(memo_key, sig)
                if hit is not None:
                    return hit
                raw = fh.read()
        except OSError:
            return None
        index = _parse_index(raw, self.identity)
        if index is None:
            return None
        data = _map(self.data_path(index.generation), index.covered)
        if data is None:
            try:  # the index moved on (compaction) since we read it: try again; else damaged
                changed = signature(self.path.stat()) != sig
            except OSError:
                changed = True
            return False if changed else None
        loaded = _Loaded(index, data)
        _SHARED.put(memo_key, sig, loaded)
        return loaded

    def _use(self, loaded: _Loaded | None) -> None:
        if loaded is None:
            self.dim, self.generation, self.covered = 0, 0, 0
            self.keys = np.zeros(0, dtype=KEY_DTYPE)
            self.offsets = np.zeros(0, dtype=_OFF_DTYPE)
            self.counts = np.zeros(0, dtype=_CNT_DTYPE)
            self._data = _empty_data()
            self._index = None
            return
        ix = loaded.index
        self._index = ix
        self.dim, self.generation, self.covered = ix.dim, ix.generation, ix.covered
        self.keys, self.offsets, self.counts, self._data = ix.keys, ix.offsets, ix.counts, loaded.data

    def _positions(self, keys) -> tuple[np.ndarray, np.ndarray]:
        """Index position of each key (0 where missing) and whether it is stored."""
        q = as_keys(keys)
        if not len(self.keys) or not len(q):
            return np.zeros(len(q), dtype=np.int64), np.zeros(len(q), dtype=bool)
        pos = np.minimum(np.searchsorted(self.keys, q), len(self.keys) - 1)
        hit = self.keys[pos] == q
        pos[~hit] = 0
        return pos.astype(np.int64), hit

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, key: bytes) -> bool:
        return bool(self._positions([key])[1].all())

    def missing(self, keys) -> list[int]:
        """Positions in ``keys`` (bytes or an S32 array) of those not stored (the answer for
        the last key set asked is kept with the parsed index: every warm query asks it again)."""
        q = as_keys(keys)
        ix = self._index if self._index is not None and self._index.keys is self.keys else None
        last = ix.last_missing if ix is not None else None
        if last is not None and last[2] is q and not q.flags.writeable:  # the same read-only key set
            return list(last[1])
        asked = q.tobytes() if ix is not None else b""
        if last is not None and last[0] == asked:
            return list(last[1])
        out = np.flatnonzero(~self._positions(q)[1]).tolist()
        if ix is not None:
            ix.last_missing = (asked, list(out), q)
        return out

    def get(self, keys) -> list[np.ndarray | None]:
        """The int8 ``(n_tokens, dim)`` matrix of each key (read-only), None where not stored."""
        pos, hit = self._positions(keys)
        out: list[np.ndarray | None] = []
        for p, h in zip(pos.tolist(), hit.tolist(), strict=True):
            out.append(self._record(p) if h else None)
        return out

    def _record(self, p: int) -> np.ndarray:
        start, n = int(self.offsets[p]), int(self.counts[p])
        return self._data[start:start + n * self.dim].reshape(n, self.dim)

    # -- writing -------------------------------------------------------------------------

    def add(self, new: Mapping[bytes, np.ndarray], live: Iterable[bytes] | None = None) -> None:
        """Store new token matrices (under the store lock, merged with what others stored meanwhile).

        ``new``: key -> int8 ``(n_tokens, dim)``; a passage with no tokens is stored too.
        ``live``: the keys the corpus uses now; dead records are dropped (a new data generation)
        when they hold more than the live ones.
        """
        if not new:
            return
        items = [(bytes(k), np.asarray(v)) for k, v in new.items()]
        dim = _check(items)
        with file_lock(self.lock_path):
            self.reload()
            afresh = not self.generation or dim != self.dim
            if afresh:
                generation = max([self.generation, *self._generations_on_disk()]) + 1
                self._use(None)
            else:
                generation = self.generation
            new_keys = as_keys([k for k, _ in items])
            fresh = [items[i] for i in np.flatnonzero(~self._positions(new_keys)[1]).tolist()]
            if not fresh and not afresh and live is None:
                return
            fresh_counts = np.array([len(m) for _, m in fresh], dtype=_CNT_DTYPE)
            keys = np.concatenate([self.keys, as_keys([k for k, _ in fresh])])
            counts = np.concatenate([self.counts, fresh_counts])
            # where fresh records land when appended: after the covered length
            sizes = fresh_counts.astype(np.int64) * dim
            fresh_offsets = self.covered + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            offsets = np.concatenate([self.offsets, fresh_offsets]).astype(_OFF_DTYPE)
            total = self.covered + int(sizes.sum())
            keep = _live_mask(keys, live)
            if keep is not None and _should_compact(counts, keep, dim, total):
                generation = max([generation, *self._generations_on_disk()]) + 1
                self._compact(keys, counts, offsets, keep, fresh, dim, generation)
            elif fresh or afresh:
                self._append(fresh, dim, generation)
                self._publish(keys, offsets, counts, dim, generation, total)
            self._drop_other_generations()

    def _generations_on_disk(self) -> list[int]:
        gens = []
        for p in self.path.parent.glob(f"{self.name}.*.dat"):
            part = p.name[len(self.name) + 1:-len(".dat")]
            if part.isdigit():
                gens.append(int(part))
        return gens

    def _append(self, fresh: list[tuple[bytes, np.ndarray]], dim: int, generation: int) -> None:
        """Append the records to the data file, cut back to the covered length first; fsync."""
        path = self.data_path(generation)
        path.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o644), "r+b") as fh:
            if os.fstat(fh.fileno()).st_size != self.covered:
                fh.truncate(self.covered)  # a torn tail from a writer killed mid-append
            fh.seek(self.covered)
            for _, m in fresh:
                fh.write(np.ascontiguousarray(m, dtype=np.int8).tobytes())
            fh.flush()
            os.fsync(fh.fileno())

    def _compact(self, keys: np.ndarray, counts: np.ndarray, offsets: np.ndarray, keep: np.ndarray,
                 fresh: list[tuple[bytes, np.ndarray]], dim: int, generation: int) -> None:
        """Copy the live records to a new generation's data file, then point the index at it."""
        old_n = len(keys) - len(fresh)
        rows = np.flatnonzero(keep)
        rows = rows[np.argsort(keys[rows], kind="stable")]
        out_offsets = np.zeros(len(rows), dtype=_OFF_DTYPE)
        pos = 0
        path = self.data_path(generation)
        with path.open("wb") as fh:
            for j, r in enumerate(rows.tolist()):
                if r < old_n:
                    start = int(offsets[r])
                    blob = self._data[start:start + int(counts[r]) * dim].tobytes()
                else:
                    blob = np.ascontiguousarray(fresh[r - old_n][1], dtype=np.int8).tobytes()
                out_offsets[j] = pos
                fh.write(blob)
                pos += len(blob)
            fh.flush()
            os.fsync(fh.fileno())
        self._publish(keys[rows], out_offsets, counts[rows], dim, generation, pos)

    def _publish(self, keys: np.ndarray, offsets: np.ndarray, counts: np.ndarray, dim: int,
                 generation: int, covered: int) -> None:
        """Replace the index atomically and adopt it (also as this process's shared parse)."""
        order = np.argsort(keys, kind="stable")
        keys = np.ascontiguousarray(keys[order])
        offsets = np.ascontiguousarray(offsets[order], dtype=_OFF_DTYPE)
        counts = np.ascontiguousarray(counts[order], dtype=_CNT_DTYPE)
        ident = self.identity.encode()
        blob = b"".join([_HEAD.pack(MAGIC, len(ident), dim, generation, covered, len(keys)), ident,
                         keys.tobytes(), offsets.tobytes(), counts.tobytes()])
        atomic_write_bytes(self.path, blob)
        data = _map(self.data_path(generation), covered)
        index = _Index(dim, generation, covered, _readonly(keys), _readonly(offsets), _readonly(counts))
        if data is None:  # cannot happen while we hold the lock, short of outside interference
            self._use(None)
            return
        loaded = _Loaded(index, data)
        _SHARED.put((self.path, self.identity), signature(self.path.stat()), loaded)
        self._use(loaded)

    def _drop_other_generations(self) -> None:
        """Remove data files of other generations (after compaction, a restart, a crash)."""
        if not self.generation:
            return
        for gen in self._generations_on_disk():
            if gen != self.generation:
                try:
                    self.data_path(gen).unlink()
                except FileNotFoundError:
                    pass


def _check(items: list[tuple[bytes, np.ndarray]]) -> int:
    """The common dim of the new matrices; refuses wrong keys, dtypes and shapes."""
    dim = 0
    for k, m in items:
        if len(k) != KEY_DTYPE.itemsize:
            raise ValueError(f"token store keys are {KEY_DTYPE.itemsize}-byte digests, got {len(k)} bytes")
        if m.dtype != np.int8 or m.ndim != 2 or m.shape[1] <= 0:
            raise ValueError(f"token matrices are int8 (n_tokens, dim), got {m.dtype} {m.shape}")
        if dim and m.shape[1] != dim:
            raise ValueError(f"token matrices of one add share a dim: {dim} and {m.shape[1]}")
        dim = m.shape[1]
    return dim


def _live_mask(keys: np.ndarray, live: Iterable[bytes] | None) -> np.ndarray | None:
    """Which of ``keys`` are live (None when no live set was given)."""
    if live is None:
        return None
    live_keys = np.unique(as_keys(live if isinstance(live, np.ndarray) else [bytes(k) for k in live]))
    if not len(live_keys) or not len(keys):
        return np.zeros(len(keys), dtype=bool)
    pos = np.minimum(np.searchsorted(live_keys, keys), len(live_keys) - 1)
    return np.asarray(live_keys[pos] == keys)


def _should_compact(counts: np.ndarray, keep: np.ndarray, dim: int, total: int) -> bool:
    live_bytes = int(counts[keep].astype(np.int64).sum()) * dim
    n_live = int(keep.sum())
    return total > 2 * live_bytes or len(counts) > 2 * max(n_live, 1)
