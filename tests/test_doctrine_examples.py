"""Each role prompt's worked example, followed literally (docs/memory-doctrine.md, "Contract").

A host (or, for the roles no host runs, the fake model) does exactly what the example in the
role's instructions shows: the same files, the same selection, the same edit, commit message
and result. The program must land or render it without a refusal; an example the program
refuses would teach every model to fail.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cycles_kit import commit, configure, head
from fake_provider import FakeProvider, Turn, call
from test_cycles_host import commit_files, complete, edit_and_commit, rm, sh
from test_cycles_host import configure as configure_root
from test_cycles_insight import land
from test_sync import land as land_maintained
from test_sync import machines, upstream  # noqa: F401  (fixtures)

from rmtui.engine.roles.prompts import role_instructions
from rmtui.engine.sync import pull, push

_BLOCK = re.compile(r"^```([^\n`]+)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def prose(role: str) -> str:
    """The ``## Worked example`` section of a role's built instructions (headings inside fences are text)."""
    lines = role_instructions(role).split("## Worked example\n", 1)[1].split("\n")
    fenced, out = False, []
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith(("## ", "---")) and not fenced:
            break
        out.append(line)
    return "\n".join(out)


def example(role: str) -> dict[str, str]:
    """The worked example's fenced blocks, by info string."""
    found = {label.strip(): body for label, body in _BLOCK.findall(prose(role))}
    assert found, f"{role}: the instructions have no worked example"
    return found


def files_of(ex: dict[str, str], prefix: str = "") -> dict[str, str]:
    """The example's files: blocks labelled with a file name (``after:MEMORY.md`` with ``prefix="after:"``)."""
    return {label[len(prefix):]: body for label, body in ex.items()
            if label.startswith(prefix) and label[len(prefix):].endswith(".md") and ":" not in label[len(prefix):]}


def subject_and_body(message: str) -> str:
    return message.strip() + "\n"


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


# -- Retrieve: the model's selection renders; the native child's quotes are the files' text ----

def retrieve_root(root):
    files = files_of(example("retrieve"))
    assert set(files) == {"MEMORY.md", "MEMORY_release-notes.md", "MEMORY_SKILL_cut-release.md"}
    commit(root, "seed: the retrieve example", files)
    return files


def test_the_retrieve_example_selection_renders_without_a_refusal(provider, root):
    from rmtui.engine.memory.config import set_config_value
    from rmtui.engine.retrieval.retrieve import retrieve

    files = retrieve_root(root)
    for key, value in (("retrieve.backend", "agent"), ("retrieve.model.model_id", "anthropic:fake-model"),
                       ("retrieve.model.api_base", provider.base("anthropic")), ("retrieve.model.kwargs",
                                                                                 {"max_retries": 0})):
        set_config_value(root.path, key, value)
    selection = json.loads(example("retrieve")["selection"])
    provider.push(call("submit_selection", **selection))
    need = re.search(r'For the need "([^"]+)"', prose("retrieve")).group(1)
    res = retrieve(root, "s1", need)
    refused = [r for s in provider.seen for r in s.tool_results() if r["is_error"]]
    assert not refused, refused
    notes = files["MEMORY_release-notes.md"].splitlines()
    for line in ("## Build and release {#build}", files["MEMORY.md"].splitlines()[6], notes[2], notes[3],
                 files["MEMORY_SKILL_cut-release.md"].strip()):
        assert line in res.text, (line, res.text)
    assert "1.0.0 first release" not in res.text  # only the selected range


def test_the_native_retrieve_example_quotes_exact_text_from_the_handed_sources(root, tmp_path):
    files = retrieve_root(root)
    ctx = rm(root, "assistant", "context", "--session", "s1")
    answer = example("retrieve-host")["answer"].splitlines()
    name = answer[0]
    assert str(root.path / name) in ctx["sources"]
    text = files[name].splitlines()
    quoted = [line for line in answer[1:] if not line.startswith("Why:")]
    assert quoted and all(line in text for line in quoted), quoted
    assert "submit_selection" not in Path(ctx["instructions"]).read_text(encoding="utf-8")


# -- Update: the example's candidate, edit and commit land -------------------------------------

def test_the_update_example_lands_as_a_host_update(root, tmp_path):
    ex = example("update")
    configure_root(root, **{"update.async.target_batch_candidates": 1})
    commit_files(root, "seed: the update example", files_of(ex))
    evidence = tmp_path / "evidence.md"
    evidence.write_text(ex["evidence"], encoding="utf-8")
    rm(root, "assistant", "submit", "--session", "s1", "--request", "r1", str(evidence))
    task = rm(root, "assistant", "update", "begin")
    assert task["claimed"], task
    assert ex["evidence"].strip() in Path(task["candidates"]).read_text(encoding="utf-8").replace("\\n", "\n")
    after = files_of(ex, "after:")
    for rel, text in after.items():
        edit_and_commit(task["worktree"], rel, text, subject_and_body(ex["commit"]))
    assert rm(root, "validate", "--path", task["worktree"])["valid"] is True
    receipt = rm(root, "assistant", "update", "complete", "--task", task["task_id"])
    assert receipt["phase"] == "committed" and receipt["landed_commit"] == head(root)
    assert (root.path / "MEMORY.md").read_text(encoding="utf-8") == after["MEMORY.md"]


# -- Update correction: the example's fix, corrections entry and result are applied ------------

