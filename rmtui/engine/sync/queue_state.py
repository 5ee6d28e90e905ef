"""The shared queue as a commit holds it, read as untrusted input (docs/formats.md, "Queue
records: what a machine accepts").

:func:`snapshot` parses every file under ``update_queue/`` with the one record validation
(:mod:`rmtui.engine.evidence.record_checks`). Strict, it refuses the first invalid record by
name (what a pull does before it applies anything); tolerant, it sets invalid records aside
so the queue protocol can quarantine them instead of tripping over them.

:func:`spent_uids` answers which candidate uids can never be claimed again: every uid an
update record on the branch ever named (its evidence landed) and every uid a cancel or a
quarantine withdrew, read from the branch's history, so a fresh clone knows as much as an
old machine. :func:`lease_problem` decides whether a lease is honoured at all.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rmtui.engine.evidence import record_checks as rc
from rmtui.engine.evidence import records
from rmtui.engine.evidence.queue import evidence_limit
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.sync.paths import is_queue_or_record
from rmtui.engine.sync.remote import git, is_ancestor

QUEUE_DIR = "update_queue"
LEASE = f"{QUEUE_DIR}/lease.json"
CANDIDATES = f"{QUEUE_DIR}/candidates/"
RECOVERY = f"{QUEUE_DIR}/recovery/"
#: How far ahead of this machine's clock a lease may expire beyond the configured lease
#: length and still be honoured: machines' clocks may disagree by this much (NTP keeps them
#: within seconds; five minutes covers a laptop waking from sleep). A lease further ahead is
#: treated as expired.
MAX_CLOCK_SKEW = timedelta(minutes=5)


def candidate_path(uid: str) -> str:
    return f"{CANDIDATES}{uid}.json"


def recovery_path(batch_id: str) -> str:
    return f"{RECOVERY}{batch_id}.json"


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
    def parse(cls, data, path: str = LEASE) -> Lease:
        if not isinstance(data, dict):
            raise rc.RecordRefused(path, "record-json", "not a JSON object")
        rc.check_lease(data, path)
        return cls(data["holder"], data["token"], data["base_commit"], data["batch_id"],
                   tuple(data["candidate_uids"]), data["expires_at"])

    def expires(self) -> datetime:
        return datetime.fromisoformat(self.expires_at)

    def expired(self, now: datetime | None = None) -> bool:
        return self.expires() <= (now or datetime.now(UTC))


@dataclass
class Snapshot:
    """Valid records of the queue at one commit; ``invalid`` maps each file set aside to why."""

    candidates: dict[str, dict]
    lease: Lease | None
    recoveries: dict[str, dict]
    invalid: dict[str, rc.RecordRefused] = field(default_factory=dict)

    def without(self, paths: set[str]) -> Snapshot:
        """This snapshot once ``paths`` are removed from the queue."""
        return replace(self, candidates={u: c for u, c in self.candidates.items() if candidate_path(u) not in paths},
                       lease=None if LEASE in paths else self.lease,
                       recoveries={b: r for b, r in self.recoveries.items() if recovery_path(b) not in paths},
                       invalid={p: e for p, e in self.invalid.items() if p not in paths})


def queue_blobs(root: Path, commit: str, prefix: str = QUEUE_DIR) -> dict[str, bytes]:
    """Every file under ``prefix`` at ``commit``, read in two Git calls (a listing and one
    ``cat-file --batch``) however many records there are."""
    listing = subprocess.run(["git", "ls-tree", "-r", "-z", commit, "--", prefix], cwd=root,
                             capture_output=True, check=True).stdout
    entries: list[tuple[str, str]] = []
    for entry in filter(None, listing.split(b"\0")):
        meta, _, raw = entry.partition(b"\t")
        entries.append((meta.split()[2].decode(), raw.decode("utf-8", "surrogateescape")))
    return dict(zip([n for _, n in entries], _cat([s for s, _ in entries], root), strict=True))


def read_paths(root: Path, commit: str, paths: list[str]) -> list[bytes | None]:
    """The bytes of each of ``paths`` at ``commit`` (None where it is absent), in one Git call."""
    present = set(git(root, "ls-tree", "-r", "--name-only", "-z", commit, "--", *paths).split("\0")) if paths else set()
    blobs = _cat([f"{commit}:{p}" for p in paths], root)
    return [b if p in present else None for p, b in zip(paths, blobs, strict=True)]


def _cat(names: list[str], root: Path) -> list[bytes]:
    """The contents of ``names`` (object ids or ``<commit>:<path>``) in one ``cat-file --batch``;
    a missing one reads as empty."""
    if not names:
        return []
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=root, capture_output=True, check=True,
                         input="".join(f"{n}\n" for n in names).encode("utf-8", "surrogateescape")).stdout
    blobs, pos = [], 0
    for _ in names:
        end = out.index(b"\n", pos)
        head = out[pos:end].split()
        if len(head) < 3 or head[-1] == b"missing":
            blobs.append(b"")
            pos = end + 1
            continue
        size = int(head[2])
        blobs.append(out[end + 1:end + 1 + size])
        pos = end + 1 + size + 1
    return blobs


def snapshot(root: Path, commit: str, *, limit: int | None = None, strict: bool = False) -> Snapshot:
    """The queue as tracked at ``commit``. ``strict``: the first invalid record (in path order)
    raises :class:`~rmtui.engine.evidence.record_checks.RecordRefused`; else it is set aside
    in ``invalid``. Recoveries are cross-checked against the candidates (each names present
    candidates under their batch id; a uid in at most one recovery)."""
    snap = Snapshot({}, None, {})
    for name, blob in sorted(queue_blobs(root, commit).items()):
        try:
            if not is_queue_or_record(name):
                raise rc.RecordRefused(name, "queue-path", "not a candidate, recovery or lease path")
            if name == LEASE:
                snap.lease = Lease.parse(rc.load(name, blob))
            elif name.startswith(CANDIDATES):
                data = rc.candidate_file(name, blob, limit=limit if limit is not None else evidence_limit(None))
                snap.candidates[data["uid"]] = data
            else:
                data = rc.recovery_file(name, blob)
                snap.recoveries[data["batch_id"]] = data
        except rc.RecordRefused as exc:
            snap.invalid[name] = exc
    owner: dict[str, str] = {}
    for batch, rec in sorted(snap.recoveries.items()):
        path = recovery_path(batch)
        if not rc.batch_matches(batch, rec["candidate_uids"], snap.candidates):
            snap.invalid[path] = rc.RecordRefused(path, "recovery-batch",
                                                  "names missing candidates or is not their batch id")
        elif any(u in owner for u in rec["candidate_uids"]):
            snap.invalid[path] = rc.RecordRefused(path, "recovery-batch", "shares a candidate with another recovery")
        else:
            owner.update(dict.fromkeys(rec["candidate_uids"], batch))
    snap.recoveries = {b: r for b, r in snap.recoveries.items() if recovery_path(b) not in snap.invalid}
    if strict and snap.invalid:
        raise snap.invalid[min(snap.invalid)]
    return snap


# -- what can never be claimed again ---------------------------------------------------------

_CANCEL_SUBJECT = re.compile(r"^update queue: cancel (?:unpublished )?([0-9a-f]{32})$")
QUARANTINE_TRAILER = "RightMemory-Queue-Quarantine"
_QUARANTINED = re.compile(rf"^{QUARANTINE_TRAILER}: {re.escape(CANDIDATES)}([0-9a-f]{{32}})\.json (\S+)$", re.M)
_SPENT_CACHE = 2  # version of the cache file's layout


@dataclass
class Spent:
    """Candidate uids that are used up: ``landed`` (uid -> the update record naming it) and
    ``withdrawn`` (uid -> why: a cancel, or a quarantine and its rule)."""

    landed: dict[str, str] = field(default_factory=dict)
    withdrawn: dict[str, str] = field(default_factory=dict)

    def reason(self, uid: str) -> str | None:
        if uid in self.landed:
            return f"already landed in {self.landed[uid]}"
        if uid in self.withdrawn:
            return self.withdrawn[uid]
        return None

    def __contains__(self, uid: str) -> bool:
        return uid in self.landed or uid in self.withdrawn


def _scan(root: Path, rng: list[str], into: Spent) -> None:
    """Add what the commits of ``rng`` (``git log`` arguments) spent."""
    added = git(root, "log", "--format=%x00%H", "--diff-filter=A", "--name-only", *rng, "--", "update_records")
    wanted: list[tuple[str, str]] = []
    for chunk in added.split("\0")[1:]:
        sha, *paths = [line for line in chunk.splitlines() if line.strip()]
        wanted.extend((sha, p) for p in paths if p.startswith("update_records/"))
    for (_sha, path), blob in zip(wanted, _cat([f"{s}:{p}" for s, p in wanted], root), strict=True):
        for uid in _named_uids(blob):
            into.landed.setdefault(uid, path)
    log = git(root, "log", "--format=%x00%s%n%b", "-E", "--grep=^update queue: (cancel|quarantine) ", *rng)
    for entry in log.split("\0")[1:]:
        subject, _, body = entry.partition("\n")
        if m := _CANCEL_SUBJECT.match(subject.strip()):
            into.withdrawn.setdefault(m.group(1), "cancelled (withdrawn from the shared queue)")
        for q in _QUARANTINED.finditer(body):
            into.withdrawn.setdefault(q.group(1), f"quarantined by another machine ({q.group(2)})")


def _named_uids(blob: bytes) -> list[str]:
    """Every candidate uid an update record names, read leniently: a file that names a uid
    spends it, however malformed the rest of it is."""
    try:
        data = json.loads(blob.decode("utf-8", "replace"))
        return [c["uid"] for c in data["candidates"] if isinstance(c, dict) and isinstance(c.get("uid"), str)
                and rc.HEX32.fullmatch(c["uid"])]
    except (ValueError, TypeError, KeyError, RecursionError):
        return []


def spent_uids(root: Path, commit: str, cache: Path | None = None) -> Spent:
    """The uids ``commit``'s history has spent. With ``cache`` (a file under ``.runtime``), a
    later call reads only the commits since the last one (history only grows: a rewritten
    upstream is refused by the pull)."""
    known = Spent()
    since = None
    if cache is not None:
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if data.get("version") == _SPENT_CACHE and isinstance(data.get("commit"), str):
                since = data["commit"]
                known = Spent(dict(data["landed"]), dict(data["withdrawn"]))
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            since = None
    if since == commit:
        return known
    if since and is_ancestor(root, commit, since):
        return known  # what a later commit spent includes all of this one's
    if since and is_ancestor(root, since, commit):
        _scan(root, [f"{since}..{commit}"], known)
    else:
        known = Spent()
        _scan(root, [commit], known)
    if cache is not None:
        try:
            atomic_write_text(cache, json.dumps({"version": _SPENT_CACHE, "commit": commit, "landed": known.landed,
                                                 "withdrawn": known.withdrawn}, sort_keys=True) + "\n")
        except OSError:
            pass  # only a cache
    return known


# -- whether a lease is honoured ---------------------------------------------------------------

def lease_problem(lease: Lease, snap: Snapshot, spent: Spent, *, now: datetime, lease_seconds: float,
                  device: str | None = None, issued: set[str] | None = None) -> tuple[str, str] | None:
    """Why ``lease`` must not be honoured, as (rule, reason), or None when it is. Honoured:
    it names a batch whose candidates are all in the queue and none spent, under that batch's
    id, consistent with the recoveries, expiring within ``lease_seconds`` plus
    :data:`MAX_CLOCK_SKEW` of ``now``; and one naming this ``device`` carries a token this
    machine issued."""
    uids = list(lease.candidate_uids)
    missing = [u for u in uids if u not in snap.candidates]
    if missing:
        return "lease-batch", f"names {len(missing)} candidate(s) not in the queue ({missing[0]})"
    used = [u for u in uids if u in spent]
    if used:
        return "lease-batch", f"names spent evidence: {used[0]} {spent.reason(used[0])}"
    if not rc.batch_matches(lease.batch_id, uids, snap.candidates):
        return "lease-batch_id", "is not the batch id of its candidates"
    own = snap.recoveries.get(lease.batch_id)
    if own is not None and own["candidate_uids"] != uids:
        return "lease-recovery", "differs from its batch's recovery record"
    others = {b for b, r in snap.recoveries.items() if b != lease.batch_id and set(r["candidate_uids"]) & set(uids)}
    if others:
        return "lease-recovery", f"overlaps recovery {min(others)}"
    bound = now + timedelta(seconds=lease_seconds) + MAX_CLOCK_SKEW
    if lease.expires() > bound:
        return "lease-expires_at", (f"expires {lease.expires_at}, beyond the lease length ({lease_seconds:g} s) "
                                    f"plus {int(MAX_CLOCK_SKEW.total_seconds())} s of clock skew")
    if device is not None and lease.holder == device and lease.token not in (issued or set()):
        return "lease-token", "names this machine with a token it never issued"
    return None


