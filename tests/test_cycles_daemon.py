"""The daemon runs the Pruner due check and the Insight watcher after each driver pass, and a
failing cycle backs off instead of calling the model on every pass."""

from __future__ import annotations

import subprocess
import sys

import git
import pytest
from cycles_kit import configure, seed
from fake_provider import FakeProvider, Turn
from test_cycles_insight import append_node, insight_script

from rmtui.engine.cycles import common
from rmtui.engine.cycles.pruner import prune_cycle


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def test_daemon_command_runs_prune_and_insight(provider, root):
    configure(root, "openai", provider, **{"pruner.generation_commits": 1, "insight.watch.trigger_points": 1})
    seed(root)
    append_node(root, "x")  # a Memory commit (prune due) and one Insight point
    provider.push(Turn(text="nothing expired"), *insight_script())
    proc = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "daemon", "--max-passes", "1",
                           "--poll-seconds", "0", "--root", str(root.path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    subjects = [c.message.splitlines()[0] for c in git.Repo(root.path).iter_commits(max_count=2)]
    assert subjects[1] == "prune: checkpoint" and subjects[0] == "insight: builds keep changing tools"
    assert '"cycle": "prune_cycle"' in proc.stderr and '"cycle": "insight_cycle"' in proc.stderr


def test_a_failing_cycle_backs_off_and_stops(root, monkeypatch):
    from rmtui.engine.memory.config import set_config_value

    set_config_value(root.path, "pruner.generation_commits", 1)  # due at once; no model configured
    out = prune_cycle(root)
    assert out["state"] == "failed" and "no model is configured" in out["error"]
    assert prune_cycle(root)["backoff"].startswith("backing off after 1 failure")
    for _ in range(common.MAX_FAILURES):
        common.record_outcome(root, "prune", {"state": "failed"}, failed=True)
    assert "stopped after" in prune_cycle(root)["backoff"]
    common.record_outcome(root, "prune", {"state": "checkpoint"}, failed=False)
    assert common.backing_off(root, "prune") is None
