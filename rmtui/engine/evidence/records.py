"""The original tool's tracked record shapes for evidence (docs/formats.md, "Evidence queue";
docs/formats.md, "Update records"), byte for byte.

Evidence lives in rmtui's durable local store; these functions give each item the
original's candidate record (``schema_version``, ``uid``, ``session_id``, per-session
``display_id``, ``message``, canonical UTC ``submitted_at``), derive the batch id with the
original's formula, and build the update record a landed batch commits. Both tools then
agree on which evidence a landing consumed, and the Git-backed queue can publish a
candidate exactly as the original would.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

SCHEMA_VERSION = 1
RECORDS_DIR = "update_records"
CANDIDATE_KEYS = frozenset({"schema_version", "uid", "session_id", "display_id", "message", "submitted_at"})
RECORD_KEYS = frozenset({"schema_version", "operation_id", "candidates"})
BATCH_PREFIX = "update-batch-"


def candidate(uid: str, session_id: str, display_id: int, message: str, submitted_at: str) -> dict:
    return {"schema_version": SCHEMA_VERSION, "uid": uid, "session_id": session_id, "display_id": display_id,
            "message": message, "submitted_at": submitted_at}


def record_bytes(data: dict) -> bytes:
    """Indent-2, sorted-key UTF-8 JSON plus a newline: the original's on-disk form."""
    return (json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()


def candidate_sha256(c: dict) -> str:
    return hashlib.sha256(record_bytes(c)).hexdigest()


def candidate_order(c: dict) -> tuple:
    return (c["session_id"], c["display_id"], c["submitted_at"], c["uid"])


def batch_id(candidates: Iterable[dict]) -> str:
    """``update-batch-`` + SHA-256 of the sessions' jobs in canonical JSON (the original's formula)."""
    sessions: dict[str, list[dict]] = {}
    for c in candidates:
        sessions.setdefault(c["session_id"], []).append(c)
    if not sessions:
        raise ValueError("a batch needs at least one candidate")
    participants = [
        {"session_id": session, "jobs": [
            {"id": c["display_id"], "candidate_uid": c["uid"], "message": c["message"],
             "submitted_at": c["submitted_at"]}
            for c in sorted(items, key=lambda c: (c["display_id"], c["submitted_at"], c["uid"]))]}
        for session, items in sorted(sessions.items())
    ]
    canonical = json.dumps(participants, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return BATCH_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


def update_record(candidates: Iterable[dict]) -> tuple[str, bytes]:
    """The path and bytes of the update record of a batch: its id and its full candidates."""
    items = sorted(candidates, key=candidate_order)
    op_id = batch_id(items)
    data = {"schema_version": SCHEMA_VERSION, "operation_id": op_id, "candidates": items}
    return f"{RECORDS_DIR}/{op_id}.json", record_bytes(data)
