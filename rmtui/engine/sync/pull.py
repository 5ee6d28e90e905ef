"""Sync with the upstream: pull, push, status (docs/formats.md, "Sync").

Pull: fetch; refuse any incoming path off the allow-list (and any symlink, executable or
submodule); stage the incoming state in a candidate worktree (the exact upstream commit
when the root is behind, a merge when both moved); validate it from its checkout with the
correction capacity off; publish by compare-and-swap through the supervisor. A conflict
or an invalid result becomes a repair by the sync-reconciler in that worktree; nothing is
published until the repaired candidate validates. Queue and record paths are never
repaired, only refused. The active root is untouched by every refusal.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rmtui.engine.errors import EngineError, UsageError
from rmtui.engine.gitutil import IDENTITY
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.sync import incoming
from rmtui.engine.sync import state as sync_state
from rmtui.engine.sync.paths import is_queue_or_record, is_synced
from rmtui.engine.sync.remote import (
    Offline,
    Upstream,
    counts,
    fetch,
    git,
    is_ancestor,
    push,
    rev,
    unreachable,
    upstream_of,
)
from rmtui.engine.writes import worktrees
from rmtui.engine.writes.admission import AdmissionRefused, FileLimits, dirty_paths
from rmtui.engine.writes.faults import crashpoint, crashpoint_in_git, die
from rmtui.engine.writes.supervisor import Supervisor

PULL_CHECK_SECONDS = 300
PULL_CHECK_FETCH_TIMEOUT = 2.0
REPAIR_POLICY = "staged-sync-repair-v1"


@dataclass(frozen=True)
class SyncResult:
    """What a pull, push or status answers: ``status`` (synced, fresh, pushed, offline, error,
    conflict, dirty, unconfigured, ...) and why, the files it brought, ahead/behind against the
    upstream, the receipt of a landing and the repair it needed, the sync state file after it,
    and the rule a refusal names."""

    status: str
    message: str
    files: list[str] = field(default_factory=list)
    ahead: int = 0
    behind: int = 0
    head: str | None = None
    upstream: str | None = None
    upstream_commit: str | None = None
    receipt: dict | None = None
    repair: dict | None = None
    state: dict | None = None
    rule: str | None = None  # the rule a refusal names (docs/sync.md, "What a commit may bring")

    def to_json(self) -> dict:
        return asdict(self)


class SyncRefused(EngineError):
    """Incoming state that must not land (off-list path, bad mode, queue conflict, rewritten history)."""

    kind = "refused"
    exit_code = 1

    @classmethod
    def of(cls, exc: AdmissionRefused, what: str) -> SyncRefused:
        """An admission rule broken by ``what`` (an incoming commit, the merge), by name."""
        d = exc.details or {}
        commit = d.get("commit") or ""
        where = f"{what} {commit[:10]}" if commit else what
        return cls(f"{where} refused: {exc.message}",
                   details={"files": [d["path"]] if d.get("path") else [], "rule": exc.rule, "commit": commit})


def _refusal(root: MemoryRoot, exc: SyncRefused) -> SyncResult:
    details = exc.details or {}
    return _finish(root, SyncResult("error", exc.message, list(details.get("files", [])), rule=details.get("rule")))


_held = threading.local()


@contextmanager
def sync_lock(root: MemoryRoot) -> Iterator[None]:
    """One pull, push or repair staging at a time (``.runtime/sync/sync.lock``). Whoever takes
    it first (not a nested holder) prunes what a killed sync left before anything else runs:
    a dead staging worktree's admin entry fails every later fetch."""
    root.ensure_runtime()
    path = worktrees.sync_lock_path(root)
    key = str(path.resolve())
    with file_lock(path):
        depth = getattr(_held, key, 0)
        if not depth:
            worktrees.prune_dead_sync(root)
        setattr(_held, key, depth + 1)
        try:
            yield
        finally:
            setattr(_held, key, depth)


