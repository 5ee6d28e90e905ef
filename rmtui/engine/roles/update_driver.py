"""The Update batch driver: queued evidence → one supervised Update
(docs/architecture.md, "Evidence: from submit to receipt").

One pass (``run_once``): recover unfinished operations, pick a batch (a due retry first,
else a new one by the readiness rules of :mod:`rmtui.engine.evidence.batching`), claim its
evidence, run the ``update`` role in the supervisor's isolated worktree, and let the
supervisor admit and publish (one landed commit, the update record, evidence consumed).
A failure hands the evidence back to the queue (the supervisor's ``release_evidence``
effect) and schedules the same batch again with exponential backoff; after
``update.max_attempts`` failures the batch waits in ``needs_manual_recovery`` until
``update retry``. Evidence is never dropped: it is claimed, queued or consumed, always.
"""

from __future__ import annotations

import builtins
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rmtui.engine import progress, store
from rmtui.engine.errors import ConflictError, EngineError, OperationFailed, UnavailableError, UsageError
from rmtui.engine.evidence.queue import Evidence, EvidenceQueue
from rmtui.engine.locks import try_lock
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes.operations import Failure, Receipt

ROLE = "update"
KIND = "update"
EFFECTS = ("evidence_consumed",)
DRIVER_LOCK = "update-driver.lock"
DAEMON_LOCK = "daemon.lock"
BATCH_STATES = ("running", "waiting_retry", "needs_manual_recovery", "committed", "no_change", "superseded")


# -- what a pass answers (``to_json`` is the JSON the fronts print, in its key order) -----------

@dataclass(frozen=True)
class DriverIdle:
    """A pass that ran no batch: nothing was ready (``evidence`` counts; with the shared queue
    the live ``lease``, else how many ``held_batches`` wait), or ``message`` says why a retry
    found nothing to retry."""

    evidence: dict[str, int] | None = None
    held_batches: int = 0
    shared: bool = False
    lease: dict[str, Any] | None = None
    message: str | None = None
    #: the batches a shared-queue retry reset before this pass
    retried: list[str] | None = None

    state = "idle"
    exit_code = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": "idle"}
        if self.message is not None:
            out["message"] = self.message
        elif self.shared:
            out.update(evidence=self.evidence, lease=self.lease)
        else:
            out.update(evidence=self.evidence, held_batches=self.held_batches)
        if self.retried is not None:
            out["retried"] = self.retried
        return out


@dataclass(frozen=True)
class BatchLanded:
    """A batch the supervisor published: its receipt's phase (``committed`` or ``no_change``)
    is the pass's state."""

    batch_id: str
    attempts: int
    receipt: Receipt
    retried: list[str] | None = None

    exit_code = 0

    @property
    def state(self) -> str:
        return self.receipt.phase

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "batch_id": self.batch_id, "attempts": self.attempts,
                               "receipt": self.receipt.to_json()}
        if self.retried is not None:
            out["retried"] = self.retried
        return out


@dataclass(frozen=True)
class BatchFailed:
    """A batch whose Update failed: its evidence is back in the queue and the batch waits
    (``batch_state``) for its next attempt (``next_attempt_at``) or a manual retry. With the
    shared queue, ``recovery`` is the batch's recovery record upstream (None for a local batch)."""

    batch_id: str
    attempts: int
    batch_state: str
    failure: Failure
    next_attempt_at: float | None = None
    recovery: dict[str, Any] | None = None
    retried: list[str] | None = None

    state = "failed"

    @property
    def exit_code(self) -> int:
        return self.failure.exit_code

    def to_json(self) -> dict[str, Any]:
        f = self.failure
        out: dict[str, Any]
        if self.recovery is not None:
            out = {"state": "failed", "batch_id": self.batch_id, "error": f.error, "recovery": self.recovery,
                   "attempts": self.attempts, "exit_code": f.exit_code, "batch_state": self.batch_state}
        else:
            out = {"state": "failed", "batch_id": self.batch_id, "attempts": self.attempts,
                   "batch_state": self.batch_state, "next_attempt_at": self.next_attempt_at, "error": f.error,
                   "exit_code": f.exit_code, "operation_id": f.operation_id}
        if self.retried is not None:
            out["retried"] = self.retried
        return out


#: What one pass of the driver answers.
DriverPass = DriverIdle | BatchLanded | BatchFailed


