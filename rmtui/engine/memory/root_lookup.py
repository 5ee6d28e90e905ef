"""Where the memory root is (docs/architecture.md, "The memory root"), with the standard
library only: the thin retrieve client resolves the root with these very rules without
importing TOML parsers or the configuration schema.

Resolution, first match wins: ``--root``, ``--profile``, then upward from the working
directory the nearest folder that holds a ``.rightmemory-profile`` file or is a memory root's
work tree (in one folder the profile file wins), then ``RIGHTMEMORY_ROOT``, then
``~/.rightmemory``. Reading ``profiles.toml`` is the caller's (``profile_root``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

PROFILE_FILE = ".rightmemory-profile"


def default_root() -> Path:
    return Path(os.path.expanduser("~")) / ".rightmemory"


def is_work_tree(folder: Path) -> bool:
    """Whether ``folder`` is a memory root's own work tree: a Git repository (``.git`` a folder,
    so the supervisor's linked worktrees under ``.runtime/worktrees/`` do not count and the
    search goes on up to the root that holds them) with a ``MEMORY.md`` and the root's
    allow-list ``.gitignore`` (``*``, then ``!MEMORY.md``), which both tools write: a code
    project that happens to keep a MEMORY.md is not a memory root."""
    if not ((folder / ".git").is_dir() and (folder / "MEMORY.md").is_file() and (folder / ".gitignore").is_file()):
        return False  # (a regular file: a FIFO there would block the read below)
    try:
        with open(folder / ".gitignore", encoding="utf-8", errors="replace") as f:
            lines = {line.strip() for line in f.read(65536).splitlines()}
    except OSError:
        return False
    return "*" in lines and "!MEMORY.md" in lines


def nearest(start: Path) -> tuple[str, Path] | None:
    """The nearest ``.rightmemory-profile`` file or root work tree upward from ``start``."""
    cur = start.resolve()
    for candidate in (cur, *cur.parents):
        f = candidate / PROFILE_FILE
        if f.is_file():
            return "profile", f
        if is_work_tree(candidate):
            return "work tree", candidate
    return None


def find_root_path(root: str | None, profile: str | None, cwd: Path | None,
                   profile_root: Callable[[str], Path]) -> tuple[Path, str]:
    """The root path and how it was found; ``profile_root`` maps a profile name to its root."""
    if root:
        return Path(root).expanduser(), "--root"
    if profile:
        return profile_root(profile), f"--profile {profile}"
    try:
        found = nearest(cwd or Path.cwd())
    except OSError:  # the working directory was removed: nothing to find upward
        found = None
    if found is not None and found[0] == "profile":
        pf = found[1]
        name = pf.read_text(encoding="utf-8", errors="replace").strip()
        return profile_root(name), f"{pf} ({name})"
    if found is not None:
        return found[1], "work tree"
    env = os.environ.get("RIGHTMEMORY_ROOT")
    if env:
        return Path(env).expanduser(), "RIGHTMEMORY_ROOT"
    return default_root(), "default"
