"""Agent retrieval (docs/architecture.md, "Retrieval"): a model selects, the program renders.

The retrieve role gets read-only tools over the live root and context the program
prepares: a new session gets the day's snapshot of the graph outline; a later call gets
the memory diff since the commit last delivered to the session and notices for delivered
items that changed; every call gets the session's pending evidence. The model must end by
calling ``submit_selection`` with ``{"ids", "sources", "recent_candidates"}``; the renderer
(:mod:`rmtui.engine.retrieval.render`) resolves it against the real files. An invalid selection goes
back to the model with the reason, at most ``retrieve.max_selection_attempts`` times in
all; then the call fails. The model's prose is never the result.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from rmtui.engine.errors import ConflictError, OperationFailed, UsageError
from rmtui.engine.evidence.queue import PENDING_STATES, EvidenceQueue, check_session_id
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.config import Config
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.retrieval.corpus import Corpus, current_fingerprint, load_corpus
from rmtui.engine.retrieval.delivery import DeliveryHistory, already_delivered_text, filter_delivered
from rmtui.engine.retrieval.render import (
    NO_STRONG_MATCH,
    SELECTION_KEYS,
    PendingItem,
    Unit,
    render,
    resolve_selection,
)
from rmtui.engine.retrieval.result import RetrieveResult
from rmtui.engine.roles.executors.base import AbortTurn, Executor, ToolError, ToolSpec

ROLE = "retrieve"
GRAPH_PATHS = ("MEMORY.md", "MEMORY_*.md", "PURSUITS.md", "PURSUIT_*.md")
MAX_DIFF_CHARS = 40000

SELECTION_SCHEMA = {
    "type": "object",
    "properties": {
        "ids": {"type": "array", "items": {"type": "string"},
                "description": "graph ids; a heading brings its whole subtree"},
        "sources": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "source_id": {"type": "string", "description": "M#id, S#id or MF#id"},
                "ids": {"type": "array", "items": {"type": "string"}},
                "ranges": {"type": "array", "items": {
                    "type": "object", "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                    "required": ["start", "end"], "additionalProperties": False}},
            },
            "required": ["source_id"], "additionalProperties": False}},
        "recent_candidates": {"type": "array", "items": {"type": "string"},
                              "description": "uids of this session's pending evidence"},
    },
    "required": list(SELECTION_KEYS),
    "additionalProperties": False,
}


@dataclass
class Selection:
    """The accepted selection (filled by the terminal tool) and the attempts that led to it."""

    raw: dict | None = None
    attempts: int = 0
    errors: list[str] = field(default_factory=list)


def _git(root: MemoryRoot, *argv: str) -> str:
    import git

    repo = git.Repo(root.path)
    try:
        return repo.git.execute(["git", *argv])
    except git.GitCommandError:
        return ""
    finally:
        repo.close()


def daily_snapshot(root: MemoryRoot, commit: str | None, outline: str) -> tuple[str, str | None]:
    """The outline frozen once per UTC day (a stable prefix for a new session) and its commit."""
    day = time.strftime("%Y-%m-%d", time.gmtime())
    path = root.runtime / "retrieve" / f"snapshot-{day}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data["text"], data["commit"]
    except (OSError, ValueError, KeyError):
        pass
    atomic_write_text(path, json.dumps({"day": day, "commit": commit, "text": outline}))
    return outline, commit


def memory_diff(root: MemoryRoot, since: str, commit: str | None) -> str:
    if not commit or since == commit:
        return ""
    diff = _git(root, "diff", "--no-color", "--no-ext-diff", since, commit, "--", *GRAPH_PATHS)
    if len(diff) > MAX_DIFF_CHARS:
        return diff[:MAX_DIFF_CHARS] + f"\n[diff cut at {MAX_DIFF_CHARS} characters; use the read tools]"
    return diff


def pending_items(root: MemoryRoot, session: str) -> dict[str, PendingItem]:
    """This session's evidence neither consumed nor rejected, by uid."""
    with EvidenceQueue(root) as q:
        items = [e for e in q.list(session=session) if e.state in PENDING_STATES]
    return {e.uid: PendingItem(e.uid, e.session, e.display_id, e.submitted_at, e.state, e.text) for e in items}


def pending_evidence(root: MemoryRoot, session: str) -> dict[str, tuple[str, str]]:
    """This session's pending evidence: uid -> (label, text), as a selection resolves it."""
    return {uid: (p.label, p.text) for uid, p in pending_items(root, session).items()}


def _changed_delivered(corpus: Corpus, delivered: dict) -> list[tuple[str, str]]:
    current = {e.key: e.hash for e in corpus.entries}
    out = []
    for key, d in sorted(delivered.items()):
        if ":" in key:  # pending evidence and free-form line ranges are not graph items
            continue
        now = current.get(key)
        if now is None:
            out.append((key, "removed"))
        elif now != d.hash:
            out.append((key, "changed"))
    return out