@dataclass
class BatchRecord:
    batch_id: str
    uids: list[str]
    sessions: list[str]
    reason: str
    state: str
    attempts: int
    next_attempt_at: float | None
    operation_id: str | None
    last_error: str | None
    receipt: dict | None
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row) -> BatchRecord:
        d = {k: row[k] for k in row.keys()}  # noqa: SIM118 - a sqlite3.Row iterates its values
        d["uids"] = json.loads(d["uids"])
        d["sessions"] = json.loads(d["sessions"])
        d["receipt"] = json.loads(d["receipt"]) if d["receipt"] else None
        return cls(**d)

    def to_json(self) -> dict:
        return dict(self.__dict__)


class BatchStore(store.StoreHandle):
    """The driver's own table in the runtime database: one row per batch and its attempts."""

    def __init__(self, root: MemoryRoot) -> None:
        self.conn = store.connect(root.ensure_runtime())

    def get(self, batch_id: str) -> BatchRecord | None:
        row = self.conn.execute("SELECT * FROM update_batches WHERE batch_id=?", (batch_id,)).fetchone()
        return BatchRecord.from_row(row) if row else None

    def list(self, *states: str) -> list[BatchRecord]:
        sql = "SELECT * FROM update_batches"
        if states:
            sql += f" WHERE state IN ({','.join('?' * len(states))})"
        rows = self.conn.execute(sql + " ORDER BY created_at", states).fetchall()
        return [BatchRecord.from_row(r) for r in rows]

    # ``list`` here names the method above: annotate with the builtin explicitly
    def upsert(self, batch_id: str, uids: builtins.list[str], sessions: builtins.list[str],
               reason: str) -> BatchRecord:
        now = time.time()
        with store.transaction(self.conn) as c:
            c.execute("INSERT INTO update_batches(batch_id, uids, sessions, reason, state, attempts, created_at,"
                      " updated_at) VALUES (?,?,?,?, 'waiting_retry', 0, ?, ?) ON CONFLICT(batch_id) DO NOTHING",
                      (batch_id, json.dumps(uids), json.dumps(sessions), reason, now, now))
        return self.get(batch_id)  # type: ignore[return-value]

    def update(self, batch_id: str, **fields: Any) -> BatchRecord:
        if "receipt" in fields and fields["receipt"] is not None:
            fields["receipt"] = json.dumps(fields["receipt"])
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k}=?" for k in fields)
        with store.transaction(self.conn) as c:
            c.execute(f"UPDATE update_batches SET {cols} WHERE batch_id=?", (*fields.values(), batch_id))
        return self.get(batch_id)  # type: ignore[return-value]


def update_prompt(batch_id: str, evidence: list[Evidence], worktree: str, guidance: bool) -> str:
    """The user turn of an Update: the batch's evidence, and what to do with it."""
    parts = [
        f"Update batch {batch_id}: {len(evidence)} candidate(s) of evidence follow.",
        f"Your isolated worktree is {worktree}; every tool path is relative to it.",
        "Judge the candidates as evidence (keep, merge, skip or edit), edit memory files, validate_memory, then "
        "git_add and git_commit your change. Commit nothing if nothing should change. End with the report your "
        "instructions describe.",
    ]
    if guidance:
        parts.append("AGENT_GUIDANCE_INBOX.md holds agent guidance waiting for a person's review: leave it as it "
                     "is (it is not evidence for this batch).")
    for e in evidence:
        submitted = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.created_at))
        parts.append(f"<candidate uid=\"{e.uid}\" session=\"{e.session}\" submitted=\"{submitted}\">\n"
                     f"{e.text.rstrip()}\n</candidate>")
    return "\n\n".join(parts)


def _backoff(cfg, attempts: int) -> float:
    return float(cfg.get("update.retry_backoff_seconds")) * (2 ** max(0, attempts - 1))


