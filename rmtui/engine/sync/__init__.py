"""Memory across machines: sync with the branch's Git upstream and the Git-backed evidence
queue (docs/formats.md, "Evidence queue"; docs/formats.md, "Sync").

Public face: :func:`pull`, :func:`push`, :func:`status`, :func:`maybe_pull` (the bounded
check made for reading agents, in the background), :class:`SyncResult`, and :func:`coordinator_for` (the shared
queue a driver or host claims batches through when sync is on).
"""

from __future__ import annotations

from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.sync import queue_git
from rmtui.engine.sync.pull import SyncResult, maybe_pull, pull, status
from rmtui.engine.sync.pull import push_root as push
from rmtui.engine.sync.queue_git import GitQueue

queue_git.PULL = pull  # the queue adopts the upstream through the validated pull (see queue_git.PULL)


def coordinator_for(root: MemoryRoot) -> GitQueue | None:
    """The Git-backed queue when sync is on and the branch has an upstream, else None (local)."""
    from rmtui.engine.sync.remote import upstream_of

    if not root.config().get("sync.enabled") or upstream_of(root.path) is None:
        return None
    return GitQueue(root)


__all__ = ["GitQueue", "SyncResult", "coordinator_for", "maybe_pull", "pull", "push", "status"]
