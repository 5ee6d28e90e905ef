"""Isolated Git worktrees for operations, under ``.runtime/worktrees/``."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from rmtui.engine.roots import MemoryRoot

WORKTREES = "worktrees"
BRANCH_PREFIX = "rmtui/op/"


def worktrees_dir(root: MemoryRoot) -> Path:
    return root.runtime / WORKTREES


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


def remove(root: MemoryRoot, path: Path | str | None, branch: str | None) -> None:
    """Remove a worktree and its branch; tolerant of half-created or already-removed state."""
    repo = git.Repo(root.path)
    if path:
        p = Path(path)
        if p.exists():
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


def existing(root: MemoryRoot) -> list[Path]:
    d = worktrees_dir(root)
    return sorted(p for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def op_branches(root: MemoryRoot) -> list[str]:
    repo = git.Repo(root.path)
    out = repo.git.for_each_ref("--format=%(refname:short)", f"refs/heads/{BRANCH_PREFIX}")
    return [b for b in out.splitlines() if b]
