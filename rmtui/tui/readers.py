"""Blocking reads of engine state, called only from worker threads.

Each function opens what it needs, reads one consistent picture and closes it again, so a
worker never shares a connection or a Git handle with the UI thread. Nothing here decides
anything about memory: it shapes what the engine reports for display.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rmtui.engine.memory.roots import MemoryRoot
from rmtui.tui.models import DiffFile, GraphState, InsightLog, LastCommit, SharedViewRow

if TYPE_CHECKING:
    from rmtui.engine.host.waiting import QueueWaiting
    from rmtui.engine.sync.overview import SyncOverview

INSIGHT_DIR = "insight_logs"


def display_path(path: Path | str) -> str:
    """A path as a person reads it: the home folder shown as ``~``."""
    text = str(path)
    home = os.path.expanduser("~")
    if home and home != "/" and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home):]
    return text


def read_graph(root: MemoryRoot) -> GraphState:
    from rmtui.engine.gitutil import head_commit
    from rmtui.engine.memory.parse_store import with_parses
    from rmtui.engine.memory.validation import validate_root

    # the file parses of the last reading (this process's, or the last one's on disk): only
    # files whose bytes changed are scanned again
    report = with_parses(root.path, lambda parses: validate_root(root.path, parses=parses))
    try:
        head = head_commit(root.path)
    except Exception:  # noqa: BLE001 - an unborn or broken branch still shows the files
        head = None
    graph = report.graph
    domains: dict[str, dict] = {}
    for domain in ("memory", "pursuit"):
        domains[domain] = {"headings": 0, "nodes": 0, "uncertain": 0,
                           "files": sorted(f for f, gf in graph.files.items() if gf.domain == domain)}
    for item in graph.ordered:
        d = domains.setdefault(item.domain, {"headings": 0, "nodes": 0, "uncertain": 0, "files": []})
        if item.kind == "node":
            d["nodes"] += 1
            if item.uncertain:
                d["uncertain"] += 1
        elif item.id is not None:
            d["headings"] += 1
    counts = {"headings": sum(d["headings"] for d in domains.values()),
              "nodes": sum(d["nodes"] for d in domains.values())}
    return GraphState(graph=graph, issues=list(report.issues), head=head, root_name=display_path(root.path),
                      counts=counts, domains=domains, incoming=incoming_index(graph),
                      index=[(i, f"{i.id or ''} {i.title}".lower()) for i in graph.ordered])


def incoming_index(graph) -> dict[str, list]:
    """target id -> [(item, edge)] for every edge of the graph (one pass)."""
    out: dict[str, list] = {}
    for item in graph.ordered:
        for edge in item.edges:
            out.setdefault(edge.target, []).append((item, edge))
    return out


def read_queue(root: MemoryRoot, *, rejected_limit: int = 20) -> tuple[list, dict[str, int]]:
    """Active evidence (inbox, queued, claimed) then the latest rejected; counts by state."""
    from rmtui.engine.evidence.queue import EvidenceQueue

    q = EvidenceQueue(root)
    try:
        active = [e for e in q.list() if e.state in ("inbox", "queued", "claimed")]
        rejected = q.list(state="rejected")[-rejected_limit:]
        counts = q.counts()
    finally:
        q.close()
    order = {"inbox": 0, "queued": 1, "claimed": 2}
    active.sort(key=lambda e: (order[e.state], e.seq))
    return active + rejected[::-1], counts


def read_waiting(root: MemoryRoot, *, now: float | None = None) -> QueueWaiting | None:
    """Why queued evidence is not moving (the engine's :func:`~rmtui.engine.host.waiting.queue_waiting`)."""
    from rmtui.engine.errors import EngineError
    from rmtui.engine.host.waiting import QueueWaiting, queue_waiting

    try:
        return queue_waiting(root, now=now)
    except EngineError as exc:
        return QueueWaiting("unknown", f"cannot tell why: {exc.message}", None, None)


def read_operations(root: MemoryRoot, *, receipts_limit: int = 50) -> tuple[list, list]:
    from rmtui.engine.writes.operations import OperationStore

    st = OperationStore(root)
    try:
        ops = st.list(unfinished=True)
        receipts = st.receipts(receipts_limit)
    finally:
        st.close()
    return ops, receipts


def last_commit(root: MemoryRoot, file: str, start: int, end: int, backing: str | None = None) -> LastCommit | None:
    """The newest commit that changed lines start..end of ``file`` (or the backing file)."""
    from rmtui.engine.memory.history import last_commit as engine_last_commit

    info = engine_last_commit(root, file, start, end, backing)
    if info is None:
        return None
    when = datetime.fromtimestamp(info.committed_at, UTC).strftime("%Y-%m-%d %H:%M")
    return LastCommit(sha=info.sha, subject=info.subject, date=when)


def read_diff(root: MemoryRoot, op_id: str) -> tuple[dict, list[DiffFile]]:
    """An operation's diff (a running one's worktree so far): header fields and its files."""
    from rmtui.engine.writes.diffs import operation_diff

    d = operation_diff(root, op_id)
    header = {k: v for k, v in d.to_json().items() if k not in ("diff", "files")}
    header["landed"] = d.landed or d.candidate  # what the shown diff reaches
    return header, d.files


def read_insight_logs(root: MemoryRoot) -> list[InsightLog]:
    folder = root.path / INSIGHT_DIR
    if not folder.is_dir():
        return []
    logs = []
    for path in sorted(folder.glob("*.md"), reverse=True):  # YYYY-MM-DD-HHMMSS names: newest first
        if not path.is_file() or path.is_symlink():
            continue
        logs.append(InsightLog(name=path.name, text=path.read_text(encoding="utf-8", errors="replace")))
    return logs


def read_maintenance(root: MemoryRoot) -> tuple[dict | None, list[str]]:
    """The active maintenance (as ``maintain status`` reports it) and its editable files."""
    from rmtui.engine.writes import maintain

    st = maintain.status(root)
    if st is None:
        return None, []
    wt = Path(st.operation.worktree)
    files = sorted(
        p.relative_to(wt).as_posix() for p in wt.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(wt).parts and p.suffix in (".md", ".toml")
    )
    return st.to_json(), files


# -- sharing: sync and shared views ---------------------------------------------------------

#: the machine column's width: a device id is shown by its first eight hex digits
MACHINE_CHARS = 8


def machine_name(device: str) -> str:
    """A machine as the queue shows it: the first hex digits of its lease device id."""
    return device[:MACHINE_CHARS]


def read_queue_machines(root: MemoryRoot, evidence: list) -> dict[str, str]:
    """uid -> the machine column of a queued or claimed row: ``here`` for a batch this machine
    holds, the holder's short device id for another machine's lease, else where it came
    from (``upstream``: imported from the shared queue). Empty when sync is off."""
    rows = [e for e in evidence if e.state in ("queued", "claimed")]
    if not rows or not root.config().get("sync.enabled"):
        return {}
    from rmtui.engine.sync.overview import batch_holders

    holders = batch_holders(root)
    out: dict[str, str] = {}
    for e in rows:
        lease = holders.get(e.uid)
        if lease is not None:
            out[e.uid] = "here" if lease.ours else machine_name(lease.holder)
        elif e.origin:
            out[e.uid] = e.origin
    return out


def read_sync(root: MemoryRoot, *, now: float | None = None) -> SyncOverview:
    """The Sharing screen's sync panel: status, times, ahead/behind, lease, pending repair
    (``now``: the app's clock, which says whether the lease has expired)."""
    from rmtui.engine.sync.overview import sync_overview

    return sync_overview(root, now=datetime.fromtimestamp(now, UTC) if now is not None else None)


def read_shared_views(root: MemoryRoot) -> list[SharedViewRow]:
    """Each connection of ``shared_views.toml`` with its freshness (as ``shared-view list``)."""
    from rmtui.engine.views.consumer import list_connections

    return [SharedViewRow(view_id=r["view_id"], kind="MF" if r["type"] == "file" else "MQ", status=r["status"],
                          reason=r.get("reason"), items=r.get("items"), last_success_at=r.get("last_success_at"),
                          source=r.get("source"), transport=str(r.get("transport") or ""))
            for r in list_connections(root)]
