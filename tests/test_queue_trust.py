"""Queue records from another machine are untrusted input: a hostile peer (plain Git, see
``hostile_peer.py``) pushes malformed, replayed and forged records straight into the upstream,
and honest machines refuse each by name, never land evidence twice, and never stall or claim
on a forged lease (docs/formats.md, "Queue records: what a machine accepts")."""

from __future__ import annotations

import json
import subprocess
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import hostile_peer as hp
import pytest
from fake_provider import FakeProvider, Turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sync import git
from test_sync import snapshot as root_files
from test_sync_queue import machine, submit

from rmtui.engine import sync
from rmtui.engine.evidence import record_checks as rc
from rmtui.engine.evidence import records
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.host import assistant
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.roles.update_driver import UpdateDriver
from rmtui.engine.sync.queue_git import GitQueue, device_id, snapshot
from rmtui.engine.sync.queue_state import MAX_CLOCK_SKEW, Lease, Snapshot, Spent, lease_problem


@pytest.fixture
def upstream(tmp_path) -> Path:
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    return bare


@pytest.fixture
def two(tmp_path, upstream):
    return machine(tmp_path, upstream, "a", first=True), machine(tmp_path, upstream, "b")


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def use_model(root, provider) -> None:
    set_config_value(root.path, "update.model.model_id", "anthropic:fake-model")
    set_config_value(root.path, "update.model.api_base", provider.base("anthropic"))


def uid() -> str:
    return uuid.uuid4().hex


def upstream_files(upstream: Path, prefix: str) -> list[str]:
    return [p for p in git(upstream, "ls-tree", "-r", "--name-only", "main", "--", prefix).splitlines() if p]


def landed(upstream: Path) -> list[str]:
    """Every candidate uid any update record ever added upstream named (with repeats)."""
    out: list[str] = []
    log = git(upstream, "log", "--format=%x00%H", "--diff-filter=A", "--name-only", "main", "--", "update_records")
    for chunk in log.split("\0")[1:]:
        sha, *paths = [line for line in chunk.splitlines() if line.strip()]
        for rel in paths:
            out += [c["uid"] for c in json.loads(hp.show(upstream, sha, rel))["candidates"]]
    return out


# -- defect class 1: every record a pull brings is validated like a local write ----------------

BIG = "x" * 70_000 + "\n"  # over the default update.max_evidence_bytes (65536)
BAD_RECORDS = {
    "submitted_at-not-canonical": ("candidate", {"submitted_at": "2026-07-27 12:00:00"}, "candidate-submitted_at"),
    "message-not-text": ("candidate", {"message": 42}, "candidate-message"),
    "message-over-limit": ("candidate", {"message": BIG}, "candidate-message"),
    "message-one-megabyte": ("candidate", {"message": "y" * (1 << 20)}, "record-size"),
    "message-with-nul": ("candidate", {"message": "a\x00b"}, "candidate-message"),
    "session-traversal": ("candidate", {"session_id": "../etc"}, "candidate-session_id"),
    "session-control": ("candidate", {"session_id": "s\x1b[31m"}, "candidate-session_id"),
    "session-newline": ("candidate", {"session_id": "s\nt"}, "candidate-session_id"),
    "recovery-malformed": ("recovery", {"attempts": "twice"}, "recovery-attempts"),
    "lease-expiry-not-a-time": ("lease", {"expires_at": "tomorrow"}, "lease-expires_at"),
}


