"""The sync state file, ``.runtime/sync/state.json`` (COMPAT §5 field names).

Statuses: disabled, unconfigured, offline, error, conflict, dirty, synced, pushed, fresh.
Written atomically; a corrupt file reads as empty (it only reports, it never decides).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.memory.roots import MemoryRoot

STATUSES = ("disabled", "unconfigured", "offline", "error", "conflict", "dirty", "synced", "pushed", "fresh")
FAILURES = ("offline", "error", "conflict", "dirty")


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class SyncState:
    last_successful_pull_at: str | None = None
    last_successful_push_at: str | None = None
    last_pull_check_at: str | None = None
    last_upstream_commit: str | None = None
    last_status: str | None = None
    last_status_message: str | None = None
    last_status_files: list[str] = field(default_factory=list)
    last_failure_at: str | None = None
    last_failure_status: str | None = None
    last_failure_message: str | None = None

    def record(self, status: str, message: str, files: list[str] | None = None) -> None:
        self.last_status, self.last_status_message, self.last_status_files = status, message, list(files or [])
        if status in FAILURES:
            self.last_failure_at, self.last_failure_status, self.last_failure_message = now_iso(), status, message


def path_of(root: MemoryRoot):
    return root.runtime / "sync" / "state.json"


def load(root: MemoryRoot) -> SyncState:
    try:
        data = json.loads(path_of(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return SyncState()
    known = {k: v for k, v in data.items() if k in SyncState.__dataclass_fields__} if isinstance(data, dict) else {}
    return SyncState(**known)


def save(root: MemoryRoot, state: SyncState) -> None:
    path = path_of(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(asdict(state), indent=2, sort_keys=True) + "\n")
