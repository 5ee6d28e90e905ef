"""Snapshots of the workbench screens on a frozen demo root (fixed size, dates, ids, ages).

Update after an intended visual change with
``.venv/bin/python -m pytest tests/test_tui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.diff import DiffScreen
from rmtui.tui.widgets.preview import ItemPreview

from test_tui_support import FROZEN_TS, frozen_demo_root, main_loaded, wait_for

SIZE = (140, 44)


@pytest.fixture
def frozen(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    # under HOME, so every screen shows it as ~/demo whatever the temporary folder is
    return frozen_demo_root(Path(os.environ["HOME"]) / "demo", monkeypatch)


def app_for(root) -> RmtuiApp:
    return RmtuiApp(root, clock=lambda: FROZEN_TS, live=False)


def test_main_screen(snap_compare, frozen):
    app = app_for(frozen)

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        app.screen.go_to("ing-poll")
        preview = app.screen.query_one(ItemPreview)
        await wait_for(pilot, lambda: "demo: seed" in preview.commit_text, what="the preview")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_diff_screen(snap_compare, frozen):
    app = app_for(frozen)

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        await app.push_screen(DiffScreen("maintenance-20250602T093000Z-00000001"))
        await wait_for(pilot, lambda: app.screen.loaded, what="the diff")
        await pilot.press("n", "n")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_insight_screen(snap_compare, frozen):
    app = app_for(frozen)

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        await pilot.press("2")
        await wait_for(pilot, lambda: app.screen.loaded and app.screen.shown, what="the insight log")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_maintenance_screen_with_a_live_validation_error(snap_compare, frozen):
    app = app_for(frozen)

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        await pilot.press("3")
        maint = app.screen
        await wait_for(pilot, lambda: maint.loaded, what="the maintenance screen")
        await pilot.press("b")
        await wait_for(pilot, lambda: maint.status is not None, what="the worktree")
        target = Path(maint.status["worktree"]) / "MEMORY_ingestion.md"
        target.write_text(target.read_text(encoding="utf-8") + "- `ing-broken` Points nowhere. → [dep:nowhere]\n",
                          encoding="utf-8")
        maint.load_status()
        await wait_for(pilot, lambda: maint.status["dirty"] and not maint.status["valid"], what="the error")
        maint.query_one("#maint-files").highlighted = maint.files.index("MEMORY_ingestion.md")
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
