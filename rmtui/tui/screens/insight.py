"""Insight logs: the list of ``insight_logs/*.md``, rendered as Markdown, tailed live; above
them the points gauge (points against the trigger threshold) and the last run's outcome."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Header, Markdown, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from rmtui.engine.host import watch
from rmtui.tui import readers
from rmtui.tui.context import workbench
from rmtui.tui.messages import InsightLogsLoaded
from rmtui.tui.screens.base import LiveScreen
from rmtui.tui.widgets.footer import KeysFooter

if TYPE_CHECKING:
    from rmtui.engine.cycles.insight import InsightStatus


class InsightScreen(LiveScreen):
    CSS_PATH = Path(__file__).parent / "insight.tcss"
    WATCH_KINDS = frozenset({watch.INSIGHT, watch.HEAD, watch.STATE, watch.CYCLES})  # points move with receipts
    BINDINGS: ClassVar = [
        Binding("f", "toggle_follow", "Follow new logs", id="insight.follow"),
    ]

    def __init__(self) -> None:
        super().__init__(id="insight")
        self.logs: list = []
        self.follow = True
        self.shown: str | None = None
        self.loaded = False
        self.sub_title = "Insight logs"

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="insight-gauge")
        with Horizontal(id="insight-body"):
            yield OptionList(id="insight-list")
            with VerticalScroll(id="insight-view"):
                yield Markdown("", id="insight-markdown")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#insight-list").border_title = "Insight logs"
        self.query_one("#insight-view").border_title = "Log"

    def reload(self, kinds: set[str]) -> None:
        if kinds & {watch.INSIGHT, watch.HEAD}:
            self.load_logs()
        self.load_gauge()

    @work(thread=True, exclusive=True, group="insight-gauge", exit_on_error=False)
    def load_gauge(self) -> None:
        from rmtui.engine.cycles.insight import insight_status

        try:
            text = gauge_text(insight_status(workbench(self).root))
        except Exception as exc:  # noqa: BLE001 - the gauge only informs; the logs stay usable without it
            text = f"Insight points: unavailable ({exc})"
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self.query_one("#insight-gauge", Static).update, text)

    @work(thread=True, exclusive=True, group="insight", exit_on_error=False)
    def load_logs(self) -> None:
        logs = readers.read_insight_logs(workbench(self).root)
        if not get_current_worker().is_cancelled:
            self.post_message(InsightLogsLoaded(logs))

    async def on_insight_logs_loaded(self, message: InsightLogsLoaded) -> None:
        before = {log.name for log in self.logs}
        self.logs = message.logs
        names = self.query_one("#insight-list", OptionList)
        keep = self.shown
        names.clear_options()
        names.add_options([Option(log.name.removesuffix(".md"), id=log.name) for log in self.logs])
        new = [log.name for log in self.logs if log.name not in before]
        if self.loaded and new:
            self.notify(f"new Insight log {new[0]}")
        target = None
        if self.logs and (self.follow or keep is None):
            target = self.logs[0].name  # newest first
        elif keep is not None and any(log.name == keep for log in self.logs):
            target = keep
        if target is not None:
            index = next(i for i, log in enumerate(self.logs) if log.name == target)
            names.highlighted = index
            await self._show(target)
        elif not self.logs:
            await self.query_one("#insight-markdown", Markdown).update("*No Insight logs yet.*")
        self.loaded = True
        self._titles()

    @on(OptionList.OptionHighlighted, "#insight-list")
    async def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id and event.option.id != self.shown:
            await self._show(event.option.id)

    async def _show(self, name: str) -> None:
        log = next((log for log in self.logs if log.name == name), None)
        if log is None:
            return
        self.shown = name
        await self.query_one("#insight-markdown", Markdown).update(log.text)
        self.query_one("#insight-view").border_title = f"insight_logs/{name}"

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self._titles()
        if self.follow and self.logs:
            self.query_one("#insight-list", OptionList).highlighted = 0

    def _titles(self) -> None:
        self.sub_title = f"Insight logs · {len(self.logs)} · " + ("following new logs" if self.follow else "paused")


def gauge_text(st: InsightStatus, width: int = 20) -> str:
    """``Insight points ▰▰▱▱ 3/150 · last run: artifact …`` from ``insight_status``."""
    points, threshold = st.points, st.threshold or 1.0
    filled = min(width, int(width * points / threshold))
    line = f"Insight points {'▰' * filled}{'▱' * (width - filled)} {points:g}/{threshold:g}"
    if st.active_operation_id:
        line += " · running"
    elif st.due:
        line += " · due"
    last = st.last_run
    if last:
        outcome = {"artifact": f"wrote {last.get('log') or 'a log'}", "noop": "no-op (nothing stood out)",
                   "failed": f"failed: {last.get('message') or 'see insight status'}"}.get(str(last.get("state")),
                                                                                     str(last.get("state")))
        line += f" · last run: {outcome}"
    else:
        line += " · no run yet"
    if st.backoff:
        line += f" · {st.backoff}"
    return line
