"""The Pursuit editor: operations against an expected revision, the journal (undo/redo across
a restart), validation on every step, the checkpoint through the supervisor, and the Memory
exception (a delete drops exactly the edges to the deleted ids)."""

from __future__ import annotations

import json

import git
import pytest
from cycles_kit import commit, head

from rmtui.engine import pursuit
from rmtui.engine.errors import ConflictError, UsageError

MEMORY = """\
# Memory

## Tools {#tools}

- `keep-node` The build uses just → []
- `m1` CI speed matters → [rel:faster-builds, dep:keep-node]
- `m2` Caches live in S3 → [loc:keep-node]
"""

PURSUITS = """\
# Pursuits

## Focus

- `faster-builds`

## Faster builds {#faster-builds} → [dep:keep-node]

**State:** measuring.

### Cache the deps {#cache-deps} → [rel:m2]
"""


@pytest.fixture
def proot(root):
    commit(root, "seed: pursuits", {"MEMORY.md": MEMORY, "PURSUITS.md": PURSUITS})
    return root


def rev(root) -> str:
    return pursuit.show(root).revision


def apply(root, **op):
    return pursuit.apply(root, op, expected_revision=rev(root))


def test_operations_restart_undo_redo_checkpoint(proot, cli):
    root = proot
    st = pursuit.show(root)
    assert [p["id"] for p in st.pursuits] == ["faster-builds", "cache-deps"] and st.focus == ["faster-builds"]
    assert st.pursuits[1]["parent_id"] == "faster-builds" and st.pending_edits == 0
    out = apply(root, type="create", title="Ship the CLI!")
    assert out.selected_id == "ship-the-cli" and out.pending_edits == 1
    apply(root, type="create", title="Write docs", parent_id="ship-the-cli")
    apply(root, type="rename", id="write-docs", title="Write the docs")
    apply(root, type="move", id="cache-deps", parent_id="ship-the-cli", after_id="write-docs")
    # a restart: every later step is a new process reading the journal
    base = ["--root", str(root.path), "--json"]
    r = cli("--headless", "pursuit", "apply", "--op", json.dumps({"type": "set_focus", "id": "ship-the-cli",
                                                                  "focused": True}),
            "--expected-revision", rev(root), *base)
    assert r.code == 0, r.stderr
    r = cli("--headless", "pursuit", "apply", "--op", json.dumps({"type": "edit_body", "id": "ship-the-cli",
                                                                  "body": "**State:** drafting.\n"}),
            "--expected-revision", r.json()["revision"], *base)
    assert r.code == 0, r.stderr
    assert r.json()["pending_edits"] == 6
    # nothing reached the active root yet
    assert (root.path / "PURSUITS.md").read_text() == PURSUITS
    for verb in ("undo", "undo", "redo"):
        r = cli("--headless", "pursuit", verb, *base)
        assert r.code == 0, r.stderr
    st = r.json()
    assert st["description"] == "redo: pursuit: focus ship-the-cli" and st["cursor"] == 5 and st["can_redo"]
    assert st["focus"] == ["faster-builds", "ship-the-cli"]
    before = head(root)
    r = cli("--headless", "pursuit", "checkpoint", *base)
    assert r.code == 0, r.stderr
    out = r.json()
    expected = """\
# Pursuits

## Focus

- `faster-builds`
- `ship-the-cli`

## Faster builds {#faster-builds} → [dep:keep-node]

**State:** measuring.

## Ship the CLI! {#ship-the-cli}

### Write the docs {#write-docs}

### Cache the deps {#cache-deps} → [rel:m2]
"""
    repo = git.Repo(root.path)
    landed = repo.commit(out["landed_commit"])
    assert landed.parents[0].hexsha == before and landed.hexsha == head(root)
    assert (landed.tree / "PURSUITS.md").data_stream.read().decode() == expected
    assert (root.path / "PURSUITS.md").read_text() == expected
    assert list(landed.stats.files) == ["PURSUITS.md"]
    msg = landed.message
    assert msg.startswith("pursuit: edit map\n\n- pursuit: create ship-the-cli\n")
    assert "- pursuit: edit body" not in msg  # undone and not redone
    assert "RightMemory-Pursuit-Editor: 1" in msg and f"RightMemory-Operation: {out['operation_id']}" in msg
    # one trailer block in the original's order, signed over this exact parent and tree
    # (docs/formats.md, "Pursuit editor")
    block = msg.rstrip().rsplit("\n\n", 1)[1].splitlines()
    assert [line.split(": ")[0] for line in block] == [*pursuit.COMMIT_TRAILERS.values(), pursuit.SIGNATURE_TRAILER]
    _, values = pursuit.trailer_values(msg)
    assert values["action"] == "batch" and values["target"] == "-" and values["id_remaps"] == "[]"
    assert values["signature"] == pursuit.commit_signature(root, values, before, landed.tree.hexsha)
    assert values["signature"] != pursuit.commit_signature(root, values, landed.hexsha, landed.tree.hexsha)
    # the journal starts over at the new head
    st = pursuit.show(root)
    assert st.pending_edits == 0 and not st.can_undo and not st.can_redo and st.head == head(root)
    with pytest.raises(ConflictError, match="nothing to undo"):
        pursuit.undo(root)


