"""Batch readiness, shared by the Update driver and `assistant update begin`
(docs/architecture.md, "Evidence: from submit to receipt"; docs/formats.md, "Batch selection").

The original's selection, session by session: a session is ready ``debounce_seconds`` after its
last submit, or at once when it alone holds ``target_batch_candidates``. Ready sessions are taken
whole, in the order they became ready, until the batch reaches the target; short of it, they
go together once the first of them has waited ``max_wait_seconds`` more. A session with a failed
batch (waiting for its retry or a person) is kept back whole. ``force`` (``update run-now``)
takes every session that is not kept back at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

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
    """The original's batch id over the evidence's candidate records (docs/formats.md, "Evidence queue")."""
    return records.batch_id(e.candidate() for e in evidence)


@dataclass
class Plan:
    """What the selection says now: a batch, or when one may be ready (``None``: never, as
    things stand)."""

    batch: Batch | None
    ready_at: float | None


def plan_batch(queued: list[Evidence], cfg: Config, *, now: float | None = None, force: bool = False,
               held_sessions: Iterable[str] = ()) -> Plan:
    """The original's selection over queued evidence (see the module docstring)."""
    now = time.time() if now is None else now
    target = cfg.get("update.async.target_batch_candidates")
    debounce = float(cfg.get("update.async.debounce_seconds"))
    max_wait = float(cfg.get("update.async.max_wait_seconds"))
    held = set(held_sessions)
    sessions: dict[str, list[Evidence]] = {}
    for e in queued:
        if e.session not in held:
            sessions.setdefault(e.session, []).append(e)
    eligible: list[tuple[float, str, list[Evidence]]] = []
    deadlines: list[float] = []
    for session, items in sessions.items():
        items.sort(key=lambda e: (e.submitted_at, e.uid))
        ready_at = max(_submitted(e) for e in items) + debounce
        if force or ready_at <= now or len(items) >= target:
            eligible.append((ready_at, session, items))
        else:
            deadlines.append(ready_at)
    eligible.sort(key=lambda t: (t[0], t[1]))
    chosen: list[Evidence] = []
    for _ready, _session, items in eligible:
        chosen.extend(items)
        if len(chosen) >= target:
            return Plan(_batch(chosen, "forced" if force else "target"), None)
    if not eligible:
        return Plan(None, min(deadlines) if deadlines else None)
    fallback = eligible[0][0] + max_wait
    if force or fallback <= now:
        return Plan(_batch(chosen, "forced" if force else "max_wait"), None)
    return Plan(None, min([fallback, *deadlines]))


def _submitted(e: Evidence) -> float:
    """When the evidence was submitted, by its candidate's ``submitted_at`` (the original's clock)."""
    try:
        return datetime.fromisoformat(e.submitted_at).timestamp()
    except (TypeError, ValueError):
        return e.created_at


def _batch(chosen: list[Evidence], reason: str) -> Batch:
    return Batch(batch_id(chosen), [e.uid for e in chosen], sorted({e.session for e in chosen}), reason)


def select_batch(queued: list[Evidence], cfg: Config, *, now: float | None = None, force: bool = False,
                 held_sessions: Iterable[str] = ()) -> Batch | None:
    """The next ready batch from queued evidence, or None."""
    return plan_batch(queued, cfg, now=now, force=force, held_sessions=held_sessions).batch


def held_sessions(batches: Iterable) -> set[str]:
    """Sessions kept back: those in a failed batch (waiting for its retry or a person)."""
    return {s for b in batches if b.state in ("waiting_retry", "needs_manual_recovery") for s in b.sessions}


def pick_among(queued: list[Evidence], eligible: list[str], cfg: Config, *, now: float | None = None,
               force: bool = False) -> tuple[str, list[str]] | None:
    """A ready batch among ``eligible`` uids (those the shared queue offers), by the same
    readiness rules: what the Git-backed queue's claim asks of the driver and the host."""
    wanted = set(eligible)
    pool = sorted((e for e in queued if e.uid in wanted), key=lambda e: (e.created_at, e.seq))
    batch = select_batch(pool, cfg, now=now, force=force)
    return (batch.id, batch.uids) if batch else None
