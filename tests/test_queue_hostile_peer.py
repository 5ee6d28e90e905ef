"""Three machines over a real ``git daemon`` on loopback: two honest rmtui machines share a
queue, and a third writes forged, replayed and malformed records straight into the upstream
with plain ``git push`` (``hostile_peer.py``). The honest machines keep working, refuse each
bad record by name, and every honest piece of evidence lands exactly once."""

from __future__ import annotations

import subprocess
import uuid
from datetime import UTC, datetime

import hostile_peer as hp
import pytest
from fake_provider import FakeProvider, Turn
from test_queue_trust import landed, upstream_files
from test_sync import enable, git, ident

from rmtui.engine import sync
from rmtui.engine.evidence import records
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import init_root
from rmtui.engine.roles.update_driver import UpdateDriver
from rmtui.engine.sync.queue_git import GitQueue, device_id, snapshot


@pytest.fixture
def served(git_daemon):
    """The suite's one git daemon on loopback, and the bare upstream it serves."""
    return git_daemon, git_daemon.base / "upstream.git"


@pytest.fixture
def provider():
    p = FakeProvider()
    p.push(*[Turn(text="Nothing durable in this batch.") for _ in range(40)])
    yield p
    p.close()


def honest(tmp_path, url, name, provider, *, first=False):
    if first:
        root = init_root(tmp_path / name)
        ident(root.path)
        git(root.path, "remote", "add", "origin", url)
        git(root.path, "push", "-q", "-u", "origin", "main")
    else:
        subprocess.run(["git", "clone", "-q", url, str(tmp_path / name)], check=True)
        root = init_root(tmp_path / name, force=True)
        ident(root.path)
    enable(root)
    for key, value in (("update.async.target_batch_candidates", 2), ("update.model.model_id", "anthropic:fake-model"),
                       ("update.model.api_base", provider.base("anthropic"))):
        set_config_value(root.path, key, value)
    return root


def turn(root, *, force=False):
    return UpdateDriver(root, coordinator=GitQueue(root)).run_once(force=force)


def submit(root, text, session) -> str:
    with EvidenceQueue(root) as q:
        return q.submit(session, text.encode())["uid"]


@pytest.mark.slow
def test_two_honest_machines_outlast_a_hostile_one_over_git_daemon(served, provider, tmp_path):
    server, bare = served
    url = server.url
    a = honest(tmp_path, url, "a", provider, first=True)
    b = honest(tmp_path, url, "b", provider)
    mine: list[str] = []

    # 1. A's first batch lands; the hostile machine replays its candidates afterwards
    mine += [submit(a, "The staging DB listens on 5433.\n", "a1"), submit(a, "Deploys need a ticket.\n", "a1")]
    with EvidenceQueue(a) as q:
        replay = dict(hp.candidate_file(q.get(u).candidate()) for u in mine)
    assert turn(a).state == "no_change"
    hp.forge(url, tmp_path, replay, message="replay landed candidates")

    # 2. a malformed candidate: B's pull refuses it by name, untouched; B's next turn quarantines it
    bad_uid = uuid.uuid4().hex
    bad_rel, _ = hp.candidate_file(hp.candidate(bad_uid))
    hp.forge(url, tmp_path, {bad_rel: hp.raw(hp.candidate(bad_uid, session="../../etc"))})
    head_b = git(b.path, "rev-parse", "HEAD")
    res = sync.pull(b)
    assert res.status == "error" and bad_rel in res.message and "candidate-session_id" in res.message
    assert git(b.path, "rev-parse", "HEAD") == head_b
    mine += [submit(b, "The cache TTL is 300 s.\n", "b1"), submit(b, "Backups run at 02:00 UTC.\n", "b1")]
    assert turn(b).state == "no_change"  # healed, pulled, claimed and landed its own batch
    assert sync.pull(b).status == "synced"

    # 3. a forged lease centuries away over A's pending batch, and one naming B for a ghost batch
    mine += [submit(a, "Feature flags live in flags.toml.\n", "a2"), submit(a, "Logs rotate daily.\n", "a2")]
    GitQueue(a).publish_pending()
    pending = snapshot(bare, "main").candidates
    fresh = sorted(u for u in pending if u in mine)
    assert len(fresh) == 2
    hp.forge(url, tmp_path, {"update_queue/lease.json": hp.lease(
        "e" * 32, fresh, records.batch_id(pending[u] for u in fresh), expires=datetime(2600, 1, 1, tzinfo=UTC))})
    assert turn(b).state == "no_change"  # B took the forged lease's batch over instead of waiting
    mine += [submit(b, "The VPN needs MFA.\n", "b2"), submit(b, "Tickets go to #ops.\n", "b2")]
    GitQueue(b).publish_pending()
    hp.forge(url, tmp_path, {"update_queue/lease.json": hp.lease(
        device_id(b), [uuid.uuid4().hex], "update-batch-" + "9" * 64)})
    assert turn(b).state == "no_change"  # the ghost lease was dropped; B landed its real batch

    # 4. drain: whatever is left is claimed by someone; both machines end in sync
    for _ in range(6):
        for m in (a, b):
            turn(m, force=True)
        if not upstream_files(bare, "update_queue"):
            break
    assert upstream_files(bare, "update_queue") == []
    every = landed(bare)
    assert sorted(every) == sorted(mine) and len(every) == len(set(every))  # each exactly once
    assert bad_uid not in every
    for m in (a, b):
        assert sync.pull(m).status == "synced"
        with EvidenceQueue(m) as q:
            assert q.list(state="queued") == [] and q.list(state="claimed") == []
    subjects = git(bare, "log", "--format=%s", "main")
    for made in ("update queue: quarantine invalid records", "update queue: drop replayed candidates",
                 "update queue: recover invalid lease"):
        assert made in subjects
