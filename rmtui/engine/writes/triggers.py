"""Trigger state of the pressure-triggered cycles (docs/formats.md, "Maintenance cycles"):
``.runtime/<name>/trigger-state.json``.

Each landed Memory-changing update transaction adds ``update_candidate_points`` once (the
supervisor's ``insight_points`` effect calls :func:`add_points`; ``applied_operation_ids``
makes a retried effect count once). A watcher claims a run at the threshold
(``active_operation_id``, ``active_operation_points``) and deducts the claimed points only
when the run succeeds. A corrupt file is set aside (``trigger-state.json.corrupt-<time>``)
and the state starts afresh. Keys this module does not know are kept as they were.

It lives in ``writes/`` because the supervisor's effect writes it; the cycle that reads it
(:mod:`rmtui.engine.cycles.insight`) sits above.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.roots import MemoryRoot

FILE = "trigger-state.json"
#: How many applied operation ids are remembered (newest kept).
APPLIED_CAP = 1000
#: Writers whose landed Memory changes are update transactions (they add Insight points).
POINT_ROLES = ("update", "update-correction")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def state_path(root: MemoryRoot, name: str) -> Path:
    return root.runtime / name / FILE


def fresh() -> dict[str, Any]:
    return {"points": 0.0, "updated_at": None, "last_success_at": None, "last_success_operation_id": None,
            "last_success_result": None, "applied_operation_ids": [], "active_operation_id": None,
            "active_operation_points": None}


def _read(path: Path) -> dict[str, Any]:
    """The state on disk; a corrupt file is moved aside and a fresh state answered."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return fresh()
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        points = float(data.get("points") or 0.0)
        applied = data.get("applied_operation_ids") or []
        if not isinstance(applied, list):
            raise ValueError("applied_operation_ids is not a list")
    except (ValueError, TypeError):
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        path.replace(aside)
        state = fresh()
        state["reset_from"] = aside.name
        return state
    state = {**fresh(), **data}
    state["points"] = points
    state["applied_operation_ids"] = [str(x) for x in applied]
    return state


def load(root: MemoryRoot, name: str) -> dict[str, Any]:
    """Read the state (under its lock, so a half-finished change is never seen)."""
    with locked(root, name) as state:
        return dict(state)


@contextmanager
def locked(root: MemoryRoot, name: str) -> Iterator[dict[str, Any]]:
    """Read-modify-write under ``.runtime/<name>/trigger-state.lock``; the dict is saved on exit
    if it changed."""
    path = state_path(root, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_suffix(".lock")):
        state = _read(path)
        before = json.dumps(state, sort_keys=True)
        yield state
        if json.dumps(state, sort_keys=True) != before or not path.exists():
            state["updated_at"] = now_iso()
            atomic_write_text(path, json.dumps(state, indent=2, sort_keys=True) + "\n")


def update(root: MemoryRoot, name: str, fn: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    with locked(root, name) as state:
        fn(state)
        return dict(state)


def add_points(root: MemoryRoot, name: str, operation_id: str, points: float) -> bool:
    """Count one landed transaction once; answers whether it was new."""
    with locked(root, name) as state:
        applied: list[str] = state["applied_operation_ids"]
        if operation_id in applied:
            return False
        state["points"] = float(state["points"]) + float(points)
        applied.append(operation_id)
        del applied[:-APPLIED_CAP]
        return True
