"""Every cycle run by a host instead of an API model: no model is configured; the test plays
the host through the installed ``rmtui`` script (``assistant begin --role R`` then edits in
the handed-out worktree then ``assistant complete``), with real Git, and the supervisor
admits exactly as on the model path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import git
import pytest
from cycles_kit import MEMORY, PURSUITS, head, message_of
from test_cycles_insight import LOG, append_node, land
from test_sync import _diverge, machines, memory_with, upstream  # noqa: F401  (fixtures)

from rmtui.engine.cycles.ledger import SUBJECT_CHECKPOINT, SUBJECT_EXPIRED, parse_ledger
from rmtui.engine.cycles.pruner import prune_cycle, prune_status
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.writes import triggers
from rmtui.engine.writes.operations import OperationStore

RMTUI = Path(sys.executable).parent / "rmtui"


def run(argv: list[str], expect: int = 0):
    """One host call: the exact argv, as a host's shell would run it; JSON answers parsed."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == expect, (argv, proc.returncode, proc.stdout, proc.stderr)
    return json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else proc


def said(res) -> str:
    """What a refused call said: its JSON error's message (``--json``), else its stderr."""
    return res["message"] if isinstance(res, dict) else res.stderr


def rm(root, *args: str, expect: int = 0):
    return run([str(RMTUI), "--headless", *args, "--json", "--root", str(root.path)], expect)


def complete(task: dict, *extra: str, expect: int = 0):
    return run([*task["complete"], *extra, "--json"], expect)