def build_context(root: MemoryRoot, session: str, need: str, corpus: Corpus, commit: str | None,
                  recent: dict[str, tuple[str, str]], delivered: dict, last_commit: str | None) -> str:
    from rmtui.engine.roles.tools import RoleTools

    parts = [f"Need: {need}", f"Session: {session}", f"Memory commit: {commit or 'none'}"]
    if last_commit is None:
        outline = RoleTools(root.path, ROLE).outline({})
        snap, snap_commit = daily_snapshot(root, commit, outline)
        parts.append(f"This is a new session. Today's snapshot of the memory graph (at {snap_commit or 'none'}):\n"
                     f"{snap}")
        later = memory_diff(root, snap_commit, commit) if snap_commit else ""
        if later:
            parts.append(f"Memory changed since the snapshot:\n{later}")
    else:
        diff = memory_diff(root, last_commit, commit)
        parts.append(f"Memory diff since the commit last delivered to this session ({last_commit[:12]}):\n{diff}"
                     if diff else "Memory has not changed since the last delivery to this session.")
        changed = _changed_delivered(corpus, delivered)
        if changed:
            parts.append("Delivered earlier in this session and changed since:\n" +
                         "\n".join(f"- `{k}` {how}" for k, how in changed))
    if recent:
        parts.append("This session's pending evidence (submitted, not yet memory; select by uid in "
                     "recent_candidates when it matters):\n" +
                     "\n\n".join(f"<evidence uid=\"{uid}\" {label}>\n{text.strip()}\n</evidence>"
                                 for uid, (label, text) in recent.items()))
    imported = imported_outline(corpus)
    if imported:
        parts.append(imported)
    parts.append("Find what matters with the tools, then call submit_selection.")
    return "\n\n".join(parts)


MAX_IMPORTED_ROWS = 300


def imported_outline(corpus: Corpus) -> str:
    """The imported shared views' items (the tools cannot read ``.runtime``): qualified id and first words."""
    rows = [e for e in corpus.entries if e.key.startswith("MF#") and e.id]
    if not rows:
        return ""
    lines = ["Imported shared views (read-only; select an item by its qualified id, a whole view as "
             "MF#<view>, a free-form source as MF#<view>/M#<id> with line ranges):"]
    for e in rows[:MAX_IMPORTED_ROWS]:
        words = " ".join(e.text.split())[:120]
        where = f" [{e.context}]" if e.context else ""
        lines.append(f"- `{e.key if e.kind == 'source' else e.id}`{where} {words}")
    if len(rows) > MAX_IMPORTED_ROWS:
        lines.append(f"… and {len(rows) - MAX_IMPORTED_ROWS} more")
    return "\n".join(lines)


def _render_selection(corpus: Corpus, raw: dict, recent: dict, delivered: dict, include_returned: bool,
                      max_chars: int) -> tuple[str, list[Unit], list[str], dict]:
    units = resolve_selection(corpus, raw, recent=recent)
    kept, skipped, status = filter_delivered(units, delivered, include_returned)
    if kept:
        text = render(corpus, kept, max_chars=max_chars).text
    elif skipped:
        text = already_delivered_text(skipped)
    else:
        text = NO_STRONG_MATCH
    return text, kept, skipped, status


@dataclass
class _Call:
    """What one retrieve call reads before the model runs; the final render may refresh corpus and commit."""

    root: MemoryRoot
    session: str
    corpus: Corpus
    commit: str | None
    pending: dict[str, PendingItem]
    recent: dict[str, tuple[str, str]]  # uid -> (label, text) of the pending evidence shown to the model
    delivered: dict
    last_commit: str | None
    include_returned: bool
    max_chars: int
    max_attempts: int

    def render(self, raw: dict) -> tuple[str, list[Unit], list[str], dict]:
        return _render_selection(self.corpus, raw, self.recent, self.delivered, self.include_returned,
                                 self.max_chars)


def _read_call(root: MemoryRoot, session: str, cfg: Config, include_returned: bool, include_pending: bool) -> _Call:
    """The corpus and commit (under the shared lock), the pending evidence and the delivery history."""
    from rmtui.engine.gitutil import head_commit

    max_chars = int(cfg.get("retrieve.max_output_chars"))
    max_attempts = int(cfg.get("retrieve.max_selection_attempts"))
    with file_lock(root.lock_path, shared=True):
        corpus = load_corpus(root.path)
        commit = head_commit(root.path)
    pending = pending_items(root, session) if include_pending else {}
    with DeliveryHistory(root.runtime) as hist:
        delivered = hist.delivered(session)
        last_commit = hist.last_commit(session)
    return _Call(root, session, corpus, commit, pending, {uid: (p.label, p.text) for uid, p in pending.items()},
                 delivered, last_commit, include_returned, max_chars, max_attempts)


