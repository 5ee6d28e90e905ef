"""Admission of a candidate: steps 1-3 of docs/architecture.md, "Admission and publication".

One implementation serves every writer (Update, native assistant, maintenance, Insight,
guidance capture). Every commit between base and candidate is checked on its own so a
forbidden intermediate write cannot hide behind a later revert.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from rmtui.engine.errors import ConflictError, OperationFailed
from rmtui.engine.fsutil import nfc_collision
from rmtui.engine.memory.config_schema import DEFAULT_MAX_INSIGHT_LOG_BYTES, DEFAULT_MAX_MEMORY_FILE_BYTES
from rmtui.engine.memory.graph import Graph, Item, backing_name, load_graph, parse_edges
from rmtui.engine.memory.role_table import (
    ALLOWED_PATHS,
    CONFIGS,
    CORRECTIONS,
    INSIGHT,
    MEMORY_GRAPH,
    PURSUIT,
    REFERENCE_REPAIR_ONLY,
    ROLE_TABLE,
    VALIDATION_EXEMPT,
    matches,
)
from rmtui.engine.memory.validation import (
    COLLECTION_FILES,
    CORRECTIONS_FILE,
    check_collection_links,
    check_corrections,
    validate_root,
)
from rmtui.engine.writes.config_check import config_issues

#: Paths whose change moves the semantic base (a concurrent change there makes a candidate stale).
#: The guidance inbox is append-only pending evidence: a capture landing meanwhile is rebased
#: over, and only a real conflict on the same path (both sides changed it) is stale.
SEMANTIC = MEMORY_GRAPH + PURSUIT + CORRECTIONS

#: The file size no ``limits.*`` setting passes.
FILE_BYTES_CEILING = 64 * 1024 * 1024

_EDGE_LIST_RE = re.compile(r"\s*(?:→|->)\s*\[([^\]]*)\]\s*$")


def is_semantic(path: str) -> bool:
    return matches(path, SEMANTIC)


class AdmissionRefused(OperationFailed):
    """A candidate broke an admission rule; ``rule`` names which, the message says where."""

    kind = "refused"

    def __init__(self, rule: str, message: str, *, commit: str | None = None, path: str | None = None) -> None:
        super().__init__(f"{rule}: {message}", details={"rule": rule, "commit": commit, "path": path})
        self.rule = rule


class _RuleConflict(ConflictError):
    """A publication-time conflict (exit 3) that, like a refusal, names its rule."""

    rule = "conflict"

    def __init__(self, message: str, *, details: dict | None = None) -> None:
        super().__init__(f"{self.rule}: {message}", details={"rule": self.rule, **(details or {})})


class StaleBase(_RuleConflict):
    """The active semantic base moved since the candidate's base."""

    kind = "stale"
    rule = "stale-base"


class DirtyActiveRoot(_RuleConflict):
    """The active root has uncommitted changes on paths publication would overwrite."""

    rule = "dirty-active-root"


class BranchMoved(_RuleConflict):
    """The root's branch is not at the commit its index holds: something moved the ref without
    updating the work tree (``git update-ref`` from a worktree, which shares the root's refs)."""

    rule = "branch-moved"


@dataclass
class Change:
    status: str  # A M D T
    old_mode: str
    new_mode: str
    new_blob: str
    path: str
    old_blob: str = ""


@dataclass
class AdmissionResult:
    commits: list[str]
    changed_paths: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Edge targets dropped by reference-repair-only edits; they must not exist in the final tree.
    dropped_refs: set[str] = field(default_factory=set)


def commit_changes(repo: git.Repo, parent: str, commit: str) -> list[Change]:
    """Raw per-path changes between two commits, renames split into delete + add."""
    out = repo.git.diff_tree("-r", "--raw", "--no-renames", "-z", "--no-commit-id", parent, commit,
                             stdout_as_string=False)
    parts = out.split(b"\0")
    changes: list[Change] = []
    i = 0
    while i + 1 < len(parts):
        meta = parts[i].decode()
        if not meta.startswith(":"):
            i += 1
            continue
        old_mode, new_mode, old_blob, new_blob, status = meta[1:].split()
        path = parts[i + 1].decode("utf-8", "surrogateescape")
        changes.append(Change(status[0], old_mode, new_mode, new_blob, path, old_blob))
        i += 2
    return changes


