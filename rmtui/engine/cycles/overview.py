"""The cycles at a glance (``status``): for each of update, prune, insight, and sync when it is
on, its state, what makes it due next, and its last outcome.

Everything is read from what the cycles already record (the update batches and receipts,
``.runtime/cycles/<name>.json``, the Insight trigger state, the sync state file) and from
the due rules themselves (:func:`.pruner.prune_status`, :func:`.insight.insight_status`,
the queue's batching); nothing is written, nothing touches the network. A cycle that cannot
be read is reported with its error instead of failing the whole status.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from rmtui.engine.cycles import common
from rmtui.engine.errors import EngineError
from rmtui.engine.memory.roots import MemoryRoot

#: The operation kinds of each cycle (an Update runs as ``update``, or ``assistant`` on a host).
KINDS = {"update": ("update", "assistant"), "prune": ("prune",), "insight": ("insight",), "sync": ("sync",)}
STATES = ("idle", "running", "backing-off", "stopped")


@dataclass
class CycleInfo:
    """One cycle: ``state`` (one of :data:`STATES`), whether it is ``due``, the numbers it is
    due by (``next_due``), a line for people, and the last outcome as the cycle recorded it."""

    name: str
    state: str
    due: bool
    next_due: dict[str, Any]
    detail: str
    last_outcome: dict[str, Any] | None = None
    failures: int = 0
    backoff: str | None = None
    host_task: str | None = None  # a host's task holds the cycle (``assistant begin --role``)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Live:
    """Unfinished operations by kind, read once."""

    ops: dict[str, list[Any]] = field(default_factory=dict)

    def of(self, name: str) -> list[Any]:
        return [o for k in KINDS[name] for o in self.ops.get(k, [])]

    def host_task(self, name: str) -> str | None:
        held = [o.id for o in self.of(name) if common.is_host_task(o)]
        return held[-1] if held else None


def cycles_overview(root: MemoryRoot, now: float | None = None) -> list[CycleInfo]:
    from rmtui.engine.writes.operations import OperationStore

    now = time.time() if now is None else now
    live = _Live()
    with OperationStore(root) as store:
        for op in store.list():
            if not op.final:
                live.ops.setdefault(op.kind, []).append(op)
        receipts = store.receipts(limit=200)
    readers = [("update", lambda: _update(root, live, receipts, now)), ("prune", lambda: _prune(root, live, now)),
               ("insight", lambda: _insight(root, live, now))]
    if root.config().get("sync.enabled"):
        readers.append(("sync", lambda: _sync(root, live)))
    out = []
    for name, read in readers:
        try:
            out.append(read())
        except EngineError as exc:
            out.append(CycleInfo(name, "idle", False, {}, f"unreadable: {exc.message}", error=exc.message))
    return out


def _update(root: MemoryRoot, live: _Live, receipts: list[Any], now: float) -> CycleInfo:
    from rmtui.engine.evidence.batching import held_sessions, select_batch
    from rmtui.engine.evidence.queue import EvidenceQueue
    from rmtui.engine.roles.update_driver import BatchStore

    cfg = root.config()
    with BatchStore(root) as batches:
        held = batches.list("waiting_retry", "needs_manual_recovery")
    with EvidenceQueue(root) as q:
        queued = q.list(state="queued")
        inbox = q.counts().get("inbox", 0)
    ready = select_batch(queued, cfg, now=now, held_sessions=held_sessions(held)) is not None
    stopped = [b for b in held if b.state == "needs_manual_recovery"]
    waiting = [b for b in held if b.state == "waiting_retry"]
    retry_due = any((b.next_attempt_at or 0) <= now for b in waiting)
    if live.of("update"):
        state = "running"
    elif stopped:
        state = "stopped"
    elif waiting and not retry_due:
        state = "backing-off"
    else:
        state = "idle"
    next_due = {"queued": len(queued), "inbox": inbox, "batch_ready": ready, "held_batches": len(held),
                "pending_batches": len(held) + (1 if ready else 0),
                "target_batch_candidates": cfg.get("update.async.target_batch_candidates")}
    detail = f"{len(queued)} queued, " + ("a batch is ready" if ready else "no batch ready")
    if inbox:
        detail += f", {inbox} awaiting approval"
    if held:
        detail += f"; {len(held)} batch(es) held for retry" + (" (`update retry`)" if stopped else "")
    last = next((r for r in receipts if r.kind in KINDS["update"]), None)
    outcome = None
    if last is not None:
        outcome = {"state": last.phase, "operation_id": last.operation_id, "batch_id": last.batch_id,
                   "landed_commit": last.landed_commit, "error": last.error, "at": last.created_at}
    backoff = None
    if state == "stopped":
        backoff = f"{len(stopped)} batch(es) need `update retry` after repeated failures"
    elif state == "backing-off":
        backoff = f"{len(waiting)} batch(es) wait for their retry"
    return CycleInfo("update", state, ready or retry_due, next_due, detail, outcome,
                     max((b.attempts for b in held), default=0), backoff, live.host_task("update"))


def _prune(root: MemoryRoot, live: _Live, now: float) -> CycleInfo:
    from rmtui.engine.cycles.pruner import NAME, prune_status

    st = prune_status(root)
    n, gen = st.memory_commits_since_prune, st.generation_commits
    next_due = {"memory_commits_since_prune": n, "generation_commits": gen, "remaining": max(0, gen - n),
                "last_prune_commit": st.last_prune_commit}
    detail = f"{n} of {gen} Memory commits since the last prune" + (" (due)" if st.due else "")
    return CycleInfo("prune", common.cycle_state(root, NAME, running=bool(live.of("prune")), now=now), st.due,
                     next_due, detail, st.last_outcome, int(st.failures or 0), st.backoff, live.host_task("prune"))


def _insight(root: MemoryRoot, live: _Live, now: float) -> CycleInfo:
    from rmtui.engine.cycles.insight import NAME, insight_status

    st = insight_status(root)
    next_due = {"points": st.points, "threshold": st.threshold, "remaining": max(0.0, st.threshold - st.points),
                "claimed": st.active_operation_id}
    detail = f"{st.points:g} of {st.threshold:g} points" + (" (due)" if st.due else "")
    return CycleInfo("insight", common.cycle_state(root, NAME, running=bool(live.of("insight")), now=now),
                     st.due, next_due, detail, st.last_run, int(st.failures or 0), st.backoff,
                     live.host_task("insight"))


def _epoch(stamp: object) -> float | None:
    """An ISO time of the sync state file as seconds; None if absent or unreadable (both
    tools write the file)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else None
    except ValueError:
        return None


def _sync(root: MemoryRoot, live: _Live) -> CycleInfo:
    from rmtui.engine.sync import status

    res = status(root)
    st = res.state or {}
    repair = res.status == "conflict"
    next_due = {"status": res.status, "upstream": res.upstream, "ahead": res.ahead, "behind": res.behind,
                "pending_repair": repair}
    detail = f"{res.status}: {res.message}"
    if res.upstream:
        detail += f" ({res.ahead} ahead, {res.behind} behind {res.upstream})"
    stamps = [st.get(k) for k in ("last_successful_pull_at", "last_successful_push_at", "last_failure_at")]
    at = max((t for t in map(_epoch, stamps) if t is not None), default=None)
    # the last run as sync status reads it now (a run that found no upstream is not the last
    # word once the branch has one), and when it happened
    outcome = {"state": st.get("last_status"), "message": st.get("last_message"), "at": at,
               "last_pull_at": st.get("last_successful_pull_at"), "last_push_at": st.get("last_successful_push_at"),
               "last_failure_at": st.get("last_failure_at")} \
        if st.get("last_status") and st.get("last_status") == res.status and at is not None else None
    return CycleInfo("sync", "running" if live.of("sync") else "idle", bool(res.behind) or repair, next_due, detail,
                     outcome)