def _selection_tool(call: _Call, sel: Selection) -> ToolSpec:
    """The terminal tool: it accepts a selection that resolves, or tells the model why not."""

    def submit_selection(args: dict) -> str:
        sel.attempts += 1
        try:
            _text, kept, skipped, _status = call.render(args)
        except UsageError as exc:
            sel.errors.append(exc.message)
            if sel.attempts >= call.max_attempts:
                raise AbortTurn(f"retrieve: no valid selection after {sel.attempts} attempts; last error: "
                                f"{exc.message}", details={"errors": sel.errors}) from None
            raise ToolError(f"selection refused: {exc.message}. Correct it and call submit_selection again "
                            f"({call.max_attempts - sel.attempts} attempt(s) left).") from None
        sel.raw = args
        return f"accepted: {len(kept)} item(s) rendered, {len(skipped)} already delivered"

    return ToolSpec("submit_selection", "Finish: the memory to return, as ids, source ranges and recent candidates. "
                    "The program renders the source text; your prose is not returned.",
                    SELECTION_SCHEMA, submit_selection, terminal=True)


def _converse(call: _Call, cfg: Config, executor: Executor, context: str) -> dict:
    """Run the model until it submits a valid selection; prose answers count against the attempts."""
    from rmtui.engine.roles.executors import DebugTrace
    from rmtui.engine.roles.prompts import role_instructions
    from rmtui.engine.roles.tools import RoleTools

    root = call.root
    sel = Selection()
    tools = RoleTools(root.path, ROLE).specs() + [_selection_tool(call, sel)]
    trace = DebugTrace.for_role(root.runtime, ROLE, enabled=bool(cfg.get("debug.trace")))
    conv = executor.start(system=role_instructions(ROLE), tools=tools, cwd=str(root.path), trace=trace)
    try:
        message = context
        while sel.raw is None:
            result = conv.send(message)
            if result.terminal is not None:
                break
            sel.attempts += 1  # the model answered in prose: that is not a selection
            sel.errors.append("answered without calling submit_selection")
            if sel.attempts >= call.max_attempts:
                raise OperationFailed(f"retrieve: no valid selection after {sel.attempts} attempts; the model "
                                      "did not call submit_selection", details={"errors": sel.errors})
            message = ("Your answer was not a selection. Call submit_selection with ids, sources and "
                       "recent_candidates (empty lists when nothing is relevant).")
    finally:
        conv.close()
    assert sel.raw is not None  # a terminal result means submit_selection accepted a selection
    return sel.raw


def _render_final(call: _Call, raw: dict) -> tuple[str, list[Unit], list[str], dict]:
    """Render against the files as they are now (reloaded under the lock if they changed while the model
    ran) and record the delivery."""
    from rmtui.engine.gitutil import head_commit

    root = call.root
    with file_lock(root.lock_path, shared=True):
        if not current_fingerprint(root.path, call.corpus):
            call.corpus = load_corpus(root.path)
            call.commit = head_commit(root.path)
        try:
            rendered = call.render(raw)
        except UsageError as exc:
            raise ConflictError(f"memory changed during retrieval and the selection no longer "
                                f"resolves: {exc.message}") from None
        with DeliveryHistory(root.runtime) as hist:
            hist.record(call.session, [(u.key, u.id, u.hash) for u in rendered[1]], call.commit)
    return rendered


def _result(call: _Call, text: str, units: list[Unit], skipped: list[str], status: dict,
            warnings: list[str] | None) -> RetrieveResult:
    notices = [{"id": u.id, "key": u.key, "change": "changed", "selected": True}
               for u in units if status.get(u.key) == "changed"]
    results = [{"id": u.id, "key": u.key, "kind": u.kind, "score": None, "file": u.file,
                "start_line": u.start_line, "end_line": u.end_line, "status": status[u.key]}
               for u in units if u.kind != "recent"]
    # selected pending evidence: rendered in its own section (render), listed apart from memory
    chosen = [call.pending[u.key[len("recent:"):]].to_json() for u in units if u.kind == "recent"]
    return RetrieveResult(text, results, call.commit, call.corpus.fingerprint, "agent", notices, skipped,
                          warnings=list(warnings or []), pending=chosen)


def agent_retrieve(root: MemoryRoot, session: str, need: str, *, top: int | None = None,
                   include_returned: bool = False, executor=None, warnings: list[str] | None = None,
                   include_pending: bool = True):
    """Run the retrieve role for ``need`` and return the rendered selection (a RetrieveResult).

    Without ``include_pending`` the model is shown no pending evidence, so it can select none.
    """
    from rmtui.engine.roles.executors import make_executor

    check_session_id(session)
    if not need or not need.strip():
        raise UsageError("the need must not be empty")
    cfg = root.config()
    executor = executor or make_executor(cfg, ROLE)
    call = _read_call(root, session, cfg, include_returned, include_pending)
    context = build_context(root, session, need, call.corpus, call.commit, call.recent, call.delivered,
                            call.last_commit)
    if top:
        context += f"\n\nSelect at most about {top} items."
    raw = _converse(call, cfg, executor, context)
    text, units, skipped, status = _render_final(call, raw)
    return _result(call, text, units, skipped, status, warnings)