def _configured(root: MemoryRoot, *, first_push: bool = False) -> tuple[Upstream | None, SyncResult | None]:
    """The branch's upstream, or why there is none. With ``first_push`` (``sync push``) a
    branch with no upstream is pushed to the remote of the same name (``origin``, or the only
    remote), which the push then tracks: the one command the first machine of a team runs,
    and the only one that works on an empty upstream (``git branch --set-upstream-to`` needs
    the branch to exist there already)."""
    if not root.config().get("sync.enabled"):
        return None, SyncResult("disabled", "sync is off: set [sync] enabled = true in rightmemory.toml")
    up = upstream_of(root.path)
    if up is not None:
        return up, None
    branch = git(root.path, "symbolic-ref", "--short", "-q", "HEAD", check=False).strip()
    remotes = git(root.path, "remote", check=False).split()
    remote = "origin" if "origin" in remotes else (remotes[0] if len(remotes) == 1 else None)
    if remote is not None and branch and first_push:
        return Upstream(remote, branch), None
    if remote is not None:
        how = f"run `rmtui --headless sync push` to push it to {remote} and track it"
    elif remotes:
        how = f"track one of the remotes {', '.join(remotes)}: git push -u <remote> {branch or 'HEAD'}"
    else:
        how = "add the shared repository: git remote add origin URL, then run `rmtui --headless sync push`"
    return None, SyncResult("unconfigured", f"the branch {branch or '(detached)'} has no upstream: {how}")


def _track(root: MemoryRoot, up: Upstream) -> None:
    """Make the branch track ``up`` once its first push made it exist (as ``git push -u``)."""
    if upstream_of(root.path) is None:
        git(root.path, "config", f"branch.{up.branch}.remote", up.remote)
        git(root.path, "config", f"branch.{up.branch}.merge", f"refs/heads/{up.branch}")


def _fetch(root: MemoryRoot, up: Upstream, timeout: float) -> SyncResult | None:
    """Fetch the upstream branch: None when it is fetched or does not exist yet (an empty
    upstream: the first push makes it), else the result that ends the run (offline: exit 4,
    naming the remote and its address). A branch that existed and is gone is refused: every
    machine would otherwise take the empty upstream as "nothing to pull" or push a new one."""
    label = f"{up.remote}/{up.branch}"
    seen = rev(root.path, up.ref)
    got = fetch(root.path, up, timeout=timeout)
    if got.ok:
        return None
    if got.missing:
        st = sync_state.load(root)
        known = seen or st.last_upstream_commit or st.last_pushed_commit
        if not known:
            return None
        raise SyncRefused(f"{label} no longer exists on {up.remote} (it was deleted; this machine last saw it at "
                          f"{known[:10]}); nothing pulled or pushed. If it was deleted by mistake, recreate it "
                          f"from this root: git push {up.remote} HEAD:{up.branch}",
                          details={"rule": "upstream-deleted", "files": []})
    if got.offline:
        return SyncResult("offline", unreachable(root.path, up.remote, got), upstream=label)
    return SyncResult("error", f"fetch from {up.remote}: {got.message}", upstream=label)


def _check_rewrite(root: MemoryRoot, label: str, tip: str) -> None:
    """Rule ``history-rewritten``: the upstream must still hold what this machine last pulled
    from it and what it last pushed there. A force-push that drops either is refused naming
    both commits, before anything is staged or pushed (pushing again would resurrect what the
    upstream dropped; pulling would take a history other machines do not share)."""
    st = sync_state.load(root)
    for known, how in ((st.last_pushed_commit, "this machine pushed"), (st.last_upstream_commit, "last pulled")):
        if known and rev(root.path, known) and not is_ancestor(root.path, known, tip):
            raise SyncRefused(f"{label} was rewritten: its tip {tip[:10]} does not contain {known[:10]}, which {how}; "
                              "nothing pulled or pushed (restore the upstream's history; never force-push memory)",
                              details={"rule": "history-rewritten", "files": []})


def _finish(root: MemoryRoot, result: SyncResult, **stamps: str) -> SyncResult:
    st = sync_state.load(root)
    st.record(result.status, result.message, result.files)
    for key, value in stamps.items():
        setattr(st, key, value)
    sync_state.save(root, st)
    return replace(result, state=st.to_json())


