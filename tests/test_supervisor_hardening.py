"""Hardening of the write path: admission checks exactly what it publishes,
a branch moved behind the supervisor's back is refused, a dead publisher never wedges the root,
and configuration reaches the root only admitted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from supervisor_kit import MEMORY, add_memory_node, commit, git, porcelain, seed, snapshot, track_config, write

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.evidence.batching import batch_id
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.writes import admission
from rmtui.engine.writes.admission import AdmissionRefused, BranchMoved, check_tree_object
from rmtui.engine.writes.publication import MARKER, pin_ref
from rmtui.engine.writes.supervisor import Supervisor

INVALID = MEMORY.replace("[rel:test]", "[rel:nowhere]")


@pytest.fixture
def sup(root):
    seed(root)
    track_config(root)  # the config-guarding cases need a root that tracks it
    s = Supervisor(root)
    yield s
    s.close()


def state(root: Path) -> dict:
    """The root's bytes, refs and index, without the pins of prepared operations (ours, kept for them)."""
    return {k: v for k, v in snapshot(root).items() if not k.startswith(".git/refs/rightmemory/")}


def untouched(root: Path, head: str, before: dict) -> None:
    assert git(root, "rev-parse", "HEAD") == head
    assert state(root) == before
    assert porcelain(root) == ""


def no_git_locks(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / ".git").rglob("*.lock"))


# -- defect 1: admission checks the commit, not the writer's files ------------------------------------------

@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
def test_an_invalid_commit_hidden_by_index_flags_is_refused(sup, flag, monkeypatch):
    root = sup.root.path
    head, before = git(root, "rev-parse", "HEAD"), state(root)
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": INVALID}, "update: broken graph")
    git(op.worktree, "update-index", flag, "MEMORY.md")
    write(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "looks-fine")})  # a valid file on disk
    assert git(op.worktree, "status", "--porcelain") == ""  # git status sees nothing
    with pytest.raises(AdmissionRefused) as info:
        sup.finish(op)
    assert info.value.rule == "hidden-change" and info.value.details["path"] == "MEMORY.md"
    # and without the flag check, the tree itself (read from Git objects) is what fails
    monkeypatch.setattr(admission, "hidden_paths", lambda repo: [])
    with pytest.raises(AdmissionRefused) as info:
        sup.finish(op)
    assert info.value.rule == "invalid-graph" and "nowhere" in str(info.value)
    untouched(root, head, before)
    assert sup.store.get(op.id).phase == "running"


def test_the_tree_check_reads_git_objects_never_the_files_on_disk(sup):
    op = sup.begin("update", "update")
    bad = commit(op.worktree, {"MEMORY.md": INVALID})
    write(op.worktree, {"MEMORY.md": MEMORY})
    with pytest.raises(AdmissionRefused, match="nowhere"):
        check_tree_object(sup.repo, bad, "update")
    assert check_tree_object(sup.repo, op.base_commit, "update") == []


def test_maintain_land_of_an_invalid_commit_hidden_by_skip_worktree_is_refused(sup, cli):
    root = sup.root.path
    r = cli("--headless", "maintain", "begin", "--root", str(root), "--json")
    wt = Path(r.json()["worktree"])
    head, before = git(root, "rev-parse", "HEAD"), state(root)
    commit(wt, {"MEMORY.md": INVALID}, "maintain: broken")
    git(wt, "update-index", "--skip-worktree", "MEMORY.md")
    write(wt, {"MEMORY.md": MEMORY})
    r = cli("--headless", "maintain", "land", "--root", str(root))
    assert r.code == 1 and "hidden-change" in r.stderr, r.stderr
    untouched(root, head, before)
    assert cli("--headless", "validate", "--root", str(root)).code == 0


def test_a_writer_moving_the_root_branch_from_its_worktree_is_refused(sup, cli):
    """Worktrees share refs: `git update-ref refs/heads/main` in one moves the root's branch."""
    root = sup.root
    rp = root.path
    q = EvidenceQueue(root)
    uid = q.submit("s", b"a fact")["uid"]
    bid = batch_id([q.get(uid)])
    q.claim([uid], bid)
    head = git(rp, "rev-parse", "HEAD")
    op = sup.begin("update", "update", batch_id=bid, candidate_uids=[uid], effects=("evidence_consumed",))
    cand = commit(op.worktree, {"MEMORY.md": INVALID}, "update: smuggled")
    git(op.worktree, "update-ref", "refs/heads/main", cand)  # the root's branch, from the worktree
    assert git(rp, "rev-parse", "HEAD") == cand
    with pytest.raises(BranchMoved) as info:
        sup.finish(op)
    assert info.value.exit_code == 3 and "MEMORY.md" in info.value.details["paths"]
    rec = sup.store.get(op.id)
    assert not rec.final and rec.landed_commit is None  # neither landed nor "no change"
    assert q.get(uid).state == "claimed"  # the evidence is not consumed by a fake no-change
    r = cli("--headless", "recover", "--root", str(rp))
    assert r.code == 1 and "branch-moved" in r.stdout
    # a person puts the branch back: the writer's commit is then admitted on its merits (refused)
    git(rp, "update-ref", "refs/heads/main", head)
    with pytest.raises(AdmissionRefused, match="invalid-graph"):
        sup.finish(op)
    assert git(rp, "rev-parse", "HEAD") == head and porcelain(rp) == ""
    q.close()


