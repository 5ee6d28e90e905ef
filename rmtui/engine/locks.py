"""The one lock discipline: OS file locks under ``.runtime/`` (docs/architecture.md, "Lock discipline").

``memory.lock`` guards corpus snapshots and publication. Locks are ``flock`` based so a
killed holder releases them with its file descriptor; they are re-entrant within a thread
so nested engine calls do not deadlock.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rmtui.engine.errors import ConflictError, OperationFailed

_local = threading.local()


class LinkedLockFile(OperationFailed):
    """A lock file that is a symlink: whoever planted it would have this process create or
    lock the file it points to (a folder shared with another user's processes)."""


def _open_lock(path: Path) -> int:
    """The lock file's descriptor, opened (or created) in place and never through a symlink."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise LinkedLockFile(f"lock file {path} is a symlink: a lock file is opened only in place, "
                                 "never through a link") from exc
        raise


def _held() -> dict[str, int]:
    if not hasattr(_local, "held"):
        _local.held = {}
    return _local.held


@contextmanager
def file_lock(path: Path, *, timeout: float = 60.0, shared: bool = False) -> Iterator[None]:
    """Hold an exclusive (or shared) flock on ``path`` for the duration of the block."""
    key = str(Path(path).resolve())
    held = _held()
    if key in held:
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    fd = _open_lock(path)
    op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, op | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConflictError(f"timed out waiting for lock {path}") from None
                time.sleep(0.01)
        held[key] = 1
        try:
            yield
        finally:
            del held[key]
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def try_lock(path: Path) -> int | None:
    """Take an exclusive lock without waiting; return the fd to keep it, or None."""
    fd = _open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
