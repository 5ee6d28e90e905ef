"""The one-call sync overview a front shows (rmtui.engine.sync.overview), with real Git: a
bare upstream over file:// and clones of it; no network is used by the overview itself."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime, timedelta

from test_sync import land, memory_with
from test_sync_queue import choose_all, machine, submit

from rmtui.engine import sync
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import init_root
from rmtui.engine.sync.overview import batch_holders, pending_repair, sync_overview
from rmtui.engine.sync.queue_git import GitQueue, device_id, stored_device_id
from rmtui.engine.writes import worktrees


def test_disabled_and_unconfigured_say_so_and_read_nothing_else(tmp_path):
    root = init_root(tmp_path / "solo")
    ov = sync_overview(root)
    assert (ov.enabled, ov.status, ov.active) == (False, "disabled", False)
    assert "sync.enabled" not in ov.message and "[sync] enabled = true" in ov.message
    assert ov.lease is None and ov.repair is None and batch_holders(root) == {}
    set_config_value(root.path, "sync.enabled", True)
    ov = sync_overview(root)
    assert (ov.status, ov.active) == ("unconfigured", False)
    assert stored_device_id(root) is None  # reading never makes this machine an identity


def test_ahead_behind_times_and_the_lease_of_another_machine(tmp_path):
    upstream = tmp_path / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(upstream)], check=True)
    a, b = machine(tmp_path, upstream, "a", first=True), machine(tmp_path, upstream, "b")
    ov = sync_overview(b)
    assert ov.status == "unknown" and ov.upstream == "origin/main" and ov.last_pull_at is None
    for i in range(2):
        submit(a, f"fact {i}\n")
    assert sync.push(a).status in ("pushed", "synced")  # the candidates reach the shared queue
    qb = GitQueue(b)
    qb.refresh()
    lease = qb.claim(choose_all(b))
    assert lease is not None
    land(b, "MEMORY.md", memory_with(("b-node", "landed on b")))
    assert sync.pull(a).status == "synced"  # a sees b's lease
    ov = sync_overview(a)
    assert ov.status == "synced" and ov.last_pull_at
    assert ov.lease is not None and not ov.lease.ours and ov.lease.holder == device_id(b)
    assert not ov.lease.expired and sorted(ov.lease.candidate_uids) == sorted(lease.candidate_uids)
    later = datetime.now(UTC) + timedelta(seconds=b.config().get("sync.lease_seconds") + 60)
    assert sync_overview(a, now=later).lease.expired
    holders = batch_holders(a)
    assert set(holders) == set(lease.candidate_uids) and all(h.holder == device_id(b) for h in holders.values())
    assert all(h.ours for h in batch_holders(b).values())
    ov_b = sync_overview(b)
    assert (ov_b.ahead, ov_b.behind) == (1, 0)
    assert sync.push(b).status == "pushed"
    assert sync_overview(b).last_push_at
    subprocess.run(["git", "fetch", "-q", "origin"], cwd=a.path, check=True)
    assert (sync_overview(a).ahead, sync_overview(a).behind) == (0, 1)


def test_offline_and_a_repair_worktree_left_behind(tmp_path):
    upstream = tmp_path / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(upstream)], check=True)
    a = machine(tmp_path, upstream, "a", first=True)
    shutil.move(str(upstream), str(tmp_path / "gone.git"))
    assert sync.pull(a).status == "offline"
    ov = sync_overview(a)
    assert ov.status == "offline" and ov.last_failure_status == "offline" and ov.last_failure_at
    left = worktrees.worktrees_dir(a) / "sync-0123456789abcdef"
    left.mkdir(parents=True)
    repair = pending_repair(a)
    assert repair is not None and repair.kind == "worktree" and "sync-0123456789abcdef" in repair.detail
    assert sync_overview(a).repair == repair
