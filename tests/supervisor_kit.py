"""Helpers for the supervisor tests: a seeded root, a writer that commits in a worktree,
and a byte-level snapshot of the active root (work files plus Git refs and index)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from rmtui.engine.memory.roots import MemoryRoot

MEMORY = """\
# Memory

## Project {#proj}

- `build` Build with make. → [rel:test]
- `test` Run pytest. → []
- `old` An old fact. → []
"""

PURSUITS = """\
# Pursuits

## Focus

- `ship`

## Ship it {#ship} → [rel:build, dep:old]

**Next:**
- `do` release
"""


def git(cwd: Path | str, *args: str, input: bytes | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


def seed(root: MemoryRoot) -> str:
    """Give a fresh root a small valid graph (Memory nodes, a Pursuit referring to them)."""
    (root.path / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (root.path / "PURSUITS.md").write_text(PURSUITS, encoding="utf-8")
    git(root.path, "add", "MEMORY.md", "PURSUITS.md")
    git(root.path, "-c", "user.name=seed", "-c", "user.email=seed@localhost", "commit", "-q", "-m", "seed memory")
    return git(root.path, "rev-parse", "HEAD")


def track_config(root: MemoryRoot) -> str:
    """Track ``rightmemory.toml`` as an rmtui root made before it followed the original's
    allow-list does (or a person who chose to): admission and ``config set`` must guard it."""
    git(root.path, "add", "-f", "rightmemory.toml")
    git(root.path, "-c", "user.name=seed", "-c", "user.email=seed@localhost", "commit", "-q", "-m", "track the config")
    return git(root.path, "rev-parse", "HEAD")


def write(wt: Path | str, files: dict[str, str | bytes | None]) -> None:
    for rel, content in files.items():
        p = Path(wt) / rel
        if content is None:
            git(wt, "rm", "-q", "--", rel)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")


def commit(wt: Path | str, files: dict[str, str | bytes | None], message: str = "edit") -> str:
    """The writer's side: change files in its worktree and commit them (force-adding past .gitignore)."""
    write(wt, files)
    added = [rel for rel, c in files.items() if c is not None]
    if added:
        git(wt, "add", "-f", "--", *added)
    git(wt, "commit", "-q", "--no-verify", "-m", message)
    return git(wt, "rev-parse", "HEAD")


def add_memory_node(text: str, node: str, prose: str = "A new fact.") -> str:
    return text.rstrip("\n") + f"\n- `{node}` {prose} → []\n"


WRITER_BRANCHES = ".git/refs/heads/rmtui/op/"


def snapshot(root: Path | str) -> dict[str, str]:
    """SHA-256 of every work file (outside .runtime and .git) and of HEAD, refs and the index."""
    root = Path(root)
    out: dict[str, str] = {}
    git_dir = root / ".git"
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        if d == root:
            dirnames[:] = [n for n in dirnames if n not in (".runtime", ".git")]
        for name in filenames:
            p = d / name
            out[str(p.relative_to(root))] = _digest(p)
    for rel in ("HEAD", "index", "packed-refs"):
        p = git_dir / rel
        if p.exists():
            out[".git/" + rel] = _digest(p)
    for dirpath, _dirs, filenames in os.walk(git_dir / "refs"):
        for name in filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if not rel.startswith(WRITER_BRANCHES):  # the writers' own branches are theirs to move
                out[rel] = _digest(p)
    return out


def _digest(p: Path) -> str:
    if p.is_symlink():
        return "link:" + os.readlink(p)
    return hashlib.sha256(p.read_bytes()).hexdigest()


def porcelain(root: Path | str) -> str:
    return git(root, "status", "--porcelain", "--untracked-files=all")


def trailer_of(root: Path | str, commit: str) -> str:
    return git(root, "log", "-1", "--format=%(trailers:key=RightMemory-Operation,valueonly)", commit)
