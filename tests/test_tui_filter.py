"""The graph filter: each keystroke rebuilds the tree once, cheaply, and narrowing then widening
the text finds the same items again."""

from __future__ import annotations

import pytest
from test_tui_support import main_loaded, type_text, wait_for

from rmtui.engine.host.demo import create_demo_root
from rmtui.tui.app import RmtuiApp
from rmtui.tui.widgets.memory_tree import MemoryTree

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


async def test_a_filter_rebuild_asks_for_one_layout_not_one_per_node(demo, monkeypatch):
    """Textual's tree asks the screen for a layout on every node added: a keystroke that
    matched a hundred items laid the screen out a hundred times."""
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        tree = app.screen.query_one(MemoryTree)
        layouts = []
        real = MemoryTree.refresh

        def counted(self, *regions, **kwargs):
            if kwargs.get("layout"):
                layouts.append(1)
            return real(self, *regions, **kwargs)

        monkeypatch.setattr(MemoryTree, "refresh", counted)
        for text in ("i", "in", "ing", "", "t"):  # narrowing, cleared (the full tree), again
            layouts.clear()
            tree.apply_filter(text)
            assert len(layouts) <= 3, (text, len(layouts))  # the rebuild, the new size: not per node
        assert tree.match_count > 0


async def test_narrowing_then_widening_the_filter_finds_the_same_items(demo):
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        tree = app.screen.query_one(MemoryTree)
        await pilot.press("slash")
        await type_text(pilot, "ing")
        await wait_for(pilot, lambda: tree.filter_text == "ing", what="the filter")
        wide = tree.match_count
        shown = set(tree._by_key)
        await type_text(pilot, "-q")
        await wait_for(pilot, lambda: tree.filter_text == "ing-q", what="the narrower filter")
        assert 0 < tree.match_count < wide
        await pilot.press("backspace", "backspace")
        await wait_for(pilot, lambda: tree.filter_text == "ing", what="the filter widened again")
        assert tree.match_count == wide and set(tree._by_key) == shown
        assert f"filter 'ing': {wide} matches" in str(app.screen.query_one("#status").render())