def changed_paths(repo: git.Repo, a: str, b: str) -> list[str]:
    if a == b:
        return []
    return sorted({c.path for c in commit_changes(repo, a, b)})


#: The one .git* file a writer may touch: a provider view folder's ``.gitignore``, and only as
#: the original writes it, ``dist/`` (docs/formats.md).
VIEW_GITIGNORE_RE = re.compile(r"shared_views/[A-Za-z0-9_.-]+/\.gitignore")
VIEW_GITIGNORE = b"dist/\n"

#: Code points HFS+ ignores in names (so ``.g\u200cit`` is ``.git`` on macOS).
_HFS_IGNORED = frozenset("\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                         "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")


def is_git_name(segment: str) -> bool:
    """Whether a path segment is ``.git`` on some file system Git checks out to: any case,
    HFS+'s ignored code points, NTFS's trailing dots and spaces, alternate streams and the
    short name ``git~1``."""
    name = "".join(ch for ch in segment if ch not in _HFS_IGNORED).casefold()
    name = name.split(":", 1)[0].rstrip(". ")
    return name in (".git", "git~1")


def check_path_shape(path: str, commit: str | None, allowed: Callable[[str], bool]) -> None:
    """Rules ``path`` and ``git-path``: a plain relative path of printable UTF-8 names, no
    ``.git`` segment in any spelling, and no other ``.git*`` name (Git reads them as its own
    control files) but a ``.gitignore`` the writer's paths list or a view folder's."""
    parts = path.split("/")
    if (path.startswith("/") or any(p in ("..", ".", "") for p in parts) or "\\" in path
            or any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xDC80 <= ord(ch) <= 0xDCFF for ch in path)):
        raise AdmissionRefused("path", f"{path!r} is not a plain relative path of UTF-8 names", commit=commit,
                               path=path)
    for p in parts:
        ignore_file = p == ".gitignore" and (allowed(path) or VIEW_GITIGNORE_RE.fullmatch(path))
        if is_git_name(p) or (p.casefold().startswith(".git") and not ignore_file):
            raise AdmissionRefused("git-path", f"{path!r} touches a .git* path", commit=commit, path=path)


def _check_mode(change: Change, commit: str) -> None:
    if change.status == "D":
        return
    mode = change.new_mode
    if mode == "120000":
        raise AdmissionRefused("symlink", f"{change.path} is a symbolic link", commit=commit, path=change.path)
    if mode == "160000":
        raise AdmissionRefused("submodule", f"{change.path} is a submodule", commit=commit, path=change.path)
    if mode == "100755":
        raise AdmissionRefused("executable", f"{change.path} has the executable bit", commit=commit, path=change.path)
    if mode != "100644":
        raise AdmissionRefused("mode", f"{change.path} has mode {mode}; only regular 100644 files",
                               commit=commit, path=change.path)


def _blob(repo: git.Repo, sha: str) -> bytes:
    return repo.odb.stream(bytes.fromhex(sha)).read()


def _split_edges(line: str) -> tuple[str, set[str]]:
    """A line without its trailing edge list, and that list's targets."""
    m = _EDGE_LIST_RE.search(line)
    if not m:
        return line.rstrip(), set()
    edges, _problems = parse_edges(m.group(1))
    return line[: m.start()].rstrip(), {e.target for e in edges}


