"""Sync and the Git-backed queue over the network transport: a real ``git daemon`` on
loopback serving the upstream (``git://127.0.0.1:<port>/``), two machines cloned from it.
The daemon stopping mid-way is ``offline``, and the next push after it is back publishes
everything once."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest
from test_sync import enable, git, ident, land, memory_with

from rmtui.engine import sync
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.roots import init_root
from rmtui.engine.sync.queue_git import GitQueue


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """``git daemon`` exporting ``base`` read-write on a loopback port."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}/upstream.git"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack", f"--base-path={self.base}",
             "--listen=127.0.0.1", f"--port={self.port}", str(self.base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if subprocess.run(["git", "ls-remote", self.url], capture_output=True).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("git daemon did not come up")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture
def daemon(tmp_path):
    base = tmp_path / "served"
    base.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(base / "upstream.git")], check=True)
    d = Daemon(base)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def pair(tmp_path, daemon):
    a = init_root(tmp_path / "a")
    ident(a.path)
    git(a.path, "remote", "add", "origin", daemon.url)
    git(a.path, "push", "-q", "-u", "origin", "main")
    enable(a)
    subprocess.run(["git", "clone", "-q", daemon.url, str(tmp_path / "b")], check=True)
    b = init_root(tmp_path / "b", force=True)
    ident(b.path)
    enable(b)
    return a, b


def test_memory_and_the_queue_travel_over_git_daemon(pair, daemon):
    a, b = pair
    land(a, "MEMORY.md", memory_with(("staging-port", "the staging DB listens on 5433")))
    assert sync.push(a).status == "pushed"
    res = sync.pull(b)
    assert res.status == "synced", res
    assert "staging-port" in (b.path / "MEMORY.md").read_text()
    with EvidenceQueue(a) as q:
        uid = q.submit("s1", b"The deploy key rotates monthly.\n")["uid"]
    assert GitQueue(a).publish_pending() == [uid]
    GitQueue(b).refresh()
    with EvidenceQueue(b) as q:
        assert q.get(uid).state == "queued" and q.get(uid).origin == "upstream"


def test_daemon_gone_mid_way_is_offline_and_the_next_push_publishes_once(pair, daemon):
    a, b = pair
    daemon.stop()
    land(a, "MEMORY.md", memory_with(("one", "first fact")))
    land(a, "MEMORY.md", memory_with(("one", "first fact"), ("two", "second fact")))
    res = sync.push(a)
    assert res.status == "offline", res
    assert sync.pull(b).status == "offline"
    daemon.start()
    assert sync.push(a).status == "pushed"
    assert sync.pull(b).status == "synced"
    assert "second fact" in (b.path / "MEMORY.md").read_text()
    subjects = git(b.path, "log", "--format=%s").splitlines()
    assert subjects.count("maintain: edit") == 2  # both landings arrived, each once
