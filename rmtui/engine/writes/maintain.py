"""Manual maintenance (docs/architecture.md, "Manual maintenance"): a person edits a temporary worktree on a
captured head; landing goes through the same admission and only if that head is current.
Landing or aborting removes the worktree, so both refuse while it holds files no landing
carries (names the root's allow-list leaves out) unless the person asks to drop them.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import git

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.gitutil import IDENTITY
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.graph import Issue
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.writes.admission import dirty_paths
from rmtui.engine.writes.operations import Operation, Receipt
from rmtui.engine.writes.supervisor import Supervisor
from rmtui.engine.writes.worktrees import StrayFiles, discard_stray, stray_files

KIND = "maintenance"
LEASE_SECONDS = 7 * 24 * 3600


@dataclass
class MaintenanceStatus:
    operation: Operation
    head: str
    current: bool
    dirty: list[str]
    issues: list[Issue]  # errors and warnings; only errors block landing
    untracked: list[str]  # files the allow-list leaves out: they block landing and aborting

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.is_error]

    def to_json(self) -> dict:
        return {
            "operation_id": self.operation.id, "worktree": self.operation.worktree,
            "captured_head": self.operation.base_commit, "head": self.head, "head_current": self.current,
            "dirty": self.dirty, "untracked": self.untracked, "valid": not self.errors,
            "errors": [i.to_json() for i in self.errors],
            "warnings": [i.to_json() for i in self.issues if not i.is_error],
            "last_error": self.operation.error,
        }


def active(sup: Supervisor) -> Operation | None:
    ops = [o for o in sup.store.list(kind=KIND) if not o.final]
    return ops[-1] if ops else None


def _require(sup: Supervisor, *, worktree: bool = True) -> Operation:
    op = active(sup)
    if op is None:
        raise UsageError("no maintenance in progress (start one with `maintain begin`)")
    if worktree and not Path(op.worktree).is_dir():
        raise ConflictError(f"the worktree of maintenance {op.id} is gone ({op.worktree}); "
                            "run `maintain abort` and begin again")
    return op


def begin(root: MemoryRoot) -> Operation:
    # one maintenance at a time, also when several `begin` race
    with file_lock(root.runtime / "maintenance.lock"), Supervisor(root) as sup:
        op = active(sup)
        if op is not None:
            raise ConflictError(f"maintenance {op.id} is already in progress at {op.worktree}",
                                details={"worktree": op.worktree, "operation_id": op.id})
        return sup.begin(KIND, "maintenance", allow_rebase=False,
                         lease={"holder": "maintenance", "until": time.time() + LEASE_SECONDS})


def status(root: MemoryRoot) -> MaintenanceStatus | None:
    with Supervisor(root) as sup:
        if active(sup) is None:
            return None
        op = _require(sup)
        wt = git.Repo(op.worktree)
        try:
            dirty = dirty_paths(wt)
            tip = wt.head.commit.hexsha
        finally:
            wt.close()
        head = sup.head()
        issues = validate_root(op.worktree, enforce_correction_capacity=False).issues
        return MaintenanceStatus(op, head, _landable(sup, op, head, tip), dirty, issues, stray_files(op.worktree))


def _check_stray(op: Operation, verb: str, discard: bool | Collection[str]) -> None:
    """Refuse to remove the worktree over files only it holds, or drop them when asked
    (``discard``: all of them, or only the ones named, e.g. those a confirmation showed)."""
    files = stray_files(op.worktree)
    drop = files if discard is True else [f for f in files if discard and f in discard]
    left = [f for f in files if f not in drop]  # any not named: refused, and nothing is deleted
    if not left:
        discard_stray(op.worktree, drop)
    else:
        kept = "Nothing was landed" if verb == "land" else "The maintenance stays open"
        raise StrayFiles(op.worktree, left, f"the worktree of {op.id}",
                         f"{kept}. Give each file a memory file's name, move it out of the worktree or delete "
                         f"it, then {verb} again; or pass --discard-untracked to drop them.")


def _landable(sup: Supervisor, op: Operation, head: str, tip: str) -> bool:
    """The captured head is still current, or the person rebased the edits onto the new one."""
    # GitPython annotates is_ancestor() as taking Commit objects; it hands any rev to `git merge-base`
    return head == op.base_commit or sup.repo.is_ancestor(head, tip)  # type: ignore[arg-type]


def land(root: MemoryRoot, message: str = "maintain: manual edit", *,
         discard_untracked: bool | Collection[str] = False) -> Receipt:
    """Commit the worktree's edits and land them, or stop and say why (worktree kept)."""
    with Supervisor(root) as sup:
        op = _require(sup)
        with sup.landing(op.id):
            _check_stray(op, "land", discard_untracked)
            return _land(sup, op, message)


def _land(sup: Supervisor, op: Operation, message: str) -> Receipt:
    wt = git.Repo(op.worktree)
    auto_committed = None  # the commit land made of the person's edits, undone on refusal
    try:
        if wt.is_dirty(untracked_files=True):
            before = wt.head.commit.hexsha
            wt.git.add("-A")
            wt.git.commit("-q", "-m", message, env=IDENTITY)
            auto_committed = before
        tip = wt.head.commit.hexsha
        head = sup.head()
        try:
            if not _landable(sup, op, head, tip):
                raise ConflictError(
                    f"the memory root moved since maintenance began (captured {op.base_commit[:10]}, now "
                    f"{head[:10]}); nothing was landed. Abort and begin again, or rebase the worktree onto "
                    "the new head", details={"captured_head": op.base_commit, "head": head})
            return sup.finish(op, summary=message, message=message)
        except Exception:  # re-raised below, after the cleanup
            # a refused landing leaves the edits as they were (uncommitted), so fixing the
            # worktree and landing again is enough; the refused commit must not linger
            if auto_committed is not None and sup.store.get(op.id).phase == "running":
                try:
                    wt.git.reset("-q", "--soft", auto_committed)
                    wt.git.reset("-q")
                except git.GitCommandError:
                    pass  # the refusal is what the person needs to read, not a failed undo
            raise
    finally:
        wt.close()


def abort(root: MemoryRoot, *, discard_untracked: bool | Collection[str] = False) -> Receipt:
    """Drop the worktree and its edits to memory files (refused over files only it holds)."""
    with Supervisor(root) as sup:
        op = _require(sup, worktree=False)
        _check_stray(op, "abort", discard_untracked)
        return sup.abandon(op, "maintenance aborted")
