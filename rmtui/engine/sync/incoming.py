"""What a pull or a repair brings as files, checked from Git objects before anything is staged.

Every commit the upstream adds to this root's history is checked on its own, as the
supervisor checks a local writer's commits (the rules live once, in
:mod:`rmtui.engine.writes.admission`): a commit that adds ``evil.sh`` and a later one that
removes it are refused together. A merge answers for what it introduces itself (the paths
that differ from every parent); what it takes from a parent was checked at that parent, or
is history this root already has. A repair of a merge (the sync-reconciler's, or a host's)
is held to the incoming rules and the supervisor's full admission of the repair commit's
tree. docs/sync.md, "What a commit may bring", lists the rules.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import git

from rmtui.engine.memory.role_table import ALLOWED_PATHS, matches
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.sync.paths import is_queue_or_record, is_synced
from rmtui.engine.writes.admission import (
    AdmissionRefused,
    Change,
    FileLimits,
    Policy,
    check_case_collisions,
    check_change,
    check_clean,
    check_tree_object,
    commit_changes,
)

ROLE = "sync-reconciler"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
OFF_LIST = "{path} is outside the synchronized allow-list"


def limits_of(root: MemoryRoot) -> FileLimits:
    """The root's file size bounds (``limits.*`` in rmtui.toml)."""
    return FileLimits.of(root.config())


def sync_policy(limits: FileLimits) -> Policy:
    return Policy(is_synced, OFF_LIST, limits)


def introduced(repo: git.Repo, sha: str, parents: list[str]) -> list[Change]:
    """The changes ``sha`` makes itself: against its parent; for a merge, the paths whose
    entry differs from every parent's (listed as against the first parent)."""
    if not parents:  # a root commit brings its whole tree
        return commit_changes(repo, EMPTY_TREE, sha)
    per_parent = [commit_changes(repo, p, sha) for p in parents]
    common = set.intersection(*({c.path for c in changes} for changes in per_parent))
    return [c for c in per_parent[0] if c.path in common]


def check_history(repo: git.Repo, head: str, tip: str, limits: FileLimits) -> None:
    """Refuse (:class:`AdmissionRefused`, naming rule, commit and path) when any commit of
    ``tip`` that ``head`` lacks breaks a rule."""
    policy = sync_policy(limits)
    seen: set[tuple[str, str]] = set()
    quarantined = _queue_paths_gone(repo, tip)
    listing = repo.git.rev_list("--reverse", "--topo-order", "--parents", tip, "--not", head)
    for line in listing.splitlines():
        sha, *parents = line.split()
        changes = introduced(repo, sha, parents)
        for change in changes:
            if not quarantined(change.path):
                check_change(repo, change, sha, policy, seen)
        added = changes if len(parents) < 2 else commit_changes(repo, parents[0], sha)  # a merge may join a pair
        check_case_collisions(repo, sha, {c.path for c in added if c.status != "D"})


def _queue_paths_gone(repo: git.Repo, tip: str) -> Callable[[str], bool]:
    """Queue files are the one exception to checking every commit: the queue validates its
    records itself and sets an invalid one aside with a commit that removes it (docs/formats.md,
    "Queue records: what a machine accepts"), so a path under ``update_queue/`` that the tip no
    longer has is never checked out or imported and is not held to these rules before."""
    raw = repo.git.ls_tree("-r", "-z", "--name-only", tip, "--", "update_queue/")
    present = {p for p in raw.split("\0") if p}
    return lambda path: path.startswith("update_queue/") and path not in present


def check_merge(repo: git.Repo, head: str, tip: str, commit: str, limits: FileLimits, *,
                written_by: str | None = None) -> list[str]:
    """Check a merge of ``head`` and ``tip`` made here (Git's automatic merge, or a repair):
    queue and record files are exactly the upstream's where the upstream changed them and
    the local ones elsewhere (a merge never writes them); what the merge introduces answers
    to the incoming rules (and, ``written_by`` a role, to that role's paths); and no case or
    normalisation collision appears. Answers the paths that differ from ``head``."""
    changes = commit_changes(repo, head, commit)
    _check_queue_sides(repo, head, tip, commit, changes)
    role_paths = ALLOWED_PATHS[written_by] if written_by else None
    if role_paths is None:
        policy = sync_policy(limits)
    else:
        policy = Policy(lambda p: is_synced(p) and matches(p, role_paths),
                        f"the {written_by} may not write {{path}}", limits)
    for change in introduced(repo, commit, [head, tip]):
        check_change(repo, change, commit, policy)
    check_case_collisions(repo, commit, {c.path for c in changes if c.status != "D"})
    return sorted({c.path for c in changes})


def _check_queue_sides(repo: git.Repo, head: str, tip: str, commit: str, changes: list[Change]) -> None:
    """Rule ``queue-rewritten``: each queue or record path of the merge holds the upstream's
    entry (mode and bytes) if the upstream changed it since the merge base, else the local one."""
    paths = sorted({c.path for c in changes + commit_changes(repo, head, tip) if is_queue_or_record(c.path)})
    if not paths:
        return
    base = repo.git.merge_base(head, tip).split()[0]
    was, ours, theirs, merged = (_entries(repo, rev, paths) for rev in (base, head, tip, commit))
    for path in paths:
        want = theirs.get(path) if theirs.get(path) != was.get(path) else ours.get(path)
        if merged.get(path) != want:
            side = "upstream" if want == theirs.get(path) else "local"
            raise AdmissionRefused("queue-rewritten", f"{path} is not the {side} version byte for byte; queue and "
                                   "record files are taken unchanged, never rewritten by a merge or a repair",
                                   commit=commit, path=path)


def _entries(repo: git.Repo, rev: str, paths: list[str]) -> dict[str, tuple[str, str]]:
    """(mode, object id) of each of ``paths`` present in ``rev``."""
    out = repo.git.ls_tree("-r", "-z", "--full-tree", rev, "--", *paths)
    entries = {}
    for entry in filter(None, out.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, _kind, sha = meta.split()
        entries[path] = (mode, sha)
    return entries


def admit_repair(worktree: str, head: str, tip: str, commit: str, limits: FileLimits) -> None:
    """A repair commit may land only as every other landing may: a clean worktree with no
    index flag hiding a file, the upstream's history and the merge itself passing the
    incoming rules, and the supervisor's admission of the commit's tree read from Git
    objects (never the work tree, which ``--skip-worktree`` can make differ)."""
    check_clean(Path(worktree))
    repo = git.Repo(worktree)
    try:
        check_history(repo, head, tip, limits)
        changed = check_merge(repo, head, tip, commit, limits, written_by=ROLE)
        check_tree_object(repo, commit, ROLE, changed=changed)
    finally:
        repo.close()
