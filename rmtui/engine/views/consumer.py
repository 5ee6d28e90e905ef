"""The consumer side of shared views (docs/formats.md, "Shared views"): connect, pull, list, ask.

``connect`` records the connection in ``shared_views.toml`` and appends the local
``### <title> {MF#id}`` (or ``MQ#``) heading, with a body saying what the view is and where
it comes from, to ``MEMORY.md`` — one supervised commit; a bearer token goes to
``.runtime/shared_views/credentials.toml``, never to a tracked file.

``pull`` downloads into a candidate folder beside the import, checks it entry by entry,
validates the exact package (expected view id, v2 rules) and promotes it atomically into
``.runtime/shared_views/imports/<id>/``. A failed pull leaves the last valid import byte
for byte as it was and marks the view ``stale`` (``unavailable`` when there is none).
Retrieval reads the promoted imports directly (``rmtui.engine.retrieval.corpus``).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmtui.engine.errors import ConflictError, EngineError, UnavailableError, UsageError
from rmtui.engine.locks import file_lock, try_lock
from rmtui.engine.memory.graph import load_graph
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views import files
from rmtui.engine.views.address import parse_join_url
from rmtui.engine.views.deadline import Deadline
from rmtui.engine.views.package import (
    PackageRefused,
    candidate_beside,
    extract_zip,
    promote,
    remove_tree,
    sweep,
    validate_package,
)

if TYPE_CHECKING:
    from rmtui.engine.views.questions import QuestionAnswer

SECTION = "# Shared Views"
PULL_TIMEOUT = 30.0
#: Retrieval refreshes a view at most this often, within :data:`REFRESH_BUDGET` seconds in all
#: (a total: a provider answering a byte at a time is cut off there).
REFRESH_EVERY = 300.0
REFRESH_BUDGET = 3.0


@dataclass(frozen=True)
class PullResult:
    view_id: str
    status: str  # pulled | stale | unavailable (docs/formats.md, "Shared views")
    reason: str | None = None
    version: str | None = None
    items: int | None = None
    changed: bool = False  # pulled a version other than the one imported

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ViewConnected:
    """A new connection: what ``shared_views.toml`` records, the supervised commit that recorded it
    (``landed``: operation id, phase, landed commit) and, unless asked not to, the first pull.
    ``to_json`` is the JSON the fronts print, in its key order."""

    connection: files.Connection
    landed: dict[str, Any]
    pull: PullResult | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"connection": self.connection.to_json(), "landed": self.landed}
        if self.pull is not None:
            out["pull"] = self.pull.to_json()
        return out


@dataclass(frozen=True)
class InvitationAccepted(ViewConnected):
    """A connection made by accepting a hub invitation; ``connection_id`` is the hub's id for it."""

    connection_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"connection": self.connection.to_json(), "landed": self.landed,
                               "connection_id": self.connection_id}
        if self.pull is not None:
            out["pull"] = self.pull.to_json()
        return out


# -- connect ------------------------------------------------------------------------------------

def _heading_entry(kind: str, cid: str, title: str, body: str) -> str:
    title = re.sub(r"[{}\n\r]", " ", title).strip() or cid
    return f"### {title} {{{kind}{cid}}}\n\n{body.strip()}\n"


