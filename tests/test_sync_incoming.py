"""A pull checks every commit it brings, not only the final tree: a forged upstream (plain Git
plumbing, so names and modes porcelain refuses) pushes histories that break one rule each;
the pull refuses by the rule's name and the root stays byte for byte as it was."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from test_sync import git, ident, land, machines, memory_with, upstream  # noqa: F401  (fixtures)

from rmtui.engine import sync
from rmtui.engine.memory.config import set_config_value

MiB = 1024 * 1024
Entry = tuple[str, bytes]  # (mode, content; a symlink's content is its target)


def root_bytes(root) -> dict[str, bytes]:
    """Everything a user could notice in the root: its files (not .git, not .runtime), HEAD, status."""
    files = {str(p.relative_to(root.path)): p.read_bytes() for p in root.path.rglob("*")
             if p.is_file() and p.relative_to(root.path).parts[0] not in (".git", ".runtime")}
    return files | {"HEAD": git(root.path, "rev-parse", "HEAD").encode(),
                    "status": git(root.path, "status", "--porcelain").encode()}


def _tree(work: Path, entries: dict[str, tuple[str, str]]) -> str:
    """A tree object of ``{path: (mode, sha)}`` built with mktree, which takes any name."""
    here: dict[str, tuple[str, str]] = {}
    below: dict[str, dict[str, tuple[str, str]]] = {}
    for path, entry in entries.items():
        head, _, rest = path.partition("/")
        if rest:
            below.setdefault(head, {})[rest] = entry
        else:
            here[head] = entry
    lines = [f"{mode} blob {sha}\t{name}" for name, (mode, sha) in here.items()]
    lines += [f"040000 tree {_tree(work, sub)}\t{name}" for name, sub in below.items()]
    return subprocess.run(["git", "mktree"], cwd=work, input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=True).stdout.strip()


def forged_push(bare: Path, tmp: Path, *steps: dict[str, Entry | None], merge_side: bool = False) -> list[str]:
    """Push commits built from raw trees straight to the upstream, one per step (``None``
    removes a path). ``merge_side``: the last step becomes a merge of the previous tip and a
    side commit, its tree being the step's (what the merge itself introduces)."""
    work = tmp / f"forged-{time.time_ns()}"
    subprocess.run(["git", "clone", "-q", bare.as_uri(), str(work)], check=True)
    ident(work)
    tip = git(work, "rev-parse", "HEAD").strip()
    files: dict[str, tuple[str, str]] = {}
    for entry in filter(None, git(work, "ls-tree", "-r", "-z", tip).split("\0")):
        meta, _, path = entry.partition("\t")
        mode, _kind, sha = meta.split()
        files[path] = (mode, sha)
    made = []
    for n, step in enumerate(steps):
        for path, entry in step.items():
            if entry is None:
                files.pop(path, None)
                continue
            mode, data = entry
            sha = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=work, input=data, capture_output=True,
                                 check=True).stdout.decode().strip()
            files[path] = (mode, sha)
        tree = _tree(work, files)
        parents = ["-p", tip]
        if merge_side and n == len(steps) - 1:
            side = git(work, "commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "side").strip()
            parents += ["-p", side]
        tip = git(work, "commit-tree", tree, *parents, "-m", f"forged {n}").strip()
        made.append(tip)
    git(work, "push", "-q", "origin", f"{tip}:refs/heads/main")
    return made


def text(s: str) -> Entry:
    return ("100644", s.encode())


VIEW = "# View\n"
CASES = {
    # name: (steps, the rule, the path it names)
    "dot-git-under-shared-views": (({"shared_views/.git/view.md": text(VIEW)},), "git-path",
                                   "shared_views/.git/view.md"),
    "mixed-case-git": (({"shared_views/.GiT/view.md": text(VIEW)},), "git-path", "shared_views/.GiT/view.md"),
    "hfs-spelling-of-git": (({"shared_views/.g\u200cit/view.md": text(VIEW)},), "git-path",
                            "shared_views/.g\u200cit/view.md"),
    "dotdot": (({"shared_views/../view.md": text(VIEW)},), "path", "shared_views/../view.md"),
    "case-collision": (({"MEMORY_a.md": text("# A\n"), "MEMORY_A.md": text("# B\n")},), "case-collision",
                       "MEMORY_A.md"),
    # a collision a middle commit introduces and a later one removes: each commit is checked
    # against the names its own tree holds, carried from commit to commit
    "intermediate-case-collision": (({"MEMORY_ops.md": text("# Ops\n")}, {"PURSUITS.md": text("# Pursuits\n")},
                                     {"MEMORY_OPS.md": text("# OPS\n")}, {"MEMORY_OPS.md": None}),
                                    "case-collision", "MEMORY_OPS.md"),
    "intermediate-unicode-collision": (({"MEMORY_caf\u00e9.md": text("# NFC\n")},
                                        {"MEMORY_cafe\u0301.md": text("# NFD\n")},
                                        {"MEMORY_cafe\u0301.md": None}),
                                       "unicode-collision", "MEMORY_cafe\u0301.md"),
    "binary-memory-file": (({"MEMORY_blob.md": ("100644", bytes(range(256)) * (12 * MiB // 256))},),
                           "file-too-large", "MEMORY_blob.md"),
    "large-insight-log": (({"insight_logs/2026-01-01-x.md": text("# Log\n" + "word " * (MiB // 4))},),
                          "file-too-large", "insight_logs/2026-01-01-x.md"),
    "latin-1-markdown": (({"MEMORY_x.md": ("100644", b"# Caf\xe9\n")},), "not-text", "MEMORY_x.md"),
    "nul-in-markdown": (({"MEMORY_x.md": ("100644", b"# X\n\x00\n")},), "not-text", "MEMORY_x.md"),
    "intermediate-executable": (({"evil.sh": ("100755", b"#!/bin/sh\nrm -rf ~\n")}, {"evil.sh": None}),
                                "executable", "evil.sh"),
    "intermediate-off-list": (({"notes.txt": text("x\n")}, {"notes.txt": None}), "forbidden-path", "notes.txt"),
    "intermediate-symlink": (({"MEMORY_link.md": ("120000", b"/etc/passwd")}, {"MEMORY_link.md": None}),
                             "symlink", "MEMORY_link.md"),
    "intermediate-submodule-like-git-file": (({".gitmodules": text("[submodule]\n")}, {".gitmodules": None}),
                                             "git-path", ".gitmodules"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_incoming_commit_is_checked_and_a_refusal_names_its_rule(machines, upstream, tmp_path, case):  # noqa: F811
    _, b = machines
    steps, rule, path = CASES[case]
    before = root_bytes(b)
    forged_push(upstream, tmp_path, *steps)
    res = sync.pull(b)
    assert (res.status, res.rule, res.files) == ("error", rule, [path]), res
    assert f"{rule}:" in res.message and "incoming commit" in res.message
    assert root_bytes(b) == before
    assert not list((b.path / ".runtime" / "worktrees").glob("sync-*"))
    assert sync.pull(b).rule == rule  # refused again, never half-applied


def test_a_merge_is_held_to_what_it_introduces_itself(machines, upstream, tmp_path):  # noqa: F811
    """An evil merge: neither parent has the symlink, the merge's own tree brings it."""
    _, b = machines
    before = root_bytes(b)
    forged_push(upstream, tmp_path, {"MEMORY_link.md": ("120000", b"../../.ssh/id_rsa")}, merge_side=True)
    res = sync.pull(b)
    assert (res.status, res.rule) == ("error", "symlink"), res
    assert root_bytes(b) == before


def test_the_cli_names_the_rule_with_exit_1_and_no_internal_error(machines, upstream, tmp_path, cli):  # noqa: F811
    _, b = machines
    forged_push(upstream, tmp_path, {"shared_views/.git/view.md": text(VIEW)})
    r = cli("--headless", "sync", "pull", "--json", "--root", str(b.path))
    assert r.code == 1 and r.json()["rule"] == "git-path", (r.stdout, r.stderr)
    assert "internal error" not in r.stdout + r.stderr


def test_the_size_limits_are_settings(machines, upstream, tmp_path):  # noqa: F811
    _, b = machines
    set_config_value(b.path, "limits.max_memory_file_bytes", 2000)
    forged_push(upstream, tmp_path, {"MEMORY_x.md": text("# X\n\n" + "- `n` a plain fact → []\n" * 200)})
    res = sync.pull(b)
    assert res.rule == "file-too-large" and "limits.max_memory_file_bytes" in res.message, res
    set_config_value(b.path, "limits.max_memory_file_bytes", 4 * MiB)
    assert sync.pull(b).status == "synced"


def test_a_merge_that_makes_a_case_collision_with_local_memory_is_refused(machines, upstream, tmp_path):  # noqa: F811
    a, b = machines
    land(b, "MEMORY_notes.md", memory_with(("local", "a local fact")).replace("# Memory", "# Notes"))
    land(a, "MEMORY_Notes.md", memory_with(("remote", "a remote fact")).replace("# Memory", "# Notes"))
    assert sync.push(a).status == "pushed"
    before = root_bytes(b)
    res = sync.pull(b)
    assert (res.status, res.rule, res.files) == ("error", "case-collision", ["MEMORY_Notes.md"]), res
    assert "the merge with origin/main" in res.message
    assert root_bytes(b) == before


def test_an_honest_history_of_many_commits_still_pulls(machines):  # noqa: F811
    a, b = machines
    for n in range(5):
        land(a, "MEMORY.md", memory_with(*((f"fact-{i}", f"fact number {i}") for i in range(n + 1))))
    assert sync.push(a).status == "pushed"
    res = sync.pull(b)
    assert res.status == "synced" and "fact-4" in (b.path / "MEMORY.md").read_text(), res


def test_the_synchronized_gitignore_is_still_welcome(machines, upstream, tmp_path):  # noqa: F811
    _, b = machines
    ignore = (b.path / ".gitignore").read_bytes() + b"*.tmp\n"
    forged_push(upstream, tmp_path, {".gitignore": ("100644", ignore)})
    res = sync.pull(b)
    assert res.status == "synced", res
    assert (b.path / ".gitignore").read_bytes() == ignore


def test_one_diff_tree_call_reads_what_a_call_per_commit_reads(machines, upstream, tmp_path):  # noqa: F811
    """The batched read of every incoming commit's changes answers, pair by pair, what Git
    answers for each commit against each parent (a merge and an empty commit included)."""
    from git import Repo

    from rmtui.engine.sync.incoming import changes_between
    from rmtui.engine.writes.admission import commit_changes

    _, b = machines
    forged_push(upstream, tmp_path, {"MEMORY_x.md": text("# X\n")}, {"MEMORY_x.md": None, "MEMORY_y.md": text("# Y\n")},
                {}, {"MEMORY_z.md": text("# Z\n")}, merge_side=True)
    git(b.path, "fetch", "-q", "origin")
    listing = git(b.path, "rev-list", "--parents", "HEAD..origin/main").splitlines()
    pairs = [(parent, sha) for sha, *parents in (line.split() for line in listing) for parent in parents]
    assert len(pairs) == 6  # four steps and the side commit, the last a merge of two parents
    repo = Repo(b.path)
    try:
        assert changes_between(repo, pairs) == [commit_changes(repo, parent, sha) for parent, sha in pairs]
    finally:
        repo.close()
