"""Live change sets of a memory root, for fronts that repaint as memory changes.

A burst of file events (a publish rewrites several files, moves a ref and appends to the
state database) arrives as one :class:`ChangeSet`, so a front repaints once per burst.
Events are classified into *kinds* so a front reloads only what changed: the graph, Insight
logs, the queue, runtime state (evidence, operations, receipts), maintenance worktrees, the
Pursuit editor's journal, the cycles' points and outcomes or the branch head. Noise the
fronts cause themselves (Git object writes, index refreshes, SQLite shared memory, lock
files) is dropped here, which keeps a reader from triggering
itself in a loop. SQLite touches its WAL file even when a connection only reads, so a
state event counts only when the database's ``data_version`` moved: a commit happened.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from rmtui.engine.memory.roots import RUNTIME_DIR, MemoryRoot
from rmtui.engine.store import DB_NAME

#: the operations' worktrees folder under the runtime folder (``writes.worktrees.WORKTREES``,
#: not imported from there: that module imports GitPython, 60 ms of the workbench's start)
WORKTREES = "worktrees"

GRAPH = "graph"          # Memory, Pursuit, corrections, guidance, configuration
INSIGHT = "insight"      # insight_logs/*.md
QUEUE = "queue"          # update_queue/**, update_records/**
STATE = "state"          # .runtime/state.sqlite3 (evidence, operations, receipts)
WORKTREE = "worktree"    # files inside .runtime/worktrees/<operation>/
HEAD = "head"            # the branch head moved (.git/HEAD, refs, packed-refs)
EDITOR = "editor"        # .runtime/pursuit-editor/session.json: the Pursuit editor's pending edits
CYCLES = "cycles"        # .runtime/cycles/<name>.json and .runtime/<name>/trigger-state.json
KINDS = (GRAPH, INSIGHT, QUEUE, STATE, WORKTREE, HEAD, EDITOR, CYCLES)

#: the same folder as pursuit.EDITOR_DIR, spelled out so classifying a path imports no editor code
_EDITOR_JOURNAL = ("pursuit-editor", "session.json")
#: the cycles' state files (cycles.common.CYCLES_DIR, writes.triggers.FILE), spelled out for the same reason
_CYCLE_STATE_DIR = "cycles"
_TRIGGER_STATE = "trigger-state.json"

_TOP_LEVEL_SUFFIXES = (".md", ".toml")


@dataclass(frozen=True)
class ChangeSet:
    """Root-relative paths that changed in one burst, and the kinds they belong to."""

    paths: frozenset[str] = field(default_factory=frozenset)
    kinds: frozenset[str] = field(default_factory=frozenset)

    def merge(self, other: ChangeSet) -> ChangeSet:
        return ChangeSet(self.paths | other.paths, self.kinds | other.kinds)

    def __bool__(self) -> bool:
        return bool(self.paths)

    def worktree_names(self) -> set[str]:
        """Operation ids whose worktree files changed."""
        prefix = f"{RUNTIME_DIR}/{WORKTREES}/"
        return {p[len(prefix):].split("/", 1)[0] for p in self.paths if p.startswith(prefix)}


def classify(rel: str, deleted: bool = False) -> str | None:
    """The kind of a root-relative POSIX path, or None for noise."""
    parts = PurePosixPath(rel).parts
    if not parts:
        return None
    name = parts[-1]
    if name.endswith(".lock"):
        return None
    head = parts[0]
    if head == ".git":
        if len(parts) == 2 and name in ("HEAD", "packed-refs"):
            return HEAD
        if len(parts) >= 3 and parts[1] == "refs":
            return HEAD
        return None  # objects, index, logs, worktree metadata
    if head == RUNTIME_DIR:
        if len(parts) == 2 and name == DB_NAME:
            return STATE
        if len(parts) == 2 and name == DB_NAME + "-wal":
            return None if deleted else STATE  # a closing last reader deletes the WAL: not a change
        if len(parts) >= 4 and parts[1] == WORKTREES:
            if parts[3] == ".git" or name.endswith(("~", ".swp", ".swx")) or name.startswith(".#"):
                return None
            return WORKTREE
        if parts[1:] == _EDITOR_JOURNAL:
            return EDITOR
        if len(parts) == 3 and (name == _TRIGGER_STATE or (parts[1] == _CYCLE_STATE_DIR and name.endswith(".json"))):
            return CYCLES  # points and last outcomes: written after a cycle's commit, so HEAD alone is too early
        return None
    if head == "insight_logs":
        return INSIGHT if name.endswith(".md") else None
    if head in ("update_queue", "update_records"):
        return QUEUE
    if len(parts) == 1 and name.endswith(_TOP_LEVEL_SUFFIXES):
        return GRAPH
    return None


def _relative(root: Path, raw: str) -> str | None:
    try:
        return Path(raw).relative_to(root).as_posix()
    except ValueError:
        return None


def changeset(root: Path, raw_changes) -> ChangeSet:
    """Classify watchfiles' ``{(Change, path)}`` into a :class:`ChangeSet` (noise dropped)."""
    from watchfiles import Change

    paths: set[str] = set()
    kinds: set[str] = set()
    for change, raw in raw_changes:
        rel = _relative(root, raw)
        if rel is None:
            continue
        kind = classify(rel, deleted=change == Change.deleted)
        if kind is None:
            continue
        paths.add(rel)
        kinds.add(kind)
    return ChangeSet(frozenset(paths), frozenset(kinds))


