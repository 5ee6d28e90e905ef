"""Evidence intake and the local Update queue (DESIGN.md section 4).

A submit is delivery to the queue, not to memory. Evidence states:
``inbox`` (waiting for a person's approval) → ``queued`` → ``claimed`` (in a batch) →
``consumed`` (its Update finished); ``rejected`` keeps the text and the reason.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from rmtui.engine import store
from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.roots import MemoryRoot

STATES = ("inbox", "queued", "claimed", "consumed", "rejected")
_BAD_ID_CHARS = re.compile(r"[/\\\x00-\x1f\x7f]")
MAX_ID_LEN = 200


@dataclass
class Evidence:
    uid: str
    session: str
    request: str | None
    sha256: str
    text: str
    kind: str
    state: str
    reason: str | None
    batch_id: str | None
    created_at: float
    updated_at: float
    seq: int

    @classmethod
    def from_row(cls, row) -> Evidence:
        return cls(**{k: row[k] for k in row.keys()})

    @property
    def first_line(self) -> str:
        for line in self.text.splitlines():
            if line.strip():
                return line.strip()
        return ""

    def to_json(self, *, with_text: bool = False) -> dict:
        out = {
            "uid": self.uid, "session": self.session, "request": self.request, "kind": self.kind,
            "state": self.state, "reason": self.reason, "batch_id": self.batch_id,
            "sha256": self.sha256, "bytes": len(self.text.encode()), "first_line": self.first_line,
            "created_at": self.created_at, "updated_at": self.updated_at,
        }
        if with_text:
            out["text"] = self.text
        return out


def check_identifier(value: str, what: str) -> str:
    if not value or not value.strip():
        raise UsageError(f"{what} must not be empty")
    if _BAD_ID_CHARS.search(value):
        raise UsageError(f"{what} {value!r} must not contain path separators, newlines or control characters")
    if len(value) > MAX_ID_LEN:
        raise UsageError(f"{what} is longer than {MAX_ID_LEN} characters")
    if value in (".", ".."):
        raise UsageError(f"{what} {value!r} is not allowed")
    return value


def decode_evidence(data: bytes, *, limit: int) -> str:
    """Refuse anything but non-empty UTF-8 text without NUL bytes, within the limit."""
    if len(data) > limit:
        raise UsageError(f"evidence is too large: the limit is {limit} bytes (update.max_evidence_bytes)")
    if b"\x00" in data:
        raise UsageError("evidence contains NUL bytes; only text is accepted")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"evidence is not valid UTF-8 (byte {exc.start}); re-encode it as UTF-8") from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise UsageError("evidence is empty")
    return text


def candidate_uid(session: str, request: str | None) -> str:
    if request is None:
        return uuid.uuid4().hex
    return hashlib.sha256(f"{session}\0{request}".encode()).hexdigest()[:32]


class EvidenceQueue(store.StoreHandle):
    """The engine's evidence store for one root; safe across processes."""

    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.conn = store.connect(root.ensure_runtime())

    def submit(self, session: str, data: bytes, *, request: str | None = None, kind: str = "update") -> dict:
        """Save evidence durably; answers ``saved`` or ``duplicate`` (conflict on reuse)."""
        check_identifier(session, "session id")
        if request is not None:
            check_identifier(request, "request id")
        cfg = self.root.config()
        text = decode_evidence(data, limit=cfg.get("update.max_evidence_bytes"))
        digest = hashlib.sha256(text.encode()).hexdigest()
        uid = candidate_uid(session, request)
        state = "inbox" if cfg.get("update.approval") == "required" else "queued"
        now = time.time()
        with store.transaction(self.conn) as c:
            row = c.execute("SELECT sha256, state FROM evidence WHERE uid=?", (uid,)).fetchone()
            if row is not None:
                if row["sha256"] == digest:
                    return {"state": "duplicate", "uid": uid, "queue_state": row["state"]}
                raise ConflictError(
                    f"request id {request!r} of session {session!r} already belongs to different evidence",
                    details={"uid": uid},
                )
            c.execute(
                "INSERT INTO evidence(uid, session, request, sha256, text, kind, state, created_at, updated_at)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (uid, session, request, digest, text, kind, state, now, now),
            )
        return {"state": "saved", "uid": uid, "queue_state": state}

    def get(self, uid: str) -> Evidence:
        row = self.conn.execute("SELECT * FROM evidence WHERE uid=?", (uid,)).fetchone()
        if row is None:
            raise UsageError(f"unknown evidence uid {uid!r}")
        return Evidence.from_row(row)

    def list(self, *, state: str | None = None, session: str | None = None, limit: int | None = None) -> list[Evidence]:
        if state is not None and state not in STATES:
            raise UsageError(f"unknown state {state!r} (one of {', '.join(STATES)})")
        sql, args = "SELECT * FROM evidence WHERE 1=1", []
        if state:
            sql += " AND state=?"
            args.append(state)
        if session:
            sql += " AND session=?"
            args.append(session)
        sql += " ORDER BY seq"
        if limit:
            sql += " LIMIT ?"
            args.append(limit)
        return [Evidence.from_row(r) for r in self.conn.execute(sql, args)]

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATES}
        for row in self.conn.execute("SELECT state, COUNT(*) n FROM evidence GROUP BY state"):
            out[row["state"]] = row["n"]
        return out

    def _transition(self, uids: list[str], allowed: tuple[str, ...], new: str, reason: str | None = None) -> list[Evidence]:
        if not uids:
            raise UsageError("no evidence uid given")
        now = time.time()
        with store.transaction(self.conn) as c:
            for uid in uids:
                row = c.execute("SELECT state FROM evidence WHERE uid=?", (uid,)).fetchone()
                if row is None:
                    raise UsageError(f"unknown evidence uid {uid!r}")
                if row["state"] not in allowed:
                    raise ConflictError(f"evidence {uid} is {row['state']}, not {' or '.join(allowed)}")
            c.executemany("UPDATE evidence SET state=?, reason=?, updated_at=? WHERE uid=?",
                          [(new, reason, now, uid) for uid in uids])
        return [self.get(u) for u in uids]

    def approve(self, uids: list[str]) -> list[Evidence]:
        return self._transition(uids, ("inbox",), "queued")

    def reject(self, uids: list[str], reason: str) -> list[Evidence]:
        if not reason or not reason.strip():
            raise UsageError("a rejection needs a reason")
        return self._transition(uids, ("inbox", "queued"), "rejected", reason.strip())

    def claim(self, uids: list[str], batch_id: str) -> None:
        """Move queued evidence into a batch (atomically: all or nothing)."""
        now = time.time()
        with store.transaction(self.conn) as c:
            for uid in uids:
                row = c.execute("SELECT state FROM evidence WHERE uid=?", (uid,)).fetchone()
                if row is None or row["state"] != "queued":
                    raise ConflictError(f"evidence {uid} is not queued")
            c.executemany("UPDATE evidence SET state='claimed', batch_id=?, updated_at=? WHERE uid=?",
                          [(batch_id, now, u) for u in uids])

    def release(self, uids: list[str], batch_id: str | None) -> None:
        """A batch that did not land gives its evidence back to the queue."""
        now = time.time()
        with store.transaction(self.conn) as c:
            c.executemany("UPDATE evidence SET state='queued', batch_id=NULL, updated_at=?"
                          " WHERE uid=? AND state='claimed' AND (batch_id IS ? OR ? IS NULL)",
                          [(now, u, batch_id, batch_id) for u in uids])

    def consume(self, uids: list[str], batch_id: str | None) -> None:
        """The batch's Update finished: its evidence is consumed (kept, never deleted)."""
        now = time.time()
        with store.transaction(self.conn) as c:
            c.executemany("UPDATE evidence SET state='consumed', updated_at=? WHERE uid=? AND state='claimed'",
                          [(now, u) for u in uids])


def read_evidence_input(source: str | None, *, max_bytes: int | None = None) -> bytes:
    """Read evidence bytes from a file path or ``-`` (stdin).

    With ``max_bytes`` at most one byte more than the limit is read, so an oversized input
    is refused by :func:`decode_evidence` without being held in memory whole.
    """
    import sys

    size = -1 if max_bytes is None else max_bytes + 1
    if source in (None, "-"):
        return sys.stdin.buffer.read(size)
    p = Path(source)
    if not p.is_file():
        raise UsageError(f"evidence file {source} does not exist or is not a file")
    try:
        with p.open("rb") as fh:
            return fh.read(size)
    except OSError as exc:
        raise UsageError(f"evidence file {source} cannot be read: {exc.strerror}") from exc
