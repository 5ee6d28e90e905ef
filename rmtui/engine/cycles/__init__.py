"""Cycles that tend memory: Pruner, Insight, Historian, corrections; the
same cycles run by a host instead of a model (``hosted``), and their state at a glance
(``overview``, for ``status``).

Each module imports its heavier parts (GitPython, the supervisor, executors) inside the
functions that need them, so importing the package stays cheap.
"""

from __future__ import annotations


def install_daemon_cycles() -> None:
    """Register the Pruner due check and the Insight watcher with the daemon (idempotent)."""
    from rmtui.engine.cycles.insight import insight_cycle
    from rmtui.engine.cycles.pruner import prune_cycle
    from rmtui.engine.roles.update_driver import DAEMON_CYCLES

    for cycle in (prune_cycle, insight_cycle):
        if cycle not in DAEMON_CYCLES:
            DAEMON_CYCLES.append(cycle)
