"""Isolated Git worktrees for operations, under ``.runtime/worktrees/``."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from rmtui.engine.memory.roots import MemoryRoot

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
