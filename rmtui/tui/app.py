"""The rmtui workbench: a Textual app over the engine, live from file-system events.

Screens are modes (main, insight, maintain, retrieve, pursuit, sharing), switched with 1-6;
``?`` lists the keys of the current screen with their binding ids. One watcher
worker turns file events of the root into merged :class:`RootChanged` messages; the app
re-publishes them on :attr:`RmtuiApp.root_changed`, and each screen reloads only what the
change touched, in its own workers. Themes come from ``themes/``; key remaps and the chosen
theme come from the user's config (:mod:`rmtui.tui.userconfig`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from importlib import import_module
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.signal import Signal
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from rmtui.engine.host.watch import ChangeSet
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.tui import readers
from rmtui.tui.keys import key_rows, pane_order
from rmtui.tui.messages import EngineFailed, RootChanged
from rmtui.tui.screens.base import LiveScreen
from rmtui.tui.screens.dialogs import ErrorScreen, HelpScreen
from rmtui.tui.screens.main import MainScreen
from rmtui.tui.themes import DEFAULT_THEME, load_themes
from rmtui.tui.userconfig import UserConfig

SWITCH_INTERVAL = 0.001  # seconds
#: seconds the background work waits for the first screen to show its content (see screen_shown)
BACKGROUND_WAIT = 3.0
#: ... and how long after it shows: the first keys typed at the tree are answered before it
BACKGROUND_AFTER_SHOWN = 0.5
SCREENS_PACKAGE = "rmtui.tui.screens"


def lazy_screen(module: str, name: str) -> Callable[[], Screen]:
    """A mode's screen, imported when the mode is first shown."""

    def make() -> Screen:
        return getattr(import_module(f"{SCREENS_PACKAGE}.{module}"), name)()

    return make

SCREEN_NAMES = {"main": "Main", "insight": "Insight logs", "maintain": "Maintenance", "retrieve": "Retrieve",
                "pursuit": "Pursuit editor", "sharing": "Sharing"}


