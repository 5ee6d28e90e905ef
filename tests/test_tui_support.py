"""Shared helpers for the workbench tests (no tests here): frozen demo roots, waiting.

A frozen demo root is a real demo root made with fixed commit dates, operation ids and
evidence times, so screenshots of it are identical from run to run.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rmtui.engine import store
from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes import supervisor

FROZEN = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)
FROZEN_TS = FROZEN.timestamp()
FROZEN_GIT_DATE = "2025-06-02T09:30:00+0000"


def freeze_engine(monkeypatch) -> None:
    """Fixed commit dates and operation ids for everything the engine does in this test."""
    monkeypatch.setenv("GIT_AUTHOR_DATE", FROZEN_GIT_DATE)
    monkeypatch.setenv("GIT_COMMITTER_DATE", FROZEN_GIT_DATE)
    counter = itertools.count(1)
    monkeypatch.setattr(supervisor, "new_operation_id",
                        lambda kind: f"{kind}-20250602T093000Z-{next(counter):08x}")


def frozen_demo_root(path: Path, monkeypatch) -> MemoryRoot:
    freeze_engine(monkeypatch)
    root = create_demo_root(path, now=FROZEN)
    conn = store.connect(root.runtime)
    try:
        rows = conn.execute("SELECT uid FROM evidence ORDER BY seq").fetchall()
        with store.transaction(conn) as c:
            for i, row in enumerate(rows):
                t = FROZEN_TS - 60 * (40 - 7 * i)
                c.execute("UPDATE evidence SET created_at=?, updated_at=? WHERE uid=?", (t, t, row["uid"]))
    finally:
        conn.close()
    return root


def evidence_states(root: MemoryRoot) -> dict[str, tuple[str, str | None]]:
    """uid -> (state, reason), read straight from the runtime database."""
    conn = store.connect(root.runtime)
    try:
        return {r["uid"]: (r["state"], r["reason"]) for r in conn.execute("SELECT uid, state, reason FROM evidence")}
    finally:
        conn.close()


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Let the app run until ``condition()`` holds (workers and file events are real)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)
    await pilot.pause()


async def quiet(app, pilot, timeout: float = 10.0) -> None:
    """Let the app finish what the last key started: its messages handled and every worker but
    the root watcher's done. A test that asserts nothing happened (a key that does not apply,
    a dialog answered no) asserts it then, not after a fixed pause a busy machine can outrun."""
    deadline = time.monotonic() + timeout
    await pilot.pause()
    while busy := [w for w in app.workers if w.group != "watch" and not w.is_finished]:
        if time.monotonic() > deadline:
            raise AssertionError(f"workers still running: {[w.name for w in busy]}")
        await pilot.pause(0.05)
    await pilot.pause()


async def palette_lists(app, pilot, text: str) -> None:
    """Wait until the command palette lists a command whose prompt holds ``text`` (its search
    runs in the background: enter pressed before the list shows selects nothing)."""
    from textual.command import CommandList

    def listed() -> bool:
        lists = app.screen.query(CommandList)
        if not lists:
            return False
        options = lists.first()
        return any(text in str(options.get_option_at_index(i).prompt) for i in range(options.option_count))

    await wait_for(pilot, listed, what=f"the palette to list {text!r}")


async def settle(app, pilot) -> None:
    """Ready the screen for its picture: nothing left to come (the preview's pause after the
    cursor's last move over, every worker but the watch's done and what it posted handled), no
    toasts, steady cursors (a blinking one would make the snapshot depend on timing), then a
    moment for the last repaint. The preview's item history comes from a worker that waits on
    Git: on a busy machine the app looks idle long before it lands."""
    from textual.widgets import Input, TextArea

    def preview_due() -> bool:
        return any(getattr(screen, "preview_due", False) for screen in app.screen_stack)

    while True:
        await wait_for(pilot, lambda: not preview_due(), what="the preview to follow the cursor")
        await quiet(app, pilot)
        if not preview_due():
            break
    app.clear_notifications()
    for field in [*app.screen.query(Input), *app.screen.query(TextArea)]:
        field.cursor_blink = False
    await pilot.pause(0.2)


async def run_in_thread(fn, *args):
    """Run blocking engine code (another 'process' writing the root) off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def main_loaded(app) -> bool:
    screen = app.mode_screen("main")
    return screen is not None and screen.loaded >= {"graph", "queue", "operations"}


# -- pressing keys as a person would ------------------------------------------------------

KEY_NAMES = {" ": "space", "-": "minus", ".": "full_stop", ":": "colon", "/": "slash", "_": "underscore",
             "`": "grave_accent", "?": "question_mark", "[": "left_square_bracket", "]": "right_square_bracket",
             ",": "comma", "'": "apostrophe", "=": "equals_sign", "(": "left_parenthesis",
             ")": "right_parenthesis"}


async def type_text(pilot, text: str, timeout: float = 10.0) -> None:
    """Type ``text`` into whatever has focus as a quick typist (or a paste) does: every character
    is a real key event in the app's queue, back to back, and the test goes on once the widget
    with focus has handled the last of them (``pilot.press`` repaints and waits for an idle
    process after each key, about 0.1 s a key)."""
    from textual import events

    app = pilot.app
    for ch in text:
        if not ch.isalnum() and ch not in KEY_NAMES:
            raise ValueError(f"type_text: no key name for {ch!r}; add it to KEY_NAMES")
        app.post_message(events.Key(KEY_NAMES.get(ch, ch), ch).set_sender(app))
    handled = asyncio.Event()

    def after_the_keys() -> None:  # runs once the app has passed every key on
        target = app.focused or app.screen
        if not target.call_later(handled.set):
            handled.set()

    app.call_later(after_the_keys)
    await asyncio.wait_for(handled.wait(), timeout)
    await pilot.pause()


async def tab_to(pilot, widget, limit: int = 20) -> None:
    """Press tab until ``widget`` has focus."""
    for _ in range(limit):
        if pilot.app.focused is widget:
            return
        await pilot.press("tab")
    if pilot.app.focused is not widget:
        raise AssertionError(f"tab never reached {widget!r}")


async def row_to(pilot, table, key: str, limit: int = 60) -> None:
    """Move a focused table's cursor to the row ``key`` with the arrow keys."""
    index = table.get_row_index(key)
    for _ in range(limit):
        if table.cursor_row == index:
            return
        await pilot.press("down" if table.cursor_row < index else "up")
    raise AssertionError(f"the arrow keys never reached row {key}")


async def option_to(pilot, options, option_id: str, limit: int = 60) -> None:
    """Move a focused option list's highlight to ``option_id`` with the arrow keys."""
    index = options.get_option_index(option_id)
    for _ in range(limit):
        if options.highlighted == index:
            return
        await pilot.press("down" if (options.highlighted or 0) < index else "up")
    raise AssertionError(f"the arrow keys never reached option {option_id}")
