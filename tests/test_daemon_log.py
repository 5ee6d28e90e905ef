"""A daemon waiting on the same condition says so once, and again only when it changes: with
no model it used to log the same line every five seconds with nothing queued."""

from __future__ import annotations

import json
import subprocess
import sys


def test_the_daemon_says_a_standing_condition_once(root):
    proc = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "daemon", "--root", str(root.path),
                           "--max-passes", "4", "--poll-seconds", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "no model is configured" in line]
    assert len(lines) == 1, proc.stderr
    assert json.loads(lines[0].split("rmtui daemon: ", 1)[1])["pass"] == 1


def test_the_daemon_says_it_again_when_the_condition_changes(root):
    from rmtui.engine.roles.update_driver import run_daemon

    passes = []

    def each_pass(r):  # called at the start of every pass; on the third the setting changes
        passes.append(1)
        if len(passes) == 3:
            (r.path / "rightmemory.toml").write_text('[update.agent_cli]\nprovider = "nosuch-cli"\n')
        return None

    logs: list[str] = []
    out = run_daemon(root, poll_seconds=0, max_passes=5, log=logs.append, coordinator_factory=each_pass)
    assert out["passes"] == 5
    said = [json.loads(line) for line in logs if line.startswith("{")]
    assert [s["pass"] for s in said] == [1, 3], logs
    assert said[0]["error"] != said[1]["error"]
