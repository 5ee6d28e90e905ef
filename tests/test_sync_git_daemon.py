"""Sync and the Git-backed queue over the network transport: a real ``git daemon`` on
loopback serving the upstream (``git://127.0.0.1:<port>/``), two machines cloned from it.
The daemon stopping mid-way is ``offline``, and the next push after it is back publishes
everything once."""

from __future__ import annotations

import subprocess

import pytest
from test_sync import enable, git, ident, land, memory_with

from rmtui.engine import sync
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.roots import init_root
from rmtui.engine.sync.queue_git import GitQueue


@pytest.fixture
def pair(tmp_path, git_daemon):
    a = init_root(tmp_path / "a")
    ident(a.path)
    git(a.path, "remote", "add", "origin", git_daemon.url)
    git(a.path, "push", "-q", "-u", "origin", "main")
    enable(a)
    subprocess.run(["git", "clone", "-q", git_daemon.url, str(tmp_path / "b")], check=True)
    b = init_root(tmp_path / "b", force=True)
    ident(b.path)
    enable(b)
    return a, b


def test_memory_and_the_queue_travel_over_git_daemon(pair, git_daemon):
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


def test_daemon_gone_mid_way_is_offline_and_the_next_push_publishes_once(pair, git_daemon):
    a, b = pair
    git_daemon.stop()
    land(a, "MEMORY.md", memory_with(("one", "first fact")))
    land(a, "MEMORY.md", memory_with(("one", "first fact"), ("two", "second fact")))
    res = sync.push(a)
    assert res.status == "offline", res
    assert sync.pull(b).status == "offline"
    git_daemon.start()
    assert sync.push(a).status == "pushed"
    assert sync.pull(b).status == "synced"
    assert "second fact" in (b.path / "MEMORY.md").read_text()
    subjects = git(b.path, "log", "--format=%s").splitlines()
    assert subjects.count("maintain: edit") == 2  # both landings arrived, each once
