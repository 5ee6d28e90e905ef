"""The native assistant protocol (docs/architecture.md, "Native assistant protocol"): model-free preparation, claiming,
validation and publication for hosts whose own children read and edit memory.

An Update task is a supervisor operation of kind ``assistant`` (role ``update``) with a
time-bound lease. Every other cycle can be handed to a host too (``begin --role``): the task
is that cycle's own operation (kind ``prune``, ``insight``, ``correction``) under the same kind
of lease, or, for ``sync-reconciler``, a staged merge in a worktree of the task's own. The
cycle code prepares and finishes it exactly as on the model path (:mod:`rmtui.engine.cycles.hosted`).
Expiry never discards edits: it only allows ``begin --retry`` to replace the task, which
fences the old worktree (its operation is abandoned and can never complete).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import git

from rmtui.engine.cycles import common, hosted
from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.evidence.batching import Batch, pick_among, select_batch
from rmtui.engine.evidence.queue import EvidenceQueue, check_session_id
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.graph import load_graph
from rmtui.engine.memory.role_table import may_read
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.memory.validation import COLLECTION_FILES
from rmtui.engine.roles.prompts import role_instructions
from rmtui.engine.writes.operations import Operation, Receipt
from rmtui.engine.writes.supervisor import Supervisor

KIND = "assistant"
#: The native retrieve child reads what the retrieve role may read, from its own contract
#: (it quotes; it has no ``submit_selection``).
RETRIEVE_ROLE, RETRIEVE_CONTRACT = "retrieve", "retrieve-host"
EFFECTS = ("evidence_consumed",)


@dataclass(frozen=True)
class HostContext:
    """What a host needs at a session's start: the root and its memory commit, the files its
    retrieve child may read, the session's pending evidence (a file and a count), the retrieve
    instructions, and what recovery settled on the way."""

    root: str
    memory_commit: str | None
    sources: list[str]
    imports: list[str]
    pending_evidence_file: str
    pending_count: int
    instructions: str
    settled: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UpdateTask:
    """An Update task as a host sees it: its batch and candidates, worktree and base, the
    instruction and candidate files, the argv that completes it, its lease expiry, and the
    error a refused completion left on it."""

    task_id: str
    batch_id: str | None
    phase: str
    worktree: str
    base_commit: str
    instructions: str
    candidates: str
    candidate_uids: list[str]
    complete: list[str]
    expires_at: str | None
    expired: bool
    error: str | None
    #: the receipt, once the task's operation ended (``status`` only)
    receipt: Receipt | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "task_id": self.task_id, "batch_id": self.batch_id, "phase": self.phase, "worktree": self.worktree,
            "base_commit": self.base_commit, "instructions": self.instructions, "candidates": self.candidates,
            "candidate_uids": self.candidate_uids, "complete": self.complete, "expires_at": self.expires_at,
            "expired": self.expired, "error": self.error}
        if self.receipt is not None:
            out["receipt"] = self.receipt.to_json()
        return out


@dataclass(frozen=True)
class CycleTask:
    """A cycle's task as a host sees it (an Update task's shape, with the ``role``, the
    operation ``kind`` and the due ``context`` instead of a batch)."""

    task_id: str
    role: str
    kind: str
    phase: str | None
    worktree: str
    base_commit: str
    instructions: str
    context_file: str
    context: dict[str, Any]
    complete: list[str]
    expires_at: str | None
    expired: bool
    error: str | None
    #: the outcome recorded when the task completed (``task_status`` only)
    outcome: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "task_id": self.task_id, "role": self.role, "kind": self.kind, "phase": self.phase,
            "worktree": self.worktree, "base_commit": self.base_commit, "instructions": self.instructions,
            "context_file": self.context_file, "context": self.context, "complete": self.complete,
            "expires_at": self.expires_at, "expired": self.expired, "error": self.error}
        if self.outcome is not None:
            out["outcome"] = self.outcome
        return out


@dataclass(frozen=True)
class OpenTasks:
    """Every open host task (any role): ``busy`` when there is one, else ``idle``."""

    tasks: list[UpdateTask | CycleTask]

    def to_json(self) -> dict[str, Any]:
        return {"state": "busy" if self.tasks else "idle", "tasks": [t.to_json() for t in self.tasks]}


@dataclass(frozen=True)
class NoTask:
    """``status`` with no Update task open."""

    state: str = "idle"

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state}


@dataclass(frozen=True)
class Begun:
    """``begin``'s answer with a task: ``claimed`` true for a new one, false for the one already
    open; ``set_aside``: what the shared queue could not publish on the way (sync on)."""

    claimed: bool
    task: UpdateTask | CycleTask
    set_aside: list[str] = field(default_factory=list)

    @property
    def task_id(self) -> str:
        return self.task.task_id

    def to_json(self) -> dict[str, Any]:
        return {"claimed": self.claimed, **self.task.to_json(),
                **({"set_aside": self.set_aside} if self.set_aside else {})}


@dataclass(frozen=True)
class UpdateIdle:
    """``begin``'s answer when no batch is ready: how many are queued and, with the shared queue
    (sync on), the lease that holds it (None: no lease) and what it set aside."""

    queued: int
    shared: bool = False
    lease: dict[str, Any] | None = None
    set_aside: list[str] = field(default_factory=list)

    claimed = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"claimed": False, "state": "idle", "queued": self.queued}
        if self.shared:
            out["lease"] = self.lease
        if self.set_aside:
            out["set_aside"] = self.set_aside
        return out


@dataclass(frozen=True)
class TaskOutcome:
    """A finished cycle task: its id and role, and the cycle's outcome as it was recorded with
    the task (the JSON the model path's outcome prints), so completing again answers the same."""

    task_id: str
    role: str
    outcome: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "role": self.role, **self.outcome}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskOutcome:
        rest = {k: v for k, v in data.items() if k not in ("task_id", "role")}
        return cls(str(data["task_id"]), str(data["role"]), rest)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: A task id is the operation id the supervisor made for the task (``<kind>-<UTC stamp>-<8 hex>``,
#: e.g. ``prune-20260101T120000Z-1a2b3c4d``): an opaque token, never a path.
_TASK_ID = re.compile(r"[a-z]+(?:-[a-z]+)*-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}")


def check_task_id(task_id: object) -> str:
    """Refuse anything that is not the shape of a task id before it names a file (a path, a
    ``..``, a control character), so only the task store can answer for a task."""
    if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
        shown = repr(task_id if not isinstance(task_id, str) or len(task_id) <= 80 else task_id[:80] + "…")
        raise UsageError(f"unknown assistant task {shown}: a task id is the task_id `assistant begin` answered")
    return task_id


def _task_dir(root: MemoryRoot, task_id: str) -> Path:
    return root.runtime / "assistant" / "tasks" / check_task_id(task_id)


def rmtui_argv() -> list[str]:
    """How a host runs this very rmtui: the installed script beside the interpreter, or ``-m``."""
    script = Path(sys.executable).parent / "rmtui"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "rmtui"]


