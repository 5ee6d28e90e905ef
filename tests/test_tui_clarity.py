"""The workbench never leaves a person guessing: focus shows in every theme and the help names
the pane order, notifications stay off the evidence rows, the Retrieve screen says what orders
its list and cuts no column off, dialogs show their whole prompt and name what they act on,
ages move on their own, and the screen repaints when a suspended editor returns.

Each test presses the keys a person would and checks what the screen shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_support import main_loaded, row_to, tab_to, type_text, wait_for
from textual.color import Color
from textual.geometry import Region
from textual.widgets import Input, Label
from textual.widgets._toast import Toast

from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.retrieval import retrieve as retrieve_module
from rmtui.engine.retrieval.result import RetrieveResult
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.dialogs import EvidenceScreen, HelpScreen, PromptScreen
from rmtui.tui.widgets.evidence_pane import EvidencePane
from rmtui.tui.widgets.evidence_table import EvidenceTable
from rmtui.tui.widgets.memory_tree import MemoryTree

THEMES = ("rmtui-dark", "rmtui-light", "rmtui-tidepool")


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


async def started(app, pilot):
    await wait_for(pilot, lambda: main_loaded(app), what="the main screen to load")
    return app.screen


def visible_text(widget) -> str:
    """What ``widget`` paints in its region now (cut-off text is missing here), one line."""
    lines = widget.render_lines(Region(0, 0, widget.outer_size.width, widget.outer_size.height))
    return " ".join(" ".join(strip.text for strip in lines).split())


def flat(text: str) -> str:
    return " ".join(text.split())


def luminance(color: Color) -> float:
    def channel(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def contrast(a: Color, b: Color) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


# -- where am I -----------------------------------------------------------------------------

@pytest.mark.parametrize("theme", THEMES)
async def test_the_focused_pane_has_a_heavy_border_in_the_focus_colour_in_every_theme(demo, theme):
    app = RmtuiApp(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await started(app, pilot)
        app.theme = theme
        await pilot.pause()
        focus_colour = Color.parse(app.theme_variables["pane-focus"])
        background = Color.parse(app.theme_variables["surface"])
        # the focus colour stands out from the pane background (WCAG's 3:1 for graphics)
        assert contrast(focus_colour, background) >= 3.0, theme
        tree, pane = screen.query_one(MemoryTree), screen.query_one(EvidencePane)
        for focused, other in ((tree, pane), (pane, tree)):
            await pilot.press("t" if focused is tree else "e")
            await pilot.pause()
            edge, colour = focused.styles.border_top
            assert edge == "heavy" and colour == focus_colour, (theme, focused)
            assert other.styles.border_top[0] == "round"


async def test_the_help_names_the_panes_in_tab_order(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await started(app, pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
        text = visible_text(app.screen.query_one("#help-panes"))
        assert "Memory graph → Preview → Operations & tasks → Receipts → Evidence" in text
        assert "heavy border has focus" in text
        await pilot.press("escape")
        # tab really visits them in that order
        order = ["graph", "operations", "receipts", "evidence"]
        seen = []
        await tab_to(pilot, screen.query_one(MemoryTree))
        for _ in range(12):
            focused = app.focused
            if focused is not None and focused.id in order and focused.id not in seen:
                seen.append(focused.id)
            await pilot.press("tab")
        assert seen == order


# -- notifications ----------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
async def test_notifications_never_cover_the_evidence_rows(demo, size):
    app = RmtuiApp(demo)
    async with app.run_test(size=size, notifications=True) as pilot:  # toasts are drawn, as in a terminal
        screen = await started(app, pilot)
        app.clear_notifications()
        for i in range(6):
            app.notify(f"notice {i}: a long message of the kind a landing reports, with its paths and ids",
                       timeout=30)

        def toasts() -> list:
            return [t for t in screen.query(Toast) if "notice" in str(t.render())]

        await wait_for(pilot, lambda: len(toasts()) == 6, what="the toasts")
        await pilot.pause(0.3)

        def covered(region) -> set:
            """The toasts drawn over ``region`` (what a person sees on top there)."""
            return {id(w) for y in range(region.y, region.bottom) for x in range(region.x, region.right)
                    if isinstance(w := screen.get_widget_at(x, y)[0], Toast)}

        assert not covered(screen.query_one(EvidenceTable).region)
        assert not covered(screen.query_one("Footer").region)
        # they are drawn, the newest one in sight
        everywhere = covered(screen.region)
        assert everywhere and id(toasts()[-1]) in everywhere


# -- the Retrieve screen ----------------------------------------------------------------------

RESULTS = [
    {"id": "ing-dedupe", "key": "ing-dedupe", "score": 0.449, "kind": "node", "file": "MEMORY_ingestion.md",
     "start_line": 12, "end_line": 12, "status": "new"},
    {"id": "ing-queue-backpressure", "key": "ing-queue-backpressure", "score": 0.770, "kind": "node",
     "file": "MEMORY_ingestion.md", "start_line": 4, "end_line": 9, "status": "already_returned"},
]


async def test_retrieve_says_what_orders_the_list_and_cuts_no_column_off_at_120(demo, monkeypatch):
    def fixed(root, session, need, **kwargs):
        return RetrieveResult("- `ing-dedupe` Duplicate readings are dropped.", RESULTS, None, "fp", "hybrid", [],
                              [])

    monkeypatch.setattr(retrieve_module, "retrieve", fixed)
    app = RmtuiApp(demo)
    async with app.run_test(size=(120, 36)) as pilot:
        await started(app, pilot)
        await pilot.press("4")
        screen = app.screen
        await type_text(pilot, "duplicate gauge readings")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.answer is not None, what="the answer")
        table = screen.query_one("#results")
        # the scores are out of order: the table says the second stage ordered them
        assert "second stage" in str(table.border_subtitle) and "score is the first stage's" in str(
            table.border_subtitle)
        cells = [cell for r in RESULTS
                 for cell in (r["id"], r["status"], f"{r['file']}:{r['start_line']}-{r['end_line']}")]
        # the table sizes its columns when idle after the rows arrive: wait for that paint, not a fixed time
        try:
            await wait_for(pilot, lambda: all(cell in visible_text(table) for cell in cells), timeout=5,
                           what="every cell shown whole")
        except AssertionError:
            text = visible_text(table)
            assert [cell for cell in cells if cell not in text] == [], text
        session = screen.query_one("#session", Input)
        assert "workbench-playground" in visible_text(session)


# -- dialogs ------------------------------------------------------------------------------------

def dialog_fits(app, *texts: str) -> None:
    """The dialog box lies inside the terminal and shows each of ``texts`` whole."""
    screen = app.screen
    box = screen.query_one(".dialog")
    assert screen.region.contains_region(box.region), (box.region, screen.region)
    shown = " ".join(visible_text(w) for w in box.query("Label, Static"))
    for text in texts:
        assert flat(text) in shown, text


async def test_the_reject_dialog_names_the_evidence_by_its_first_line_and_shows_its_whole_prompt(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await started(app, pilot)
        table = screen.query_one(EvidenceTable)
        await pilot.press("e")
        ev = table.inbox[0]
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the reason prompt")
        prompt = str(app.screen.query_one(Label).render())
        assert ev.first_line[:30] in prompt and ev.uid[:8] not in prompt
        dialog_fits(app, prompt)
        assert "escape cancels" in str(app.screen.query_one(".dialog").border_subtitle)


async def test_the_evidence_view_says_how_to_close_it_and_names_the_evidence(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await started(app, pilot)
        table = screen.query_one(EvidenceTable)
        await pilot.press("e")
        await row_to(pilot, table, table.inbox[1].uid)
        ev = table.current
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, EvidenceScreen), what="the evidence view")
        box = app.screen.query_one(".dialog")
        assert str(box.border_subtitle) == "escape closes · a approves · x rejects"
        assert ev.first_line[:30] in str(box.border_title)
        dialog_fits(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="escape to close it")


async def test_a_long_prompt_wraps_inside_the_dialog_at_80x24(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await pilot.press("5")
        await wait_for(pilot, lambda: app.current_mode == "pursuit" and app.screen.loaded, what="the editor")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the title prompt")
        await type_text(pilot, "Ship the CLI")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen)
                       and app.screen.input_id == "pursuit-parent", what="the parent prompt")
        prompt = str(app.screen.query_one(Label).render())
        assert "right after" in prompt
        dialog_fits(app, prompt)
        assert "Ship the CLI" in str(app.screen.query_one(".dialog").border_title)


# -- things that move on their own --------------------------------------------------------------

async def test_the_age_column_moves_on_its_own(demo):
    now = [0.0]
    app = RmtuiApp(demo, clock=lambda: now[0])
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await started(app, pilot)
        table = screen.query_one(EvidenceTable)
        first = table.inbox[0]
        now[0] = first.created_at + 5
        await wait_for(pilot, lambda: table.get_cell(first.uid, "age") == "5s", what="the age to read 5s")
        now[0] = first.created_at + 150  # no key pressed, nothing written: only time passes
        await wait_for(pilot, lambda: table.get_cell(first.uid, "age") == "2m", timeout=5,
                       what="the age to move to 2m")


async def test_the_screen_rereads_and_repaints_when_a_suspended_editor_returns(demo):
    app = RmtuiApp(demo, live=False)  # no file watcher: only the return from the editor can show the edit
    async with app.run_test(size=(140, 44)) as pilot:
        await started(app, pilot)
        await pilot.press("3")
        maint = app.screen
        await wait_for(pilot, lambda: maint.loaded, what="the maintenance screen")
        await pilot.press("b")
        await wait_for(pilot, lambda: maint.status is not None, what="the worktree")
        assert not maint.status["dirty"]
        # what an editor run by `e` does while the workbench is suspended
        target = Path(maint.status["worktree"]) / "MEMORY_runbook.md"
        target.write_text(target.read_text(encoding="utf-8") + "\n1. Page the on-call first.\n", encoding="utf-8")
        app.app_resume_signal.publish(app)  # what App.suspend() publishes when the editor exits
        await wait_for(pilot, lambda: maint.status["dirty"] == ["MEMORY_runbook.md"], what="the edit to show")
        assert "changed: MEMORY_runbook.md" in visible_text(maint.query_one("#maint-status"))
