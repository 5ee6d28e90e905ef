"""Admission (docs/architecture.md, "Admission and publication", steps 1-4): a writer commits something forbidden in its
worktree and the supervisor refuses it by rule name, leaving the active root byte-identical."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from supervisor_kit import (
    MEMORY,
    PURSUITS,
    add_memory_node,
    commit,
    git,
    porcelain,
    seed,
    snapshot,
    track_config,
    write,
)

from rmtui.engine.memory.config import set_config_value
from rmtui.engine.writes.admission import AdmissionRefused, StaleBase
from rmtui.engine.writes.publication import pin_ref
from rmtui.engine.writes.supervisor import Supervisor


@pytest.fixture
def sup(root):
    seed(root)
    s = Supervisor(root)
    yield s
    s.close()


def refuse(sup: Supervisor, op, rule: str) -> Exception:
    """Finish must refuse with ``rule``; nothing in the active root may change."""
    root = sup.root.path
    head = git(root, "rev-parse", "HEAD")
    before = snapshot(root)
    with pytest.raises((AdmissionRefused, StaleBase)) as info:
        sup.finish(op, summary="try")
    exc = info.value
    assert exc.rule == rule, exc
    assert snapshot(root) == before
    assert porcelain(root) == ""
    assert git(root, "rev-parse", "HEAD") == head
    rec = sup.store.get(op.id)
    assert rec.phase == "running"  # back to its writer, worktree kept for a correction
    assert rec.error and rule in rec.error
    assert Path(rec.worktree).is_dir()
    assert git(root, "for-each-ref", pin_ref(op.id)) == ""
    return exc


def test_forbidden_path_in_an_intermediate_commit_is_refused_even_when_reverted(sup):
    track_config(sup.root)
    op = sup.begin("update", "update")
    wt = op.worktree
    original = (Path(wt) / "rightmemory.toml").read_text()
    bad = commit(wt, {"rightmemory.toml": original + "\n# sneaky\n"}, "touch config")
    commit(wt, {"rightmemory.toml": original, "MEMORY.md": add_memory_node(MEMORY, "fresh")}, "revert + real edit")
    assert git(wt, "diff", "--name-only", op.base_commit, "HEAD") == "MEMORY.md"  # the squash would hide it
    exc = refuse(sup, op, "forbidden-path")
    assert exc.details["path"] == "rightmemory.toml" and exc.details["commit"] == bad


def test_role_paths_insight_may_not_write_memory_and_globs_do_not_cross_directories(sup):
    op = sup.begin("insight", "insight")
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
    assert refuse(sup, op, "forbidden-path").details["path"] == "MEMORY.md"

    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY_dir/nested.md": "# nested\n"})
    assert refuse(sup, op, "forbidden-path").details["path"] == "MEMORY_dir/nested.md"


def test_symlink_is_refused(sup):
    op = sup.begin("update", "update")
    os.symlink("MEMORY.md", Path(op.worktree) / "MEMORY_link.md")
    git(op.worktree, "add", "-f", "MEMORY_link.md")
    git(op.worktree, "commit", "-q", "-m", "link")
    assert refuse(sup, op, "symlink").details["path"] == "MEMORY_link.md"


def test_executable_bit_is_refused(sup):
    op = sup.begin("update", "update")
    write(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
    os.chmod(Path(op.worktree) / "MEMORY.md", 0o755)
    git(op.worktree, "add", "MEMORY.md")
    git(op.worktree, "commit", "-q", "-m", "exec")
    refuse(sup, op, "executable")


def test_submodule_gitlink_is_refused(sup):
    op = sup.begin("update", "update")
    git(op.worktree, "update-index", "--add", "--cacheinfo", f"160000,{op.base_commit},MEMORY_sub.md")
    git(op.worktree, "commit", "-q", "-m", "gitlink")
    (Path(op.worktree) / "MEMORY_sub.md").mkdir()  # an unpopulated submodule, as a clone leaves it
    assert git(op.worktree, "ls-tree", "HEAD", "MEMORY_sub.md").startswith("160000 commit")
    refuse(sup, op, "submodule")


def test_dotdot_paths_git_refuses_them_in_the_index_but_a_crafted_tree_is_refused_by_admission(sup):
    op = sup.begin("update", "update")
    wt = op.worktree
    blob = git(wt, "hash-object", "-w", "--stdin", input=b"escape\n")
    # Porcelain and the index cannot express it: git itself refuses the path.
    proc = subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},../evil.md"],
                          cwd=wt, capture_output=True)
    assert proc.returncode != 0 and b"Invalid path" in proc.stderr
    # Plumbing can: mktree accepts an entry named "..", so an intermediate commit can carry it.
    inner = git(wt, "mktree", input=f"100644 blob {blob}\t..\n".encode())
    base_tree = git(wt, "ls-tree", op.base_commit)
    evil_tree = git(wt, "mktree", input=(base_tree + f"\n040000 tree {inner}\tMEMORY_x\n").encode())
    evil = git(wt, "commit-tree", evil_tree, "-p", op.base_commit, "-m", "escape")
    back = git(wt, "commit-tree", f"{op.base_commit}^{{tree}}", "-p", evil, "-m", "hide it")
    git(wt, "reset", "-q", "--hard", back)
    assert "MEMORY_x/.." in git(wt, "ls-tree", "-r", "--name-only", evil)
    exc = refuse(sup, op, "path")
    assert exc.details["path"] == "MEMORY_x/.." and exc.details["commit"] == evil


def test_git_paths_are_refused(sup):
    op = sup.begin("maintenance", "maintenance")  # the widest writer still may not touch .git*
    commit(op.worktree, {".gitattributes": "*.md filter=evil\n"})
    assert refuse(sup, op, "git-path").details["path"] == ".gitattributes"


def test_case_collision_is_refused(sup):
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY_Notes.md": "one\n", "MEMORY_notes.md": "two\n"})
    refuse(sup, op, "case-collision")


def test_unicode_normalisation_collision_is_refused(sup):
    """NFC and NFD spellings of one name are one file on macOS: the second would hide the first."""
    nfc, nfd = "MEMORY_caf\u00e9.md", "MEMORY_cafe\u0301.md"
    op = sup.begin("maintenance", "maintenance")
    commit(op.worktree, {nfc: "one\n"}, "first spelling")
    commit(op.worktree, {nfd: "two\n"}, "second spelling")
    exc = refuse(sup, op, "unicode-collision")
    assert exc.details["path"] == nfd
    assert "macOS" in str(exc)


def test_a_lone_nfd_name_is_admitted(sup):
    op = sup.begin("maintenance", "maintenance")
    commit(op.worktree, {"MEMORY_cafe\u0301.md": "one\n"})
    sup.finish(op, summary="one spelling only")
    assert (sup.root.path / "MEMORY_cafe\u0301.md").read_text() == "one\n"


def test_non_utf8_markdown_is_refused(sup):
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": MEMORY.encode() + b"- `x` caf\xe9 latin-1 \xff \xe2\x86\x92 []\n"})
    assert refuse(sup, op, "not-text").details["path"] == "MEMORY.md"


def test_a_nul_byte_is_not_text(sup):
    op = sup.begin("maintenance", "maintenance")
    commit(op.worktree, {"MEMORY_bin.md": b"# Bin\n\x00\x01\x02\n"})
    assert refuse(sup, op, "not-text").details["path"] == "MEMORY_bin.md"


def test_an_oversized_memory_file_is_refused_by_size_before_it_is_read(sup):
    """A memory file over ``limits.max_memory_file_bytes`` (4 MiB by default) is refused by
    its size, even when an intermediate commit brings it and a later one removes it."""
    op = sup.begin("maintenance", "maintenance")
    commit(op.worktree, {"MEMORY_big.md": b"# Big\n" + b"x" * (4 * 1024 * 1024)}, "big")
    git(op.worktree, "rm", "-q", "MEMORY_big.md")
    git(op.worktree, "commit", "-qm", "gone again")
    exc = refuse(sup, op, "file-too-large")
    assert exc.details["path"] == "MEMORY_big.md" and "limits.max_memory_file_bytes" in str(exc)


def test_the_size_limits_come_from_rmtui_toml(sup):
    set_config_value(sup.root.path, "limits.max_insight_log_bytes", 100)
    op = sup.begin("insight", "insight")
    commit(op.worktree, {"insight_logs/2026-01-01-big.md": "# Log\n\n" + "a finding. " * 20})
    exc = refuse(sup, op, "file-too-large")
    assert "limits.max_insight_log_bytes" in str(exc) and "the limit is 100" in str(exc)


def test_dirty_worktree_is_refused_uncommitted_and_untracked(sup):
    op = sup.begin("update", "update")
    write(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
    assert refuse(sup, op, "dirty-worktree").details["path"] == "MEMORY.md"
    git(op.worktree, "checkout", "--", "MEMORY.md")
    write(op.worktree, {"MEMORY_new.md": "untracked\n"})
    assert refuse(sup, op, "dirty-worktree").details["path"] == "MEMORY_new.md"


def test_invalid_graph_is_refused_with_file_and_rule(sup):
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": MEMORY.replace("[rel:test]", "[rel:nowhere]")})
    exc = refuse(sup, op, "invalid-graph")
    assert "MEMORY.md" in str(exc) and "nowhere" in str(exc)


def test_merge_commits_are_refused(sup):
    op = sup.begin("update", "update")
    wt = op.worktree
    side = commit(wt, {"MEMORY.md": add_memory_node(MEMORY, "a")})
    merge = git(wt, "commit-tree", f"{side}^{{tree}}", "-p", side, "-p", op.base_commit, "-m", "merge")
    git(wt, "reset", "-q", "--hard", merge)
    refuse(sup, op, "merge")


def test_stale_semantic_base_is_refused_and_the_writer_keeps_its_work(sup):
    slow = sup.begin("update", "update")
    fast = sup.begin("update", "update")
    commit(fast.worktree, {"MEMORY.md": add_memory_node(MEMORY, "fast")})
    assert sup.finish(fast).phase == "committed"
    commit(slow.worktree, {"MEMORY.md": add_memory_node(MEMORY, "slow")})
    exc = refuse(sup, slow, "stale-base")
    assert exc.exit_code == 3 and "MEMORY.md" in exc.details["paths"]
    assert "slow" in (Path(slow.worktree) / "MEMORY.md").read_text()


def test_update_may_touch_pursuit_only_to_repair_references(sup):
    # beyond repair: a changed title
    op = sup.begin("update", "update")
    commit(op.worktree, {"PURSUITS.md": PURSUITS.replace("Ship it", "Ship it now")})
    assert refuse(sup, op, "reference-repair-only").details["path"] == "PURSUITS.md"
    sup.abandon(op, "test")
    # dropping an edge whose target still exists is not a repair
    op = sup.begin("update", "update")
    commit(op.worktree, {"PURSUITS.md": PURSUITS.replace("[rel:build, dep:old]", "[rel:build]")})
    exc = refuse(sup, op, "reference-repair-only")
    assert "old" in str(exc)
    sup.abandon(op, "test")
    # the real repair: delete a Memory node and drop the Pursuit's edge to it, in one operation
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": MEMORY.replace("- `old` An old fact. → []\n", ""),
                         "PURSUITS.md": PURSUITS.replace("[rel:build, dep:old]", "[rel:build]")})
    receipt = sup.finish(op, summary="forget old")
    assert receipt.phase == "committed"
    assert receipt.changed_paths == ["MEMORY.md", "PURSUITS.md"]
    assert "dep:old" not in (sup.root.path / "PURSUITS.md").read_text()
