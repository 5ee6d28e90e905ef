"""The native assistant protocol (docs/architecture.md, "Native assistant protocol"): model-free preparation, claiming,
validation and publication for hosts whose own children read and edit memory.

A task is a supervisor operation of kind ``assistant`` (role ``update``) with a time-bound
lease. Expiry never discards edits: it only allows ``update begin --retry`` to replace the
task, which fences the old worktree (its operation is abandoned and can never complete).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import git

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.evidence.batching import Batch, pick_among, select_batch
from rmtui.engine.evidence.queue import EvidenceQueue, check_identifier
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.graph import load_graph
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.memory.validation import COLLECTION_FILES, CORRECTIONS_FILE
from rmtui.engine.roles.prompts import role_instructions
from rmtui.engine.writes.operations import Operation
from rmtui.engine.writes.supervisor import Supervisor

KIND = "assistant"
EFFECTS = ("evidence_consumed",)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _task_dir(root: MemoryRoot, task_id: str) -> Path:
    return root.runtime / "assistant" / "tasks" / task_id


def rmtui_argv() -> list[str]:
    """How a host runs this very rmtui: the installed script beside the interpreter, or ``-m``."""
    script = Path(sys.executable).parent / "rmtui"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "rmtui"]


def _complete_argv(root: MemoryRoot, task_id: str) -> list[str]:
    return [*rmtui_argv(), "--headless", "assistant", "update", "complete", "--task", task_id, "--root", str(root.path)]


def task_view(root: MemoryRoot, op: Operation) -> dict:
    until = (op.lease or {}).get("until")
    d = _task_dir(root, op.id)
    return {
        "task_id": op.id, "batch_id": op.batch_id, "phase": op.phase, "worktree": op.worktree,
        "base_commit": op.base_commit, "instructions": str(d / "instructions.md"),
        "candidates": str(d / "candidates.json"), "candidate_uids": op.candidate_uids,
        "complete": _complete_argv(root, op.id), "expires_at": _iso(until) if until else None,
        "expired": bool(until and time.time() > until), "error": op.error,
    }


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


def context(root: MemoryRoot, session: str) -> dict:
    """Live sources, memory commit, pending evidence file and retrieve instructions."""
    check_identifier(session, "session id")
    with Supervisor(root) as sup:
        settled = sup.recover()
        head = sup.head()
    graph = load_graph(root.path)
    sources = [str(root.path / name) for name in graph.files]
    for extra in (CORRECTIONS_FILE, *COLLECTION_FILES):
        p = root.path / extra
        if p.is_file() and str(p) not in sources:
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
    atomic_write_text(instructions, role_instructions("retrieve"))
    return {
        "root": str(root.path), "memory_commit": head, "sources": sources, "imports": [],
        "pending_evidence_file": str(pending_file), "pending_count": len(pending),
        "instructions": str(instructions), "settled": {k: v for k, v in settled.items() if v},
    }


def begin(root: MemoryRoot, *, retry: bool = False) -> dict:
    """Claim a ready batch for one host Update child, or say what already exists."""
    cfg = root.config()
    with file_lock(root.runtime / "assistant.lock"), Supervisor(root) as sup:
        existing = [o for o in sup.store.list(kind=KIND) if not o.final]
        if existing and not retry:
            return {"claimed": False, **task_view(root, existing[-1])}
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
                    return {"claimed": False, "state": "idle", "queued": q.counts()["queued"],
                            "lease": queue.describe_lease()}
            if batch is None:
                return {"claimed": False, "state": "idle", "queued": q.counts()["queued"]}
            q.claim(batch.uids, batch.id)
            candidates = [q.get(u) for u in batch.uids]
        finally:
            q.close()
        lease = {"holder": "assistant", "until": time.time() + cfg.get("assistant.lease_seconds")}
        if shared is not None:
            lease["queue_lease"] = shared.record()
        try:
            op = sup.begin(KIND, "update", batch_id=batch.id, candidate_uids=batch.uids, lease=lease, effects=EFFECTS)
        except Exception:
            release_orphaned_claims(sup)
            raise
        if shared is not None:
            op.external_finalizer = f"update-queue:{shared.token}"
            sup.store.save(op)
        d = _task_dir(root, op.id)
        atomic_write_text(d / "candidates.json", json.dumps(
            [{"uid": e.uid, "session": e.session, "request": e.request, "submitted": _iso(e.created_at),
              "evidence": e.text} for e in candidates], indent=2, ensure_ascii=False) + "\n")
        header = (f"# Update task {op.id}\n\nWorktree: {op.worktree}\nBase commit: {op.base_commit}\n"
                  f"Candidates: {d / 'candidates.json'}\n\nEdit memory files only inside the worktree, commit there "
                  "(one or more commits; or no commit when nothing should change), validate with "
                  f"`{' '.join(rmtui_argv())} --headless validate --path {op.worktree}`, then report back. The main agent runs "
                  f"`{' '.join(_complete_argv(root, op.id))}`; only its receipt means published.\n\n")
        atomic_write_text(d / "instructions.md", header + role_instructions("update"))
        return {"claimed": True, **task_view(root, op)}


def _require_task(sup: Supervisor, task_id: str) -> Operation:
    op = sup.store.find(task_id)
    if op is None or op.kind != KIND:
        raise UsageError(f"unknown assistant task {task_id!r}")
    return op


def status(root: MemoryRoot, task_id: str | None = None) -> dict:
    with Supervisor(root) as sup:
        if task_id is None:
            live = [o for o in sup.store.list(kind=KIND) if not o.final]
            if not live:
                return {"state": "idle"}
            op = live[-1]
        else:
            op = _require_task(sup, task_id)
        out = task_view(root, op)
        if op.final:
            out["receipt"] = sup.store.receipt(op.id).to_json()
        return out


def complete(root: MemoryRoot, task_id: str) -> dict:
    """Check task and worktree identity, admit and publish; idempotent once published."""
    with Supervisor(root) as sup:
        op = _require_task(sup, task_id)
        if op.final:
            if op.phase in ("committed", "no_change"):
                return sup.store.receipt(op.id).to_json()
            raise ConflictError(f"task {task_id} is {op.phase}: {op.error or 'replaced'}; its edits were fenced")
        wt_path = Path(op.worktree)
        if not wt_path.is_dir():
            raise ConflictError(f"worktree of task {task_id} is gone: {wt_path}")
        with sup.landing(op.id):  # a completion killed midway leaves nothing `recover` cannot clear
            return _complete(root, sup, op, wt_path)


def _complete(root: MemoryRoot, sup: Supervisor, op: Operation, wt_path: Path) -> dict:
    wt = git.Repo(wt_path)
    try:
        common = Path(wt.git.rev_parse("--git-common-dir"))
        if not common.is_absolute():
            common = (wt_path / common)
        if common.resolve() != (root.path / ".git").resolve():
            raise ConflictError(f"{wt_path} is not a worktree of {root.path}")
        branch = wt.git.rev_parse("--abbrev-ref", "HEAD")
        if op.phase == "running" and branch != op.branch:
            raise ConflictError(f"worktree is on {branch!r}, not the task branch {op.branch!r}")
        tip = wt.head.commit.hexsha
        # the child's own commit names the change; no commit means no change to summarise
        message = wt.head.commit.message  # typed str | bytes; GitPython decodes it (errors replaced)
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        summary = message.strip().splitlines()[0] if tip != op.base_commit else "no change"
    finally:
        wt.close()
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
        return receipt.to_json()
    receipt = sup.finish(op, summary=summary)
    return receipt.to_json()

