"""Messages between workers and the widgets that own state.

Workers do I/O and only post these; handlers on the UI thread own all state. Messages
that can arrive in bursts merge (``can_replace``) so a burst is handled once. Worker results
do not bubble: the screen that started the worker is the one that owns the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from rmtui.engine.watch import ChangeSet


class RootChanged(Message):
    """Files of the root changed; a newer message absorbs any still-pending one."""

    def __init__(self, changes: ChangeSet) -> None:
        super().__init__()
        self.changes = changes

    def can_replace(self, message: Message) -> bool:
        if isinstance(message, RootChanged):
            self.changes = message.changes.merge(self.changes)
            return True
        return False


@dataclass
class GraphState:
    """One consistent reading of the root's graph, with everything the screen derives from
    it computed in the worker (so a 10,000-node reload costs the UI thread almost nothing)."""

    graph: Any  # rmtui.engine.graph.Graph
    issues: list
    head: str | None
    root_name: str
    counts: dict = field(default_factory=dict)
    domains: dict = field(default_factory=dict)  # domain -> {"headings", "nodes", "uncertain", "files"}
    incoming: dict = field(default_factory=dict)  # target id -> [(item, edge)]
    index: list = field(default_factory=list)  # [(item, "id title" lower-cased)] in source order


class GraphLoaded(Message, bubble=False):
    def __init__(self, state: GraphState, signature: object = None) -> None:
        super().__init__()
        self.state = state
        self.signature = signature

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GraphLoaded)


class QueueLoaded(Message, bubble=False):
    def __init__(self, evidence: list, counts: dict[str, int], signature: object = None) -> None:
        super().__init__()
        self.evidence = evidence
        self.counts = counts
        self.signature = signature

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, QueueLoaded)


class OperationsLoaded(Message, bubble=False):
    def __init__(self, operations: list, receipts: list, signature: object = None) -> None:
        super().__init__()
        self.operations = operations
        self.receipts = receipts
        self.signature = signature

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, OperationsLoaded)


@dataclass
class LastCommit:
    sha: str
    subject: str
    date: str


class ItemHistoryLoaded(Message, bubble=False):
    """The last commit that changed an item (by its key), or None when uncommitted."""

    def __init__(self, key: str, commit: LastCommit | None) -> None:
        super().__init__()
        self.key = key
        self.commit = commit


class EngineDone(Message, bubble=False):
    """A write through the engine finished; ``text`` is what to tell the person."""

    def __init__(self, text: str, *, reload: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.text = text
        self.reload = reload


class EngineFailed(Message, bubble=False):
    """An engine call refused or failed; ``text`` says why (never a traceback)."""

    def __init__(self, action: str, text: str, *, rule: str | None = None) -> None:
        super().__init__()
        self.action = action
        self.text = text
        self.rule = rule


class FollowItem(Message):
    """Show an item by id (following an edge or jumping); ``push`` records history."""

    def __init__(self, item_id: str, *, push: bool = True) -> None:
        super().__init__()
        self.item_id = item_id
        self.push = push


@dataclass
class DiffFile:
    path: str
    lines: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0


class DiffLoaded(Message, bubble=False):
    def __init__(self, op_id: str, header: dict, files: list[DiffFile]) -> None:
        super().__init__()
        self.op_id = op_id
        self.header = header
        self.files = files


@dataclass
class InsightLog:
    name: str
    text: str


class InsightLogsLoaded(Message, bubble=False):
    def __init__(self, logs: list[InsightLog]) -> None:
        super().__init__()
        self.logs = logs

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, InsightLogsLoaded)


class MaintenanceLoaded(Message, bubble=False):
    """Maintenance status (None when none is active) and the editable files."""

    def __init__(self, status: dict | None, files: list[str]) -> None:
        super().__init__()
        self.status = status
        self.files = files

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MaintenanceLoaded)


class RetrieveAnswered(Message, bubble=False):
    def __init__(self, need: str, results: list[dict], text: str, *, status: str = "",
                 error: str | None = None) -> None:
        super().__init__()
        self.need = need
        self.results = results
        self.text = text
        self.status = status
        self.error = error
