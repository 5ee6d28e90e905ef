"""The Git-backed evidence queue (docs/formats.md, "Evidence queue"): several machines share one queue through the
upstream, and a lease committed with compare-and-swap makes exactly one of them reconcile
each batch.

Every mutation fetches, builds its commits on the fetched tip in a private index (author
``RightMemory <rightmemory@local>``; nothing is checked out) and pushes with
``--force-with-lease`` on that tip; a lost race is retried from a fresh fetch. Candidate,
lease and recovery files are the original's records byte for byte. Evidence stays in the
local store too: candidates of other machines are imported as queued evidence, and
evidence a finalize consumed anywhere is marked consumed here.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.evidence import record_checks as rc
from rmtui.engine.evidence import records
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.sync import state as sync_state
from rmtui.engine.sync.paths import is_queue_or_record
from rmtui.engine.sync.queue_state import (
    LEASE,
    QUARANTINE_TRAILER,
    Lease,
    Snapshot,
    Spent,
    candidate_path,
    lease_problem,
    recovery_path,
    snapshot,
    spent_uids,
)
from rmtui.engine.sync.remote import Offline, Upstream, fetch, git, is_ancestor, rev, unreachable, upstream_of
from rmtui.engine.writes.faults import crashpoint

#: How the queue brings the active root up to the upstream after changing the queue: sync's
#: validated pull (``sync.pull.pull``). The pull checks what it brings with this queue, so this
#: module cannot import it; the ``rmtui.engine.sync`` package sets it, and Python runs the
#: package before any of its modules, so it is set before a queue exists.
PULL: Callable[..., Any] | None = None

__all__ = ["CANCELLED", "GitQueue", "Lease", "LeaseInfo", "QueueRace", "Snapshot", "device_id", "queue_lease",
           "snapshot", "stored_device_id"]

ATTEMPTS = 4
HOLDER_ATTEMPTS = 20  # finalize and release: the lease is ours, a lost race is only a publication
RETRY_AFTER = timedelta(hours=1)
MANUAL_AFTER_FAILURES = 2
AUTHOR = {"GIT_AUTHOR_NAME": "RightMemory", "GIT_AUTHOR_EMAIL": "rightmemory@local",
          "GIT_COMMITTER_NAME": "RightMemory", "GIT_COMMITTER_EMAIL": "rightmemory@local"}
#: How many lease tokens this machine remembers having issued (a lease naming this machine
#: with any other token is forged).
ISSUED_TOKENS = 256


def utc(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat()


def stored_device_id(root: MemoryRoot) -> str | None:
    """This machine's lease identity if it has one yet; reads only (a display never makes one)."""
    try:
        value = json.loads((root.runtime / "update_queue" / "device.json").read_text())["device_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, str) and len(value) == 32 else None


def device_id(root: MemoryRoot) -> str:
    """This machine's identity in leases (``.runtime/update_queue/device.json``)."""
    path = root.ensure_runtime() / "update_queue" / "device.json"
    value = stored_device_id(root)
    if value is not None:
        return value
    value = uuid.uuid4().hex
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"device_id": value}, indent=2, sort_keys=True) + "\n")
    return value


CANCELLED = "cancelled (withdrawn from the shared queue)"