class UpdateDriver:
    """Runs Update batches for one root. ``executor_factory`` exists for the daemon's reuse
    of configuration; by default the executor comes fresh from ``rightmemory.toml`` per batch."""

    def __init__(self, root: MemoryRoot, *, executor_factory: Callable[[Any], Any] | None = None,
                 coordinator: Any = None) -> None:
        self.root = root
        self.executor_factory = executor_factory
        #: the Git-backed queue (``rmtui.engine.sync.coordinator_for``) when sync is on: batches
        #: are then claimed with its lease and landed by its finalizer, so any machine may run one
        self.coordinator = coordinator

    # -- public --------------------------------------------------------------------------

    def run_once(self, *, force: bool = False, now: float | None = None) -> DriverPass:
        """One pass: idle (nothing ready), a batch landed, or a batch failed."""
        fd = try_lock(self.root.runtime / DRIVER_LOCK)
        if fd is None:
            raise ConflictError("another Update driver is running on this root")
        try:
            if self.coordinator is not None:
                return self._run_shared(self.coordinator, force=force, now=now)
            return self._run_once(force=force, now=now)
        finally:
            os.close(fd)

    def retry(self, batch_id: str | None = None) -> DriverPass:
        """Reset a batch held for manual recovery (or waiting) and run it now; with the
        shared queue, its recovery records are reset for every machine."""
        if self.coordinator is not None:
            retried = self.coordinator.retry(batch_id)
            if not retried:
                return DriverIdle(message="no batch in the shared queue waits for a retry")
            return replace(self.run_once(force=True), retried=retried)
        batches = BatchStore(self.root)
        try:
            held = batches.list("needs_manual_recovery", "waiting_retry")
            if batch_id:
                from rmtui.engine.evidence import refs

                batch_id = refs.pick(batch_id, "batch", [refs.Named(b.batch_id, tail=b.batch_id.rsplit("-", 1)[-1],
                                                                   label=f"{b.batch_id[:24]}… ({b.state})")
                                                        for b in batches.list()])
                held = [b for b in held if b.batch_id == batch_id]
                if not held:
                    known = batches.get(batch_id)
                    if known is None:
                        raise UsageError(f"unknown batch {batch_id!r}")
                    raise ConflictError(f"batch {batch_id} is {known.state}; only a held batch can be retried")
            if not held:
                return DriverIdle(message="no batch waits for a retry")
            for b in held:
                batches.update(b.batch_id, state="waiting_retry", attempts=0, next_attempt_at=0.0)
        finally:
            batches.close()
        return self.run_once()

    def status(self) -> dict:
        batches = BatchStore(self.root)
        q = EvidenceQueue(self.root)
        try:
            return {"evidence": q.counts(), "batches": [b.to_json() for b in batches.list()]}
        finally:
            batches.close()
            q.close()

    # -- one pass ------------------------------------------------------------------------

    def _run_once(self, *, force: bool, now: float | None) -> DriverPass:
        from rmtui.engine.evidence.batching import held_sessions, select_batch
        from rmtui.engine.evidence.original_pending import refuse_if_original_pending
        from rmtui.engine.writes.supervisor import Supervisor

        refuse_if_original_pending(self.root.path)  # never two tools on one piece of evidence
        cfg = self.root.config()  # reloaded for every batch
        executor = self._executor(cfg)
        now = time.time() if now is None else now
        with Supervisor(self.root) as sup:
            sup.recover()
            batches = BatchStore(self.root)
            q = EvidenceQueue(self.root)
            try:
                self._settle_interrupted(sup, batches, now)
                held = held_sessions(batches.list("waiting_retry", "needs_manual_recovery"))
                record = self._due_retry(batches, q, now)
                if record is None:
                    batch = select_batch(q.list(state="queued"), cfg, now=now, force=force, held_sessions=held)
                    if batch is None:
                        return DriverIdle(q.counts(),
                                          held_batches=len(batches.list("waiting_retry", "needs_manual_recovery")))
                    record = batches.upsert(batch.id, batch.uids, batch.sessions, batch.reason)
                q.claim(record.uids, record.batch_id)
                evidence = [q.get(u) for u in record.uids]
                attempts = record.attempts + 1
                op = sup.begin(KIND, ROLE, batch_id=record.batch_id, candidate_uids=record.uids, effects=EFFECTS)
                batches.update(record.batch_id, state="running", attempts=attempts, operation_id=op.id,
                               next_attempt_at=None)
                try:
                    progress.report(f"Update: the update role reads {len(evidence)} candidate(s) of batch "
                                    f"{record.batch_id[:12]} and edits memory")
                    summary = self._run_role(executor, cfg, op, evidence)
                    progress.report("Update: validating and publishing the change")
                    receipt = sup.finish(op, summary=summary)
                except EngineError as exc:
                    return self._failed(sup, batches, cfg, record.batch_id, op, attempts, exc)
                except Exception as exc:  # noqa: BLE001 - a defect must not strand the batch in 'running'
                    wrapped = OperationFailed(f"{type(exc).__name__}: {exc}")
                    return self._failed(sup, batches, cfg, record.batch_id, op, attempts, wrapped)
                batches.update(record.batch_id, state=receipt.phase, last_error=None, receipt=receipt.to_json())
                return BatchLanded(record.batch_id, attempts, receipt)
            finally:
                batches.close()
                q.close()

    def _run_shared(self, coord, *, force: bool, now: float | None) -> DriverPass:
        """One pass over the shared queue: claim a batch with the upstream lease (or resume
        ours), run the role at the adopted head, land through the queue's finalizer; a
        failure writes the batch's recovery record upstream and drops the lease."""
        from rmtui.engine.evidence.batching import pick_among
        from rmtui.engine.writes.supervisor import Supervisor

        cfg = self.root.config()
        executor = self._executor(cfg)
        now = time.time() if now is None else now
        with Supervisor(self.root) as sup:
            sup.recover()
            for stuck in [o for o in sup.store.list(kind=KIND) if not o.final]:
                sup.fail(stuck, "the shared queue's turn ended without landing; the batch is claimed afresh")
            coord.refresh()
            with EvidenceQueue(self.root) as q:
                queued = q.list(state="queued")
                lease = coord.claim(lambda eligible: pick_among(queued, eligible, cfg, now=now, force=force))
                if lease is None:
                    return DriverIdle(q.counts(), shared=True, lease=coord.describe_lease())
                coord.reconcile_local()
                uids = list(lease.candidate_uids)
                q.release(uids, None)  # a claim left by an earlier turn of this lease
                q.claim(uids, lease.batch_id)
                evidence = [q.get(u) for u in uids]
            op = sup.begin(KIND, ROLE, batch_id=lease.batch_id, candidate_uids=uids, effects=EFFECTS)
            op.external_finalizer = f"update-queue:{lease.token}"
            sup.store.save(op)
            try:
                summary = self._run_role(executor, cfg, op, evidence)
                receipt = sup.finish(op, summary=summary,
                                     finalizer=lambda o: coord.finalize(lease, o.base_commit, o.candidate_commit))
            except EngineError as exc:
                failed = sup.fail(sup.store.get(op.id), f"{exc.kind}: {exc.message}")
                recovery = coord.release(lease, "stale_base" if (exc.details or {}).get("stale") else "update_failed")
                recovery = recovery or {}
                return BatchFailed(lease.batch_id, recovery.get("attempts", 1),
                                   "needs_manual_recovery" if recovery.get("manual_recovery") else "waiting_retry",
                                   Failure(exc.to_json(), exc.message, exc.exit_code, op.id, failed),
                                   recovery=recovery)
            return BatchLanded(lease.batch_id, 1, receipt)

    def _executor(self, cfg):
        if self.executor_factory is not None:
            return self.executor_factory(cfg)
        from rmtui.engine.roles.executors import make_executor

        return make_executor(cfg, ROLE)

    def _settle_interrupted(self, sup, batches: BatchStore, now: float) -> None:
        """A batch left ``running`` by a dead driver is retried at once (its op was recovered)."""
        for b in batches.list("running"):
            op = sup.store.find(b.operation_id) if b.operation_id else None
            if op is not None and not op.final:
                continue  # a live driver elsewhere still owns it
            batches.update(b.batch_id, state="waiting_retry", next_attempt_at=now,
                           last_error=(op.error if op else None) or "the driver stopped during the batch")

    def _due_retry(self, batches: BatchStore, q: EvidenceQueue, now: float):
        """The oldest batch whose backoff has passed, if its evidence is still all queued."""
        for b in batches.list("waiting_retry"):
            if b.next_attempt_at is not None and b.next_attempt_at > now:
                continue
            states = {u: q.get(u).state for u in b.uids}
            if all(s == "queued" for s in states.values()):
                return b
            # part of it was taken elsewhere (e.g. by a native assistant task): what is
            # still queued is batched afresh by the readiness rules
            batches.update(b.batch_id, state="superseded", last_error="evidence moved on: " + json.dumps(states))
        return None

    def _run_role(self, executor, cfg, op, evidence: list[Evidence]) -> str:
        from rmtui.engine.roles.executors import DebugTrace
        from rmtui.engine.roles.prompts import role_instructions
        from rmtui.engine.roles.tools import RoleTools

        tools = RoleTools(op.worktree, ROLE)
        trace = DebugTrace.for_role(self.root.runtime, ROLE, enabled=bool(cfg.get("debug.trace")))
        trace.event("operation", operation=op.id, batch=op.batch_id, candidates=op.candidate_uids)
        guidance = os.path.exists(os.path.join(op.worktree, "AGENT_GUIDANCE_INBOX.md"))
        conv = executor.start(system=role_instructions(ROLE), tools=tools.specs(), cwd=op.worktree, trace=trace)
        try:
            result = conv.send(update_prompt(op.batch_id, evidence, op.worktree, guidance))
            dirty = tools.repo.git.status("--porcelain", "--untracked-files=all")
            if dirty.strip():
                # one bounded reminder: admission refuses uncommitted work
                result = conv.send("Your worktree has uncommitted changes:\n" + dirty +
                                   "\nCommit what should land (git_add, git_commit) and discard nothing silently; "
                                   "then give your final report.")
        finally:
            conv.close()
        return result.text.strip()

    def _failed(self, sup, batches: BatchStore, cfg, batch_id: str, op, attempts: int,
                exc: EngineError) -> BatchFailed:
        sup.fail(op, f"{exc.kind}: {exc.message}")  # releases the evidence back to the queue
        max_attempts = cfg.get("update.max_attempts")
        if attempts >= max_attempts:
            state, next_at = "needs_manual_recovery", None
        else:
            state, next_at = "waiting_retry", time.time() + _backoff(cfg, attempts)
        receipt = sup.store.receipt(op.id)
        batches.update(batch_id, state=state, next_attempt_at=next_at, last_error=f"{exc.kind}: {exc.message}",
                       receipt=receipt.to_json())
        failure = Failure(exc.to_json(), exc.message, exc.exit_code, op.id, receipt)
        return BatchFailed(batch_id, attempts, state, failure, next_attempt_at=next_at)


