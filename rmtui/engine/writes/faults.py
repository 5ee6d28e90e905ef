"""Fault injection for the recovery tests (the kill matrix, docs/architecture.md "Operations
and receipts"): with ``RMTUI_CRASHPOINT`` naming a point, the process dies there as ``kill -9``
of its process group would. Without it every call here is a no-op check of one variable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def crashpoint(name: str) -> None:
    """Fault injection for recovery tests: die here, as a kill -9 would, when asked to."""
    if os.environ.get("RMTUI_CRASHPOINT") == name:
        die(name)


def crashpoint_in_git(name: str) -> bool:
    """Whether the caller should run its Git child for fault injection (see :func:`die_inside_git`)."""
    return os.environ.get("RMTUI_CRASHPOINT") == name


def die(name: str, child: subprocess.Popen | None = None) -> None:
    """Die with the whole process group (Git children included), as ``kill -9`` of a group does.

    With ``RMTUI_CRASHPOINT_READY`` naming a file, the point is written there and the process
    waits for the test to kill its group itself.
    """
    ready = os.environ.get("RMTUI_CRASHPOINT_READY")
    if ready:
        tmp = Path(ready + ".tmp")
        tmp.write_text(name)
        os.replace(tmp, ready)
        time.sleep(120)
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    if child is not None:
        child.kill()
    os.kill(os.getpid(), signal.SIGKILL)


def die_inside_git(name: str, cwd: Path, args: list[str], feed: bytes, *, env: dict[str, str],
                   answer: bytes | None = None, lock: Path | None = None) -> None:
    """Fault injection: start ``git args``, feed it, and die with it while it holds its locks
    (after it printed ``answer``, or once ``lock`` exists) — what killing a publisher's process
    group in the middle of a Git command leaves behind."""
    proc = subprocess.Popen(["git", *args], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(feed)
    proc.stdin.flush()
    if answer is not None:
        seen = b""
        while answer not in seen:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
    deadline = time.monotonic() + 10
    while lock is not None and not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    die(name, proc)
