"""The Pruner cycle: due rule, ledger commits through the supervisor, revival grace, Pursuit
references kept; against the scripted fake provider and real Git."""

from __future__ import annotations

import git
import pytest
from cycles_kit import MEMORY, commit, configure, head, memory_commit, message_of, seed
from fake_provider import FakeProvider, Turn, call

from rmtui.engine.cycles.ledger import (
    SUBJECT_CHECKPOINT,
    SUBJECT_EXPIRED,
    compose_message,
    parse_ledger,
    reasons_from,
)
from rmtui.engine.cycles.pruner import prune_status, run_prune
from rmtui.engine.writes.operations import OperationStore


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


OLD_LINE = "- `old-node` The build used make → []\n"


def remove_script(node_line: str, reason_id: str, reason: str, *, path: str = "MEMORY.md") -> list:
    return [
        call("read", path=path),
        call("edit", path=path, old_text=node_line, new_text=""),
        call("validate_memory"),
        call("git_add", paths=[path]),
        call("git_commit", message=f"prune things\n\n- {reason_id}: {reason}"),
        Turn(text=f"Removed {reason_id}."),
    ]


def restore_script(node_line: str, anchor: str, path: str = "MEMORY.md") -> list:
    return [
        call("read", path=path),
        call("edit", path=path, old_text=anchor, new_text=node_line + anchor),
        call("git_add", paths=[path]),
        call("git_commit", message="restore"),
        Turn(text="Restored."),
    ]


def test_ledger_grammar_round_trip():
    msg = compose_message([("MEMORY.md", "a.b", "superseded by c"), ("MEMORY_x.md", "d", "")],
                          [("MEMORY.md", "e", 1, 2)], changed=True)
    assert msg.startswith(SUBJECT_EXPIRED + "\n\nRemoved:\n- MEMORY.md#a.b: superseded by c\n")
    ledger = parse_ledger(msg + "\n\nRightMemory-Operation: prune-x\n")
    assert ledger.removed_ids() == ["a.b", "d"] and ledger.grace_of("e") == (1, 2)
    # any case, colon optional, backticked ids, other Words: lines end a section
    other = parse_ledger("prune: x\n\nremoved\n- `f` old\nNote: prose\n- `g` not an entry\n"
                         "REVIVAL GRACE:\n- `h` kept (grace 2/2)\n- `i` no count\n")
    assert other.removed_ids() == ["f"] and [e.id for e in other.grace] == ["h"] and other.grace_of("h") == (2, 2)
    assert reasons_from("x\n- old-node: superseded\n- MEMORY.md#b: dup\n- `c` stale\n") == {
        "old-node": "superseded", "b": "dup", "c": "stale"}
    assert compose_message([], [], changed=False) == SUBJECT_CHECKPOINT


def test_due_rule_counts_memory_commits_since_the_last_prune(provider, root, cli):
    configure(root, "openai", provider, **{"pruner.generation_commits": 5})
    # the init commit touched MEMORY.md: with no prune commit it counts
    for n in range(3):
        memory_commit(root, n)
    st = prune_status(root)
    assert st.memory_commits_since_prune == 4 and st.due is False and st.boundary is None
    assert run_prune(root).state == "idle"
    memory_commit(root, 3)
    r = cli("--headless", "prune", "status", "--json", "--root", str(root.path))
    assert r.code == 0, r.stderr
    st = r.json()
    assert st["due"] is True and st["memory_commits_since_prune"] == 5
    first = git.Repo(root.path).git.rev_list("--max-parents=0", "HEAD")
    assert st["boundary"] == first  # the Memory commit five back

    # the model finds nothing to expire: an empty prune: checkpoint lands through the supervisor
    provider.push(call("outline"), Turn(text="prune: checkpoint — nothing expired"))
    before = head(root)
    r = cli("--headless", "prune", "run", "--json", "--root", str(root.path))
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["state"] == "checkpoint" and out["landed_commit"] == head(root)
    repo = git.Repo(root.path)
    landed = repo.commit(out["landed_commit"])
    assert landed.parents[0].hexsha == before and landed.tree == landed.parents[0].tree  # empty commit
    assert landed.message.startswith(SUBJECT_CHECKPOINT + "\n\nRightMemory-Operation: " + out["operation_id"])
    st = prune_status(root)
    assert st.memory_commits_since_prune == 0 and not st.due and st.last_prune_commit == landed.hexsha
    # four Memory commits after the prune: not due; the fifth: due
    for n in range(4, 8):
        memory_commit(root, n)
    assert not prune_status(root).due
    commit(root, "queue: not memory", {"update_records/x.json": "{}"})
    assert prune_status(root).memory_commits_since_prune == 4
    memory_commit(root, 8)
    assert prune_status(root).due


