"""The workbench's start: the first reading of the graph is shown when it ends (the watch's
first wake-up, which asks for another reading, neither drops it nor reads beside it), a change
made meanwhile still shows, and a later start reads the parses the first one kept."""

from __future__ import annotations

import threading
import time

import pytest
from test_tui_support import main_loaded, wait_for

from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.memory import parse_store
from rmtui.engine.memory.parse_store import parse_file_path
from rmtui.tui import readers
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.main import MainScreen
from rmtui.tui.widgets.memory_tree import MemoryTree

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    parse_store.forget()
    yield create_demo_root(tmp_path / "demo")
    parse_store.forget()


async def test_a_reload_asked_for_during_the_first_reading_waits_for_it_and_sees_a_change_made_meanwhile(
        demo, monkeypatch):
    real_read = readers.read_graph
    real_reload = MainScreen.reload
    reloads = threading.Event()
    asked: list[int] = []
    lock = threading.Lock()
    running = 0
    most = 0
    reads: list[float] = []

    def reload(self, kinds):
        asked.append(1)
        if len(asked) >= 2:  # the watch is in place and asked for everything again
            reloads.set()
        real_reload(self, kinds)

    def read_graph(root):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            first = not reads
            reads.append(time.monotonic())
        try:
            if first:  # the first reading is still under way when the watch's reload comes
                assert reloads.wait(20), "the watch never asked for a reload"
                memory = demo.path / "MEMORY.md"
                memory.write_text(memory.read_text(encoding="utf-8") + "\n- `made-meanwhile` Written during the"
                                  " first reading. → []\n", encoding="utf-8")
                return real_read(root)  # (it may or may not see the line: the next reading must)
            return real_read(root)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(readers, "read_graph", read_graph)
    monkeypatch.setattr(MainScreen, "reload", reload)
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), timeout=30, what="the main screen")
        tree = app.screen.query_one(MemoryTree)
        await wait_for(pilot, lambda: "made-meanwhile" in tree.graph.items, timeout=30,
                       what="the change made meanwhile")
    assert most == 1  # never two readings side by side
    assert 2 <= len(reads) <= 3  # the first, one after it (and one for the file event, if it came late)


async def test_a_later_start_reads_the_kept_parses_and_shows_the_same_tree(demo):
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        first = [(i.id, i.title, i.hash) for i in app.screen.query_one(MemoryTree).graph.ordered]
    assert parse_file_path(demo.path).is_file()
    parse_store.forget()  # a new process: only the file on disk
    app = RmtuiApp(demo, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        again = [(i.id, i.title, i.hash) for i in app.screen.query_one(MemoryTree).graph.ordered]
    assert again == first


def gated_reads(monkeypatch) -> threading.Event:
    """Graph readings that wait until the returned event is set."""
    gate = threading.Event()
    real_read = readers.read_graph

    def read_graph(root):
        assert gate.wait(30), "the test never let the reading go on"
        return real_read(root)

    monkeypatch.setattr(readers, "read_graph", read_graph)
    return gate


def record_background(monkeypatch) -> list[str]:
    started: list[str] = []
    for name in ("recover_operations", "watch_root"):
        real = getattr(RmtuiApp, name)

        def recorded(self, _real=real, _name=name):
            started.append(_name)
            return _real(self)

        monkeypatch.setattr(RmtuiApp, name, recorded)
    return started


async def test_recovery_and_the_watch_start_once_the_tree_shows(demo, monkeypatch):
    gate = gated_reads(monkeypatch)
    started = record_background(monkeypatch)
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: (s := app.mode_screen("main")) is not None
                       and s.loaded >= {"queue", "operations"}, what="the evidence and operations")
        assert started == []  # nothing competes with the first screen's reading
        gate.set()
        await wait_for(pilot, lambda: main_loaded(app), what="the tree")
        await wait_for(pilot, lambda: sorted(started) == ["recover_operations", "watch_root"],
                       what="the background work")
        tree = app.screen.query_one(MemoryTree)
        path = demo.path / "MEMORY.md"  # the watch runs: an edit shows
        path.write_text(path.read_text(encoding="utf-8") + "\n- `after-start` Added once the watch runs. → []\n",
                        encoding="utf-8")
        await wait_for(pilot, lambda: "after-start" in tree.graph.items, timeout=30, what="the edit")


async def test_a_first_screen_that_never_shows_its_tree_still_gets_the_background_work(demo, monkeypatch):
    from rmtui.tui import app as app_module

    monkeypatch.setattr(app_module, "BACKGROUND_WAIT", 0.3)
    gate = gated_reads(monkeypatch)
    started = record_background(monkeypatch)
    app = RmtuiApp(demo)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: sorted(started) == ["recover_operations", "watch_root"],
                           what="the background work")
            assert not main_loaded(app)
            gate.set()
            await wait_for(pilot, lambda: main_loaded(app), what="the tree")
    finally:
        gate.set()


def test_the_workbench_starts_without_importing_gitpython():
    """GitPython's import (about 60 ms) is paid by the background work after the first screen,
    not by the start: the watch names the worktrees folder without importing the writers."""
    import subprocess
    import sys

    from rmtui.engine.host import watch
    from rmtui.engine.writes import worktrees

    assert watch.WORKTREES == worktrees.WORKTREES
    out = subprocess.run([sys.executable, "-c", "import sys, rmtui.tui.app; print('git' in sys.modules)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
