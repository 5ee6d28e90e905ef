"""Durable file primitives: atomic write-then-rename with fsync, safe path checks."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rmtui.engine.errors import UsageError


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def current_umask() -> int:
    """This process's umask, read without changing it (``os.umask`` can only be read by setting
    it, which would leave another thread a moment with the wrong one)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def atomic_write_bytes(path: Path, data: bytes | list, *, mode: int | None = None, durable: bool = True) -> None:
    """Write ``data`` (bytes, or a list of buffers written one after the other) to ``path`` so
    readers see the old or the new file, never a part.

    ``durable=False`` skips the fsyncs, for a derived cache its reader checks (a crash may
    then leave the old file or a damaged one, which is rebuilt, never a wrong one read). It
    also removes the old file before the rename: ext4 starts writing back a file renamed
    over another (its replace-by-rename heuristic), about 15 ms for 16 MB on every index
    update, and a cache's reader takes a missing file as a miss, never as an error.

    ``mode`` None: what ``open`` would give a new file, 0666 less the umask (a temporary file
    is made 0600, so the mode is set after the write)."""
    path = Path(path)
    if mode is None:
        mode = 0o666 & ~current_umask()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for part in data if isinstance(data, list) else (data,):
                fh.write(part)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if not durable:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def resolve_inside(base: Path, relative: str) -> Path:
    """Resolve ``relative`` under ``base``; refuse absolute paths, ``..`` and symlinks out."""
    if not relative or relative.startswith(("/", "\\")) or os.path.isabs(relative):
        raise UsageError(f"path must be relative to the root: {relative!r}")
    parts = Path(relative).parts
    if any(p == ".." for p in parts):
        raise UsageError(f"path leaves the root: {relative!r}")
    base_resolved = base.resolve()
    target = (base_resolved / relative).resolve()
    if target != base_resolved and base_resolved not in target.parents:
        raise UsageError(f"path leaves the root through a link: {relative!r}")
    return base_resolved / relative


def nfc_collision(paths, *, casefold: bool = False) -> list[list[str]]:
    """Groups of distinct paths that name one file on a normalising file system.

    macOS (APFS, HFS+) treats the NFC and NFD spellings of a name (``é`` as one code point,
    or ``e`` plus a combining accent) as one file: two such entries in one tree collide
    there, one silently hiding the other. With ``casefold`` names that differ only in case
    count as colliding too (macOS volumes are case-insensitive by default). Each group lists
    its spellings sorted; no collision answers ``[]``.
    """
    import unicodedata

    groups: dict[str, set[str]] = {}
    for p in paths:
        text = os.fsdecode(p) if isinstance(p, bytes) else str(p)
        key = unicodedata.normalize("NFC", text)
        if casefold:
            key = unicodedata.normalize("NFC", key.casefold())
        groups.setdefault(key, set()).add(text)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


_STAMPS: dict[tuple[str, object], str] = {}


def source_stamp(module_file: str, version: object) -> str:
    """``version`` and a digest of a module's source, read once per process: a cache file
    written by other code of that module (an upgrade, an edit) is not reused."""
    key = (module_file, version)
    if key not in _STAMPS:
        import hashlib

        try:
            src = Path(module_file).read_bytes()
        except OSError:
            src = b""
        _STAMPS[key] = f"{version}:{hashlib.sha256(src).hexdigest()[:16]}"
    return _STAMPS[key]
