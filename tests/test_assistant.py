"""The native assistant protocol, played as a host would: real CLI processes, real worktrees."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import git
import pytest
from compat_checker import check_root


def _git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _commit_edit(worktree: str, rel: str, text: str, message: str = "update: note") -> None:
    p = Path(worktree) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    _git(worktree, "add", rel)
    _git(worktree, "commit", "-q", "-m", message)


MEMORY_WITH_NODE = "# Memory\n\n## Tooling {#tooling}\n\n- `use-pytest` tests run with pytest -q → []\n"


@pytest.fixture
def host(root, cli, tmp_path):
    """A memory root configured so three submissions make a batch; helpers to call the CLI."""
    r = str(root.path)
    assert cli("--headless", "config", "set", "--root", r, "update.async.target_batch_candidates", "3").code == 0
    # sessions ready at once: the three submissions of two sessions make a batch (whole ready sessions)
    assert cli("--headless", "config", "set", "--root", r, "update.async.debounce_seconds", "0").code == 0

    def call(*args, expect=0, input=None):
        res = cli("--headless", *args, "--root", r, input=input)
        assert res.code == expect, (args, res.code, res.stdout, res.stderr)
        return res.json() if res.stdout.strip().startswith(("{", "[")) else res

    def submit3():
        for i, session in enumerate(["s1", "s1", "s2"]):
            f = tmp_path / f"ev{i}.md"
            f.write_text(f"Evidence {i}: the project uses pytest -q for tests.\n", encoding="utf-8")
            out = call("assistant", "submit", "--session", session, "--request", f"req-{i}", str(f))
            assert out["state"] == "saved"

    call.submit3 = submit3
    call.root = root
    return call


def _active_bytes(root) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in Path(root.path).glob("*.md")}


def test_full_host_lifecycle(host):
    root = host.root
    ctx = host("assistant", "context", "--session", "s1")
    assert ctx["memory_commit"] == git.Repo(root.path).head.commit.hexsha
    assert str(root.path / "MEMORY.md") in ctx["sources"]
    assert Path(ctx["instructions"]).is_file() and Path(ctx["pending_evidence_file"]).is_file()

    host.submit3()
    ctx = host("assistant", "context", "--session", "s1")
    assert ctx["pending_count"] == 2
    assert "Evidence 0" in Path(ctx["pending_evidence_file"]).read_text()

    task = host("assistant", "update", "begin")
    assert task["claimed"] is True
    assert task["batch_id"].startswith("update-batch-")
    assert len(json.loads(Path(task["candidates"]).read_text())) == 3
    assert "Update" in Path(task["instructions"]).read_text()
    again = host("assistant", "update", "begin")
    assert again["claimed"] is False and again["task_id"] == task["task_id"]

    _commit_edit(task["worktree"], "MEMORY.md", MEMORY_WITH_NODE, "update: record pytest convention")
    receipt = host(*task["complete"][2:-2])  # the exact argv the claim handed out (minus rmtui/--root)
    assert receipt["phase"] == "committed"
    assert receipt["changed_paths"] == ["MEMORY.md"]
    repo = git.Repo(root.path)
    landed = repo.commit(receipt["landed_commit"])
    assert f"RightMemory-Operation: {task['batch_id']}" in landed.message
    assert "use-pytest" in (root.path / "MEMORY.md").read_text()
    assert host("validate", "--json")["valid"] is True
    assert f"update_records/{task['batch_id']}.json" in landed.stats.files  # same commit as the change
    assert check_root(root.path) == []
    ev = host("evidence", "list", "--json")
    assert sorted(e["state"] for e in ev) == ["consumed"] * 3
    assert not Path(task["worktree"]).exists()
    # completion is idempotent
    assert host("assistant", "update", "complete", "--task", task["task_id"]) == receipt
    st = host("assistant", "update", "status", "--task", task["task_id"])
    assert st["receipt"]["landed_commit"] == receipt["landed_commit"]


def test_stale_base_keeps_worktree_for_correction(host, cli):
    root = host.root
    host.submit3()
    task = host("assistant", "update", "begin")
    _commit_edit(task["worktree"], "MEMORY.md", MEMORY_WITH_NODE)
    # memory moves underneath: a maintenance edit lands on MEMORY.md
    m = host("maintain", "begin", "--json")
    Path(m["worktree"], "MEMORY.md").write_text("# Memory\n\nManual note.\n", encoding="utf-8")
    host("maintain", "land", "--json")
    before = _active_bytes(root)
    res = cli("--headless", "assistant", "update", "complete", "--task", task["task_id"], "--root", str(root.path))
    assert res.code == 3, res.stderr
    assert "memory changed" in res.stderr
    assert Path(task["worktree"]).is_dir() and _active_bytes(root) == before
    # the child brings its edits onto the current memory, and completes again
    wt = task["worktree"]
    _git(wt, "reset", "-q", "--hard", git.Repo(root.path).head.commit.hexsha)
    _commit_edit(wt, "MEMORY.md",
                 "# Memory\n\nManual note.\n\n## Tooling {#tooling}\n\n- `use-pytest` pytest -q → []\n")
    receipt = host("assistant", "update", "complete", "--task", task["task_id"])
    assert receipt["phase"] == "committed"
    text = (root.path / "MEMORY.md").read_text()
    assert "Manual note." in text and "use-pytest" in text


def test_retry_fences_old_task(host, cli):
    host.submit3()
    old = host("assistant", "update", "begin")
    _commit_edit(old["worktree"], "MEMORY.md", MEMORY_WITH_NODE)
    new = host("assistant", "update", "begin", "--retry")
    assert new["claimed"] is True and new["task_id"] != old["task_id"]
    assert sorted(new["candidate_uids"]) == sorted(old["candidate_uids"])
    res = cli("--headless", "assistant", "update", "complete", "--task", old["task_id"], "--root", str(host.root.path))
    assert res.code == 3 and "fenced" in res.stderr
    assert "use-pytest" not in (host.root.path / "MEMORY.md").read_text()


def test_forbidden_path_is_refused(host, cli):
    root = host.root
    host.submit3()
    task = host("assistant", "update", "begin")
    _commit_edit(task["worktree"], "update_records/forged.json", "{}\n")
    before = _active_bytes(root)
    head = git.Repo(root.path).head.commit.hexsha
    res = cli("--headless", "assistant", "update", "complete", "--task", task["task_id"], "--root", str(root.path))
    assert res.code == 1
    assert "forbidden-path" in res.stderr and "update_records/forged.json" in res.stderr
    assert git.Repo(root.path).head.commit.hexsha == head and _active_bytes(root) == before


def test_no_change_path_is_validated(host):
    host.submit3()
    task = host("assistant", "update", "begin")
    # the argv a host is handed runs as given: an absolute program path, not a bare `rmtui`
    assert Path(task["complete"][0]).is_absolute() and Path(task["complete"][0]).exists()
    done = subprocess.run(task["complete"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert receipt["phase"] == "no_change" and receipt["changed_paths"] == []
    assert receipt["summary"] == "no change"
    # the batch still lands its update record, alone, as the original's no-change batches do
    landed = git.Repo(host.root.path).commit(receipt["landed_commit"])
    assert list(landed.stats.files) == [f"update_records/{task['batch_id']}.json"]


def test_expired_lease_never_discards_edits(host):
    assert host("config", "set", "assistant.lease_seconds", "1").code == 0
    host.submit3()
    task = host("assistant", "update", "begin")
    _commit_edit(task["worktree"], "MEMORY.md", MEMORY_WITH_NODE)
    time.sleep(1.5)
    host("recover")
    again = host("assistant", "update", "begin")
    assert again["claimed"] is False and again["expired"] is True and again["task_id"] == task["task_id"]
    receipt = host("assistant", "update", "complete", "--task", task["task_id"])
    assert receipt["phase"] == "committed"
    assert "use-pytest" in (host.root.path / "MEMORY.md").read_text()


def test_idle_and_unknown_task(host, cli):
    assert host("assistant", "update", "begin") == {"claimed": False, "state": "idle", "queued": 0}
    res = cli("--headless", "assistant", "update", "complete", "--task", "nope", "--root", str(host.root.path))
    assert res.code == 2 and "unknown assistant task" in res.stderr


def test_guidance_capture_commits_inbox(host):
    out = host("guidance", "submit", "--session", "s9", input="Always run ruff before committing.\n")
    assert out["state"] == "captured" and out["id"].startswith("GI-")
    text = (host.root.path / "AGENT_GUIDANCE_INBOX.md").read_text()
    assert text.startswith("# Pending Agent Guidance")
    assert f"## {out['id']}" in text and "Session: s9" in text and "Always run ruff" in text
    msg = git.Repo(host.root.path).head.commit.message
    assert msg.startswith("guidance: capture pending evidence")


def test_skills_install(cli, tmp_path):
    res = cli("--headless", "skills", "install", "--target", str(tmp_path / "sk"), "--json")
    assert res.code == 0, res.stderr
    names = {d["name"] for d in res.json()}
    assert names == {"rmtui-assistant", "rmtui-auto-orchestrator", "rmtui-orchestrator", "maintain-rmtui"}
    for n in names:
        text = (tmp_path / "sk" / n / "SKILL.md").read_text()
        assert text.startswith("---\nname: " + n + "\ndescription: ")
    again = cli("--headless", "skills", "install", "--target", str(tmp_path / "sk"))
    assert again.code == 3


def test_guidance_landing_meanwhile_is_rebased_over(host):
    host.submit3()
    task = host("assistant", "update", "begin")
    _commit_edit(task["worktree"], "MEMORY.md", MEMORY_WITH_NODE)
    captured = host("guidance", "submit", "--session", "s5", input="Keep commits small.\n")
    receipt = host("assistant", "update", "complete", "--task", task["task_id"])
    assert receipt["phase"] == "committed"
    assert "use-pytest" in (host.root.path / "MEMORY.md").read_text()
    assert captured["id"] in (host.root.path / "AGENT_GUIDANCE_INBOX.md").read_text()


def test_a_hosts_stray_file_is_kept_and_named_when_its_task_ends(host, cli):
    """A file the host's child leaves in the task's worktree that is not a memory file (never
    committed) goes to .runtime/kept/<task>/ with the worktree's removal; the receipt names both."""
    root = host.root
    host.submit3()
    # a task replaced by --retry (its operation abandoned) keeps its child's stray file
    old = host("assistant", "update", "begin")
    Path(old["worktree"], "todo.txt").write_text("left behind\n", encoding="utf-8")
    task = host("assistant", "update", "begin", "--retry")
    assert task["task_id"] != old["task_id"] and not Path(old["worktree"]).exists()
    assert (root.runtime / "kept" / old["task_id"] / "todo.txt").read_text() == "left behind\n"
    shown = host("receipts", "show", old["task_id"], "--json")
    assert shown["phase"] == "abandoned" and any("todo.txt" in w for w in shown["warnings"])

    # and a completed one: the landing goes on, the files are kept and named
    Path(task["worktree"], "notes.md").write_text("child's scratch\n", encoding="utf-8")
    Path(task["worktree"], "drafts").mkdir()
    Path(task["worktree"], "drafts", "MEMORY-typo.md").write_text("- `x` meant for memory\n", encoding="utf-8")
    _commit_edit(task["worktree"], "MEMORY.md", MEMORY_WITH_NODE, "update: record pytest convention")
    receipt = host(*task["complete"][2:-2])
    assert receipt["phase"] == "committed" and receipt["changed_paths"] == ["MEMORY.md"]
    kept = root.runtime / "kept" / task["task_id"]
    assert (kept / "notes.md").read_text() == "child's scratch\n"
    assert (kept / "drafts" / "MEMORY-typo.md").read_text() == "- `x` meant for memory\n"
    assert not Path(task["worktree"]).exists() and not (root.path / "notes.md").exists()
    (warning,) = [w for w in receipt["warnings"] if "untracked-files" in w]
    assert "notes.md" in warning and "drafts/MEMORY-typo.md" in warning and str(kept) in warning