def _with_heading(text: str, entry: str) -> str:
    """``MEMORY.md`` with ``entry`` at the end of its ``# Shared Views`` section (made when missing)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == SECTION), None)
    if start is None:
        base = text.rstrip()
        return (f"{base}\n\n" if base else "") + f"{SECTION}\n\n{entry}"
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^# ", lines[i])), len(lines))
    before = "".join(lines[:end]).rstrip()
    after = "".join(lines[end:]).lstrip("\n")
    return f"{before}\n\n{entry}" + (f"\n{after}" if after else "")


def check_free_id(root: MemoryRoot, cid: str, kind: str) -> bool:
    """Whether the heading is already there; an id used by anything else is refused."""
    graph = load_graph(root.path)
    item = graph.items.get(cid)
    if item is None:
        return False
    if item.kind == "heading" and item.heading_kind == kind:
        return True
    raise ConflictError(f"id `{cid}` is already used in the graph ({item.file}:{item.line}); "
                        "connect under another name with --as")


def record(root: MemoryRoot, conn: files.Connection, title: str, body: str) -> dict[str, Any]:
    kind = "MF#" if conn.type == "file" else "MQ#"
    present = check_free_id(root, conn.id, kind)

    def edit(wt: Path) -> list[str]:
        conns = files.load_connections(wt)
        conns[conn.id] = conn
        touched = [files.write_text(wt, files.REGISTRY_FILE, files.render_connections(conns))]
        if not present:
            memory = (wt / "MEMORY.md").read_text(encoding="utf-8")
            touched.append(files.write_text(wt, "MEMORY.md",
                                            _with_heading(memory, _heading_entry(kind, conn.id, title, body))))
        return touched

    return files.land(root, f"shared-view: connect {conn.id}", edit)


def connect_git(root: MemoryRoot, url: str, *, as_id: str | None = None, relationship: str = "human",
                pull_now: bool = True) -> ViewConnected:
    """Connect a Git share (``<repo>#share=<id>[&branch=<b>]``): its file view, by its view id."""
    from rmtui.engine.views import gitshare

    ref = parse_join_url(url)
    meta = gitshare.describe(root, ref)
    part = meta["file"]
    view_id = part["view_id"]
    cid = files.check_view_id(as_id or view_id, "connection id")
    title = str(part.get("title") or meta.get("title") or view_id)
    desc = str(part.get("description") or "")
    conn = files.Connection(cid, "file", f"rightmemory://mf/{view_id}", relationship,
                            maintainer=str(meta.get("provider_id")) if meta.get("provider_id") else None,
                            description=desc or None, accepted_from=ref.url,
                            target={"kind": "git-file", "view_id": view_id, "git_url": ref.repo_url,
                                    "git_share_id": ref.share_id, "accepted_from_url": ref.url}
                            | ({"git_branch": ref.branch} if ref.branch else {}))
    body = (f"Read-only shared view `{view_id}` from the Git share {ref.url}"
            + (f" ({desc})" if desc else "") + ". Its items are imported, not edited here.")
    landed = record(root, conn, title, body)
    return ViewConnected(conn, landed, pull_one(root, conn) if pull_now else None)


def connect_http(root: MemoryRoot, url: str, token: str, *, as_id: str | None = None,
                 relationship: str = "human", title: str | None = None, pull_now: bool = True) -> ViewConnected:
    """Connect a view served over HTTP; the token is checked against the provider first."""
    from rmtui.engine.views.client import ProviderClient, parse_provider_url

    if not token:
        raise UsageError("an HTTP connection needs the provider's bearer token (--token-env NAME)")
    where = parse_provider_url(url)
    cid = files.check_view_id(as_id or where.view_id, "connection id")
    client = ProviderClient(where.base_url, token, timeout=PULL_TIMEOUT)
    if where.kind == "file":
        client.package(where.view_id)  # the token works and the view exists, before anything is recorded
        ctype, tkind, ckind = "file", "http-file", "http-connection"
    else:
        client.ready(where.view_id)
        ctype, tkind, ckind = "question", "http-question", "http-question"
    files.save_credential(root, cid, kind=ckind, token=token, base_url=where.base_url, view_id=where.view_id)
    prefix = "mf" if ctype == "file" else "mq"
    conn = files.Connection(cid, ctype, f"rightmemory://{prefix}/{where.view_id}", relationship,
                            accepted_from=where.base_url,
                            target={"kind": tkind, "view_id": where.view_id, "base_url": where.base_url,
                                    "credential_id": cid, "accepted_from_url": url.split("#")[0]})
    what = "file view" if ctype == "file" else "question view (ask it with `shared-view ask`)"
    body = f"Shared {what} `{where.view_id}` served by {where.base_url}; read-only, not edited here."
    landed = record(root, conn, title or where.view_id, body)
    return ViewConnected(conn, landed, pull_one(root, conn) if pull_now and ctype == "file" else None)


# -- pull ---------------------------------------------------------------------------------------

def _download(root: MemoryRoot, conn: files.Connection, candidate: Path, deadline: Deadline) -> None:
    kind = conn.kind
    if kind == "http-file":
        from rmtui.engine.views.client import ProviderClient

        cred = files.credential(root, conn.target["credential_id"])
        data = ProviderClient(conn.target["base_url"], cred["token"], timeout=deadline.seconds,
                              deadline=deadline).package(conn.view_id)
        extract_zip(data, candidate)
    elif kind == "git-file":
        from rmtui.engine.views import gitshare

        t = conn.target
        ref = gitshare.ShareRef(t["git_url"], t["git_share_id"], t.get("git_branch"))
        got = gitshare.fetch_package(root, ref, candidate, deadline=deadline)
        if got["share"]["file"].get("view_id") != conn.view_id:
            raise PackageRefused("view-id", f"the Git share carries view {got['share']['file'].get('view_id')!r}, "
                                 f"not {conn.view_id!r}")
    elif kind == "revoked":
        raise UnavailableError("the provider revoked this view")
    else:
        raise UnavailableError(f"connection `{conn.id}` has no transport (target kind {kind!r})")


def pull_one(root: MemoryRoot, conn: files.Connection, *, timeout: float = PULL_TIMEOUT,
             deadline: Deadline | None = None) -> PullResult:
    """Download, check, validate and promote one file view; a failure never touches the import.
    ``timeout`` is the download's whole budget (``deadline``, when given, one shared with other
    steps), however slowly the provider answers."""
    deadline = Deadline.after(timeout).sooner(deadline)
    if conn.type != "file":
        raise UsageError(f"`{conn.id}` is a question view; ask it, there is nothing to pull")
    folder = files.imports_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / conn.id
    now = files.now_iso()
    with file_lock(files.lock_path(root, f"pull-{conn.id}"), timeout=timeout + 30):
        sweep(folder, conn.id)
        candidate = candidate_beside(final)
        try:
            _download(root, conn, candidate, deadline)
            info = validate_package(candidate, conn.view_id)
            current = None
            if final.is_dir():
                try:
                    current = validate_package(final, conn.view_id).digest
                except (PackageRefused, OSError):
                    current = None  # a damaged import is replaced
            changed = current != info.digest
            if changed:
                with file_lock(root.lock_path):  # readers render from a snapshot: never mid-swap
                    promote(candidate, final)
            else:
                remove_tree(candidate)
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, the import stays as it was
            remove_tree(candidate)
            reason = exc.message if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"
            status = "stale" if (final / "dist" / "MEMORY.md").is_file() else "unavailable"
            files.update_state(root, conn.id, status=status, reason=reason, last_attempt_at=now,
                               last_attempt=time.time())
            return PullResult(conn.id, status, reason)
        files.update_state(root, conn.id, status="fresh", reason=None, last_attempt_at=now, last_attempt=time.time(),
                           last_success_at=now, version=info.digest, items=info.items, title=info.title)
        return PullResult(conn.id, "pulled", None, info.digest, info.items, changed)


def pull(root: MemoryRoot, view: str | None = None, *, timeout: float = PULL_TIMEOUT) -> list[PullResult]:
    conns = files.load_connections(root.path)
    if view is not None:
        return [pull_one(root, files.connection(root.path, view), timeout=timeout)]
    return [pull_one(root, c, timeout=timeout) for c in conns.values() if c.type == "file"]


def refresh_before_retrieve(root: MemoryRoot, *, every: float = REFRESH_EVERY, budget: float = REFRESH_BUDGET) -> \
        list[PullResult]:
    """The bounded refresh a retrieve makes first: each file view not tried for ``every`` seconds
    is pulled, within ``budget`` seconds in all; a view another process is pulling is skipped.
    Never raises: retrieval answers from what is imported."""
    done: list[PullResult] = []
    try:
        conns = files.load_connections(root.path)
    except EngineError:
        return done
    deadline = Deadline.after(budget)
    state = files.load_state(root)
    for conn in conns.values():
        if conn.type != "file" or conn.kind in ("none", "revoked"):
            continue
        last = state.get(conn.id, {}).get("last_attempt")
        if isinstance(last, (int, float)) and time.time() - last < every:
            continue
        left = deadline.left()
        if left <= 0.2:
            break
        fd = try_lock(files.lock_path(root, f"pull-{conn.id}"))
        if fd is None:
            continue
        os.close(fd)
        try:
            done.append(pull_one(root, conn, deadline=deadline))
        except Exception:  # noqa: BLE001 - a refresh never fails a retrieval
            continue
    return done


# -- list and ask -----------------------------------------------------------------------------------

def status_of(root: MemoryRoot, conn: files.Connection, state: dict) -> dict:
    entry = state.get(conn.id, {})
    out = {"view_id": conn.id, "provider_view_id": conn.view_id, "type": conn.type, "transport": conn.kind,
           "source": conn.target.get("accepted_from_url") or conn.target.get("base_url"),
           "relationship": conn.relationship, "last_attempt_at": entry.get("last_attempt_at"),
           "last_success_at": entry.get("last_success_at"), "reason": entry.get("reason"),
           "items": entry.get("items"), "version": entry.get("version")}
    if conn.type == "question":
        out["status"] = "unavailable" if conn.kind != "http-question" else entry.get("status") or "fresh"
        return out
    present = (files.imports_dir(root) / conn.id / "dist" / "MEMORY.md").is_file()
    if not present:
        out["status"] = "unavailable"
        out["reason"] = entry.get("reason") or "not pulled yet"
    else:
        out["status"] = "stale" if entry.get("status") == "stale" else "fresh"
        if out["status"] == "fresh":
            out["reason"] = None
    return out


def list_connections(root: MemoryRoot) -> list[dict]:
    state = files.load_state(root)
    return [status_of(root, c, state) for _, c in sorted(files.load_connections(root.path).items())]


def ask(root: MemoryRoot, view: str, question: str, *, timeout: float | None = None) -> QuestionAnswer:
    """Ask a question view; the answer is shown, never written to memory."""
    from rmtui.engine.views import questions
    from rmtui.engine.views.client import ProviderClient

    conn = files.connection(root.path, view)
    if conn.type != "question":
        raise UsageError(f"`{view}` is a file view; retrieve reads it, questions go to question views")
    question = question.strip()
    if not question or len(question) > questions.MAX_QUESTION_CHARS:
        raise UsageError(f"the question must be 1 to {questions.MAX_QUESTION_CHARS} characters")
    if conn.kind != "http-question":
        return questions.result(conn.id, "unavailable", reason=f"no question transport (target {conn.kind})")
    cred = files.credential(root, conn.target.get("question_credential_id") or conn.target["credential_id"])
    base = conn.target.get("question_base_url") or conn.target["base_url"]
    client = ProviderClient(base, cred["token"], timeout=timeout or 240.0)
    try:
        data = client.ask(conn.view_id, question)
    except UnavailableError as exc:
        files.update_state(root, conn.id, status="unavailable", reason=exc.message, last_attempt_at=files.now_iso())
        return questions.result(conn.id, "unavailable", reason=exc.message)
    status = data.get("status") if data.get("status") in ("answered", "unavailable") else "unavailable"
    files.update_state(root, conn.id, status="fresh" if status == "answered" else "unavailable",
                       reason=data.get("reason"), last_attempt_at=files.now_iso())
    if status == "answered":
        return questions.result(conn.id, "answered", answer=str(data.get("answer") or ""))
    return questions.result(conn.id, "unavailable", reason=str(data.get("reason") or "the provider did not answer"))