def status(root: MemoryRoot) -> SyncResult:
    """What is known without the network, read afresh each time: the configuration and the
    branch's upstream as they are now, ahead/behind against the last fetched upstream, and
    the last run from the state file (unless that run found sync off or no upstream, which
    the configuration now contradicts)."""
    up, off = _configured(root)
    st = sync_state.load(root)
    if off is not None:
        return replace(off, state=st.to_json())
    assert up is not None
    label = f"{up.remote}/{up.branch}"
    head = rev(root.path, "HEAD")
    tip = rev(root.path, up.ref)
    ahead, behind = counts(root.path, head or "", tip) if head else (0, 0)
    if st.last_status and st.last_status not in ("disabled", "unconfigured"):
        last, message = st.last_status, st.last_message or st.last_status
    elif tip is None:
        last, message = "unknown", f"not synced yet: {label} has not been fetched (or is empty)"
    else:
        last, message = "unknown", f"not synced yet with {label}"
    return SyncResult(last, message, list(st.last_files) if last == st.last_status else [], ahead, behind, head,
                      label, tip, state=st.to_json())


def maybe_pull(root: MemoryRoot, *, every: float = PULL_CHECK_SECONDS,
               fetch_timeout: float = PULL_CHECK_FETCH_TIMEOUT) -> SyncResult | None:
    """The bounded pull check made for reading agents: at most every ``every`` seconds, with a
    short fetch timeout, never an error. It runs in the retrieval upkeep process
    (``host/retrieve_upkeep.py``), never on a retrieval's answer path: a pull checks every
    commit it brings, which takes time in proportion to what they change."""
    try:
        if not root.config().get("sync.enabled"):
            return None
        st = sync_state.load(root)
        if st.last_pull_check_at:
            last = datetime.fromisoformat(st.last_pull_check_at).timestamp()
            if time.time() - last < every:
                return None
        st.last_pull_check_at = sync_state.now_iso()
        sync_state.save(root, st)
        return pull(root, fetch_timeout=fetch_timeout)
    except EngineError:
        return None


def pull(root: MemoryRoot, *, fetch_timeout: float | None = None, executor=None) -> SyncResult:
    up, off = _configured(root)
    if off is not None:
        return _finish(root, off)
    assert up is not None
    with sync_lock(root):
        with Supervisor(root) as sup:
            sup.recover()  # a pull killed after its compare-and-swap is finished first, or the root looks dirty
        timeout = fetch_timeout if fetch_timeout is not None else float(root.config().get("sync.fetch_timeout_seconds"))
        try:
            stop = _fetch(root, up, timeout)
            if stop is not None:
                return _finish(root, stop)
            return _pull_fetched(root, up, executor)
        except SyncRefused as exc:
            return _refusal(root, exc)


@dataclass
class Incoming:
    """A fetched upstream that moved past the root: what a pull stages (the paths it brings,
    already checked against the allow-list)."""

    up: Upstream
    head: str
    tip: str
    label: str
    ahead: int
    behind: int
    paths: list[str]

    @property
    def queue_only(self) -> bool:
        """Only queue and record files moved upstream: nothing to stage, validate or repair."""
        return self.ahead == 0 and bool(self.paths) and all(is_queue_or_record(p) for p in self.paths)

    def to_json(self) -> dict:
        return {"remote": self.up.remote, "branch": self.up.branch, "head": self.head, "tip": self.tip,
                "label": self.label, "ahead": self.ahead, "behind": self.behind, "paths": self.paths}

    @classmethod
    def from_json(cls, data: dict) -> Incoming:
        return cls(Upstream(data["remote"], data["branch"]), data["head"], data["tip"], data["label"],
                   int(data["ahead"]), int(data["behind"]), list(data["paths"]))


