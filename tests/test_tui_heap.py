"""The workbench keeps the collector's full passes off the graph it shows, and still frees a
graph a new reading replaced (a frozen object the collector never sees again would leak)."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
from test_tui_support import main_loaded, wait_for

from rmtui.engine.host.demo import create_demo_root
from rmtui.tui.app import RmtuiApp
from rmtui.tui.heap import collector_paused
from rmtui.tui.widgets.memory_tree import MemoryTree

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


def in_collected_generations(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


async def test_the_graph_shown_is_out_of_the_collectors_full_passes(demo):
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        tree = app.screen.query_one(MemoryTree)
        assert tree.graph is not None
        assert gc.get_freeze_count() >= len(tree.graph.ordered)
        assert not in_collected_generations(tree.graph.items["ing-poll"])
        assert gc.isenabled()  # the read paused the collector, and it runs again
    assert gc.get_freeze_count() == 0  # the workbench closed: everything is the collector's again


async def test_a_new_reading_frees_the_graph_it_replaced(demo):
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        screen = app.screen
        screen.heap.delay = 0.1
        tree = screen.query_one(MemoryTree)
        # an item of the file that changes: its items point at each other, so only a collector
        # pass frees them (the Graph object itself goes with its last reference)
        old = weakref.ref(tree.graph.items["tw-build"])
        memory = demo.path / "MEMORY.md"
        memory.write_text(memory.read_text(encoding="utf-8") + "\n- `added-node` Added to reload. → []\n",
                          encoding="utf-8")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: "added-node" in tree.graph.items, what="the new reading")
        assert tree.graph.items["tw-build"] is not old()
        await wait_for(pilot, lambda: old() is None, what="the old graph's items to be freed")
        assert not in_collected_generations(tree.graph.items["added-node"])  # the new one frozen


def test_a_read_makes_its_objects_without_collector_passes_over_them():
    passes = []

    def counted(phase, info):
        if phase == "start":
            passes.append(info["generation"])

    gc.callbacks.append(counted)
    try:
        with collector_paused():
            made = [[i] for i in range(50_000)]  # what a read leaves: many objects that all stay
            assert passes == []
    finally:
        gc.callbacks.remove(counted)
    assert gc.isenabled() and len(made) == 50_000


def test_overlapping_reads_resume_the_collector_when_the_last_one_ends():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first ended": False} and gc.isenabled()


def test_a_collector_switched_off_before_stays_off():
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