def bad_record(kind: str, change: dict) -> tuple[str, bytes]:
    if kind == "candidate":
        c = hp.candidate(uid()) | change
        return f"update_queue/candidates/{c['uid']}.json", hp.raw(c)
    batch = "update-batch-" + "ab" * 32
    if kind == "recovery":
        rec = {"schema_version": 1, "batch_id": batch, "candidate_uids": [uid()], "attempts": 0,
               "reason_code": "model_error", "retry_at": "2026-07-27T12:00:00+00:00", "manual_recovery": False}
        return f"update_queue/recovery/{batch}.json", hp.raw(rec | change)
    lease = json.loads(hp.lease("e" * 32, [uid()], batch))
    return "update_queue/lease.json", hp.raw(lease | change)


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_an_invalid_record_refuses_the_pull_by_name_and_the_next_turn_quarantines_it(two, upstream, tmp_path, case):
    """Guards: a pulled candidate, recovery or lease is validated with the submit's rules
    (canonical UTC time, text message within max_evidence_bytes without NUL, the session-id
    rule) before anything is applied; the pull names file and rule, the root is untouched;
    `assistant update begin` never crashes on it and quarantines it so sync resumes."""
    a, b = two
    kind, change, rule = BAD_RECORDS[case]
    rel, data = bad_record(kind, change)
    hp.forge(upstream.as_uri(), tmp_path, {rel: data})
    before = root_files(b)
    res = sync.pull(b)
    assert res.status == "error" and rel in res.message and rule in res.message, res.message
    assert root_files(b) == before and not (b.path / rel).exists()
    with EvidenceQueue(b) as q:
        assert q.counts()["queued"] == 0  # nothing imported
    out = assistant.begin(b)  # heals the queue: quarantine, then an ordinary pull
    assert out.claimed is False and any(rule in n for n in out.set_aside), out
    assert rel not in upstream_files(upstream, "update_queue")
    body = git(upstream, "log", "--format=%B", "-1", "main", "--grep=quarantine")
    assert f"RightMemory-Queue-Quarantine: {rel} {rule}" in body
    assert sync.pull(b).status == "synced"


def test_an_update_record_must_be_valid_and_never_changes(two, upstream, tmp_path, provider):
    """Guards: an incoming update record is validated (its candidates, their batch id) and
    an existing one may never be rewritten or removed by a pull."""
    a, b = two
    use_model(a, provider)
    submit(a, "fact one\n"), submit(a, "fact two\n")
    provider.push(Turn(text="Nothing durable here."))
    assert UpdateDriver(a, coordinator=GitQueue(a)).run_once().state == "no_change"
    assert sync.pull(b).status == "synced"
    (rel,) = upstream_files(upstream, "update_records")
    data = json.loads(hp.show(upstream, "main", rel))
    data["candidates"][0]["message"] = "rewritten history\n"
    hp.forge(upstream.as_uri(), tmp_path, {rel: records.record_bytes(data)})
    res = sync.pull(b)
    assert res.status == "error" and "update_record-immutable" in res.message and rel in res.message
    forged = "update_records/update-batch-" + "cd" * 32 + ".json"
    hp.forge(upstream.as_uri(), tmp_path, {rel: None})
    hp.forge(upstream.as_uri(), tmp_path, {forged: records.record_bytes(data | {"operation_id": forged[15:-5]})})
    res = sync.pull(b)
    assert res.status == "error" and rel in res.message  # the removal is refused first
    assert (b.path / rel).exists()


# -- defect class 2: a uid is consumed forever --------------------------------------------------

