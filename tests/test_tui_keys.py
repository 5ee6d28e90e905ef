"""Finding and using the keys: ``?`` help with binding ids, escape out of the palette's key
panel, the Retrieve screen's text boxes (escape leaves them, then 1-4 work), progress of
long engine work, the footer (it draws the keys that apply, and is rebuilt only when they
change), and the main screen on a small terminal. Real keys only."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console
from test_tui_support import main_loaded, palette_lists, type_text, wait_for
from textual.command import CommandPalette
from textual.widgets._footer import FooterKey

from rmtui.engine import progress
from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.retrieval import retrieve as retrieve_module
from rmtui.engine.retrieval.result import RetrieveResult
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.dialogs import HelpScreen
from rmtui.tui.widgets.evidence_table import EvidenceTable
from rmtui.tui.widgets.memory_tree import MemoryTree
from rmtui.tui.widgets.progress_line import ProgressLine
from rmtui.tui.wording import count, score_text

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


def footer_keys(app) -> dict[str, str]:
    return {key: b.binding.description for key, b in app.screen.active_bindings.items()
            if b.binding.show and b.enabled}


async def started(app, pilot):
    await wait_for(pilot, lambda: main_loaded(app), what="the main screen to load")
    return app.screen


async def test_question_mark_lists_the_screens_keys_with_binding_ids_and_escape_closes(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(app, pilot)
        assert footer_keys(app).get("question_mark") == "Keys"
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help screen")
        help_screen = app.screen
        ids = {row.binding_id: row for row in help_screen.rows}
        for binding_id in ("main.filter", "main.undo", "evidence.approve", "evidence.reject_all", "tree.edges",
                           "receipts.diff", "app.help", "app.screen.retrieve"):
            assert binding_id in ids, binding_id
        assert ids["main.filter"].section == "Main" and ids["app.quit"].section == "Everywhere"
        assert ids["evidence.approve"].section == "Evidence"
        assert not ids["main.undo"].applies  # nothing decided yet: listed, dimmed
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(help_screen.table)
        shown = console.export_text()
        assert "evidence.approve" in shown and "Approve" in shown
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main, what="escape to close the help")
        # remapped keys show as remapped
    from rmtui.tui.userconfig import UserConfig, config_path

    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[keys]\n"evidence.approve" = "y"\n', encoding="utf-8")
    app = RmtuiApp(demo, config=UserConfig.load())
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help screen")
        row = next(r for r in app.screen.rows if r.binding_id == "evidence.approve")
        assert row.keys == "y"


def footer_drawn(app) -> dict[str, tuple[str, bool]]:
    """What the footer shows: key -> (description, greyed out)."""
    return {k.key: (k.description, k.has_class("-disabled")) for k in app.screen.query(FooterKey)}


async def test_the_footer_draws_the_keys_that_apply_and_is_rebuilt_only_when_they_change(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(app, pilot)
        tree = main.query_one(MemoryTree)
        assert app.focused is tree
        drawn = footer_drawn(app)
        assert drawn["question_mark"] == ("Keys", False) and "a" not in drawn
        widgets = list(main.query(FooterKey))
        main.refresh_bindings()  # nothing it shows changed: the same widgets stay
        tree.refresh_bindings()
        await pilot.pause(0.1)
        assert list(main.query(FooterKey)) == widgets
        await pilot.press("e")  # the evidence pane: its keys replace the tree's
        await wait_for(pilot, lambda: "a" in footer_drawn(app), what="the evidence keys in the footer")
        drawn = footer_drawn(app)
        assert drawn["a"] == ("Approve", False) and drawn["X"][0] == "Reject marked/all"
        assert {k for k, (_d, off) in drawn.items() if not off} - {app.COMMAND_PALETTE_BINDING} <= set(footer_keys(app))
        await pilot.press("t")
        await wait_for(pilot, lambda: "a" not in footer_drawn(app), what="the tree's keys in the footer again")
        # only which keys apply changes when maintenance begins: the same keys, greyed or lit in place
        await pilot.press("3")
        maint = app.screen
        await wait_for(pilot, lambda: maint.loaded and footer_drawn(app).get("b") == ("Begin", False),
                       what="the maintenance screen")
        assert footer_drawn(app)["l"] == ("Land", True)
        widgets = list(maint.query(FooterKey))
        await pilot.press("b")
        await wait_for(pilot, lambda: footer_drawn(app)["l"] == ("Land", False), what="land to apply")
        assert footer_drawn(app)["b"] == ("Begin", True)
        assert list(maint.query(FooterKey)) == widgets


async def test_escape_closes_the_palettes_key_panel(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(app, pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await type_text(pilot, "Keys")
        await palette_lists(app, pilot, "Keys")
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(main.query("HelpPanel")), what="the key panel")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not main.query("HelpPanel"), what="escape to close the key panel")
        assert app.screen is main


async def test_retrieve_escape_leaves_the_need_then_screen_keys_work(demo):
    set_config_value(demo.path, "embedding.service_url", "http://127.0.0.1:9")
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("4")
        screen = app.screen
        need = screen.query_one("#need")
        assert app.focused is need
        await type_text(pilot, "gauge 2")  # digits type into the need while it has focus
        assert need.value == "gauge 2"
        keys = footer_keys(app)
        assert "2" not in keys and keys.get("escape") == "Leave the text box"
        await pilot.press("escape")
        assert app.focused is screen.query_one("#results")
        keys = footer_keys(app)
        assert {"1", "2", "3", "4"} <= set(keys) and "escape" not in keys
        # the session box keeps its text on focus: typing appends instead of replacing it
        await pilot.press("shift+tab", "shift+tab")
        session = screen.query_one("#session")
        assert app.focused is session and session.selection.is_empty
        await type_text(pilot, "-2")
        assert session.value == "workbench-playground-2"
        await pilot.press("escape")
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "insight", what="the insight screen")


async def test_a_slow_retrieval_shows_what_the_engine_is_doing(demo, monkeypatch):
    release = threading.Event()

    def slow_retrieve(root, session, need, **kwargs):
        progress.report("starting the local embedding model (the first use takes a few seconds)")
        progress.report("embedding memory passages", 2, 4)
        release.wait(10)
        results = [{"id": "ing-dedupe", "key": "ing-dedupe", "score": 3.75, "kind": "node", "file": "MEMORY.md",
                    "start_line": 1, "end_line": 1, "status": "new"},
                   {"id": "ing-poll", "key": "ing-poll", "score": 0.5, "kind": "node", "file": "MEMORY.md",
                    "start_line": 2, "end_line": 2, "status": "new"}]
        return RetrieveResult("the text", results, None, "fp", "hybrid", [], [])

    monkeypatch.setattr(retrieve_module, "retrieve", slow_retrieve)
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("4")
        screen = app.screen
        await type_text(pilot, "dedupe")
        await pilot.press("enter")
        line = screen.query_one(ProgressLine)
        await wait_for(pilot, lambda: line.progress is not None and line.progress.total == 4, what="the progress")
        text = str(line.query_one(".progress-text").render())
        assert "Retrieving" in text and "embedding memory passages 2/4" in text
        bar = line.query_one(".progress-bar")
        assert bar.display and bar.progress == 2 and bar.total == 4
        release.set()
        await wait_for(pilot, lambda: screen.answer is not None, what="the answer")
        assert not line.display
        table = screen.query_one("#results")
        assert [str(table.get_row_at(i)[1]) for i in range(2)] == ["3.8", "0.500"]  # 3.75 is no probability


async def test_on_a_small_terminal_the_main_screen_keeps_tree_inbox_and_one_more_pane(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await started(app, pilot)
        await wait_for(pilot, lambda: screen.compact, what="the compact layout")
        tree, table = screen.query_one(MemoryTree), screen.query_one(EvidenceTable)
        assert tree.region.height >= 6 and tree.region.width >= 24
        # every inbox row shows, with readable text
        assert table.region.height >= 5 and table.text_width >= 40
        assert table.region.width >= 70
        visible = {name for name in ("preview", "operations", "receipts") if screen.query_one(f"#{name}").display}
        assert visible == {"preview"}
        assert footer_keys(app).get("o") == "Next pane"
        await pilot.press("o")
        assert screen.slot == "operations" and app.focused is screen.query_one("#operations")
        assert screen.query_one("#operations").display and not screen.query_one("#preview").display
        await pilot.press("o")
        assert screen.slot == "receipts" and screen.query_one("#receipts").region.width > 30
        await pilot.press("o")
        assert screen.slot == "preview" and screen.query_one("#preview").display
        # following an item brings the preview back whatever the slot
        await pilot.press("o")
        await pilot.press("g")
        await type_text(pilot, "ing-poll")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.slot == "preview", what="the preview to come back")
    async with RmtuiApp(demo).run_test(size=(200, 50)) as pilot:
        wide = await started(pilot.app, pilot)
        assert not wide.compact and "o" not in footer_keys(pilot.app)
        assert all(wide.query_one(f"#{n}").display for n in ("preview", "operations", "receipts"))


def test_counts_and_scores_read_as_written():
    assert [count(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert count(1, "piece") == "1 piece"
    assert score_text(0.8421) == "0.842" and score_text(1.0) == "1.000"
    assert score_text(12.345) == "12.3" and score_text(-0.25) == "-0.2"