class TreeEdit:
    """Commits on top of ``tip`` built in a private index file: blobs in, trees and commits
    out, nothing checked out and the root's own index untouched."""

    def __init__(self, root: MemoryRoot, tip: str) -> None:
        self.path = root.path
        self.index = root.ensure_runtime() / f"queue-{uuid.uuid4().hex}.index"
        self.head = tip
        self.env = {**os.environ, **AUTHOR, "GIT_INDEX_FILE": str(self.index)}

    def __enter__(self) -> TreeEdit:
        self._git("read-tree", self.head)
        return self

    def __exit__(self, *exc) -> None:
        self.index.unlink(missing_ok=True)
        Path(str(self.index) + ".lock").unlink(missing_ok=True)

    def _git(self, *args: str, input: bytes | None = None, env: dict | None = None) -> str:
        proc = subprocess.run(["git", *args], cwd=self.path, input=input, capture_output=True,
                              env=env or self.env, check=True)
        return proc.stdout.decode().strip()

    def write(self, rel: str, data: bytes) -> None:
        blob = self._git("hash-object", "-w", "--stdin", input=data)
        self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}")

    def remove(self, *rels: str) -> None:
        """Drop ``rels`` from the index in one Git call (absent ones are no-ops)."""
        self._git("update-index", "--force-remove", "-z", "--stdin",
                  input="".join(f"{r}\0" for r in rels).encode("utf-8", "surrogateescape"))

    def copy_from(self, commit: str, rel: str) -> None:
        """``rel`` as it is in ``commit`` (removed if it is not there)."""
        entry = self._git("ls-tree", commit, "--", rel)
        if not entry:
            self.remove(rel)
            return
        mode, _kind, rest = entry.split(" ", 2)
        blob = rest.split("\t", 1)[0]
        self._git("update-index", "--add", "--cacheinfo", f"{mode},{blob},{rel}")

    def commit(self, message: str, *, author_of: str | None = None) -> str:
        tree = self._git("write-tree")
        env = dict(self.env)
        if author_of:  # a cherry-pick keeps its author and date
            name, email, date = self._git("log", "-1", "--format=%an%x00%ae%x00%aI", author_of).split("\0")
            env.update({"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date})
        self.head = self._git("commit-tree", tree, "-p", self.head, input=message.encode(), env=env)
        return self.head


def _one_line(path: str) -> str:
    """A path as one printable token in a trailer (a forged name cannot add trailer lines)."""
    return path.encode("unicode_escape").decode("ascii").replace(" ", "\\x20")


@dataclass(frozen=True)
class Reconciled:
    """What :meth:`GitQueue.reconcile_local` did: the uids imported as queued evidence, those
    marked consumed (landed elsewhere), and replays dropped (uid -> why)."""

    imported: list[str]
    consumed: list[str]
    dropped: dict[str, str]


@dataclass(frozen=True)
class Cancelled:
    """A candidate withdrawn from the shared queue, and the recovery records re-keyed without it."""

    uid: str
    superseded: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"uid": self.uid, "superseded": self.superseded}


class QueueRace(ConflictError):
    """Another machine changed the queue first; the mutation was retried and gave up."""


class GitQueue:
    """The queue protocol of one root against its upstream."""

    def __init__(self, root: MemoryRoot, *, lease_seconds: float | None = None) -> None:
        self.root = root
        up = upstream_of(root.path)
        if up is None:
            raise UsageError("the Git-backed queue needs a branch with an upstream")
        self.up: Upstream = up
        self.device = device_id(root)
        cfg = root.config()
        self.lease_seconds = lease_seconds or float(cfg.get("sync.lease_seconds"))
        self.timeout = float(cfg.get("sync.fetch_timeout_seconds"))
        self.limit = cfg.get("update.max_evidence_bytes")
        #: what the last refresh or claim set aside or dropped, one line each (rule and file)
        self.notes: list[str] = []

    # -- plumbing ------------------------------------------------------------------------
    def _tip(self) -> str:
        got = fetch(self.root.path, self.up, timeout=self.timeout)
        if not got.ok and not got.missing:
            if got.offline:
                raise Offline(unreachable(self.root.path, self.up.remote, got), details={"status": "offline"})
            raise ConflictError(f"fetch from {self.up.remote}: {got.message}", details={"status": "error"})
        tip = rev(self.root.path, self.up.ref) if got.ok else None
        if tip is None:
            raise UsageError(f"{self.up.remote}/{self.up.branch} does not exist; run `rmtui --headless sync push` "
                             "to push this root there first")
        return tip

    def snapshot(self, commit: str) -> Snapshot:
        """The queue at ``commit`` with this root's evidence limit; invalid records set aside."""
        return snapshot(self.root.path, commit, limit=self.limit)

    def spent(self, commit: str) -> Spent:
        """Uids ``commit``'s history landed or withdrew (cached in ``.runtime/update_queue``)."""
        return spent_uids(self.root.path, commit, self.root.ensure_runtime() / "update_queue" / "spent.json")

    def mutate(self, apply: Callable[[TreeEdit, str, Snapshot], bool], done: Callable[[str], bool] | None = None,
               *, attempts: int = ATTEMPTS) -> str | None:
        """Fetch, let ``apply`` build commits on the tip in a scratch index (no checkout: the
        queue's files are a few small records), push them with compare-and-swap on the tip;
        a lost race starts over from a fresh fetch."""
        for attempt in range(attempts):
            if attempt:  # another machine won the race: back off a little, with jitter
                time.sleep(random.uniform(0.05, 0.25) * attempt)
            tip = self._tip()
            if done is not None and done(tip):
                return tip
            with TreeEdit(self.root, tip) as edit:
                if not apply(edit, tip, self.snapshot(tip)):
                    return None
                head = edit.head
            crashpoint("queue-before-push")
            pushed = subprocess.run(
                ["git", "push", "--quiet", f"--force-with-lease=refs/heads/{self.up.branch}:{tip}",
                 self.up.remote, f"{head}:refs/heads/{self.up.branch}"],
                cwd=self.root.path, capture_output=True, text=True, timeout=self.timeout)
            if pushed.returncode == 0:
                sync_state.note_pushed(self.root, head)
                crashpoint("queue-after-push")
                return head
        raise QueueRace(f"the update queue on {self.up.remote} kept changing; gave up after {attempts} attempts")

    def adopt(self) -> None:
        """Bring the active root up to the upstream (a validated fast-forward through sync)."""
        assert PULL is not None, "rmtui.engine.sync sets queue_git.PULL when it is imported"
        res = PULL(self.root, fetch_timeout=self.timeout)
        if res.status not in ("synced", "fresh"):
            raise ConflictError(f"sync pull after a queue change: {res.status}: {res.message}")

    # -- publish -------------------------------------------------------------------------
    def publish_pending(self) -> list[str]:
        """Publish queued local evidence the upstream has never seen, each as its own commit
        ``update queue: publish <uid>``; a publication marker makes it online-only."""
        outbox = self.root.runtime / "async" / "update" / "publication"
        with EvidenceQueue(self.root) as q:
            pending = [e for e in q.list(state="queued")
                       if e.origin is None and not (outbox / f"{e.uid}.json").exists()]  # ours, never published
        for e in list(pending):  # what another machine's pull would refuse is never published
            try:
                rc.check_candidate(e.candidate(), candidate_path(e.uid), limit=self.limit)
            except rc.RecordRefused as exc:
                pending.remove(e)
                self.notes.append(f"not published: {exc.message}")
        if not pending:
            return []

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            made = False
            for e in pending:
                rel = candidate_path(e.uid)
                data = records.record_bytes(e.candidate())
                if e.uid in snap.candidates:
                    if records.record_bytes(snap.candidates[e.uid]) != data:
                        raise ConflictError(f"{rel} upstream differs from the local candidate")
                    continue
                edit.write(rel, data)
                edit.commit(f"update queue: publish {e.uid}")
                made = True
            return made

        try:
            self.mutate(apply)
        except QueueRace:
            return []  # still local and unmarked: the next push or turn publishes it
        outbox.mkdir(parents=True, exist_ok=True)
        now = utc(datetime.now(UTC))
        for e in pending:
            marker = {"schema_version": 1, "candidate_uid": e.uid, "attempt_id": uuid.uuid4().hex,
                      "attempted_at": now, "candidate_sha256": records.candidate_sha256(e.candidate()),
                      "proposed_commit": None}
            rc.check_marker(marker, f"{outbox}/{e.uid}.json")
            atomic_write_text(outbox / f"{e.uid}.json", records.record_bytes(marker).decode())
        return [e.uid for e in pending]

    def reconcile_local(self, commit: str | None = None) -> Reconciled:
        """Import other machines' candidates as queued evidence (never a spent uid: one an
        update record or a cancel already named); mark evidence consumed that was published
        and is gone from the tracked queue (a finalize landed it somewhere)."""
        commit = commit or rev(self.root.path, "HEAD") or ""
        snap = self.snapshot(commit)
        spent = self.spent(commit)
        marker_dir = self.root.runtime / "async" / "update" / "publication"
        imported: list[str] = []
        consumed: list[str] = []
        dropped: dict[str, str] = {}
        with EvidenceQueue(self.root) as q:
            for uid, c in snap.candidates.items():
                why = spent.reason(uid)
                if why is not None:  # a replay: its evidence landed or was withdrawn already
                    dropped[uid] = why
                elif q.import_candidate(c):
                    imported.append(uid)
            leased = set(snap.lease.candidate_uids) if snap.lease else set()
            gone = [e for e in q.list(state="queued") + q.list(state="claimed")
                    if ((marker_dir / f"{e.uid}.json").exists() or e.origin is not None)
                    and (e.uid not in snap.candidates or e.uid in spent) and e.uid not in leased - set(spent.landed)]
            for e in gone:
                if e.uid in spent.withdrawn and e.uid not in spent.landed:  # cancelled or quarantined anywhere
                    if e.state == "queued":
                        q.reject([e.uid], spent.withdrawn[e.uid])
                else:  # a finalize landed it somewhere
                    q.consume([e.uid], None, elsewhere=True)
                    consumed.append(e.uid)
        return Reconciled(imported, consumed, dropped)

    def refresh(self) -> None:
        """Before a turn: publish what is ours, set aside what no machine may use (see
        :meth:`heal`), adopt the upstream, import what is theirs."""
        self.notes = []
        self.publish_pending()
        self.heal()
        self.adopt()
        self.reconcile_local()

    def describe_lease(self) -> dict | None:
        """The live lease as an idle turn reports it (the one reader: :func:`queue_lease`)."""
        info = queue_lease(self.root)
        if info is None:
            return None
        return {"holder": info.holder, "ours": info.ours, "batch_id": info.batch_id, "expires_at": info.expires_at}

    # -- what no machine may use -----------------------------------------------------------
    def _issued(self) -> list[str]:
        try:
            data = json.loads((self.root.runtime / "update_queue" / "tokens.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [t for t in data if isinstance(t, str)] if isinstance(data, list) else []

    def _issue(self, token: str) -> None:
        """Remember a lease token before it is pushed: a lease naming this machine is resumed
        only with a token it issued."""
        kept = ([*self._issued(), token])[-ISSUED_TOKENS:]
        atomic_write_text(self.root.ensure_runtime() / "update_queue" / "tokens.json", json.dumps(kept) + "\n")

    def lease_problem(self, snap: Snapshot, spent: Spent, now: datetime) -> tuple[str, str] | None:
        if snap.lease is None:
            return None
        return lease_problem(snap.lease, snap, spent, now=now, lease_seconds=self.lease_seconds,
                             device=self.device, issued=set(self._issued()))

    def _set_aside(self, edit: TreeEdit, snap: Snapshot, spent: Spent, now: datetime) -> Snapshot:
        """Commit on ``edit`` what makes the queue usable again, and answer the snapshot after:
        invalid records are quarantined (removed, each named with its rule in a
        ``RightMemory-Queue-Quarantine`` trailer; Git history keeps their bytes); candidates
        whose uid is spent are dropped as replays; a lease that is not honoured is removed and,
        when it names a real batch, that batch gets a recovery record due now, so any machine
        takes it over."""
        notes = self.notes
        if snap.invalid:
            edit.remove(*snap.invalid)
            lines = "".join(f"{QUARANTINE_TRAILER}: {_one_line(p)} {e.rule}\n" for p, e in sorted(snap.invalid.items()))
            edit.commit(f"update queue: quarantine invalid records\n\n{lines}")
            notes += [f"quarantined {e.message}" for _p, e in sorted(snap.invalid.items())]
            snap = snap.without(set(snap.invalid))
        replayed = sorted(u for u in snap.candidates if u in spent)
        if replayed:
            gone = {candidate_path(u) for u in replayed}
            gone |= {recovery_path(b) for b, r in snap.recoveries.items() if set(r["candidate_uids"]) & set(replayed)}
            edit.remove(*gone)
            edit.commit("update queue: drop replayed candidates\n\n"
                        + "".join(f"RightMemory-Queue-Replayed: {u}\n" for u in replayed))
            notes += [f"dropped replayed candidate {candidate_path(u)}: {spent.reason(u)}" for u in replayed]
            snap = snap.without(gone)
        problem = self.lease_problem(snap, spent, now)
        if problem is not None:
            assert snap.lease is not None
            lease, (rule, why) = snap.lease, problem
            edit.remove(LEASE)
            if rule in ("lease-expires_at", "lease-token"):  # a real batch under a forged lease: due now
                old = snap.recoveries.get(lease.batch_id, {})
                rec = {"schema_version": 1, "batch_id": lease.batch_id, "candidate_uids": list(lease.candidate_uids),
                       "attempts": int(old.get("attempts", 0)), "reason_code": "invalid_lease",
                       "retry_at": utc(now), "manual_recovery": False}
                edit.write(recovery_path(lease.batch_id), records.record_bytes(rec))
                snap.recoveries = {**snap.recoveries, lease.batch_id: rec}
            edit.commit(f"update queue: recover invalid lease {lease.batch_id}\n\n"
                        f"RightMemory-Queue-Lease-Refused: {rule}\n")
            notes.append(f"{LEASE}: {rule}: {why}; treated as expired")
            snap = snap.without({LEASE})
        return snap

    def heal(self) -> list[str]:
        """Quarantine invalid records, drop replays and take over a lease that is not honoured,
        in one push; answers what was set aside (also in :attr:`notes`). A pull refuses an
        upstream with an invalid record; this is how the queue becomes pullable again."""
        earlier = list(self.notes)

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            self.notes = list(earlier)
            self._set_aside(edit, snap, self.spent(tip), datetime.now(UTC))
            return edit.head != tip

        try:
            self.mutate(apply)
        except QueueRace:
            pass  # another machine is changing the queue (perhaps healing it): the claim checks again
        return self.notes[len(earlier):]

    # -- claim -----------------------------------------------------------------------------
    def claim(self, choose: Callable[[list[str]], tuple[str, list[str]] | None]) -> Lease | None:
        """Claim a batch with a lease, or resume our own; None while another machine's
        honoured lease is live or nothing is ready. ``choose`` picks (batch id, uids) among
        eligible uids. A lease that is not honoured never stalls the claim and is never
        resumed: it is set aside first (:meth:`_set_aside`)."""
        result: dict = {}
        with EvidenceQueue(self.root) as q:  # evidence this machine can no longer put in a batch
            blocked = {e.uid for state in ("consumed", "rejected") for e in q.list(state=state)}
        earlier = list(self.notes)

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            now = datetime.now(UTC)
            spent = self.spent(tip)
            self.notes = list(earlier)
            snap = self._set_aside(edit, snap, spent, now)
            lease = snap.lease
            if lease is not None and not lease.expired(now):
                result["lease"] = lease if lease.holder == self.device else None
                return edit.head != tip
            usable = [u for u in snap.candidates if u not in spent and u not in blocked]
            if lease is not None and set(lease.candidate_uids) <= set(usable):
                batch_id, uids = lease.batch_id, list(lease.candidate_uids)  # expired: take it over
            else:
                due = [r for r in snap.recoveries.values() if not r["manual_recovery"]
                       and datetime.fromisoformat(r["retry_at"]) <= now and set(r["candidate_uids"]) <= set(usable)]
                if due:  # a failed batch whose backoff has passed goes first
                    batch_id, uids = due[0]["batch_id"], list(due[0]["candidate_uids"])
                else:
                    # as the original: a session with a failed batch is kept back whole
                    held = {u for r in snap.recoveries.values() for u in r["candidate_uids"]}
                    held_sessions = {snap.candidates[u]["session_id"] for u in held if u in snap.candidates}
                    held |= set(lease.candidate_uids) if lease is not None else set()
                    picked = choose(sorted(u for u in usable if u not in held
                                           and snap.candidates.get(u, {}).get("session_id") not in held_sessions))
                    if picked is None:
                        result["lease"] = None
                        return edit.head != tip
                    batch_id, uids = picked
            new = Lease(self.device, secrets.token_hex(16), tip, batch_id, tuple(sorted(uids)),
                        utc(now + timedelta(seconds=self.lease_seconds)))
            self._issue(new.token)
            edit.write(LEASE, records.record_bytes(new.record()))
            edit.commit(f"update queue: claim {batch_id}")
            result["lease"] = new
            return True

        try:
            self.mutate(apply)
        except QueueRace:
            return None  # busy: someone else is changing the queue; a later turn claims
        lease = result.get("lease")
        if lease is not None:
            self.adopt()
        return lease

    def current_lease(self) -> Lease | None:
        return self.snapshot(self._tip()).lease

    # -- finalize / release ------------------------------------------------------------
    def finalize(self, lease: Lease, base: str, prepared: str) -> str:
        """Land the prepared Update commit on the upstream, once: only under our unchanged
        lease and an unchanged semantic base; then drop its candidates and the lease."""
        landed: dict = {}

        def done(tip: str) -> bool:
            out = git(self.root.path, "log", "--format=%H%x00%B%x1e", f"{lease.base_commit}..{tip}", check=False)
            for entry in out.split("\x1e"):
                sha, _, body = entry.strip().partition("\x00")
                if f"RightMemory-Queue-Token: {lease.token}" in body:
                    landed["commit"] = git(self.root.path, "rev-parse", f"{sha}~1").strip()
                    return True
            return False

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            if snap.lease != lease:
                raise ConflictError(f"the lease of {lease.batch_id} changed upstream (taken over after expiry?); "
                                    "this machine's work is not landed")
            if not (is_ancestor(self.root.path, base, tip)):
                raise ConflictError(f"the base {base[:10]} is no longer in {self.up.remote}/{self.up.branch}")
            moved = [p for p in git(self.root.path, "diff", "--name-only", "-z", base, tip).split("\0")
                     if p and not is_queue_or_record(p)]
            if moved:
                raise ConflictError(f"memory changed upstream since the batch began: {', '.join(moved[:5])}",
                                    details={"stale": True})
            # upstream moved only on queue paths since the base: the prepared change applies as is
            changed = [p for p in git(self.root.path, "diff", "--name-only", "-z", base, prepared).split("\0") if p]
            for rel in changed:
                edit.copy_from(prepared, rel)
            landed["commit"] = edit.commit(git(self.root.path, "log", "-1", "--format=%B", prepared).rstrip() + "\n",
                                           author_of=prepared)
            edit.remove(*(candidate_path(uid) for uid in lease.candidate_uids), recovery_path(lease.batch_id), LEASE)
            edit.commit(f"update queue: finalize {lease.batch_id}\n\nRightMemory-Queue-Batch: "
                        f"{lease.batch_id}\nRightMemory-Queue-Token: {lease.token}\n")
            return True

        # we hold the lease: only other machines' publications race us, so keep trying
        self.mutate(apply, done, attempts=HOLDER_ATTEMPTS)
        self.adopt()
        self.reconcile_local()
        return landed["commit"]

    # -- retry and cancel ------------------------------------------------------------------
    def retry(self, batch_id: str | None = None) -> list[str]:
        """Every manual recovery (or the one named) becomes due now: attempts 0, reason
        ``manual_retry``; one commit ``update queue: retry blocked batches`` with a
        ``RightMemory-Queue-Retry`` token, as the original writes it."""
        retried: list[str] = []
        token = uuid.uuid4().hex

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            retried.clear()
            chosen = [r for b, r in sorted(snap.recoveries.items())
                      if (b == batch_id if batch_id else r.get("manual_recovery"))]
            if batch_id and not chosen:
                raise UsageError(f"no recovery for batch {batch_id!r} in the shared queue")
            for rec in chosen:
                rec = {**rec, "attempts": 0, "reason_code": "manual_retry", "retry_at": utc(datetime.now(UTC)),
                       "manual_recovery": False}
                edit.write(recovery_path(rec["batch_id"]), records.record_bytes(rec))
                retried.append(rec["batch_id"])
            if chosen:
                edit.commit(f"update queue: retry blocked batches\n\nRightMemory-Queue-Retry: {token}\n")
            return bool(chosen)

        if self.mutate(apply) is not None:
            self.adopt()
        return retried

    def cancel(self, ref: str, session: str | None = None) -> Cancelled:
        """Withdraw one published candidate: ``ref`` is a local display id (an integer that
        must name one candidate) or a uid prefix of 8-32 hex. A candidate in the live lease is
        refused; recoveries holding it are re-keyed (a new batch id over the
        rest, a ``RightMemory-Queue-Supersede`` trailer for each old one). The subject names
        the uid; ``RightMemory-Queue-Cancel`` carries a one-off token (docs/formats.md, "Evidence queue")."""
        done: list[Cancelled] = []
        token = uuid.uuid4().hex

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            uid = self._resolve(ref, snap, session)
            if snap.lease is not None and uid in snap.lease.candidate_uids:
                raise ConflictError(f"candidate {uid} is in batch {snap.lease.batch_id}, leased by "
                                    f"{snap.lease.holder[:8]} until {snap.lease.expires_at}; "
                                    "it cannot be cancelled now")
            supersede: list[str] = []
            for old_id, rec in sorted(snap.recoveries.items()):
                if uid not in rec.get("candidate_uids", []):
                    continue
                edit.remove(recovery_path(old_id))
                rest = [u for u in rec["candidate_uids"] if u != uid]
                if rest:
                    new_id = records.batch_id(snap.candidates[u] for u in rest if u in snap.candidates)
                    edit.write(recovery_path(new_id), records.record_bytes({**rec, "batch_id": new_id,
                                                                           "candidate_uids": sorted(rest)}))
                supersede.append(old_id)
            edit.remove(candidate_path(uid))
            trailers = f"RightMemory-Queue-Cancel: {token}\n" + "".join(
                f"RightMemory-Queue-Supersede: {b}\n" for b in sorted(supersede))
            edit.commit(f"update queue: cancel {uid}\n\n{trailers}")
            done[:] = [Cancelled(uid, supersede)]  # a retried mutation answers its last attempt
            return True

        self.mutate(apply)
        self.adopt()
        out = done[-1]
        with EvidenceQueue(self.root) as q:
            try:
                q.reject([out.uid], CANCELLED)
            except (UsageError, ConflictError):
                pass  # not in this machine's store, or already settled here
        return out

    def _resolve(self, ref: str, snap: Snapshot, session: str | None) -> str:
        with EvidenceQueue(self.root) as q:  # other machines' candidates are imported there too
            uid = q.resolve(ref, session)
        if uid not in snap.candidates:
            raise UsageError(f"evidence {uid} is not a candidate in the shared queue (never published, "
                             "already landed, or cancelled)")
        return uid

    def release(self, lease: Lease, reason_code: str) -> dict | None:
        """A failed batch: record a recovery (attempts, backoff; manual after two failures)
        and drop our lease, so the batch is retried later, here or elsewhere."""
        out: dict = {}

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            if snap.lease is None or snap.lease.token != lease.token:
                return False  # not ours any more: nothing to release
            old = snap.recoveries.get(lease.batch_id, {})
            attempts = int(old.get("attempts", 0)) + 1
            manual = attempts >= MANUAL_AFTER_FAILURES
            rec = {"schema_version": 1, "batch_id": lease.batch_id, "candidate_uids": list(lease.candidate_uids),
                   "attempts": attempts, "reason_code": reason_code,
                   "retry_at": None if manual else utc(datetime.now(UTC) + RETRY_AFTER), "manual_recovery": manual}
            edit.write(recovery_path(lease.batch_id), records.record_bytes(rec))
            edit.remove(LEASE)
            edit.commit(f"update queue: release {lease.batch_id}")
            out.update(rec)
            return True

        self.mutate(apply, attempts=HOLDER_ATTEMPTS)
        self.adopt()
        return out or None


@dataclass
class LeaseInfo:
    """The shared queue's lease: which machine reconciles which batch, until when."""

    holder: str  # the holder's device id (``.runtime/update_queue/device.json`` on that machine)
    ours: bool
    batch_id: str
    candidate_uids: list[str]
    expires_at: str
    expired: bool


def queue_lease(root: MemoryRoot, *, now: datetime | None = None) -> LeaseInfo | None:
    """The lease as the upstream last showed it (the fetched upstream ref, else HEAD); None
    when sync is off, there is no upstream, or no batch is leased."""
    if not root.config().get("sync.enabled"):
        return None
    up = upstream_of(root.path)
    if up is None:
        return None
    commit = rev(root.path, up.ref) or rev(root.path, "HEAD")
    if commit is None:
        return None
    snap = snapshot(root.path, commit)
    if LEASE in snap.invalid:  # a malformed lease is shown as a problem; the next claim replaces it
        raise snap.invalid[LEASE]
    lease = snap.lease
    if lease is None:
        return None
    return LeaseInfo(lease.holder, lease.holder == stored_device_id(root), lease.batch_id,
                     list(lease.candidate_uids), lease.expires_at, lease.expired(now or datetime.now(UTC)))
