"""Repair of a conflicting or invalid synchronized state by the sync-reconciler role.

The role works in the staging worktree that holds the merge attempt; it must complete the
merge with exactly one commit whose first parent is the local head, touching only
synchronized paths and never queue or record files. Nothing is published until the repaired
tree validates. Without a configured model the repair is not attempted: the root stays as
it was and the status says ``conflict``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from rmtui.engine.errors import EngineError, UnavailableError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.sync.paths import is_queue_or_record, is_synced
from rmtui.engine.sync.remote import git

ROLE = "sync-reconciler"


@dataclass
class RepairOutcome:
    commit: str | None
    message: str
    summary: str = ""
    problems: list[str] = field(default_factory=list)

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
    return check_repair(wt, head=head, tip=tip, label=label, conflicts=conflicts, problems=problems, summary=summary)


def restage(wt: Path, head: str, tip: str, conflicts: list[str]) -> None:
    """Make the staged state one merge the repairer's single commit completes: a conflicted
    merge already is; a clean but invalid result is restaged as a merge left uncommitted."""
    if not conflicts:
        git(wt, "checkout", "--quiet", "--force", "--detach", head)
        git(wt, "merge", "--quiet", "--no-ff", "--no-commit", tip)


def check_repair(wt: Path, *, head: str, tip: str, label: str, conflicts: list[str], problems: list[str],
                 summary: str) -> RepairOutcome:
    """Judge a finished repair (by the role or a host): one merge commit of ``head`` and
    ``tip`` on synchronized paths only, and a tree that validates; ``commit`` is None otherwise."""
    try:
        commit = _check(wt, head, tip)
    except EngineError as exc:
        return RepairOutcome(None, f"the repair of {label} was refused: {exc.message}; the root is unchanged",
                             summary, problems)
    report = validate_root(wt, enforce_correction_capacity=False)
    errors = [f"{i.file}:{i.line}: {i.rule}: {i.message}" for i in report.issues
              if getattr(i, "severity", "error") == "error"]
    if errors:
        return RepairOutcome(None, f"the repaired state of {label} is still invalid; the root is unchanged",
                             summary, errors)
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


def _check(wt: Path, head: str, tip: str) -> str:
    """The repair added exactly one commit: first parent the local head, second the upstream
    tip, a clean worktree, only synchronized non-queue paths changed against the merge base."""
    if git(wt, "status", "--porcelain", "--untracked-files=all").strip():
        raise EngineError("the worktree has uncommitted changes")
    commit = git(wt, "rev-parse", "HEAD").strip()
    parents = git(wt, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    if parents != [head, tip]:
        raise EngineError("the repair must be one merge commit of the local head and the upstream tip")
    changed = [p for p in git(wt, "diff", "--name-only", "-z", head, commit).split("\0") if p]
    upstream_changed = set(p for p in git(wt, "diff", "--name-only", "-z", head, tip).split("\0") if p)
    bad = [p for p in changed if not is_synced(p) or (is_queue_or_record(p) and p not in upstream_changed)]
    if bad:
        raise EngineError(f"the repair touched paths it may not: {', '.join(bad[:5])}")
    return commit