def _complete_argv(root: MemoryRoot, task_id: str) -> list[str]:
    return [*rmtui_argv(), "--headless", "assistant", "update", "complete", "--task", task_id, "--root", str(root.path)]


def task_view(root: MemoryRoot, op: Operation) -> UpdateTask:
    until = (op.lease or {}).get("until")
    d = _task_dir(root, op.id)
    return UpdateTask(op.id, op.batch_id, op.phase, op.worktree, op.base_commit, str(d / "instructions.md"),
                      str(d / "candidates.json"), op.candidate_uids, _complete_argv(root, op.id),
                      _iso(until) if until else None, bool(until and time.time() > until), op.error)


def release_orphaned_claims(sup: Supervisor) -> list[str]:
    """Evidence claimed by a batch that no live operation holds goes back to the queue."""
    live = {o.batch_id for o in sup.store.list() if not o.final and o.batch_id}
    q = EvidenceQueue(sup.root)
    try:
        orphans = [e for e in q.list(state="claimed") if e.batch_id not in live]
        for e in orphans:
            q.release([e.uid], e.batch_id)
        return [e.uid for e in orphans]
    finally:
        q.close()


def context(root: MemoryRoot, session: str) -> HostContext:
    """Live sources, memory commit, pending evidence file and retrieve instructions."""
    check_session_id(session)
    with Supervisor(root) as sup:
        settled = sup.recover()
        head = sup.head()
    graph = load_graph(root.path)
    sources = [str(root.path / name) for name in graph.files if may_read(RETRIEVE_ROLE, name)]
    for extra in COLLECTION_FILES:
        p = root.path / extra
        if p.is_file() and str(p) not in sources and may_read(RETRIEVE_ROLE, extra):
            sources.append(str(p))
    q = EvidenceQueue(root)
    try:
        pending = [e for e in q.list(session=session) if e.state in ("inbox", "queued", "claimed")]
    finally:
        q.close()
    sdir = root.runtime / "assistant" / "sessions" / hashlib.sha256(session.encode()).hexdigest()[:24]
    lines = [f"# Pending evidence of session {session}", "",
             "Submitted but not yet reconciled into memory; it is evidence, not admitted memory.", ""]
    for e in pending:
        lines += [f"## {e.uid} ({e.state}, submitted {_iso(e.created_at)})", "", e.text.rstrip(), ""]
    pending_file = sdir / "pending.md"
    atomic_write_text(pending_file, "\n".join(lines) + "\n")
    instructions = root.runtime / "assistant" / "retrieve-instructions.md"
    atomic_write_text(instructions, role_instructions(RETRIEVE_CONTRACT))
    return HostContext(str(root.path), head, sources, [], str(pending_file), len(pending), str(instructions),
                       {k: v for k, v in settled.items() if v})


