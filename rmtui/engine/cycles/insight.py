"""The Insight cycle: reflection once enough evidence has landed (docs/formats.md,
"Maintenance cycles"; docs/architecture.md, "Sync, shared views, cycles").

Points come from the supervisor's ``insight_points`` effect (one per landed Memory-changing
update transaction, :mod:`rmtui.engine.writes.triggers`). At ``insight.watch.trigger_points``
the watcher claims one run (``active_operation_id = insight-watch-<hex>``, with the points it
claims), runs the ``insight`` role in a supervisor worktree, and lets the supervisor admit
what it committed: exactly one new ``insight_logs/YYYY-MM-DD-HHMMSS.md`` (subject
``insight: …``) or nothing at all (a no-op). The claimed points are deducted only when the run
succeeds (result ``artifact`` or ``noop``); a failed run leaves them for the next claim.
Anything but ``insight_logs/*.md`` is refused by admission (the role table); more than one new
log, or a change to an existing one, is refused here before publication.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmtui.engine.cycles import common
from rmtui.engine.errors import ConflictError, EngineError, OperationFailed
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes import triggers

if TYPE_CHECKING:
    from rmtui.engine.writes.operations import Receipt

ROLE = "insight"
KIND = "insight"
NAME = "insight"
LOG_DIR = "insight_logs"
LOG_RE = re.compile(r"^insight_logs/(\d{4}-\d{2}-\d{2}-\d{6})\.md$")
SUBJECT_PREFIX = "insight:"


@dataclass(frozen=True)
class InsightStatus:
    """Insight's points against the threshold, the claim in progress (its id and points), the
    last success, and the cycle's last recorded run, failures and backoff."""

    points: float
    threshold: float
    due: bool
    active_operation_id: str | None
    active_operation_points: float | None
    last_success_at: str | None
    last_success_result: str | None
    last_success_operation_id: str | None
    last_run: dict[str, Any] | None
    failures: int
    backoff: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InsightRun:
    """One Insight run: ``idle`` (below the threshold), ``artifact`` (one new log landed),
    ``noop`` (nothing to say), or ``failed`` (``failure``; the claimed points stay). ``points``
    are those left after it, ``claim`` the claim it ran under (None while not yet settled)."""

    state: str
    points: float = 0.0
    threshold: float = 0.0
    claim: str | None = None
    operation_id: str | None = None
    landed_commit: str | None = None
    log: str | None = None
    summary: str = ""
    receipt: Receipt | None = None
    failure: common.Failure | None = None

    @property
    def message(self) -> str:
        return self.failure.message if self.failure is not None else ""

    @property
    def exit_code(self) -> int:
        return self.failure.exit_code if self.failure is not None else 0

    def to_json(self) -> dict[str, Any]:
        if self.state == "idle":
            return {"state": "idle", "points": self.points, "threshold": self.threshold}
        if self.failure is not None:
            out = self.failure.to_json()
        else:
            out = {"state": self.state, "result": self.state, "operation_id": self.operation_id,
                   "landed_commit": self.landed_commit, "log": self.log, "summary": self.summary,
                   "receipt": self.receipt.to_json() if self.receipt else None}
        if self.claim is not None:
            out.update(points=self.points, threshold=self.threshold, claim=self.claim)
        return out


def _threshold(cfg: Any) -> float:
    return float(cfg.get("insight.watch.trigger_points"))


def insight_status(root: MemoryRoot) -> InsightStatus:
    """Points against the threshold, the claim in progress, the last success and last run."""
    threshold = _threshold(root.config())
    st = triggers.load(root, NAME)
    cycle = common.load_state(root, NAME)
    return InsightStatus(
        points=float(st["points"]), threshold=threshold, due=float(st["points"]) >= threshold,
        active_operation_id=st.get("active_operation_id"), active_operation_points=st.get("active_operation_points"),
        last_success_at=st.get("last_success_at"), last_success_result=st.get("last_success_result"),
        last_success_operation_id=st.get("last_success_operation_id"), last_run=cycle.get("last_outcome"),
        failures=cycle.get("failures", 0), backoff=common.backing_off(root, NAME))


