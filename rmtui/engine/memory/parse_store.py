"""The graph's file parses kept for the next reading, in this process and on disk.

Scanning the Markdown is most of a graph read (about 0.3 s of 0.4 s on a 10,000-node root);
what one file's scan gives depends only on its name, domain and content digest
(:class:`~rmtui.engine.memory.graph.ParseCache`), so a reading after the first, in this
process or the next one, scans only files whose bytes changed. Every file is still read and
hashed on every reading (a few milliseconds for 500 files): a cached parse is found by the
digest of the bytes read now, never by a file's size or time, so an edit that keeps both is
scanned again like any other. Linking the files, every cross-file rule, and the hashes over
backing files are computed again each time, so the graph is the one a cold parse gives.

The file (``.runtime/cache/graph-parse.bin``) is a derived cache: a magic line, a CRC-32 of
its payload, then the marshalled parses, tagged with the parser that made them. A missing,
torn, damaged or foreign file is a miss (everything is scanned again and the file is
rewritten); so is one whose parses turn out not to fit when they are linked.
"""

from __future__ import annotations

import marshal
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from rmtui.engine.fsutil import atomic_write_bytes
from rmtui.engine.memory.graph import ParseCache
from rmtui.engine.memory.roots import RUNTIME_DIR, MemoryRoot

PARSE_FILE = "graph-parse.bin"
_MAGIC = b"RMTPARSE1\n"
_SUM = 4
#: roots whose parses this process keeps (a workbench shows one; tests open many)
KEPT_ROOTS = 4

T = TypeVar("T")


def parse_file_path(root: Path) -> Path:
    """Where the parses of ``root`` are kept between processes."""
    return Path(root) / RUNTIME_DIR / "cache" / PARSE_FILE


@dataclass
class _Stored:
    """One root's parses in this process; ``lock`` makes its readings take turns (a second
    reading then reuses the first's scans instead of repeating them beside it)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    cache: ParseCache | None = None  # None until read from disk
    from_disk: bool = False  # the cache holds parses read from the file (they may not fit)
    on_disk: frozenset[str] = frozenset()  # the keys the file holds, as far as this process knows


_stores: OrderedDict[str, _Stored] = OrderedDict()
_stores_lock = threading.Lock()


def _store(root: Path) -> _Stored:
    key = str(Path(root).resolve())
    with _stores_lock:
        got = _stores.get(key)
        if got is None:
            got = _stores[key] = _Stored()
            while len(_stores) > KEPT_ROOTS:
                _stores.popitem(last=False)
        else:
            _stores.move_to_end(key)
        return got


def forget(root: Path | None = None) -> None:
    """Drop what this process keeps (of ``root``, or of every root): the next reading starts
    from the file on disk, as a new process does."""
    with _stores_lock:
        if root is None:
            _stores.clear()
        else:
            _stores.pop(str(Path(root).resolve()), None)


def read_parses(path: Path) -> ParseCache:
    """The parses in the file at ``path``; an empty cache when it is missing, damaged or another parser's."""
    try:
        raw = path.read_bytes()
    except OSError:
        return ParseCache()
    head = len(_MAGIC) + _SUM
    if not raw.startswith(_MAGIC) or zlib.crc32(raw[head:]).to_bytes(_SUM, "little") != raw[len(_MAGIC):head]:
        return ParseCache()
    try:
        return ParseCache.from_data(marshal.loads(raw[head:]))
    except (EOFError, ValueError, TypeError):
        return ParseCache()


def write_parses(root: Path, cache: ParseCache) -> None:
    """Keep ``cache`` in the root's runtime folder; a failure only costs the next start its time."""
    try:
        payload = marshal.dumps(cache.to_data())
        MemoryRoot(Path(root)).ensure_runtime()  # the runtime folder ignores itself in Git
        path = parse_file_path(root)
        path.parent.mkdir(exist_ok=True)
        atomic_write_bytes(path, [_MAGIC, zlib.crc32(payload).to_bytes(_SUM, "little"), payload], durable=False)
    except (OSError, ValueError):
        pass


#: what linking a parse that does not fit raises (only a damaged file that passed its checksum)
_MISFIT = (IndexError, KeyError, TypeError, ValueError, AttributeError, EOFError)


def with_parses(root: Path, read: Callable[[ParseCache], T]) -> T:
    """``read(cache)`` with the parses kept for ``root`` (``read`` hands the cache to
    :func:`~rmtui.engine.memory.graph.load_graph`, which leaves in it what it used); the
    file is written again when that set of parses changed."""
    root = Path(root)
    stored = _store(root)
    with stored.lock:
        if stored.cache is None:
            stored.cache = read_parses(parse_file_path(root))
            stored.from_disk = bool(stored.cache.parses)
            stored.on_disk = frozenset(stored.cache.parses)
        try:
            result = read(stored.cache)
        except _MISFIT:
            if not stored.from_disk:
                raise
            stored.cache = ParseCache()  # read again from nothing, as a cold start is
            stored.on_disk = frozenset()  # and the file written again, whatever keys it held
            result = read(stored.cache)
        stored.from_disk = False  # every parse kept now was used by a reading that worked
        keys = frozenset(stored.cache.parses)
        if keys != stored.on_disk:
            write_parses(root, stored.cache)
            stored.on_disk = keys
        return result
