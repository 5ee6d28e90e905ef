"""Snapshots of the Pursuit editor (screen 5) on a frozen demo root: the Focus order first,
the map, an F# Pursuit's body and one pending edit in the status line; each of its dialogs
at 80x24.

Update after an intended visual change with
``.venv/bin/python -m pytest tests/test_tui_pursuit_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_tui_support import FROZEN_TS, frozen_demo_root, main_loaded, settle, type_text, wait_for

from rmtui.engine.pursuit import journal as pursuit_journal
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.pursuit import PursuitScreen
from rmtui.tui.widgets.pursuit_tree import PursuitTree

SIZE = (140, 44)
DIALOG_SIZE = (80, 24)


@pytest.fixture
def app(monkeypatch) -> RmtuiApp:
    home = Path(os.environ["HOME"])
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    # the revision hashes the root's path, which differs per run: fix it for the picture
    monkeypatch.setattr(pursuit_journal, "root_key", lambda root: "0" * 64)
    root = frozen_demo_root(home / "demo", monkeypatch)
    return RmtuiApp(root, clock=lambda: FROZEN_TS, live=False)


def test_pursuit_screen_with_a_pending_edit(snap_compare, app):
    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        await pilot.press("5")
        await wait_for(pilot, lambda: isinstance(app.screen, PursuitScreen) and app.screen.loaded,
                       what="the Pursuit editor")
        screen = app.screen
        tree = screen.query_one(PursuitTree)
        while tree.highlighted_id != "faster-ingestion":
            await pilot.press("down")
        await pilot.press("f")  # into Focus: one pending edit
        await wait_for(pilot, lambda: not screen.busy and screen.state.pending_edits == 1, what="the edit")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_pursuit_screen_narrow(snap_compare, app, size):
    """The narrow sizes: the map's long labels are clipped with no sideways scrollbar (its
    thumb showed as a stray mark under the map) and the body's scrollbar is one cell wide."""
    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        await pilot.press("5")
        await wait_for(pilot, lambda: isinstance(app.screen, PursuitScreen) and app.screen.loaded,
                       what="the Pursuit editor")
        screen = app.screen
        tree = screen.query_one(PursuitTree)
        while tree.highlighted_id != "faster-ingestion":
            await pilot.press("down")
        await pilot.press("f")
        await wait_for(pilot, lambda: not screen.busy and screen.state.pending_edits == 1, what="the edit")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_edit_body_dialog(snap_compare, app):
    async def run_before(pilot) -> None:
        from rmtui.tui.screens.dialogs import TextScreen

        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        await pilot.press("5")
        await wait_for(pilot, lambda: isinstance(app.screen, PursuitScreen) and app.screen.loaded,
                       what="the Pursuit editor")
        tree = app.screen.query_one(PursuitTree)
        while tree.highlighted_id != "faster-ingestion":
            await pilot.press("down")
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen), what="the body dialog")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=DIALOG_SIZE, run_before=run_before)


async def _at_faster_ingestion(app, pilot) -> None:
    await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
    await pilot.press("5")
    await wait_for(pilot, lambda: isinstance(app.screen, PursuitScreen) and app.screen.loaded,
                   what="the Pursuit editor")
    tree = app.screen.query_one(PursuitTree)
    while tree.highlighted_id != "faster-ingestion":
        await pilot.press("down")


def test_move_dialog_refusing_a_parent_that_does_not_exist(snap_compare, app):
    async def run_before(pilot) -> None:
        from rmtui.tui.screens.dialogs import PromptScreen

        await _at_faster_ingestion(app, pilot)
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the parent prompt")
        await pilot.press("end", "ctrl+u")
        await type_text(pilot, "no-such")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "no-such" in str(app.screen.query_one(".dialog-error").render()),
                       what="the refusal")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=DIALOG_SIZE, run_before=run_before)


def test_new_pursuit_parent_dialog(snap_compare, app):
    async def run_before(pilot) -> None:
        from rmtui.tui.screens.dialogs import PromptScreen

        await _at_faster_ingestion(app, pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the title prompt")
        await type_text(pilot, "Ship the CLI")
        await pilot.press("enter")
        await wait_for(pilot, lambda: getattr(app.screen, "input_id", "") == "pursuit-parent", what="the parent prompt")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=DIALOG_SIZE, run_before=run_before)


def test_delete_pursuit_dialog(snap_compare, app):
    async def run_before(pilot) -> None:
        from rmtui.tui.screens.dialogs import ConfirmScreen

        await _at_faster_ingestion(app, pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the delete confirmation")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=DIALOG_SIZE, run_before=run_before)