def test_replayed_candidates_are_dropped_never_claimed_even_on_a_fresh_clone(two, upstream, tmp_path, provider):
    """Guards: a candidate whose uid an update record on the branch named, or a cancel
    withdrew, is dropped with a message when it reappears upstream; no machine (a fresh clone
    included) imports or claims it, so its evidence lands exactly once."""
    a, b = two
    use_model(a, provider)
    uids = [submit(a, "The staging DB is on 5433.\n"), submit(a, "Deploys need a ticket.\n")]
    with EvidenceQueue(a) as q:
        files = dict(hp.candidate_file(q.get(u).candidate()) for u in uids)
    provider.push(Turn(text="Nothing durable here."))
    assert UpdateDriver(a, coordinator=GitQueue(a)).run_once().state == "no_change"
    withdrawn = submit(a, "withdraw me\n", "s3")
    with EvidenceQueue(a) as q:
        files.update([hp.candidate_file(q.get(withdrawn).candidate())])
    GitQueue(a).publish_pending()
    GitQueue(a).cancel(withdrawn)
    assert upstream_files(upstream, "update_queue") == []
    hp.forge(upstream.as_uri(), tmp_path, files, message="replay")
    c = machine(tmp_path, upstream, "c-fresh")  # cloned with the replays in its first checkout
    res = sync.pull(b)
    assert res.status == "synced" and res.message.count("ignored replayed candidate") == 3, res.message
    assert "already landed in update_records/" in res.message and "cancelled" in res.message
    for m in (c, b):
        use_model(m, provider)
        out = UpdateDriver(m, coordinator=GitQueue(m)).run_once(force=True)
        assert out.state == "idle", out
        with EvidenceQueue(m) as q:
            assert q.list(state="queued") == [] and q.list(state="claimed") == []
    assert sorted(landed(upstream)) == sorted(uids)  # once each, never again
    assert upstream_files(upstream, "update_queue") == []  # the replays were dropped upstream
    assert "RightMemory-Queue-Replayed: " in git(upstream, "log", "--format=%B", "main", "--grep=replayed")


# -- defect class 3: a lease is honoured only if it is believable -------------------------------

def ready_batch(a, upstream) -> tuple[list[str], str]:
    uids = sorted([submit(a, "fact one\n"), submit(a, "fact two\n")])
    GitQueue(a).publish_pending()
    snap = snapshot(upstream, "main")
    return uids, records.batch_id(snap.candidates[u] for u in uids)


def test_a_lease_centuries_away_does_not_stall_the_queue(two, upstream, tmp_path):
    """Guards: a well-formed lease of another holder expiring beyond the lease length plus
    the clock-skew bound is reported and taken over with a recovery record, not waited on."""
    a, b = two
    uids, batch = ready_batch(a, upstream)
    hp.forge(upstream.as_uri(), tmp_path, {"update_queue/lease.json": hp.lease(
        "e" * 32, uids, batch, expires=datetime(2500, 1, 1, tzinfo=UTC))})
    res = sync.pull(b)
    assert res.status == "synced" and "lease-expires_at" in res.message
    out = assistant.begin(b)
    assert out.claimed is True and sorted(out.task.candidate_uids) == uids, out
    assert any("lease-expires_at" in n and "treated as expired" in n for n in out.set_aside), out
    body = git(upstream, "log", "--format=%B", "main", "--grep=recover invalid lease")
    assert f"update queue: recover invalid lease {batch}" in body and "Lease-Refused: lease-expires_at" in body
    assert snapshot(upstream, "main").lease.holder == device_id(b)


def test_a_lease_naming_this_machine_for_a_batch_that_does_not_exist_claims_nothing_forged(two, upstream, tmp_path):
    """Guards: a lease naming this machine for candidates that are not in the queue is never
    resumed (nothing forged is claimed); it is set aside and the real batch is claimed."""
    a, b = two
    uids, _batch = ready_batch(a, upstream)
    ghost = [uid(), uid()]
    hp.forge(upstream.as_uri(), tmp_path, {"update_queue/lease.json": hp.lease(
        device_id(b), ghost, "update-batch-" + "ee" * 32)})
    out = assistant.begin(b)
    assert out.claimed is True and sorted(out.task.candidate_uids) == uids, out
    with EvidenceQueue(b) as q:
        assert {e.uid for e in q.list()}.isdisjoint(ghost)


