"""One line that says what long engine work is doing, for how long, and how far it is.

A screen calls :meth:`ProgressLine.start` when it starts the work, forwards the engine's
reports (:class:`rmtui.tui.messages.EngineProgress`) to :meth:`ProgressLine.show`, and calls
:meth:`ProgressLine.stop` when the work's answer arrives. The line is hidden while idle. A
bar appears only when the engine knows how far it is (e.g. passages embedded of all).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

if TYPE_CHECKING:
    from textual.timer import Timer
    from textual.widgets import ProgressBar

    from rmtui.engine.progress import Progress


class ProgressLine(Horizontal):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.what = ""
        self.started: float | None = None
        self.progress: Progress | None = None
        self._ticker: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("", classes="progress-text")

    def on_mount(self) -> None:
        self.display = False

    def _bar(self) -> ProgressBar:
        """The bar, made the first time how far is known (most work never needs one)."""
        from textual.widgets import ProgressBar

        bars = self.query(ProgressBar)
        if bars:
            return bars.first()
        bar = ProgressBar(total=None, show_eta=False, classes="progress-bar")
        self.mount(bar)
        return bar

    def _hide_bar(self) -> None:
        for bar in self.query(".progress-bar"):
            bar.display = False

    @property
    def running(self) -> bool:
        return self.started is not None

    def start(self, what: str) -> None:
        self.what = what
        self.progress = None
        self.started = time.monotonic()
        self.display = True
        self._hide_bar()
        if self._ticker is None:
            self._ticker = self.set_interval(1.0, self._render_text)
        self._render_text()

    def show(self, progress: Progress) -> None:
        if not self.running:
            return
        self.progress = progress
        if progress.total:
            bar = self._bar()
            bar.display = True
            bar.update(total=progress.total, progress=progress.done or 0)
        else:
            self._hide_bar()
        self._render_text()

    def stop(self) -> None:
        self.started = None
        self.progress = None
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self.display = False

    def _render_text(self) -> None:
        if self.started is None:
            return
        elapsed = int(time.monotonic() - self.started)
        text = Text()
        text.append(self.what, style="bold")
        p = self.progress
        if p is not None:
            text.append(f" · {p.what}")
            if p.total:
                text.append(f" {p.done or 0}/{p.total}")
        text.append(f" · {elapsed} s…")
        self.query_one(".progress-text", Static).update(text)