def log_name(now: float | None = None) -> str:
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y-%m-%d-%H%M%S")
    return f"{LOG_DIR}/{stamp}.md"


def insight_prompt(worktree: str, name: str, existing: list[str], points: float) -> str:
    earlier = ("Earlier logs: " + ", ".join(existing[-20:])) if existing else "There are no earlier logs."
    return "\n\n".join([
        f"Insight run: {points:g} point(s) of landed Memory changes since the last reflection.",
        f"Your isolated worktree is {worktree}; every tool path is relative to it.",
        f"If you find reflections worth a person's attention, create exactly one new file `{name}` (this run's "
        "UTC time), git_add it and git_commit it with the message `insight: <topic>`. Write nothing else: "
        "Memory, Pursuit and earlier logs stay as they are. If nothing meaningful stands out, write nothing; "
        "a no-op is a valid outcome.",
        earlier,
        "End with the report your instructions describe.",
    ])


def run_insight(root: MemoryRoot, *, force: bool = False, executor: Any = None,
                now: float | None = None) -> InsightRun:
    """Claim and run Insight at the threshold (or ``force``)."""
    with common.cycle_lock(root, NAME):
        cfg = root.config()
        claim, st = claim_points(root, force=force)
        if claim is None:
            return InsightRun("idle", points=float(st["points"]), threshold=_threshold(cfg))
        try:
            out = _run(root, cfg, executor, claim, now)
        except EngineError as exc:
            _settle(root, claim, None)
            if isinstance(exc, ConflictError):
                raise  # busy (a lock timed out): not a failure of the cycle
            common.record_outcome(root, NAME, {**common.error_outcome(exc).to_json(), "claim": claim["id"]},
                                  failed=True)
            raise
        return settle_run(root, claim, out)


def claim_points(root: MemoryRoot, *, force: bool = False) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Under the cycle lock: claim the points at the threshold (or ``force``). Answers the
    claim (``id``, ``points``) or None, and the trigger state. Refused while a host holds an
    Insight task (its claim is live); any other recorded claim is a run that died, and its
    points stay for this one."""
    common.refuse_if_hosted(root, KIND)
    threshold = _threshold(root.config())
    claim: dict[str, Any] = {}

    def take(st: dict[str, Any]) -> None:
        st["active_operation_id"] = st["active_operation_points"] = None
        if float(st["points"]) < threshold and not force:
            return
        claim["id"] = f"insight-watch-{uuid.uuid4().hex[:12]}"
        claim["points"] = float(st["points"])
        st["active_operation_id"], st["active_operation_points"] = claim["id"], claim["points"]

    st = triggers.update(root, NAME, take)
    return (claim or None), st


def release_claim(root: MemoryRoot, claim: dict[str, Any]) -> None:
    """A run that ends without success hands its claim back; the points stay."""
    _settle(root, claim, None)


def settle_run(root: MemoryRoot, claim: dict[str, Any], out: InsightRun) -> InsightRun:
    """End a claimed run: deduct the points only on success (``artifact`` or ``noop``), record
    the outcome, and answer it with the points left and the threshold."""
    st = _settle(root, claim, out if out.state in ("artifact", "noop") else None)
    out = replace(out, points=float(st["points"]), threshold=_threshold(root.config()), claim=claim["id"])
    common.record_outcome(root, NAME, out.to_json(), failed=out.state == "failed")
    return out


def _settle(root: MemoryRoot, claim: dict[str, Any], success: InsightRun | None) -> dict[str, Any]:
    """End the claim: on success deduct the claimed points and record it; else only release."""

    def settle(st: dict[str, Any]) -> None:
        if st.get("active_operation_id") == claim["id"]:
            st["active_operation_id"] = st["active_operation_points"] = None
        if success is not None:
            st["points"] = max(0.0, float(st["points"]) - claim["points"])
            st["last_success_at"] = triggers.now_iso()
            st["last_success_operation_id"] = success.operation_id
            st["last_success_result"] = success.state

    return triggers.update(root, NAME, settle)


@dataclass
class InsightPlan:
    """The one log a run may add (its name is this run's UTC time) and the logs already there."""

    name: str
    existing: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "existing": self.existing}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InsightPlan:
        return cls(str(data["name"]), list(data["existing"]))