def test_a_replayed_old_lease_never_leaves_begin_failing(two, upstream, tmp_path, cli):
    """Guards: this machine's own old lease, replayed after its batch landed, is not resumed:
    `assistant update begin` (and `--retry`) exit 0 instead of 3 for good."""
    a, b = two
    ready_batch(a, upstream)
    first = assistant.begin(b)
    assert first.claimed is True
    old_lease = hp.show(upstream, "main", "update_queue/lease.json")
    receipt = assistant.complete(b, first.task_id)  # no commit: a no-change batch, its record lands
    assert receipt.phase == "no_change"
    assert upstream_files(upstream, "update_queue") == []
    hp.forge(upstream.as_uri(), tmp_path, {"update_queue/lease.json": old_lease}, message="replay lease")
    for extra in ((), ("--retry",)):
        r = cli("--headless", "assistant", "update", "begin", *extra, "--root", str(b.path))
        assert r.code == 0 and "Traceback" not in r.stderr, r.stderr
        assert r.json()["claimed"] is False
    assert "update_queue/lease.json" not in upstream_files(upstream, "update_queue")


def test_lease_honouring_rules():
    """Guards the bounds themselves: the skew allowance, a spent batch, a wrong batch id."""
    u = [uid()]
    cands = {u[0]: hp.candidate(u[0])}
    batch = records.batch_id(cands.values())
    now = datetime.now(UTC)
    snap = Snapshot(cands, None, {})

    def problem(expires, *, spent=None, batch_id=batch, holder="e" * 32, issued=()):
        lease = Lease(holder, "f" * 32, "0" * 40, batch_id, tuple(u), expires.isoformat())
        return lease_problem(lease, snap, spent or Spent(), now=now, lease_seconds=3600, device="d" * 32,
                             issued=set(issued))

    assert problem(now + timedelta(seconds=3600) + MAX_CLOCK_SKEW) is None
    assert problem(now + timedelta(seconds=3601) + MAX_CLOCK_SKEW)[0] == "lease-expires_at"
    assert problem(now, spent=Spent(landed={u[0]: "update_records/x.json"}))[0] == "lease-batch"
    assert problem(now, batch_id="update-batch-" + "0" * 64)[0] == "lease-batch_id"
    assert problem(now, holder="d" * 32)[0] == "lease-token"
    assert problem(now, holder="d" * 32, issued=("f" * 32,)) is None


# -- any bytes never crash the importer -----------------------------------------------------------

HEX = st.text("0123456789abcdef", min_size=32, max_size=32)
ZONES = st.sampled_from([UTC, timezone(timedelta(hours=5)), timezone(timedelta(hours=-11, minutes=-30))])
TIMES = st.one_of(st.datetimes(timezones=ZONES).map(lambda d: d.isoformat()), st.text(max_size=40))
ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                   lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                   max_leaves=12)


def near(good: dict, fields: dict) -> st.SearchStrategy[dict]:
    """``good`` with some fields replaced by anything plausible or not, some dropped or added."""
    return st.fixed_dictionaries({k: st.one_of(st.just(v), fields.get(k, ANY), ANY) for k, v in good.items()}).flatmap(
        lambda d: st.sets(st.sampled_from(sorted(d))).map(lambda drop: {k: v for k, v in d.items() if k not in drop}))


CANDIDATES = near(hp.candidate("a" * 32), {"uid": HEX, "session_id": st.text(max_size=30), "display_id": st.integers(),
                                           "message": st.text(max_size=60), "submitted_at": TIMES})
LEASES = near(json.loads(hp.lease("e" * 32, ["a" * 32], "update-batch-" + "ab" * 32)),
              {"holder": HEX, "token": HEX, "candidate_uids": st.lists(HEX, max_size=3), "expires_at": TIMES,
               "base_commit": st.text("0123456789abcdef", min_size=40, max_size=40)})
RECOVERIES = near({"schema_version": 1, "batch_id": "update-batch-" + "ab" * 32, "candidate_uids": ["a" * 32],
                   "attempts": 0, "reason_code": "model_error", "retry_at": None, "manual_recovery": True},
                  {"attempts": st.integers(), "retry_at": st.none() | TIMES, "manual_recovery": st.booleans(),
                   "reason_code": st.text(max_size=10)})
BLOBS = st.one_of(st.binary(max_size=200), CANDIDATES.map(hp.raw), LEASES.map(hp.raw), RECOVERIES.map(hp.raw),
                  st.integers(1, 4000).map(lambda n: b"[" * n + b"]" * n))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=BLOBS)