def test_a_branch_moved_to_a_foreign_commit_is_never_built_on(sup):
    rp = sup.root.path
    head = git(rp, "rev-parse", "HEAD")
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "honest")})
    sup.prepare(sup.store.get(op.id))
    other = sup.begin("insight", "insight")
    foreign = commit(other.worktree, {"insight_logs/x.md": "# log\n", "MEMORY.md": INVALID})
    git(other.worktree, "update-ref", "refs/heads/main", foreign, head)
    before = state(rp)
    with pytest.raises(BranchMoved):
        sup.finish(op)
    assert state(rp) == before and git(rp, "rev-parse", "HEAD") == foreign
    assert sup.store.get(op.id).phase == "prepared"  # published once the branch is put back
    git(rp, "update-ref", "refs/heads/main", head)
    assert sup.finish(op).phase == "committed"
    assert "`honest`" in (rp / "MEMORY.md").read_text() and porcelain(rp) == ""


# -- defect 2: a dead publisher never wedges the root; refusals roll back ------------------------------------

def test_a_refused_landing_on_a_detached_head_leaves_the_root_as_it_was(sup, cli):
    rp = sup.root.path
    r = cli("--headless", "maintain", "begin", "--root", str(rp), "--json")
    wt = Path(r.json()["worktree"])
    (wt / "MEMORY.md").write_text(add_memory_node(MEMORY, "manual"))
    git(rp, "checkout", "-q", "--detach")
    head, before = git(rp, "rev-parse", "HEAD"), state(rp)
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 2 and "detached HEAD" in r.stderr
    untouched(rp, head, before)  # nothing staged, nothing written
    git(rp, "checkout", "-q", "main")
    r = cli("--headless", "recover", "--root", str(rp), "--json")
    assert r.code == 0 and len(r.json()["published"]) == 1
    assert "`manual`" in (rp / "MEMORY.md").read_text() and porcelain(rp) == ""


def _dead_publisher(sup: Supervisor, **fields) -> None:
    """What a publisher killed inside its memory.lock section leaves: the marker and Git's locks."""
    (sup.root.runtime / MARKER).write_text(json.dumps({"pid": 999999999, **fields}))
    gd = sup.root.path / ".git"
    for rel in ("index.lock", "HEAD.lock", "refs/heads/main.lock", "packed-refs.lock"):
        (gd / rel).write_text("")


def test_git_locks_of_a_dead_publisher_are_cleared_and_the_next_landing_works(sup, cli):
    rp = sup.root.path
    _dead_publisher(sup, op="update-x")
    r = cli("--headless", "recover", "--root", str(rp), "--json")
    assert r.code == 0, r.stdout
    repaired = "\n".join(r.json()["repaired"])
    assert "index.lock" in repaired and "HEAD.lock" in repaired and "main.lock" in repaired
    assert no_git_locks(rp) == [] and not (sup.root.runtime / MARKER).exists()
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "after")})
    assert sup.finish(op).phase == "committed" and porcelain(rp) == ""


def test_a_landing_clears_a_dead_publishers_locks_before_it_starts(sup):
    rp = sup.root.path
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
    _dead_publisher(sup)
    assert sup.finish(op).phase == "committed"
    assert no_git_locks(rp) == [] and porcelain(rp) == ""


def test_an_interrupted_sync_is_finished_from_the_marker(sup):
    """Killed after the CAS: the ref is at the candidate, index and work tree behind (never ahead)."""
    rp = sup.root.path
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "synced-later")})
    prepared = sup.prepare(sup.store.get(op.id))
    old = git(rp, "rev-parse", "HEAD")
    git(rp, "update-ref", "refs/heads/main", prepared.candidate_commit, old)  # the CAS, then death
    _dead_publisher(sup, op=op.id, branch="refs/heads/main", **{"from": old, "to": prepared.candidate_commit})
    (rp / "MEMORY.md").write_text("half-writ")  # a file the dead sync was writing
    out = sup.recover()
    assert out["published"] == [op.id] and out["errors"] == []
    assert any("work-tree sync" in line for line in out["repaired"])
    assert porcelain(rp) == "" and "`synced-later`" in (rp / "MEMORY.md").read_text()
    assert no_git_locks(rp) == []


