"""What a retrieval starts before it answers, off its answer path: the sync pull check and the
refresh of shared file views.

A retrieval answers from the root as it is now. Other machines' commits (every one checked
before it lands, which takes time in proportion to what they change) and a view provider's
new package arrive through one detached process per root (``python -m
rmtui.engine.host.retrieve_upkeep ROOT``), so neither a slow upstream, hundreds of incoming
commits nor a slow provider delays an answer, and the warm service's fast path serves roots
with sync on or views connected like any other. The next retrieval reads what it brought.

:func:`start` costs a file's ``stat`` when nothing is due, so the warm service calls it on
every retrieval it answers. What is due is still decided by each part's own rule
(``sync.maybe_pull``: every 5 minutes; ``views.refresh_before_retrieve``: each view every 5
minutes, within its budget); this module only keeps the process from starting more often
than once per :data:`EVERY` seconds and from running twice at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from rmtui.engine.errors import EngineError
from rmtui.engine.locks import try_lock
from rmtui.engine.memory.roots import MemoryRoot

#: At most one upkeep process start per root in this many seconds (the shortest due period).
EVERY = 60.0


def _stamp(root: MemoryRoot) -> Path:
    return root.runtime / "cache" / "retrieve-upkeep.stamp"


def _lock(root: MemoryRoot) -> Path:
    return root.runtime / "cache" / "retrieve-upkeep.lock"


def wanted(root: MemoryRoot) -> bool:
    """Sync is on, or file views are connected: something may arrive from elsewhere."""
    try:
        return bool(root.config().get("sync.enabled")) or (root.path / "shared_views.toml").is_file()
    except EngineError:
        return False


def start(root: MemoryRoot, *, every: float = EVERY) -> bool:
    """Start the upkeep process for ``root`` unless one started within ``every`` seconds or
    one runs; never waits for it and never fails (a retrieval answers from what is local).
    Answers whether a process was started."""
    stamp = _stamp(root)
    try:
        if time.time() - stamp.stat().st_mtime < every:
            return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    if not wanted(root):
        return False
    try:
        fd = try_lock(_lock(root))
        if fd is None:  # one runs now
            return False
        os.close(fd)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_bytes(b"")
        subprocess.Popen([sys.executable, "-m", "rmtui.engine.host.retrieve_upkeep", str(root.path)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        return False
    return True


def run(root: MemoryRoot) -> None:
    """The upkeep itself (in its own process): the pull check, then the views' refresh, each
    by its own due rule; one at a time per root."""
    fd = try_lock(_lock(root))
    if fd is None:
        return
    try:
        cfg = root.config()
        if cfg.get("sync.enabled"):
            from rmtui.engine.sync import maybe_pull

            maybe_pull(root)
        if (root.path / "shared_views.toml").is_file():
            from rmtui.engine.views import refresh_before_retrieve

            refresh_before_retrieve(root)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    from rmtui.engine.memory.roots import open_root

    try:
        run(open_root(argv[0]))
    except EngineError:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