def examine(root: MemoryRoot, up: Upstream) -> Incoming | SyncResult:
    """What a pull of the fetched upstream would do, decided without staging: a
    :class:`SyncResult` (not yet recorded) when nothing is to be staged (fresh, up to date,
    dirty), else the :class:`Incoming`. Refuses rewritten or unrelated histories and
    off-list paths."""
    head = rev(root.path, "HEAD")
    tip = rev(root.path, up.ref)
    if head is None:
        raise UsageError("the root has no commit yet")
    label = f"{up.remote}/{up.branch}"
    if tip is None:  # the upstream branch does not exist yet: the first push makes it
        return SyncResult("fresh", f"{label} is empty", head=head, upstream=label)
    _check_rewrite(root, label, tip)
    ahead, behind = counts(root.path, head, tip)
    if is_ancestor(root.path, tip, head):
        return SyncResult("synced", "up to date" if not ahead else f"{ahead} local commit(s) to push",
                          ahead=ahead, behind=0, head=head, upstream=label, upstream_commit=tip)
    base = git(root.path, "merge-base", head, tip, check=False).strip()
    if not base:
        raise SyncRefused(f"{label} shares no history with the root; refusing to merge unrelated histories")
    incoming = _incoming(root, head, base, tip)
    with _repo_at(root.path) as repo:
        dirty = [p for p in dirty_paths(repo) if is_synced(p)]
    if dirty:
        return SyncResult("dirty", "uncommitted changes on synchronized paths; commit or discard them first",
                          dirty, ahead, behind, head, label, tip)
    return Incoming(up, head, tip, label, ahead, behind, incoming)


def stage(wt: Path, inc: Incoming, limits: FileLimits) -> tuple[str, list[str], list[str]]:
    """Stage the incoming state in ``wt`` (a worktree at the local head): the upstream tip
    when the root is only behind, a merge when both moved. Answers the candidate commit
    (empty while conflicted), the conflicted files and the problems (conflicts, or the rules
    the staged state breaks). Conflicts on queue or record paths are refused, never repaired;
    so is a merge that breaks an admission rule (:func:`incoming.check_merge`)."""
    conflicts: list[str] = []
    if inc.ahead == 0:
        git(wt, "checkout", "--quiet", "--detach", inc.tip)
        candidate = inc.tip
    else:
        merged = subprocess.run(["git", "merge", "--no-ff", "--no-edit", "-m", f"sync: merge {inc.label}", inc.tip],
                                cwd=wt, capture_output=True, text=True, env=_identity_env())
        if merged.returncode != 0:
            conflicts = git(wt, "diff", "--name-only", "--diff-filter=U").split()
            if not conflicts:
                raise SyncRefused(f"merge of {inc.label} failed: {merged.stderr.strip()[:300]}")
            never = [p for p in conflicts if is_queue_or_record(p) or not is_synced(p)]
            if never:
                raise SyncRefused(f"conflict on queue or record paths, never repaired: {', '.join(never)}",
                                  details={"files": never})
            candidate = ""
        else:
            candidate = git(wt, "rev-parse", "HEAD").strip()
            try:
                with _repo_at(wt) as repo:
                    incoming.check_merge(repo, inc.head, inc.tip, candidate, limits)
            except AdmissionRefused as exc:
                raise SyncRefused.of(exc, f"the merge with {inc.label}") from None
    return candidate, conflicts, conflicts or _invalid(wt)


