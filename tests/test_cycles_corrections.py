"""Corrections of a landing: a landed Update sent back with a comment; the update-correction
role reworks it on the current root; applied / no_change / needs_input on the receipt."""

from __future__ import annotations

import git
import pytest
from cycles_kit import configure, head, seed
from fake_provider import FakeProvider, Turn, call
from test_cycles_insight import append_node, land

from rmtui.engine.cycles.corrections import correct_landing, parse_result
from rmtui.engine.errors import UsageError
from rmtui.engine.writes.operations import OperationStore

CORRECTIONS = """\
# Corrections

## Name the build tool exactly

### Candidate
An agent noted the build tool.

### Proposed edit
Fact x-node said "fact x".

### Accepted edit
Say which tool: the build uses just, not make.
"""


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def receipt_of(root, op_id):
    with OperationStore(root) as store:
        return store.receipt(op_id)


def test_parse_result_shapes():
    assert parse_result('done\n{"status": "applied", "message": "ok"}') == {"status": "applied", "message": "ok"}
    assert parse_result('```json\n{"status": "needs_input", "message": "Which?"}\n```') == {
        "status": "needs_input", "message": "Which?"}
    assert parse_result('{"status": "maybe", "message": "x"}') is None
    assert parse_result('{"status": "applied", "message": "x", "extra": 1}') is None
    assert parse_result("no json") is None


def test_correction_applies_and_records_corrections(provider, root, cli):
    configure(root, "openai", provider)
    seed(root)
    landing = append_node(root, "x-node")
    op_id = landing["operation_id"]
    provider.push(
        call("read", path="MEMORY.md"),
        call("edit", path="MEMORY.md", old_text="- `x-node` fact x-node → []",
             new_text="- `x-node` The build uses just, not make → []"),
        call("create", path="corrections.md", content=CORRECTIONS),
        call("validate_memory"),
        call("git_add", paths=["MEMORY.md", "corrections.md"]),
        call("git_commit", message="update: name the build tool"),
        Turn(text='Reworded x-node.\n{"status": "applied", "message": "x-node now names just"}'),
    )
    r = cli("--headless", "update", "correct", op_id[:22], "--comment", "x-node should say which tool",
            "--json", "--root", str(root.path))
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["status"] == "applied" and out["message"] == "x-node now names just"
    assert out["receipt"] == op_id and out["landed_commit"] == head(root)
    assert sorted(out["changed_paths"]) == ["MEMORY.md", "corrections.md"]
    assert "The build uses just, not make" in (root.path / "MEMORY.md").read_text()
    assert (root.path / "corrections.md").read_text() == CORRECTIONS
    msg = git.Repo(root.path).head.commit.message
    assert msg.startswith("update: name the build tool") and f"RightMemory-Operation: {out['operation_id']}" in msg
    # the role saw the landed diff and the comment
    prompt = provider.seen[0].user_texts()[0]
    assert landing["landed_commit"][:12] in prompt and "+- `x-node` fact x-node" in prompt
    assert "x-node should say which tool" in prompt and '"needs_input"' in prompt
    # stored on the original receipt
    corr = receipt_of(root, op_id).correction
    assert corr["status"] == "applied" and corr["operation_id"] == out["operation_id"]
    assert [h["comment"] for h in corr["history"]] == ["x-node should say which tool"]


def test_needs_input_asks_back_then_the_answer_finishes_it(provider, root):
    configure(root, "anthropic", provider)
    seed(root)
    landing = append_node(root, "y-node")
    op_id = landing["operation_id"]
    before = head(root)
    provider.push(call("outline"), Turn(text='{"status": "needs_input", "message": "Which tool do you mean?"}'))
    out = correct_landing(root, op_id, "wrong tool")
    assert out.status == "needs_input" and out.message == "Which tool do you mean?"
    assert head(root) == before
    corr = receipt_of(root, op_id).correction
    assert corr["status"] == "needs_input" and corr["message"] == "Which tool do you mean?"
    with OperationStore(root) as store:
        assert store.get(out.operation_id).phase == "abandoned"
    # the person answers; the earlier round is in the prompt; the role keeps the landing
    provider.push(Turn(text='The landing is right after all.\n{"status": "no_change", "message": "y-node stands"}'))
    out = correct_landing(root, op_id, "I meant the linter, and that is right")
    assert out.status == "no_change" and out.landed_commit is None
    assert 'the result was needs_input: Which tool do you mean?' in provider.seen[-1].user_texts()[0]
    corr = receipt_of(root, op_id).correction
    assert corr["status"] == "no_change" and len(corr["history"]) == 2
    assert head(root) == before


def test_claimed_fix_without_a_commit_is_no_change_and_bad_answers_fail(provider, root):
    configure(root, "openai", provider)
    seed(root)
    op_id = append_node(root, "z-node")["operation_id"]
    provider.push(Turn(text='{"status": "applied", "message": "fixed"}'))
    out = correct_landing(root, op_id, "fix it")
    assert out.status == "no_change" and "committed no fix" in out.message
    provider.push(Turn(text="I did something."), Turn(text="still no json"))
    out = correct_landing(root, op_id, "fix it again")
    assert out.status == "failed" and "did not answer" in out.message and out.exit_code == 1
    assert receipt_of(root, op_id).correction["status"] == "failed"


def test_only_landed_updates_can_be_corrected(root, cli):
    seed(root)
    manual = land(root, "maintenance", {"MEMORY.md": (root.path / "MEMORY.md").read_text() + "- `m` x → []\n"},
                  kind="maintenance")
    empty = land(root, "update", {})
    for ref in (manual["operation_id"], empty["operation_id"]):
        with pytest.raises(UsageError):
            correct_landing(root, ref, "wrong")
    r = cli("--headless", "update", "correct", "nope", "--comment", "x", "--root", str(root.path))
    assert r.code == 2 and "no receipt" in r.stderr
    r = cli("--headless", "update", "correct", manual["operation_id"], "--comment", "  ", "--root", str(root.path))
    assert r.code == 2 and "blank" in r.stderr