def begin(root: MemoryRoot, *, retry: bool = False) -> Begun | UpdateIdle:
    """Claim a ready batch for one host Update child, or say what already exists."""
    cfg = root.config()
    with file_lock(root.runtime / "assistant.lock"), Supervisor(root) as sup:
        sup.recover()  # a publication killed mid-way (a sync pull's, say) is finished first, or nothing can pull
        existing = [o for o in sup.store.list(kind=KIND) if not o.final]
        if existing and not retry:
            return Begun(False, task_view(root, existing[-1]))
        for op in existing:
            sup.abandon(op, "replaced by `assistant update begin --retry`")
        release_orphaned_claims(sup)
        from rmtui.engine.sync import coordinator_for

        queue = coordinator_for(root)
        shared = None
        q = EvidenceQueue(root)
        try:
            if queue is None:
                batch = select_batch(q.list(state="queued"), cfg, force=retry)
            else:  # sync on: claim through the shared queue's lease, so two machines never both claim
                queue.refresh()
                queued = q.list(state="queued")
                shared = queue.claim(lambda eligible: pick_among(queued, eligible, cfg, force=retry))
                queue.reconcile_local()
                batch = None if shared is None else Batch(shared.batch_id, list(shared.candidate_uids), [], "lease")
                if shared is None:
                    return UpdateIdle(q.counts()["queued"], shared=True, lease=queue.describe_lease(),
                                      set_aside=list(queue.notes))
            if batch is None:
                return UpdateIdle(q.counts()["queued"])
            try:
                q.claim(batch.uids, batch.id)
            except ConflictError:
                if shared is not None and queue is not None:  # never hold a lease this machine cannot work on
                    queue.release(shared, "claim_failed")
                raise
            candidates = [q.get(u) for u in batch.uids]
        finally:
            q.close()
        lease = {"holder": "assistant", "until": time.time() + cfg.get("assistant.lease_seconds")}
        if shared is not None:
            lease["queue_lease"] = shared.record()
        try:
            op = sup.begin(KIND, "update", batch_id=batch.id, candidate_uids=batch.uids, lease=lease, effects=EFFECTS)
        except Exception:  # any failure to begin releases the claims, then goes on to the caller
            release_orphaned_claims(sup)
            raise
        if shared is not None:
            op.external_finalizer = f"update-queue:{shared.token}"
            sup.store.save(op)
        d = _task_dir(root, op.id)
        atomic_write_text(d / "candidates.json", json.dumps(
            [{"uid": e.uid, "session": e.session, "request": e.request, "submitted": _iso(e.created_at),
              "evidence": e.text} for e in candidates], indent=2, ensure_ascii=False) + "\n")
        atomic_write_text(d / "instructions.md", update_instructions(root, op))
        return Begun(True, task_view(root, op), list(queue.notes) if queue else [])


