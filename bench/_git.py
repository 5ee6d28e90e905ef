"""Git plumbing the benches share: a committer identity, committing a built root, and a real
``git daemon`` on loopback serving a bare upstream read-write.

The sync tests use the same daemon (the tests' conftest imports this module; a bench cannot
import from ``tests/``). :meth:`GitDaemon.stop` then :meth:`GitDaemon.start` is an outage:
the upstream comes back on the same port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

UPSTREAM = "upstream.git"
#: A bench's commits name the bench, whatever the user's Git configuration says.
IDENTITY = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
            "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def commit_all(dest: Path, message: str) -> None:
    """Commit everything in the work tree ``dest`` (a root a bench just wrote) as the bench."""
    subprocess.run(["git", "-C", str(dest), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(dest), "commit", "-qm", message], check=True, env={**os.environ, **IDENTITY})


class GitDaemon:
    """``git daemon`` exporting every repository under ``base`` on a free loopback port."""

    def __init__(self, base: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = base
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}/{UPSTREAM}"

    def start(self, timeout: float = 20) -> None:
        """Start serving and return once ``git ls-remote`` answers."""
        self.proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack", f"--base-path={self.base}",
             "--listen=127.0.0.1", f"--port={self.port}", str(self.base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if subprocess.run(["git", "ls-remote", self.url], capture_output=True).returncode == 0:
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"git daemon did not answer on {self.url} within {timeout:g} s")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
            self.proc = None


def serve_upstream(base: Path) -> GitDaemon:
    """Create the bare ``base/upstream.git`` (branch ``main``) and serve it; the caller stops it."""
    base.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(base / UPSTREAM)], check=True,
                   capture_output=True)
    daemon = GitDaemon(base)
    daemon.start()
    return daemon
