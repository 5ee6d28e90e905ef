"""Role tools: confinement, read-before-edit, per-role grants, Git, discard, validation."""

from __future__ import annotations

import os

import git
import pytest

from rmtui.engine.roles.executors import ToolError
from rmtui.engine.roles.tools import RoleTools


def tools_by_name(root_path, role):
    t = RoleTools(root_path, role)
    return t, {s.name: s.handler for s in t.specs()}


def test_grants_follow_the_role_table(root):
    names = lambda role: {s.name for s in RoleTools(root.path, role).specs()}  # noqa: E731
    read = {"read", "glob", "grep", "outline", "git_status", "git_diff"}
    assert names("retrieve") == read
    assert names("historian") == read | {"git_log", "git_show"}
    write = {"edit", "create", "delete", "rename", "git_add", "git_commit"}
    assert names("update") == read | write | {"validate_memory"}
    assert names("pruner") == read | {"git_log", "git_show"} | write | {"validate_memory"}
    assert names("sync-reconciler") == read | write | {"discard", "validate_memory"}
    assert "validate_memory" not in names("insight")


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside.md", "sub/../../x.md", ".runtime/state.sqlite3",
                                 ".git/config"])
def test_paths_stay_inside_the_worktree(root, bad):
    _, t = tools_by_name(root.path, "update")
    with pytest.raises(ToolError):
        t["read"]({"path": bad})
    with pytest.raises(ToolError):
        t["create"]({"path": bad, "content": "x"})


