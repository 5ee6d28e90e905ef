"""The cycles run by a host instead of an API model (``rmtui --headless assistant begin --role R``).

A host's child does the role's reading and editing in the task's worktree; the program does
the rest exactly as on the model path, through the same functions: the Pruner's due check,
plan and ``prune:`` commit with its ledger (:mod:`.pruner`), Insight's claim, one-log check and
points settled only on success (:mod:`.insight`), a correction round's input and result
(:mod:`.corrections`), a sync repair's staging and judgement (:mod:`rmtui.engine.sync.repair`).
The task text the host gets is the prompt the model gets.

Each role answers :class:`HostTask` from ``begin`` (or an idle answer when nothing is due),
and the outcome of the model path from ``complete``. The protocol around it (task records,
leases, ``--retry``, worktree identity) is :mod:`rmtui.engine.host.assistant`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rmtui.engine.cycles import common
from rmtui.engine.errors import OperationFailed, UsageError
from rmtui.engine.memory.roots import MemoryRoot

if TYPE_CHECKING:
    from rmtui.engine.cycles.corrections import CorrectionRound
    from rmtui.engine.cycles.insight import InsightRun
    from rmtui.engine.cycles.pruner import PruneRun
    from rmtui.engine.sync.pull import SyncResult

#: Roles a host can run besides ``update`` (which has its own claim by the queue's batching).
HOSTED_ROLES = ("pruner", "insight", "update-correction", "sync-reconciler")
SYNC_TASK_PREFIX = "sync-repair"
#: Roles whose contract ends in a result the host reports (``complete --result``); every other
#: role's outcome is what the program reads from its commits, so a result is refused.
RESULT_ROLES = ("update-correction",)

#: What the host's child is told beyond the role's own text, per role.
NOTES = {
    "pruner": ("Remove expired items from MEMORY.md / MEMORY_*.md only, and commit once with one `- <id>: <reason>` "
               "line per removed item in the body. The program writes the landed `prune:` commit and its ledger "
               "(Removed, Revival grace) from what you actually removed; removing a kept item is refused. If "
               "nothing should go, commit nothing: an empty `prune: checkpoint` lands."),
    "insight": ("Create at most the one new log named in the task, commit it with the subject `insight: <topic>`, "
                "and change nothing else: any other path is refused by the supervisor and nothing lands. "
                "Committing nothing is a valid no-op."),
    "update-correction": ("When done, the main agent completes with the result, exactly "
                          "`--result '{\"status\": \"applied\"|\"no_change\"|\"needs_input\", \"message\": \"…\"}'`; "
                          "needs_input asks the person a question and lands nothing."),
    "sync-reconciler": ("The worktree holds a merge in progress (detached HEAD). Resolve every conflict by meaning, "
                        "keep both machines' knowledge, validate, then `git add` and `git commit` once: that commit "
                        "completes the merge. Do not rebase, reset or start another commit; never edit "
                        "update_queue/ or update_records/."),
}


@dataclass
class HostTask:
    """A task handed to a host: its worktree and base, the task text (the model's prompt), the
    due context to show, and what ``complete`` needs back (saved with the task)."""

    task_id: str
    role: str
    kind: str
    worktree: str
    base_commit: str
    prompt: str
    context: dict[str, Any]
    saved: dict[str, Any] = field(default_factory=dict)
    op: Any = None  # the supervisor operation, for every role but sync-reconciler


@dataclass(frozen=True)
class HostIdle:
    """The answer to ``begin`` when nothing is due: the role, why, and the numbers it is due by."""

    role: str
    message: str
    due: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"claimed": False, "state": "idle", "role": self.role, "message": self.message, **self.due}


def idle(role: str, message: str, **due: Any) -> HostIdle:
    """The answer when nothing is due: ``claimed`` false, ``state`` idle, and why."""
    return HostIdle(role, message, due)


def check_role(role: str) -> str:
    if role not in HOSTED_ROLES:
        raise UsageError(f"a host can run update, {', '.join(HOSTED_ROLES)}; not {role!r}")
    return role


def cycle_name(role: str) -> str | None:
    """The cycle lock and state name of ``role`` (None for sync-reconciler, which has the sync lock)."""
    from rmtui.engine.cycles import corrections, insight, pruner

    return {"pruner": pruner.NAME, "insight": insight.NAME, "update-correction": corrections.NAME}.get(role)


def kind_of(role: str) -> str:
    from rmtui.engine.cycles import corrections, insight, pruner

    return {"pruner": pruner.KIND, "insight": insight.KIND, "update-correction": corrections.KIND,
            "sync-reconciler": SYNC_TASK_PREFIX}[role]


@contextmanager
def cycle_guard(root: MemoryRoot, role: str) -> Iterator[None]:
    """The front-level lock a completion holds (waiting): the cycle's own lock, so a model run
    and a host's completion never interleave; sync takes its lock in publication."""
    name = cycle_name(role)
    with common.cycle_lock(root, name, wait=True) if name else nullcontext():
        yield


# -- begin -----------------------------------------------------------------------------------

def begin(root: MemoryRoot, sup: Any, role: str, *, lease: dict[str, Any], force: bool = False,
          receipt: str | None = None, comment: str | None = None) -> HostTask | HostIdle:
    """Prepare ``role``'s task as the model path would, or answer idle when it is not due."""
    check_role(role)
    if role == "update-correction":
        if not receipt or comment is None:
            raise UsageError("an update-correction task needs --receipt (the landed Update) and --comment")
        return _begin_correction(root, sup, lease, receipt, comment)
    if receipt or comment is not None:
        raise UsageError("--receipt and --comment belong to --role update-correction")
    begins: dict[str, Callable[..., HostTask | HostIdle]] = {
        "pruner": _begin_pruner, "insight": _begin_insight, "sync-reconciler": _begin_sync}
    return begins[role](root, sup, lease, force)


def _task(op: Any, role: str, prompt: str, context: dict[str, Any], saved: dict[str, Any]) -> HostTask:
    return HostTask(op.id, role, op.kind, op.worktree, op.base_commit, prompt, context, saved, op)


def _begin_pruner(root: MemoryRoot, sup: Any, lease: dict[str, Any], force: bool) -> HostTask | HostIdle:
    from rmtui.engine.cycles import pruner

    due_keys = ("due", "memory_commits_since_prune", "generation_commits", "last_prune_commit", "boundary")
    with common.cycle_lock(root, pruner.NAME):
        status = pruner.prune_status(root)
        due = {k: getattr(status, k) for k in due_keys}
        if not status.due and not force:
            return idle("pruner", f"the Pruner is not due: {status.memory_commits_since_prune} of "
                                  f"{status.generation_commits} Memory commits since the last prune "
                                  "(--force runs it anyway)", **due)
        op, plan = pruner.begin_prune(root, sup, lease=lease)
    import git

    repo = git.Repo(op.worktree)
    try:
        ledgers = [pc.to_json() for pc in pruner.prune_history(repo, op.base_commit, limit=3)]
    finally:
        repo.close()
    context = {
        **due,
        "memory_items": [{"id": i, "file": f} for i, f in plan.before.items()],
        "keep": {"pursuit_referenced": sorted(plan.keep_pursuit),
                 "revival_grace": [{"id": i, "file": plan.before[i], "grace": f"{k}/{n}"}
                                   for i, (k, n) in plan.grace.items()]},
        "recent_ledgers": ledgers,
    }
    candidates = pruner.unchanged_since(op.worktree, status.boundary)
    context["prune_candidates"] = [i for i in candidates if i not in plan.protected]
    prompt = pruner.prune_prompt(op.worktree, status, plan.keep_pursuit, plan.grace, candidates)
    return _task(op, "pruner", prompt, context, {"plan": plan.to_json()})


def _begin_insight(root: MemoryRoot, sup: Any, lease: dict[str, Any], force: bool) -> HostTask | HostIdle:
    from rmtui.engine.cycles import insight

    with common.cycle_lock(root, insight.NAME):
        claim, st = insight.claim_points(root, force=force)
        threshold = float(root.config().get("insight.watch.trigger_points"))
        if claim is None:
            return idle("insight", f"Insight is below its threshold: {float(st['points']):g} of {threshold:g} "
                                   "points (--force runs it anyway)", points=float(st["points"]),
                        threshold=threshold, due=False)
        try:
            op, plan = insight.begin_insight(root, sup, lease=lease)
        except BaseException:
            insight.release_claim(root, claim)
            raise
    context = {"due": True, "points": claim["points"], "threshold": threshold, "claim": claim["id"],
               "log": plan.name, "existing_logs": plan.existing}
    prompt = insight.insight_prompt(op.worktree, plan.name, plan.existing, claim["points"])
    return _task(op, "insight", prompt, context, {"claim": claim, "plan": plan.to_json()})


def _begin_correction(root: MemoryRoot, sup: Any, lease: dict[str, Any], receipt: str,
                      comment: str) -> HostTask:
    from rmtui.engine.cycles import corrections

    rnd = corrections.load_round(root, receipt, comment)
    with common.cycle_lock(root, corrections.NAME):
        op = corrections.begin_round(sup, lease=lease)
    context = {"receipt": rnd.receipt.to_json(), "comment": rnd.comment, "history": rnd.history,
               "evidence": [{"uid": u, "text": t} for u, t in rnd.evidence], "result_shape": corrections.RESULT_SHAPE}
    return _task(op, "update-correction", rnd.prompt(op.worktree), context,
                 {"receipt": rnd.receipt.operation_id, "comment": rnd.comment})


def _begin_sync(root: MemoryRoot, sup: Any, lease: dict[str, Any], force: bool) -> HostTask | HostIdle:
    """Stage the pending repair (the last fetched upstream merged into the head) in a worktree
    of the task's own; idle when sync is off or the merge needs no repair."""
    from rmtui.engine.sync import incoming, repair
    from rmtui.engine.sync.pull import SyncResult, examine, fresh_worktree, stage, sync_lock
    from rmtui.engine.sync.remote import upstream_of
    from rmtui.engine.writes import worktrees
    from rmtui.engine.writes.operations import new_operation_id

    if not root.config().get("sync.enabled"):
        return idle("sync-reconciler", "no pending repair: sync is off")
    up = upstream_of(root.path)
    if up is None:
        return idle("sync-reconciler", "no pending repair: the branch has no upstream")
    with sync_lock(root):
        inc = examine(root, up)
        if isinstance(inc, SyncResult):
            return idle("sync-reconciler", f"no pending repair: {inc.message}", sync_status=inc.status)
        if inc.queue_only:
            return idle("sync-reconciler", "no pending repair: only queue files moved upstream; `sync pull` lands them")
        task_id = new_operation_id(SYNC_TASK_PREFIX)
        wt = worktrees.worktrees_dir(root) / task_id
        fresh_worktree(root, wt, inc.head)
        try:
            _, conflicts, problems = stage(wt, inc, incoming.limits_of(root))
            if problems:
                repair.restage(wt, inc.head, inc.tip, conflicts)
        except BaseException:
            worktrees.remove(root, wt, None)
            raise
        if not problems:
            worktrees.remove(root, wt, None)
            return idle("sync-reconciler", f"no pending repair: {inc.label} merges cleanly and validates; "
                                           "`sync pull` lands it")
    context = {"upstream": inc.label, "head": inc.head, "upstream_commit": inc.tip, "ahead": inc.ahead,
               "behind": inc.behind, "incoming": inc.paths, "conflicts": conflicts,
               "problems": [] if conflicts else problems}
    return HostTask(task_id, "sync-reconciler", SYNC_TASK_PREFIX, str(wt), inc.head,
                    repair.repair_prompt(inc.label, conflicts, problems), context,
                    {"incoming": inc.to_json(), "conflicts": conflicts, "problems": problems})


# -- complete --------------------------------------------------------------------------------

def complete(root: MemoryRoot, sup: Any, role: str, op: Any, saved: dict[str, Any], *, summary: str,
             result: str | None = None) -> PruneRun | InsightRun | CorrectionRound:
    """Admit and land a task's work as the model path does; a refusal raises and lands nothing
    (the task stays open so the edits can be corrected and completed again)."""
    if role == "pruner":
        return _complete_pruner(root, sup, op, saved, summary)
    if role == "insight":
        return _complete_insight(root, sup, op, saved, summary)
    if role == "update-correction":
        return _complete_correction(root, sup, op, saved, summary, result)
    raise UsageError(f"no completion for role {role!r}")


_Outcome = TypeVar("_Outcome")


def _land(sup: Any, op: Any, landing: Callable[[], _Outcome]) -> _Outcome:
    """Run a landing; a refusal is noted on the still-running operation (status shows it)."""
    try:
        return landing()
    except OperationFailed as exc:
        current = sup.store.get(op.id)
        if not current.final:
            current.error = f"{exc.kind}: {exc.message}"
            sup.store.save(current)
        raise exc from None


def _complete_pruner(root: MemoryRoot, sup: Any, op: Any, saved: dict[str, Any], summary: str) -> PruneRun:
    from rmtui.engine.cycles import pruner

    out = _land(sup, op, lambda: pruner.land_prune(sup, op, pruner.PrunePlan.from_json(saved["plan"]), summary))
    common.record_outcome(root, pruner.NAME, out.to_json(), failed=out.state == "failed")
    return out


def _complete_insight(root: MemoryRoot, sup: Any, op: Any, saved: dict[str, Any], summary: str) -> InsightRun:
    from rmtui.engine.cycles import insight

    out = _land(sup, op, lambda: insight.land_insight(sup, op, insight.InsightPlan.from_json(saved["plan"]), summary))
    return insight.settle_run(root, saved["claim"], out)


def _complete_correction(root: MemoryRoot, sup: Any, op: Any, saved: dict[str, Any], summary: str,
                         result: str | None) -> CorrectionRound:
    from rmtui.engine.cycles import corrections

    parsed = corrections.parse_result(result or "")
    if parsed is None:
        raise UsageError("complete an update-correction task with --result " + corrections.RESULT_SHAPE)
    out = corrections.finish_round(sup, op, parsed, summary or parsed["message"])
    return corrections.record_round(root, saved["receipt"], saved["comment"], out)


def complete_sync(root: MemoryRoot, worktree: str, saved: dict[str, Any], *, summary: str) -> SyncResult:
    """Judge the host's repair as the role's is judged (one merge commit of head and upstream
    passing the incoming rules and the supervisor's admission of its tree), then publish it
    as a pull would."""
    from rmtui.engine.sync import incoming, repair
    from rmtui.engine.sync.pull import Incoming, publish_repaired

    inc = Incoming.from_json(saved["incoming"])
    outcome = repair.check_repair(Path(worktree), head=inc.head, tip=inc.tip, label=inc.label,
                                  conflicts=saved["conflicts"], problems=saved["problems"], summary=summary,
                                  limits=incoming.limits_of(root))
    if outcome.commit is None:
        raise OperationFailed(outcome.message, details={"problems": outcome.problems[:40], "rule": outcome.rule})
    return publish_repaired(root, inc, outcome.commit, outcome.to_json())


def release(root: MemoryRoot, role: str, saved: dict[str, Any]) -> None:
    """What a replaced (fenced) task held besides its operation: Insight's claim."""
    if role == "insight" and saved.get("claim"):
        from rmtui.engine.cycles import insight

        insight.release_claim(root, saved["claim"])