def sh(cwd, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def settle_config(root) -> None:
    """Settings are per machine (untracked); where an older root still tracks the file, commit it."""
    if sh(root.path, "ls-files", "rightmemory.toml").strip():
        sh(root.path, "add", "rightmemory.toml")
        sh(root.path, "commit", "-q", "-m", "config: test settings")


def configure(root, **settings) -> None:
    for key, value in settings.items():
        set_config_value(root.path, key, value)
    settle_config(root)


def commit_files(root, message: str, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (root.path / rel).write_text(text, encoding="utf-8")
    sh(root.path, "add", "--", *files)
    sh(root.path, "commit", "-q", "-m", message)
    return head(root)


def edit_and_commit(worktree: str, rel: str, text: str, message: str) -> None:
    path = Path(worktree) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    sh(worktree, "add", "--", rel)
    sh(worktree, "commit", "-q", "-m", message)


OLD_LINE = "- `old-node` The build used make → []\n"
KEEP_LINE = "- `keep-node` The build uses just → []\n"


@pytest.fixture
def pruner_root(root):
    """The Pruner is due (a generation of 2: the init commit and the seed) and no model is set."""
    configure(root, **{"pruner.generation_commits": 2})
    commit_files(root, "seed: memory and pursuits", {"MEMORY.md": MEMORY, "PURSUITS.md": PURSUITS})
    assert prune_status(root).due
    return root


# -- Pruner ----------------------------------------------------------------------------------

def test_host_completes_a_pruner_task_with_the_ledger(pruner_root):
    root = pruner_root
    task = rm(root, "assistant", "begin", "--role", "pruner")
    assert task["claimed"] is True and task["role"] == "pruner" and task["kind"] == "prune"
    ctx = task["context"]
    assert ctx["due"] is True and ctx["memory_commits_since_prune"] == 2 and ctx["generation_commits"] == 2
    assert ctx["keep"]["pursuit_referenced"] == ["keep-node"]
    assert {i["id"] for i in ctx["memory_items"]} >= {"old-node", "keep-node", "stable-node"}
    assert json.loads(Path(task["context_file"]).read_text()) == ctx
    instructions = Path(task["instructions"]).read_text()
    assert "Prune run: 2 Memory-changing commit(s)" in instructions  # the model's own prompt
    assert "Keep these items: Pursuit references them" in instructions and "# Pruner" in instructions
    assert task["complete"][-4:] == ["--task", task["task_id"], "--root", str(root.path)]
    # a second begin hands back the open task
    again = rm(root, "assistant", "begin", "--role", "pruner")
    assert again["claimed"] is False and again["task_id"] == task["task_id"]

    wt = task["worktree"]
    edit_and_commit(wt, "MEMORY.md", MEMORY.replace(OLD_LINE, ""), "prune stale build note\n\n- old-node: make is gone")
    out = complete(task)
    assert out["state"] == "expired" and out["removed"] == ["old-node"] and out["task_id"] == task["task_id"]
    landed = out["landed_commit"]
    assert head(root) == landed
    message = message_of(root, landed)
    assert message.startswith(SUBJECT_EXPIRED + "\n\nRemoved:\n- MEMORY.md#old-node: make is gone")
    assert f"RightMemory-Operation: {task['task_id']}" in message
    assert parse_ledger(message).removed_ids() == ["old-node"]
    assert "old-node" not in (root.path / "MEMORY.md").read_text()
    assert not Path(wt).exists()
    st = prune_status(root)
    assert st.memory_commits_since_prune == 0 and st.last_prune_commit == landed
    assert st.last_outcome["state"] == "expired"
    # completion is idempotent; the role is no longer due
    assert complete(task)["landed_commit"] == landed
    idle = rm(root, "assistant", "begin", "--role", "pruner")
    assert idle["claimed"] is False and idle["state"] == "idle" and "not due" in idle["message"]


def test_pruner_host_removing_a_kept_item_is_refused_then_lands_a_checkpoint(pruner_root):
    root = pruner_root
    before = head(root)
    task = rm(root, "assistant", "begin", "--role", "pruner")
    wt = task["worktree"]
    edit_and_commit(wt, "MEMORY.md", MEMORY.replace(KEEP_LINE, ""), "prune\n\n- keep-node: unused")
    res = complete(task, expect=1)
    assert "must stay: keep-node" in said(res)
    assert head(root) == before and Path(wt).is_dir()
    status = rm(root, "assistant", "status", "--task", task["task_id"])
    assert status["phase"] == "running" and "keep-node" in status["error"]
    # the host undoes its removal and completes again: nothing expired, an empty checkpoint lands
    sh(wt, "reset", "-q", "--hard", task["base_commit"])
    out = complete(task, "--summary", "nothing is stale")
    assert out["state"] == "checkpoint" and out["removed"] == []
    assert message_of(root, out["landed_commit"]).startswith(SUBJECT_CHECKPOINT + "\n\nRightMemory-Operation:")
    repo = git.Repo(root.path)
    assert repo.commit(out["landed_commit"]).tree == repo.commit(before).tree  # the only empty commit


# -- Insight ---------------------------------------------------------------------------------

@pytest.fixture
def insight_root(root):
    configure(root, **{"insight.watch.trigger_points": 1})
    commit_files(root, "seed: memory", {"MEMORY.md": MEMORY})
    append_node(root, "x")  # one landed Memory-changing update: one point
    assert triggers.load(root, "insight")["points"] == 1
    return root


def logs(root) -> list[str]:
    return sorted(p.name for p in (root.path / "insight_logs").glob("*.md")) if (root.path / "insight_logs").is_dir() \
        else []


def test_host_completes_an_insight_task_with_exactly_one_new_log(insight_root):
    root = insight_root
    task = rm(root, "assistant", "begin", "--role", "insight")
    ctx = task["context"]
    assert task["claimed"] and ctx["points"] == 1 and ctx["threshold"] == 1 and ctx["existing_logs"] == []
    assert ctx["log"].startswith("insight_logs/") and ctx["claim"].startswith("insight-watch-")
    assert triggers.load(root, "insight")["active_operation_id"] == ctx["claim"]
    assert f"create exactly one new file `{ctx['log']}`" in Path(task["instructions"]).read_text()

    edit_and_commit(task["worktree"], ctx["log"], LOG, "insight: builds keep changing tools")
    out = complete(task)
    assert out["state"] == "artifact" and out["log"] == ctx["log"] and out["points"] == 0
    assert logs(root) == [Path(ctx["log"]).name]
    assert message_of(root, out["landed_commit"]).startswith("insight: builds keep changing tools")
    st = triggers.load(root, "insight")
    assert st["points"] == 0 and st["active_operation_id"] is None and st["last_success_result"] == "artifact"
    idle = rm(root, "assistant", "begin", "--role", "insight")
    assert idle["state"] == "idle" and "below its threshold: 0 of 1 points" in idle["message"]


def test_insight_host_editing_memory_is_refused_and_nothing_lands(insight_root):
    root = insight_root
    before, memory_before = head(root), (root.path / "MEMORY.md").read_text()
    task = rm(root, "assistant", "begin", "--role", "insight")
    wt, name = task["worktree"], task["context"]["log"]
    (Path(wt) / "MEMORY.md").write_text(memory_before + "- `sneaky` insight edits memory → []\n", encoding="utf-8")
    sh(wt, "add", "MEMORY.md")
    edit_and_commit(wt, name, LOG, "insight: and a memory edit")
    res = complete(task, expect=1)
    assert "forbidden-path" in said(res) and "MEMORY.md" in said(res)
    assert head(root) == before and (root.path / "MEMORY.md").read_text() == memory_before and logs(root) == []
    assert triggers.load(root, "insight")["points"] == 1  # deducted only on success
    # the host gives up on that worktree: --retry fences it and claims afresh
    retry = rm(root, "assistant", "begin", "--role", "insight", "--retry")
    assert retry["claimed"] and retry["task_id"] != task["task_id"]
    fenced = complete(task, expect=3)
    assert "abandoned" in said(fenced)
    out = complete(retry)  # nothing committed: a no-op is a success
    assert out["state"] == "noop" and out["points"] == 0 and logs(root) == [] and head(root) == before


# -- a correction of a landed Update -----------------------------------------------------------

def test_host_completes_update_correction_tasks(root):
    commit_files(root, "seed: memory", {"MEMORY.md": MEMORY})
    wrong = MEMORY + "- `lint` Lint with flake8 → []\n"
    landing = land(root, "update", {"MEMORY.md": wrong})
    assert landing["phase"] == "committed"
    op_id = landing["operation_id"]

    rm(root, "assistant", "begin", "--role", "update-correction", expect=2)  # no receipt, no comment
    task = rm(root, "assistant", "begin", "--role", "update-correction", "--receipt", op_id[:20],
              "--comment", "we lint with ruff, not flake8")
    ctx = task["context"]
    assert task["claimed"] and task["kind"] == "correction"
    assert ctx["receipt"]["operation_id"] == op_id and ctx["comment"] == "we lint with ruff, not flake8"
    text = Path(task["instructions"]).read_text()
    assert "Lint with flake8" in text and "we lint with ruff" in text  # the landing's diff and the comment

    complete(task, expect=2)  # the result is required
    edit_and_commit(task["worktree"], "MEMORY.md", wrong.replace("flake8", "ruff"), "correct: lint with ruff")
    out = complete(task, "--result", '{"status": "applied", "message": "lint is ruff"}')
    assert out["status"] == "applied" and out["receipt"] == op_id and out["landed_commit"] == head(root)
    assert "Lint with ruff" in (root.path / "MEMORY.md").read_text()
    with OperationStore(root) as store:
        assert store.receipt(op_id).correction["status"] == "applied"

    # a round that needs the person's input lands nothing and leaves the question on the receipt
    before = head(root)
    ask = rm(root, "assistant", "begin", "--role", "update-correction", "--receipt", op_id,
             "--comment", "also the formatter")
    out = complete(ask, "--result", '{"status": "needs_input", "message": "Which formatter?"}')
    assert out["status"] == "needs_input" and out["landed_commit"] is None and head(root) == before
    with OperationStore(root) as store:
        correction = store.receipt(op_id).correction
    assert correction["message"] == "Which formatter?" and len(correction["history"]) == 2


# -- Update under the common entry, and what is not due ------------------------------------------

def test_begin_role_update_is_the_update_task(root, tmp_path):
    configure(root, **{"update.async.target_batch_candidates": 1})
    ev = tmp_path / "ev.md"
    ev.write_text("The project lints with ruff.\n", encoding="utf-8")
    rm(root, "assistant", "submit", "--session", "s1", "--request", "r1", str(ev))
    task = rm(root, "assistant", "begin", "--role", "update")
    assert task["claimed"] and task["batch_id"].startswith("update-batch-")
    edit_and_commit(task["worktree"], "MEMORY.md", MEMORY, "update: tools")
    receipt = rm(root, "assistant", "complete", "--task", task["task_id"])
    assert receipt["phase"] == "committed" and receipt["landed_commit"] == head(root)


def test_begin_when_nothing_is_due_says_so(root):
    for role, words in (("pruner", "not due"), ("insight", "below its threshold"),
                        ("sync-reconciler", "no pending repair: sync is off")):
        out = rm(root, "assistant", "begin", "--role", role)
        assert out["claimed"] is False and out["state"] == "idle" and words in out["message"], out
    assert rm(root, "assistant", "begin", "--role", "update")["state"] == "idle"
    assert "historian" in said(rm(root, "assistant", "begin", "--role", "historian", expect=2))
    forced = rm(root, "assistant", "begin", "--role", "pruner", "--force")
    assert forced["claimed"] is True
    assert rm(root, "assistant", "status")["tasks"][0]["task_id"] == forced["task_id"]
    # while a host holds the Pruner, the model path neither runs nor counts a failure
    held = rm(root, "prune", "run", "--force", expect=3)
    assert f"a host holds the prune task {forced['task_id']}" in said(held)
    assert prune_cycle(root) == {"state": "idle", "host_task": forced["task_id"]}
    assert prune_status(root).failures == 0


# -- a sync repair ---------------------------------------------------------------------------

def test_host_repairs_a_sync_conflict(machines):  # noqa: F811
    a, b = machines
    assert rm(b, "assistant", "begin", "--role", "sync-reconciler")["state"] == "idle"
    _diverge(a, b)
    pulled = rm(b, "sync", "pull", expect=3)  # no model: the conflict waits for a repair
    assert pulled["status"] == "conflict"
    before = head(b)
    task = rm(b, "assistant", "begin", "--role", "sync-reconciler")
    ctx = task["context"]
    assert task["claimed"] and ctx["conflicts"] == ["MEMORY.md"] and ctx["upstream"] == "origin/main"
    assert "Conflicted files (conflict markers inside): MEMORY.md" in Path(task["instructions"]).read_text()
    wt = task["worktree"]
    assert "<<<<<<<" in (Path(wt) / "MEMORY.md").read_text()
    resolved = memory_with(("port", "the staging DB listens on 5433 (6543 was an old local note)"))
    edit_and_commit(wt, "MEMORY.md", resolved, "sync: reconcile staging port")
    out = complete(task)
    assert out["status"] == "synced" and out["repair"]["commit"] == head(b) != before
    assert (b.path / "MEMORY.md").read_text() == resolved and not Path(wt).exists()
    parents = sh(b.path, "rev-list", "--parents", "-n", "1", head(b)).split()[1:]
    assert parents == [before, ctx["upstream_commit"]]
    assert rm(a, "sync", "pull")["status"] == "synced"  # it was pushed
    assert (a.path / "MEMORY.md").read_text() == resolved


def test_a_sync_repair_hosts_stray_file_is_kept_and_named(machines):  # noqa: F811
    a, b = machines
    _diverge(a, b)
    assert rm(b, "sync", "pull", expect=3)["status"] == "conflict"
    task = rm(b, "assistant", "begin", "--role", "sync-reconciler")
    wt = Path(task["worktree"])
    (wt / "notes.md").write_text("how I resolved it\n")
    resolved = memory_with(("port", "the staging DB listens on 5433 (6543 was an old local note)"))
    edit_and_commit(str(wt), "MEMORY.md", resolved, "sync: reconcile staging port")
    out = complete(task)
    assert out["status"] == "synced" and not wt.exists()
    kept = b.runtime / "kept" / task["task_id"]
    assert (kept / "notes.md").read_text() == "how I resolved it\n"
    (warning,) = out["warnings"]
    assert "untracked-files" in warning and "notes.md" in warning and str(kept) in warning
    assert complete(task) == out  # completing again answers the same


def test_a_replaced_sync_repair_task_keeps_its_stray_file(machines):  # noqa: F811
    a, b = machines
    _diverge(a, b)
    assert rm(b, "sync", "pull", expect=3)["status"] == "conflict"
    old = rm(b, "assistant", "begin", "--role", "sync-reconciler")
    (Path(old["worktree"]) / "notes.md").write_text("half a resolution\n")
    new = rm(b, "assistant", "begin", "--role", "sync-reconciler", "--retry")
    assert new["task_id"] != old["task_id"] and not Path(old["worktree"]).exists()
    kept = b.runtime / "kept" / old["task_id"]
    assert (kept / "notes.md").read_text() == "half a resolution\n"
    status = rm(b, "assistant", "status", "--task", old["task_id"])
    assert "notes.md" in json.dumps(status) and str(kept) in json.dumps(status)
