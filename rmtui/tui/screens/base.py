"""What every workbench screen shares: live reloads from root changes, engine errors."""

from __future__ import annotations

from textual.screen import Screen

from rmtui.engine.watch import ChangeSet


def error_text(exc: BaseException) -> tuple[str, str | None]:
    """A person-readable message and the refusal rule (if the engine named one)."""
    from rmtui.engine.errors import EngineError

    if isinstance(exc, EngineError):
        return exc.message, getattr(exc, "rule", None)
    return f"{type(exc).__name__}: {exc}", None


class LiveScreen(Screen):
    """Reloads what a change set touches; while hidden it only remembers what is stale."""

    #: change kinds (rmtui.engine.watch) this screen reloads on
    WATCH_KINDS: frozenset[str] = frozenset()

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._stale: set[str] = set()

    def on_mount(self) -> None:
        self.app.root_changed.subscribe(self, self._root_changed)
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