def update_instructions(root: MemoryRoot, op: Operation) -> str:
    """The text a host's Update child works from: the task header, then the role's instructions."""
    d = _task_dir(root, op.id)
    header = (f"# Update task {op.id}\n\nWorktree: {op.worktree}\nBase commit: {op.base_commit}\n"
              f"Candidates: {d / 'candidates.json'}\n\nYou do the `update` role's work below in place of an API "
              "model. Edit memory files only inside the worktree, validate, and commit once there (no commit when "
              f"nothing should change), then report back. {tool_mapping('update', op.worktree)} The main agent "
              f"runs `{' '.join(_complete_argv(root, op.id))}`; only its receipt means published.\n\n")
    return header + role_instructions("update")


#: A model tool as a host's child does it in the task's worktree.
_HOST_EQUIVALENTS = {"git_status": "git status", "git_diff": "git diff", "git_log": "git log",
                     "git_show": "git show", "git_add": "git add", "git_commit": "git commit",
                     "discard": "git restore --source=HEAD --staged --worktree -- <path>"}
#: Model tools a host's child does with its own file tools.
HOST_FILE_TOOLS = ("read", "glob", "grep", "edit", "create", "delete", "rename")


def tool_mapping(role: str, worktree: str) -> str:
    """What each model tool that ``role`` has is for a host's child (only the role's own tools)."""
    from rmtui.engine.roles.tools import RoleTools

    tools = RoleTools(worktree, role)
    try:
        names = [spec.name for spec in tools.specs()]
    finally:
        tools.repo.close()
    rmtui = " ".join(rmtui_argv())
    own = [f"`{n}`" for n in HOST_FILE_TOOLS if n in names]
    pairs = [f"`{n}` is `{_HOST_EQUIVALENTS[n]}`" + (" (delete a file HEAD does not have)" if n == "discard" else "")
             for n in names if n in _HOST_EQUIVALENTS]
    if "outline" in names:
        pairs.append(f"`outline` is `{rmtui} --headless outline --path {worktree} --role {role}`")
    if "validate_memory" in names:
        pairs.append(f"`validate_memory` is `{rmtui} --headless validate --path {worktree}`")
    return ("Where the text names model tools, use your own: " + ", ".join(own) + " are your file tools"
            + (f"; {', '.join(pairs)}, run in the worktree." if pairs else "."))


def _require_task(sup: Supervisor, task_id: str) -> Operation:
    op = sup.store.find(check_task_id(task_id))
    if op is None or op.kind != KIND:
        raise UsageError(f"unknown assistant task {task_id!r}")
    return op


def status(root: MemoryRoot, task_id: str | None = None) -> UpdateTask | NoTask:
    """The Update task (the open one without ``task_id``), with its receipt once it ended."""
    with Supervisor(root) as sup:
        if task_id is None:
            live = [o for o in sup.store.list(kind=KIND) if not o.final]
            if not live:
                return NoTask()
            op = live[-1]
        else:
            op = _require_task(sup, task_id)
        view = task_view(root, op)
        return replace(view, receipt=sup.store.receipt(op.id)) if op.final else view


def complete(root: MemoryRoot, task_id: str) -> Receipt:
    """Check task and worktree identity, admit and publish; idempotent once published."""
    with Supervisor(root) as sup:
        op = _require_task(sup, task_id)
        if op.final:
            if op.phase in ("committed", "no_change"):
                return sup.store.receipt(op.id)
            raise ConflictError(f"task {task_id} is {op.phase}: {op.error or 'replaced'}; its edits were fenced")
        wt_path = Path(op.worktree)
        if not wt_path.is_dir():
            raise ConflictError(f"worktree of task {task_id} is gone: {wt_path}")
        with sup.landing(op.id):  # a completion killed midway leaves nothing `recover` cannot clear
            return _complete(root, sup, op, wt_path)


def _check_worktree(root: MemoryRoot, wt_path: Path, base: str, branch: str | None) -> str:
    """The task's worktree belongs to this root and is on the task branch (``branch`` None: a
    detached staging worktree); answers the summary its child's last commit gives."""
    wt = git.Repo(wt_path)
    try:
        common_dir = Path(wt.git.rev_parse("--git-common-dir"))
        if not common_dir.is_absolute():
            common_dir = (wt_path / common_dir)
        if common_dir.resolve() != (root.path / ".git").resolve():
            raise ConflictError(f"{wt_path} is not a worktree of {root.path}")
        current = wt.git.rev_parse("--abbrev-ref", "HEAD")
        if branch is not None and current != branch:
            raise ConflictError(f"worktree is on {current!r}, not the task branch {branch!r}")
        tip = wt.head.commit.hexsha
        # the child's own commit names the change; no commit means no change to summarise
        message = wt.head.commit.message  # typed str | bytes; GitPython decodes it (errors replaced)
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        return message.strip().splitlines()[0] if tip != base and message.strip() else "no change"
    finally:
        wt.close()


