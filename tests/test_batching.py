"""Batch selection as the original's queue claim selects (docs/formats.md, "Batch selection"):
whole ready sessions, sessions with a failed batch kept back. Held against the selection in
tests/compat_checker.py, written from the original's rules without the engine."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime

from compat_checker import select_candidates
from fake_provider import FakeProvider, Turn, commit_update_model
from hypothesis import given, settings
from hypothesis import strategies as st

from rmtui.engine.evidence.batching import plan_batch
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import init_root
from rmtui.engine.roles.update_driver import BatchStore, UpdateDriver
from rmtui.engine.store import utc_iso

TARGET, DEBOUNCE, MAX_WAIT = 3, 3600, 7200


def _configure(root, provider=None) -> None:
    for key, value in (("update.async.target_batch_candidates", TARGET),
                       ("update.async.debounce_seconds", DEBOUNCE), ("update.async.max_wait_seconds", MAX_WAIT)):
        set_config_value(root.path, key, value)
    if provider is not None:
        commit_update_model(root.path, provider)


def _submit(root, session: str, n: int) -> list[str]:
    with EvidenceQueue(root) as q:
        return [q.submit(session, f"{session} finding {k}".encode())["uid"] for k in range(n)]


def test_a_mixed_queue_batches_whole_ready_sessions_and_keeps_failed_ones_back(root):
    """Session `big` alone reaches the target; `a` must wait its debounce and then the max
    wait; `failed` holds a batch that failed, so its new evidence stays queued throughout."""
    provider = FakeProvider()
    try:
        _configure(root, provider)
        (old,) = _submit(root, "failed", 1)
        with BatchStore(root) as batches:
            batches.upsert("update-batch-" + "0" * 64, [old], ["failed"], "target")
            batches.update("update-batch-" + "0" * 64, state="needs_manual_recovery", attempts=2,
                           last_error="model: refused")
        big = _submit(root, "big", 3)
        (a,) = _submit(root, "a", 1)
        (new_failed,) = _submit(root, "failed", 1)
        t0 = time.time()
        provider.push(Turn(text="nothing durable"))
        out = UpdateDriver(root).run_once(now=t0)
        assert out.state == "no_change", out
        assert sorted(out.receipt.candidate_uids) == sorted(big)  # one whole session, no more
        assert UpdateDriver(root).run_once(now=t0 + DEBOUNCE + 1).state == "idle"  # `a` < target
        provider.push(Turn(text="nothing durable"))
        out = UpdateDriver(root).run_once(now=t0 + DEBOUNCE + MAX_WAIT + 1)
        assert out.receipt.candidate_uids == [a]
        assert UpdateDriver(root).run_once(now=t0 + 10 * MAX_WAIT).state == "idle"
        with EvidenceQueue(root) as q:
            assert {q.get(old).state, q.get(new_failed).state} == {"queued"}
    finally:
        provider.close()


_TEMPLATE: list = []


def _template(tmp_path_factory):
    if not _TEMPLATE:
        root = init_root(tmp_path_factory.mktemp("batching") / "root")
        _configure(root)
        _submit(root, "s", 1)
        with EvidenceQueue(root) as q:
            _TEMPLATE.append((root, q.list()[0]))
    return _TEMPLATE[0]


QUEUE = st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3", "s4", "s5"]), st.integers(0, 20000)),
                 min_size=1, max_size=14)


@settings(max_examples=80, deadline=None)
@given(queue=QUEUE, failed=st.sets(st.integers(0, 13), max_size=3), offset=st.integers(0, 12000))
def test_selection_matches_the_originals_on_random_queues(tmp_path_factory, queue, failed, offset):
    root, template = _template(tmp_path_factory)
    cfg = root.config()
    base = 1_800_000_000.0
    evidence = [dataclasses.replace(template, uid=f"{k:032x}", session=s, created_at=base + t, seq=k,
                                    display_id=k + 1, submitted_at=utc_iso(base + t))
                for k, (s, t) in enumerate(queue)]
    failed_uids = {evidence[k].uid for k in failed if k < len(evidence)}
    held = {e.session for e in evidence if e.uid in failed_uids}
    now = base + offset + DEBOUNCE
    plan = plan_batch(evidence, cfg, now=now, held_sessions=held)
    want = select_candidates([e.candidate() for e in evidence], failed_uids, target=TARGET, max_wait=MAX_WAIT,
                             now=datetime.fromtimestamp(now, UTC), debounce=DEBOUNCE)
    assert (plan.batch.uids if plan.batch else []) == want
    if plan.batch is None and plan.ready_at is not None:
        assert plan.ready_at > now  # the next time it may change
        later = plan_batch(evidence, cfg, now=plan.ready_at, held_sessions=held)
        assert later.batch is not None or later.ready_at is None or later.ready_at > plan.ready_at
