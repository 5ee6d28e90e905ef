"""Isolated Git worktrees for operations, under ``.runtime/worktrees/``, and the pruning of
the ones a killed sync left (docs/sync.md, "A sync that was killed").

Removing a worktree never loses a file silently (docs/architecture.md, "Files a removal would
lose"): :func:`stray_files` names what only the worktree holds, the files the root's allow-list
leaves out; a person's lander refuses on them, and :func:`remove` moves any left to
``.runtime/kept/`` first and says where.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import git

from rmtui.engine.errors import ConflictError, OperationFailed
from rmtui.engine.memory.roots import MemoryRoot

WORKTREES = "worktrees"
BRANCH_PREFIX = "rmtui/op/"
#: A pull's staging worktree (detached, named by its digest) and a host's sync-repair task
#: worktree: both are created only under the sync lock.
STAGING = re.compile(r"^sync-[0-9a-f]{16}$")
SYNC_TASK = re.compile(r"^sync-repair-[0-9A-Za-z-]+$")


KEPT = "kept"
#: The rule a refusal or a warning about such files names.
STRAY_RULE = "untracked-files"
#: Which names are memory files, as the root's allow-list ``.gitignore`` says (said in refusals).
MEMORY_FILES = ("memory files are the names the root's allow-list .gitignore tracks (`*`, then `!name` lines), "
                "e.g. MEMORY.md, MEMORY_*.md, PURSUITS.md, PURSUIT_*.md, corrections.md, insight_logs/*.md; "
                "a file with any other name is never committed")


def worktrees_dir(root: MemoryRoot) -> Path:
    return root.runtime / WORKTREES


def kept_dir(root: MemoryRoot) -> Path:
    return root.runtime / KEPT


def stray_files(path: Path | str) -> list[str]:
    """Files in a worktree that Git neither tracks nor would add: what the root's allow-list
    (and Git's other excludes) leaves out, e.g. ``notes.md`` or ``MEMORY-typo.md``. No landing
    carries them, so removing the worktree would lose them. A nested repository is one entry
    (``dir/``). Empty for a worktree that is gone."""
    p = Path(path)
    if not (p / ".git").exists():
        return []
    out = git.Git(str(p)).ls_files("--others", "--ignored", "--exclude-standard", "-z", stdout_as_string=False)
    return sorted(e.decode("utf-8", "surrogateescape") for e in out.split(b"\0") if e)


def stray_message(files: list[str], what: str) -> str:
    shown = ", ".join(files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
    return (f"{STRAY_RULE}: {what} holds {len(files)} file{'s' if len(files) != 1 else ''} that "
            f"{'are' if len(files) != 1 else 'is'} not memory files and would be lost with it: {shown} "
            f"({MEMORY_FILES})")


class StrayFiles(ConflictError):
    """A worktree about to be removed holds files no landing carries (exit 3, rule ``untracked-files``)."""

    rule = STRAY_RULE

    def __init__(self, worktree: Path | str, files: list[str], what: str, remedy: str) -> None:
        super().__init__(f"{stray_message(files, what)}; the worktree {worktree} is kept. {remedy}",
                         details={"rule": STRAY_RULE, "files": files, "worktree": str(worktree)})


def discard_stray(path: Path | str, files: list[str]) -> None:
    """Delete the named stray files (the person asked to drop them)."""
    p = Path(path)
    for rel in files:
        f = p / rel
        if f.is_dir() and not f.is_symlink():
            shutil.rmtree(f)
        else:
            f.unlink(missing_ok=True)


@dataclass(frozen=True)
class Kept:
    """Stray files a removal moved out of a worktree before removing it, and where to."""

    files: list[str]
    where: Path

    def message(self, what: str = "the worktree") -> str:
        n = len(self.files)
        return (f"{STRAY_RULE}: {what} held {n} file{'s' if n != 1 else ''} that "
                f"{'are' if n != 1 else 'is'} not memory files: {', '.join(self.files[:20])}"
                f"{f' and {n - 20} more' if n > 20 else ''}; kept in {self.where}")


def keep_stray(root: MemoryRoot, path: Path | str) -> Kept | None:
    """Move a worktree's stray files to ``.runtime/kept/<worktree name>/`` (a fresh folder per
    removal), keeping their relative paths; nothing when it has none."""
    p = Path(path)
    files = stray_files(p)
    if not files:
        return None
    base = kept_dir(root) / p.name
    where, n = base, 1
    while where.exists():
        n += 1
        where = base.with_name(f"{base.name}-{n}")
    try:
        for rel in files:
            dest = where / rel.rstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(p / rel.rstrip("/"), dest)
    except OSError as exc:
        raise OperationFailed(f"{STRAY_RULE}: could not keep the files {p} holds outside memory ({exc}); "
                              "the worktree is not removed", details={"rule": STRAY_RULE, "files": files}) from exc
    return Kept(files, where)


def create(root: MemoryRoot, name: str, base: str) -> tuple[Path, str]:
    """Add a worktree on a new branch at ``base``; returns (path, branch)."""
    path = worktrees_dir(root) / name
    branch = BRANCH_PREFIX + name
    path.parent.mkdir(parents=True, exist_ok=True)
    repo = git.Repo(root.path)
    if path.exists():
        remove(root, path, branch)
    repo.git.worktree("add", "--quiet", "-b", branch, str(path), base)
    return path, branch


def remove(root: MemoryRoot, path: Path | str | None, branch: str | None) -> Kept | None:
    """Remove a worktree and its branch; tolerant of half-created or already-removed state.

    Its stray files (:func:`stray_files`) are moved to ``.runtime/kept/`` first and returned,
    for the caller to name in its receipt or answer; if they cannot be moved, nothing is removed.
    """
    repo = git.Repo(root.path)
    kept = None
    if path:
        p = Path(path)
        if p.exists():
            kept = keep_stray(root, p)
            try:
                repo.git.worktree("remove", "--force", "--force", str(p))
            except git.GitCommandError:
                shutil.rmtree(p, ignore_errors=True)
    repo.git.worktree("prune")
    if branch:
        try:
            repo.git.branch("-D", branch)
        except git.GitCommandError:
            pass
    return kept


def existing(root: MemoryRoot) -> list[Path]:
    d = worktrees_dir(root)
    return sorted(p for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def op_branches(root: MemoryRoot) -> list[str]:
    repo = git.Repo(root.path)
    out = repo.git.for_each_ref("--format=%(refname:short)", f"refs/heads/{BRANCH_PREFIX}")
    return [b for b in out.splitlines() if b]


def on_our_branch(root: MemoryRoot) -> set[str]:
    """Names of worktrees under ours that Git has checked out on our branch namespace: ours
    even when their operation record is lost (the original never makes ``rmtui/op/`` branches)."""
    repo = git.Repo(root.path)
    out = repo.git.worktree("list", "--porcelain")
    names, path = set(), None
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree "):])
        elif line.startswith("branch refs/heads/" + BRANCH_PREFIX) and path is not None:
            name = line[len("branch refs/heads/" + BRANCH_PREFIX):]
            if path.name == name and path.parent == worktrees_dir(root):
                names.add(name)
    return names


def sync_lock_path(root: MemoryRoot) -> Path:
    """The lock every pull, push and sync-repair staging holds (``.runtime/sync/sync.lock``)."""
    return root.runtime / "sync" / "sync.lock"


def _admin_entries(root: MemoryRoot) -> dict[Path, Path]:
    """Each ``.git/worktrees/<x>`` admin folder by the worktree folder it serves (from its
    ``gitdir``; by name under ours when ``worktree add`` died before writing that, or while
    writing it: an empty ``gitdir`` is no path)."""
    base = Path(git.Repo(root.path).git_dir) / "worktrees"
    found: dict[Path, Path] = {}
    for admin in sorted(base.iterdir()) if base.is_dir() else ():
        try:
            gitdir = Path((admin / "gitdir").read_text().strip())
        except OSError:
            gitdir = Path()
        found[gitdir.parent if gitdir.is_absolute() else worktrees_dir(root) / admin.name] = admin
    return found


def _unfinished(admin: Path) -> bool:
    """``worktree add`` did not finish: Git's "initializing" lock is still there, or HEAD
    names no commit (what a kill before the checkout leaves; it fails every later fetch)."""
    try:
        if "initializing" in (admin / "locked").read_text():
            return True
    except OSError:
        pass
    try:
        head = (admin / "HEAD").read_text().strip()
        commondir = (admin / "commondir").read_text().strip()
    except OSError:
        return True
    if not commondir:  # written last but one: Git cannot read the entry at all (`worktree list` fails)
        return True
    return not head.startswith("ref: ") and (len(head) != 40 or set(head) == {"0"})


def prune_dead_sync(root: MemoryRoot) -> list[str]:
    """Remove what a killed sync left, with its admin entry and the Git locks in it.

    The caller holds the sync lock, so no pull, push or repair staging is running: every
    staging worktree left is dead, and so is a sync-repair task worktree whose creation did
    not finish (a finished one belongs to an open host task and stays). A worktree on a
    branch is not one of ours (the original tool's repairs are on ``rightmemory-sync-*``)
    and is never touched.
    """
    removed: list[str] = []
    admins = _admin_entries(root)
    home = worktrees_dir(root).resolve()
    for where, admin in admins.items():
        if where.parent.resolve() != home or not (STAGING.match(where.name) or SYNC_TASK.match(where.name)):
            continue
        try:
            if (admin / "HEAD").read_text().startswith("ref: "):
                continue
        except OSError:
            pass
        if STAGING.match(where.name) or _unfinished(admin):
            shutil.rmtree(where, ignore_errors=True)
            shutil.rmtree(admin, ignore_errors=True)
            removed.append(str(where))
    for folder in existing(root):  # a folder Git never registered (killed before the admin entry)
        if STAGING.match(folder.name) and not (folder / ".git").is_dir() and not any(
                w.resolve() == folder.resolve() for w in admins):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    if removed:
        git.Repo(root.path).git.worktree("prune")
    return removed