def _complete(root: MemoryRoot, sup: Supervisor, op: Operation, wt_path: Path) -> Receipt:
    summary = _check_worktree(root, wt_path, op.base_commit, op.branch if op.phase == "running" else None)
    if op.external_finalizer:  # the batch is the shared queue's: land it under our lease
        from rmtui.engine.sync import GitQueue
        from rmtui.engine.sync.queue_git import Lease

        lease = Lease.parse((op.lease or {})["queue_lease"])
        queue = GitQueue(root)
        try:
            receipt = sup.finish(op, summary=summary,
                                 finalizer=lambda o: queue.finalize(lease, o.base_commit, o.candidate_commit or ""))
        except ConflictError as exc:
            if (exc.details or {}).get("stale"):
                raise  # the worktree is kept: correct the edits on the new base and complete again
            sup.fail(sup.store.get(op.id), f"{exc.kind}: {exc.message}")
            queue.release(lease, "lease_lost")
            raise
        return receipt
    return sup.finish(op, summary=summary)



# -- every cycle on a host (``begin --role``, ``complete``) ------------------------------------

#: Roles ``begin --role`` hands to a host.
ROLES = ("update", *hosted.HOSTED_ROLES)
TASK_FILE = "task.json"


def _cycle_complete_argv(root: MemoryRoot, task_id: str) -> list[str]:
    return [*rmtui_argv(), "--headless", "assistant", "complete", "--task", task_id, "--root", str(root.path)]


