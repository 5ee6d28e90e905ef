"""The native assistant protocol (DESIGN.md section 7): model-free preparation, claiming,
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
from datetime import datetime, timezone
from pathlib import Path

import git

from rmtui.engine.batching import select_batch
from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.graph import load_graph
from rmtui.engine.locks import file_lock
from rmtui.engine.operations import Operation
from rmtui.engine.queue import EvidenceQueue, check_identifier
from rmtui.engine.prompts import role_instructions
from rmtui.engine.roots import MemoryRoot
from rmtui.engine.supervisor import Supervisor
from rmtui.engine.validation import COLLECTION_FILES, CORRECTIONS_FILE

KIND = "assistant"
EFFECTS = ("evidence_consumed", "update_record")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        q = EvidenceQueue(root)
        try:
            batch = select_batch(q.list(state="queued"), cfg, force=retry)
            if batch is None:
                return {"claimed": False, "state": "idle", "queued": q.counts()["queued"]}
            q.claim(batch.uids, batch.id)
            candidates = [q.get(u) for u in batch.uids]
        finally:
            q.close()
        lease = {"holder": "assistant", "until": time.time() + cfg.get("assistant.lease_seconds")}
        try:
            op = sup.begin(KIND, "update", batch_id=batch.id, candidate_uids=batch.uids, lease=lease, effects=EFFECTS)
        except Exception:
            release_orphaned_claims(sup)
            raise
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
            summary = wt.head.commit.message.strip().splitlines()[0] if tip != op.base_commit else "no change"
        finally:
            wt.close()
        receipt = sup.finish(op, summary=summary)
        return receipt.to_json()

