"""Evidence intake and the local Update queue (docs/architecture.md, "Evidence: from submit to receipt").

A submit is delivery to the queue, not to memory. Evidence states:
``inbox`` (waiting for a person's approval) → ``queued`` → ``claimed`` (in a batch) →
``consumed`` (its Update finished); ``rejected`` keeps the text and the reason.
"""

from __future__ import annotations

import builtins
import hashlib
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rmtui.engine import store
from rmtui.engine.display import CONTROL_CLASS
from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.evidence import records
from rmtui.engine.memory.roots import MemoryRoot

STATES = ("inbox", "queued", "claimed", "consumed", "rejected")
#: Evidence that may still become memory: neither consumed by an Update nor rejected.
#: Retrieval shows it apart from memory, as pending.
PENDING_STATES = ("inbox", "queued", "claimed")
_PENDING_SQL = "state IN ('inbox', 'queued', 'claimed')"
#: What an identifier must not hold: path separators and the control characters of
#: :data:`rmtui.engine.display.CONTROL_CLASS` (ESC, newlines, C1, bidi controls).
_BAD_ID_CHARS = re.compile(f"[/\\\\{CONTROL_CLASS}]")
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
    display_id: int
    submitted_at: str
    origin: str | None = None

    @classmethod
    def from_row(cls, row) -> Evidence:
        return cls(**{k: row[k] for k in row.keys()})  # noqa: SIM118 - a sqlite3.Row iterates its values

    @property
    def first_line(self) -> str:
        for line in self.text.splitlines():
            if line.strip():
                return line.strip()
        return ""

    def candidate(self) -> dict:
        """This evidence as the original's candidate record (docs/formats.md, "Evidence queue")."""
        return records.candidate(self.uid, self.session, self.display_id, self.text, self.submitted_at)

    def to_json(self, *, with_text: bool = False) -> dict:
        out = {
            "uid": self.uid, "session": self.session, "request": self.request, "kind": self.kind,
            "display_id": self.display_id, "submitted_at": self.submitted_at,
            "state": self.state, "reason": self.reason, "batch_id": self.batch_id,
            "sha256": self.sha256, "bytes": len(self.text.encode()), "first_line": self.first_line,
            "created_at": self.created_at, "updated_at": self.updated_at,
        }
        if with_text:
            out["text"] = self.text
        return out


#: The hard ceiling of one piece of evidence, whatever ``update.max_evidence_bytes`` says: a
#: larger setting is clamped to it, so a huge value never reaches a buffer allocation.
EVIDENCE_BYTES_CEILING = 64 * 1024 * 1024


def check_text(value, what: str) -> str:
    """Refuse what is not valid Unicode text: a lone surrogate (a JSON ``\\ud800`` escape, or
    invalid UTF-8 in a command-line argument) cannot be stored, hashed or printed."""
    if not isinstance(value, str):
        raise UsageError(f"{what} must be text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what} is not valid UTF-8 text (character {exc.start}); "
                         "re-encode it as UTF-8") from None
    return value


def evidence_limit(value) -> int:
    """``update.max_evidence_bytes`` as a usable bound (at most :data:`EVIDENCE_BYTES_CEILING`)."""
    if type(value) is not int or value < 1:
        return EVIDENCE_BYTES_CEILING
    return min(value, EVIDENCE_BYTES_CEILING)


def check_identifier(value: str, what: str) -> str:
    """The rule of an identifier (a session or request id): non-empty text of at most
    :data:`MAX_ID_LEN` characters, unpadded, not ``.``/``..``, with none of the characters of
    ``_BAD_ID_CHARS``; refusals name the rule and show the value escaped."""
    check_text(value, what)
    if not value or not value.strip():
        raise UsageError(f"{what} must not be empty")
    if len(value) > MAX_ID_LEN:
        raise UsageError(f"{what} is longer than {MAX_ID_LEN} characters")
    if value != value.strip():
        raise UsageError(f"{what} {value!r} must not start or end with whitespace")
    if _BAD_ID_CHARS.search(value):
        raise UsageError(f"{what} {value!r} must not contain path separators, newlines, control characters "
                         "or bidirectional text controls")
    if value in (".", ".."):
        raise UsageError(f"{what} {value!r} is not allowed")
    return value


def check_session_id(value: str) -> str:
    """The one session-id rule, wherever a session id enters: submit, retrieve, the MCP tools,
    the assistant protocol, guidance, Pursuit sessions, and queue records from a pull."""
    return check_identifier(value, "session id")


