"""The evidence pane's header counts in words that agree with the count: one piece of
evidence waits, several wait; what moves queued evidence moves "it" or "them"."""

from __future__ import annotations

import pytest
from test_tui_support import main_loaded, wait_for

from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.host.demo import create_demo_root
from rmtui.tui.app import RmtuiApp

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


def header(app) -> str:
    return str(app.screen.query_one("#queue-header").render())


@pytest.mark.parametrize(("approved", "inbox_words", "queued_words"), [
    (2, "1 waits for your approval", "3 queued: no Update model is configured and no host task is open. To move them:"),
    (0, "3 wait for your approval", "1 queued: no Update model is configured and no host task is open. To move it:"),
])
async def test_the_queue_header_agrees_with_its_counts(demo, approved, inbox_words, queued_words):
    with EvidenceQueue(demo) as q:  # the demo holds three in the inbox and one queued
        if approved:
            q.approve([e.uid for e in q.list(state="inbox")][:approved])
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app) and "queued" in header(app), what="the queue header")
        text = " ".join(header(app).split())
        assert inbox_words in text, text
        assert queued_words in text, text
