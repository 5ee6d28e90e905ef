"""Repair of a conflicting or invalid synchronized state by the sync-reconciler role.

The role works in the staging worktree that holds the merge attempt; it must complete the
merge with exactly one commit whose first parent is the local head, touching only
synchronized paths and never queue or record files. Nothing is published until the repair
commit passes the incoming rules and the supervisor's admission of its tree (from Git
objects, so no index flag can hide a file). Without a configured model the repair is not attempted: the root stays as
it was and the status says ``conflict``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from rmtui.engine.errors import EngineError, UnavailableError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.sync import incoming
from rmtui.engine.sync.remote import git
from rmtui.engine.writes.admission import AdmissionRefused, FileLimits

ROLE = "sync-reconciler"


@dataclass
class RepairOutcome:
    commit: str | None
    message: str
    summary: str = ""
    problems: list[str] = field(default_factory=list)
    rule: str | None = None  # the admission rule a refused repair broke

    def to_json(self) -> dict:
        return asdict(self)


def repair_prompt(label: str, conflicts: list[str], problems: list[str]) -> str:
    lines = [f"Synchronizing with {label} needs a repair in this worktree (the merge attempt)."]
    if conflicts:
        lines.append("Conflicted files (conflict markers inside): " + ", ".join(conflicts))
    if problems and not conflicts:
        lines.append("The merged memory breaks these rules:")
        lines += [f"- {p}" for p in problems[:40]]
    lines.append("Resolve by meaning, validate_memory until valid, then git_add and git_commit once "
                 "(the commit completes the merge). Never edit update_queue/ or update_records/.")
    return "\n".join(lines)


def describe(conflicts: list[str], problems: list[str]) -> str:
    return "conflicts in " + ", ".join(conflicts) if conflicts else f"{len(problems)} validation error(s)"


def repair(root: MemoryRoot, wt: Path, *, head: str, tip: str, label: str, conflicts: list[str],
           problems: list[str], executor=None) -> RepairOutcome:
    if executor is None:
        try:
            from rmtui.engine.roles.executors import make_executor

            executor = make_executor(root.config(), ROLE)
        except UnavailableError:
            return RepairOutcome(None, f"pulling {label} needs a repair ({describe(conflicts, problems)}) and no "
                                       f"model is configured for {ROLE}; the root is unchanged", problems=problems)
    restage(wt, head, tip, conflicts)
    summary = _run(root, wt, executor, repair_prompt(label, conflicts, problems))
    return check_repair(wt, head=head, tip=tip, label=label, conflicts=conflicts, problems=problems, summary=summary,
                        limits=incoming.limits_of(root))


def restage(wt: Path, head: str, tip: str, conflicts: list[str]) -> None:
    """Make the staged state one merge the repairer's single commit completes: a conflicted
    merge already is; a clean but invalid result is restaged as a merge left uncommitted."""
    if not conflicts:
        git(wt, "checkout", "--quiet", "--force", "--detach", head)
        git(wt, "merge", "--quiet", "--no-ff", "--no-commit", tip)


def check_repair(wt: Path, *, head: str, tip: str, label: str, conflicts: list[str], problems: list[str],
                 summary: str, limits: FileLimits) -> RepairOutcome:
    """Judge a finished repair (by the role or a host): one merge commit of ``head`` and
    ``tip`` that passes the incoming rules and the supervisor's admission of its tree
    (:func:`incoming.admit_repair`); ``commit`` is None otherwise, with the rule named."""
    try:
        commit = _merge_commit(wt, head, tip)
        incoming.admit_repair(str(wt), head, tip, commit, limits)
    except AdmissionRefused as exc:
        if exc.rule == "invalid-graph":
            return RepairOutcome(None, f"the repaired state of {label} is still invalid; the root is unchanged",
                                 summary, [str(exc)], rule=exc.rule)
        return RepairOutcome(None, f"the repair of {label} was refused: {exc.message}; the root is unchanged",
                             summary, problems, rule=exc.rule)
    except EngineError as exc:
        return RepairOutcome(None, f"the repair of {label} was refused: {exc.message}; the root is unchanged",
                             summary, problems)
    return RepairOutcome(commit, f"repaired {describe(conflicts, problems)}", summary)


def _run(root: MemoryRoot, wt: Path, executor, prompt: str) -> str:
    from rmtui.engine.roles.executors import DebugTrace
    from rmtui.engine.roles.prompts import role_instructions
    from rmtui.engine.roles.tools import RoleTools

    tools = RoleTools(wt, ROLE)
    trace = DebugTrace.for_role(root.runtime, ROLE, enabled=bool(root.config().get("debug.trace")))
    conv = executor.start(system=role_instructions(ROLE), tools=tools.specs(), cwd=str(wt), trace=trace)
    try:
        return conv.send(prompt).text.strip()
    finally:
        conv.close()


def _merge_commit(wt: Path, head: str, tip: str) -> str:
    """The repair added exactly one commit: first parent the local head, second the upstream tip."""
    commit = git(wt, "rev-parse", "HEAD").strip()
    parents = git(wt, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    if parents != [head, tip]:
        raise EngineError("the repair must be one merge commit of the local head and the upstream tip")
    return commit
