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


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` so readers see the old or the new file, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
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
