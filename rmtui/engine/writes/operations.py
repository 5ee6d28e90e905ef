"""Operation records and receipts in ``.runtime`` (docs/architecture.md, "Operations and receipts").

Phases: ``running`` → ``prepared`` → ``committed`` | ``no_change`` | ``failed`` |
``abandoned``. A record is written (durably) before each phase's work is considered done,
so recovery can tell from the record alone what to finish or abandon.
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from rmtui.engine import store
from rmtui.engine.errors import UsageError
from rmtui.engine.memory.roots import MemoryRoot

PHASES = ("running", "prepared", "committed", "no_change", "failed", "abandoned")
FINAL_PHASES = frozenset({"committed", "no_change", "failed", "abandoned"})



def new_operation_id(kind: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{kind}-{stamp}-{uuid.uuid4().hex[:8]}"


def process_identity() -> dict:
    """Who owns a lease: host, pid and the pid's start time (so pid reuse is detected)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _proc_start(os.getpid())}


def _proc_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode()
        return data.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_alive(lease: dict | None) -> bool:
    if not lease:
        return False
    if lease.get("until") is not None:
        return True  # time-bound leases (people, host agents) are never reclaimed by liveness
    if lease.get("host") != socket.gethostname():
        return True  # another machine's process: we cannot tell, assume alive
    pid = lease.get("pid")
    if not isinstance(pid, int):
        return False
    return pid_alive(pid) and _proc_start(pid) == lease.get("start")


def pid_alive(pid: int) -> bool:
    """A process with this pid exists on this machine (one we may not signal counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Effect:
    name: str
    state: str = "pending"  # pending | done | failed
    attempts: int = 0
    error: str | None = None


@dataclass
class Operation:
    id: str
    kind: str
    role: str
    phase: str
    base_commit: str
    branch: str
    worktree: str
    lease: dict | None = None
    batch_id: str | None = None
    candidate_uids: list[str] = field(default_factory=list)
    candidate_commit: str | None = None
    landed_commit: str | None = None
    changed_paths: list[str] = field(default_factory=list)
    summary: str = ""
    error: str | None = None
    allow_rebase: bool = True
    #: who lands a prepared candidate when not this supervisor, e.g. ``update-queue:<token>``
    #: (the Git-backed queue's finalizer); recovery never publishes such a one locally
    external_finalizer: str | None = None
    effects: list[Effect] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)

    @property
    def final(self) -> bool:
        return self.phase in FINAL_PHASES

    @property
    def records_batch(self) -> bool:
        """An Update of queued evidence: it commits the batch's update record with its change."""
        return bool(self.batch_id and self.candidate_uids)

    @property
    def trailer_id(self) -> str:
        """The ``RightMemory-Operation`` value: the batch id for an Update batch (as the
        original writes it), the operation's own id for every other writer."""
        return self.batch_id if self.records_batch and self.batch_id else self.id

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Operation:
        data = dict(data)
        data["effects"] = [Effect(**e) for e in data.get("effects", [])]
        return cls(**data)


@dataclass
class Receipt:
    operation_id: str
    kind: str
    phase: str
    batch_id: str | None
    candidate_uids: list[str]
    base_commit: str
    landed_commit: str | None
    changed_paths: list[str]
    summary: str
    sync: str
    warnings: list[str]
    error: str | None
    created_at: float
    #: the last correction of this landing (``update correct``): status (applied, no_change,
    #: needs_input, failed), message, the correcting operation and the comments so far
    correction: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Failure:
    """Why a run failed (a cycle's, an Update batch's): the engine error (its JSON, message and
    exit code) and, when the run's operation had begun, its id and the receipt it ended with."""

    error: dict[str, Any]
    message: str
    exit_code: int
    operation_id: str | None = None
    receipt: Receipt | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": "failed", "error": self.error, "message": self.message,
                               "exit_code": self.exit_code}
        if self.operation_id is not None:
            out.update(operation_id=self.operation_id, receipt=self.receipt.to_json() if self.receipt else None)
        return out