def plan_insight(op: Any, now: float | None = None) -> InsightPlan:
    import git

    repo = git.Repo(op.worktree)
    try:
        existing = sorted(p for p in repo.git.ls_tree("-r", "--name-only", "HEAD", "--", LOG_DIR).splitlines() if p)
    finally:
        repo.close()
    stamp = time.time() if now is None else now
    name = log_name(stamp)
    while name in existing:
        stamp += 1
        name = log_name(stamp)
    return InsightPlan(name, existing)


def begin_insight(root: MemoryRoot, sup: Any, *, lease: dict[str, Any] | None = None,
                  now: float | None = None) -> tuple[Any, InsightPlan]:
    """Open the Insight operation of a claimed run and plan its log."""
    return common.begin_planned(sup, KIND, ROLE, lambda op: plan_insight(op, now), lease=lease)


def land_insight(sup: Any, op: Any, plan: InsightPlan, summary: str) -> InsightRun:
    """Check that the run added at most one new log and changed no earlier one (refused, with
    nothing landed, otherwise), then let the supervisor admit (``insight_logs/*.md`` only) and
    land it: ``artifact`` with the log, or ``noop``."""
    import git

    repo = git.Repo(op.worktree)
    try:
        raw = repo.git.diff("--name-status", "--no-renames", op.base_commit, "HEAD")
        subjects = repo.git.log("--format=%s", f"{op.base_commit}..HEAD").splitlines()
    finally:
        repo.close()
    changes = [line.split("\t", 1) for line in raw.splitlines() if line.strip()]
    logs = [(status, path) for status, path in changes if path.startswith(LOG_DIR + "/")]
    new = [path for status, path in logs if status == "A" and LOG_RE.match(path)]
    if len(logs) != len(new) or len(new) > 1:
        raise OperationFailed("insight may write exactly one new insight_logs/YYYY-MM-DD-HHMMSS.md and change no "
                              f"earlier log; it changed: {', '.join(f'{s} {p}' for s, p in logs)}",
                              details={"changes": [{"status": s, "path": p} for s, p in logs]})
    # anything outside insight_logs/ is left to admission, which refuses it (the role table)
    log = new[0] if new else None
    message = None
    if log is not None:
        subject = subjects[-1].strip() if subjects else ""  # the first commit's, as the squash keeps
        message = subject if subject.startswith(SUBJECT_PREFIX) else f"{SUBJECT_PREFIX} {Path(log).stem}"
    receipt = sup.finish(op, summary=summary, message=message)
    landed = receipt.landed_commit is not None and bool(receipt.changed_paths)
    return InsightRun("artifact" if landed else "noop", operation_id=op.id, landed_commit=receipt.landed_commit,
                      log=log if landed else None, summary=summary, receipt=receipt)


def _run(root: MemoryRoot, cfg: Any, executor: Any, claim: dict[str, Any], now: float | None) -> InsightRun:
    from rmtui.engine.writes.supervisor import Supervisor

    if executor is None:
        from rmtui.engine.roles.executors import make_executor

        executor = make_executor(cfg, ROLE)
    with Supervisor(root) as sup:
        op, plan = begin_insight(root, sup, now=now)
        try:
            with common.RoleSession(root, executor, ROLE, op.worktree, cfg=cfg, operation=op.id,
                                    claim=claim["id"]) as session:
                session.send(insight_prompt(op.worktree, plan.name, plan.existing, claim["points"]))
                session.remind_uncommitted()
                summary = session.last
            return land_insight(sup, op, plan, summary)
        except Exception as exc:  # noqa: BLE001 - a refusal or a defect must not leave the operation running
            return InsightRun("failed", operation_id=op.id, failure=common.failed_outcome(sup, op, exc))


# -- the daemon's watcher -----------------------------------------------------------------------

def insight_cycle(root: MemoryRoot) -> dict[str, Any]:
    """The daemon's Insight watcher: claim a run at the threshold, unless backing off."""
    return common.daemon_cycle(
        root, NAME, lambda r: insight_status(r).due, run_insight, ("log", "points", "message"))
