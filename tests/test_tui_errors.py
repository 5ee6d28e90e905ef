"""Worker errors in the workbench: an engine refusal is a notice on the screen that asked;
anything else is a bug, shown by the app's one handler in a dialog with where it was raised."""

from __future__ import annotations

import pytest
from test_tui_support import main_loaded, quiet, type_text, wait_for
from tui_faults import broken_last_commit

from rmtui.engine.host.demo import create_demo_root
from rmtui.tui import readers
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.dialogs import ErrorScreen, PromptScreen
from rmtui.tui.screens.diff import DiffScreen
from rmtui.tui.widgets.preview import ItemPreview

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


async def test_a_plain_exception_in_a_worker_opens_the_error_dialog_with_its_location(demo, monkeypatch):
    monkeypatch.setattr(readers, "last_commit", broken_last_commit)
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen to load")
        main = app.screen
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the go-to prompt")
        await type_text(pilot, "ing-poll")
        await pilot.press("enter")  # the preview follows, and its history worker raises
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorScreen), what="the error dialog")
        dialog = app.screen
        line = broken_last_commit.__code__.co_firstlineno + 1
        assert dialog.kind == "RuntimeError" and dialog.message == "blame exploded"
        assert dialog.location == f"tests/tui_faults.py:{line} in broken_last_commit"
        shown = str(dialog.query_one("#error-message").render()) + str(dialog.query_one("#error-location").render())
        assert "RuntimeError: blame exploded" in shown and f"tui_faults.py:{line}" in shown
        assert "load_history" in str(dialog.query_one("#error-worker").render())
        assert main.query_one(ItemPreview).current_key == "ing-poll"  # not a toast, not a crash
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is main, what="the dialog to close on enter")
        await pilot.press("g")  # the app still works; the next failure shows again, escape closes it
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the go-to prompt")
        await type_text(pilot, "ing-queue")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorScreen), what="the error dialog again")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main, what="the dialog to close on escape")
        assert main.query_one(ItemPreview).current_key == "ing-queue"


async def test_an_engine_error_in_a_worker_is_a_notice_on_its_screen_not_the_dialog(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen to load")
        app.push_screen(DiffScreen("no-such-operation"))  # the engine refuses: UsageError
        await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.loaded, what="the refusal")
        await quiet(app, pilot)
        assert isinstance(app.screen, DiffScreen)
        assert not any(isinstance(s, ErrorScreen) for s in app.screen_stack)
        header = str(app.screen.query_one("#diff-header").render())
        assert "cannot show the diff: unknown operation 'no-such-operation'" in header
        await pilot.press("escape")
        assert not isinstance(app.screen, DiffScreen)
