"""Recovery (docs/architecture.md, "Operations and receipts"): kill -9 at every phase boundary of an operation that
carries evidence, restart with `recover`, and nothing is half-published or lost."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from supervisor_kit import MEMORY, add_memory_node, commit, git, porcelain, seed

from rmtui.engine.evidence.batching import batch_id
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.roots import MemoryRoot, init_root, open_root
from rmtui.engine.writes import effects
from rmtui.engine.writes.operations import FINAL_PHASES
from rmtui.engine.writes.publication import PIN_PREFIX, pin_ref
from rmtui.engine.writes.supervisor import Supervisor

WRITER = Path(__file__).with_name("supervisor_writer.py")
CRASHPOINTS = ("after-running", "after-worktree", "after-prepared", "before-cas", "after-cas", "after-worktree-sync",
               "after-publish", "after-final")
PUBLISHED_BY_THEN = {"after-prepared": False, "before-cas": False, "after-cas": True, "after-worktree-sync": True,
                     "after-publish": True, "after-final": True}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("template") / "root"
    seed(init_root(path))
    return path


def fresh(template: Path, dest: Path) -> MemoryRoot:
    shutil.copytree(template, dest, symlinks=True)
    return open_root(dest)


def leftovers(root: Path) -> dict:
    wts = [line for line in git(root, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]
    wdir = root / ".runtime" / "worktrees"
    return {
        "worktrees": len(wts) - 1,
        "dirs": sorted(p.name for p in wdir.iterdir()) if wdir.is_dir() else [],
        "branches": git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads/rmtui/op/"),
        "pins": git(root, "for-each-ref", PIN_PREFIX),
    }


@pytest.mark.slow
@pytest.mark.parametrize("point", CRASHPOINTS)
def test_kill_at_each_phase_boundary_then_recover(template, tmp_path, cli, point):
    root = fresh(template, tmp_path / "root")
    rp = root.path
    old_head = git(rp, "rev-parse", "HEAD")
    q = EvidenceQueue(root)
    uids = [q.submit("sess", f"fact {i}".encode())["uid"] for i in range(2)]
    bid = batch_id([q.get(u) for u in uids])
    q.claim(uids, bid)

    proc = subprocess.run([sys.executable, str(WRITER), str(rp), "update", "--batch", bid,
                           "--uids", ",".join(uids), "--node", "crashy"],
                          env={**os.environ, "RMTUI_CRASHPOINT": point}, capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()
    with Supervisor(root) as sup:
        (op,) = sup.store.list()
    assert not op.final or point == "after-final"
    if point in PUBLISHED_BY_THEN:
        candidate = op.candidate_commit  # what admission prepared; recovery must publish exactly this
        assert candidate and git(rp, "cat-file", "-t", candidate) == "commit"
        if PUBLISHED_BY_THEN[point]:
            assert git(rp, "rev-parse", "HEAD") == candidate
    if point == "before-cas":  # nothing moved yet: the work tree is never synced before the ref
        assert git(rp, "rev-parse", "HEAD") == old_head and porcelain(rp) == ""
    if point == "after-cas":  # killed between update-ref and the work-tree sync: behind the ref, never ahead
        assert git(rp, "diff", "--cached", "--name-only").split() == ["MEMORY.md", f"update_records/{bid}.json"]
        assert "`crashy`" not in (rp / "MEMORY.md").read_text()

    r = cli("--headless", "recover", "--root", str(rp), "--json")
    assert r.code == 0, r.stderr
    assert r.json()["errors"] == []

    with Supervisor(root) as sup:
        ops = sup.store.list()
        assert all(o.phase in FINAL_PHASES and all(e.state == "done" for e in o.effects) for o in ops), ops
        (op,) = ops
        receipt = sup.store.receipt(op.id)
    head = git(rp, "rev-parse", "HEAD")
    states = {u: q.get(u).state for u in uids}
    if point in ("after-running", "after-worktree"):
        assert op.phase == "abandoned" and receipt.landed_commit is None
        assert head == old_head  # no partial publication
        assert set(states.values()) == {"queued"}  # evidence back in the queue
    else:
        assert op.phase == "committed"
        assert receipt.landed_commit == candidate  # published as prepared, nothing re-run
        assert head == candidate  # the update record is part of the one landed commit
        assert f"update_records/{bid}.json" in git(rp, "ls-tree", "-r", "--name-only", head)
        assert "`crashy`" in git(rp, "show", f"{head}:MEMORY.md")
        assert git(rp, "log", "--format=%H", f"{old_head}..{candidate}") == candidate  # one commit, complete
        assert set(states.values()) == {"consumed"}
    assert porcelain(rp) == ""  # the work tree matches HEAD
    assert cli("--headless", "validate", "--root", str(rp)).code == 0
    fsck = subprocess.run(["git", "fsck", "--no-dangling", "--no-progress"], cwd=rp, capture_output=True)
    assert fsck.returncode == 0 and not fsck.stdout.strip(), fsck
    assert leftovers(rp) == {"worktrees": 0, "dirs": [], "branches": "", "pins": ""}
    q.close()


@pytest.fixture
def seeded(template, tmp_path) -> MemoryRoot:
    return fresh(template, tmp_path / "root")


def test_running_op_of_a_dead_process_is_abandoned_and_its_evidence_released(seeded):
    q = EvidenceQueue(seeded)
    uid = q.submit("s", b"evidence")["uid"]
    b1 = batch_id([q.get(uid)])
    q.claim([uid], b1)
    with Supervisor(seeded) as sup:
        op = sup.begin("update", "update", batch_id=b1, candidate_uids=[uid], lease=dead_lease())
        alive = sup.begin("update", "update")  # ours: this process is alive, it is left alone
        out = sup.recover()
        assert out["abandoned"] == [op.id]
        assert sup.store.get(op.id).phase == "abandoned"
        assert sup.store.get(alive.id).phase == "running" and Path(alive.worktree).is_dir()
    assert q.get(uid).state == "queued" and q.get(uid).batch_id is None
    assert not Path(op.worktree).exists()
    q.close()


def test_prepared_op_gone_stale_fails_in_recovery_and_releases_evidence(seeded):
    q = EvidenceQueue(seeded)
    uid = q.submit("s", b"evidence")["uid"]
    b2 = batch_id([q.get(uid)])
    q.claim([uid], b2)
    with Supervisor(seeded) as sup:
        op = sup.begin("update", "update", batch_id=b2, candidate_uids=[uid])
        commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "late")})
        sup.prepare(sup.store.get(op.id))
        other = sup.begin("update", "update")
        commit(other.worktree, {"MEMORY.md": add_memory_node(MEMORY, "early")})
        sup.finish(other)
        out = sup.recover()
        assert out["failed"] == [op.id]
        rec = sup.store.get(op.id)
        assert rec.phase == "failed" and "stale-base" in rec.error
    assert q.get(uid).state == "queued"
    assert git(seeded.path, "for-each-ref", PIN_PREFIX) == ""
    q.close()


def test_prepared_op_blocked_by_a_dirty_active_root_stays_prepared_until_clean(seeded):
    with Supervisor(seeded) as sup:
        op = sup.begin("update", "update")
        commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
        sup.prepare(sup.store.get(op.id))
        (seeded.path / "MEMORY.md").write_text("a person's unsaved edit\n")
        out = sup.recover()
        assert out["published"] == [] and out["errors"] and "protected" in out["errors"][0]
        assert sup.store.get(op.id).phase == "prepared"
        git(seeded.path, "checkout", "--", "MEMORY.md")
        assert sup.recover()["published"] == [op.id]
        assert sup.store.get(op.id).phase == "committed"


def test_failed_effects_are_retried_by_recover(seeded, monkeypatch):
    calls = []

    def flaky(sup, op):
        calls.append(op.id)
        if len(calls) == 1:
            raise OSError("disk hiccup")

    monkeypatch.setitem(effects.EFFECTS, "flaky", flaky)
    with Supervisor(seeded) as sup:
        op = sup.begin("update", "update", effects=("flaky",))
        commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
        receipt = sup.finish(op)
        assert receipt.phase == "committed"
        assert sup.store.get(op.id).effects[0].state == "failed"
        assert any("disk hiccup" in w for w in sup.store.receipt(op.id).warnings)
        assert [o.id for o in sup.store.list(unfinished=True)] == [op.id]
        assert sup.recover()["effects"] == [op.id]
        eff = sup.store.get(op.id).effects[0]
        assert (eff.state, eff.attempts) == ("done", 2)
        assert sup.store.list(unfinished=True) == []


def test_our_stale_worktrees_and_branches_are_cleaned_foreign_folders_never(seeded):
    rp = seeded.path
    wt = seeded.runtime / "worktrees" / "update-orphan"  # ours: on our branch namespace, record lost
    git(rp, "worktree", "add", "-q", "-b", "rmtui/op/update-orphan", str(wt), "HEAD")
    git(rp, "branch", "rmtui/op/update-ghost")
    git(rp, "update-ref", pin_ref("update-ghost"), "HEAD")  # a pin we have no record of: left alone
    (seeded.runtime / "worktrees" / "half-made").mkdir()  # not ours: never touched
    foreign = seeded.runtime / "worktrees" / "guidance-0123abcd"  # the original's, with uncommitted edits
    git(rp, "worktree", "add", "-q", "--detach", str(foreign), "HEAD")
    (foreign / "MEMORY.md").write_text("# Memory\n\nwork in progress\n")
    with Supervisor(seeded) as sup:
        live = sup.begin("update", "update")
        out = sup.recover()
        assert str(wt) in out["cleaned"] and "rmtui/op/update-ghost" in out["cleaned"]
        assert pin_ref("update-ghost") not in out["cleaned"]
        assert str(foreign) not in out["cleaned"]
        assert Path(live.worktree).is_dir() and sup.store.get(live.id).phase == "running"
    left = leftovers(rp)
    assert sorted(left["dirs"]) == sorted([live.id, "half-made", "guidance-0123abcd"])
    assert left["branches"].strip() == f"rmtui/op/{live.id}"
    assert (foreign / "MEMORY.md").read_text() == "# Memory\n\nwork in progress\n"


def test_recover_cli_reports_nothing_to_do_on_a_clean_root(seeded, cli):
    r = cli("--headless", "recover", "--root", str(seeded.path))
    assert r.code == 0 and r.stdout.strip() == "nothing to recover"
    r = cli("--headless", "recover", "--root", str(seeded.path), "--json")
    assert json.loads(r.stdout)["published"] == []


def test_prepared_op_is_rebased_over_an_insight_log_in_recovery_even_without_its_worktree(seeded):
    rp = seeded.path
    with Supervisor(seeded) as sup:
        op = sup.begin("update", "update")
        commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "kept")})
        prepared = sup.prepare(sup.store.get(op.id))
        ins = sup.begin("insight", "insight")
        commit(ins.worktree, {"insight_logs/2026-04-01-000000.md": "# log\n"})
        moved = sup.finish(ins).landed_commit
        shutil.rmtree(op.worktree)  # lost with a crashed machine's tmp, say
        assert sup.recover()["published"] == [op.id]
        receipt = sup.store.receipt(op.id)
    assert git(rp, "rev-parse", "HEAD~1") == moved and receipt.landed_commit == git(rp, "rev-parse", "HEAD")
    assert git(rp, "rev-parse", f"{prepared.candidate_commit}^{{tree}}") != git(rp, "rev-parse", "HEAD^{tree}")
    assert "`kept`" in (rp / "MEMORY.md").read_text() and (rp / "insight_logs/2026-04-01-000000.md").is_file()
    assert porcelain(rp) == "" and leftovers(rp) == {"worktrees": 0, "dirs": [], "branches": "", "pins": ""}


def dead_lease() -> dict:
    pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)
    return {"host": os.uname().nodename, "pid": pid, "start": "0"}


def test_recover_cli_exits_1_while_an_operation_stays_stuck(seeded, cli):
    with Supervisor(seeded) as sup:
        op = sup.begin("update", "update", lease=dead_lease())
        commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
        sup.prepare(sup.store.get(op.id))
    (seeded.path / "MEMORY.md").write_text("unsaved\n")
    r = cli("--headless", "recover", "--root", str(seeded.path))
    assert r.code == 1 and "dirty-active-root" in r.stdout
    git(seeded.path, "checkout", "--", "MEMORY.md")
    r = cli("--headless", "recover", "--root", str(seeded.path), "--json")
    assert r.code == 0 and r.json()["published"] == [op.id]


def test_recovery_keeps_the_files_a_removed_worktree_held_outside_memory(seeded, cli):
    """A dead writer's worktree (abandoned) and an orphan one of ours (record lost): what they
    hold that no landing carries is moved to .runtime/kept/ and named, never deleted."""
    rp = seeded.path
    orphan = seeded.runtime / "worktrees" / "update-orphan"
    git(rp, "worktree", "add", "-q", "-b", "rmtui/op/update-orphan", str(orphan), "HEAD")
    (orphan / "notes.md").write_text("orphan's notes\n")
    with Supervisor(seeded) as sup:
        op = sup.begin("update", "update", lease=dead_lease())
    (Path(op.worktree) / "scratch.txt").write_text("dead writer's scratch\n")
    r = cli("--headless", "recover", "--root", str(rp), "--json")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["abandoned"] == [op.id] and str(orphan) in out["cleaned"]
    kept = seeded.runtime / "kept"
    assert (kept / op.id / "scratch.txt").read_text() == "dead writer's scratch\n"
    assert (kept / "update-orphan" / "notes.md").read_text() == "orphan's notes\n"
    (said,) = out["kept"]
    assert "notes.md" in said and str(kept / "update-orphan") in said and "untracked-files" in said
    with Supervisor(seeded) as sup:
        receipt = sup.store.receipt(op.id)
    assert any("scratch.txt" in w and str(kept / op.id) in w for w in receipt.warnings)
    assert not orphan.exists() and not Path(op.worktree).exists()
