"""The graph filter: each keystroke rebuilds the tree once, cheaply, and narrowing then widening
the text finds the same items again."""

from __future__ import annotations

import git
import pytest
from test_tui_support import main_loaded, type_text, wait_for
from textual.widget import Widget

from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.memory.roots import init_root
from rmtui.tui.app import RmtuiApp
from rmtui.tui.widgets.memory_tree import FILTER_LIMIT, Entry, MemoryTree

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


async def loaded_tree(app, pilot) -> MemoryTree:
    """The main screen's tree, once the screen has read the root."""
    await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
    return app.screen.query_one(MemoryTree)


def layouts_asked(monkeypatch, cls: type = Widget) -> list[str]:
    """From now on, the class name of every ``cls`` widget that asks for a layout, in order."""
    asked: list[str] = []
    real = cls.refresh

    def counted(self, *regions, **kwargs):
        if kwargs.get("layout"):
            asked.append(type(self).__name__)
        return real(self, *regions, **kwargs)

    monkeypatch.setattr(cls, "refresh", counted)
    return asked


async def test_a_filter_rebuild_asks_for_one_layout_not_one_per_node(demo, monkeypatch):
    """Textual's tree asks the screen for a layout on every node added: a keystroke that
    matched a hundred items laid the screen out a hundred times."""
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        layouts = layouts_asked(monkeypatch, MemoryTree)
        for text in ("i", "in", "ing", "", "t"):  # narrowing, cleared (the full tree), again
            layouts.clear()
            tree.apply_filter(text)
            assert len(layouts) <= 3, (text, len(layouts))  # the rebuild, the new size: not per node
        assert tree.match_count > 0


async def test_narrowing_then_widening_the_filter_finds_the_same_items(demo):
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
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


# -- a root larger than the filter shows at once ---------------------------------------------

TOPICS = ("alpha", "beta", "gamma")
PER_TOPIC = 60


@pytest.fixture
def wide(tmp_path, monkeypatch):
    """A root of 180 nodes under three F# topics, every id holding an 'a' (more than the cap)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    root = init_root(tmp_path / "wide")
    mem = ["# Memory", "", "# Topics {#topics}", ""]
    for topic in TOPICS:
        mem += [f"## Topic {topic} {{F#{topic}}}", ""]
        lines = [f"The {topic} nodes.", ""]
        lines += [f"- `{topic}-{k:03d}` Node {k} of {topic}. → []" for k in range(PER_TOPIC)]
        (root.path / f"MEMORY_{topic}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root.path / "MEMORY.md").write_text("\n".join(mem) + "\n", encoding="utf-8")
    repo = git.Repo(root.path)
    repo.git.add("-A")
    repo.git.commit("-q", "-m", "wide root")
    return root


def shown_lines(tree: MemoryTree) -> list[Entry]:
    """The tree's lines as the person sees them, top to bottom."""
    return [line.node.data for line in tree._tree_lines]


def shown_state(tree: MemoryTree) -> list[tuple[str, bool]]:
    """Each line's entry and whether it is open."""
    return [(line.node.data.key, line.node.is_expanded) for line in tree._tree_lines]


async def filtered(pilot, tree: MemoryTree, text: str) -> None:
    await type_text(pilot, text)
    await wait_for(pilot, lambda: tree.filter_text.endswith(text), what=f"the filter {text!r}")


