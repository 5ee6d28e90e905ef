"""Pending evidence the original RightMemory keeps with sync off (docs/formats.md, "Pending
evidence with sync off").

The original holds a session's submitted but unprocessed evidence in
``.runtime/async/update/<session>.json`` (``pending`` and ``current_batch``, or ``queued`` and
``current`` in older versions) and candidates it has not published in
``.runtime/async/update/outbox/<uid>.json``. rmtui does not import them: the original's
worker may be running on them at this moment and its state file is its own, so taking the
evidence over could make both tools land it. It refuses to run an Update on such a root
instead, naming what waits, until the original has finished it.
"""

from __future__ import annotations

import json
from pathlib import Path

from rmtui.engine.errors import ConflictError

ASYNC_DIR = Path(".runtime") / "async" / "update"


def original_pending(root_path: Path) -> list[str]:
    """What the original still holds: one line per session with pending jobs, one for the outbox."""
    base = Path(root_path) / ASYNC_DIR
    out: list[str] = []
    if not base.is_dir() or base.is_symlink():
        return out
    for path in sorted(base.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out.append(f"{ASYNC_DIR / path.name}: unreadable state of the original")
            continue
        if not isinstance(data, dict):
            continue
        jobs = [j for key in ("pending", "current_batch", "queued") for j in (data.get(key) or [])
                if isinstance(j, dict)]
        if isinstance(data.get("current"), dict):
            jobs.append(data["current"])
        if jobs:
            out.append(f"session {path.stem}: {len(jobs)} evidence job(s) in {ASYNC_DIR / path.name}")
    outbox = base / "outbox"
    if outbox.is_dir() and not outbox.is_symlink():
        count = sum(1 for p in outbox.glob("*.json"))
        if count:
            out.append(f"{count} unpublished candidate(s) in {ASYNC_DIR / 'outbox'}")
    return out


def refuse_if_original_pending(root_path: Path) -> None:
    waiting = original_pending(root_path)
    if waiting:
        raise ConflictError(
            "the original RightMemory still holds pending evidence on this root (" + "; ".join(waiting[:5])
            + "): let it finish (`rightmemory update`), then run rmtui's Update; rmtui does not take over "
            "the original's pending evidence", details={"original_pending": waiting})
