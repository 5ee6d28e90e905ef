"""Post-commit effects (docs/architecture.md, "Operations and receipts"): what happens after an
operation reaches a final phase — cleanup of its worktree, evidence released or consumed,
Insight's points, a push to the upstream. Each is recorded on the operation and retried
until done (also by ``recover``); an effect failing never undoes a publication.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Protocol

import git

from rmtui.engine.errors import EngineError
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.role_table import MEMORY_GRAPH, matches
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes import worktrees
from rmtui.engine.writes.operations import Operation
from rmtui.engine.writes.publication import Publisher, pin_ref
from rmtui.engine.writes.recovery import clear_locks, op_lock_files


class Supervisor(Protocol):
    """What an effect gets of the supervisor that runs it (``writes/supervisor.py``)."""

    root: MemoryRoot
    repo: git.Repo
    publisher: Publisher


EffectFn = Callable[[Supervisor, Operation], None]
#: Post-commit effects by name; each is retried until done (also by ``recover``).
EFFECTS: dict[str, EffectFn] = {}
#: Effects every operation gets after it reaches a final phase, by phase.
DEFAULT_EFFECTS = {"committed": ("cleanup", "sync_push", "insight_points"), "no_change": ("cleanup", "sync_push"),
                   "failed": ("release_evidence", "cleanup"), "abandoned": ("release_evidence", "cleanup")}


def effect(name: str) -> Callable[[EffectFn], EffectFn]:
    def deco(fn: EffectFn) -> EffectFn:
        EFFECTS[name] = fn
        return fn
    return deco


@effect("cleanup")
def _cleanup(sup: Supervisor, op: Operation) -> None:
    # the operation is final: a Git lock on its refs or worktree is a dead (or fenced) writer's
    clear_locks(op_lock_files(sup.publisher.git_dir, op.id, op.worktree or None))
    # what its writer left outside the memory files is moved to .runtime/kept/, and the receipt says so
    kept = worktrees.remove(sup.root, op.worktree, op.branch)
    if kept is not None:
        op.warnings.append(kept.message(f"the worktree of {op.id}"))
    try:
        sup.repo.git.update_ref("-d", pin_ref(op.id))
    except git.GitCommandError:
        pass
    (sup.root.runtime / "oplocks" / f"{op.id}.lock").unlink(missing_ok=True)


def _settle_evidence(sup: Supervisor, op: Operation,
                     settle: Callable[[EvidenceQueue, list[str], str | None], None]) -> None:
    """Settle the operation's batch of evidence in the local queue (nothing when it took none)."""
    if not op.candidate_uids:
        return
    with EvidenceQueue(sup.root) as q:
        settle(q, op.candidate_uids, op.batch_id)


@effect("release_evidence")
def _release_evidence(sup: Supervisor, op: Operation) -> None:
    """A failed or abandoned batch loses nothing: its evidence goes back to the queue."""
    _settle_evidence(sup, op, EvidenceQueue.release)


@effect("evidence_consumed")
def _evidence_consumed(sup: Supervisor, op: Operation) -> None:
    """A landed batch's evidence is consumed: kept, and never handed out again."""
    _settle_evidence(sup, op, EvidenceQueue.consume)


@effect("update_record")
def _update_record(sup: Supervisor, op: Operation) -> None:
    """Nothing to do: the record lands in the operation's own commit. Kept so operations
    recorded by an older rmtui, which listed this effect, still finish."""


@effect("insight_points")
def _insight_points(sup: Supervisor, op: Operation) -> None:
    """A landed Memory-changing update transaction adds Insight's points once (docs/formats.md,
    "Maintenance cycles")."""
    from rmtui.engine.writes import triggers

    if op.role not in triggers.POINT_ROLES or not op.landed_commit:
        return
    if not any(matches(p, MEMORY_GRAPH) for p in op.changed_paths):
        return
    try:
        points = float(sup.root.config().get("insight.watch.update_candidate_points"))
    except EngineError:
        points = 1.0
    triggers.add_points(sup.root, "insight", op.trailer_id, points)


@effect("sync_push")
def _sync_push(sup: Supervisor, op: Operation) -> None:
    """After a landing, push to the upstream when sync is on: a detached ``sync push`` (its own
    lock; an unreachable upstream is ``offline`` and retried by the next push or pull)."""
    if not op.landed_commit:
        return
    try:
        cfg = sup.root.config()
        if not cfg.get("sync.enabled") or not cfg.get("sync.push_after_landing"):
            return
    except EngineError:
        return
    argv = [sys.executable, "-m", "rmtui", "--headless", "sync", "push", "--quiet", "--root", str(sup.root.path)]
    subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)
