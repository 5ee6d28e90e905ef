"""Sharing: memory across machines and shared views, on one screen.

The sync panel shows what ``sync status`` knows without the network (status, last pull and
push, ahead/behind as of the last fetch, the Git-backed queue's lease, a repair memory waits
for); ``P`` pulls and ``S`` pushes ("send") through the engine, in a worker. With sync off
the panel says how to turn it on, and the two keys say why they cannot act. The views panel lists the
shared-view connections with their freshness: ``p`` pulls the file view under the cursor,
``r`` every file view, ``a`` asks the question view under it (``?`` stays the help key); an
answer is shown in a read-only dialog and never written to memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Header, Static
from textual.worker import get_current_worker

from rmtui.engine.display import printable
from rmtui.engine.errors import EngineError
from rmtui.engine.host import watch
from rmtui.tui import readers
from rmtui.tui.context import workbench
from rmtui.tui.keys import key_of
from rmtui.tui.messages import (
    EngineFailed,
    SharedQuestionAnswered,
    SharedViewsLoaded,
    SharedViewsPulled,
    SyncFinished,
    SyncLoaded,
)
from rmtui.tui.screens.base import LiveScreen, error_text
from rmtui.tui.screens.dialogs import PromptScreen
from rmtui.tui.widgets.footer import KeysFooter
from rmtui.tui.widgets.views_table import SharedViewsTable
from rmtui.tui.wording import count, when

if TYPE_CHECKING:
    from rmtui.engine.sync.overview import SyncOverview
    from rmtui.engine.views.questions import QuestionAnswer

HERE = Path(__file__).parent
#: how a status reads at a glance (the classes of #sync-status in sharing.tcss)
STATUS_CLASS = {"synced": "-ok", "pushed": "-ok", "fresh": "-ok", "offline": "-warn", "dirty": "-warn",
                "unknown": "-muted", "disabled": "-muted", "unconfigured": "-warn", "error": "-bad",
                "conflict": "-bad"}
ENABLE_HINT = ("To turn it on: rmtui --headless config set sync.enabled true (the [sync] enabled key of "
               "rightmemory.toml); the branch also needs an upstream (git branch --set-upstream-to origin/main).")


def status_line(ov: SyncOverview) -> Text:
    text = Text()
    text.append(ov.status, style="bold")
    text.append(f" · {printable(ov.message)}")
    return text


def sync_details(ov: SyncOverview, now: float) -> Text:
    """The lines under the status: upstream, times, lease, repair, last failure."""
    if ov.status == "disabled":
        return Text(ENABLE_HINT)
    if ov.status == "unconfigured" or not ov.upstream:
        return Text(printable(ov.message))  # the engine's one hint (the first push: rmtui --headless sync push)
    rows: list[tuple[str, str]] = []
    # ahead/behind count against the upstream commit the last fetch saw, named after them
    fetched = f"fetched {ov.upstream_commit[:8]}" if ov.upstream_commit else "not fetched yet"
    rows.append(("upstream", f"{ov.upstream} · ahead {ov.ahead}, behind {ov.behind} · head {(ov.head or 'none')[:8]} · "
                             f"{fetched}"))
    rows.append(("pulled", f"{when(ov.last_pull_at, now)} · pushed {when(ov.last_push_at, now)}"))
    rows.append(("queue", lease_text(ov, now)))
    if ov.repair is not None:
        files = f" ({', '.join(ov.repair.files[:3])})" if ov.repair.files else ""
        rows.append(("repair", f"{ov.repair.kind}: {ov.repair.detail}{files}"))
    else:
        rows.append(("repair", "none pending"))
    if ov.last_failure_status and ov.last_failure_status != ov.status:
        rows.append(("failed", f"{ov.last_failure_status} {when(ov.last_failure_at, now)}: "
                               f"{ov.last_failure_message or ''}"))
    rows += [("problem", p) for p in ov.problems]
    text = Text()
    for i, (label, value) in enumerate(rows):
        if i:
            text.append("\n")
        text.append(f"{label:>8} ", style="bold")
        text.append(printable(value))  # Git's and a provider's messages: shown, not obeyed
    return text


def lease_text(ov: SyncOverview, now: float) -> str:
    lease = ov.lease
    if lease is None:
        return "no batch leased"
    who = "this machine" if lease.ours else f"machine {readers.machine_name(lease.holder)}"
    until = when(lease.expires_at, now)
    state = "expired " + until.split(" (")[0] if lease.expired else "until " + until.split(" (")[0]
    return (f"lease held by {who} · {lease.batch_id[:24]}… · {count(len(lease.candidate_uids), 'candidate')} · "
            f"{state}")


class AnswerScreen(ModalScreen[None]):
    """A question view's answer, read-only: shown here, never written to memory."""

    CSS_PATH: ClassVar = [HERE / "dialogs.tcss", HERE / "sharing.tcss"]
    BINDINGS: ClassVar = [Binding("escape,enter", "close", "Close", id="answer.close")]

    def __init__(self, question: str, result: QuestionAnswer) -> None:
        super().__init__()
        self.question = question
        self.result = result

    def compose(self) -> ComposeResult:
        r = self.result
        with Vertical(classes="dialog answer-dialog") as box:
            box.border_title = f"Shared question: {r.view_id}"
            box.border_subtitle = "read-only, not stored · escape closes"
            yield Static(Text.assemble(("Question ", "bold"), printable(self.question)), id="answer-question")
            status = r.status
            yield Static(Text.assemble(("Status ", "bold"), status), id="answer-status",
                         classes="-ok" if status == "answered" else "-bad")
            with VerticalScroll(id="answer-body"):
                body = r.answer if status == "answered" else f"Reason: {r.reason or 'unknown'}"
                yield Static(Text(printable(str(body or ""))), id="answer-text")  # a provider's text: shown, not obeyed

    def action_close(self) -> None:
        self.dismiss(None)


