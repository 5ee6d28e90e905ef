"""Where the memory root is (docs/architecture.md, "The memory root"), with ``os.path``
only: the thin retrieve client resolves the root with these very rules without importing
TOML parsers, the configuration schema or even ``pathlib`` (which loads ``re``). Paths are
strings here; ``roots.resolve_root_path`` hands the full path a ``Path``.

Resolution, first match wins: ``--root``, ``--profile``, then upward from the working
directory the nearest folder that holds a ``.rightmemory-profile`` file or is a memory root's
work tree (in one folder the profile file wins), then ``RIGHTMEMORY_ROOT``, then
``~/.rightmemory``. Reading ``profiles.toml`` is the caller's (``profile_root``).
"""

from __future__ import annotations

import os

from rmtui.engine.errors import UsageError

TYPE_CHECKING = False  # (the typing module is one more import)
if TYPE_CHECKING:
    from collections.abc import Callable

PROFILE_FILE = ".rightmemory-profile"


def default_root() -> str:
    return os.path.join(os.path.expanduser("~"), ".rightmemory")


def is_work_tree(folder: str) -> bool:
    """Whether ``folder`` is a memory root's own work tree: a Git repository (``.git`` a folder,
    so the supervisor's linked worktrees under ``.runtime/worktrees/`` do not count and the
    search goes on up to the root that holds them) with a ``MEMORY.md`` and the root's
    allow-list ``.gitignore`` (``*``, then ``!MEMORY.md``), which both tools write: a code
    project that happens to keep a MEMORY.md is not a memory root."""
    ignore = os.path.join(folder, ".gitignore")
    if not (os.path.isdir(os.path.join(folder, ".git")) and os.path.isfile(os.path.join(folder, "MEMORY.md"))
            and os.path.isfile(ignore)):
        return False  # (a regular file: a FIFO there would block the read below)
    try:
        with open(ignore, encoding="utf-8", errors="replace") as f:
            lines = {line.strip() for line in f.read(65536).splitlines()}
    except OSError:
        return False
    return "*" in lines and "!MEMORY.md" in lines


def nearest(start: str) -> tuple[str, str] | None:
    """The nearest ``.rightmemory-profile`` file or root work tree upward from ``start``."""
    cur = os.path.realpath(start)
    while True:
        f = os.path.join(cur, PROFILE_FILE)
        if os.path.isfile(f):
            return "profile", f
        if is_work_tree(cur):
            return "work tree", cur
        parent = os.path.dirname(cur)
        if parent == cur:
            return None
        cur = parent


def find_root_path(root: str | None, profile: str | None, cwd: str | os.PathLike[str] | None,
                   profile_root: Callable[[str], str | os.PathLike[str]]) -> tuple[str, str]:
    """The root path and how it was found; ``profile_root`` maps a profile name to its root."""
    if root:
        return os.path.expanduser(root), "--root"
    if profile:
        return os.fspath(profile_root(profile)), f"--profile {profile}"
    try:
        found = nearest(os.fspath(cwd) if cwd is not None else os.getcwd())
    except FileNotFoundError:  # the working folder was removed (e.g. a landed worktree)
        fallback, how = _fallback()
        raise UsageError(f"the working folder no longer exists, so no root can be found from it; rmtui would "
                         f"use {fallback} ({how}): cd to an existing folder, or pass --root") from None
    except OSError:  # unreadable on the way up: nothing to find there
        found = None
    if found is not None and found[0] == "profile":
        pf = found[1]
        with open(pf, encoding="utf-8", errors="replace") as f:
            name = f.read().strip()
        try:
            return os.fspath(profile_root(name)), f"{pf} ({name})"
        except UsageError as exc:  # say where the name came from: the person did not type it
            raise UsageError(f"{exc.message}, named in {pf}: fix that file, or pass --root or --profile",
                             details=exc.details) from None
    if found is not None:
        return found[1], "work tree"
    return _fallback()


def _fallback() -> tuple[str, str]:
    """The root used when nothing was named and none was found upward."""
    env = os.environ.get("RIGHTMEMORY_ROOT")
    if env:
        return os.path.expanduser(env), "RIGHTMEMORY_ROOT"
    return default_root(), "default"