# -- the daemon ----------------------------------------------------------------------------

#: Further cycles the daemon runs after each driver pass (Pruner, Insight, sync register
#: here): ``fn(root) -> dict`` with at least ``"state"``; errors are logged, never fatal.
DAEMON_CYCLES: list[Callable[[MemoryRoot], dict]] = []

def run_daemon(root: MemoryRoot, *, poll_seconds: float = 5.0, max_passes: int | None = None,
               stop: threading.Event | None = None, log: Callable[[str], None] | None = None,
               coordinator_factory: Callable[[MemoryRoot], Any] | None = None) -> dict:
    """Run the driver (and, as they arrive, later cycles) until SIGTERM/SIGINT or ``stop``."""
    fd = try_lock(root.runtime / DAEMON_LOCK)
    if fd is None:
        raise ConflictError("a daemon is already running for this root")
    stop = stop or threading.Event()
    log = log or (lambda msg: None)
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    passes = 0
    outcomes: dict[str, int] = {}
    said: dict[str, str] = {}  # what each source last logged, without the pass number

    def tell(source: str, line: dict) -> None:
        """Log ``line`` unless ``source`` said just that last time: a daemon waiting on the
        same condition (no model, an offline upstream) says so once, and again when it changes."""
        key = json.dumps(line, sort_keys=True, default=str)
        if said.get(source) != key:
            said[source] = key
            log(json.dumps({"pass": passes, **line}, default=str))

    try:
        log(f"daemon started for {root.path}")
        while not stop.is_set():
            passes += 1
            try:
                coordinator = coordinator_factory(root) if coordinator_factory else None
                out = UpdateDriver(root, coordinator=coordinator).run_once().to_json()
            except UnavailableError as exc:
                out = {"state": "unavailable", "error": exc.message}
            except ConflictError as exc:
                out = {"state": "busy", "error": exc.message}
            except EngineError as exc:
                out = {"state": "error", "error": exc.message}
            state = out["state"]
            outcomes[state] = outcomes.get(state, 0) + 1
            if state != "idle":
                tell("update", {k: out[k] for k in ("state", "batch_id", "error") if k in out})
            else:
                said.pop("update", None)  # the condition passed: the next one is news
            for cycle in DAEMON_CYCLES:
                name = getattr(cycle, "__name__", "cycle")
                try:
                    extra = cycle(root)
                except EngineError as exc:
                    extra = {"state": "error", "error": exc.message}
                if extra.get("state") not in (None, "idle"):
                    tell(name, {"cycle": name, **extra})
                else:
                    said.pop(name, None)
            if max_passes is not None and passes >= max_passes:
                break
            if state in ("committed", "no_change"):
                continue  # more may be ready at once
            stop.wait(poll_seconds)
        log("daemon stopped")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(fd)
    return {"passes": passes, "outcomes": outcomes}
