"""The Pursuit editor's store (docs/architecture.md, "Pursuit editor"): ``show``, ``apply``,
``undo``, ``redo`` and ``discard`` against an expected revision, under the editor lock, and the
``checkpoint`` that lands every pending edit as one commit through the supervisor.

The editor's *view* is the active head's semantic files overlaid with the journal's files at
its cursor (``journal``); nothing is written to the active root until a checkpoint. The
operations themselves are in ``edits``, the checkpoint's trailers and signature in
``trailers``.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rmtui.engine.errors import EngineError, OperationFailed
from rmtui.engine.gitutil import IDENTITY
from rmtui.engine.memory.role_table import MEMORY_GRAPH, PURSUIT, matches
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.pursuit.edits import apply_op, descendants, graph_of, pursuit_parent
from rmtui.engine.pursuit.journal import (
    Session,
    SessionConflict,
    check_session,
    drop_journal,
    editor_lock,
    save_record,
    session_hash,
)
from rmtui.engine.pursuit.sessions import check_owner, describe, name_of, remember
from rmtui.engine.pursuit.trailers import sign_checkpoint

WRITER = "pursuit-editor"
KIND = "pursuit"


@dataclass(frozen=True)
class PursuitState:
    """The editor's view (what ``show`` answers): the revision edits are checked against, the
    active head and the head the pending edits started from, the journal's cursor and actions,
    the files the pending edits change, who owns them, Memory files changed under them
    (``conflicts``), the Focus order, and the Pursuit tree (one JSON object per heading, in
    source order: id, title, level, kind, file, line, parent_id, children, nodes, edges,
    backing_file, focused, body, memory_refs, delete_drops)."""

    revision: str
    head: str
    base_head: str
    cursor: int
    actions: list[str]
    pending_edits: int
    changed_files: list[str]
    can_undo: bool
    can_redo: bool
    owner: str | None
    owner_session: str | None
    conflicts: list[str]
    focus: list[str]
    pursuits: list[dict[str, Any]]
    last_description: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PursuitEdit(PursuitState):
    """The view after ``apply``, ``undo`` or ``redo``: whether the map changed, the item to
    select, and what the edit did."""

    changed: bool
    selected_id: str | None
    description: str | None


@dataclass(frozen=True)
class PursuitCheckpoint(PursuitState):
    """The view after a checkpoint: ``state`` is ``no_change`` (nothing pending) or the
    landing's receipt phase, with the commit, operation, paths and subject it landed."""

    state: str
    landed_commit: str | None
    operation_id: str | None = None
    changed_paths: list[str] | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.operation_id is None:  # nothing was pending: no operation ran
            for key in ("operation_id", "changed_paths", "message"):
                del out[key]
        return out


def _body(graph: Any, item: Any) -> str:
    """What ``edit_body`` replaces: the lines under the heading up to its first child heading
    (an ``F#`` heading's whole backing file), so a front can show and prefill it."""
    if item.heading_kind == "F#" and item.backing_file:
        backing = graph.files.get(item.backing_file)
        return "\n".join(backing.lines).strip("\n") if backing is not None else ""
    first_child = min((c.line for c in item.children if c.kind == "heading" and c.file == item.file),
                      default=item.end_line + 1)
    return "\n".join(graph.files[item.file].lines[item.line:first_child - 1]).strip("\n")


def _tree(graph: Any) -> list[dict]:
    referrers: dict[str, list[str]] = {}  # id -> Memory items with an edge to it
    for other in graph.ordered:
        if other.domain == "memory":
            for e in other.edges:
                referrers.setdefault(e.target, []).append(other.id or f"{other.file}:{other.line}")
    out = []
    for item in graph.ordered:
        if item.domain != "pursuit" or item.kind != "heading" or not item.id:
            continue
        parent = pursuit_parent(item)
        out.append({"id": item.id, "title": item.title, "level": item.level, "kind": item.heading_kind or "#",
                    "file": item.file, "line": item.line, "parent_id": parent.id if parent else None,
                    "children": [c.id for c in item.children if c.kind == "heading" and c.id],
                    "nodes": [c.id for c in item.children if c.kind == "node"],
                    "edges": [f"{e.type}:{e.target}" for e in item.edges],
                    "backing_file": item.backing_file, "focused": item.id in graph.focus,
                    "body": _body(graph, item), "memory_refs": referrers.get(item.id, []),
                    # what a delete would drop in Memory: edges to the item and everything under it
                    "delete_drops": [f"{r} → {i.id}" for i in [item, *descendants(item)] if i.id
                                     for r in referrers.get(i.id, [])]})
    return out


def _state(s: Session, graph: Any = None) -> dict[str, Any]:
    """The fields of :class:`PursuitState` for the session's view."""
    graph = graph if graph is not None else graph_of(s.root, s.view)
    rec = s.record
    pending = sorted(p for p in set(s.view) | set(s.head_files) if s.view.get(p) != s.head_files.get(p))
    return {"revision": s.revision, "head": s.head, "base_head": rec["base_head"],
            "cursor": rec["cursor"], "actions": [a["description"] for a in rec["actions"]],
            "pending_edits": rec["cursor"], "changed_files": pending,
            "can_undo": rec["cursor"] > 0, "can_redo": rec["cursor"] < len(rec["actions"]),
            "owner": rec.get("owner"), "owner_session": name_of(s.root, rec.get("owner")),
            "conflicts": s.conflicts, "focus": list(graph.focus),
            "pursuits": _tree(graph), "last_description": rec.get("last_description")}