def test_symlink_out_of_the_root_is_refused(root, tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("secret")
    os.symlink(outside, root.path / "MEMORY_link.md")
    _, t = tools_by_name(root.path, "update")
    with pytest.raises(ToolError, match="through a link"):
        t["read"]({"path": "MEMORY_link.md"})
    assert "MEMORY_link.md" not in t["glob"]({"pattern": "*"})


def test_edit_needs_an_earlier_read_of_the_unchanged_file(root):
    _, t = tools_by_name(root.path, "update")
    with pytest.raises(ToolError, match="read MEMORY.md before"):
        t["edit"]({"path": "MEMORY.md", "old_text": "# Memory", "new_text": "# M"})
    assert "# Memory" in t["read"]({"path": "MEMORY.md"})
    (root.path / "MEMORY.md").write_text("# Memory\n\nsomeone else\n")
    with pytest.raises(ToolError, match="changed since you read it"):
        t["edit"]({"path": "MEMORY.md", "old_text": "# Memory", "new_text": "# M"})
    t["read"]({"path": "MEMORY.md"})
    t["edit"]({"path": "MEMORY.md", "old_text": "someone else", "new_text": "first"})
    # the tool's own edit keeps the read valid for the next edit
    t["edit"]({"path": "MEMORY.md", "old_text": "first", "new_text": "second"})
    assert (root.path / "MEMORY.md").read_text() == "# Memory\n\nsecond\n"
    with pytest.raises(ToolError, match="does not occur"):
        t["edit"]({"path": "MEMORY.md", "old_text": "absent", "new_text": "x"})


def test_ambiguous_edit_needs_replace_all(root):
    _, t = tools_by_name(root.path, "update")
    t["create"]({"path": "MEMORY_a.md", "content": "x\nx\n"})
    with pytest.raises(ToolError, match="occurs 2 times"):
        t["edit"]({"path": "MEMORY_a.md", "old_text": "x", "new_text": "y"})
    t["edit"]({"path": "MEMORY_a.md", "old_text": "x", "new_text": "y", "replace_all": True})
    assert (root.path / "MEMORY_a.md").read_text() == "y\ny\n"


def test_write_paths_follow_admission_rules(root):
    _, upd = tools_by_name(root.path, "update")
    with pytest.raises(ToolError, match="may not write insight_logs/x.md"):
        upd["create"]({"path": "insight_logs/x.md", "content": "x"})
    upd["read"]({"path": "rightmemory.toml"})
    with pytest.raises(ToolError, match="may not write rightmemory.toml"):
        upd["edit"]({"path": "rightmemory.toml", "old_text": "a", "new_text": "b"})
    _, ins = tools_by_name(root.path, "insight")
    assert ins["create"]({"path": "insight_logs/2026-01-01-000000.md", "content": "# log\n"}).startswith("created")
    with pytest.raises(ToolError, match="may not write MEMORY.md"):
        ins["create"]({"path": "MEMORY.md", "content": "x"})
    with pytest.raises(ToolError, match="may not read corrections.md"):
        tools_by_name(root.path, "retrieve")[1]["read"]({"path": "corrections.md"})


def test_grep_glob_outline(root):
    (root.path / "MEMORY.md").write_text("# Memory\n\n## Build {#build}\n\n- `hatch` Builds use hatchling → []\n")
    _, t = tools_by_name(root.path, "retrieve")
    assert t["glob"]({"pattern": "*.md"}).splitlines() == ["MEMORY.md", "PURSUITS.md"]
    assert "MEMORY.md:5: - `hatch` Builds use hatchling" in t["grep"]({"pattern": "hatchling"})
    assert t["grep"]({"pattern": "HATCH", "ignore_case": True}).count("MEMORY.md") == 1
    outline = t["outline"]({})
    assert "## Build {#build}" in outline and "- `hatch` Builds use hatchling" in outline
    with pytest.raises(ToolError, match="bad regular expression"):
        t["grep"]({"pattern": "("})


def _worktree(root, name="wt"):
    repo = git.Repo(root.path)
    path = root.path.parent / name
    repo.git.worktree("add", "-q", "-b", name, str(path))
    return path


def test_commit_delete_rename_in_a_worktree(root):
    wt = _worktree(root)
    _, t = tools_by_name(wt, "update")
    t["create"]({"path": "MEMORY_tools.md", "content": "# Tools\n"})
    with pytest.raises(ToolError, match="nothing is staged"):
        t["git_commit"]({"message": "x"})
    assert "MEMORY_tools.md" in t["git_status"]({})
    t["git_add"]({"paths": ["."]})
    assert "committed" in t["git_commit"]({"message": "update: add tools file"})
    t["rename"]({"source": "MEMORY_tools.md", "destination": "MEMORY_tooling.md"})
    t["git_add"]({"paths": ["MEMORY_tools.md", "MEMORY_tooling.md"]})
    t["git_commit"]({"message": "rename"})
    t["read"]({"path": "MEMORY_tooling.md"})
    t["delete"]({"path": "MEMORY_tooling.md"})
    t["git_add"]({"paths": ["MEMORY_tooling.md"]})
    t["git_commit"]({"message": "delete"})
    repo = git.Repo(wt)
    assert [c.message.strip() for c in repo.iter_commits(max_count=3)] == ["delete", "rename", "update: add tools file"]
    assert repo.is_dirty(untracked_files=True) is False
    # the main root is untouched by worktree writes
    assert not (root.path / "MEMORY_tools.md").exists()


def test_history_tools_and_discard(root):
    wt = _worktree(root, "sync")
    _, h = tools_by_name(wt, "historian")
    assert "init: rightmemory root" in h["git_log"]({})
    assert "# Memory" in h["git_show"]({"rev": "HEAD", "path": "MEMORY.md"})
    with pytest.raises(ToolError, match="not a revision"):
        h["git_show"]({"rev": "--output=/tmp/x"})
    _, s = tools_by_name(wt, "sync-reconciler")
    (wt / "MEMORY.md").write_text("# Memory\n\nconflict\n")
    (wt / "MEMORY_new.md").write_text("new\n")
    s["discard"]({"path": "MEMORY.md"})
    s["discard"]({"path": "MEMORY_new.md"})
    assert (wt / "MEMORY.md").read_text() == "# Memory\n\n"
    assert not (wt / "MEMORY_new.md").exists()
    assert s["git_status"]({}).strip().startswith("## sync")


def test_validate_memory_reports_errors(root):
    _, t = tools_by_name(root.path, "update")
    assert t["validate_memory"]({}).startswith("valid")
    t["read"]({"path": "MEMORY.md"})
    t["edit"]({"path": "MEMORY.md", "old_text": "# Memory\n", "new_text": "# Memory\n\n- `a` x → [dep:missing]\n"})
    out = t["validate_memory"]({})
    assert out.startswith("invalid") and "missing" in out
