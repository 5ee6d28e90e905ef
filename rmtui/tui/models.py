"""View models: what the readers hand the screens, already shaped for display.

Workers build these off the UI thread and carry them in messages (:mod:`rmtui.tui.messages`);
widgets only read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmtui.engine.writes.diffs import FileDiff

#: One file of an operation's diff: the engine's per-file diff is already what the screen shows.
DiffFile = FileDiff


@dataclass
class GraphState:
    """One consistent reading of the root's graph, with everything the screen derives from
    it computed in the worker (so a 10,000-node reload costs the UI thread almost nothing)."""

    graph: Any  # rmtui.engine.memory.graph.Graph
    issues: list
    head: str | None
    root_name: str
    counts: dict = field(default_factory=dict)
    domains: dict = field(default_factory=dict)  # domain -> {"headings", "nodes", "uncertain", "files"}
    incoming: dict = field(default_factory=dict)  # target id -> [(item, edge)]
    index: list = field(default_factory=list)  # [(item, "id title" lower-cased)] in source order


@dataclass
class LastCommit:
    """The last commit that changed an item, as the preview prints it."""

    sha: str
    subject: str
    date: str  # "YYYY-MM-DD HH:MM", UTC


@dataclass
class InsightLog:
    name: str
    text: str


@dataclass
class SharedViewRow:
    """One shared-view connection as the Sharing screen lists it (``shared-view list --json``)."""

    view_id: str
    kind: str  # MF (file view) | MQ (question view)
    status: str  # fresh | stale | unavailable
    reason: str | None = None  # why it is stale or unavailable
    items: int | None = None
    last_success_at: str | None = None
    source: str | None = None
    transport: str = ""

    @property
    def is_file(self) -> bool:
        return self.kind == "MF"
