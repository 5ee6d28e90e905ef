"""Blocking reads of engine state, called only from worker threads.

Each function opens what it needs, reads one consistent picture and closes it again, so a
worker never shares a connection or a Git handle with the UI thread. Nothing here decides
anything about memory: it shapes what the engine reports for display.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from rmtui.engine.roots import MemoryRoot
from rmtui.tui.messages import DiffFile, GraphState, InsightLog, LastCommit

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
    from rmtui.engine.validation import validate_root

    report = validate_root(root.path)
    try:
        head = head_commit(root.path)
    except Exception:  # an unborn or broken branch still shows the files
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
    from rmtui.engine.queue import EvidenceQueue

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


def read_operations(root: MemoryRoot, *, receipts_limit: int = 50) -> tuple[list, list]:
    from rmtui.engine.operations import OperationStore

    st = OperationStore(root)
    try:
        ops = st.list(unfinished=True)
        receipts = st.receipts(receipts_limit)
    finally:
        st.close()
    return ops, receipts


def _blame_newest(repo, path: str, start: int, end: int) -> tuple[int, str] | None:
    import git

    try:
        out = repo.git.blame("--porcelain", "-L", f"{start},{end}", "HEAD", "--", path)
    except git.GitCommandError:
        return None
    best: tuple[int, str] | None = None
    current = None
    for line in out.splitlines():
        parts = line.split(" ")
        if len(parts[0]) == 40 and all(c in "0123456789abcdef" for c in parts[0]):
            current = parts[0]
        elif line.startswith("committer-time ") and current and set(current) != {"0"}:
            t = int(line.split(" ", 1)[1])
            if best is None or t > best[0]:
                best = (t, current)
    return best


def last_commit(root: MemoryRoot, file: str, start: int, end: int, backing: str | None = None) -> LastCommit | None:
    """The newest commit that changed lines start..end of ``file`` (or the backing file)."""
    import git

    repo = git.Repo(root.path)
    try:
        best = _blame_newest(repo, file, max(start, 1), max(end, start, 1))
        if backing:
            try:
                out = repo.git.log("-1", "--format=%ct %H", "HEAD", "--", backing).strip()
            except git.GitCommandError:
                out = ""
            if out:
                t, sha = out.split(" ", 1)
                if best is None or int(t) > best[0]:
                    best = (int(t), sha)
        if best is None:
            return None
        commit = repo.commit(best[1])
        when = datetime.fromtimestamp(commit.committed_date, timezone.utc).strftime("%Y-%m-%d %H:%M")
        return LastCommit(sha=commit.hexsha, subject=commit.message.strip().splitlines()[0] if commit.message.strip() else "",
                          date=when)
    finally:
        repo.close()


def parse_diff(text: str) -> list[DiffFile]:
    """Split a unified Git diff into files, counting added and removed lines."""
    files: list[DiffFile] = []
    current: DiffFile | None = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            rest = line[len("diff --git "):]
            path = rest.split(" b/", 1)[1] if " b/" in rest else rest
            current = DiffFile(path=path)
            files.append(current)
        if current is None:
            continue
        current.lines.append(line)
        if line.startswith("+") and not line.startswith("+++"):
            current.added += 1
        elif line.startswith("-") and not line.startswith("---"):
            current.removed += 1
    return files


def read_diff(root: MemoryRoot, op_id: str) -> tuple[dict, list[DiffFile]]:
    from rmtui.engine.supervisor import Supervisor

    with Supervisor(root) as sup:
        op = sup.store.get(op_id)
        text = sup.diff(op_id)
    live = False
    if not text and not op.final and Path(op.worktree).is_dir():
        text, live = worktree_diff(Path(op.worktree), op.base_commit), True
    header = {
        "id": op.id, "kind": op.kind, "role": op.role, "phase": op.phase,
        "base": op.base_commit, "landed": op.landed_commit or op.candidate_commit,
        "summary": op.summary, "error": op.error, "live": live,
    }
    return header, parse_diff(text)


def worktree_diff(worktree: Path, base: str) -> str:
    """What a running operation has changed so far: its worktree against its base commit,
    committed or not, new files included (read-only: nothing is staged)."""
    import git

    repo = git.Repo(worktree)
    try:
        text = repo.git.diff(base)
        untracked = repo.git.ls_files("--others", "--exclude-standard", "-z").split("\0")
        for rel in filter(None, untracked):
            # --no-index exits 1 when the files differ, which is the point here
            _code, out, _err = repo.git.execute(["git", "diff", "--no-index", "--", "/dev/null", rel],
                                                with_extended_output=True, with_exceptions=False)
            if out:
                text += ("\n" if text else "") + out
    finally:
        repo.close()
    return text


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
    from rmtui.engine import maintain

    st = maintain.status(root)
    if st is None:
        return None, []
    wt = Path(st.operation.worktree)
    files = sorted(
        p.relative_to(wt).as_posix() for p in wt.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(wt).parts and p.suffix in (".md", ".toml")
    )
    return st.to_json(), files