def show(root: MemoryRoot) -> PursuitState:
    """The editor's view: revision, the Pursuit tree with Focus order, pending edits."""
    with editor_lock(root):
        return PursuitState(**_state(Session(root)))


def apply(root: MemoryRoot, op: dict, *, expected_revision: str | None, session: str | None = None) -> PursuitEdit:
    """Apply one operation against ``expected_revision`` (None: whatever is current)."""
    session = check_session(session)
    with editor_lock(root):
        s = Session(root)
        s.check(expected_revision)
        check_owner(s, session)
        before = dict(s.view)
        new, description, selected = apply_op(root, before, op)
        for name in set(before) | set(new):
            if before.get(name) != new.get(name) and not (matches(name, PURSUIT) or (
                    op.get("type") == "delete" and matches(name, MEMORY_GRAPH))):
                raise OperationFailed(f"the Pursuit editor may not change {name}")
        changed = new != before
        if changed:
            s.record_action(op, before, new, description=description, selected_id=selected, session=session)
            if session:
                remember(root, session)
        return PursuitEdit(**_state(s), changed=changed, selected_id=selected, description=description or None)


def undo(root: MemoryRoot, *, expected_revision: str | None = None, session: str | None = None) -> PursuitEdit:
    return _step(root, -1, expected_revision, session)


def redo(root: MemoryRoot, *, expected_revision: str | None = None, session: str | None = None) -> PursuitEdit:
    return _step(root, +1, expected_revision, session)


def _step(root: MemoryRoot, direction: int, expected: str | None, session: str | None) -> PursuitEdit:
    session = check_session(session)
    with editor_lock(root):
        s = Session(root)
        s.check(expected)
        check_owner(s, session)
        action = s.step(direction)
        return PursuitEdit(**_state(s), changed=True, selected_id=action.get("selected_id"),
                           description=("undo: " if direction < 0 else "redo: ") + action["description"])


def discard(root: MemoryRoot, *, session: str | None = None) -> PursuitState:
    """Drop every pending edit (and a journal that cannot be trusted); with ``session``, only
    when the pending edits are that session's (else refused, exit 3, nothing dropped)."""
    session = check_session(session)
    with editor_lock(root):
        if session is not None:
            rec = Session(root).record
            owner = rec.get("owner")
            if rec["cursor"] and owner and owner != session_hash(session):
                raise SessionConflict(f"the pending Pursuit edits belong to {describe(root, owner)}, not to session "
                                      f"{session!r}; nothing was dropped",
                                      details={"owner": owner, "owner_session": name_of(root, owner)})
        drop_journal(root)
        return PursuitState(**_state(Session(root)))


def checkpoint(root: MemoryRoot, *, expected_revision: str | None = None,
               session: str | None = None) -> PursuitCheckpoint:
    """Land the pending edits as one commit through the supervisor; the journal then starts over."""
    import subprocess

    from rmtui.engine.writes.publication import COMMIT_SIGNERS
    from rmtui.engine.writes.supervisor import Supervisor

    COMMIT_SIGNERS[KIND] = sign_checkpoint
    session = check_session(session)
    with editor_lock(root):
        s = Session(root)
        s.check(expected_revision)
        check_owner(s, session)
        rec = s.record
        changed = {p: t for p, t in s.view.items() if s.head_files.get(p) != t}
        removed = [p for p in s.head_files if p not in s.view]
        done = rec["actions"][: rec["cursor"]]
        if not changed and not removed:
            drop_journal(root)
            return PursuitCheckpoint(**_state(Session(root)), state="no_change", landed_commit=None)
        subject = done[0]["description"] if len(done) == 1 else "pursuit: edit map"
        owner = rec.get("owner") or session_hash(session or "rmtui")
        body = "\n".join(f"- {a['description']}" for a in done) if len(done) > 1 else ""
        trailers = ("RightMemory-Pursuit-Editor: 1\n"
                    f"RightMemory-Pursuit-Session: {owner}\n"
                    "RightMemory-Pursuit-Action: batch\nRightMemory-Pursuit-Target: -\n"
                    "RightMemory-Pursuit-ID-Remaps: []")  # the supervisor adds the operation and signs
        message = subject + ("\n\n" + body if body else "") + "\n\n" + trailers
        with Supervisor(root) as sup:
            op = sup.begin(KIND, WRITER, op_id=uuid.uuid4().hex)  # the original's 32-hex operation id
            rec["publishing"] = op.id
            save_record(root, rec)
            try:
                wt = Path(op.worktree)
                for path, text in changed.items():
                    (wt / path).write_text(text, encoding="utf-8", errors="surrogateescape")
                for path in removed:
                    (wt / path).unlink(missing_ok=True)
                env = {**os.environ, **IDENTITY}
                subprocess.run(["git", "add", "-A", "--", *changed, *removed], cwd=wt, check=True,
                               capture_output=True, env=env)
                subprocess.run(["git", "commit", "-q", "--no-verify", "-m", subject], cwd=wt, check=True,
                               capture_output=True, env=env)
                receipt = sup.finish(op, summary=f"{len(done)} Pursuit edit(s)", message=message)
            except (EngineError, subprocess.CalledProcessError) as exc:
                err = exc if isinstance(exc, EngineError) else OperationFailed(f"git failed: {exc.stderr!r}")
                sup.fail(sup.store.get(op.id), f"{err.kind}: {err.message}")
                rec["publishing"] = None
                save_record(root, rec)
                raise err from None
        drop_journal(root)
        return PursuitCheckpoint(**_state(Session(root)), state=receipt.phase, landed_commit=receipt.landed_commit,
                                 operation_id=op.id, changed_paths=receipt.changed_paths, message=subject)
