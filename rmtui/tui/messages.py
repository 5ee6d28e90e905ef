"""Messages between workers and the widgets that own state.

Workers do I/O and only post these; handlers on the UI thread own all state. Messages
that can arrive in bursts merge (``can_replace``) so a burst is handled once. Worker results
do not bubble: the screen that started the worker is the one that owns the answer. What the
messages carry (graph readings, diffs, commits) is in :mod:`rmtui.tui.models`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

from rmtui.engine.host.watch import ChangeSet
from rmtui.tui.models import DiffFile, GraphState, InsightLog, LastCommit, SharedViewRow

if TYPE_CHECKING:  # the engine modules load with the workers that use them, not at start
    from rmtui.engine.host.waiting import QueueWaiting
    from rmtui.engine.progress import Progress
    from rmtui.engine.sync.overview import SyncOverview
    from rmtui.engine.views.consumer import PullResult
    from rmtui.engine.views.questions import QuestionAnswer


@dataclass
class RootChanged(Message):
    """Files of the root changed; a newer message absorbs any still-pending one."""

    changes: ChangeSet

    def can_replace(self, message: Message) -> bool:
        if isinstance(message, RootChanged):
            self.changes = message.changes.merge(self.changes)
            return True
        return False


@dataclass
class GraphLoaded(Message, bubble=False):
    state: GraphState
    signature: object = None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GraphLoaded)


@dataclass
class QueueLoaded(Message, bubble=False):
    evidence: list
    counts: dict[str, int]
    signature: object = None
    #: uid -> which machine holds or sent it (the machine column; empty when sync is off)
    machines: dict[str, str] = field(default_factory=dict, kw_only=True)

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, QueueLoaded)


@dataclass
class QueueWaitingLoaded(Message, bubble=False):
    """Why queued evidence is not moving (None: nothing queued or claimed); read right after
    the queue, so the queue shows without waiting for it."""

    waiting: QueueWaiting | None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, QueueWaitingLoaded)


@dataclass
class OperationsLoaded(Message, bubble=False):
    operations: list
    receipts: list
    signature: object = None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, OperationsLoaded)


@dataclass
class ItemHistoryLoaded(Message, bubble=False):
    """The last commit that changed an item (by its key), or None when uncommitted."""

    key: str
    commit: LastCommit | None


@dataclass
class EngineDone(Message, bubble=False):
    """A write through the engine finished; ``text`` is what to tell the person."""

    text: str
    reload: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass
class EngineFailed(Message, bubble=False):
    """An engine call refused or failed; ``text`` says why (never a traceback)."""

    action: str
    text: str
    rule: str | None = field(default=None, kw_only=True)


@dataclass
class EngineProgress(Message, bubble=False):
    """A step of long engine work (``work`` names which); a newer report absorbs a pending one."""

    work: str
    progress: Progress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EngineProgress) and message.work == self.work


@dataclass
class EvidenceDecided(Message, bubble=False):
    """Evidence was approved or rejected (or a decision undone); ``before`` is each uid's
    state before, so the decision can be undone."""

    action: str  # approve | reject | undo
    uids: list[str]
    before: dict[str, str]
    text: str


@dataclass
class FilterTyped(Message, bubble=False):
    """The graph filter's text changed. Keys typed faster than the tree rebuilds merge, so a
    burst rebuilds the tree once, for the text typed last."""

    text: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FilterTyped)


@dataclass
class FollowItem(Message):
    """Show an item by id (following an edge or jumping); ``push`` records history."""

    item_id: str
    push: bool = field(default=True, kw_only=True)


@dataclass
class DiffLoaded(Message, bubble=False):
    op_id: str
    header: dict
    files: list[DiffFile]


@dataclass
class InsightLogsLoaded(Message, bubble=False):
    logs: list[InsightLog]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, InsightLogsLoaded)


@dataclass
class MaintenanceLoaded(Message, bubble=False):
    """Maintenance status (None when none is active) and the editable files."""

    status: dict | None
    files: list[str]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MaintenanceLoaded)


@dataclass
class RetrieveAnswered(Message, bubble=False):
    need: str
    results: list[dict]
    text: str
    status: str = field(default="", kw_only=True)
    error: str | None = field(default=None, kw_only=True)


@dataclass
class SyncLoaded(Message, bubble=False):
    """The root's sync state (no network: as of the last fetch)."""

    overview: SyncOverview

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SyncLoaded)


@dataclass
class SyncFinished(Message, bubble=False):
    """A sync pull or push ended; ``result`` is the engine's ``SyncResult.to_json()``."""

    action: str  # pull | push
    result: dict


@dataclass
class SharedViewsLoaded(Message, bubble=False):
    views: list[SharedViewRow]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SharedViewsLoaded)


@dataclass
class SharedViewsPulled(Message, bubble=False):
    """Pull outcomes, one per view."""

    results: list[PullResult]


@dataclass
class SharedQuestionAnswered(Message, bubble=False):
    """A question view's answer (``consumer.ask``'s): shown, never written to memory."""

    question: str
    result: QuestionAnswer