def _load_record(root: MemoryRoot, task_id: str) -> dict | None:
    try:
        data = json.loads((_task_dir(root, task_id) / TASK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _find_cycle_task(root: MemoryRoot, sup: Supervisor, task_id: str) -> tuple[dict, Operation | None]:
    """A cycle task's record and operation, as the task store holds them: a record saved
    under its own id by ``begin --role``, of a role a host runs, backed by the host operation
    of that role's kind (a sync repair has no operation: its id says so). Anything else is no
    task (exit 2)."""
    record = _load_record(root, check_task_id(task_id))
    role = record.get("role") if record is not None else None
    if record is None or record.get("task_id") != task_id or role not in hosted.HOSTED_ROLES:
        raise UsageError(f"unknown assistant task {task_id!r}")
    kind = hosted.kind_of(role)
    if role == "sync-reconciler":
        if not task_id.startswith(kind + "-"):
            raise UsageError(f"unknown assistant task {task_id!r}")
        return record, None
    op = sup.store.find(task_id)
    if op is None or op.kind != kind or not common.is_host_task(op):
        raise UsageError(f"unknown assistant task {task_id!r}: no host operation of {role} has that id")
    return record, op


def _save_record(root: MemoryRoot, record: dict) -> None:
    atomic_write_text(_task_dir(root, record["task_id"]) / TASK_FILE,
                      json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n")


def _open_tasks(root: MemoryRoot, sup: Supervisor, role: str) -> list[tuple[dict | None, Operation | None]]:
    """The role's open host tasks, oldest first: live host operations of its kind (with their
    record, if begin got to write it), or for sync-reconciler open records with a worktree."""
    if role != "sync-reconciler":
        return [(_load_record(root, op.id), op) for op in common.live_operations(sup.store, hosted.kind_of(role))
                if common.is_host_task(op)]
    folder = root.runtime / "assistant" / "tasks"
    found: list[tuple[dict | None, Operation | None]] = []
    for d in sorted(folder.glob(f"{hosted.SYNC_TASK_PREFIX}-*")) if folder.is_dir() else ():
        if not _TASK_ID.fullmatch(d.name):
            continue  # not a task's folder (no begin made that name)
        record = _load_record(root, d.name)
        if record and record.get("state") == "open" and Path(record["worktree"]).is_dir():
            found.append((record, None))
    return found


def _fence(root: MemoryRoot, sup: Supervisor, role: str, record: dict | None, op: Operation | None) -> None:
    """Replace a task: its operation is abandoned (it can never complete), what it held is
    released, a sync staging worktree is removed."""
    reason = f"replaced by `assistant begin --role {role} --retry`"
    if op is not None:
        sup.abandon(op, reason)
    if record is not None:
        hosted.release(root, role, record.get("saved") or {})
        if op is None:
            from rmtui.engine.writes import worktrees

            kept = worktrees.remove(root, record["worktree"], None)
            if kept is not None:  # the host's stray files, moved to .runtime/kept/: say where
                reason += "; " + kept.message(f"the worktree of {record['task_id']}")
        record.update(state="abandoned", error=reason)
        _save_record(root, record)


def cycle_view(root: MemoryRoot, record: dict, op: Operation | None) -> CycleTask:
    """What a host sees of a cycle task."""
    until = record.get("expires_at")
    d = _task_dir(root, record["task_id"])
    return CycleTask(
        record["task_id"], record["role"], record["kind"], op.phase if op is not None else record.get("state"),
        record["worktree"], op.base_commit if op is not None else record["base_commit"],
        str(d / "instructions.md"), str(d / "context.json"), record.get("context", {}),
        _cycle_complete_argv(root, record["task_id"]), _iso(until) if until else None,
        bool(until and time.time() > until), (op.error if op is not None else None) or record.get("error"))


def _instructions(root: MemoryRoot, task: hosted.HostTask) -> str:
    argv = " ".join(_cycle_complete_argv(root, task.task_id))
    extra = " --result '<json>'" if task.role == "update-correction" else ""
    header = (
        f"# {task.role} task {task.task_id}\n\n"
        f"Worktree: {task.worktree}\nBase commit: {task.base_commit}\n"
        f"Context: {_task_dir(root, task.task_id) / 'context.json'}\n\n"
        f"You do the `{task.role}` role's work below by hand, in place of an API model. Work only inside the "
        f"worktree. {tool_mapping(task.role, task.worktree)} Commit what "
        "should land (uncommitted changes are refused), then report back. The main agent runs "
        f"`{argv}{extra} [--summary '<your report>']`; only its answer means published.\n\n"
        f"{hosted.NOTES[task.role]}\n\n## The task\n\n{task.prompt}\n\n---\n\n")
    return header + role_instructions(task.role)


def begin_role(root: MemoryRoot, role: str, *, retry: bool = False, force: bool = False,
               receipt: str | None = None, comment: str | None = None) -> Begun | UpdateIdle | hosted.HostIdle:
    """Hand ``role``'s task to a host, prepared as the model path prepares it: a new task
    (claimed), the open one (not claimed), or idle when the cycle is not due."""
    if role == "update":
        if force or receipt or comment is not None:
            raise UsageError("--force, --receipt and --comment do not apply to --role update")
        return begin(root, retry=retry)
    hosted.check_role(role)
    cfg = root.config()
    with file_lock(root.ensure_runtime() / "assistant.lock"), Supervisor(root) as sup:
        live = _open_tasks(root, sup, role)
        if live and not retry:
            record, op = live[-1]
            if record is not None:
                return Begun(False, cycle_view(root, record, op))
            raise ConflictError(f"host task {op.id if op else '?'} of {role} has no task record; replace it "
                                f"with `assistant begin --role {role} --retry`")
        for record, op in live:
            _fence(root, sup, role, record, op)
        lease = common.host_lease(cfg)
        task = hosted.begin(root, sup, role, lease=lease, force=force, receipt=receipt, comment=comment)
        if isinstance(task, hosted.HostIdle):
            return task
        record = {"task_id": task.task_id, "role": role, "kind": task.kind, "state": "open",
                  "worktree": task.worktree, "base_commit": task.base_commit, "expires_at": lease["until"],
                  "context": task.context, "saved": task.saved, "created_at": time.time()}
        d = _task_dir(root, task.task_id)
        atomic_write_text(d / "context.json", json.dumps(task.context, indent=2, ensure_ascii=False) + "\n")
        atomic_write_text(d / "instructions.md", _instructions(root, task))
        _save_record(root, record)
        return Begun(True, cycle_view(root, record, task.op))


def complete_task(root: MemoryRoot, task_id: str, *, summary: str | None = None,
                  result: str | None = None) -> Receipt | TaskOutcome:
    """Complete any host task: an Update task as ``update complete`` does; a cycle task is
    admitted and landed exactly as the model path lands it, answering the cycle's outcome.
    Idempotent once finished; a refusal lands nothing and keeps the task open."""
    check_task_id(task_id)
    with Supervisor(root) as sup:
        op = sup.store.find(task_id)
        if op is not None and op.kind == KIND:
            record = None
        else:
            record, op = _find_cycle_task(root, sup, task_id)
    role = "update" if record is None else record["role"]
    if result is not None and role not in hosted.RESULT_ROLES:
        raise UsageError(f"--result belongs to {' and '.join(hosted.RESULT_ROLES)} tasks; "
                         f"a {role} task has no result to report")
    if record is None:
        return complete(root, task_id)
    if record.get("state") == "done" and record.get("outcome") is not None:
        return TaskOutcome.from_json(record["outcome"])
    if role == "sync-reconciler":
        return _complete_sync(root, record, summary)
    assert op is not None  # _find_cycle_task answers one for every other role
    with Supervisor(root) as sup:
        if op.final:
            return _finished(root, sup, record, op)
        wt_path = Path(op.worktree)
        if not wt_path.is_dir():
            raise ConflictError(f"worktree of task {task_id} is gone: {wt_path}")
        own = _check_worktree(root, wt_path, op.base_commit, op.branch if op.phase == "running" else None)
        with hosted.cycle_guard(root, role), sup.landing(op.id):
            op = sup.store.get(op.id)
            if op.final:
                return _finished(root, sup, record, op)
            outcome = hosted.complete(root, sup, role, op, record["saved"], summary=summary or own, result=result)
    return _done(root, record, TaskOutcome(task_id, role, outcome.to_json()))


def _done(root: MemoryRoot, record: dict, answer: TaskOutcome) -> TaskOutcome:
    """Keep the answer with the task: completing it again answers the same."""
    record.update(state="done", outcome=answer.to_json(), error=None)
    _save_record(root, record)
    return answer


def _finished(root: MemoryRoot, sup: Supervisor, record: dict, op: Operation) -> TaskOutcome:
    """A task whose operation already ended: its outcome if it completed, else why not."""
    if record.get("outcome") is not None:
        return TaskOutcome.from_json(record["outcome"])
    if op.phase in ("committed", "no_change"):  # completed, but the answer was not saved
        return TaskOutcome(op.id, record["role"], {"receipt": sup.store.receipt(op.id).to_json()})
    raise ConflictError(f"task {op.id} is {op.phase}: {op.error or 'replaced'}; its edits were fenced")


def _complete_sync(root: MemoryRoot, record: dict, summary: str | None) -> TaskOutcome:
    task_id = record["task_id"]
    if record.get("state") != "open":
        raise ConflictError(f"task {task_id} is {record.get('state')}: {record.get('error') or 'replaced'}; "
                            "its edits were fenced")
    wt_path = Path(record["worktree"])
    if not wt_path.is_dir():
        raise ConflictError(f"worktree of task {task_id} is gone: {wt_path}")
    with file_lock(_task_dir(root, task_id) / "complete.lock"):
        own = _check_worktree(root, wt_path, record["base_commit"], None)
        synced = hosted.complete_sync(root, str(wt_path), record["saved"], summary=summary or own)
        from rmtui.engine.writes import worktrees

        outcome = synced.to_json()
        kept = worktrees.remove(root, wt_path, None)
        if kept is not None:  # the host's stray files, moved to .runtime/kept/: say where
            outcome["warnings"] = [kept.message(f"the worktree of {task_id}")]
        return _done(root, record, TaskOutcome(task_id, "sync-reconciler", outcome))


def task_status(root: MemoryRoot, task_id: str | None = None) -> OpenTasks | UpdateTask | CycleTask | NoTask:
    """One task (any role) with its outcome once finished, or every open task."""
    with Supervisor(root) as sup:
        if task_id is None:
            tasks: list[UpdateTask | CycleTask] = [task_view(root, o) for o in sup.store.list(kind=KIND) if not o.final]
            for role in hosted.HOSTED_ROLES:
                tasks += [cycle_view(root, r, o) for r, o in _open_tasks(root, sup, role) if r is not None]
            return OpenTasks(tasks)
        op = sup.store.find(check_task_id(task_id))
        if op is not None and op.kind == KIND:
            return status(root, task_id)
        record, op = _find_cycle_task(root, sup, task_id)
        return replace(cycle_view(root, record, op), outcome=record.get("outcome"))