def _pull_fetched(root: MemoryRoot, up: Upstream, executor, *, push_merge: bool = True) -> SyncResult:
    inc = examine(root, up)
    if isinstance(inc, SyncResult):
        stamps = ({"last_successful_pull_at": sync_state.now_iso(), "last_upstream_commit": inc.upstream_commit or ""}
                  if inc.status == "synced" else {})
        return _finish(root, inc, **stamps)
    notes = _check_queue_records(root, inc)
    if inc.queue_only:  # only queue and record files moved: no graph to validate
        return _publish(root, up, inc.head, inc.tip, inc.paths, inc.behind, inc.label, None, push_merge=False,
                        notes=notes)
    digest = hashlib.sha256(f"{inc.head}\0{inc.tip}\0{REPAIR_POLICY}".encode()).hexdigest()[:16]
    wt = worktrees.worktrees_dir(root) / f"sync-{digest}"
    fresh_worktree(root, wt, inc.head)
    outcome = None
    try:
        candidate, conflicts, problems = stage(wt, inc, incoming.limits_of(root))
        if problems:
            from rmtui.engine.sync.repair import repair

            outcome = repair(root, wt, head=inc.head, tip=inc.tip, label=inc.label, conflicts=conflicts,
                             problems=problems, executor=executor)
    finally:
        kept = worktrees.remove(root, wt, None)
    # what the repair role left outside the memory files was moved to .runtime/kept/: say where
    kept_note = [kept.message("the sync repair's worktree")] if kept is not None else []
    repair_info: dict | None = None
    if outcome is not None:
        if outcome.commit is None:
            res = SyncResult("conflict", "; ".join([outcome.message, *kept_note]), conflicts or problems[:20],
                             inc.ahead, inc.behind, inc.head, inc.label, inc.tip, repair=outcome.to_json())
            return _finish(root, res)
        candidate = outcome.commit
        repair_info = outcome.to_json()
    return _publish(root, up, inc.head, candidate, inc.paths, inc.behind, inc.label, repair_info,
                    push_merge=push_merge and inc.ahead > 0, notes=[*notes, *kept_note])


def publish_repaired(root: MemoryRoot, inc: Incoming, commit: str, repair_info: dict) -> SyncResult:
    """Publish a repair made outside a pull (a host's sync-reconciler task) as a pull would:
    under the sync lock, through the supervisor, then push the merge."""
    with sync_lock(root):
        return _publish(root, inc.up, inc.head, commit, inc.paths, inc.behind, inc.label, repair_info,
                        push_merge=inc.ahead > 0)


def _publish(root: MemoryRoot, up: Upstream, head: str, candidate: str, incoming: list[str], behind: int,
             label: str, repair_info: dict | None, *, push_merge: bool, notes: Sequence[str] = ()) -> SyncResult:
    """Land the validated candidate through the supervisor; push it when it is a merge."""
    tip = rev(root.path, up.ref)
    with Supervisor(root) as sup:
        receipt = sup.publish_exact("sync", "sync-reconciler", head, candidate, changed=incoming,
                                    summary=f"pulled {behind} commit(s) from {label}")
    notes = [*notes, *_reconcile_queue(root)]
    res = SyncResult("synced", "; ".join([f"pulled {behind} commit(s) from {label}", *notes]), incoming, 0, 0,
                     receipt.landed_commit, label, tip, receipt=receipt.to_json(), repair=repair_info)
    res = _finish(root, res, last_successful_pull_at=sync_state.now_iso(), last_upstream_commit=tip or candidate)
    if push_merge:  # a merge is a local commit the upstream lacks
        pushed = push_now(root, up)
        res = replace(res, status=pushed.status if pushed.status != "pushed" else "synced")
    return res


def _reconcile_queue(root: MemoryRoot) -> list[str]:
    """After a pull published: the local evidence store shows the shared queue it now holds
    (other machines' candidates imported, evidence landed or withdrawn elsewhere settled), so
    ``evidence list``, ``status``, retrieve's pending evidence and the workbench agree with
    the queue from this moment, not from the next Update. Answers a note of what changed."""
    from rmtui.engine.sync.queue_git import GitQueue

    try:
        done = GitQueue(root).reconcile_local()
    except EngineError as exc:
        return [f"the local evidence queue was not brought up to date: {exc.message}"]
    parts = [f"{len(done.imported)} queued from other machines"] if done.imported else []
    parts += [f"{len(done.consumed)} landed elsewhere"] if done.consumed else []
    return [f"evidence: {', '.join(parts)}"] if parts else []