def test_a_lock_nobody_explains_is_named_not_deleted(sup, cli):
    rp = sup.root.path
    lock = rp / ".git" / "index.lock"
    lock.write_text("")  # a git command someone runs in the root, as far as rmtui can tell
    r = cli("--headless", "recover", "--root", str(rp))
    assert r.code == 1 and "index.lock" in r.stdout and "no rmtui process holds" in r.stdout
    assert lock.exists()
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
    lock.unlink()
    (rp / ".git" / "refs" / "heads" / "main.lock").write_text("")
    head, before = git(rp, "rev-parse", "HEAD"), state(rp)
    with pytest.raises(ConflictError, match="Git lock is held"):
        sup.finish(op)
    assert git(rp, "rev-parse", "HEAD") == head and state(rp) == before and porcelain(rp) == ""
    assert sup.store.get(op.id).phase == "prepared"
    (rp / ".git" / "refs" / "heads" / "main.lock").unlink()
    assert sup.finish(op).phase == "committed"


def test_worktree_locks_of_a_dead_lander_are_cleared_by_recover(sup, cli):
    rp = sup.root.path
    r = cli("--headless", "maintain", "begin", "--root", str(rp), "--json")
    op_id, wt = r.json()["operation_id"], Path(r.json()["worktree"])
    admin = next(d for d in (rp / ".git" / "worktrees").iterdir()
                 if Path((d / "gitdir").read_text().strip()).parent == wt)
    (admin / "index.lock").write_text("")  # `git commit` of a killed `maintain land`
    (rp / ".git" / "refs" / "heads" / "rmtui" / "op" / f"{op_id}.lock").write_text("")
    (sup.root.runtime / "oplocks").mkdir(exist_ok=True)
    (sup.root.runtime / "oplocks" / f"{op_id}.landing").write_text("999999999")
    r = cli("--headless", "recover", "--root", str(rp), "--json")
    assert r.code == 0 and any("index.lock" in x for x in r.json()["repaired"])
    assert no_git_locks(rp) == []
    (wt / "MEMORY.md").write_text(add_memory_node(MEMORY, "manual"))
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert "`manual`" in (rp / "MEMORY.md").read_text()


def test_a_finished_operations_ref_locks_do_not_block_its_cleanup(sup):
    rp = sup.root.path
    op = sup.begin("update", "update")
    (rp / ".git" / f"{pin_ref(op.id)}.lock").parent.mkdir(parents=True, exist_ok=True)
    (rp / ".git" / f"{pin_ref(op.id)}.lock").write_text("")
    (rp / ".git" / "refs" / "heads" / "rmtui" / "op" / f"{op.id}.lock").write_text("")
    sup.abandon(op, "test")
    assert no_git_locks(rp) == []
    assert git(rp, "for-each-ref", "refs/heads/rmtui/op/") == "" and not Path(op.worktree).exists()


# -- defect 3: configuration only through admission ---------------------------------------------------------

@pytest.mark.parametrize(("name", "content", "rule", "why"), [
    # bytes that are not text are refused by the rule every tracked file passes, before the loader's
    ("rightmemory.toml", b"\x00\xff\xfe binary", "not-text", "UTF-8"),
    ("rightmemory.toml", b"[update\nx = 1\n", "config", "malformed TOML"),
    ("rightmemory.toml", b"[update]\nno_such_key = 3\n", "config", "unknown key"),
    ("rightmemory.toml", b"[update.async]\ntarget_batch_candidates = -1\n", "config", "target_batch_candidates"),
    ("shared_views.toml", b"views = [\n", "config", "malformed TOML"),
    ("shared_views.toml", b"\xff\xfe", "not-text", "UTF-8"),
])
def test_maintenance_cannot_land_a_config_the_loader_refuses(sup, cli, name, content, rule, why):
    rp = sup.root.path
    r = cli("--headless", "maintain", "begin", "--root", str(rp), "--json")
    wt = Path(r.json()["worktree"])
    head, before = git(rp, "rev-parse", "HEAD"), state(rp)
    (wt / name).write_bytes(content)
    r = cli("--headless", "maintain", "land", "--root", str(rp), "--json")
    assert r.code == 1, r.stdout
    assert r.json()["details"]["rule"] == rule and r.json()["details"]["path"] == name
    assert why in r.stderr
    untouched(rp, head, before)
    assert cli("--headless", "status", "--root", str(rp)).code == 0
    assert cli("--headless", "submit", "--root", str(rp), "--session", "s", input="still works\n").code == 0