def watch_root(root: MemoryRoot | Path, *, stop_event: threading.Event | None = None,
               step_ms: int = 50, debounce_ms: int = 400,
               force_polling: bool | None = None, on_ready: Callable[[], None] | None = None) -> Iterator[ChangeSet]:
    """Yield merged change sets until ``stop_event`` is set.

    Events are gathered until ``step_ms`` pass without a new one (at most ``debounce_ms``),
    so one publication arrives as one set; sets that hold only noise are not yielded.
    ``on_ready`` is called once the watch is in place (at its first wake-up: a change, or
    half a second without one): a front that read the root before then reads it again, or a
    change made while the watcher was still starting (a busy machine: seconds) is never seen.
    """
    from watchfiles import watch

    from rmtui.engine import store

    mroot = root if isinstance(root, MemoryRoot) else MemoryRoot(Path(root))
    path = mroot.path.resolve()
    stop = stop_event or threading.Event()

    def keep(change, raw: str) -> bool:
        rel = _relative(path, raw)
        return rel is not None and classify(rel, deleted=change.name == "deleted") is not None

    # Held open while watching: it reads data_version, and keeps the WAL file in place so
    # short-lived readers elsewhere never delete and recreate it.
    conn = store.connect(mroot.ensure_runtime())
    try:
        version = _data_version(conn)
        ready = on_ready
        for raw in watch(path, watch_filter=keep, debounce=debounce_ms, step=step_ms, stop_event=stop,
                         rust_timeout=500, yield_on_timeout=True, raise_interrupt=False,
                         force_polling=force_polling):
            if ready is not None:
                ready()
                ready = None
            if not raw:  # a quiet half second
                continue
            cs = changeset(path, raw)
            if STATE in cs.kinds:
                now = _data_version(conn)
                if now == version:
                    cs = _without_state(cs)
                version = now
            if cs:
                yield cs
    finally:
        conn.close()


def _data_version(conn) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _without_state(cs: ChangeSet) -> ChangeSet:
    state_paths = {p for p in cs.paths if classify(p) == STATE}
    paths = cs.paths - state_paths
    kinds = frozenset(classify(p) for p in paths) - {None}
    return ChangeSet(frozenset(paths), frozenset(kinds))  # type: ignore[arg-type]