def push_now(root: MemoryRoot, up: Upstream) -> SyncResult:
    """Push HEAD; on a refusal pull (with repair) and retry once; transport failure is
    ``offline``. The pushed commit is recorded (``last_pushed_commit``): an upstream that no
    longer holds it was rewritten under this machine (:func:`_check_rewrite`)."""
    label = f"{up.remote}/{up.branch}"
    timeout = float(root.config().get("sync.fetch_timeout_seconds"))
    stop = _fetch(root, up, timeout)
    if stop is not None:
        return _finish(root, stop)
    for attempt in (0, 1):
        head = rev(root.path, "HEAD") or ""
        tip = rev(root.path, up.ref)
        if tip:
            _check_rewrite(root, label, tip)
        if tip and is_ancestor(root.path, head, tip):
            return _finish(root, SyncResult("synced", f"nothing to push: {label} has {head[:10]}", head=head,
                                            upstream=label, upstream_commit=tip))
        crashpoint("sync-before-push")
        out = push(root.path, up, head, timeout=timeout)
        if out.ok:
            crashpoint("sync-after-push")
            fetch(root.path, up)
            return _finish(root, SyncResult("pushed", f"pushed {head[:10]} to {label}", head=head, upstream=label,
                                            upstream_commit=head),
                           last_successful_push_at=sync_state.now_iso(), last_pushed_commit=head)
        if out.offline:
            return _finish(root, SyncResult("offline", unreachable(root.path, up.remote, out), head=head,
                                            upstream=label))
        if attempt:
            return _finish(root, SyncResult("error", f"push to {label} refused: {out.message}", head=head,
                                            upstream=label))
        stop = _fetch(root, up, timeout)
        if stop is not None:
            return _finish(root, stop)
        pulled = _pull_fetched(root, up, None, push_merge=False)  # the loop pushes the merge
        if pulled.status not in ("synced", "fresh"):
            return pulled
    raise AssertionError("unreachable")


def push_root(root: MemoryRoot) -> SyncResult:
    """``sync push``: evidence submitted here reaches the shared queue, then local landings
    reach the upstream. On an empty upstream (or a branch with no upstream yet) it first
    pushes the branch, which then tracks it. What it answers says what reached the upstream,
    queue records included."""
    up, off = _configured(root, first_push=True)
    if off is not None:
        return _finish(root, off)
    assert up is not None
    label = f"{up.remote}/{up.branch}"
    with sync_lock(root):
        try:
            from rmtui.engine.sync.queue_git import GitQueue

            stop = _fetch(root, up, float(root.config().get("sync.fetch_timeout_seconds")))
            if stop is not None:
                return _finish(root, stop)
            first = None
            if rev(root.path, up.ref) is None:  # nothing there yet: this push makes the branch
                first = push_now(root, up)
                if first.status != "pushed":
                    return first
                _track(root, up)
                first = replace(first, message=f"{first.message} (a new branch, which {up.branch} now tracks)")
            queue = GitQueue(root)
            published = queue.publish_pending()
            if published:  # the queue pushed its own commits; the root takes them in
                _pull_fetched(root, up, None, push_merge=False)
                queue.reconcile_local()
            res = first or push_now(root, up)
            if not published or res.status not in ("synced", "pushed"):
                return res
            from rmtui.engine.sync.queue_state import candidate_path

            sent = f"published {len(published)} evidence record(s) to {label}"
            message = sent if res.status == "synced" else f"{res.message}; {sent}"
            return _finish(root, replace(res, status="pushed", message=message,
                                         files=[*res.files, *(candidate_path(u) for u in published)]),
                           last_successful_push_at=sync_state.now_iso())
        except SyncRefused as exc:
            return _refusal(root, exc)
        except Offline as exc:
            return _finish(root, SyncResult("offline", exc.message, upstream=label))


def _incoming(root: MemoryRoot, head: str, base: str, tip: str) -> list[str]:
    """Paths the upstream changed since ``base``, once every commit it brings passed the
    incoming rules (:func:`incoming.check_history`)."""
    try:
        with _repo_at(root.path) as repo:
            incoming.check_history(repo, head, tip, incoming.limits_of(root))
    except AdmissionRefused as exc:
        raise SyncRefused.of(exc, "incoming commit") from None
    out = git(root.path, "diff", "--name-only", "--no-renames", "-z", base, tip)
    return [p for p in out.split("\0") if p]