def _named(op_id: str, body: dict):
    """An operation or receipt as :mod:`rmtui.engine.refs` names it: its batch id is a second
    name, its last ``-`` part the tail the workbench shows."""
    from rmtui.engine.evidence import refs

    batch = body.get("batch_id")
    phase = body.get("phase") or "?"
    return refs.Named(op_id, names=(batch,) if isinstance(batch, str) and batch else (),
                      tail=op_id.rsplit("-", 1)[-1] if "-" in op_id else None, label=f"{op_id} ({phase})")


class OperationStore(store.StoreHandle):
    """Durable operation records and receipts for one root."""

    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.conn = store.connect(root.ensure_runtime())

    def save(self, op: Operation) -> Operation:
        if op.phase not in PHASES:
            raise ValueError(f"unknown phase {op.phase}")
        op.updated_at = time.time()
        with store.transaction(self.conn) as c:
            c.execute("INSERT INTO operations(id, body, phase, updated_at) VALUES (?,?,?,?)"
                      " ON CONFLICT(id) DO UPDATE SET body=excluded.body, phase=excluded.phase,"
                      " updated_at=excluded.updated_at",
                      (op.id, json.dumps(op.to_json()), op.phase, op.updated_at))
        return op

    def get(self, op_id: str) -> Operation:
        row = self.conn.execute("SELECT body FROM operations WHERE id=?", (op_id,)).fetchone()
        if row is None:
            raise UsageError(f"unknown operation {op_id!r}")
        return Operation.from_json(json.loads(row["body"]))

    def resolve(self, ref: str) -> str:
        """The operation id ``ref`` names, in any form a front prints: the whole id, a unique
        prefix of it or of its batch id, or its hex tail (the workbench's ``…55ac76d8``)."""
        from rmtui.engine.evidence import refs

        rows = self.conn.execute("SELECT id, body FROM operations ORDER BY updated_at").fetchall()
        return refs.pick(ref, "operation", [_named(r["id"], json.loads(r["body"])) for r in rows])

    def find(self, op_id: str) -> Operation | None:
        try:
            return self.get(op_id)
        except UsageError:
            return None

    def list(self, *, unfinished: bool = False, kind: str | None = None) -> builtins.list[Operation]:
        rows = self.conn.execute("SELECT body FROM operations ORDER BY updated_at").fetchall()
        ops = [Operation.from_json(json.loads(r["body"])) for r in rows]
        if unfinished:
            ops = [o for o in ops if not o.final or any(e.state != "done" for e in o.effects)]
        if kind:
            ops = [o for o in ops if o.kind == kind]
        return ops

    def save_receipt(self, receipt: Receipt) -> Receipt:
        with store.transaction(self.conn) as c:
            c.execute("INSERT OR REPLACE INTO receipts(id, body, created_at) VALUES (?,?,?)",
                      (receipt.operation_id, json.dumps(receipt.to_json()), receipt.created_at))
        return receipt

    def receipt(self, op_id: str) -> Receipt:
        row = self.conn.execute("SELECT body FROM receipts WHERE id=?", (op_id,)).fetchone()
        if row is None:
            raise UsageError(f"unknown receipt {op_id!r}")
        return Receipt(**json.loads(row["body"]))

    def resolve_receipt(self, ref: str) -> str:
        """The operation id of the receipt ``ref`` names (forms as :meth:`resolve`)."""
        from rmtui.engine.evidence import refs

        rows = self.conn.execute("SELECT id, body FROM receipts ORDER BY created_at").fetchall()
        return refs.pick(ref, "receipt", [_named(r["id"], json.loads(r["body"])) for r in rows])

    def find_receipt(self, op_id: str) -> Receipt | None:
        try:
            return self.receipt(op_id)
        except UsageError:
            return None

    def receipts(self, limit: int | None = None) -> builtins.list[Receipt]:
        sql = "SELECT body FROM receipts ORDER BY created_at DESC"
        rows = self.conn.execute(sql + (" LIMIT ?" if limit else ""), (limit,) if limit else ()).fetchall()
        return [Receipt(**json.loads(r["body"])) for r in rows]
