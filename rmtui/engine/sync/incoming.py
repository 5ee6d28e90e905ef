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

import subprocess
import unicodedata
from collections.abc import Callable, Iterable
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


def introduced(repo: git.Repo, sha: str, parents: list[str],
               per_parent: list[list[Change]] | None = None) -> list[Change]:
    """The changes ``sha`` makes itself: against its parent; for a merge, the paths whose
    entry differs from every parent's (listed as against the first parent). ``per_parent``:
    its changes against each parent, when already read (:func:`changes_between`)."""
    if per_parent is None:
        per_parent = [commit_changes(repo, p, sha) for p in parents or [EMPTY_TREE]]
    if len(per_parent) < 2:  # one parent, or a root commit, which brings its whole tree
        return per_parent[0]
    common = set.intersection(*({c.path for c in changes} for changes in per_parent))
    return [c for c in per_parent[0] if c.path in common]


def changes_between(repo: git.Repo, pairs: list[tuple[str, str]]) -> list[list[Change]]:
    """:func:`commit_changes` of each (parent, commit) pair, all read by one ``git diff-tree
    --stdin``: a pull of hundreds of commits starts one process, not one per commit. Each
    input line is a commit then the parent to diff it against (Git's order); ``--always``
    prints a header line for every pair, so an empty diff keeps its place."""
    if not pairs:
        return []
    feed = "".join(f"{commit} {parent}\n" for parent, commit in pairs).encode()
    out = subprocess.run(["git", f"--git-dir={repo.git_dir}", "diff-tree", "--stdin", "--always", "-r", "--raw",
                          "--no-renames", "-z"], input=feed, capture_output=True, check=True).stdout
    parts = out.split(b"\0")
    found: list[list[Change]] = []
    i = 0
    while i < len(parts):
        token = parts[i].decode("ascii", "replace").strip()
        if token.startswith(":") and found and i + 1 < len(parts):
            old_mode, new_mode, old_blob, new_blob, status = token[1:].split()
            found[-1].append(Change(status[0], old_mode, new_mode, new_blob,
                                    parts[i + 1].decode("utf-8", "surrogateescape"), old_blob))
            i += 2
            continue
        if token:  # the header of the next pair
            found.append([])
        i += 1
    if len(found) != len(pairs):
        raise AdmissionRefused("history", f"git diff-tree answered {len(found)} diffs for {len(pairs)} commits")
    return found


class Names:
    """The names of one commit's tree grouped by what a case-insensitive, normalising file
    system makes of them (the key of :func:`rmtui.engine.fsutil.nfc_collision`), kept up to
    date from each commit's changes against its first parent. A pull of many commits lists a
    tree once, not once per commit: the cost follows what the commits change, not the tree's
    size times their number."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.groups: dict[str, set[str]] = {}
        for name in names:
            self.groups.setdefault(self.key(name), set()).add(name)

    @staticmethod
    def key(name: str) -> str:
        return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())

    @classmethod
    def of(cls, repo: git.Repo, commit: str) -> Names:
        raw = repo.git.ls_tree("-r", "--name-only", "-z", commit, stdout_as_string=False).split(b"\0")
        return cls(n.decode("utf-8", "surrogateescape") for n in raw if n)

    def apply(self, changes: Iterable[Change]) -> None:
        for c in changes:
            group = self.groups.setdefault(self.key(c.path), set())
            if c.status == "D":
                group.discard(c.path)
            else:
                group.add(c.path)

    def collides(self, paths: Iterable[str]) -> bool:
        return any(len(self.groups.get(self.key(p), ())) > 1 for p in paths)


def check_history(repo: git.Repo, head: str, tip: str, limits: FileLimits) -> None:
    """Refuse (:class:`AdmissionRefused`, naming rule, commit and path) when any commit of
    ``tip`` that ``head`` lacks breaks a rule. Each commit is checked on what it changes
    against its parents; its tree's names come from :class:`Names`, listed again only where
    the walk moves to another line of history."""
    policy = sync_policy(limits)
    seen: set[tuple[str, str]] = set()
    quarantined = _queue_paths_gone(repo, tip)
    listing = repo.git.rev_list("--reverse", "--topo-order", "--parents", tip, "--not", head)
    commits = [(sha, parents) for sha, *parents in (line.split() for line in listing.splitlines())]
    diffs = iter(changes_between(repo, [(p, sha) for sha, parents in commits for p in parents]))
    names, at = Names(), ""
    for sha, parents in commits:
        per_parent = [next(diffs) for _ in parents] or [commit_changes(repo, EMPTY_TREE, sha)]  # a root commit
        changes = introduced(repo, sha, parents, per_parent)
        for change in changes:
            if not quarantined(change.path):
                check_change(repo, change, sha, policy, seen)
        added = changes if len(parents) < 2 else per_parent[0]  # a merge may join a pair
        if not parents:
            names = Names()
        elif at != parents[0]:
            names = Names.of(repo, parents[0])
        names.apply(added)
        at = sha
        touched = {c.path for c in added if c.status != "D"}
        if names.collides(touched):  # the full check names the pair and the rule, as for every writer
            check_case_collisions(repo, sha, touched)


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
