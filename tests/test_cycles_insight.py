"""Insight: points from landed Updates, the claim at the threshold, one new log or a no-op,
points deducted only on success, and the supervisor refusing anything but a log."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import git
import pytest
from cycles_kit import configure, head, seed
from fake_provider import FakeProvider, Turn, call

from rmtui.engine.cycles.insight import insight_cycle, insight_status, run_insight
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.roles.update_driver import UpdateDriver
from rmtui.engine.writes import triggers
from rmtui.engine.writes.supervisor import Supervisor

LOG = "# Insight\n\n## Builds keep changing tools\n\nDraws on `old-node`, `keep-node`.\n"


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def land(root, role: str, files: dict[str, str], kind: str = "update") -> dict:
    """A writer lands ``files`` through the supervisor (as an Update would)."""
    with Supervisor(root) as sup:
        op = sup.begin(kind, role)
        for rel, text in files.items():
            (Path(op.worktree) / rel).write_text(text, encoding="utf-8")
        subprocess.run(["git", "add", "-A"], cwd=op.worktree, check=True)
        if files:
            subprocess.run(["git", "commit", "-q", "-m", f"{kind}: test"], cwd=op.worktree, check=True)
        return sup.finish(op, summary="test").to_json()


def append_node(root, ident: str) -> dict:
    text = (root.path / "MEMORY.md").read_text()
    return land(root, "update", {"MEMORY.md": text + f"- `{ident}` fact {ident} → []\n"})


def insight_script(name_from_prompt: bool = True) -> list:
    def create(seen):
        prompt = seen.user_texts()[0]
        name = prompt.split("create exactly one new file `", 1)[1].split("`", 1)[0]
        return call("create", path=name, content=LOG)

    def add(seen):
        prompt = seen.user_texts()[0]
        name = prompt.split("create exactly one new file `", 1)[1].split("`", 1)[0]
        return call("git_add", paths=[name])

    return [call("outline"), create, add, call("git_commit", message="insight: builds keep changing tools"),
            Turn(text="Wrote one log.")]


def test_points_count_landed_memory_changing_updates_once(root):
    seed(root)
    assert insight_status(root).points == 0
    r = append_node(root, "a")
    assert r["phase"] == "committed"
    assert insight_status(root).points == 1
    # Pursuit-only, no-op and non-update writers add nothing
    pursuits = (root.path / "PURSUITS.md").read_text()
    land(root, "maintenance", {"PURSUITS.md": pursuits.replace("## Focus", "## Another {#another}\n\n## Focus")},
         kind="maintenance")
    land(root, "update", {})
    land(root, "maintenance", {"MEMORY.md": (root.path / "MEMORY.md").read_text() + "- `m` manual → []\n"},
         kind="maintenance")
    assert insight_status(root).points == 1
    # a retried effect counts the operation once
    with Supervisor(root) as sup:
        op = sup.store.get(r["operation_id"])
        from rmtui.engine.writes.effects import EFFECTS

        EFFECTS["insight_points"](sup, op)
    st = triggers.load(root, "insight")
    assert st["points"] == 1 and st["applied_operation_ids"] == [r["operation_id"]]


def test_corrupt_trigger_state_is_set_aside(root):
    path = triggers.state_path(root, "insight")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert insight_status(root).points == 0
    assert list(path.parent.glob("trigger-state.json.corrupt-*"))


def test_three_landed_updates_trigger_exactly_one_run(provider, root):
    configure(root, "openai", provider, **{"insight.watch.trigger_points": 3,
                                           "update.async.target_batch_candidates": 1})
    seed(root)
    # one of the three through the real Update driver and the model
    with EvidenceQueue(root) as q:
        q.submit("s1", b"ruff line length stays 120")
    line = "- `ruff` ruff line length is 120 → []\n"
    provider.push(call("read", path="MEMORY.md"),
                  call("edit", path="MEMORY.md", old_text="## Tools {#tools}\n\n",
                       new_text="## Tools {#tools}\n\n" + line),
                  call("git_add", paths=["MEMORY.md"]), call("git_commit", message="update: ruff"),
                  Turn(text="Changed: ruff."))
    assert UpdateDriver(root).run_once(force=True).state == "committed"
    append_node(root, "b")
    assert insight_cycle(root) == {"state": "idle"}  # 2 of 3
    append_node(root, "c")
    st = insight_status(root)
    assert st.points == 3 and st.due

    provider.push(*insight_script())
    before = head(root)
    out = insight_cycle(root)
    assert out["state"] == "artifact", out
    log = out["log"]
    assert log.startswith("insight_logs/") and (root.path / log).read_text() == LOG
    repo = git.Repo(root.path)
    landed = repo.head.commit
    assert landed.parents[0].hexsha == before
    assert landed.message.startswith("insight: builds keep changing tools\n\nRightMemory-Operation: ")
    assert list(landed.stats.files) == [log]
    st = insight_status(root)
    assert st.points == 0 and not st.due and st.last_success_result == "artifact"
    assert st.active_operation_id is None and st.last_run["state"] == "artifact"
    # no second run: the watcher is idle now
    assert insight_cycle(root) == {"state": "idle"}
    assert len([s for s in provider.seen if "Insight run:" in (s.user_texts() or [""])[0]]) == 5
    # the model read only what Insight may read
    assert "insight_logs/" in provider.seen[-5].user_texts()[0]


def test_noop_deducts_and_failure_keeps_points(provider, root):
    configure(root, "anthropic", provider, **{"insight.watch.trigger_points": 1})
    seed(root)
    append_node(root, "x")
    append_node(root, "y")
    # a failed run (the model errors out): points are kept
    provider.push(*[Turn(text="", tool_calls=[("read", {"path": "/etc/passwd"})]) for _ in range(30)])
    out = run_insight(root)
    assert out.state == "failed" and out.points == 2
    st = insight_status(root)
    assert st.points == 2 and st.active_operation_id is None and st.failures == 1
    # a no-op is a success: the claimed points are deducted
    provider.script.clear()
    provider.push(call("outline"), Turn(text="Nothing stands out."))
    out = run_insight(root)
    assert out.state == "noop" and out.points == 0 and out.log is None
    assert insight_status(root).last_success_result == "noop"


def test_insight_editing_memory_is_refused_by_the_supervisor(provider, root):
    configure(root, "openai", provider, **{"insight.watch.trigger_points": 1})
    seed(root)
    append_node(root, "x")
    before = head(root)
    memory_before = (root.path / "MEMORY.md").read_text()

    def sneak(seen):
        # a misbehaving executor edits MEMORY.md behind the tools' back and commits it
        prompt = seen.user_texts()[0]
        worktree = prompt.split("Your isolated worktree is ", 1)[1].split(";", 1)[0]
        mem = Path(worktree) / "MEMORY.md"
        mem.write_text(mem.read_text() + "- `sneaky` insight edits memory → []\n")
        subprocess.run(["git", "commit", "-q", "-am", "insight: sneak"], cwd=worktree, check=True)
        return Turn(text="Edited memory.")

    provider.push(call("read", path="MEMORY.md"),
                  call("edit", path="MEMORY.md", old_text="# Memory", new_text="# Memory!"), sneak)
    out = run_insight(root)
    assert out.state == "failed" and out.failure is not None and out.failure.error["error"] == "refused"
    assert "forbidden-path" in out.message and "MEMORY.md" in out.message
    # the tool refused the first attempt already
    assert "may not write MEMORY.md" in provider.seen[2].tool_results()[0]["content"]
    assert head(root) == before and (root.path / "MEMORY.md").read_text() == memory_before
    assert insight_status(root).points == 1  # kept for the next claim


def test_two_new_logs_are_refused(provider, root):
    configure(root, "openai", provider, **{"insight.watch.trigger_points": 1})
    seed(root)
    append_node(root, "x")
    provider.push(call("create", path="insight_logs/2020-01-01-000000.md", content=LOG),
                  call("create", path="insight_logs/2020-01-01-000001.md", content=LOG),
                  call("git_add", paths=["."]), call("git_commit", message="insight: two"), Turn(text="two logs"))
    out = run_insight(root)
    assert out.state == "failed" and "exactly one new" in out.message
    assert not (root.path / "insight_logs").exists()


def test_cli_status_and_run(provider, root, cli):
    configure(root, "openai", provider, **{"insight.watch.trigger_points": 2})
    seed(root)
    append_node(root, "x")
    r = cli("--headless", "insight", "status", "--json", "--root", str(root.path))
    assert r.code == 0, r.stderr
    assert r.json()["points"] == 1 and r.json()["threshold"] == 2 and not r.json()["due"]
    r = cli("--headless", "insight", "run", "--root", str(root.path))
    assert r.code == 0 and "below the threshold" in r.stdout
    provider.push(*insight_script())
    r = cli("--headless", "insight", "run", "--force", "--json", "--root", str(root.path))
    assert r.code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["state"] == "artifact" and out["points"] == 0
    assert (root.path / out["log"]).is_file()
