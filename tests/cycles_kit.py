"""Helpers shared by the cycle tests: a model configured against the fake provider, direct
commits to a root (as landed Updates would leave), and a seeded Memory/Pursuit graph."""

from __future__ import annotations

import git

from rmtui.engine.memory.config import set_config_value

MEMORY = """\
# Memory

## Tools {#tools}

- `old-node` The build used make → []
- `keep-node` The build uses just → []
- `stable-node` Tests run with pytest → []
"""

PURSUITS = """\
# Pursuits

## Faster builds {#faster-builds} → [dep:keep-node]

## Focus

- `faster-builds`
"""


def configure(root, api, provider, **extra) -> None:
    """Every role borrows the Update model: the fake provider over ``api``."""
    set_config_value(root.path, "update.model.model_id", f"{api}:fake-model")
    set_config_value(root.path, "update.model.api_base", provider.base(api))
    set_config_value(root.path, "update.model.kwargs", {"max_retries": 0})
    for key, value in extra.items():
        set_config_value(root.path, key, value)
    commit(root, "config: cycle model", {})


def commit(root, message: str, files: dict[str, str]) -> str:
    """Write ``files`` into the root and commit them directly (rightmemory.toml is untracked, as in RightMemory)."""
    repo = git.Repo(root.path)
    try:
        for rel, text in files.items():
            target = root.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        repo.git.add("-A", "--", *files)
        repo.git.commit("-q", "--allow-empty", "-m", message)
        return repo.head.commit.hexsha
    finally:
        repo.close()


def seed(root) -> str:
    return commit(root, "seed: memory and pursuits", {"MEMORY.md": MEMORY, "PURSUITS.md": PURSUITS})


def memory_commit(root, n: int) -> str:
    """One more Memory-changing commit (a node appended)."""
    text = (root.path / "MEMORY.md").read_text(encoding="utf-8")
    return commit(root, f"update: note {n}", {"MEMORY.md": text + f"- `note-{n}` Note number {n} → []\n"})


def head(root) -> str:
    repo = git.Repo(root.path)
    try:
        return repo.head.commit.hexsha
    finally:
        repo.close()


def message_of(root, rev: str) -> str:
    repo = git.Repo(root.path)
    try:
        m = repo.commit(rev).message
        return m if isinstance(m, str) else m.decode()
    finally:
        repo.close()
