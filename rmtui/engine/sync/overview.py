"""One read of a root's sync state for a front to show (the workbench's Sharing screen).

Nothing here touches the network or writes anything: it combines what ``sync status``
knows (the state file, ahead/behind against the last fetched upstream), the Git-backed
queue's lease as the upstream last showed it, and whether memory waits for a repair.
Which machine holds a batch comes from the same lease, so the evidence queue can say so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime

from rmtui.engine.errors import EngineError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.sync.queue_git import LeaseInfo, queue_lease, stored_device_id

#: statuses in which there is no upstream to talk to: the pull and push keys do not apply
INACTIVE = ("disabled", "unconfigured")


@dataclass
class RepairInfo:
    """Why memory waits for a repair: ``operation`` (a sync publication not finished),
    ``worktree`` (a repair's staging worktree left behind) or ``conflict`` (the last pull
    needed a repair that did not happen)."""

    kind: str
    detail: str
    files: list[str] = field(default_factory=list)


@dataclass
class SyncOverview:
    enabled: bool
    status: str  # the statuses of docs/formats.md, "Sync", "unknown" before the first sync, "error" when unreadable
    message: str
    upstream: str | None = None  # "origin/main"
    head: str | None = None
    upstream_commit: str | None = None
    ahead: int = 0
    behind: int = 0
    last_pull_at: str | None = None
    last_push_at: str | None = None
    last_failure_at: str | None = None
    last_failure_status: str | None = None
    last_failure_message: str | None = None
    files: list[str] = field(default_factory=list)
    device: str | None = None  # this machine's lease identity, once it has one
    lease: LeaseInfo | None = None
    repair: RepairInfo | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read (a malformed lease)

    @property
    def active(self) -> bool:
        """Sync is on and the branch has an upstream: pull and push apply."""
        return self.status not in INACTIVE

    def to_json(self) -> dict:
        return asdict(self)


def sync_overview(root: MemoryRoot, *, now: datetime | None = None) -> SyncOverview:
    """The sync state of ``root`` as of the last fetch (no network, no write)."""
    from rmtui.engine.sync.pull import status as sync_status

    enabled = bool(root.config().get("sync.enabled"))
    try:
        res = sync_status(root)
    except EngineError as exc:  # a detached HEAD: sync needs a branch
        return SyncOverview(enabled, "error", exc.message, device=stored_device_id(root))
    st = res.state or {}
    out = SyncOverview(enabled, res.status, res.message, res.upstream, res.head, res.upstream_commit, res.ahead,
                       res.behind, st.get("last_successful_pull_at"), st.get("last_successful_push_at"),
                       st.get("last_failure_at"), st.get("last_failure_status"), st.get("last_failure_message"),
                       list(res.files), stored_device_id(root))
    if not out.active:
        return out
    try:
        out.lease = queue_lease(root, now=now)
    except EngineError as exc:
        out.problems.append(f"update queue: {exc.message}")
    out.repair = pending_repair(root, out)
    return out


def batch_holders(root: MemoryRoot) -> dict[str, LeaseInfo]:
    """Candidate uid -> the lease that holds its batch (empty when sync is off or nothing is
    leased); never raises, it only labels queue rows."""
    try:
        lease = queue_lease(root)
    except EngineError:
        return {}
    return dict.fromkeys(lease.candidate_uids, lease) if lease is not None else {}


def pending_repair(root: MemoryRoot, overview: SyncOverview | None = None) -> RepairInfo | None:
    """A sync publication not finished, a repair worktree left behind, or the last pull's
    conflict, in that order (the first that applies)."""
    from rmtui.engine.writes.operations import OperationStore
    from rmtui.engine.writes.worktrees import worktrees_dir

    with OperationStore(root) as store:
        ops = [o for o in store.list(kind="sync") if not o.final]
    if ops:
        op = ops[-1]
        return RepairInfo("operation", f"{op.id} is {op.phase}: the next start or pull finishes it",
                          list(op.changed_paths))
    folder = worktrees_dir(root)
    left = sorted(p.name for p in folder.glob("sync-*") if p.is_dir()) if folder.is_dir() else []
    if left:
        return RepairInfo("worktree", f"repair worktree {left[0]} (a pull is repairing, or one was interrupted; "
                                      "the next pull replaces it)")
    if overview is not None and overview.status == "conflict":
        return RepairInfo("conflict", overview.message, list(overview.files))
    return None
