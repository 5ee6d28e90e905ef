"""Batch readiness, shared by the Update driver and `assistant update begin`
(docs/architecture.md, "Evidence: from submit to receipt").

A batch forms when ``target_batch_candidates`` are queued, when a session's debounce after
its last submit has passed, or when the oldest candidate waited ``max_wait_seconds``;
``force`` (``update run-now``) forms one from whatever is queued.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rmtui.engine.evidence import records
from rmtui.engine.evidence.queue import Evidence
from rmtui.engine.memory.config import Config


@dataclass
class Batch:
    id: str
    uids: list[str]
    sessions: list[str]
    reason: str


def batch_id(evidence: list[Evidence]) -> str:
    """The original's batch id over the evidence's candidate records (COMPAT §3)."""
    return records.batch_id(e.candidate() for e in evidence)


def select_batch(queued: list[Evidence], cfg: Config, *, now: float | None = None, force: bool = False) -> Batch | None:
    """Pick the next ready batch from queued evidence (in submission order), or None."""
    if not queued:
        return None
    now = time.time() if now is None else now
    target = cfg.get("update.async.target_batch_candidates")
    debounce = cfg.get("update.async.debounce_seconds")
    max_wait = cfg.get("update.async.max_wait_seconds")
    last_by_session: dict[str, float] = {}
    for e in queued:
        last_by_session[e.session] = max(last_by_session.get(e.session, 0.0), e.created_at)
    if force:
        chosen, reason = queued[:target], "forced"
    elif len(queued) >= target:
        chosen, reason = queued[:target], "target"
    else:
        overdue = now - queued[0].created_at >= max_wait
        settled = {s for s, t in last_by_session.items() if now - t >= debounce}
        if overdue:
            chosen, reason = queued[:target], "max_wait"
        elif settled:
            chosen, reason = [e for e in queued if e.session in settled][:target], "debounce"
        else:
            return None
    return Batch(batch_id(chosen), [e.uid for e in chosen], sorted({e.session for e in chosen}), reason)


def pick_among(queued: list[Evidence], eligible: list[str], cfg: Config, *, now: float | None = None,
               force: bool = False) -> tuple[str, list[str]] | None:
    """A ready batch among ``eligible`` uids (those the shared queue offers), by the same
    readiness rules: what the Git-backed queue's claim asks of the driver and the host."""
    wanted = set(eligible)
    pool = sorted((e for e in queued if e.uid in wanted), key=lambda e: (e.created_at, e.seq))
    batch = select_batch(pool, cfg, now=now, force=force)
    return (batch.id, batch.uids) if batch else None