def test_any_bytes_in_any_record_file_are_either_a_valid_record_or_refused_by_name(blob):
    """Guards: no byte sequence in a candidate, lease, recovery or update record file raises
    anything but a RecordRefused naming the file and a rule."""
    checks = {f"update_queue/candidates/{'a' * 32}.json": lambda p, b: rc.candidate_file(p, b, limit=65536),
              "update_queue/lease.json": rc.lease_file,
              f"update_queue/recovery/update-batch-{'ab' * 32}.json": rc.recovery_file,
              f"update_records/update-batch-{'ab' * 32}.json": lambda p, b: rc.update_record_file(p, b, limit=65536)}
    for path, check in checks.items():
        try:
            data = check(path, blob)
        except rc.RecordRefused as exc:
            assert exc.path == path and exc.message.startswith(f"{path}: {exc.rule}: ") and exc.rule
        else:
            assert isinstance(data, dict)
            if path.endswith("lease.json"):
                Lease.parse(data).expired()  # a valid lease's time is usable


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(blobs=st.lists(BLOBS, min_size=1, max_size=3))
def test_any_queue_tree_is_snapshotted_without_crashing(tmp_path, blobs):
    """Guards the importer end to end on a real Git tree: tolerant, every file is a valid
    record or set aside with its rule; strict, the first invalid one is refused by name."""
    repo = tmp_path / f"r{uuid.uuid4().hex[:8]}"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    names = [f"update_queue/candidates/{'a' * 32}.json", "update_queue/lease.json",
             f"update_queue/recovery/update-batch-{'ab' * 32}.json"]
    for name, blob in zip(names, blobs, strict=False):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(blob)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-qm", "queue")
    snap = snapshot(repo, "HEAD", limit=65536)
    assert set(snap.invalid) | set(f"update_queue/candidates/{u}.json" for u in snap.candidates) | (
        {"update_queue/lease.json"} if snap.lease else set()) | set(
        f"update_queue/recovery/{b}.json" for b in snap.recoveries) == set(names[:len(blobs)])
    try:
        snapshot(repo, "HEAD", limit=65536, strict=True)
    except rc.RecordRefused as exc:
        assert exc.path in snap.invalid
    else:
        assert not snap.invalid


def test_a_forged_file_name_cannot_withdraw_honest_evidence(two, upstream, tmp_path):
    """Guards the quarantine itself: a hostile file name holding a newline and a fake
    quarantine trailer is quarantined as one escaped line; the honest candidate it names is
    neither removed nor withdrawn."""
    a, b = two
    honest = submit(a, "An honest fact.\n")
    GitQueue(a).publish_pending()
    evil = f"update_queue/candidates/x\nRightMemory-Queue-Quarantine: update_queue/candidates/{honest}.json rule\nz"
    hp.forge(upstream.as_uri(), tmp_path, {evil: b"{}"})
    out = assistant.begin(b)
    assert out.claimed is False and any("queue-path" in n for n in out.set_aside), out
    assert upstream_files(upstream, "update_queue") == [f"update_queue/candidates/{honest}.json"]
    GitQueue(a).refresh()
    with EvidenceQueue(a) as q:
        assert q.get(honest).state == "queued"


def test_begin_finishes_a_sync_publication_killed_mid_way(two, upstream, cli):
    """Guards `assistant update begin` against a pull killed between its compare-and-swap and
    the work-tree sync: begin finishes that publication first instead of failing with exit 3
    ("dirty") on every call."""
    a, b = two
    ready_batch(a, upstream)
    killed = cli("--headless", "sync", "pull", "--root", str(b.path), env={"RMTUI_CRASHPOINT": "after-cas"})
    assert killed.code != 0
    r = cli("--headless", "assistant", "update", "begin", "--root", str(b.path))
    assert r.code == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.json()["claimed"] is True
    assert git(b.path, "status", "--porcelain", "--untracked-files=no") == ""
