"""Snapshots of every workbench screen and dialog on a frozen demo root (fixed sizes, dates,
ids, ages): the main screen at three sizes and in each theme, the other screens, and every
dialog at 80x24.

Update after an intended visual change with
``.venv/bin/python -m pytest tests/test_tui_snapshots.py --snapshot-update``. The README's
screenshot ``docs/main-screen.svg`` is a copy of ``test_main_screen_sizes[readme]``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_tui_support import (
    FROZEN_TS,
    frozen_demo_root,
    main_loaded,
    palette_lists,
    row_to,
    settle,
    type_text,
    wait_for,
)
from tui_faults import broken_last_commit

from rmtui.engine.retrieval import retrieve as retrieve_module
from rmtui.engine.retrieval.result import RetrieveResult
from rmtui.tui import readers
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.dialogs import ConfirmScreen, ErrorScreen, EvidenceScreen, HelpScreen, PromptScreen
from rmtui.tui.screens.diff import DiffScreen
from rmtui.tui.widgets.evidence_pane import EvidencePane
from rmtui.tui.widgets.evidence_table import EvidenceTable
from rmtui.tui.widgets.preview import ItemPreview

SIZE = (140, 44)
SIZES = {"80x24": (80, 24), "readme": (140, 42), "200x50": (200, 50)}
THEMES = ("rmtui-dark", "rmtui-light", "rmtui-tidepool")
DIALOG_SIZE = (80, 24)  # every dialog fits the smallest terminal the workbench supports
#: One step a dialog test takes with the pilot (before the keys that open the dialog, or in it).
Step = Callable[..., Awaitable[None]]


@pytest.fixture
def frozen(monkeypatch):
    home = Path(os.environ["HOME"])
    # under HOME, so every screen shows them as ~/demo and ~/.config/rmtui/config.toml
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return frozen_demo_root(home / "demo", monkeypatch)


@pytest.fixture
def app(frozen) -> RmtuiApp:
    return RmtuiApp(frozen, clock=lambda: FROZEN_TS, live=False)


async def loaded(app, pilot) -> None:
    await wait_for(pilot, lambda: main_loaded(app), what="the main screen")


async def show_item(app, pilot, item_id: str) -> None:
    """Go to an item with g, as a person would, and wait for its last commit."""
    await pilot.press("g")
    await type_text(pilot, item_id)
    await pilot.press("enter")
    preview = app.screen.query_one(ItemPreview)
    await wait_for(pilot, lambda: preview.current_key == item_id and "demo: seed" in preview.commit_text,
                   what="the preview")


# -- the main screen -------------------------------------------------------------------------

@pytest.mark.parametrize("size", list(SIZES), ids=list(SIZES))
def test_main_screen_sizes(snap_compare, app, size):
    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await show_item(app, pilot, "ing-poll")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_main_screen_themes(snap_compare, app, theme):
    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: bool(app.screen.query("CommandInput")), what="the theme picker")
        await type_text(pilot, theme)
        await palette_lists(app, pilot, theme)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.theme == theme, what="the theme")
        await show_item(app, pilot, "ing-queue")
        await pilot.press("e")  # the evidence pane focused: its keys in the footer
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_main_screen_edge_list_and_breadcrumb(snap_compare, app):
    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await show_item(app, pilot, "ing-poll")
        await pilot.press("enter")  # its only edge: to ing-queue
        preview = app.screen.query_one(ItemPreview)
        await wait_for(pilot, lambda: preview.current_key == "ing-queue", what="the followed edge")
        await pilot.press("enter")  # several: the edge list opens
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_main_screen_compact_with_the_receipts_pane(snap_compare, app):
    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await pilot.press("o", "o")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZES["80x24"], run_before=run_before)


#: the widths where the main screen's columns were cut: the smallest terminal and the narrowest
#: one with the full layout
NARROW_SIZES = {"80x24": (80, 24), "120x40": (120, 40)}


def busy_activity(root) -> None:
    """Real operations beside the demo's receipts: an Update running under a lease, a prune
    abandoned, and a Pursuit editor checkpoint under its bare 32-hex operation id."""
    from rmtui.engine.writes.supervisor import Supervisor

    with Supervisor(root) as sup:
        sup.begin("update", "update", lease={"holder": "daemon", "pid": 4242, "until": FROZEN_TS + 240})
        pruning = sup.begin("prune", "pruner")
        sup.abandon(pruning, "the pruner's worktree was removed by hand")
        # (it ends failed, with no commit: a landed one would make the head's hash depend on the run)
        op = sup.begin("pursuit", "pursuit-editor", op_id="5f0c2a9e" * 4)
        sup.fail(op, "the checkpoint found PURSUITS.md changed under it")


@pytest.mark.parametrize("size", list(NARROW_SIZES), ids=list(NARROW_SIZES))
def test_main_screen_operations_and_receipts_fit(snap_compare, frozen, size):
    """Each column shows whole (``committed``, ``abandoned``); a column that cannot is left out
    or, the free text ones, clipped with …; the Pursuit receipt is named ``pursuit …``."""
    busy_activity(frozen)
    app = RmtuiApp(frozen, clock=lambda: FROZEN_TS, live=False)

    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await wait_for(pilot, lambda: app.screen.query_one("#receipts").row_count == 4, what="the receipts")
        if app.screen.compact:  # the compact layout shows one pane beside the graph: the receipts
            await pilot.press("o", "o")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=NARROW_SIZES[size], run_before=run_before)


def test_main_screen_status_keeps_the_filter_notice(snap_compare, app):
    """At 80 columns the status line leaves out the head and the counts, never the filter's
    matches (it used to be the part cut off at the edge)."""
    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await pilot.press("slash")
        await type_text(pilot, "alerts")
        tree = app.screen.query_one("#graph")
        await wait_for(pilot, lambda: tree.filter_text == "alerts", what="the filter")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=NARROW_SIZES["80x24"], run_before=run_before)


async def test_settle_waits_for_the_previews_history_however_slow_git_is(app, monkeypatch):
    """Every snapshot is taken after ``settle``. The preview's last commit comes from a worker
    that waits on Git, and meanwhile the app uses no CPU: idleness is no sign it is done (on a
    busy machine the filter snapshot was once taken with the commit still on its way)."""
    real = readers.last_commit

    def slow(*args, **kwargs):
        time.sleep(1.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(readers, "last_commit", slow)
    async with app.run_test(size=NARROW_SIZES["80x24"]) as pilot:
        await loaded(app, pilot)
        await pilot.press("slash")
        await type_text(pilot, "alerts")
        await settle(app, pilot)
        preview = app.screen.query_one(ItemPreview)
        assert preview.current_key == "flood-alerts"
        assert "demo: seed" in preview.commit_text


# -- the other screens -----------------------------------------------------------------------

def test_diff_screen(snap_compare, app):
    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await app.push_screen(DiffScreen("maintenance-20250602T093000Z-00000001"))
        await wait_for(pilot, lambda: app.screen.loaded, what="the diff")
        await pilot.press("n", "n")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_insight_screen(snap_compare, app):
    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await pilot.press("2")
        await wait_for(pilot, lambda: app.screen.loaded and app.screen.shown, what="the insight log")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_maintenance_screen_with_a_live_validation_error(snap_compare, app):
    async def run_before(pilot) -> None:
        await loaded(app, pilot)
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
        files = maint.query_one("#maint-files")
        while files.highlighted_option.id != "MEMORY_ingestion.md":
            await pilot.press("down")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


FIXED_RESULTS = [
    {"id": "ing-dedupe", "key": "ing-dedupe", "score": 0.8123, "kind": "node", "file": "MEMORY_ingestion.md",
     "start_line": 5, "end_line": 5, "status": "new"},
    {"id": "ing-queue", "key": "ing-queue", "score": 0.4071, "kind": "node", "file": "MEMORY_ingestion.md",
     "start_line": 4, "end_line": 4, "status": "new"},
]


def retrieve_snapshot(snap_compare, app, monkeypatch, size) -> bool:
    def fixed(root, session, need, **kwargs):
        text = "# Tidewater service\n\n## Ingestion\n\n- `ing-dedupe` Duplicate readings are dropped.\n"
        return RetrieveResult(text, FIXED_RESULTS, None, "fp", "hybrid", [], [])

    monkeypatch.setattr(retrieve_module, "retrieve", fixed)

    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        await pilot.press("4")
        await type_text(pilot, "duplicate gauge readings")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.answer is not None, what="the answer")
        await pilot.press("escape")  # out of the text box: the screen keys show
        await settle(app, pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


def test_retrieve_screen_with_an_answer(snap_compare, app, monkeypatch):
    assert retrieve_snapshot(snap_compare, app, monkeypatch, SIZE)


@pytest.mark.parametrize("size", list(NARROW_SIZES), ids=list(NARROW_SIZES))
def test_retrieve_screen_narrow(snap_compare, app, monkeypatch, size):
    """At 80 columns the need has a row of its own, the session and the switch below it."""
    assert retrieve_snapshot(snap_compare, app, monkeypatch, NARROW_SIZES[size])


# -- dialogs -----------------------------------------------------------------------------------

def dialog_snapshot(snap_compare, app, dialog: type, what: str, *keys: str,
                    prepare: Step | None = None, then: Step | None = None) -> bool:
    """Compare the snapshot of ``dialog`` at 80x24: from the loaded main screen, run ``prepare``,
    press ``keys`` and wait for the dialog, then run ``then`` in it."""

    async def run_before(pilot) -> None:
        await loaded(app, pilot)
        if prepare is not None:
            await prepare(pilot)
        if keys:
            await pilot.press(*keys)
        await wait_for(pilot, lambda: isinstance(app.screen, dialog), what=what)
        if then is not None:
            await then(pilot)
        await settle(app, pilot)

    return snap_compare(app, terminal_size=DIALOG_SIZE, run_before=run_before)


def test_help_screen(snap_compare, app):
    assert dialog_snapshot(snap_compare, app, HelpScreen, "the help screen", "question_mark")


def test_confirm_approve_all_dialog(snap_compare, app):
    assert dialog_snapshot(snap_compare, app, ConfirmScreen, "the confirmation", "e", "A")


def test_confirm_abort_with_changes_dialog(snap_compare, app):
    async def change_the_worktree(pilot) -> None:
        await pilot.press("3")
        maint = app.screen
        await wait_for(pilot, lambda: maint.loaded, what="the maintenance screen")
        await pilot.press("b")
        await wait_for(pilot, lambda: maint.status is not None, what="the worktree")
        target = Path(maint.status["worktree"]) / "MEMORY_runbook.md"
        target.write_text("# Incident runbook\n\n1. Page the on-call first.\n", encoding="utf-8")
        maint.load_status()
        await wait_for(pilot, lambda: maint.status["dirty"], what="the change")

    assert dialog_snapshot(snap_compare, app, ConfirmScreen, "the confirmation", "a", prepare=change_the_worktree)


def test_reject_reason_dialog(snap_compare, app):
    async def empty_reason(pilot) -> None:
        await pilot.press("enter")  # an empty reason is refused: the dialog says so

    assert dialog_snapshot(snap_compare, app, PromptScreen, "the reason prompt", "e", "x", then=empty_reason)


def test_correct_a_landing_dialog(snap_compare, app):
    """The correction prompt names the landing it reworks in words (its commit and the files it
    changed). The demo root has no landed Update, so the pane is handed one receipt's fields."""
    landed = SimpleNamespace(operation_id="update-batch-" + "c" * 64, landed_commit="4f2a9c0d1e" + "0" * 30,
                             changed_paths=["MEMORY.md", "MEMORY_build.md", "MEMORY_deploy.md", "PURSUITS.md"],
                             correction=None)

    async def correct(pilot) -> None:
        app.screen.query_one(EvidencePane).correct(landed)

    assert dialog_snapshot(snap_compare, app, PromptScreen, "the correction prompt", prepare=correct)


def test_evidence_dialog(snap_compare, app):
    async def second_inbox_row(pilot) -> None:
        await pilot.press("e")
        table = app.screen.query_one(EvidenceTable)
        await row_to(pilot, table, table.inbox[1].uid)

    assert dialog_snapshot(snap_compare, app, EvidenceScreen, "the evidence view", "v", prepare=second_inbox_row)


def test_error_dialog(snap_compare, app, monkeypatch):
    monkeypatch.setattr(readers, "last_commit", broken_last_commit)

    async def go_to_an_item(pilot) -> None:
        await pilot.press("g")
        await type_text(pilot, "ing-poll")

    assert dialog_snapshot(snap_compare, app, ErrorScreen, "the error dialog", "enter", prepare=go_to_an_item)


def test_goto_dialog(snap_compare, app):
    async def start_an_id(pilot) -> None:
        await type_text(pilot, "ing-")

    assert dialog_snapshot(snap_compare, app, PromptScreen, "the go-to prompt", "g", then=start_an_id)


def test_confirm_reject_all_dialog(snap_compare, app):
    assert dialog_snapshot(snap_compare, app, ConfirmScreen, "the confirmation", "e", "X")