async def test_a_filter_wider_than_the_cap_shows_the_cap_and_says_how_many_more(wide):
    app = RmtuiApp(wide, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        await pilot.press("slash")
        await filtered(pilot, tree, "a")
        total = len(TOPICS) * PER_TOPIC + len(TOPICS)  # every node, and each "Topic …" heading
        assert tree.match_count == total
        lines = shown_lines(tree)
        hits = [e.item.id for e in lines if e.kind == "item" and "a" in f"{e.item.id} {e.item.title}".lower()]
        # the first matches in the graph's order, shown under their headings
        first = [i.id for i in tree.graph.ordered if "a" in f"{i.id} {i.title}".lower()][:FILTER_LIMIT]
        assert len(hits) == FILTER_LIMIT and set(hits) == set(first)
        assert "alpha-059" in hits and "gamma-000" not in hits
        assert lines[-1].kind == "notice"
        assert lines[-1].text == f"… {total - FILTER_LIMIT} more matches; type more to narrow"
        assert f"filter 'a': {total} matches" in str(app.screen.query_one("#status").render())


async def test_narrowing_reaches_a_match_that_was_beyond_the_cap(wide):
    app = RmtuiApp(wide, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        await pilot.press("slash")
        await filtered(pilot, tree, "a")
        assert tree.node_for("gamma-042") is None  # past the cap: not shown, counted in the last row
        await filtered(pilot, tree, "-04")
        assert tree.filter_text == "a-04"
        await wait_for(pilot, lambda: tree.node_for("gamma-042") is not None, what="gamma-042 shown")
        assert not any(e.kind == "notice" for e in shown_lines(tree))  # all of them fit now
        await filtered(pilot, tree, "2")
        assert tree.match_count == 3 and tree.cursor_node.data.key == "alpha-042"
        await pilot.press("enter", *["down"] * 4)  # leave the box, walk down past beta to gamma
        await wait_for(pilot, lambda: tree.cursor_node.data.key == "gamma-042", what="the cursor on gamma-042")


async def test_a_filter_matching_nothing_says_so_and_clearing_restores_the_tree(wide):
    app = RmtuiApp(wide, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        tree.reveal_item(tree.graph.items["beta-007"])
        await pilot.pause()
        before = shown_state(tree)
        await pilot.press("slash")
        await filtered(pilot, tree, "zzq")
        lines = shown_lines(tree)
        assert [e.kind for e in lines if e.kind != "domain"] == ["notice"]
        assert lines[-1].text == "nothing matches 'zzq'" and tree.match_count == 0
        assert "filter 'zzq': 0 matches" in str(app.screen.query_one("#status").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: not tree.filter_text, what="the filter to clear")
        after = shown_state(tree)
        assert after == before and tree.cursor_node.data.key == "beta-007"


# -- what a keystroke redraws ------------------------------------------------------------------

async def test_a_rebuild_lays_nothing_out_and_leaves_the_other_panes_scrollbars_alone(demo, monkeypatch):
    """The tree's size is the screen grid's: new lines repaint the tree and its own scrollbar.
    A layout (Textual asked one per rebuild) repainted the scrollbars of every scrolling pane,
    and the evidence table's, at the screen's right edge, widened each redraw to the whole
    screen."""
    from textual.scrollbar import ScrollBar
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        layouts: list[str] = []
        repainted: list[str] = []
        real_refresh, real_render = Widget.refresh, ScrollBar.render

        def refresh(self, *regions, **kwargs):
            if kwargs.get("layout") and isinstance(self, MemoryTree):
                layouts.append("tree")
            return real_refresh(self, *regions, **kwargs)

        def render(self):
            if self.parent is not None and self.parent is not tree:
                repainted.append(self.parent.id or type(self.parent).__name__)
            return real_render(self)

        monkeypatch.setattr(Widget, "refresh", refresh)
        monkeypatch.setattr(ScrollBar, "render", render)
        await pilot.press("slash")
        await pilot.pause()
        repainted.clear()
        for text in ("i", "in", "ing", "ing-"):
            await type_text(pilot, text[-1])
            await wait_for(pilot, lambda t=text: tree.filter_text == t, what=f"the filter {text!r}")
        # the preview follows the cursor to another item: its own scrollbar may change with it
        assert layouts == [] and [name for name in repainted if not name.startswith("preview")] == []


def screen_cells(app, y: int) -> list[tuple[str, object]]:
    """Row ``y`` of the screen as the terminal gets it: each cell's character and background."""
    strip = app.screen._compositor.render_strips()[y]
    return [(ch, seg.style.bgcolor) for seg in strip for ch in seg.text]


async def test_the_trees_scrollbar_coming_and_going_moves_no_text_and_lays_nothing_out(wide, monkeypatch):
    """The tree keeps its scrollbar's column: while every line fits the column is the tree's own
    background, and a filter that overflows it puts the scrollbar there. Textual showed the
    scrollbar only when needed, so its coming (on a first filter key) and going laid the screen
    out, narrowed the tree's text by a column, and made the compositor divide every pane's rows
    anew."""
    app = RmtuiApp(wide, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        assert len(tree._tree_lines) < tree.size.height  # the full tree (three topics) fits
        text = tree.scrollable_content_region  # where the lines' text goes
        gutter = text.right  # the column just right of it
        row = text.y + len(tree._tree_lines) - 1  # the last line, not the cursor's
        cells = screen_cells(app, row)
        assert cells[gutter] == (" ", cells[gutter - 1][1])  # blank, in the tree's background
        layouts = layouts_asked(monkeypatch)
        await pilot.press("slash")
        await pilot.pause()
        unfocused = screen_cells(app, row)  # the tree's background without focus
        assert unfocused[gutter] == (" ", unfocused[gutter - 1][1])
        layouts.clear()
        await filtered(pilot, tree, "a")  # a hundred matches under their headings: past the bottom
        await pilot.pause()
        columns = (text.x, text.right)  # (the filter box above it moves the rows down)
        shown = tree.scrollable_content_region
        assert len(tree._tree_lines) > tree.size.height and (shown.x, shown.right) == columns
        column = {screen_cells(app, y)[gutter][1] for y in range(shown.y, shown.bottom)}
        assert len(column) == 2  # the scrollbar: its thumb and its track
        await filtered(pilot, tree, "lpha-00")  # ten matches: every line fits again
        await pilot.pause()
        column = {screen_cells(app, y)[gutter] for y in range(shown.y, shown.bottom)}
        assert len(tree._tree_lines) == 14 and column == {unfocused[gutter]}
        assert [name for name in layouts if name in ("MemoryTree", "ScrollBar", "_GutterScrollBar")] == []
        await pilot.press("escape")  # (the filter box goes: that lays out)
        await wait_for(pilot, lambda: not tree.filter_text, what="the filter to clear")
        await pilot.pause()
        assert tree.scrollable_content_region == text and screen_cells(app, row)[gutter] == cells[gutter]


async def test_typing_on_redraws_only_the_rows_that_changed(wide, monkeypatch):
    app = RmtuiApp(wide, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        await pilot.press("slash")
        await filtered(pilot, tree, "alpha-0")
        await pilot.pause()
        drawn: list[int] = []
        real = MemoryTree._label_parts

        def counted(self, entry):  # a label's runs are read only when its line is drawn anew
            drawn.append(next(line.node.line for line in self._tree_lines if line.node.data is entry))
            return real(self, entry)

        monkeypatch.setattr(MemoryTree, "_label_parts", counted)
        await filtered(pilot, tree, "0")  # alpha-00: the first ten of the sixty, under the same rows
        await pilot.pause()
        rows = len(tree._tree_lines)
        assert tree.match_count == 10 and rows == 14  # Memory, Topics, Topic alpha, ten nodes, Pursuit
        # alpha-009 is now its heading's last child (its guide changes); Pursuit moved up from
        # past the bottom, but it looks as it did in the full tree before the filter: every
        # other row is drawn as it was
        assert {y for y in drawn if y < rows} == {12}
        lines = [tree.render_line(y).text for y in range(rows)]
        assert "alpha-009" in lines[12] and "Pursuit" in lines[13]
        drawn.clear()
        await filtered(pilot, tree, "1")  # alpha-001: Pursuit moves up from row 13 to row 4
        await pilot.pause()
        lines = [tree.render_line(y).text for y in range(len(tree._tree_lines))]
        assert len(lines) == 5 and "alpha-001" in lines[3] and "Pursuit" in lines[4]
        # a line drawn before on another row is not drawn again: only alpha-001, now the
        # last child under the cursor, is new
        assert set(drawn) == {3}
        await pilot.click(tree, offset=(8, tree.content_region.y - tree.region.y + 4))  # a click lands on its new row
        await wait_for(pilot, lambda: tree.cursor_node.data.key == "domain:pursuit", what="the cursor on Pursuit")


def drawing(strip) -> list[tuple[str, object, object, object, dict]]:
    """A line as the terminal gets it: each run's text, colours, attributes and mouse data."""
    return [(seg.text, seg.style.color, seg.style.bgcolor, seg.style._attributes, seg.style.meta) for seg in strip]


async def test_tree_lines_are_drawn_as_textuals_tree_draws_them(wide):
    """The tree draws its lines itself (a new line costs a fraction of Textual's way): for every
    line, in every state a person can put it in, it draws what Textual's own tree would."""
    from textual.widgets import Tree

    app = RmtuiApp(wide, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)

        def assert_as_textual(state: str) -> None:
            style = tree.rich_style
            for y in range(len(tree._tree_lines)):
                tree._line_cache.clear()  # Textual's own cache may hold a line of an earlier state
                ours = drawing(tree._render_line(y, 0, tree.size.width, style))
                theirs = drawing(Tree._render_line(tree, y, 0, tree.size.width, style))
                assert ours == theirs, (state, y)

        tree.reveal_item(tree.graph.items["beta-007"])
        await pilot.pause()
        assert_as_textual("the full tree, a node opened")
        await pilot.press("slash")
        await filtered(pilot, tree, "a-00")
        await pilot.pause()
        assert_as_textual("filtered, the filter box focused")
        await pilot.press("enter", "down", "down", "down")
        await pilot.pause()
        assert_as_textual("the tree focused, the cursor moved")
        await pilot.hover(tree, offset=(4, 6))
        await wait_for(pilot, lambda: tree.hover_line >= 0, what="the hovered line")
        assert_as_textual("a line hovered")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not tree.filter_text, what="the filter to clear")
        assert_as_textual("the filter cleared")


async def test_a_new_reading_shows_a_changed_title_on_a_line_drawn_before(wide):
    app = RmtuiApp(wide, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        await pilot.press("slash")
        await filtered(pilot, tree, "beta-01")
        await pilot.pause()
        row = next(y for y, line in enumerate(tree._tree_lines) if line.node.data.key == "beta-012")
        assert "Node 12 of beta." in tree.render_line(row).text
        path = wide.path / "MEMORY_beta.md"
        path.write_text(path.read_text(encoding="utf-8").replace("Node 12 of beta.", "Renamed twelve."),
                        encoding="utf-8")
        repo = git.Repo(wide.path)
        repo.git.commit("-q", "-am", "rename beta-012")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: tree.graph.items["beta-012"].title.startswith("Renamed"), what="the new reading")
        await pilot.pause()
        row = next(y for y, line in enumerate(tree._tree_lines) if line.node.data.key == "beta-012")
        assert "Renamed twelve." in tree.render_line(row).text
        assert "Node 12 of beta." not in "".join(tree.render_line(y).text for y in range(len(tree._tree_lines)))


async def test_a_filter_keystroke_lays_out_nothing_and_the_preview_follows_once_typing_rests(demo, monkeypatch):
    """Textual's text box lays the whole screen out on every key (its text width is a virtual
    size); the filter box repaints only itself, still scrolls to the cursor past its width, and
    the preview follows the first match once typing rests."""
    from rmtui.tui.widgets.filter_input import FilterInput
    from rmtui.tui.widgets.preview import ItemPreview

    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        tree = await loaded_tree(app, pilot)
        preview = app.screen.query_one(ItemPreview)
        box = app.screen.query_one("#filter", FilterInput)
        await pilot.press("slash")
        real = Widget.refresh
        asked = layouts_asked(monkeypatch)
        await type_text(pilot, "ing")
        await wait_for(pilot, lambda: tree.filter_text == "ing", what="the filter")
        assert "FilterInput" not in asked
        first = tree.cursor_node.data.key
        await wait_for(pilot, lambda: preview.current_key == first, what="the preview to follow the first match")
        monkeypatch.setattr(Widget, "refresh", real)
        long = "x" * (box.size.width + 20)
        await type_text(pilot, long)
        await wait_for(pilot, lambda: box.value == "ing" + long, what="the long text")
        await pilot.pause()
        assert box.scroll_x > 0 and box.cursor_position == len(box.value)
        assert "xxxx" in "".join(seg.text for seg in box.render_line(0))  # the cursor's end is in view


# -- what the first keystroke inherits -------------------------------------------------------

async def test_a_reading_equal_to_the_one_shown_is_left_out_of_the_next_keystrokes_collection(demo, monkeypatch):
    """The watcher's first reading (made once it is in place) usually reads what is shown and is
    dropped. Its objects point at each other, so only a collector pass frees them, and the next
    pass over the young generations found them all on whatever allocated next: the first filter
    key (35-80 ms on a 10,000-node root). They wait, frozen, for the idle pass instead."""
    import gc
    import weakref

    from rmtui.tui.screens.main import MainScreen

    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await loaded_tree(app, pilot)
        screen = app.screen
        screen.heap.delay = 0.3
        dropped: list[weakref.ref] = []
        handled: list[bool] = []
        real = MainScreen.on_graph_loaded

        def recorded(self, message):
            dropped.append(weakref.ref(message.state.graph.items["tw-build"]))
            real(self, message)
            handled.append(True)

        monkeypatch.setattr(MainScreen, "on_graph_loaded", recorded)
        gc.disable()  # no automatic pass may find the reading before the keystroke's would
        try:
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: handled, what="the same reading again")
            await pilot.pause()
            assert dropped[0]() is not None and dropped[0]() is not screen.state.graph.items["tw-build"]
            gc.collect(1)  # what a keystroke's allocations set off: the young generations
            assert dropped[0]() is not None
        finally:
            gc.enable()
        await wait_for(pilot, lambda: dropped[0]() is None, what="the idle pass to free the dropped reading")
