"""The workbench's Insight screen while cycles run: the points gauge, the last outcome, and a
log written by a real Insight run (fake provider) appearing live."""

from __future__ import annotations

import pytest
from cycles_kit import configure, seed
from fake_provider import FakeProvider
from test_cycles_insight import LOG, append_node, insight_script
from test_tui_support import run_in_thread, wait_for

from rmtui.engine.cycles.insight import run_insight
from rmtui.tui.app import RmtuiApp

SIZE = (140, 44)


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


async def test_insight_run_shows_in_the_running_workbench(provider, root, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    configure(root, "openai", provider, **{"insight.watch.trigger_points": 2})
    seed(root)
    append_node(root, "x")
    app = RmtuiApp(root)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        insight = app.screen

        def gauge() -> str:
            return str(insight.query_one("#insight-gauge").render())

        await wait_for(pilot, lambda: insight.loaded and "1/2" in gauge(), what="the gauge at 1/2")
        assert "no run yet" in gauge() and insight.logs == []
        await run_in_thread(append_node, root, "y")
        await wait_for(pilot, lambda: "2/2" in gauge() and "due" in gauge(), what="the gauge at 2/2")
        provider.push(*insight_script())
        out = await run_in_thread(run_insight, root)
        assert out.state == "artifact" and out.log is not None
        name = out.log.split("/", 1)[1]
        await wait_for(pilot, lambda: insight.shown == name, timeout=10, what="the new log to be shown")
        assert "Builds keep changing tools" in insight.query_one("#insight-markdown").source
        await wait_for(pilot, lambda: "0/2" in gauge() and f"wrote {out.log}" in gauge(),
                       what="the gauge after the run")
        assert LOG.startswith("# Insight")


async def test_c_on_a_receipt_sends_the_landing_back(provider, root, tmp_path, monkeypatch):
    from fake_provider import Turn
    from test_tui_support import main_loaded, row_to, tab_to, type_text

    from rmtui.tui.widgets.receipts_table import ReceiptsTable

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    configure(root, "openai", provider)
    seed(root)
    landing = append_node(root, "x")
    op_id = landing["operation_id"]
    provider.push(Turn(text='{"status": "needs_input", "message": "Which fact is wrong?"}'))
    app = RmtuiApp(root)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        receipts = app.screen.query_one(ReceiptsTable)
        await wait_for(pilot, lambda: op_id in receipts.rows_by_key, what="the receipt")
        await tab_to(pilot, receipts)
        await row_to(pilot, receipts, op_id)
        await pilot.press("c")
        await wait_for(pilot, lambda: app.screen.query("#correct-comment"), what="the comment prompt")
        await type_text(pilot, "x is wrong")
        await pilot.press("enter")

        def row_text() -> str:
            return " ".join(str(c) for c in receipts.get_row(op_id)) if op_id in receipts.rows_by_key else ""

        await wait_for(pilot, lambda: "asks: Which fact is wrong?" in row_text(), timeout=20,
                       what="the question on the receipt")
    assert "x is wrong" in provider.seen[0].user_texts()[0]
