"""A sync killed halfway never ends a machine's sync: a staging worktree whose ``git worktree
add`` was SIGKILLed (its admin entry's HEAD names no commit, so every later fetch fails with
"did not send all necessary objects") is pruned by the next sync and by ``recover``, with
its admin entry and the Git locks in it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_sync import git, land, machines, memory_with, upstream  # noqa: F401  (fixtures)

from rmtui.engine import sync

DIGEST = "0123456789abcdef"


def killed_worktree_add(root_path: Path, name: str = f"sync-{DIGEST}") -> Path:
    """SIGKILL a real ``git worktree add`` once its admin entry has the null HEAD it starts with."""
    wt = root_path / ".runtime" / "worktrees" / name
    admin = root_path / ".git" / "worktrees" / name
    for _ in range(50):
        wt.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(["git", "worktree", "add", "--quiet", "--detach", str(wt), "HEAD"], cwd=root_path,
                                start_new_session=True, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if (admin / "HEAD").read_text().strip() == "0" * 40:
                    break
            except OSError:
                pass
            time.sleep(0.0002)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        try:
            if (admin / "HEAD").read_text().strip() == "0" * 40:
                return wt
        except OSError:
            pass
        subprocess.run(["git", "worktree", "remove", "--force", "--force", str(wt)], cwd=root_path,
                       capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=root_path, capture_output=True)
    raise AssertionError("never caught git worktree add before its checkout")


def test_a_dead_staging_worktree_is_pruned_by_the_next_pull(machines):  # noqa: F811
    a, b = machines
    land(a, "MEMORY.md", memory_with(("after-kill", "pulled after a killed pull")))
    assert sync.push(a).status == "pushed"
    wt = killed_worktree_add(b.path)
    fetch = subprocess.run(["git", "fetch", "origin"], cwd=b.path, capture_output=True, text=True)
    assert fetch.returncode != 0 and "did not send all necessary objects" in fetch.stderr  # the wedge
    res = sync.pull(b)
    assert res.status == "synced" and "after-kill" in (b.path / "MEMORY.md").read_text(), res
    assert not wt.exists() and not (b.path / ".git" / "worktrees" / wt.name).exists()
    fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=b.path, capture_output=True, text=True)
    assert fsck.returncode == 0 and "worktrees" not in fsck.stdout + fsck.stderr, fsck


def test_recover_prunes_a_dead_staging_worktree_and_its_locks(machines):  # noqa: F811
    _, b = machines
    wt = killed_worktree_add(b.path)
    admin = b.path / ".git" / "worktrees" / wt.name
    (admin / "HEAD.lock").write_text("")
    (admin / "index.lock").write_text("")
    r = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "recover", "--json", "--root", str(b.path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert str(wt) in json.loads(r.stdout)["cleaned"]
    assert not wt.exists() and not admin.exists()
    assert git(b.path, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_live_host_task_worktree_and_foreign_worktrees_are_kept(machines):  # noqa: F811
    """Only our dead sync worktrees go: a finished sync-repair task worktree (an open host
    task) and a worktree on a branch (the original tool's repair) stay as they are."""
    _, b = machines
    task = b.path / ".runtime" / "worktrees" / "sync-repair-20260101T000000Z-abcdef12"
    theirs = b.path / ".runtime" / "worktrees" / f"sync-{'f' * 16}"
    git(b.path, "worktree", "add", "--quiet", "--detach", str(task), "HEAD")
    git(b.path, "worktree", "add", "--quiet", "-b", f"rightmemory-sync-{'f' * 16}", str(theirs), "HEAD")
    dead = killed_worktree_add(b.path)
    assert sync.pull(b).status == "synced"
    assert task.is_dir() and theirs.is_dir() and not dead.exists()
