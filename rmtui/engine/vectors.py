"""The vector cache: embeddings keyed by (model identity, SHA-256 of the embedded text).

One binary file per model identity under ``.runtime/cache/vectors/``: a small header, the
32-byte text digests, then the vectors as float16 rows (a 10,000-entry corpus of 384-dim
vectors is 7.7 MB and loads in milliseconds). Keys are content hashes, so a one-node edit
changes one key: one new embedding, nothing else recomputed. Writers hold a file lock and
replace the file atomically; readers never see a partial file. Rows no longer used are
dropped when they outnumber the live ones.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rmtui.engine.fsutil import atomic_write_bytes
from rmtui.engine.locks import file_lock

MAGIC = b"RMTVEC01"
_HEAD = struct.Struct("<8sII")


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


@dataclass
class VectorCache:
    """The cached vectors of one model identity."""

    path: Path
    identity: str
    dim: int = 0
    keys: list[bytes] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float16))
    row: dict[bytes, int] = field(default_factory=dict)

    @classmethod
    def open(cls, cache_dir: Path, identity: str) -> VectorCache:
        name = hashlib.sha256(identity.encode()).hexdigest()[:24]
        cache = cls(Path(cache_dir) / "vectors" / f"{name}.bin", identity)
        cache.reload()
        return cache

    def reload(self) -> None:
        try:
            raw = self.path.read_bytes()
        except OSError:
            return
        if len(raw) < _HEAD.size:
            return
        magic, n, dim = _HEAD.unpack_from(raw)
        ident_len = int.from_bytes(raw[_HEAD.size:_HEAD.size + 4], "little")
        off = _HEAD.size + 4
        ident = raw[off:off + ident_len].decode("utf-8", "replace")
        off += ident_len
        if magic != MAGIC or ident != self.identity or len(raw) != off + n * 32 + n * dim * 2:
            return  # another model's file or a damaged one: start afresh
        keys_blob = raw[off:off + n * 32]
        self.keys = [keys_blob[i * 32:(i + 1) * 32] for i in range(n)]
        self.matrix = np.frombuffer(raw, dtype=np.float16, count=n * dim, offset=off + n * 32).reshape(n, dim)
        self.dim = dim
        self.row = {k: i for i, k in enumerate(self.keys)}

    def lookup(self, keys: list[bytes]) -> tuple[np.ndarray, list[int]]:
        """Rows for ``keys`` (zeros where missing) and the positions that are missing."""
        missing = [i for i, k in enumerate(keys) if k not in self.row]
        if not self.dim:
            return np.zeros((len(keys), 0), dtype=np.float32), list(range(len(keys)))
        idx = np.fromiter((self.row.get(k, 0) for k in keys), dtype=np.int64, count=len(keys))
        out = self.matrix[idx].astype(np.float32) if len(keys) else np.zeros((0, self.dim), np.float32)
        if missing:
            out[missing] = 0.0
        return out, missing

    def add(self, new: dict[bytes, np.ndarray], live: set[bytes] | None = None) -> None:
        """Store new vectors (under the cache lock, merged with what others stored meanwhile)."""
        if not new:
            return
        lock = self.path.with_suffix(".lock")
        with file_lock(lock):
            self.reload()
            dim = len(next(iter(new.values())))
            if self.dim and dim != self.dim:
                self.keys, self.row, self.matrix, self.dim = [], {}, np.zeros((0, dim), np.float16), 0
            keys = list(self.keys)
            rows = [self.matrix] if len(keys) else []
            fresh = [(k, v) for k, v in new.items() if k not in self.row]
            keys.extend(k for k, _ in fresh)
            if fresh:
                rows.append(np.asarray([v for _, v in fresh], dtype=np.float16).reshape(len(fresh), dim))
            matrix = np.concatenate(rows) if rows else np.zeros((0, dim), np.float16)
            if live is not None and len(keys) > 2 * max(len(live), 1):
                keep = [i for i, k in enumerate(keys) if k in live]
                keys = [keys[i] for i in keep]
                matrix = matrix[keep]
            self._write(keys, matrix, dim)

    def _write(self, keys: list[bytes], matrix: np.ndarray, dim: int) -> None:
        ident = self.identity.encode()
        blob = b"".join([_HEAD.pack(MAGIC, len(keys), dim), len(ident).to_bytes(4, "little"), ident,
                         b"".join(keys), np.ascontiguousarray(matrix, dtype=np.float16).tobytes()])
        atomic_write_bytes(self.path, blob)
        self.keys, self.dim = keys, dim
        self.matrix = np.asarray(matrix, dtype=np.float16)
        self.row = {k: i for i, k in enumerate(keys)}
