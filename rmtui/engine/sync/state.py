"""The sync state file, ``.runtime/sync/state.json``, in the original's field names
(docs/formats.md, "The sync state file").

Both tools write it. The original's keys: ``last_successful_pull_at``,
``last_successful_push_at``, ``last_status``, ``last_message``, ``last_files`` and, after a
failure, ``last_failure_at``, ``last_failure_status``, ``last_failure_message``,
``last_failure_files`` (a success clears those four). rmtui adds ``last_pull_check_at`` and
``last_upstream_commit``; any other key (the other tool's, or a later version's) is kept on save.
Statuses: disabled, unconfigured, offline, error, conflict, dirty, synced, pushed, fresh; a
success is synced or pushed; fresh and disabled change nothing. Written atomically; a corrupt
file reads as empty (it only reports, it never decides).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime

from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.memory.roots import MemoryRoot

STATUSES = ("disabled", "unconfigured", "offline", "error", "conflict", "dirty", "synced", "pushed", "fresh")
SUCCESSES = ("synced", "pushed")
UNRECORDED = ("fresh", "disabled")
FAILURE_KEYS = ("last_failure_at", "last_failure_status", "last_failure_message", "last_failure_files")


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class SyncState:
    last_successful_pull_at: str | None = None
    last_successful_push_at: str | None = None
    last_pull_check_at: str | None = None
    last_upstream_commit: str | None = None
    last_pushed_commit: str | None = None
    last_status: str | None = None
    last_message: str | None = None
    last_files: list[str] = field(default_factory=list)
    last_failure_at: str | None = None
    last_failure_status: str | None = None
    last_failure_message: str | None = None
    last_failure_files: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # keys this version does not know, kept as they are

    def record(self, status: str, message: str, files: list[str] | None = None) -> None:
        """As the original records a result: a success clears the failure fields."""
        if status in UNRECORDED:
            return
        self.last_status, self.last_message, self.last_files = status, message, list(files or [])
        if status in SUCCESSES:
            self.last_failure_at = self.last_failure_status = self.last_failure_message = None
            self.last_failure_files = []
        else:
            self.last_failure_at, self.last_failure_status, self.last_failure_message = now_iso(), status, message
            self.last_failure_files = list(files or [])

    def to_json(self) -> dict:
        """The file's object: set fields only (the original pops the failure keys), then the rest."""
        out = dict(self.extra)
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name in FAILURE_KEYS and self.last_failure_status is None:
                out.pop(f.name, None)
                continue
            if value is None or (f.name == "last_files" and self.last_status is None):
                continue
            out[f.name] = value
        return out


_KNOWN = {f.name for f in fields(SyncState)} - {"extra"}


def path_of(root: MemoryRoot):
    return root.runtime / "sync" / "state.json"


def _typed(key: str, value: object) -> bool:
    if key in ("last_files", "last_failure_files"):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value is None or isinstance(value, str)


def load(root: MemoryRoot) -> SyncState:
    try:
        data = json.loads(path_of(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return SyncState()
    if not isinstance(data, dict):
        return SyncState()
    known = {k: v for k, v in data.items() if k in _KNOWN and _typed(k, v)}
    return SyncState(**known, extra={k: v for k, v in data.items() if k not in known})


def save(root: MemoryRoot, state: SyncState) -> None:
    path = path_of(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(state.to_json(), ensure_ascii=False, indent=2, sort_keys=True) + "\n")


def note_pushed(root: MemoryRoot, commit: str) -> None:
    """Record a push made outside ``sync push`` (the queue's own commits)."""
    st = load(root)
    st.last_pushed_commit = commit
    save(root, st)
