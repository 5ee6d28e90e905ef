"""The graph filter: each keystroke rebuilds the tree once, cheaply, and narrowing then widening
the text finds the same items again."""

from __future__ import annotations

import git
import pytest
from test_tui_support import main_loaded, type_text, wait_for

from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.memory.roots import init_root
from rmtui.tui.app import RmtuiApp
from rmtui.tui.widgets.memory_tree import FILTER_LIMIT, Entry, MemoryTree

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


async def filtered(pilot, tree: MemoryTree, text: str) -> None:
    await type_text(pilot, text)
    await wait_for(pilot, lambda: tree.filter_text.endswith(text), what=f"the filter {text!r}")


async def test_a_filter_wider_than_the_cap_shows_the_cap_and_says_how_many_more(wide):
    app = RmtuiApp(wide, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        tree = app.screen.query_one(MemoryTree)
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
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        tree = app.screen.query_one(MemoryTree)
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
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        tree = app.screen.query_one(MemoryTree)
        tree.reveal_item(tree.graph.items["beta-007"])
        await pilot.pause()
        before = [(e.key, n.is_expanded) for e, n in zip(shown_lines(tree), (l.node for l in tree._tree_lines))]
        await pilot.press("slash")
        await filtered(pilot, tree, "zzq")
        lines = shown_lines(tree)
        assert [e.kind for e in lines if e.kind != "domain"] == ["notice"]
        assert lines[-1].text == "nothing matches 'zzq'" and tree.match_count == 0
        assert "filter 'zzq': 0 matches" in str(app.screen.query_one("#status").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: not tree.filter_text, what="the filter to clear")
        after = [(e.key, n.is_expanded) for e, n in zip(shown_lines(tree), (l.node for l in tree._tree_lines))]
        assert after == before and tree.cursor_node.data.key == "beta-007"
