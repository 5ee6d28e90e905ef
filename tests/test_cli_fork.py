"""The tests' forked CLI calls (tests/cli_fork.py) give what a new ``python -m rmtui`` gives:
the same stdout, stderr and exit status, the caller's stdin, directory and environment, the
status of a process killed by SIGKILL, and a timeout that ends the call."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests import cli_fork


def fresh(*args: str, data: bytes | None = None, cwd=None, env=None) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "rmtui", *args], input=data, capture_output=True, cwd=cwd,
                       env={**os.environ, **(env or {})}, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def forked(*args: str, data: bytes | None = None, cwd=None, env=None, timeout: float = 120) -> tuple[int, str, str]:
    got = cli_fork.run(list(args), data, str(cwd) if cwd else None, {**os.environ, **(env or {})}, timeout)
    assert got is not None, "the fork server did not take the call"
    code, out, err = got
    return code, out.decode(), err.decode()


@pytest.mark.parametrize("args", [
    ("--headless", "status", "--json"),
    ("--headless", "evidence", "show", "nosuch"),
    ("--headless", "stauts"),
    ("--headless", "validate"),
])
def test_a_forked_call_prints_and_exits_as_a_new_process(root, args):
    assert forked(*args, "--root", str(root.path)) == fresh(*args, "--root", str(root.path))


def test_stdin_cwd_and_environment_are_the_callers(root, tmp_path):
    text = "a fact that came on stdin " * 2000  # larger than a pipe's buffer
    code, out, err = forked("--headless", "submit", "--json", "--session", "s1", "-", data=text.encode(),
                            cwd=root.path)
    assert code == 0, err
    code, out, err = forked("--headless", "evidence", "list", "--json", cwd=root.path)
    assert code == 0 and "a fact that came on stdin" in out
    # the root named by the environment, from a directory outside it
    assert forked("--headless", "status", "--json", cwd=tmp_path, env={"RIGHTMEMORY_ROOT": str(root.path)}) == \
        fresh("--headless", "status", "--json", cwd=tmp_path, env={"RIGHTMEMORY_ROOT": str(root.path)})


def test_a_call_killed_at_a_crash_point_reports_sigkill_as_subprocess_does(root):
    args = ("--headless", "maintain", "begin", "--root", str(root.path))
    code, _, _ = forked(*args, env={"RMTUI_CRASHPOINT": "after-running"})
    assert code == -9


def test_a_call_past_its_timeout_is_killed(root, tmp_path):
    """The call waits at its crash point (two minutes); the caller gives up after its timeout."""
    ready = tmp_path / "ready"
    with pytest.raises(subprocess.TimeoutExpired):
        forked("--headless", "maintain", "begin", "--root", str(root.path),
               env={"RMTUI_CRASHPOINT": "after-running", "RMTUI_CRASHPOINT_READY": str(ready)}, timeout=3)
    assert ready.read_text() == "after-running"  # it was waiting there
    pid = cli_fork._SERVER.last_pid if cli_fork._SERVER else None
    assert pid is not None
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not os.path.exists(f"/proc/{pid}"), "the timed-out call still runs"


def test_a_call_that_sets_how_python_starts_is_not_forked(root):
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    assert cli_fork.run(["--headless", "status"], None, None, env, 60) is None
