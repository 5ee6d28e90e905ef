"""The Git-backed evidence queue between machines (clones of one bare upstream over file://):
candidates published in the original's record format, one lease at a time, takeover after
expiry, and Update batches landed by the finalizer with the queue trailers."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from compat_checker import check_root
from fake_provider import FakeProvider, Turn, call
from test_sync import enable, git, ident

from rmtui.engine.errors import ConflictError
from rmtui.engine.evidence import records
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import init_root
from rmtui.engine.roles.update_driver import UpdateDriver
from rmtui.engine.sync.queue_git import GitQueue, snapshot


@pytest.fixture
def upstream(tmp_path) -> Path:
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    return bare


def machine(tmp_path: Path, upstream: Path, name: str, *, first: bool = False):
    path = tmp_path / name
    if first:
        root = init_root(path)
        ident(root.path)
        git(root.path, "remote", "add", "origin", upstream.as_uri())
        git(root.path, "push", "-q", "-u", "origin", "main")
    else:
        subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(path)], check=True)
        root = init_root(path, force=True)
        ident(root.path)
    enable(root)
    set_config_value(root.path, "update.async.target_batch_candidates", 2)
    return root


@pytest.fixture
def two(tmp_path, upstream):
    return machine(tmp_path, upstream, "a", first=True), machine(tmp_path, upstream, "b")


def submit(root, text: str, session: str = "s1") -> str:
    with EvidenceQueue(root) as q:
        return q.submit(session, text.encode())["uid"]


def upstream_files(upstream: Path, prefix: str) -> list[str]:
    out = git(upstream, "ls-tree", "-r", "--name-only", "main", "--", prefix)
    return [p for p in out.splitlines() if p]


def choose_all(root):
    def choose(eligible):
        from rmtui.engine.evidence.batching import batch_id

        with EvidenceQueue(root) as q:
            items = [q.get(u) for u in eligible]
        return (batch_id(items), eligible) if items else None
    return choose


def test_candidates_are_published_in_the_original_format_and_imported_elsewhere(two, upstream, cli):
    a, b = two
    uid = submit(a, "The staging DB moved to port 5433.\n")
    r = cli("--headless", "sync", "push", "--json", "--root", str(a.path))
    assert r.code == 0, r.stderr
    rel = f"update_queue/candidates/{uid}.json"
    assert upstream_files(upstream, "update_queue") == [rel]
    subject = git(upstream, "log", "-1", "--format=%s", "main", "--", rel).strip()
    assert subject == f"update queue: publish {uid}"
    author = git(upstream, "log", "-1", "--format=%an <%ae>", "main", "--", rel).strip()
    assert author == "RightMemory <rightmemory@local>"
    data = git(upstream, "show", f"main:{rel}").encode()
    with EvidenceQueue(a) as q:
        assert data == records.record_bytes(q.get(uid).candidate())
    assert set(json.loads(data)) == records.CANDIDATE_KEYS
    GitQueue(b).refresh()
    with EvidenceQueue(b) as q:
        imported = q.get(uid)
    assert imported.state == "queued" and imported.origin == "upstream" and imported.session == "s1"
    listed = json.loads(cli("--headless", "evidence", "list", "--json", "--root", str(b.path)).stdout)
    assert [e["uid"] for e in listed] == [uid]


def test_one_lease_at_a_time_and_takeover_after_expiry(two, upstream):
    a, b = two
    for i in range(2):
        submit(a, f"fact {i}\n")
    qa, qb = GitQueue(a, lease_seconds=5), GitQueue(b, lease_seconds=5)
    qa.refresh()
    lease_a = qa.claim(choose_all(a))
    assert lease_a is not None and lease_a.holder == qa.device
    qb.refresh()
    assert qb.claim(choose_all(b)) is None  # A's lease is live: B waits
    assert qa.claim(choose_all(a)) == lease_a  # A resumes its own
    while not lease_a.expired():
        time.sleep(0.2)
    lease_b = qb.claim(choose_all(b))
    assert lease_b is not None and lease_b.batch_id == lease_a.batch_id and lease_b.token != lease_a.token
    lease = snapshot(upstream, "main").lease
    assert lease.holder == qb.device
    with pytest.raises(ConflictError, match="lease"):
        qa.finalize(lease_a, lease_a.base_commit, git(a.path, "rev-parse", "HEAD").strip())
    assert snapshot(upstream, "main").lease == lease_b  # A's stale work did not land


def test_cancel_withdraws_a_candidate_for_every_machine_and_a_leased_one_is_refused(two, upstream, cli):
    a, b = two
    keep, drop = submit(a, "keep me\n"), submit(a, "withdraw me\n")
    GitQueue(a).publish_pending()
    GitQueue(b).refresh()
    r = cli("--headless", "evidence", "cancel", drop[:8], "--json", "--root", str(b.path))  # from the other machine
    assert r.code == 0, r.stderr
    assert r.json()["uid"] == drop
    assert upstream_files(upstream, "update_queue") == [f"update_queue/candidates/{keep}.json"]
    body = git(upstream, "log", "-1", "--format=%B", "main").strip()
    subject, _, trailers = body.partition("\n\n")
    assert subject == f"update queue: cancel {drop}"
    assert re.fullmatch(r"RightMemory-Queue-Cancel: [0-9a-f]{32}", trailers), trailers  # a token, as the original
    GitQueue(a).refresh()
    with EvidenceQueue(a) as q:  # the submitting machine learns it was withdrawn, not landed
        assert q.get(drop).state == "rejected" and "cancelled" in q.get(drop).reason
        assert q.get(keep).state == "queued"
    qa = GitQueue(a)
    lease = qa.claim(choose_all(a))
    assert lease is not None and keep in lease.candidate_uids
    r = cli("--headless", "evidence", "cancel", keep, "--root", str(b.path))
    assert r.code != 0 and "leased" in r.stderr
    assert f"update_queue/candidates/{keep}.json" in upstream_files(upstream, "update_queue")
    bad = cli("--headless", "evidence", "cancel", "not-a-ref", "--root", str(b.path))
    assert bad.code == 2 and "display id" in bad.stderr


def test_update_retry_resets_a_manual_recovery_in_the_shared_queue(two, upstream, monkeypatch):
    from datetime import timedelta

    from rmtui.engine.sync import queue_git

    monkeypatch.setattr(queue_git, "RETRY_AFTER", timedelta(0))  # the 1 h backoff after the first failure
    a, b = two
    submit(a, "a fact that keeps failing\n")
    qa = GitQueue(a)
    qa.publish_pending()
    for _ in range(2):  # two failures: manual recovery
        lease = qa.claim(choose_all(a))
        assert lease is not None
        rec = qa.release(lease, "model_error")
    assert rec["manual_recovery"] is True and rec["retry_at"] is None
    assert qa.claim(choose_all(a)) is None  # a manual recovery is never claimed by itself
    qb = GitQueue(b)
    qb.refresh()
    assert qb.retry() == [rec["batch_id"]]
    body = git(upstream, "log", "-1", "--format=%B", "main").strip()
    assert re.fullmatch(r"update queue: retry blocked batches\n\nRightMemory-Queue-Retry: [0-9a-f]{32}", body), body
    fresh = json.loads(git(upstream, "show", f"main:update_queue/recovery/{rec['batch_id']}.json"))
    assert fresh["attempts"] == 0 and fresh["reason_code"] == "manual_retry" and not fresh["manual_recovery"]
    qa.refresh()
    assert qa.claim(choose_all(a)) is not None  # due again, on any machine
    assert qb.retry() == []


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


NODE = "- `staging-port` the staging DB listens on 5433 → []\n"


def test_driver_lands_a_batch_through_the_shared_queue(two, upstream, provider, tmp_path):
    a, b = two
    for key, value in (("update.model.model_id", "anthropic:fake-model"),
                       ("update.model.api_base", provider.base("anthropic"))):
        set_config_value(a.path, key, value)
    uids = [submit(a, "The staging DB moved to port 5433.\n"), submit(a, "Confirmed: 5433 everywhere.\n", "s2")]
    provider.push(call("read", path="MEMORY.md"),
                  call("edit", path="MEMORY.md", old_text="# Memory\n", new_text="# Memory\n\n" + NODE),
                  call("git_add", paths=["MEMORY.md"]),
                  call("git_commit", message="update: staging port"),
                  Turn(text="Changed: staging-port."))
    out = UpdateDriver(a, coordinator=GitQueue(a)).run_once(now=time.time() + 3601)  # both sessions ready
    assert out.state == "committed", out
    batch = out.batch_id
    log = git(upstream, "log", "--format=%s%n%b%x1e", "main").split("\x1e")
    finalize = next(e for e in log if e.strip().startswith(f"update queue: finalize {batch}"))
    assert f"RightMemory-Queue-Batch: {batch}" in finalize and "RightMemory-Queue-Token: " in finalize
    assert upstream_files(upstream, "update_queue") == []  # candidates and lease removed
    assert upstream_files(upstream, "update_records") == [f"update_records/{batch}.json"]
    clone = tmp_path / "check"
    subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(clone)], check=True)
    assert check_root(clone) == []
    assert git(a.path, "rev-parse", "HEAD") == git(upstream, "rev-parse", "main")
    assert NODE.strip() in (a.path / "MEMORY.md").read_text()
    with EvidenceQueue(a) as q:
        assert {q.get(u).state for u in uids} == {"consumed"}
    GitQueue(b).refresh()  # B never saw them queued: the batch landed before B looked
    with EvidenceQueue(b) as q:
        assert [e.uid for e in q.list(state="queued")] == []


def test_two_hosts_never_both_claim_the_same_batch(two, cli, tmp_path):
    a, b = two
    for i in range(2):
        f = tmp_path / f"e{i}.md"
        f.write_text(f"Evidence {i}: deploys need a ticket.\n")
        assert cli("--headless", "assistant", "submit", "--session", "h", "--request", f"r{i}", str(f),
                   "--root", str(a.path)).code == 0
    assert cli("--headless", "sync", "push", "--root", str(a.path)).code == 0
    first = cli("--headless", "assistant", "update", "begin", "--root", str(a.path)).json()
    second = cli("--headless", "assistant", "update", "begin", "--root", str(b.path)).json()
    assert first["claimed"] is True and second["claimed"] is False
    assert second["lease"]["holder"] != second["lease"].get("ours") and second["lease"]["ours"] is False
    wt = Path(first["worktree"])
    (wt / "MEMORY.md").write_text("# Memory\n\n- `deploy-ticket` deploys need a ticket → []\n")
    git(wt, "add", "-A")
    git(wt, "-c", "user.name=h", "-c", "user.email=h@l", "commit", "-qm", "update: deploy tickets")
    receipt = cli("--headless", "assistant", "update", "complete", "--task", first["task_id"],
                  "--root", str(a.path)).json()
    assert receipt["phase"] == "committed"
    assert cli("--headless", "sync", "pull", "--root", str(b.path)).code == 0
    assert "deploy-ticket" in (b.path / "MEMORY.md").read_text()
    assert check_root(b.path) == []


def _records_in_history(upstream: Path) -> dict[str, list[str]]:
    """Every update record ever added upstream: batch id -> candidate uids."""
    out: dict[str, list[str]] = {}
    for rel in git(upstream, "log", "--format=", "--name-only", "--diff-filter=A", "main", "--",
                   "update_records").split():
        sha = git(upstream, "log", "--format=%H", "--diff-filter=A", "-1", "main", "--", rel).strip()
        data = json.loads(git(upstream, "show", f"{sha}:{rel}"))
        out[data["operation_id"]] = [c["uid"] for c in data["candidates"]]
    return out


@pytest.mark.slow
def test_three_machines_submit_and_reconcile_concurrently(tmp_path, upstream, provider):
    import threading

    roots = [machine(tmp_path, upstream, "m0", first=True)] + [machine(tmp_path, upstream, f"m{i}") for i in (1, 2)]
    for r in roots:
        set_config_value(r.path, "update.async.target_batch_candidates", 3)
        set_config_value(r.path, "update.model.model_id", "anthropic:fake-model")
        set_config_value(r.path, "update.model.api_base", provider.base("anthropic"))
    per_machine = 12
    provider.push(*[Turn(text="Nothing durable in this batch.") for _ in range(200)])
    submitted: dict[str, list[str]] = {}
    errors: list[str] = []

    def work(idx: int, root) -> None:
        mine = submitted.setdefault(root.path.name, [])
        try:
            for i in range(per_machine):
                mine.append(submit(root, f"machine {idx} fact {i}: value {i * 7}\n", session=f"m{idx}-s{i % 2}"))
                if i % 3 == 2:
                    GitQueue(root).publish_pending()
                    UpdateDriver(root, coordinator=GitQueue(root)).run_once()
        except Exception as exc:  # noqa: BLE001 - reported below, with the machine
            errors.append(f"{root.path.name}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i, r)) for i, r in enumerate(roots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for _ in range(30):  # drain: whatever is left is claimed by someone
        for r in roots:
            GitQueue(r).publish_pending()
            UpdateDriver(r, coordinator=GitQueue(r)).run_once(force=True)
        if not upstream_files(upstream, "update_queue"):
            break
    assert upstream_files(upstream, "update_queue") == []
    landed = _records_in_history(upstream)
    every = [u for uids in landed.values() for u in uids]
    want = sorted(u for uids in submitted.values() for u in uids)
    assert len(every) == len(set(every)) == len(want) == 3 * per_machine  # none twice, none lost
    assert sorted(every) == want
    # the lease is a singleton: claims and their ends alternate in the upstream history
    subjects = [s for s in git(upstream, "log", "--reverse", "--format=%s", "main").splitlines()
                if s.startswith(("update queue: claim", "update queue: finalize", "update queue: release"))]
    for prev, nxt in zip(subjects, subjects[1:], strict=False):
        assert not (prev.startswith("update queue: claim") and nxt.startswith("update queue: claim")), subjects
    clone = tmp_path / "verify"
    subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(clone)], check=True)
    assert check_root(clone) == []


@pytest.mark.slow
def test_machine_killed_holding_the_lease_is_taken_over_after_expiry(two, upstream, provider, cli):
    import os
    import signal
    import sys

    a, b = two
    for r in (a, b):
        set_config_value(r.path, "sync.lease_seconds", 4)
        set_config_value(r.path, "update.model.model_id", "anthropic:fake-model")
        set_config_value(r.path, "update.model.api_base", provider.base("anthropic"))
    uids = [submit(a, "fact one\n"), submit(a, "fact two\n")]
    provider.push(Turn(text="thinking...", delay=120))  # A's model hangs: A holds the lease
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "update", "run-now", "--root", str(a.path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    provider.wait_for(1, timeout=60)
    held = snapshot(upstream, "main").lease
    assert held is not None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    while not held.expired():  # the 4 s run from A's claim
        time.sleep(0.1)
    provider.push(Turn(text="Nothing durable here."))
    out = UpdateDriver(b, coordinator=GitQueue(b)).run_once()
    assert out.state == "no_change", out  # B took the expired lease over and landed the batch
    assert snapshot(upstream, "main").lease is None
    r = cli("--headless", "update", "run", "--root", str(a.path))  # A restarted
    assert r.code == 0, r.stderr
    landed = _records_in_history(upstream)
    assert sorted(u for uids_ in landed.values() for u in uids_) == sorted(uids)  # once, by B
    assert git(a.path, "rev-parse", "HEAD") == git(upstream, "rev-parse", "main")
    with EvidenceQueue(a) as q:
        assert {q.get(u).state for u in uids} == {"consumed"}