def test_the_correction_example_is_applied_as_a_host_correction(root):
    ex = example("update-correction")
    landed = files_of(ex)["MEMORY.md"]
    before = "".join(line + "\n" for line in landed.splitlines()[:-1])  # the landed node is the last line
    commit_files(root, "seed: memory", {"MEMORY.md": before})
    landing = land(root, "update", {"MEMORY.md": landed})
    comment = re.search(r'The person\'s comment: "([^"]+)"', prose("update-correction")).group(1)
    task = rm(root, "assistant", "begin", "--role", "update-correction", "--receipt", landing["operation_id"],
              "--comment", comment)
    assert task["claimed"], task
    after = files_of(ex, "after:")
    assert set(after) == {"MEMORY.md", "corrections.md"}
    message = re.search(r"`git_commit` once \(`([^`]+)`\)", prose("update-correction")).group(1)
    for rel, text in after.items():
        (Path(task["worktree"]) / rel).write_text(text, encoding="utf-8")
    sh(task["worktree"], "add", "--", *after)
    sh(task["worktree"], "commit", "-q", "-m", message)
    out = complete(task, "--result", ex["result"].strip())
    assert out["status"] == "applied" and out["landed_commit"] == head(root), out
    for rel, text in after.items():
        assert (root.path / rel).read_text(encoding="utf-8") == text


# -- Pruner: the program's candidates are the example's, and the removal lands with its ledger --

def test_the_pruner_example_lands_as_a_host_prune(root):
    ex = example("pruner")
    memory = files_of(ex)["MEMORY.md"]
    added = next(line for line in memory.splitlines() if line.startswith("- `gha-ci`"))
    configure_root(root, **{"pruner.generation_commits": 2})
    commit_files(root, "seed: memory at the boundary", {"MEMORY.md": memory.replace(added + "\n", "")})
    commit_files(root, "update: CI on GitHub Actions", {"MEMORY.md": memory})
    task = rm(root, "assistant", "begin", "--role", "pruner")
    assert task["claimed"], task
    assert task["context"]["prune_candidates"] == [c.strip() for c in ex["candidates"].split(",")]
    listed = Path(task["instructions"]).read_text(encoding="utf-8").split("Prune candidates (", 1)[1].split("\n\n")[0]
    assert [line[3:-1] for line in listed.splitlines()[1:]] == task["context"]["prune_candidates"]  # the model's list
    edit_and_commit(task["worktree"], "MEMORY.md", files_of(ex, "after:")["MEMORY.md"], ex["commit"])
    out = complete(task)
    assert out["state"] == "expired" and sorted(out["removed"]) == ["old-ci", "travis-ci"], out
    landed = sh(root.path, "log", "-1", "--format=%B")
    assert landed.startswith("prune: expired active memory") and "travis-ci: superseded by gha-ci" in landed


# -- Insight: the example's log lands as the one new log ---------------------------------------

def test_the_insight_example_lands_as_a_host_insight(root):
    from test_cycles_insight import append_node

    from rmtui.engine.writes import triggers

    ex = example("insight")
    configure_root(root, **{"insight.watch.trigger_points": 1})
    commit_files(root, "seed: memory", {"MEMORY.md": "# Memory\n\n## Testing {#testing}\n\n"})
    append_node(root, "pytest-all")
    assert triggers.load(root, "insight")["points"] == 1
    task = rm(root, "assistant", "begin", "--role", "insight")
    assert task["claimed"], task
    edit_and_commit(task["worktree"], task["context"]["log"], ex["log"], ex["commit"])
    out = complete(task)
    assert out["state"] == "artifact", out
    assert (root.path / task["context"]["log"]).read_text(encoding="utf-8") == ex["log"]


# -- Sync reconciler: the example's resolution completes the merge -----------------------------

def test_the_sync_example_resolves_a_real_conflict(machines):  # noqa: F811
    a, b = machines
    ex = example("sync-reconciler")
    base = ex["base:MEMORY.md"]
    line = next(x for x in base.splitlines() if x.startswith("- `staging-port`"))
    land_maintained(a, "MEMORY.md", base)
    assert push(a).status == "pushed" and pull(b).status == "synced"
    land_maintained(a, "MEMORY.md", base.replace(line, ex["theirs"].strip()))
    assert push(a).status == "pushed"
    land_maintained(b, "MEMORY.md", base.replace(line, ex["ours"].strip()))
    assert rm(b, "sync", "pull", expect=3)["status"] == "conflict"
    task = rm(b, "assistant", "begin", "--role", "sync-reconciler")
    assert task["claimed"] and task["context"]["conflicts"] == ["MEMORY.md"], task
    resolved = files_of(ex, "after:")["MEMORY.md"]
    edit_and_commit(task["worktree"], "MEMORY.md", resolved, ex["commit"])
    out = complete(task)
    assert out["status"] == "synced", out
    assert (b.path / "MEMORY.md").read_text(encoding="utf-8") == resolved


# -- Historian: the example's tool calls succeed and its answer is returned labelled -----------

def test_the_historian_example_reads_history_without_a_refusal(provider, root):
    from rmtui.engine.cycles.historian import ask

    pruned = example("pruner")
    configure(root, "openai", provider)
    commit(root, "seed: memory", files_of(pruned))
    seeded = head(root)
    commit(root, "prune: expired active memory\n\nRemoved:\n- travis-ci: superseded by gha-ci",
           files_of(pruned, "after:"))
    answer = example("historian")["answer"]
    provider.push(call("git_log", grep="prune:"), call("git_show", rev=seeded, path="MEMORY.md"), Turn(text=answer))
    out = ask(root, "What did memory say about Travis CI?")
    refused = [r for s in provider.seen for r in s.tool_results() if r["is_error"]]
    assert not refused, refused
    assert out.label == "historical" and out.answer == answer.strip()
    results = "".join(r["content"] for s in provider.seen for r in s.tool_results())
    assert "travis-ci: superseded by gha-ci" in results and "- `travis-ci` CI runs on Travis" in results