def decode_evidence(data: bytes, *, limit: int) -> str:
    """Refuse anything but non-empty UTF-8 text without NUL bytes, within the limit."""
    limit = evidence_limit(limit)
    if len(data) > limit:
        raise UsageError(f"evidence is too large: the limit is {limit} bytes (update.max_evidence_bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"evidence is not valid UTF-8 (byte {exc.start}); re-encode it as UTF-8") from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    return check_message(text, limit=limit)


def check_message(text, *, limit) -> str:
    """The text rules of one piece of evidence, for a submit and for a candidate another
    machine published alike: text, valid UTF-8, no NUL, not blank, within the limit."""
    check_text(text, "evidence")
    limit = evidence_limit(limit)
    if len(text.encode("utf-8")) > limit:
        raise UsageError(f"evidence is too large: the limit is {limit} bytes (update.max_evidence_bytes)")
    if "\x00" in text:
        raise UsageError("evidence contains NUL bytes; only text is accepted")
    if not text.strip():
        raise UsageError("evidence is empty")
    return text


def candidate_uid(session: str, request: str | None) -> str:
    if request is None:
        return uuid.uuid4().hex
    return hashlib.sha256(f"{session}\0{request}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class PendingRef:
    """Pending evidence without its text: cheap enough to read on every retrieval, and
    enough to tell whether the pending set changed (uid and content hash)."""

    uid: str
    session: str
    display_id: int
    submitted_at: str
    state: str
    sha256: str


class EvidenceQueue(store.StoreHandle):
    """The engine's evidence store for one root; safe across processes."""

    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.conn = store.connect(root.ensure_runtime())

    def submit(self, session: str, data: bytes, *, request: str | None = None, kind: str = "update") -> dict:
        """Save evidence durably; answers ``saved`` or ``duplicate`` (conflict on reuse)."""
        check_session_id(session)
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
            display_id = c.execute("SELECT COALESCE(MAX(display_id), 0) + 1 FROM evidence WHERE session=?",
                                   (session,)).fetchone()[0]
            c.execute(
                "INSERT INTO evidence(uid, session, request, sha256, text, kind, state, created_at, updated_at,"
                " display_id, submitted_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (uid, session, request, digest, text, kind, state, now, now, display_id, store.utc_iso(now)),
            )
        return {"state": "saved", "uid": uid, "queue_state": state}

    def import_candidate(self, c: dict, *, origin: str = "upstream") -> bool:
        """Keep another machine's candidate (from the Git-backed queue) as queued evidence;
        False when it is already here."""
        text = c["message"]
        created = datetime.fromisoformat(c["submitted_at"]).timestamp()
        now = time.time()
        with store.transaction(self.conn) as conn:
            if conn.execute("SELECT 1 FROM evidence WHERE uid=?", (c["uid"],)).fetchone():
                return False
            conn.execute(
                "INSERT INTO evidence(uid, session, request, sha256, text, kind, state, created_at, updated_at,"
                " display_id, submitted_at, origin) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (c["uid"], c["session_id"], None, hashlib.sha256(text.encode()).hexdigest(), text, "update",
                 "queued", created, now, c["display_id"], c["submitted_at"], origin))
        return True

    def get(self, uid: str) -> Evidence:
        row = self.conn.execute("SELECT * FROM evidence WHERE uid=?", (uid,)).fetchone()
        if row is None:
            raise UsageError(f"unknown evidence uid {uid!r}")
        return Evidence.from_row(row)

    def resolve(self, ref: str, session: str | None = None) -> str:
        """A uid from any form a front prints (:func:`rmtui.engine.refs.pick`): the whole uid, a
        unique prefix, or a display id (display ids count per session: give ``session`` when
        several sessions have that number)."""
        from rmtui.engine.evidence import refs

        want = refs.normalise(ref).lower()
        rows = self.conn.execute(
            "SELECT uid, session, display_id FROM evidence WHERE uid=?"
            " OR (length(?) >= ? AND substr(uid, 1, length(?)) = ?)"
            " OR (? AND display_id=? AND (? IS NULL OR session=?))",
            (want, want, refs.MIN_PREFIX, want, want, want.isdigit(), int(want) if want.isdigit() else -1,
             session, session)).fetchall()
        things = [refs.Named(r["uid"], display_id=str(r["display_id"]) if session in (None, r["session"]) else None,
                             label=f"{r['uid'][:8]} (session {r['session']}, #{r['display_id']})") for r in rows]
        more = " or --session" if want.isdigit() and session is None else ""
        return refs.pick(ref, "evidence", things, more=more)

    def resolve_all(self, refs_: Iterable[str], session: str | None = None) -> builtins.list[str]:
        """:meth:`resolve` of each reference, in order, without repeats."""
        return builtins.list(dict.fromkeys(self.resolve(r, session) for r in refs_))

    def list(self, *, state: str | None = None, session: str | None = None,
             limit: int | None = None) -> builtins.list[Evidence]:
        if state is not None and state not in STATES:
            raise UsageError(f"unknown state {state!r} (one of {', '.join(STATES)})")
        sql, args = "SELECT * FROM evidence WHERE 1=1", builtins.list[object]()
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

    def pending_refs(self, limit: int | None = None) -> builtins.list[PendingRef]:
        """Pending evidence (see :data:`PENDING_STATES`) in submission order, without text;
        with ``limit``, only the newest that many."""
        sql = ("SELECT uid, session, display_id, submitted_at, state, sha256 FROM evidence"
               f" WHERE {_PENDING_SQL} ORDER BY seq DESC")
        rows = self.conn.execute(sql + (" LIMIT ?" if limit else ""), (limit,) if limit else ()).fetchall()
        return [PendingRef(r["uid"], r["session"], r["display_id"], r["submitted_at"], r["state"], r["sha256"])
                for r in reversed(rows)]

    def pending_texts(self, uids: Iterable[str]) -> dict[str, str]:
        """uid -> text of those of ``uids`` still pending (read only for items not seen before)."""
        out: dict[str, str] = {}
        wanted = builtins.list(uids)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            marks = ",".join("?" * len(chunk))
            out.update((r["uid"], r["text"]) for r in self.conn.execute(
                f"SELECT uid, text FROM evidence WHERE {_PENDING_SQL} AND uid IN ({marks})", chunk))
        return out

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATES}
        for row in self.conn.execute("SELECT state, COUNT(*) n FROM evidence GROUP BY state"):
            out[row["state"]] = row["n"]
        return out

    def _transition(self, uids: builtins.list[str], allowed: tuple[str, ...], new: str,
                    reason: str | None = None) -> builtins.list[Evidence]:
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

    def approve(self, uids: builtins.list[str]) -> builtins.list[Evidence]:
        return self._transition(uids, ("inbox",), "queued")

    def reject(self, uids: builtins.list[str], reason: str) -> builtins.list[Evidence]:
        if not reason or not reason.strip():
            raise UsageError("a rejection needs a reason")
        return self._transition(uids, ("inbox", "queued"), "rejected", reason.strip())

    def unapprove(self, uids: builtins.list[str]) -> builtins.list[Evidence]:
        """Undo an approval: queued evidence goes back to the inbox; refused once a batch claimed it."""
        return self._transition(uids, ("queued",), "inbox")

    def unreject(self, uids: builtins.list[str], *, to: str = "inbox") -> builtins.list[Evidence]:
        """Undo a rejection: the evidence returns to ``to`` (inbox or queued), its reason cleared."""
        if to not in ("inbox", "queued"):
            raise UsageError(f"rejected evidence goes back to the inbox or the queue, not {to!r}")
        return self._transition(uids, ("rejected",), to)

    def claim(self, uids: builtins.list[str], batch_id: str) -> None:
        """Move queued evidence into a batch (atomically: all or nothing)."""
        now = time.time()
        with store.transaction(self.conn) as c:
            for uid in uids:
                row = c.execute("SELECT state FROM evidence WHERE uid=?", (uid,)).fetchone()
                if row is None or row["state"] != "queued":
                    raise ConflictError(f"evidence {uid} is not queued")
            c.executemany("UPDATE evidence SET state='claimed', batch_id=?, updated_at=? WHERE uid=?",
                          [(batch_id, now, u) for u in uids])

    def release(self, uids: builtins.list[str], batch_id: str | None) -> None:
        """A batch that did not land gives its evidence back to the queue."""
        now = time.time()
        with store.transaction(self.conn) as c:
            c.executemany("UPDATE evidence SET state='queued', batch_id=NULL, updated_at=?"
                          " WHERE uid=? AND state='claimed' AND (batch_id IS ? OR ? IS NULL)",
                          [(now, u, batch_id, batch_id) for u in uids])

    def consume(self, uids: builtins.list[str], batch_id: str | None, *, elsewhere: bool = False) -> None:
        """The batch's Update finished: its evidence is consumed (kept, never deleted).
        ``elsewhere``: another machine's batch consumed it, so it may still be queued here."""
        now = time.time()
        states = "('queued', 'claimed')" if elsewhere else "('claimed')"
        with store.transaction(self.conn) as c:
            c.executemany(f"UPDATE evidence SET state='consumed', updated_at=? WHERE uid=? AND state IN {states}",
                          [(now, u) for u in uids])


def read_evidence_input(source: str | None, *, max_bytes: int | None = None) -> bytes:
    """Read evidence bytes from a file path or ``-`` (stdin).

    At most one byte more than the limit (``max_bytes``, bounded by :func:`evidence_limit`)
    is read, so an oversized input is refused by :func:`decode_evidence` without being held
    in memory whole.
    """
    import sys

    size = evidence_limit(max_bytes) + 1
    if source in (None, "-"):
        return _read_at_most(sys.stdin.buffer, size)
    p = Path(source)
    if not p.is_file():
        raise UsageError(f"evidence file {source} does not exist or is not a file")
    try:
        with p.open("rb") as fh:
            return _read_at_most(fh, size)
    except OSError as exc:
        raise UsageError(f"evidence file {source} cannot be read: {exc.strerror}") from exc


def _read_at_most(fh, size: int) -> bytes:
    """Up to ``size`` bytes, read in chunks (a bare ``read(size)`` may allocate ``size`` up front)."""
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = fh.read(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