def _check_queue_records(root: MemoryRoot, inc: Incoming) -> list[str]:
    """Validate every queue record and update record the pull brings before anything is
    applied, with the rules of a local write (docs/formats.md, "Queue records: what a machine
    accepts"): the queue at the tip parses strictly, added update records are valid, and no
    candidate or update record changes once written. Refuses by name (file and rule); answers
    notes on what is kept but never used (a replayed candidate, a lease not honoured)."""
    queued = [p for p in inc.paths if is_queue_or_record(p)]
    if not queued:
        return []
    from rmtui.engine.evidence import record_checks
    from rmtui.engine.sync.queue_git import GitQueue
    from rmtui.engine.sync.queue_state import read_paths, snapshot

    queue = GitQueue(root)
    base = git(root.path, "merge-base", inc.head, inc.tip, check=False).strip() or inc.head
    kept = [p for p in queued if p.startswith(("update_records/", "update_queue/candidates/"))]
    try:
        snap = snapshot(root.path, inc.tip, limit=queue.limit, strict=True)
        versions = list(zip(kept, read_paths(root.path, base, kept), read_paths(root.path, inc.tip, kept), strict=True))
        for rel, old, new in versions:  # what was written stays as it was, before anything new is read
            record = rel.startswith("update_records/")
            if old is not None and (new is not None or record) and new != old:
                raise record_checks.RecordRefused(
                    rel, f"{'update_record' if record else 'candidate'}-immutable",
                    "a written record may never change" + (" or be removed" if record else ""))
        for rel, _old, new in versions:
            if rel.startswith("update_records/") and new is not None:
                record_checks.update_record_file(rel, new, limit=queue.limit)
    except record_checks.RecordRefused as exc:
        raise SyncRefused(f"incoming queue record refused: {exc.message}",
                          details={"files": [exc.path], "rule": exc.rule}) from None
    spent = queue.spent(inc.tip)
    notes = [f"ignored replayed candidate {u}: {spent.reason(u)}" for u in sorted(snap.candidates) if u in spent]
    problem = queue.lease_problem(snap, spent, datetime.now(UTC))
    if problem is not None:
        notes.append(f"update_queue/lease.json is not honoured ({problem[0]}: {problem[1]}); "
                     "the next claim takes it over")
    return notes


def _invalid(wt: Path) -> list[str]:
    report = validate_root(wt, enforce_correction_capacity=False)
    return [f"{i.file}:{i.line}: {i.rule}: {i.message}" for i in report.issues if getattr(i, "severity", "error")
            == "error"]


def fresh_worktree(root: MemoryRoot, wt: Path, head: str) -> None:
    if wt.exists():
        worktrees.remove(root, wt, None)
    wt.parent.mkdir(parents=True, exist_ok=True)
    args = ["worktree", "add", "--quiet", "--detach", str(wt), head]
    if crashpoint_in_git("sync-during-worktree-add"):
        _die_adding_worktree(root, wt, args)
    git(root.path, *args)


def _die_adding_worktree(root: MemoryRoot, wt: Path, args: list[str]) -> None:
    """Fault injection: kill ``git worktree add`` once it wrote its admin entry's first (null)
    HEAD, before the checkout, then die: what a kill of a pull's process group there leaves."""
    proc = subprocess.Popen(["git", *args], cwd=root.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    head = root.path / ".git" / "worktrees" / wt.name / "HEAD"
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if len(head.read_text().strip()) >= 40:
                break
        except OSError:
            pass
        time.sleep(0.0002)
    proc.kill()
    proc.wait()
    die("sync-during-worktree-add")


def _identity_env() -> dict:
    return {**os.environ, **IDENTITY}


@contextmanager
def _repo_at(path: Path) -> Iterator[Any]:
    import git as gitpython

    repo = gitpython.Repo(path)
    try:
        yield repo
    finally:
        repo.close()
