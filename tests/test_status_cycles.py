"""``status`` lists the cycles (update, prune, insight, and sync when on): state, what makes
each due next, and the last outcome, read from what the cycles record; and a daemon stopped
by SIGTERM in the middle of a cycle leaves nothing running."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cycles_kit import MEMORY
from fake_provider import FakeProvider
from test_cycles_host import commit_files, configure, rm
from test_cycles_insight import append_node, insight_script

from rmtui.engine.cycles import common
from rmtui.engine.writes import triggers, worktrees
from rmtui.engine.writes.operations import OperationStore


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def cycles(root) -> dict[str, dict]:
    return {c["name"]: c for c in rm(root, "status")["cycles"]}


def test_status_lists_the_cycles_and_their_due_counts(root, tmp_path):
    configure(root, **{"pruner.generation_commits": 5, "insight.watch.trigger_points": 3})
    c = cycles(root)
    assert list(c) == ["update", "prune", "insight"]
    assert all(x["state"] == "idle" and x["last_outcome"] is None for x in c.values())
    assert c["prune"]["next_due"]["memory_commits_since_prune"] == 1  # the init commit
    assert c["prune"]["next_due"]["generation_commits"] == 5 and c["prune"]["next_due"]["remaining"] == 4
    assert c["insight"]["next_due"]["points"] == 0 and c["insight"]["next_due"]["threshold"] == 3
    assert c["update"]["next_due"]["queued"] == 0 and c["update"]["next_due"]["pending_batches"] == 0

    commit_files(root, "seed: memory", {"MEMORY.md": MEMORY})
    append_node(root, "a")  # landed Updates: Memory commits and Insight points
    append_node(root, "b")
    ev = tmp_path / "ev.md"
    ev.write_text("Tests run with pytest -q.\n", encoding="utf-8")
    rm(root, "submit", "--session", "s1", str(ev))
    c = cycles(root)
    assert c["prune"]["next_due"]["memory_commits_since_prune"] == 4 and c["prune"]["due"] is False
    assert c["insight"]["next_due"]["points"] == 2 and c["insight"]["due"] is False
    assert c["update"]["next_due"]["queued"] == 1
    assert c["update"]["last_outcome"]["state"] == "committed"  # the last landed Update's receipt

    append_node(root, "c")
    c = cycles(root)
    assert c["prune"]["due"] is True and c["prune"]["next_due"]["remaining"] == 0
    assert c["insight"]["due"] is True and "3 of 3 points (due)" in c["insight"]["detail"]

    # a host task holds the Pruner: running, and the task is named
    task = rm(root, "assistant", "begin", "--role", "pruner")
    c = cycles(root)
    assert c["prune"]["state"] == "running" and c["prune"]["host_task"] == task["task_id"]
    out = rm(root, "assistant", "complete", "--task", task["task_id"])
    c = cycles(root)
    assert c["prune"]["state"] == "idle" and c["prune"]["last_outcome"]["state"] == "checkpoint"
    assert c["prune"]["last_outcome"]["landed_commit"] == out["landed_commit"]
    assert c["prune"]["next_due"]["memory_commits_since_prune"] == 0


def test_failures_show_as_backing_off_then_stopped_in_json_and_text(root):
    common.record_outcome(root, "insight", {"state": "failed", "message": "model down"}, failed=True)
    c = cycles(root)
    assert c["insight"]["state"] == "backing-off" and c["insight"]["failures"] == 1
    assert c["insight"]["last_outcome"]["state"] == "failed" and "backing off" in c["insight"]["backoff"]
    for _ in range(common.MAX_FAILURES):
        common.record_outcome(root, "prune", {"state": "failed", "message": "model down"}, failed=True)
    assert cycles(root)["prune"]["state"] == "stopped"
    text = subprocess.run([str(Path(sys.executable).parent / "rmtui"), "--headless", "status", "--root",
                           str(root.path)], capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.split("cycles:\n", 1)[1].splitlines()}
    assert set(lines) == {"update", "prune", "insight"}
    assert "stopped" in lines["prune"] and "last run: failed" in lines["prune"] and "model down" in lines["prune"]
    assert "backing-off" in lines["insight"] and "0 of 150 points" in lines["insight"]
    assert "0 queued, no batch ready" in lines["update"]


def test_sync_is_listed_when_on(root):
    configure(root, **{"sync.enabled": True})
    c = cycles(root)
    assert list(c) == ["update", "prune", "insight", "sync"]
    assert c["sync"]["state"] == "idle" and c["sync"]["next_due"]["status"] == "unconfigured"


def test_daemon_sigterm_mid_cycle_leaves_nothing_running(provider, root):
    configure(root, **{"update.model.model_id": "openai:fake-model", "update.model.api_base": provider.base("openai"),
                       "update.model.kwargs": {"max_retries": 0}, "insight.watch.trigger_points": 1})
    commit_files(root, "seed: memory", {"MEMORY.md": MEMORY})
    append_node(root, "x")  # Insight is due
    script = insight_script()
    script[0].delay = 2.0  # the model is slow to answer its first turn: the signal arrives mid-cycle
    provider.push(*script)
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "daemon", "--poll-seconds", "0.2",
                             "--root", str(root.path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        provider.wait_for(1, timeout=60)  # the Insight run is in flight
        with OperationStore(root) as store:
            assert [o.kind for o in store.list() if not o.final] == ["insight"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert b"daemon stopped" in err
    with OperationStore(root) as store:
        assert [o.id for o in store.list(unfinished=True)] == []
    assert worktrees.existing(root) == []
    st = triggers.load(root, "insight")
    assert st["active_operation_id"] is None and st["points"] == 0  # the run finished and settled its claim
    with common.cycle_lock(root, "insight"):  # free again
        pass
    c = cycles(root)
    assert c["insight"]["state"] == "idle" and c["insight"]["last_outcome"]["state"] == "artifact"
    assert time.time() - c["insight"]["last_outcome"]["at"] < 120
