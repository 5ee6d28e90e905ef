"""Why queued evidence is not moving, and what moves it (for the workbench and ``status``).

Queued evidence becomes memory only when something runs Update on it: the Update daemon
or ``update run`` with a configured model, or a host agent through the native assistant
protocol (``assistant update begin``). :func:`queue_waiting` reads the queue, the batches,
the live operations and the configuration, and says in one sentence what the evidence waits
for, with the command that moves it. ``move`` names that step for fronts that have a key
for it: ``run_now`` (``update run-now``), ``retry`` (``update retry``), ``configure`` (a
setting, no command), ``host`` (the host agent's step) or None (it is moving).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from rmtui.engine.errors import EngineError
from rmtui.engine.evidence.batching import held_sessions, plan_batch
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.roots import MemoryRoot

RUN_NOW = "rmtui --headless update run-now"
RETRY = "rmtui --headless update retry"
HOST_BEGIN = "rmtui --headless assistant update begin"
CONFIGURE = f"set [update.model] in rightmemory.toml, or have the host agent run `{HOST_BEGIN}`"


@dataclass
class QueueWaiting:
    state: str  # claimed | held | no_runner | host_task | no_driver | debounce | ready
    reason: str  # one sentence: why the queued evidence is where it is
    move: str | None  # run_now | retry | configure | host | None
    command: str | None  # the command (or setting) that moves it
    queued: int = 0
    claimed: int = 0
    until: float | None = None  # when it moves by itself (debounce, retry backoff), if known

    def to_json(self) -> dict:
        return asdict(self)


def clock_time(ts: float) -> str:
    """HH:MM local time (what a person compares with the clock on the wall)."""
    return time.strftime("%H:%M", time.localtime(ts))


def _daemon_running(root: MemoryRoot) -> bool:
    from rmtui.engine.locks import try_lock
    from rmtui.engine.roles.update_driver import DAEMON_LOCK

    path = root.runtime / DAEMON_LOCK
    if not path.exists():
        return False
    fd = try_lock(path)
    if fd is None:
        return True
    import os

    os.close(fd)
    return False


def _claimed_reason(root: MemoryRoot, claimed: list, ops: list, now: float) -> tuple[str, str | None, str | None]:
    holders = {o.batch_id: o for o in ops if o.batch_id}
    batch = claimed[0].batch_id
    op = holders.get(batch)
    n = len([e for e in claimed if e.batch_id == batch])
    what = f"{n} claimed by batch {(batch or '?')[:12]}"
    if op is None:
        return (f"{what}, which no live operation holds (recovery gives it back)", "run_now",
                "rmtui --headless update run")
    if op.kind == "assistant":
        until = (op.lease or {}).get("until")
        if until is not None and until < now:
            return (f"{what}: host task {op.id} let its lease expire at {clock_time(until)}", "host",
                    f"{HOST_BEGIN} --retry")
        expiry = f" (lease until {clock_time(until)})" if until is not None else ""
        return (f"{what}: host task {op.id} works on it{expiry}; it lands when the host completes it", None,
                f"rmtui --headless assistant update complete --task {op.id}")
    started = clock_time(op.created_at)
    return f"{what}: Update operation {op.id} runs since {started}", None, None


def queue_waiting(root: MemoryRoot, *, now: float | None = None) -> QueueWaiting | None:
    """What queued or claimed evidence waits for; None when nothing is queued or claimed."""
    from rmtui.engine.roles.executors.config import resolve_role_executor
    from rmtui.engine.roles.update_driver import BatchStore
    from rmtui.engine.writes.operations import OperationStore

    now = time.time() if now is None else now
    q = EvidenceQueue(root)
    try:
        queued = q.list(state="queued")
        claimed = q.list(state="claimed")
    finally:
        q.close()
    if not queued and not claimed:
        return None
    st = OperationStore(root)
    try:
        ops = [o for o in st.list(unfinished=True) if not o.final]
    finally:
        st.close()
    counts = {"queued": len(queued), "claimed": len(claimed)}
    claimed_text = None
    if claimed:
        text, move, command = _claimed_reason(root, claimed, ops, now)
        if not queued:
            return QueueWaiting("claimed", text, move, command, **counts)
        claimed_text = text

    def out(state: str, reason: str, move: str | None, command: str | None, until: float | None = None):
        if claimed_text:
            reason = f"{reason} ({claimed_text})"
        return QueueWaiting(state, reason, move, command, until=until, **counts)

    batches = BatchStore(root)
    try:
        held = batches.list("waiting_retry", "needs_manual_recovery")
    finally:
        batches.close()
    queued_uids = {e.uid for e in queued}
    for b in held:
        if not queued_uids & set(b.uids):
            continue
        error = f": {b.last_error}" if b.last_error else ""
        if b.state == "needs_manual_recovery":
            return out("held", f"an Update batch failed {b.attempts} times{error}; it waits for a retry",
                       "retry", RETRY)
        if b.next_attempt_at is not None and b.next_attempt_at > now:
            return out("held", f"an Update batch failed{error}; it is retried at {clock_time(b.next_attempt_at)}",
                       "run_now", RUN_NOW, until=b.next_attempt_at)

    cfg = root.config()
    try:
        runner = resolve_role_executor(cfg, "update")
    except EngineError as exc:
        return out("no_runner", f"the Update model setting is unusable: {exc.message}", "configure", CONFIGURE)
    host_tasks = [o for o in ops if o.kind == "assistant"]
    if runner is None:
        if host_tasks:
            task = host_tasks[-1]
            return out("host_task", f"host task {task.id} is open; queued evidence waits for the host's next "
                                    f"`{HOST_BEGIN}`", "host", HOST_BEGIN)
        return out("no_runner", "no Update model is configured and no host task is open", "configure", CONFIGURE)
    if not _daemon_running(root):
        return out("no_driver", "an Update model is configured but no Update daemon runs", "run_now", RUN_NOW)
    plan = plan_batch(queued, cfg, now=now, held_sessions=held_sessions(held))
    if plan.batch is not None:
        return out("ready", "a batch is ready: the Update daemon takes it on its next pass", None, None)
    target = cfg.get("update.async.target_batch_candidates")
    debounce = float(cfg.get("update.async.debounce_seconds"))
    reason = (f"waiting until {clock_time(plan.ready_at)}: a session is ready {debounce:.0f} s after its last "
              f"submit, and ready sessions go as a batch once they hold {target} candidates or the first "
              "has waited the max wait" if plan.ready_at is not None else "every queued session is held back")
    return out("debounce", reason, "run_now", RUN_NOW, until=plan.ready_at)
