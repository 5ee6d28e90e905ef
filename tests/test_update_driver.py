"""The Update batch driver against a scripted local provider, over both SDKs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import git
import pytest
from compat_checker import check_root
from fake_provider import FakeProvider, Turn, call

from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.roles.update_driver import BatchStore, UpdateDriver
from rmtui.engine.writes import worktrees

APIS = ["anthropic", "openai"]
NEW_NODE = "- `ruff-line-length` The project keeps ruff's line length at 120 → []\n"


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def configure(root, api, provider, **extra):
    set_config_value(root.path, "update.model.model_id", f"{api}:fake-model")
    set_config_value(root.path, "update.model.api_base", provider.base(api))
    set_config_value(root.path, "update.model.kwargs", {"max_retries": 0})
    for key, value in extra.items():
        set_config_value(root.path, key, value)
    repo = git.Repo(root.path)
    repo.index.add(["rightmemory.toml"])
    repo.index.commit("config: update model")


def submit(root, text, session="s1"):
    q = EvidenceQueue(root)
    try:
        return q.submit(session, text.encode())["uid"]
    finally:
        q.close()


def evidence_state(root, uid):
    q = EvidenceQueue(root)
    try:
        return q.get(uid).state
    finally:
        q.close()


def landing_script():
    return [
        call("outline"),
        call("read", path="MEMORY.md"),
        call("edit", path="MEMORY.md", old_text="# Memory\n", new_text="# Memory\n\n" + NEW_NODE),
        call("validate_memory"),
        call("git_add", paths=["MEMORY.md"]),
        call("git_commit", message="update: record ruff line length"),
        Turn(text="Changed: ruff-line-length (new). Skipped: none."),
    ]


@pytest.mark.parametrize("api", APIS)
def test_full_update_reads_edits_commits_and_lands(api, provider, root):
    configure(root, api, provider)
    uid = submit(root, "We agreed in review: ruff line length stays 120 for this repo.")
    provider.push(*landing_script())
    out = UpdateDriver(root).run_once(force=True)
    assert out.state == "committed", out
    receipt = out.receipt
    # the landed commit is on the active branch, carries the trailer, and the file changed
    repo = git.Repo(root.path)
    landed = repo.commit(receipt.landed_commit)
    assert landed.message.startswith("update: record ruff line length")
    assert f"RightMemory-Operation: {out.batch_id}" in landed.message  # the batch id, as the original
    assert NEW_NODE in (root.path / "MEMORY.md").read_text()
    assert receipt.changed_paths == ["MEMORY.md"] and receipt.candidate_uids == [uid]
    assert receipt.summary.startswith("Changed: ruff-line-length")
    # the update record landed in the same commit, the evidence is consumed, the root is clean
    rel = f"update_records/{out.batch_id}.json"
    assert rel in landed.stats.files and "MEMORY.md" in landed.stats.files
    record = json.loads((root.path / rel).read_text())
    assert set(record) == {"schema_version", "operation_id", "candidates"}
    assert record["operation_id"] == out.batch_id and [c["uid"] for c in record["candidates"]] == [uid]
    assert check_root(root.path) == []
    assert evidence_state(root, uid) == "consumed"
    assert not repo.is_dirty(untracked_files=True)
    # the model saw the candidate as evidence inside the prompt, and the update instructions
    first = provider.seen[0]
    assert "ruff line length stays 120" in first.user_texts()[0] and uid in first.user_texts()[0]
    assert "Candidates are **evidence, not wording" in first.system
    assert "Memory schema reference" in first.system
    batches = BatchStore(root)
    assert batches.get(out.batch_id).state == "committed"
    batches.close()


@pytest.mark.parametrize("api", APIS)
def test_forbidden_write_is_refused_by_the_supervisor(api, provider, root):
    configure(root, api, provider, **{"update.max_attempts": 2, "update.retry_backoff_seconds": 60})
    uid = submit(root, "The user now pursues a faster CI.")
    pursuits_before = (root.path / "PURSUITS.md").read_text()
    head_before = git.Repo(root.path).head.commit.hexsha
    provider.push(
        call("read", path="PURSUITS.md"),
        call("edit", path="PURSUITS.md", old_text="## Focus\n", new_text="## Fast CI {#fast-ci}\n\n## Focus\n"),
        call("git_add", paths=["PURSUITS.md"]),
        call("git_commit", message="update: add a pursuit"),
        Turn(text="Added pursuit fast-ci."),
    )
    out = UpdateDriver(root).run_once(force=True)
    assert out.state == "failed" and out.batch_state == "waiting_retry"
    assert out.failure.error["error"] == "refused" and "reference-repair-only" in out.failure.message
    # nothing landed; the evidence is back in the queue, held for the batch's retry
    assert git.Repo(root.path).head.commit.hexsha == head_before
    assert (root.path / "PURSUITS.md").read_text() == pursuits_before
    assert evidence_state(root, uid) == "queued"
    # backoff: a normal pass now does not retry it (and does not re-batch its evidence)
    assert UpdateDriver(root).run_once(force=True).state == "idle"
    # once the backoff has passed the same batch runs again; a second refusal holds it
    provider.push(
        call("read", path="PURSUITS.md"),
        call("edit", path="PURSUITS.md", old_text="## Focus\n", new_text="## Fast CI {#fast-ci}\n\n## Focus\n"),
        call("git_add", paths=["PURSUITS.md"]),
        call("git_commit", message="update: add a pursuit"),
        Turn(text="Added pursuit fast-ci."),
    )
    again = UpdateDriver(root).run_once(now=time.time() + 3600)
    assert again.batch_id == out.batch_id and again.attempts == 2
    assert again.batch_state == "needs_manual_recovery"
    assert evidence_state(root, uid) == "queued"
    # `update retry` runs it again; this time the model makes a Memory edit that lands
    provider.push(*landing_script())
    final = UpdateDriver(root).retry(out.batch_id)
    assert final.state == "committed" and final.batch_id == out.batch_id
    assert evidence_state(root, uid) == "consumed"


@pytest.mark.parametrize("api", APIS)
def test_update_that_chooses_no_change(api, provider, root):
    configure(root, api, provider)
    uid = submit(root, "ran the tests again, all green")
    head_before = git.Repo(root.path).head.commit.hexsha
    provider.push(call("outline"), Turn(text="Skipped the only candidate: routine progress."))
    out = UpdateDriver(root).run_once(force=True)
    assert out.state == "no_change", out
    assert out.receipt.changed_paths == []
    assert (root.path / "MEMORY.md").read_text() == "# Memory\n\n"
    repo = git.Repo(root.path)
    # a record-only commit lands, as the original's no-change batches do
    (landed,) = list(repo.iter_commits(f"{head_before}..HEAD"))
    assert landed.hexsha == out.receipt.landed_commit
    assert list(landed.stats.files) == [f"update_records/{out.batch_id}.json"]
    assert check_root(root.path) == []
    assert evidence_state(root, uid) == "consumed"


def test_uncommitted_edit_gets_one_reminder(provider, root):
    configure(root, "openai", provider)
    submit(root, "ruff line length is 120")
    script = landing_script()
    provider.push(*script[:4], Turn(text="done"), *script[4:])
    out = UpdateDriver(root).run_once(force=True)
    assert out.state == "committed", out
    assert "uncommitted changes" in provider.seen[5].user_texts()[-1]


def test_readiness_rules_and_idle(provider, root):
    configure(root, "openai", provider, **{"update.async.target_batch_candidates": 2,
                                           "update.async.debounce_seconds": 3600})
    submit(root, "one finding")
    assert UpdateDriver(root).run_once().state == "idle"  # 1 < target, debounce not passed
    submit(root, "another finding", session="s2")
    # two sessions of one candidate each: neither is ready before its debounce (the original's rule)
    assert UpdateDriver(root).run_once().state == "idle"
    provider.push(Turn(text="nothing durable"))
    out = UpdateDriver(root).run_once(now=time.time() + 3601)
    assert out.state == "no_change" and len(out.receipt.candidate_uids) == 2


def test_no_model_configured_is_unavailable(root, cli):
    submit(root, "x")
    r = cli("--headless", "update", "run-now", "--root", str(root.path))
    assert r.code == 4 and "no model is configured for role 'update'" in r.stderr


def test_cli_run_now_status_and_retry(provider, root, cli):
    configure(root, "anthropic", provider, **{"update.max_attempts": 1})
    submit(root, "ruff line length is 120")
    provider.push(*[Turn(text="x", tool_calls=[("read", {"path": "/etc/passwd"})]) for _ in range(5)])
    r = cli("--headless", "update", "run-now", "--json", "--root", str(root.path))
    assert r.code == 1, r.stderr
    out = r.json()
    assert out["batch_state"] == "needs_manual_recovery"
    st = cli("--headless", "update", "status", "--json", "--root", str(root.path)).json()
    assert st["batches"][0]["state"] == "needs_manual_recovery" and st["evidence"]["queued"] == 1
    provider.script.clear()
    provider.push(*landing_script())
    r = cli("--headless", "update", "retry", "--root", str(root.path))
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("committed update-batch-")
    assert NEW_NODE in (root.path / "MEMORY.md").read_text()


def test_crash_during_model_turn_loses_no_evidence_and_retries(provider, root, cli):
    """kill -9 the driver while the model is thinking; the restart retries the batch."""
    configure(root, "openai", provider)
    uid = submit(root, "ruff line length is 120")
    provider.push(call("read", path="MEMORY.md"), Turn(text="never seen", delay=30))
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "update", "run-now", "--root",
                             str(root.path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        provider.wait_for(2, timeout=60)  # the second model request is in flight
        assert evidence_state(root, uid) == "claimed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert evidence_state(root, uid) == "claimed"  # still held; nothing was lost
    batches = BatchStore(root)
    assert [b.state for b in batches.list()] == ["running"]
    batches.close()
    provider.script.clear()
    provider.push(*landing_script())
    r = cli("--headless", "update", "run-now", "--json", "--root", str(root.path))
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["state"] == "committed" and out["attempts"] == 2
    assert evidence_state(root, uid) == "consumed"
    assert NEW_NODE in (root.path / "MEMORY.md").read_text()
    # the abandoned operation's worktree is gone
    assert worktrees.existing(root) == []


def test_daemon_runs_batches_until_stopped(provider, root):
    configure(root, "openai", provider, **{"update.async.target_batch_candidates": 1})
    submit(root, "ruff line length is 120")
    provider.push(*landing_script())
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "daemon", "--poll-seconds", "0.2",
                             "--root", str(root.path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and NEW_NODE not in (root.path / "MEMORY.md").read_text():
            time.sleep(0.2)
        assert NEW_NODE in (root.path / "MEMORY.md").read_text()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert b"daemon stopped" in err and b"committed" in err


def test_daemon_runs_registered_cycles_even_without_a_model(root, monkeypatch):
    from rmtui.engine.roles import update_driver

    seen = []

    def pruner_cycle(r):
        seen.append(r.path)
        return {"state": "checkpoint"}

    monkeypatch.setattr(update_driver, "DAEMON_CYCLES", [pruner_cycle])
    logs: list[str] = []
    out = update_driver.run_daemon(root, poll_seconds=0, max_passes=2, log=logs.append)
    assert out == {"passes": 2, "outcomes": {"unavailable": 2}}
    assert seen == [root.path, root.path]
    assert any('"cycle": "pruner_cycle"' in line and "checkpoint" in line for line in logs)
