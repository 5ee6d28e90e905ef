"""The Git-backed evidence queue (COMPAT §3): several machines share one queue through the
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
import re
import secrets
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.evidence import records
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.sync.paths import is_queue_or_record
from rmtui.engine.sync.remote import Upstream, fetch, git, is_ancestor, rev, upstream_of

QUEUE_DIR = "update_queue"
LEASE = f"{QUEUE_DIR}/lease.json"
ATTEMPTS = 4
HOLDER_ATTEMPTS = 20  # finalize and release: the lease is ours, a lost race is only a publication
RETRY_AFTER = timedelta(hours=1)
MANUAL_AFTER_FAILURES = 2
AUTHOR = {"GIT_AUTHOR_NAME": "RightMemory", "GIT_AUTHOR_EMAIL": "rightmemory@local",
          "GIT_COMMITTER_NAME": "RightMemory", "GIT_COMMITTER_EMAIL": "rightmemory@local"}


def candidate_path(uid: str) -> str:
    return f"{QUEUE_DIR}/candidates/{uid}.json"


def recovery_path(batch_id: str) -> str:
    return f"{QUEUE_DIR}/recovery/{batch_id}.json"


def utc(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat()


@dataclass(frozen=True)
class Lease:
    holder: str
    token: str
    base_commit: str
    batch_id: str
    candidate_uids: tuple[str, ...]
    expires_at: str

    def record(self) -> dict:
        return {"schema_version": records.SCHEMA_VERSION, "holder": self.holder, "token": self.token,
                "base_commit": self.base_commit, "batch_id": self.batch_id,
                "candidate_uids": list(self.candidate_uids), "expires_at": self.expires_at}

    @classmethod
    def parse(cls, data: dict) -> Lease:
        keys = {"schema_version", "holder", "token", "base_commit", "batch_id", "candidate_uids", "expires_at"}
        if not isinstance(data, dict) or set(data) != keys or data["schema_version"] != 1:
            raise UsageError("update_queue/lease.json is not a valid lease record")
        uids = tuple(data["candidate_uids"])
        if not uids or list(uids) != sorted(set(uids)):
            raise UsageError("update_queue/lease.json: candidate_uids must be sorted, unique and non-empty")
        return cls(data["holder"], data["token"], data["base_commit"], data["batch_id"], uids, data["expires_at"])

    def expired(self, now: datetime | None = None) -> bool:
        return datetime.fromisoformat(self.expires_at) <= (now or datetime.now(UTC))


@dataclass
class Snapshot:
    candidates: dict[str, dict]
    lease: Lease | None
    recoveries: dict[str, dict]


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


def _strict_json(text: str, where: str) -> dict:
    def no_dupes(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise UsageError(f"{where}: duplicate JSON field {k}")
            out[k] = v
        return out

    try:
        return json.loads(text, object_pairs_hook=no_dupes,
                          parse_constant=lambda c: (_ for _ in ()).throw(UsageError(f"{where}: {c} not allowed")))
    except ValueError as exc:
        raise UsageError(f"{where}: invalid JSON ({exc})") from None


def _queue_blobs(root: Path, commit: str) -> dict[str, bytes]:
    """Every file under the queue at ``commit``, read in two Git calls (a listing and one
    ``cat-file --batch``) however many records there are."""
    listing = subprocess.run(["git", "ls-tree", "-r", "-z", commit, "--", QUEUE_DIR], cwd=root,
                             capture_output=True, check=True).stdout
    entries: list[tuple[str, str]] = []
    for entry in filter(None, listing.split(b"\0")):
        meta, _, raw = entry.partition(b"\t")
        entries.append((meta.split()[2].decode(), raw.decode("utf-8", "surrogateescape")))
    if not entries:
        return {}
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=root, capture_output=True, check=True,
                         input="".join(f"{sha}\n" for sha, _ in entries).encode()).stdout
    blobs: dict[str, bytes] = {}
    pos = 0
    for _sha, name in entries:
        end = out.index(b"\n", pos)
        size = int(out[pos:end].split()[2])
        blobs[name] = out[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return blobs


CANCELLED = "cancelled (withdrawn from the shared queue)"


_CANCEL_SUBJECT = re.compile(r"^update queue: cancel (?:unpublished )?([0-9a-f]{32})$")


def cancelled_uids(root: Path, commit: str) -> set[str]:
    """Candidate uids withdrawn in ``commit``'s history: the uid is in the subject
    (``update queue: cancel <uid>``, or ``cancel unpublished <uid>``); the original's
    ``RightMemory-Queue-Cancel`` trailer carries a one-off token, not the uid."""
    out = git(root, "log", "--format=%s", "-E", "--grep=^update queue: cancel ", commit)
    return {m.group(1) for line in out.splitlines() if (m := _CANCEL_SUBJECT.match(line.strip()))}


def snapshot(root: Path, commit: str) -> Snapshot:
    """The queue as tracked at ``commit``; a malformed record is an error naming its path."""
    cands: dict[str, dict] = {}
    recoveries: dict[str, dict] = {}
    lease = None
    for name, blob in sorted(_queue_blobs(root, commit).items()):
        if not is_queue_or_record(name):
            raise UsageError(f"{name}: unexpected path in the update queue")
        try:
            text = blob.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"{name}: not UTF-8") from None
        data = _strict_json(text, name)
        if not isinstance(data, dict):
            raise UsageError(f"{name}: not a JSON object")
        if name == LEASE:
            lease = Lease.parse(data)
        elif name.startswith(f"{QUEUE_DIR}/candidates/"):
            if set(data) != records.CANDIDATE_KEYS or f"{data.get('uid')}.json" != name.rsplit("/", 1)[1]:
                raise UsageError(f"{name}: not a candidate record named by its uid")
            cands[data["uid"]] = data
        else:
            recoveries[data.get("batch_id", "")] = data
    return Snapshot(cands, lease, recoveries)


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
        self._git("update-index", "--force-remove", "-z", "--stdin", input="".join(f"{r}\0" for r in rels).encode())

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

    # -- plumbing ------------------------------------------------------------------------
    def _tip(self) -> str:
        got = fetch(self.root.path, self.up, timeout=self.timeout)
        if not got.ok:
            raise ConflictError(f"cannot reach {self.up.remote}: {got.message}",
                                details={"status": "offline" if got.offline else "error"})
        tip = rev(self.root.path, self.up.ref)
        if tip is None:
            raise UsageError(f"{self.up.remote}/{self.up.branch} does not exist yet; push the root first")
        return tip

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
                if not apply(edit, tip, snapshot(self.root.path, tip)):
                    return None
                head = edit.head
            pushed = subprocess.run(
                ["git", "push", "--quiet", f"--force-with-lease=refs/heads/{self.up.branch}:{tip}",
                 self.up.remote, f"{head}:refs/heads/{self.up.branch}"],
                cwd=self.root.path, capture_output=True, text=True, timeout=self.timeout)
            if pushed.returncode == 0:
                return head
        raise QueueRace(f"the update queue on {self.up.remote} kept changing; gave up after {attempts} attempts")

    def adopt(self) -> None:
        """Bring the active root up to the upstream (a validated fast-forward through sync)."""
        from rmtui.engine.sync.pull import pull

        res = pull(self.root, fetch_timeout=self.timeout)
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
            atomic_write_text(outbox / f"{e.uid}.json", records.record_bytes(marker).decode())
        return [e.uid for e in pending]

    def reconcile_local(self, commit: str | None = None) -> dict:
        """Import other machines' candidates as queued evidence; mark evidence consumed that
        was published and is gone from the tracked queue (a finalize landed it somewhere)."""
        commit = commit or rev(self.root.path, "HEAD") or ""
        snap = snapshot(self.root.path, commit)
        marker_dir = self.root.runtime / "async" / "update" / "publication"
        imported, consumed = [], []
        with EvidenceQueue(self.root) as q:
            for uid, c in snap.candidates.items():
                if q.import_candidate(c):
                    imported.append(uid)
            leased = set(snap.lease.candidate_uids) if snap.lease else set()
            gone = [e for e in q.list(state="queued") + q.list(state="claimed")
                    if ((marker_dir / f"{e.uid}.json").exists() or e.origin is not None)
                    and e.uid not in snap.candidates and e.uid not in leased]
            cancelled = cancelled_uids(self.root.path, commit) if gone else set()
            for e in gone:
                if e.uid in cancelled:  # withdrawn by `evidence cancel`, here or on another machine
                    q.reject([e.uid], CANCELLED)
                else:  # a finalize landed it somewhere
                    q.consume([e.uid], None, elsewhere=True)
                    consumed.append(e.uid)
        return {"imported": imported, "consumed": consumed}

    def refresh(self) -> None:
        """Before a turn: publish what is ours, adopt the upstream, import what is theirs."""
        self.publish_pending()
        self.adopt()
        self.reconcile_local()

    def describe_lease(self) -> dict | None:
        """The live lease as an idle turn reports it (the one reader: ``overview.queue_lease``)."""
        from rmtui.engine.sync.overview import queue_lease

        info = queue_lease(self.root)
        if info is None:
            return None
        return {"holder": info.holder, "ours": info.ours, "batch_id": info.batch_id, "expires_at": info.expires_at}

    # -- claim -----------------------------------------------------------------------------
    def claim(self, choose: Callable[[list[str]], tuple[str, list[str]] | None]) -> Lease | None:
        """Claim a batch with a lease, or resume our own; None while another machine's lease
        is live or nothing is ready. ``choose`` picks (batch id, uids) among eligible uids."""
        result: dict = {}

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            lease = snap.lease
            now = datetime.now(UTC)
            if lease is not None and not lease.expired(now):
                result["lease"] = lease if lease.holder == self.device else None
                return False
            if lease is not None:  # expired: take its batch over with a new token
                batch_id, uids = lease.batch_id, list(lease.candidate_uids)
            else:
                due = [r for r in snap.recoveries.values() if not r.get("manual_recovery") and r.get("retry_at")
                       and datetime.fromisoformat(r["retry_at"]) <= now
                       and all(u in snap.candidates for u in r["candidate_uids"])]
                if due:  # a failed batch whose backoff has passed goes first
                    batch_id, uids = due[0]["batch_id"], list(due[0]["candidate_uids"])
                else:
                    # as the original: a session with a failed batch is kept back whole
                    held = {snap.candidates[u]["session_id"] for r in snap.recoveries.values()
                            for u in r.get("candidate_uids", []) if u in snap.candidates}
                    picked = choose(sorted(u for u, c in snap.candidates.items() if c["session_id"] not in held))
                    if picked is None:
                        result["lease"] = None
                        return False
                    batch_id, uids = picked
            new = Lease(self.device, secrets.token_hex(16), tip, batch_id, tuple(sorted(uids)),
                        utc(now + timedelta(seconds=self.lease_seconds)))
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
        return snapshot(self.root.path, self._tip()).lease

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

    def cancel(self, ref: str, session: str | None = None) -> dict:
        """Withdraw one published candidate: ``ref`` is a local display id (an integer that
        must name one candidate) or a uid prefix of 8-32 hex. A candidate in the live lease is
        refused; recoveries holding it are re-keyed (a new batch id over the
        rest, a ``RightMemory-Queue-Supersede`` trailer for each old one). The subject names
        the uid; ``RightMemory-Queue-Cancel`` carries a one-off token (COMPAT §3)."""
        out: dict = {}
        token = uuid.uuid4().hex

        def apply(edit: TreeEdit, tip: str, snap: Snapshot) -> bool:
            uid = self._resolve(ref, snap, session)
            if snap.lease is not None and uid in snap.lease.candidate_uids:
                raise ConflictError(f"candidate {uid} is in batch {snap.lease.batch_id}, leased by "
                                    f"{snap.lease.holder[:8]} until {snap.lease.expires_at}; it cannot be cancelled now")
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
            out.update(uid=uid, superseded=supersede)
            return True

        self.mutate(apply)
        self.adopt()
        with EvidenceQueue(self.root) as q:
            try:
                q.reject([out["uid"]], CANCELLED)
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