class SharingScreen(LiveScreen):
    CSS_PATH = HERE / "sharing.tcss"
    WATCH_KINDS = frozenset({watch.HEAD, watch.GRAPH, watch.QUEUE, watch.STATE})
    BINDINGS: ClassVar = [
        Binding("P", "sync('pull')", "Pull", id="sharing.pull"),
        Binding("S", "sync('push')", "Push", id="sharing.push"),
        Binding("ctrl+r", "reload", "Reload", id="sharing.reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="sharing")
        self.overview: SyncOverview | None = None
        self.views: list = []
        self.syncing: str | None = None  # "pull" | "push" while the engine works
        self.outcome: dict | None = None  # the last pull or push result
        self.loaded: set[str] = set()  # "sync", "views": arrived at least once
        self.sub_title = "Sharing"

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="sync-pane", classes="pane"):
            yield Static("loading…", id="sync-status")
            yield Static("", id="sync-details")
            yield Static("", id="sync-outcome", classes="-hidden")
        with Vertical(id="views-pane", classes="pane"):
            yield Static("", id="views-header")
            yield SharedViewsTable(clock=workbench(self).clock, id="views")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#sync-pane").border_title = "Sync"
        self.query_one("#views-pane").border_title = "Shared views"
        self.query_one(SharedViewsTable).focus()
        self.set_interval(30, self._refresh_times)

    # -- loading -------------------------------------------------------------
    def reload(self, kinds: set[str]) -> None:
        self.load_sync()
        if kinds & {watch.GRAPH, watch.HEAD} or "views" not in self.loaded:
            self.load_views()

    def action_reload(self) -> None:
        self.reload(set(self.WATCH_KINDS))

    @work(thread=True, exclusive=True, group="sharing-sync", exit_on_error=False)
    def load_sync(self) -> None:
        try:
            overview = readers.read_sync(workbench(self).root, now=workbench(self).clock())
        except EngineError as exc:
            self.post_message(EngineFailed("sync status", error_text(exc)[0]))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(SyncLoaded(overview))

    @work(thread=True, exclusive=True, group="sharing-views", exit_on_error=False)
    def load_views(self) -> None:
        try:
            views = readers.read_shared_views(workbench(self).root)
        except EngineError as exc:
            self.post_message(EngineFailed("shared views", error_text(exc)[0]))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(SharedViewsLoaded(views))

    def on_sync_loaded(self, message: SyncLoaded) -> None:
        self.overview = message.overview
        self.loaded.add("sync")
        self._show_sync()
        self.refresh_bindings()

    def _show_sync(self) -> None:
        ov = self.overview
        if ov is None:
            return
        now = workbench(self).clock()
        status = self.query_one("#sync-status", Static)
        status.update(status_line(ov))
        status.set_classes(STATUS_CLASS.get(ov.status, "-muted"))
        self.query_one("#sync-details", Static).update(sync_details(ov, now))
        pane = self.query_one("#sync-pane")
        pane.border_title = f"Sync · {ov.upstream}" if ov.upstream else "Sync"
        if ov.active:
            pane.border_subtitle = (f"{key_of(self.app, 'sharing.pull', 'P')} pull · "
                                    f"{key_of(self.app, 'sharing.push', 'S')} push")
        else:
            pane.border_subtitle = "off" if ov.status == "disabled" else "no upstream"

    def on_shared_views_loaded(self, message: SharedViewsLoaded) -> None:
        self.views = message.views
        self.loaded.add("views")
        self.query_one(SharedViewsTable).set_views(message.views)
        files = sum(1 for v in message.views if v.is_file)
        questions = len(message.views) - files
        stale = [v.view_id for v in message.views if v.status != "fresh"]
        pane = self.query_one("#views-pane")
        pane.border_title = (f"Shared views · {count(files, 'file view')} · {count(questions, 'question view')}"
                             if message.views else "Shared views")
        header = self.query_one("#views-header", Static)
        if not message.views:
            header.update("No shared views are connected. Connect one with rmtui --headless shared-view connect "
                          "REPO_URL#share=VIEW (or an HTTP URL with --token-env NAME).")
        elif stale:
            header.update(f"{count(len(stale), 'view')} not fresh: {', '.join(stale[:4])}. "
                          f"{key_of(self.app, 'views.pull', 'p')} pulls the one under the cursor, "
                          f"{key_of(self.app, 'views.pull_all', 'r')} all.")
        else:
            header.update(f"All fresh. {key_of(self.app, 'views.ask', 'a')} asks a question view; "
                          "answers are shown, never stored.")

    def _refresh_times(self) -> None:
        self._show_sync()
        if self.views:
            self.query_one(SharedViewsTable).set_views(self.views)

    # -- sync: pull and push -------------------------------------------------
    def why_no_sync(self, what: str) -> str | None:
        """One line: why ``P``/``S`` cannot pull or push now and what would make it work
        (None: it can)."""
        ov = self.overview
        verb = "pull" if what == "pull" else "push"
        if self.syncing is not None:
            return f"A {self.syncing} is running: {verb} when it has finished."
        if ov is None:
            return f"The sync state is still being read: {verb} in a moment."
        if ov.status == "disabled":
            return f"Sync is off, so there is nothing to {verb}. {ENABLE_HINT}"
        if not ov.active:
            return (f"Sync cannot {verb}: the branch has no upstream. "
                    "rmtui --headless sync push pushes it to its remote and tracks it.")
        return None

    def action_sync(self, what: str) -> None:
        why = self.why_no_sync(what)
        if why is not None:
            self.notify(why, title="Pull" if what == "pull" else "Push", severity="warning", timeout=10, markup=False)
            return
        self.syncing = what
        self.refresh_bindings()
        outcome = self.query_one("#sync-outcome", Static)
        outcome.update(Text(f"{'pulling from' if what == 'pull' else 'pushing to'} "
                            f"{self.overview.upstream if self.overview else 'the upstream'} …"))
        outcome.set_classes("-busy")
        self.run_sync(what)

    @work(thread=True, exclusive=True, group="sharing-sync-write", exit_on_error=False)
    def run_sync(self, what: str) -> None:
        from rmtui.engine import sync

        try:
            result = (sync.pull if what == "pull" else sync.push)(workbench(self).root)
        except EngineError as exc:
            self.post_message(SyncFinished(what, {"status": "error", "message": error_text(exc)[0], "files": []}))
            return
        self.post_message(SyncFinished(what, result.to_json()))

    def on_sync_finished(self, message: SyncFinished) -> None:
        self.syncing = None
        self.outcome = message.result
        r = message.result
        text = Text()
        text.append(f"{message.action}: ", style="bold")
        text.append(printable(f"{r['status']} · {r['message']}"))
        if r.get("files"):
            text.append(f" ({', '.join(r['files'][:4])}{' …' if len(r['files']) > 4 else ''})")
        outcome = self.query_one("#sync-outcome", Static)
        outcome.update(text)
        ok = r["status"] in ("synced", "pushed", "fresh")
        outcome.set_classes("-ok" if ok else "-failed")
        self.notify(text.plain, severity="information" if ok else "warning", timeout=8, markup=False)
        self.refresh_bindings()
        self.load_sync()

    def worker_failed(self, worker) -> None:
        if worker.group == "sharing-sync-write":
            self.syncing = None
            self.query_one("#sync-outcome", Static).set_classes("-hidden")
            self.refresh_bindings()
        elif worker.group == "sharing-views-write":
            self.query_one(SharedViewsTable).set_busy("pull", False)
        elif worker.group == "sharing-ask":
            self.query_one(SharedViewsTable).set_busy("ask", False)

    # -- shared views: pull and ask ------------------------------------------
    def on_shared_views_table_pull_requested(self, message: SharedViewsTable.PullRequested) -> None:
        message.stop()
        self.query_one(SharedViewsTable).set_busy("pull", True)
        self.notify(f"pulling {message.view_id or 'every file view'} …")
        self.pull_views(message.view_id)

    @work(thread=True, exclusive=True, group="sharing-views-write", exit_on_error=False)
    def pull_views(self, view_id: str | None) -> None:
        from rmtui.engine.views import consumer

        try:
            results = consumer.pull(workbench(self).root, view_id)
        except EngineError as exc:
            results = [consumer.PullResult(view_id or "views", "unavailable", error_text(exc)[0])]
        self.post_message(SharedViewsPulled(results))

    def on_shared_views_pulled(self, message: SharedViewsPulled) -> None:
        self.query_one(SharedViewsTable).set_busy("pull", False)
        failed = [r for r in message.results if r.status != "pulled"]
        if not message.results:
            self.notify("no file views are connected")
        for r in failed:
            self.notify(printable(f"{r.view_id}: {r.status}: {r.reason or ''}"), severity="warning",
                        timeout=8, markup=False)
        done = [r for r in message.results if r.status == "pulled"]
        if done:
            changed = [r.view_id for r in done if r.changed]
            self.notify(f"pulled {count(len(done), 'view')}" + (f": new version of {', '.join(changed)}" if changed
                                                                else ", unchanged"))
        self.load_views()

    def on_shared_views_table_ask_requested(self, message: SharedViewsTable.AskRequested) -> None:
        message.stop()
        view_id = message.view_id

        def done(question: str | None) -> None:
            if question:
                self.query_one(SharedViewsTable).set_busy("ask", True)
                self.notify(f"asking {view_id} …")
                self.ask_view(view_id, question)

        self.app.push_screen(PromptScreen(f"Ask {view_id}", "Your question (the answer is shown, not stored):",
                                          placeholder="question", empty_error="A question cannot be empty.",
                                          input_id="ask-question"), done)

    @work(thread=True, exclusive=True, group="sharing-ask", exit_on_error=False)
    def ask_view(self, view_id: str, question: str) -> None:
        from rmtui.engine.views import consumer
        from rmtui.engine.views.questions import QuestionAnswer

        try:
            result = consumer.ask(workbench(self).root, view_id, question)
        except EngineError as exc:
            result = QuestionAnswer(view_id, "unavailable", reason=error_text(exc)[0])
        self.post_message(SharedQuestionAnswered(question, result))

    def on_shared_question_answered(self, message: SharedQuestionAnswered) -> None:
        self.query_one(SharedViewsTable).set_busy("ask", False)
        self.app.push_screen(AnswerScreen(message.question, message.result))
        self.load_views()

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.notify(printable(f"{message.action}: {message.text}"), severity="error", timeout=8, markup=False)