def _reference_repair(repo: git.Repo, parent: str, change: Change) -> set[str] | None:
    """The edge targets a change drops, when dropping edges is all it does; else None.

    A repair keeps every line (same count, same text outside the edge lists) and only
    removes entries from edge lists; whether the dropped targets are really gone is
    checked on the final tree (:func:`check_tree`).
    """
    if change.status != "M":
        return None
    try:
        old = _blob(repo, repo.git.rev_parse(f"{parent}:{change.path}")).decode("utf-8").splitlines()
        new = _blob(repo, change.new_blob).decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None
    if len(old) != len(new):
        return None
    dropped: set[str] = set()
    for o, n in zip(old, new, strict=True):
        if o == n:
            continue
        o_body, o_targets = _split_edges(o)
        n_body, n_targets = _split_edges(n)
        if o_body != n_body or not n_targets <= o_targets:
            return None
        dropped |= o_targets - n_targets
    return dropped


@dataclass(frozen=True)
class FileLimits:
    """The largest file a commit may bring (docs/sync.md, "What a commit may bring"):
    insight logs have their own bound, every other tracked file the memory-file bound."""

    memory_file_bytes: int = DEFAULT_MAX_MEMORY_FILE_BYTES
    insight_log_bytes: int = DEFAULT_MAX_INSIGHT_LOG_BYTES

    @classmethod
    def of(cls, cfg: Any) -> FileLimits:
        """The root's ``limits.*`` settings, each held under :data:`FILE_BYTES_CEILING`."""
        return cls(min(int(cfg.get("limits.max_memory_file_bytes")), FILE_BYTES_CEILING),
                   min(int(cfg.get("limits.max_insight_log_bytes")), FILE_BYTES_CEILING))

    def for_path(self, path: str) -> tuple[int, str]:
        if matches(path, INSIGHT):
            return self.insight_log_bytes, "limits.max_insight_log_bytes"
        return self.memory_file_bytes, "limits.max_memory_file_bytes"


@dataclass(frozen=True)
class Policy:
    """What one writer may bring: its paths (``forbidden`` says why another is refused, with
    ``{path}`` and ``{short}`` commit) and the size bounds. A local role and an upstream's
    commits are held to the same rules through this."""

    allowed: Callable[[str], bool]
    forbidden: str
    limits: FileLimits


def check_change(repo: git.Repo, change: Change, commit: str, policy: Policy,
                 seen: set[tuple[str, str]] | None = None) -> None:
    """Every rule one changed path answers to: shape, ``.git`` names, mode, the writer's
    paths, then what the new file holds. ``seen`` skips blobs already checked for a path."""
    path = change.path
    check_path_shape(path, commit, policy.allowed)
    _check_mode(change, commit)
    if not policy.allowed(path):
        raise AdmissionRefused("forbidden-path", policy.forbidden.format(path=path, short=commit[:10]),
                               commit=commit, path=path)
    if change.status != "D" and (seen is None or (path, change.new_blob) not in seen):
        check_blob(repo, path, change.new_blob, commit, policy.limits)
        if seen is not None:
            seen.add((path, change.new_blob))