class RmtuiApp(App):
    TITLE = "rmtui"
    # the main screen's CSS is read with the app's: as the screen's own, it made Textual parse
    # every stylesheet once more when the first screen mounted (about 0.06 s of a cold start)
    CSS_PATH: ClassVar = [Path(__file__).parent / "app.tcss", Path(__file__).parent / "screens" / "main.tcss"]
    # the other screens import on first use: a cold start pays only for the main screen
    MODES: ClassVar = {"main": MainScreen, "insight": lazy_screen("insight", "InsightScreen"),
                       "maintain": lazy_screen("maintenance", "MaintenanceScreen"),
                       "retrieve": lazy_screen("retrieve", "RetrieveScreen"),
                       "pursuit": lazy_screen("pursuit", "PursuitScreen"),
                       "sharing": lazy_screen("sharing", "SharingScreen")}
    DEFAULT_MODE = "main"
    BINDINGS: ClassVar = [
        # `?` first: on a narrow footer the way to every other key stays in sight
        Binding("question_mark", "help", "Keys", id="app.help"),
        Binding("1", "switch_mode('main')", "Main", id="app.screen.main"),
        Binding("2", "switch_mode('insight')", "Insight", id="app.screen.insight"),
        Binding("3", "switch_mode('maintain')", "Maintain", id="app.screen.maintain"),
        Binding("4", "switch_mode('retrieve')", "Retrieve", id="app.screen.retrieve"),
        Binding("5", "switch_mode('pursuit')", "Pursuit", id="app.screen.pursuit"),
        Binding("6", "switch_mode('sharing')", "Sharing", id="app.screen.sharing"),
        Binding("ctrl+t", "change_theme", "Theme", id="app.theme"),
        Binding("q", "quit", "Quit", id="app.quit"),
        # escape closes the palette's key panel ("Keys" in ctrl+p) before anything else sees it
        Binding("escape", "hide_help_panel", "Hide the key panel", show=False, priority=True, id="app.hide_keys"),
    ]

    def __init__(self, root: MemoryRoot, *, config: UserConfig | None = None, themes_dir: Path | None = None,
                 clock: Callable[[], float] = time.time, live: bool = True) -> None:
        super().__init__()
        # Workers parse and validate large roots in Python threads; a short GIL switch
        # interval lets the UI thread in between, so keys and paints never wait behind them.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
        self.root = root
        self.clock = clock
        self.live = live
        self.user_config = config if config is not None else UserConfig.load()
        self.root_changed: Signal[ChangeSet] = Signal(self, "root-changed")
        self._help_panel = False
        self._stop_watch = threading.Event()
        #: set once the root watch is in place: a change made after it is seen as it happens
        self.watching = threading.Event()
        self._background_started = False
        self._background_timer: Timer | None = None
        self._startup_problems: list[str] = list(self.user_config.problems)
        themes = load_themes(themes_dir)
        self._startup_problems += themes.problems
        for theme in themes.themes:
            self.register_theme(theme)
        wanted = self.user_config.theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            if self.user_config.theme:
                self._startup_problems.append(f"theme {wanted!r} is not installed; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = wanted
        known = binding_ids() if self.user_config.keys else set()
        unknown = sorted(set(self.user_config.keys) - known)
        if unknown:
            self._startup_problems.append(f"unknown binding ids in {self.user_config.path}: {', '.join(unknown)}")
        self.keymap_overrides = {k: v for k, v in self.user_config.keys.items() if k in known}
        self.set_keymap(self.keymap_overrides)

    def on_mount(self) -> None:
        self.sub_title = str(self.root.path)
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.app_resume_signal.subscribe(self, self._resumed)
        for problem in self._startup_problems:
            self.notify(problem, severity="warning", timeout=10)
        if self.live:  # a root too broken to show its graph still gets them, after a while
            self._background_timer = self.set_timer(BACKGROUND_WAIT, self._start_background)

    def screen_shown(self) -> None:
        """The first screen shows what it read: the background work (settling operations a
        crashed writer left, the root watch) starts shortly after. Started with the screen,
        their imports and reads took the interpreter lock from the first screen and its reading
        (about 0.15 s of a 10,000-node start); started at once, from the first keys typed at the
        tree. The watch's first wake-up reads everything again, so a change made meanwhile is
        still seen."""
        if not self.live or self._background_started:
            return
        if self._background_timer is not None:
            self._background_timer.stop()
        self._background_timer = self.set_timer(BACKGROUND_AFTER_SHOWN, self._start_background)

    def _start_background(self) -> None:
        if self._background_started:
            return
        self._background_started = True
        self.recover_operations()
        self.watch_root()

    def on_unmount(self) -> None:
        self._stop_watch.set()

    # -- live updates --------------------------------------------------------
    @work(thread=True, exclusive=True, group="watch", exit_on_error=False)
    def watch_root(self) -> None:
        from rmtui.engine.host.watch import KINDS, ChangeSet, watch_root

        def ready() -> None:  # the screens loaded before the watch was in place: read all again
            self.watching.set()
            self.post_message(RootChanged(ChangeSet(kinds=frozenset(KINDS))))

        for changes in watch_root(self.root, stop_event=self._stop_watch, on_ready=ready):
            self.post_message(RootChanged(changes))

    @work(thread=True, exclusive=True, group="recover", exit_on_error=False)
    def recover_operations(self) -> None:
        """Engine start: settle operations a crashed writer left unfinished."""
        from rmtui.engine.errors import EngineError
        from rmtui.engine.writes.supervisor import Supervisor

        try:
            with Supervisor(self.root) as sup:
                done = sup.recover()
        except EngineError as exc:
            self.post_message(EngineFailed("recover", f"recovery: {exc.message}"))
            return
        settled = [f"{k} {len(v)}" for k, v in done.items() if v and k != "cleaned"]
        if settled:
            self.post_message(EngineFailed("recover", "recovered unfinished operations: " + ", ".join(settled)))

    def on_root_changed(self, message: RootChanged) -> None:
        self.root_changed.publish(message.changes)

    def _resumed(self, _app: App) -> None:
        """Back from a suspended ``$EDITOR`` (or ctrl+z): the terminal was another program's, so
        repaint all of it, and re-read what the screen shows (the files changed meanwhile)."""
        base = self.mode_screen(self.current_mode)
        if isinstance(base, LiveScreen):
            base.reload(set(base.WATCH_KINDS))
        self.screen.refresh(repaint=True, layout=True)
        self.call_after_refresh(self.refresh, repaint=True, layout=True)

    # -- themes --------------------------------------------------------------
    def _theme_changed(self, theme) -> None:
        if theme.name != self.user_config.theme:
            self.remember_theme(theme.name)

    @work(thread=True, exclusive=True, group="config", exit_on_error=False)
    def remember_theme(self, name: str) -> None:
        try:
            self.user_config.save_theme(name)
        except OSError as exc:
            self.post_message(EngineFailed("theme", f"cannot save the theme choice: {exc}"))

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.notify(message.text, severity="warning")

    # -- unexpected worker errors -------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a worker's unexpected exception lands (screens forward theirs):
        workers catch only EngineError, so anything here is a bug and is shown as one."""
        worker = event.worker
        if worker.state != WorkerState.ERROR or worker.error is None:
            return
        if isinstance(self.screen, ErrorScreen) and self.screen.shows(worker.error):
            return  # a reload failing again the same way: one dialog is enough
        self.push_screen(ErrorScreen(worker.error, worker=worker.name))

    # -- keys: help screen, palette, key panel -------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "hide_help_panel":
            return self._help_panel and bool(self.screen.query("HelpPanel"))
        if action == "help":
            return not isinstance(self.screen, HelpScreen)
        return True

    def action_show_help_panel(self) -> None:
        super().action_show_help_panel()
        self._help_panel = True

    def action_hide_help_panel(self) -> None:
        super().action_hide_help_panel()
        self._help_panel = False

    def screen_name(self, screen: Screen) -> str:
        if self.mode_screen(self.current_mode) is screen:
            return SCREEN_NAMES.get(self.current_mode, "")
        return {"DiffScreen": "Diff", "EvidenceScreen": "Evidence", "PromptScreen": "Dialog",
                "ConfirmScreen": "Confirm", "ErrorScreen": "Error", "TextScreen": "Dialog",
                "AnswerScreen": "Answer"}.get(type(screen).__name__, "This screen")

    def action_help(self) -> None:
        screen = self.screen
        name = self.screen_name(screen)
        self.push_screen(HelpScreen(key_rows(self, screen, name), screen_name=name,
                                    config_path=readers.display_path(self.user_config.path),
                                    panes=pane_order(screen)))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for row in key_rows(self, screen, self.screen_name(screen)):
            where = "" if row.section == "Everywhere" else row.section
            yield SystemCommand(f"{where + ': ' if where else ''}{row.description}",
                                f"key {row.keys.split(' / ')[0]} · binding id {row.binding_id}",
                                partial(self._palette_run, row.node, row.action))

    async def _palette_run(self, node, action: str) -> None:
        name = action.split("(", 1)[0]
        allowed = node.check_action(name, ()) if hasattr(node, "check_action") else True
        if not allowed:
            self.notify(f"{action} does not apply here right now", severity="warning")
            return
        await self.run_action(action, node)

    # -- for tests and the benchmark ----------------------------------------
    def mode_screen(self, mode: str) -> Screen | None:
        """The base screen of a mode, once the mode has been shown."""
        stack = self._screen_stacks.get(mode)
        return stack[0] if stack else None


def binding_ids() -> set[str]:
    """Every binding id of the workbench (what a user's ``[keys]`` may remap)."""
    from rmtui.tui.screens.dialogs import ConfirmScreen, EvidenceScreen, PromptScreen, TextScreen
    from rmtui.tui.screens.diff import DiffScreen
    from rmtui.tui.screens.insight import InsightScreen
    from rmtui.tui.screens.maintenance import MaintenanceScreen
    from rmtui.tui.screens.pursuit import PursuitScreen
    from rmtui.tui.screens.retrieve import RetrieveScreen
    from rmtui.tui.screens.sharing import AnswerScreen, SharingScreen
    from rmtui.tui.widgets.evidence_table import EvidenceTable
    from rmtui.tui.widgets.memory_tree import MemoryTree
    from rmtui.tui.widgets.operations_table import OperationsTable
    from rmtui.tui.widgets.preview import EdgeList
    from rmtui.tui.widgets.receipts_table import ReceiptsTable
    from rmtui.tui.widgets.views_table import SharedViewsTable

    owners = (RmtuiApp, MainScreen, InsightScreen, MaintenanceScreen, RetrieveScreen, DiffScreen, PromptScreen,
              EvidenceScreen, ErrorScreen, ConfirmScreen, HelpScreen, EvidenceTable, OperationsTable, ReceiptsTable,
              EdgeList, MemoryTree, SharingScreen, AnswerScreen, SharedViewsTable, PursuitScreen, TextScreen)
    return {b.id for cls in owners for b in cls.BINDINGS if isinstance(b, Binding) and b.id}


def run_app(root: MemoryRoot) -> int:
    RmtuiApp(root).run()
    return 0
