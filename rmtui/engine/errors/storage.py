"""A full or failing disk, named: which device, what is left, what to do.

Out of space (``ENOSPC``, a quota), no inodes left and I/O errors reach rmtui as an
``OSError``, as SQLite's ``database or disk is full`` / ``disk I/O error``, or as a Git
child's ``No space left on device``. Each is one :class:`StorageError` (exit 4, kind
``storage``) that names the filesystem (its mount point) and what it has free, instead of
an internal error (docs/architecture.md, "Errors and exit codes").
"""

from __future__ import annotations

import errno
import os

from rmtui.engine.errors import UnavailableError

#: errno values that mean "no room": out of space, over a quota.
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})
#: How SQLite and Git say it (lower case).
_FULL_TEXT = ("database or disk is full", "no space left on device", "disk quota exceeded")
_IO_TEXT = ("disk i/o error", "input/output error")
#: Any of them, in a line of a child's output: the disk is the cause (``sync.remote.cause``).
DISK_TEXT = _FULL_TEXT + _IO_TEXT
#: Below this much free space an I/O error is taken for a full disk (SQLite says "disk I/O
#: error" when it cannot grow its shared-memory file on a full filesystem).
_NEARLY_FULL = 1 << 20


class StorageError(UnavailableError):
    """The disk under the root cannot take the write: full, no inodes, or failing."""

    kind = "storage"


def _existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def mount_point(path: str | os.PathLike[str]) -> str:
    """The mount point of the filesystem that holds ``path`` (or its nearest existing parent)."""
    cur = _existing(os.fspath(path))
    while not os.path.ismount(cur):
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    return cur


def _size(n: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.0f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"  # pragma: no cover


def describe(path: str | os.PathLike[str], *, io: bool = False) -> str:
    """The cause in a few words (no space, no inodes, an I/O error): the filesystem's mount
    point, the path written and what the filesystem has free."""
    where = os.fspath(path)
    mount = mount_point(where)
    try:
        st = os.statvfs(_existing(where))
        free, inodes = st.f_bavail * st.f_frsize, st.f_favail
        no_inodes = st.f_files > 0 and inodes == 0
    except OSError:
        free, no_inodes = None, False
    if no_inodes:
        cause = f"no free inodes left on {mount}"
    elif io and (free is None or free >= _NEARLY_FULL):
        cause = f"an I/O error on {mount}"
    else:
        cause = f"no space left on device {mount}"
    left = f"; {_size(free)} free" if free is not None else ""
    return f"{cause} (writing {where}{left})"


def _error(path: str | os.PathLike[str], *, io: bool = False) -> StorageError:
    cause = describe(path, io=io)
    advice = "check the device" if cause.startswith("an I/O") else "free some space there"
    return StorageError(f"{cause}: {advice} and run the command again",
                        details={"cause": cause, "mount": mount_point(path)})


def storage_error(exc: BaseException, path: str | os.PathLike[str] | None) -> StorageError | None:
    """The :class:`StorageError` behind ``exc`` (or its causes), written at ``path`` (the
    error's own file name wins); None when the failure is not the disk's."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, StorageError):
            return cur
        where = getattr(cur, "filename", None) or path
        if isinstance(cur, OSError) and cur.errno in NO_ROOM | {errno.EIO}:
            return _error(where or ".", io=cur.errno == errno.EIO)
        text = " ".join(str(x) for x in (cur, getattr(cur, "stderr", None) or "")).lower()
        if type(cur).__name__ in ("OperationalError", "GitCommandError", "CalledProcessError"):
            if any(sign in text for sign in _FULL_TEXT):
                return _error(where or ".")
            if any(sign in text for sign in _IO_TEXT):
                return _error(where or ".", io=True)
        cur = cur.__cause__ or cur.__context__
    return None
