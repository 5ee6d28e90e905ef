"""The Sharing screen's table of shared-view connections and their freshness."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from rmtui.engine.display import printable
from rmtui.tui.widgets.keyed_table import KeyedTable
from rmtui.tui.wording import clip, when

#: how a connection reaches its provider (``shared_views.toml`` target kinds)
TRANSPORTS = {"git-file": "git share", "http-file": "http", "http-question": "http", "none": "no transport",
              "revoked": "revoked by the provider"}


class SharedViewsTable(KeyedTable):
    """Shared-view connections (MF file views, MQ question views) with their freshness:
    pull the file view under the cursor or every file view, ask the question view under it.
    ``?`` is the app's help key, so asking is ``a``."""

    BINDINGS: ClassVar = [
        Binding("p", "pull", "Pull view", id="views.pull"),
        Binding("r", "pull_all", "Pull all", id="views.pull_all"),
        Binding("a", "ask", "Ask", id="views.ask"),
    ]

    class PullRequested(Message):
        """Pull ``view_id``, or every file view when None."""

        def __init__(self, view_id: str | None) -> None:
            super().__init__()
            self.view_id = view_id

    class AskRequested(Message):
        def __init__(self, view_id: str) -> None:
            super().__init__()
            self.view_id = view_id

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.views: list = []
        self.busy: set[str] = set()  # "pull", "ask": what the screen is doing (the keys wait)

    def on_mount(self) -> None:
        self.add_column("view", key="view")
        self.add_column("kind", key="kind", width=4)
        self.add_column("status", key="status", width=11)
        self.add_column("items", key="items", width=5)
        self.add_column("pulled", key="pulled")
        self.add_column("reason / via", key="reason")

    def set_views(self, views: list) -> None:
        self.views = views
        now = self.clock()
        rows = []
        for v in views:
            status = Text(v.status, style="bold" if v.status != "fresh" else "")
            items = str(v.items) if v.items is not None else "-"
            pulled = when(v.last_success_at, now) if v.is_file else "-"
            note = v.reason if v.status != "fresh" and v.reason else TRANSPORTS.get(v.transport, v.transport)
            rows.append((v.view_id, v, (Text(clip(printable(v.view_id), 24)), v.kind, status, items, pulled,
                                        Text(clip(printable(note), 60)))))
        self.replace_rows(rows)

    def set_busy(self, what: str, busy: bool) -> None:
        if busy:
            self.busy.add(what)
        else:
            self.busy.discard(what)
        self.update_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        v = self.current
        if action in ("pull", "pull_all", "ask") and not self.views:
            return False  # nothing connected: the pane says how to connect a view
        if action == "pull":
            return True if v is not None and v.is_file and "pull" not in self.busy else None
        if action == "pull_all":
            return True if any(x.is_file for x in self.views) and "pull" not in self.busy else None
        if action == "ask":
            return True if v is not None and not v.is_file and "ask" not in self.busy else None
        return True

    def action_pull(self) -> None:
        if self.check_action("pull", ()):
            self.post_message(self.PullRequested(self.current.view_id))

    def action_pull_all(self) -> None:
        if self.check_action("pull_all", ()):
            self.post_message(self.PullRequested(None))

    def action_ask(self) -> None:
        if self.check_action("ask", ()):
            self.post_message(self.AskRequested(self.current.view_id))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_ask()  # enter on a question view asks it; on a file view it does nothing
