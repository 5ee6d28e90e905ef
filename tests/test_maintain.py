"""Manual maintenance through the real CLI (docs/architecture.md, "Manual maintenance"): begin on a captured head,
edit, land only while that head is current, abort; refusals keep the worktree."""

from __future__ import annotations

from pathlib import Path

import pytest
from supervisor_kit import MEMORY, add_memory_node, commit, git, porcelain, seed, snapshot, trailer_of

from rmtui.engine.writes.publication import PIN_PREFIX
from rmtui.engine.writes.supervisor import Supervisor


@pytest.fixture
def mroot(root):
    seed(root)
    return root


def begin(cli, rp: Path) -> tuple[Path, str]:
    r = cli("--headless", "maintain", "begin", "--root", str(rp))
    assert r.code == 0, r.stderr
    lines = dict(line.split(": ", 1) for line in r.stdout.strip().splitlines())
    return Path(lines["worktree"]), lines["captured head"]


def land_insight(root) -> str:
    """Move the active head with an unrelated supervised operation."""
    with Supervisor(root) as sup:
        op = sup.begin("insight", "insight")
        commit(op.worktree, {"insight_logs/2026-03-01-000000.md": "# log\n"})
        return sup.finish(op).landed_commit


def test_begin_prints_path_and_captured_head_then_land_lands(mroot, cli):
    rp = mroot.path
    head = git(rp, "rev-parse", "HEAD")
    wt, captured = begin(cli, rp)
    assert captured == head and wt.is_dir() and wt.parent == mroot.runtime / "worktrees"
    assert git(wt, "rev-parse", "HEAD") == head

    r = cli("--headless", "maintain", "begin", "--root", str(rp))
    assert r.code == 3 and "already in progress" in r.stderr

    (wt / "MEMORY.md").write_text(add_memory_node(MEMORY, "manual", "Written by a person."))
    r = cli("--headless", "maintain", "status", "--root", str(rp), "--json")
    st = r.json()
    assert st["active"] and st["dirty"] == ["MEMORY.md"] and st["valid"] and st["head_current"]

    r = cli("--headless", "maintain", "land", "-m", "maintain: add manual fact", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert "changed: MEMORY.md" in r.stdout
    new = git(rp, "rev-parse", "HEAD")
    assert git(rp, "rev-parse", "HEAD~1") == head  # a fast-forward of exactly the captured head
    assert git(rp, "log", "-1", "--format=%s", new) == "maintain: add manual fact"
    op_id = trailer_of(rp, new)
    assert op_id.startswith("maintenance-")
    assert "`manual`" in (rp / "MEMORY.md").read_text() and porcelain(rp) == ""
    assert not wt.exists() and git(rp, "for-each-ref", PIN_PREFIX) == ""
    r = cli("--headless", "maintain", "status", "--root", str(rp), "--json")
    assert r.json() == {"active": False}
    r = cli("--headless", "receipts", "show", op_id, "--root", str(rp), "--json")
    assert r.json()["phase"] == "committed" and r.json()["landed_commit"] == new


def test_land_after_the_head_moved_stops_and_says_why_with_nothing_landed(mroot, cli):
    rp = mroot.path
    wt, captured = begin(cli, rp)
    (wt / "MEMORY.md").write_text(add_memory_node(MEMORY, "manual"))
    moved = land_insight(mroot)
    r = cli("--headless", "maintain", "status", "--root", str(rp), "--json")
    assert r.json()["head_current"] is False
    before = snapshot(rp)
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 3
    assert "moved since maintenance began" in r.stderr and "nothing was landed" in r.stderr
    assert captured[:10] in r.stderr and moved[:10] in r.stderr
    assert snapshot(rp) == before and git(rp, "rev-parse", "HEAD") == moved
    assert wt.is_dir() and "`manual`" in (wt / "MEMORY.md").read_text()  # the person's work is kept

    r = cli("--headless", "maintain", "abort", "--root", str(rp))
    assert r.code == 0 and "aborted" in r.stdout
    assert not wt.exists()
    assert git(rp, "for-each-ref", "refs/heads/rmtui/op/") == ""
    assert cli("--headless", "maintain", "land", "--root", str(rp)).code == 2  # nothing in progress


def test_edits_rebased_onto_the_new_head_may_land(mroot, cli):
    rp = mroot.path
    wt, captured = begin(cli, rp)
    commit(wt, {"MEMORY.md": add_memory_node(MEMORY, "manual")}, "maintain: manual")
    moved = land_insight(mroot)
    git(wt, "rebase", "-q", moved)  # the person brings the edits onto the current head
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert git(rp, "rev-parse", "HEAD~1") == moved
    assert (rp / "insight_logs/2026-03-01-000000.md").is_file() and "`manual`" in (rp / "MEMORY.md").read_text()


def test_refused_landing_shows_the_reason_and_keeps_the_worktree(mroot, cli):
    rp = mroot.path
    head = git(rp, "rev-parse", "HEAD")
    wt, _ = begin(cli, rp)
    (wt / "MEMORY.md").write_text(MEMORY.replace("[rel:test]", "[rel:missing-node]"))
    before = snapshot(rp)
    r = cli("--headless", "maintain", "land", "--root", str(rp), "--json")
    assert r.code == 1
    err = r.json()
    assert err["details"]["rule"] == "invalid-graph"
    assert "invalid-graph" in r.stderr and "MEMORY.md" in r.stderr and "missing-node" in r.stderr
    assert snapshot(rp) == before and git(rp, "rev-parse", "HEAD") == head
    assert wt.is_dir()
    r = cli("--headless", "maintain", "status", "--root", str(rp), "--json")
    assert r.json()["valid"] is False and "invalid-graph" in r.json()["last_error"]
    # fix it in the same worktree and land
    (wt / "MEMORY.md").write_text(MEMORY.replace("[rel:test]", "[rel:test, dep:old]"))
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert "dep:old" in (rp / "MEMORY.md").read_text() and not wt.exists()


def test_a_refused_landing_does_not_keep_its_commit(mroot, cli):
    """A symlink refused once must not block later landings after the person removes it."""
    rp = mroot.path
    wt, captured = begin(cli, rp)
    (wt / "MEMORY.md").write_text(add_memory_node(MEMORY, "manual"))
    (wt / "MEMORY_link.md").symlink_to("MEMORY.md")
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 1 and "symlink" in r.stderr
    assert git(wt, "rev-parse", "HEAD") == captured  # the edits are back to uncommitted
    st = cli("--headless", "maintain", "status", "--root", str(rp), "--json").json()
    assert sorted(st["dirty"]) == ["MEMORY.md", "MEMORY_link.md"]
    (wt / "MEMORY_link.md").unlink()
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert "`manual`" in (rp / "MEMORY.md").read_text() and not (rp / "MEMORY_link.md").exists()


def test_a_vanished_worktree_is_reported_not_a_traceback(mroot, cli):
    import shutil

    rp = mroot.path
    wt, _ = begin(cli, rp)
    shutil.rmtree(wt)
    for verb in ("status", "land"):
        r = cli("--headless", "maintain", verb, "--root", str(rp))
        assert r.code == 3 and "is gone" in r.stderr and "Traceback" not in r.stderr
    assert cli("--headless", "maintain", "abort", "--root", str(rp)).code == 0


def test_racing_begins_give_exactly_one_maintenance(mroot):
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "maintain", "begin", "--root",
                               str(mroot.path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes == [0, 3, 3, 3]
    with Supervisor(mroot) as sup:
        assert len([o for o in sup.store.list(kind="maintenance") if not o.final]) == 1


# -- files the allow-list does not track: a person's notes are never dropped with the worktree --

STRAY = {"notes.md": "my notes\n", "MEMORY-typo.md": "- `x` meant for memory\n", "drafts/notes.txt": "draft\n"}


def _write_stray(wt: Path) -> None:
    for rel, text in STRAY.items():
        (wt / rel).parent.mkdir(parents=True, exist_ok=True)
        (wt / rel).write_text(text)


@pytest.mark.parametrize("verb", ["land", "abort"])
def test_land_and_abort_refuse_while_the_worktree_holds_files_that_are_not_memory_files(mroot, cli, verb):
    rp = mroot.path
    head = git(rp, "rev-parse", "HEAD")
    wt, _ = begin(cli, rp)
    (wt / "MEMORY.md").write_text(add_memory_node(MEMORY, "manual"))
    _write_stray(wt)
    before = snapshot(rp)
    r = cli("--headless", "maintain", verb, "--root", str(rp), "--json")
    assert r.code == 3, (r.stdout, r.stderr)
    err = r.json()
    assert err["details"]["rule"] == "untracked-files"
    assert sorted(err["details"]["files"]) == sorted(STRAY)
    for rel in STRAY:
        assert rel in r.stderr
    assert "untracked-files" in r.stderr and "--discard-untracked" in r.stderr
    assert "MEMORY_*.md" in r.stderr  # the rule: which names are memory files
    # nothing landed, nothing removed: the worktree, the person's files and edits are all there
    assert snapshot(rp) == before and git(rp, "rev-parse", "HEAD") == head
    for rel, text in STRAY.items():
        assert (wt / rel).read_text() == text
    assert "`manual`" in (wt / "MEMORY.md").read_text()
    assert git(wt, "rev-parse", "HEAD") == head  # land made no commit of the edits it refused
    st = cli("--headless", "maintain", "status", "--root", str(rp), "--json").json()
    assert st["active"] and sorted(st["untracked"]) == sorted(STRAY)


def test_moving_a_stray_file_into_a_memory_file_lands_it(mroot, cli):
    rp = mroot.path
    wt, _ = begin(cli, rp)
    _write_stray(wt)
    assert cli("--headless", "maintain", "land", "--root", str(rp)).code == 3
    (wt / "MEMORY-typo.md").rename(wt / "MEMORY_typo.md")  # the name the person meant
    (wt / "notes.md").unlink()
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 3 and "drafts/notes.txt" in r.stderr and "notes.md" not in r.stderr.replace("drafts/notes", "")
    (wt / "drafts/notes.txt").unlink()
    r = cli("--headless", "maintain", "land", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert "changed: MEMORY_typo.md" in r.stdout
    assert (rp / "MEMORY_typo.md").read_text() == STRAY["MEMORY-typo.md"] and not wt.exists()


def test_discard_untracked_drops_them_and_lands(mroot, cli):
    rp = mroot.path
    wt, _ = begin(cli, rp)
    (wt / "MEMORY.md").write_text(add_memory_node(MEMORY, "manual"))
    _write_stray(wt)
    r = cli("--headless", "maintain", "land", "--discard-untracked", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert "changed: MEMORY.md" in r.stdout and "`manual`" in (rp / "MEMORY.md").read_text()
    assert not wt.exists() and not (mroot.runtime / "kept").exists()  # dropped, as asked
    assert not any((rp / rel).exists() for rel in STRAY)


def test_discard_untracked_drops_them_on_abort(mroot, cli):
    rp = mroot.path
    wt, _ = begin(cli, rp)
    _write_stray(wt)
    r = cli("--headless", "maintain", "abort", "--discard-untracked", "--root", str(rp))
    assert r.code == 0, r.stderr
    assert not wt.exists() and not (mroot.runtime / "kept").exists()
    assert cli("--headless", "maintain", "status", "--root", str(rp), "--json").json() == {"active": False}


def test_discarding_named_files_refuses_over_one_not_named(mroot):
    """The workbench drops only the files its confirmation showed: one written since still
    refuses, and then nothing is deleted."""
    from rmtui.engine.errors import ConflictError
    from rmtui.engine.writes import maintain

    op = maintain.begin(mroot)
    wt = Path(op.worktree)
    (wt / "notes.md").write_text("shown\n")
    (wt / "later.txt").write_text("written after the confirmation\n")
    with pytest.raises(ConflictError) as refused:
        maintain.land(mroot, discard_untracked=("notes.md",))
    assert refused.value.details["files"] == ["later.txt"] and "later.txt" in refused.value.message
    assert (wt / "notes.md").is_file() and (wt / "later.txt").is_file()
    (wt / "later.txt").unlink()
    receipt = maintain.land(mroot, discard_untracked=("notes.md",))
    assert receipt.phase == "no_change" and not wt.exists() and not (mroot.runtime / "kept").exists()
