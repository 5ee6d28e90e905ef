"""Small Git helpers over GitPython shared by every part of the engine."""

from __future__ import annotations

from pathlib import Path

import git


def repo(path: Path) -> git.Repo:
    return git.Repo(path)


def head_commit(path: Path) -> str | None:
    r = git.Repo(path)
    try:
        return r.head.commit.hexsha
    except ValueError:
        return None
