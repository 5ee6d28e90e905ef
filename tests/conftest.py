"""Shared fixtures: an isolated HOME, fresh memory roots, and the real CLI as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench._bytecode import as_users_run
from bench._git import GitDaemon, serve_upstream
from rmtui.engine.memory.roots import MemoryRoot, init_root
from tests import cli_fork

# The tests start the CLI, writers and services as new processes by the thousand; with
# PYTHONDONTWRITEBYTECODE set (common in CI images) each would compile rmtui again.
as_users_run()

#: The retrieval fixtures (models, backends, a warm service) are shared by several files.
pytest_plugins = ["tests.retrieve_kit"]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch) -> Path:
    """Every test gets its own HOME so ~/.rightmemory and profiles never leak."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("RIGHTMEMORY_ROOT", raising=False)
    # no MCP server a test starts launches a fork server that outlives it (test_mcp_forkserver.py turns it on)
    monkeypatch.setenv("RMTUI_MCP_FORKSERVER", "0")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "rmtui-test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@localhost")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "rmtui-test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@localhost")
    return home


@pytest.fixture
def root(tmp_path) -> MemoryRoot:
    """A freshly initialised memory root."""
    return init_root(tmp_path / "root")


@pytest.fixture
def memory_root(root) -> MemoryRoot:
    """A root with two committed nodes about how the project tests (the MCP front's tests)."""
    import git

    (root.path / "MEMORY.md").write_text(
        "# Memory\n\n## Testing {#testing}\n\n- `pytest-quiet` the project runs its tests with pytest -q → []\n"
        "- `ruff-first` run ruff before every commit → [rel:pytest-quiet]\n", encoding="utf-8")
    repo = git.Repo(root.path)
    repo.index.add(["MEMORY.md"])
    repo.index.commit("seed memory")
    return root


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def run_cli(*args: str, input: bytes | str | None = None, cwd: Path | None = None,
            env: dict | None = None, timeout: float = 120) -> CliResult:
    """Run ``python -m rmtui`` in a new process, as an agent would (forked from a process that has
    imported the CLI already: tests/cli_fork.py)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    data = input.encode() if isinstance(input, str) else input
    forked = cli_fork.run(list(args), data, str(cwd) if cwd is not None else None, full_env, timeout)
    if forked is not None:
        code, out, err = forked
        return CliResult(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
    proc = subprocess.run([sys.executable, "-m", "rmtui", *args], input=data, capture_output=True,
                          cwd=cwd, env=full_env, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def git_daemon(tmp_path) -> Iterator[GitDaemon]:
    """A real ``git daemon`` on loopback serving the bare ``served/upstream.git`` (the one bench/team.py uses)."""
    d = serve_upstream(tmp_path / "served")
    yield d
    d.stop()