def test_maintenance_lands_a_valid_config_change(sup, cli):
    rp = sup.root.path
    r = cli("--headless", "maintain", "begin", "--root", str(rp), "--json")
    wt = Path(r.json()["worktree"])
    text = (wt / "rightmemory.toml").read_text()
    assert "target_batch_candidates = 4" not in text
    (wt / "rightmemory.toml").write_text(text.replace("target_batch_candidates =", "target_batch_candidates = 4 #", 1))
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert cli("--headless", "config", "get", "update.async.target_batch_candidates", "--root",
               str(rp)).stdout.strip() == "4"


def test_config_set_of_a_tracked_file_lands_through_the_supervisor(sup, cli):
    rp = sup.root.path
    head = git(rp, "rev-parse", "HEAD")
    r = cli("--headless", "config", "set", "update.async.target_batch_candidates", "7", "--root", str(rp), "--json")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["file"] == "rightmemory.toml" and out["landed_commit"] == git(rp, "rev-parse", "HEAD")
    assert git(rp, "rev-parse", "HEAD~1") == head
    assert git(rp, "show", "--format=%s", "--name-only",
               "HEAD").split("\n") == ["config: set update.async.target_batch_candidates", "",
                                                                                "rightmemory.toml"]
    assert git(rp, "log", "-1", "--format=%(trailers:key=RightMemory-Operation,valueonly)").startswith("config-")
    assert porcelain(rp) == "" and "target_batch_candidates = 7" in (rp / "rightmemory.toml").read_text()
    # a value the loader refuses never makes an operation, let alone a commit
    r = cli("--headless", "config", "set", "update.async.target_batch_candidates", "-3", "--root", str(rp))
    assert r.code == 2 and git(rp, "rev-parse", "HEAD") == out["landed_commit"]
    with Supervisor(sup.root) as s2:
        assert [o.phase for o in s2.store.list(kind="config")] == ["committed"]
    # an rmtui.toml key is never tracked: set in place, no commit
    r = cli("--headless", "config", "set", "update.approval", "required", "--root", str(rp), "--json")
    assert r.code == 0 and r.json()["file"] == "rmtui.toml" and r.json()["landed_commit"] is None
    assert git(rp, "rev-parse", "HEAD") == out["landed_commit"] and porcelain(rp) == ""


def test_config_set_refuses_over_uncommitted_config_edits(sup, cli):
    rp = sup.root.path
    path = rp / "rightmemory.toml"
    path.write_text(path.read_text() + "\n# a person's note\n")
    head, before = git(rp, "rev-parse", "HEAD"), state(rp)
    r = cli("--headless", "config", "set", "update.async.target_batch_candidates", "7", "--root", str(rp))
    assert r.code == 3 and "uncommitted changes" in r.stderr
    assert git(rp, "rev-parse", "HEAD") == head and state(rp) == before


def test_config_set_of_an_untracked_file_edits_it_in_place(sup, cli):
    rp = sup.root.path
    git(rp, "rm", "-q", "--cached", "rightmemory.toml")
    git(rp, "commit", "-q", "-m", "untrack the config")
    head = git(rp, "rev-parse", "HEAD")
    r = cli("--headless", "config", "set", "update.async.target_batch_candidates", "5", "--root", str(rp), "--json")
    assert r.code == 0 and r.json()["landed_commit"] is None
    assert git(rp, "rev-parse",
               "HEAD") == head and "target_batch_candidates = 5" in (rp / "rightmemory.toml").read_text()


@pytest.mark.parametrize("content",
                         [b"\xff\xfe\x00", b"[update.async]\ntarget_batch_candidates = 'many'\n", b"[nope]\n"])
def test_validate_checks_the_config_too(root, cli, content):
    (root.path / "rightmemory.toml").write_bytes(content)
    r = cli("--headless", "validate", "--root", str(root.path), "--json")
    assert r.code == 1
    assert any(i["file"] == "rightmemory.toml" and i["rule"] == "config" for i in r.json()["errors"])


def test_validate_path_of_a_worktree_checks_its_config(sup, cli):
    op = sup.begin("maintenance", "maintenance")
    (Path(op.worktree) / "shared_views.toml").write_bytes(b"= broken\n")
    r = cli("--headless", "validate", "--path", op.worktree)
    assert r.code == 1 and "shared_views.toml:1: config: malformed TOML" in r.stdout


def test_status_answers_after_every_refused_config(sup, cli):
    """The class, end to end: no supervised path leaves a config behind that stops `status`."""
    rp = sup.root.path
    with pytest.raises(UsageError):
        from rmtui.engine.writes.settings import set_value

        set_value(sup.root, "update.async.target_batch_candidates", "not a number")
    assert cli("--headless", "status", "--root", str(rp)).code == 0