def check_blob(repo: git.Repo, path: str, sha: str, commit: str | None, limits: FileLimits) -> None:
    """Rules ``file-too-large`` (sized from the object header, before it is read),
    ``view-gitignore`` and ``not-text``: every file memory is made of is UTF-8 text without
    NUL bytes."""
    size = repo.odb.info(bytes.fromhex(sha)).size
    limit, key = limits.for_path(path)
    if size > limit:
        raise AdmissionRefused("file-too-large", f"{path} is {size} bytes; the limit is {limit} ({key})",
                               commit=commit, path=path)
    data = _blob(repo, sha)
    if VIEW_GITIGNORE_RE.fullmatch(path) and data != VIEW_GITIGNORE:
        raise AdmissionRefused("view-gitignore", f"{path} may only hold 'dist/'", commit=commit, path=path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AdmissionRefused("not-text", f"{path} is not valid UTF-8", commit=commit, path=path) from None
    if "\0" in text:
        raise AdmissionRefused("not-text", f"{path} contains a NUL byte", commit=commit, path=path)


def check_case_collisions(repo: git.Repo, commit: str, touched: set[str]) -> None:
    """Refuse a commit that adds or renames a path colliding with another one by case or by
    Unicode normalisation (NFC/NFD spellings of one name are one file on macOS).

    Only collisions involving a path the commit touches count, so an old collision never
    blocks an unrelated change.
    """
    if not touched:
        return
    raw = repo.git.ls_tree("-r", "--name-only", "-z", commit, stdout_as_string=False).split(b"\0")
    names = [n.decode("utf-8", "surrogateescape") for n in raw if n]
    for group in nfc_collision(names, casefold=True):
        hit = sorted(p for p in group if p in touched)
        if not hit:
            continue
        path = hit[0]
        other = next(n for n in group if n != path)
        if path.lower() == other.lower():
            rule, how = "case-collision", "differ only by case"
        else:
            rule, how = "unicode-collision", "are one name after Unicode normalisation (they collide on macOS)"
        raise AdmissionRefused(rule, f"{path!r} and {other!r} {how}", commit=commit, path=path)


def check_commits(repo: git.Repo, base: str, candidate: str, role: str, *, limits: FileLimits) -> AdmissionResult:
    """Step 2: every commit base..candidate on its own — paths, modes, contents, collisions."""
    allowed = ALLOWED_PATHS.get(role)
    if allowed is None:
        raise AdmissionRefused("role", f"unknown writer role {role!r}")
    # GitPython annotates is_ancestor() as taking Commit objects; it hands any rev to `git merge-base`
    if base != candidate and not repo.is_ancestor(base, candidate):  # type: ignore[arg-type]
        raise AdmissionRefused("ancestry", f"candidate {candidate[:10]} does not descend from base {base[:10]}")
    commits = repo.git.rev_list("--reverse", "--topo-order", f"{base}..{candidate}").split()
    result = AdmissionResult(commits=commits)
    policy = Policy(lambda p: matches(p, allowed), "role " + role + " may not write {path} (commit {short})", limits)
    seen: set[tuple[str, str]] = set()
    for sha in commits:
        c = repo.commit(sha)
        if len(c.parents) != 1:
            raise AdmissionRefused("merge", f"commit {sha[:10]} is a merge; commit linearly", commit=sha)
        parent = c.parents[0].hexsha
        changes = commit_changes(repo, parent, sha)
        for change in changes:
            check_change(repo, change, sha, policy, seen)
            path = change.path
            repair = REFERENCE_REPAIR_ONLY.get(role)
            if repair and matches(path, repair):
                dropped = _reference_repair(repo, parent, change)
                if dropped is None:
                    raise AdmissionRefused("reference-repair-only",
                                           f"role {role} may change {path} only to drop references to deleted items",
                                           commit=sha, path=path)
                result.dropped_refs |= dropped
        check_case_collisions(repo, sha, {ch.path for ch in changes if ch.status != "D"})
    result.changed_paths = changed_paths(repo, base, candidate)
    return result


def dirty_paths(repo: git.Repo) -> list[str]:
    """Paths with uncommitted or untracked (not ignored) changes in a work tree."""
    out = repo.git.status("--porcelain", "--untracked-files=all", "--no-renames", "-z")
    return [e[3:] for e in out.split("\0") if len(e) > 3]


def hidden_paths(repo: git.Repo) -> list[str]:
    """Index entries marked ``assume-unchanged`` or ``skip-worktree``: Git no longer compares
    their files with the index, so what is on disk need not be what is committed."""
    out = repo.git.ls_files("-v", "-z", stdout_as_string=False)
    hidden = []
    for entry in out.split(b"\0"):
        if len(entry) > 2 and (entry[:1] == b"S" or entry[:1].islower()):
            hidden.append(entry[2:].decode("utf-8", "surrogateescape"))
    return hidden


def check_clean(worktree: Path) -> None:
    """Step 1: nothing uncommitted or untracked in the writer's worktree, and nothing hidden
    from ``git status`` by index flags (the check that counts is on the commit itself)."""
    wt = git.Repo(worktree)
    try:
        dirty = dirty_paths(wt)
        hidden = hidden_paths(wt)
    finally:
        wt.close()
    if dirty:
        more = f" and {len(dirty) - 1} more" if len(dirty) > 1 else ""
        raise AdmissionRefused("dirty-worktree", f"uncommitted or untracked changes in the worktree: {dirty[0]}{more}",
                               path=dirty[0])
    if hidden:
        more = f" and {len(hidden) - 1} more" if len(hidden) > 1 else ""
        raise AdmissionRefused("hidden-change", f"{hidden[0]}{more} is marked assume-unchanged or skip-worktree, so "
                               "its file need not be what is committed; clear the flag (git update-index "
                               "--no-assume-unchanged --no-skip-worktree) and commit what you mean", path=hidden[0])


def materialize(repo: git.Repo, treeish: str, dest: Path) -> None:
    """Write the top-level entries of ``treeish`` into ``dest`` from Git objects, no filters.

    Everything validation reads (graph and backing files, ``corrections.md``, the correction
    collections, the config files) is a top-level file; a subdirectory becomes an empty one.
    Symbolic links and submodules are made as such so validation sees them for what they are.
    """
    out = repo.git.ls_tree("-z", treeish, stdout_as_string=False)
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, raw_name = entry.split(b"\t", 1)
        mode, kind, sha = meta.decode().split()
        name = raw_name.decode("utf-8", "surrogateescape")
        if name in ("", ".", "..") or "/" in name:
            raise AdmissionRefused("path", f"{name!r} is not a plain file name", path=name)
        target = dest / name
        if kind == "blob" and mode == "120000":
            os.symlink(os.fsdecode(_blob(repo, sha)), target)
        elif kind == "blob":
            target.write_bytes(_blob(repo, sha))
        else:  # a tree or a submodule: never a graph file
            target.mkdir()


def check_tree_object(repo: git.Repo, treeish: str, role: str, *, changed: list[str] | tuple[str, ...] = (),
                      dropped_refs: set[str] | None = None, base: str | None = None) -> list[str]:
    """Step 3 on exactly what will be published: the tree is read from Git objects (never the
    writer's files, which index flags or later edits can make differ), its changed config files
    parsed as the loader would, then the graph validated (:func:`check_tree`); with ``base``,
    the fixed collection headings it holds are kept (:func:`check_fixed_headings`)."""
    with tempfile.TemporaryDirectory(prefix="rmtui-admission-") as tmp:
        folder = Path(tmp)
        materialize(repo, treeish, folder)
        bad = config_issues(folder, [p for p in changed if p in CONFIGS])
        if bad:
            raise AdmissionRefused("config", f"{bad[0].file}: {bad[0].message}", path=bad[0].file)
        if base is not None and role in FIXED_HEADING_ROLES and any(matches(p, MEMORY_GRAPH) for p in changed):
            with tempfile.TemporaryDirectory(prefix="rmtui-admission-base-") as base_tmp:
                materialize(repo, base, Path(base_tmp))
                check_fixed_headings(load_graph(base_tmp), load_graph(folder), role)
        return check_tree(folder, role, dropped_refs, changed=changed)


#: The roles held to the fixed collection headings: the model roles that edit Memory on their
#: own judgment. The sync-reconciler merges what both sides hold, and the program's writers
#: and a person's maintenance (who may retire a collection on purpose) are not model roles.
FIXED_HEADING_ROLES = frozenset(name for name, spec in ROLE_TABLE.items()
                                if spec.writer and name != "sync-reconciler")
COLLECTION_ROOT = "MEMORY.md"


def collection_headings(graph: Graph) -> dict[str, list[Item]]:
    """The ``M#`` headings of the Memory graph that link a correction collection, by the file."""
    out: dict[str, list[Item]] = {}
    for item in graph.ordered:
        if item.kind == "heading" and item.heading_kind == "M#" and item.domain == "memory" and item.id:
            name = backing_name("M#", item.id, "memory")
            if name in COLLECTION_FILES:
                out.setdefault(name, []).append(item)
    return out


def check_fixed_headings(base: Graph, graph: Graph, role: str) -> None:
    """Rule ``collection-heading-removed``: a fixed collection heading the base holds stays in
    the candidate, with its ``{M#…}`` anchor unchanged, and in ``MEMORY.md`` when it was
    there (the doctrine, "Agent corrections"). Its title and its place may change."""
    if role not in FIXED_HEADING_ROLES:
        return
    now = collection_headings(graph)
    for name, before in sorted(collection_headings(base).items()):
        anchor = f"{{M#{before[0].id}}}"
        kept = now.get(name, [])
        if not kept:
            other = [i for i in graph.ordered if i.kind == "heading" and i.id == before[0].id]
            how = (f"is now {{{other[0].heading_kind}{other[0].id}}} ({other[0].file}:{other[0].line}), which "
                   "no longer links the collection") if other else "was removed"
            raise AdmissionRefused("collection-heading-removed",
                                   f"the fixed heading {anchor} of {name} {how}; role {role} may move it within "
                                   f"{COLLECTION_ROOT} or reword its title, never remove it or change its anchor",
                                   path=other[0].file if other else COLLECTION_ROOT)
        was_root = any(i.file == COLLECTION_ROOT for i in before)
        if was_root and not any(i.file == COLLECTION_ROOT for i in kept):
            raise AdmissionRefused("collection-heading-removed",
                                   f"the fixed heading {anchor} of {name} was moved out of {COLLECTION_ROOT} to "
                                   f"{kept[0].file}:{kept[0].line}; role {role} may move it only within "
                                   f"{COLLECTION_ROOT}", path=kept[0].file)


def check_correction_writes(worktree: Path, role: str, changed: list[str] | tuple[str, ...]) -> None:
    """What a model role's writes to correction files must keep (rules the text states).

    - The correction role's commit is a Memory fix: a change to ``corrections.md`` alone is
      refused, and a ``corrections.md`` it changed stays within capacity (an old
      over-capacity file nobody touched never blocks an unrelated write).
    - An agent correction collection a role writes is linked by its ``M#`` heading, or its
      entries would never be retrieved (the sync-reconciler merges what both sides hold and
      is left to validation).
    """
    if role not in ROLE_TABLE:
        return  # the program's writers and people: their own rules
    touched = set(changed)
    if role == "update-correction" and touched == {CORRECTIONS_FILE}:
        raise AdmissionRefused("correction-not-a-fix", f"the commit changes only {CORRECTIONS_FILE}; record a "
                               "correction only together with the Memory fix it describes", path=CORRECTIONS_FILE)
    if role == "update-correction" and CORRECTIONS_FILE in touched:
        over = [i for i in check_corrections(worktree) if i.rule == "corrections-capacity"]
        if over:
            raise AdmissionRefused("corrections-capacity", str(over[0]), path=CORRECTIONS_FILE)
    written = touched & set(COLLECTION_FILES)
    if written and role != "sync-reconciler":
        unlinked = [i for i in check_collection_links(worktree, load_graph(worktree)) if i.file in written]
        if unlinked:
            raise AdmissionRefused("collection-unlinked", str(unlinked[0]), path=unlinked[0].file)


def check_tree(worktree: Path, role: str, dropped_refs: set[str] | None = None, *,
               changed: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Step 3: graph validation of the checked-out candidate (Insight exempt; capacity off,
    except for what the candidate itself changed: :func:`check_correction_writes`).

    ``dropped_refs`` are edge targets a reference-repair-only edit removed: each must be
    gone from the final graph, or the edit was not a repair.
    """
    if role in VALIDATION_EXEMPT:
        return []
    check_correction_writes(worktree, role, changed)
    report = validate_root(worktree, enforce_correction_capacity=False)
    if not report.ok:  # warnings never block admission
        errors = report.errors
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise AdmissionRefused("invalid-graph", f"{first}{more}", path=first.file) from None
    alive = sorted(t for t in (dropped_refs or ()) if t in report.graph.items)
    if alive:
        raise AdmissionRefused("reference-repair-only",
                               f"role {role} dropped references to items that still exist: {', '.join(alive[:5])}")
    return []