def test_stale_revision_is_refused_with_the_current_one(proot, cli):
    root = proot
    old = rev(root)
    apply(root, type="create", title="One")
    with pytest.raises(ConflictError) as info:
        pursuit.apply(root, {"type": "create", "title": "Two"}, expected_revision=old)
    assert info.value.details["revision"] == rev(root)
    r = cli("--headless", "pursuit", "apply", "--op", '{"type": "create", "title": "Two"}',
            "--expected-revision", old, "--root", str(root.path), "--json")
    assert r.code == 3 and json.loads(r.stdout)["details"]["revision"] == rev(root)
    # a commit to the root moves the revision too
    current = rev(root)
    commit(root, "update: unrelated", {"MEMORY.md": MEMORY + "- `m3` More → []\n"})
    with pytest.raises(ConflictError):
        pursuit.apply(root, {"type": "create", "title": "Two"}, expected_revision=current)
    # ... but the pending edits, on a file the commit did not touch, still apply and land
    apply(root, type="create", title="Two")
    out = pursuit.checkpoint(root)
    assert out.changed_paths == ["PURSUITS.md"] and "{#two}" in (root.path / "PURSUITS.md").read_text()


def test_delete_drops_exactly_the_edges_to_deleted_ids(proot):
    root = proot
    out = apply(root, type="delete", id="faster-builds")
    assert out.changed_files == ["MEMORY.md", "PURSUITS.md"] and out.focus == []
    landed = pursuit.checkpoint(root)
    assert landed.message == "pursuit: delete faster-builds"
    repo = git.Repo(root.path)
    diff = repo.git.diff(f"{landed.landed_commit}~1", landed.landed_commit, "--", "MEMORY.md")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-- `m1` CI speed matters → [rel:faster-builds, dep:keep-node]",
                       "+- `m1` CI speed matters → [dep:keep-node]"]
    assert (root.path / "PURSUITS.md").read_text() == "# Pursuits\n\n## Focus\n"
    assert repo.head.commit.message.startswith("pursuit: delete faster-builds\n")


def test_every_step_is_validated(proot):
    root = proot
    before = rev(root)
    bad = [
        {"type": "create", "title": "Deep", "parent_id": "cache-deps"},  # below ###
        {"type": "create", "title": "x {#y}"},
        {"type": "create", "title": "two\nlines"},
        {"type": "rename", "id": "nope", "title": "x"},
        {"type": "rename", "id": "keep-node", "title": "x"},  # a Memory item
        {"type": "move", "id": "faster-builds", "parent_id": "cache-deps"},  # under itself
        {"type": "edit_body", "id": "faster-builds", "body": "### Sneaky {#sneaky}\n"},
        {"type": "edit_body", "id": "faster-builds", "body": "- `new-node` a node → []\n"},
        {"type": "set_focus", "id": "faster-builds", "focused": "yes"},
        {"type": "explode"},
    ]
    for op in bad:
        with pytest.raises(UsageError) as info:
            pursuit.apply(root, op, expected_revision=before)
        assert info.value.kind in ("invalid_operation", "bad_input"), op
    assert rev(root) == before and pursuit.show(root).pending_edits == 0
    # ids: slugs, deduplicated against ids and PURSUIT_ files; `rules` is reserved
    assert apply(root, type="create", title="Faster Builds").selected_id == "faster-builds-2"
    assert apply(root, type="create", title="Rules").selected_id.startswith("p-")
    assert pursuit.slug("Ünïcode & spaces!") == "n-code-spaces"
    # focusing what is focused changes nothing and records nothing
    out = apply(root, type="set_focus", id="faster-builds", focused=True)
    assert out.changed is False and out.pending_edits == 2


def test_a_tampered_journal_is_refused_until_discarded(proot):
    root = proot
    apply(root, type="create", title="One")
    path = root.runtime / "pursuit-editor" / "session.json"
    doc = json.loads(path.read_text())
    doc["record"]["cursor"] = 0
    path.write_text(json.dumps(doc))
    with pytest.raises(ConflictError, match="signature"):
        pursuit.show(root)
    st = pursuit.discard(root)
    assert st.pending_edits == 0 and [p["id"] for p in st.pursuits] == ["faster-builds", "cache-deps"]


