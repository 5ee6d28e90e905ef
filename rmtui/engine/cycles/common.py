"""What the cycles share: a role conversation over one folder, the cycle lock, the per-cycle
state file with failure backoff, and the one way a cycle opens its operation, whether a model
or a host (``assistant begin --role``) does the role's work."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rmtui.engine.errors import ConflictError, EngineError, OperationFailed
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import file_lock, try_lock
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes.operations import Failure

CYCLES_DIR = "cycles"
#: Failures in a row after which the daemon stops running a cycle until a manual run succeeds.
MAX_FAILURES = 5
BACKOFF_SECONDS = 60.0
BACKOFF_CAP_SECONDS = 3600.0

UNCOMMITTED_REMINDER = ("Your worktree has uncommitted changes:\n{dirty}\nCommit what should land (git_add, "
                        "git_commit) and discard nothing silently; then give your final report.")


class RoleSession:
    """One conversation with ``role`` whose tools work over ``where`` (a worktree, or the live
    root for a read-only role)."""

    def __init__(self, root: MemoryRoot, executor: Any, role: str, where: Path | str, *, cfg: Any,
                 preamble: str = "", **trace_fields: Any) -> None:
        from rmtui.engine.roles.executors import DebugTrace
        from rmtui.engine.roles.prompts import role_instructions
        from rmtui.engine.roles.tools import RoleTools

        self.role = role
        self.tools = RoleTools(where, role)
        trace = DebugTrace.for_role(root.runtime, role, enabled=bool(cfg.get("debug.trace")))
        if trace_fields:
            trace.event("operation", **trace_fields)
        self.conv = executor.start(system=preamble + role_instructions(role), tools=self.tools.specs(),
                                   cwd=str(where), trace=trace)
        self.last = ""

    def send(self, text: str) -> str:
        self.last = self.conv.send(text).text.strip()
        return self.last

    def dirty(self) -> str:
        return self.tools.repo.git.status("--porcelain", "--untracked-files=all").strip()

    def remind_uncommitted(self) -> str:
        """One bounded reminder when work is left uncommitted (admission refuses it)."""
        dirty = self.dirty()
        if dirty:
            self.send(UNCOMMITTED_REMINDER.format(dirty=dirty))
        return self.last

    def close(self) -> None:
        self.conv.close()
        self.tools.repo.close()

    def __enter__(self) -> RoleSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@contextmanager
def cycle_lock(root: MemoryRoot, name: str, *, wait: bool = False) -> Iterator[None]:
    """One run of cycle ``name`` per root at a time (a front-level lock: taken before any
    operation lock and ``memory.lock``)."""
    path = root.ensure_runtime() / CYCLES_DIR / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    if wait:
        with file_lock(path):
            yield
        return
    fd = try_lock(path)
    if fd is None:
        raise ConflictError(f"a {name} run is already in progress on this root")
    try:
        yield
    finally:
        os.close(fd)


# -- per-cycle state (outcomes, failure backoff) -----------------------------------------------

def _state_path(root: MemoryRoot, name: str) -> Path:
    return root.runtime / CYCLES_DIR / f"{name}.json"


def load_state(root: MemoryRoot, name: str) -> dict[str, Any]:
    """The cycle's record: ``last_outcome``, ``failures``, ``next_attempt_at``, ``stopped``.
    It only reports and paces the daemon; a corrupt file reads as empty."""
    try:
        data = json.loads(_state_path(root, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_outcome(root: MemoryRoot, name: str, outcome: dict[str, Any], *, failed: bool,
                   now: float | None = None) -> dict[str, Any]:
    """Save a run's outcome; failures in a row back off exponentially and stop the daemon's
    runs after :data:`MAX_FAILURES` (a successful run, manual or not, starts over)."""
    now = time.time() if now is None else now
    state = load_state(root, name)
    keep = {k: v for k, v in outcome.items() if k in ("state", "operation_id", "landed_commit", "message", "error",
                                                      "log", "result", "receipt_phase", "removed", "status")}
    state["last_outcome"] = {**keep, "at": now}
    if failed:
        failures = int(state.get("failures") or 0) + 1
        state["failures"] = failures
        state["next_attempt_at"] = now + min(BACKOFF_CAP_SECONDS, BACKOFF_SECONDS * 2 ** (failures - 1))
        state["stopped"] = failures >= MAX_FAILURES
    else:
        state.update(failures=0, next_attempt_at=None, stopped=False, last_success_at=now)
    path = _state_path(root, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(state, indent=2, sort_keys=True, default=str) + "\n")
    return state


def backing_off(root: MemoryRoot, name: str, now: float | None = None) -> str | None:
    """Why the daemon should not run ``name`` now (stopped, or waiting out a backoff), or None."""
    state = load_state(root, name)
    now = time.time() if now is None else now
    if state.get("stopped"):
        return f"stopped after {state.get('failures')} failures in a row; run it by hand once the cause is fixed"
    nxt = state.get("next_attempt_at")
    if isinstance(nxt, (int, float)) and nxt > now:
        until = time.strftime("%H:%M:%S", time.localtime(nxt))
        return f"backing off after {state.get('failures')} failure(s) until {until}"
    return None


def error_outcome(exc: EngineError) -> Failure:
    """The failure of a run refused before its operation began."""
    return Failure(exc.to_json(), exc.message, exc.exit_code)


def cycle_state(root: MemoryRoot, name: str, *, running: bool, now: float | None = None) -> str:
    """One word for a cycle: ``running`` (an operation of it is live), ``stopped`` (after
    :data:`MAX_FAILURES` failures in a row), ``backing-off`` (waiting out a failure), or ``idle``."""
    if running:
        return "running"
    state = load_state(root, name)
    if state.get("stopped"):
        return "stopped"
    nxt = state.get("next_attempt_at")
    if isinstance(nxt, (int, float)) and nxt > (time.time() if now is None else now):
        return "backing-off"
    return "idle"


# -- operations of a cycle, by the model or by a host ------------------------------------------

#: The lease holder of a task handed to a host (``rmtui --headless assistant begin``).
HOST_HOLDER = "assistant"


def host_lease(cfg: Any) -> dict[str, Any]:
    """A time-bound lease: a host's task is never reclaimed by liveness, only replaced by
    ``assistant begin --retry`` (which fences its edits)."""
    return {"holder": HOST_HOLDER, "until": time.time() + float(cfg.get("assistant.lease_seconds"))}


def is_host_task(op: Any) -> bool:
    lease = op.lease or {}
    return lease.get("holder") == HOST_HOLDER and lease.get("until") is not None


def live_operations(store: Any, kind: str) -> list[Any]:
    """Unfinished operations of ``kind`` (``store`` is an :class:`OperationStore`), oldest first."""
    return [o for o in store.list(kind=kind) if not o.final]


def hosted_task(root: MemoryRoot, kind: str, store: Any = None) -> str | None:
    """The id of the host task that holds cycle ``kind``, if one is open."""
    if store is None:
        from rmtui.engine.writes.operations import OperationStore

        with OperationStore(root) as own:
            return hosted_task(root, kind, own)
    held = [o.id for o in live_operations(store, kind) if is_host_task(o)]
    return held[-1] if held else None


def refuse_if_hosted(root: MemoryRoot, kind: str, store: Any = None) -> None:
    """A model run never starts while a host holds a task of the same cycle."""
    held = hosted_task(root, kind, store)
    if held:
        raise ConflictError(f"a host holds the {kind} task {held}; complete it, or replace it with "
                            "`rmtui --headless assistant begin --role … --retry`", details={"task_id": held})


def begin_operation(sup: Any, kind: str, role: str, *, lease: dict[str, Any] | None = None) -> Any:
    """Open a cycle's supervisor operation (a host task when ``lease`` is a host lease); the
    one entry both the model path and the host path go through."""
    refuse_if_hosted(sup.root, kind, sup.store)
    return sup.begin(kind, role, lease=lease)


def begin_planned(sup: Any, kind: str, role: str, plan: Callable[[Any], Any], *,
                  lease: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """Open the operation (:func:`begin_operation`) and read its plan; a defect while planning
    fails the operation at once instead of leaving it running."""
    op = begin_operation(sup, kind, role, lease=lease)
    try:
        return op, plan(op)
    except Exception as exc:  # any failure closes the operation, then goes on to the caller
        failed_outcome(sup, op, exc)
        raise


def failed_outcome(sup: Any, op: Any, exc: BaseException) -> Failure:
    """End ``op`` as failed (a defect is wrapped as :class:`OperationFailed` so the operation
    never stays running) and answer the failure with its receipt."""
    err = exc if isinstance(exc, EngineError) else OperationFailed(f"{type(exc).__name__}: {exc}")
    receipt = sup.fail(sup.store.get(op.id), f"{err.kind}: {err.message}")
    return Failure(err.to_json(), err.message, err.exit_code, op.id, receipt)


def daemon_cycle(root: MemoryRoot, name: str, due: Callable[[MemoryRoot], bool],
                 run: Callable[[MemoryRoot], Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """One daemon pass of a cycle: run it when due unless backing off or held by a host's
    task (the cycle's operation kind is its name); never raises. Answers the daemon's log
    record of the pass (``run`` answers an outcome with ``to_json``)."""
    why = backing_off(root, name)
    if why:
        return {"state": "idle", "backoff": why}
    try:
        held = hosted_task(root, name)
    except EngineError as exc:
        return {"state": "failed", "error": exc.message}
    if held:
        return {"state": "idle", "host_task": held}
    if not due(root):
        return {"state": "idle"}
    try:
        out = run(root).to_json()
    except ConflictError as exc:  # a run by hand holds the cycle
        return {"state": "busy", "error": exc.message}
    except EngineError as exc:
        return {"state": "failed", "error": exc.message}
    return {k: out[k] for k in ("state", "operation_id", *keys) if k in out}
