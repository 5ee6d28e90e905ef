"""What every workbench screen shares: live reloads from root changes, worker errors."""

from __future__ import annotations

from textual.screen import Screen
from textual.worker import Worker, WorkerState

from rmtui.engine.errors import EngineError
from rmtui.engine.host.watch import ChangeSet
from rmtui.tui.context import workbench


def error_text(exc: EngineError) -> tuple[str, str | None]:
    """A person-readable message and the refusal rule (if the engine named one)."""
    return exc.message, getattr(exc, "rule", None)


class WorkbenchScreen(Screen):
    """A screen whose workers catch only :class:`EngineError` (shown where it was asked for).

    Anything else a worker raises is a bug: Textual's ``Worker.StateChanged`` does not
    bubble, so the screen undoes its own busy state (:meth:`worker_failed`) and forwards the
    failure to the app's one handler, which shows it in an error dialog.
    """

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.worker_failed(event.worker)
            self.app.post_message(Worker.StateChanged(event.worker, event.state))

    def worker_failed(self, worker: Worker) -> None:
        """Leave any busy or loading state that the failed worker would have ended."""


class LiveScreen(WorkbenchScreen):
    """Reloads what a change set touches; while hidden it only remembers what is stale."""

    #: change kinds (rmtui.engine.host.watch) this screen reloads on
    WATCH_KINDS: frozenset[str] = frozenset()

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._stale: set[str] = set()

    def on_mount(self) -> None:
        workbench(self).root_changed.subscribe(self, self._root_changed)
        self.reload(set(self.WATCH_KINDS))

    def _root_changed(self, changes: ChangeSet) -> None:
        kinds = set(changes.kinds) & self.WATCH_KINDS
        if not kinds:
            return
        if not self.is_current:
            self._stale |= kinds
            return
        self.on_changes(changes, kinds)

    def on_screen_resume(self) -> None:
        if self._stale:
            kinds, self._stale = self._stale, set()
            self.reload(kinds)

    def on_changes(self, changes: ChangeSet, kinds: set[str]) -> None:
        self.reload(kinds)

    def reload(self, kinds: set[str]) -> None:
        """Start the workers that re-read what ``kinds`` cover."""