def test_expiry_lands_a_ledger_and_revival_grace_protects(provider, root):
    configure(root, "anthropic", provider, **{"pruner.generation_commits": 1,
                                              "pruner.revival_grace_checkpoints": 2})
    seed(root)
    provider.push(*remove_script(OLD_LINE, "old-node", "superseded by keep-node"))
    out = run_prune(root)
    assert out.state == "expired", out
    assert out.removed == ["old-node"]
    msg = message_of(root, out.landed_commit)
    assert msg.splitlines()[0] == SUBJECT_EXPIRED
    ledger = parse_ledger(msg)
    assert ledger.removed_ids() == ["old-node"] and ledger.grace == []
    assert "- MEMORY.md#old-node: superseded by keep-node" in msg
    assert f"RightMemory-Operation: {out.operation_id}" in msg
    assert OLD_LINE not in (root.path / "MEMORY.md").read_text()
    # the pruner saw the kept Pursuit reference in its task
    assert "`keep-node`" in provider.seen[0].user_texts()[0]

    # Update re-adds the pruned item: it is revived and gets grace for two due checkpoints
    commit(root, "update: old-node is back", {"MEMORY.md": MEMORY})
    st = prune_status(root)
    assert st.due and [g["id"] for g in st.revival_grace] == ["old-node"]
    assert st.revival_grace[0]["next_checkpoint"] == 1

    # checkpoint 1: the model removes it anyway; the program asks it back, the model restores it
    anchor = "- `keep-node`"
    provider.push(*remove_script(OLD_LINE, "old-node", "again"), *restore_script(OLD_LINE, anchor))
    out = run_prune(root)
    assert out.state == "checkpoint", out
    assert "must stay" in provider.seen[-5].user_texts()[-1] and "old-node" in provider.seen[-5].user_texts()[-1]
    msg = message_of(root, out.landed_commit)
    assert msg.startswith(SUBJECT_CHECKPOINT) and parse_ledger(msg).grace_of("old-node") == (1, 2)
    assert OLD_LINE in (root.path / "MEMORY.md").read_text()

    # checkpoint 2: still in grace (2/2); a checkpoint with nothing to remove
    provider.push(Turn(text="nothing expired"))
    out = run_prune(root, force=True)
    assert out.state == "checkpoint"
    assert parse_ledger(message_of(root, out.landed_commit)).grace_of("old-node") == (2, 2)

    # grace is over: the item may go again
    assert prune_status(root).revival_grace == []
    provider.push(*remove_script(OLD_LINE, "old-node", "expired after grace"))
    out = run_prune(root, force=True)
    assert out.state == "expired" and out.removed == ["old-node"]
    assert OLD_LINE not in (root.path / "MEMORY.md").read_text()


def test_pursuit_referenced_item_is_never_pruned(provider, root):
    configure(root, "openai", provider, **{"pruner.generation_commits": 1})
    seed(root)
    before = head(root)
    keep_line = "- `keep-node` The build uses just → []\n"
    # the model removes a Pursuit-referenced item and does not put it back
    provider.push(*remove_script(keep_line, "keep-node", "old"), Turn(text="I will not restore it."))
    out = run_prune(root)
    assert out.state == "failed" and "keep-node" in out.message
    assert head(root) == before and keep_line in (root.path / "MEMORY.md").read_text()
    with OperationStore(root) as store:
        (op,) = [o for o in store.list() if o.kind == "prune"]
        assert op.phase == "failed"
    st = prune_status(root)
    assert st.last_outcome["state"] == "failed" and st.failures == 1 and st.backoff


def test_pruner_may_write_only_memory(provider, root):
    configure(root, "openai", provider, **{"pruner.generation_commits": 1})
    seed(root)
    provider.push(call("read", path="PURSUITS.md"),
                  call("edit", path="PURSUITS.md", old_text="## Focus", new_text="## Focus!"),
                  Turn(text="tried"))
    out = run_prune(root)
    # the tool refused the write, the model changed nothing: a checkpoint
    assert out.state == "checkpoint"
    assert "may not write PURSUITS.md" in provider.seen[2].tool_results()[0]["content"]