def test_sessions_do_not_mix_pending_edits(proot):
    root = proot
    pursuit.apply(root, {"type": "create", "title": "Mine"}, expected_revision=rev(root), session="alice")
    with pytest.raises(ConflictError) as info:
        pursuit.apply(root, {"type": "create", "title": "Yours"}, expected_revision=rev(root), session="bob")
    assert info.value.kind == "session_conflict"
    out = pursuit.checkpoint(root, session="alice")
    assert out.landed_commit and "Mine" in (root.path / "PURSUITS.md").read_text()
    assert pursuit.apply(root, {"type": "create", "title": "Yours"}, expected_revision=rev(root),
                         session="bob").pending_edits == 1


def test_another_sessions_edits_are_named_as_typed_and_discard_session_drops_only_its_own(proot, cli):
    root = proot
    pursuit.apply(root, {"type": "create", "title": "Mine"}, expected_revision=rev(root), session="alice@laptop")
    st = pursuit.show(root)
    # the journal keeps the original's hash; the typed session comes from rmtui's own state
    assert st.owner != "alice@laptop" and len(st.owner) == 64 and st.owner_session == "alice@laptop"
    journal = (root.runtime / "pursuit-editor" / "session.json").read_text()
    assert "alice@laptop" not in journal
    with pytest.raises(ConflictError, match="session 'alice@laptop' has pending Pursuit edits") as info:
        pursuit.apply(root, {"type": "create", "title": "Yours"}, expected_revision=rev(root), session="bob")
    assert "pursuit discard --session alice@laptop" in info.value.message
    # discard --session of someone else: refused (exit 3), nothing dropped
    out = cli("--headless", "pursuit", "discard", "--session", "bob", "--root", str(root.path))
    assert out.code == 3 and "belong to session 'alice@laptop', not to session 'bob'" in out.stderr
    assert pursuit.show(root).pending_edits == 1
    out = cli("--headless", "pursuit", "discard", "--session", "x\ny", "--root", str(root.path))
    assert out.code == 2 and "session id" in out.stderr
    out = cli("--headless", "pursuit", "discard", "--session", "alice@laptop", "--root", str(root.path), "--json")
    assert out.code == 0, out.stderr
    assert out.json()["pending_edits"] == 0 and pursuit.show(root).pending_edits == 0


def test_a_forged_session_name_is_not_shown(proot):
    root = proot
    pursuit.apply(root, {"type": "create", "title": "Mine"}, expected_revision=rev(root), session="carol")
    owner = pursuit.show(root).owner
    names = root.runtime / "pursuit-editor" / "sessions.json"
    names.write_text(json.dumps({owner: "mallory"}))  # a name whose hash is not the owner's
    assert pursuit.show(root).owner_session is None
    names.write_text("{not json")
    assert pursuit.show(root).owner_session is None and pursuit.show(root).pending_edits == 1


def test_edit_body_and_move_keep_the_layout(proot):
    root = proot
    apply(root, type="edit_body", id="faster-builds", body="**State:** cached.\n\n**Next:**\n- `do` warm the cache\n")
    apply(root, type="create", title="Later", after_id="faster-builds")
    apply(root, type="move", id="cache-deps", parent_id="later")
    apply(root, type="move", id="later", after_id=None, parent_id=None)
    pursuit.checkpoint(root)
    assert (root.path / "PURSUITS.md").read_text() == """\
# Pursuits

## Focus

- `faster-builds`

## Faster builds {#faster-builds} → [dep:keep-node]

**State:** cached.

**Next:**
- `do` warm the cache

## Later {#later}

### Cache the deps {#cache-deps} → [rel:m2]
"""


def test_the_supervisor_refuses_an_editor_commit_that_changes_memory_otherwise(proot):
    import subprocess
    from pathlib import Path

    from rmtui.engine.writes.admission import AdmissionRefused
    from rmtui.engine.writes.supervisor import Supervisor

    root = proot
    before = head(root)
    with Supervisor(root) as sup:
        op = sup.begin(pursuit.KIND, pursuit.WRITER)
        mem = Path(op.worktree) / "MEMORY.md"
        mem.write_text(mem.read_text().replace("CI speed matters", "CI speed matters a lot"))
        subprocess.run(["git", "commit", "-qam", "pursuit: sneak"], cwd=op.worktree, check=True)
        with pytest.raises(AdmissionRefused, match="reference-repair-only"):
            sup.finish(op)
        sup.fail(sup.store.get(op.id), "refused")
    assert head(root) == before
