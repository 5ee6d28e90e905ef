"""The main screen's evidence pane: the inbox and the queue, and every decision on them.

The pane owns the evidence-decision flow: approve, reject with a reason, bulk decisions that
ask first, undo (``u``) until a batch claims the evidence, Update now (``U``) with a progress
line, and corrections of a landed Update (asked for from the receipts pane). Its header says
why queued evidence is not moving and what moves it. The screen reads the queue and hands it
over (:meth:`EvidencePane.show_queue`); the pane asks the screen to re-read what a decision
changed (:class:`EvidencePane.Reload`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static
from textual.worker import Worker, WorkerState, get_current_worker

from rmtui.engine.display import printable  # evidence text is shown, never obeyed
from rmtui.engine.errors import EngineError
from rmtui.tui import readers
from rmtui.tui.context import workbench
from rmtui.tui.keys import key_of
from rmtui.tui.messages import EngineDone, EngineFailed, EngineProgress, EvidenceDecided, QueueWaitingLoaded
from rmtui.tui.screens.base import error_text
from rmtui.tui.screens.dialogs import ConfirmScreen, EvidenceScreen, PromptScreen
from rmtui.tui.widgets.evidence_table import EvidenceTable
from rmtui.tui.widgets.progress_line import ProgressLine
from rmtui.tui.wording import clip, count

if TYPE_CHECKING:
    from rmtui.engine.host.waiting import QueueWaiting


class EvidencePane(Vertical):
    """The queue header over the evidence table; decisions go through the engine in workers."""

    class Reload(Message):
        """Re-read ``kinds`` (``queue``, ``operations``): a decision or an Update changed them."""

        def __init__(self, kinds: tuple[str, ...]) -> None:
            super().__init__()
            self.kinds = kinds

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.evidence: list = []
        self.counts: dict[str, int] = {}
        self.waiting: QueueWaiting | None = None
        self.decisions: list[EvidenceDecided] = []  # what `u` can undo, newest last
        self.updating = False
        self.compact = False  # the footer has the keys: the header leaves them out

    def compose(self) -> ComposeResult:
        yield Static("", id="queue-header")
        yield EvidenceTable(clock=self.clock, id="evidence")

    def on_mount(self) -> None:
        self.border_title = "Evidence"

    # -- what the screen hands over ------------------------------------------
    def show_queue(self, evidence: list, counts: dict[str, int], machines: dict[str, str]) -> None:
        self.evidence = evidence
        self.counts = counts
        self.query_one(EvidenceTable).set_evidence(evidence, machines=machines)
        title = f"Evidence · {counts.get('inbox', 0)} inbox · {counts.get('queued', 0)} queued"
        if counts.get("claimed"):
            title += f" · {counts['claimed']} claimed"
        self.border_title = title
        self.show_header()

    def want_waiting(self, *, graph_shown: bool) -> None:
        """Read why queued evidence waits, once the graph is shown (so a large root's first
        paint never shares the interpreter with it)."""
        if not (self.counts.get("queued") or self.counts.get("claimed")):
            if self.waiting is not None:
                self.waiting = None
                self.show_header()
                self.refresh_bindings()
            return
        if graph_shown:
            self.load_waiting()

    @work(thread=True, exclusive=True, group="main-waiting", exit_on_error=False)
    def load_waiting(self) -> None:
        waiting = readers.read_waiting(workbench(self).root, now=workbench(self).clock())
        if not get_current_worker().is_cancelled:
            self.post_message(QueueWaitingLoaded(waiting))

    def on_queue_waiting_loaded(self, message: QueueWaitingLoaded) -> None:
        if message.waiting == self.waiting:
            return
        self.waiting = message.waiting
        self.show_header()
        self.refresh_bindings()

    def refresh_ages(self) -> None:
        self.query_one(EvidenceTable).refresh_ages()
        until = self.waiting.until if self.waiting is not None else None
        if until is not None and workbench(self).clock() >= until:
            self.post_message(self.Reload(("queue",)))  # the wait it named is over: say what it waits for now

    def show_header(self) -> None:
        """What waits for whom: the inbox for the person, queued evidence for an Update."""
        c = self.counts
        app = self.app
        text = Text()
        inbox = c.get("inbox", 0)
        if inbox:
            text.append(f"{inbox} {'waits' if inbox == 1 else 'wait'} for your approval", style="bold")
        if inbox and not self.compact:  # compact: the footer has the keys, the lines go to the queue
            text.append(f": {key_of(app, 'evidence.approve', 'a')} approve · {key_of(app, 'evidence.reject', 'x')} "
                        f"reject · {key_of(app, 'evidence.approve_all', 'A')} all · "
                        f"{key_of(app, 'evidence.view', 'v')} view")
        w = self.waiting
        if w is not None:
            if text:
                text.append("\n")
            text.append(f"{w.queued} queued" if w.queued else f"{w.claimed} claimed", style="bold")
            text.append(f": {w.reason}.")
            if w.move in ("run_now", "retry"):
                verb = "retry" if w.move == "retry" else "run Update now"
                text.append(f" Press {key_of(app, 'main.run_update', 'U')} to {verb}", style="bold")
                text.append(f" (or `{w.command}`).")
            elif w.move == "configure":
                text.append(f" To move {'it' if (w.queued or w.claimed) == 1 else 'them'}: {w.command}.")
            elif w.command:
                text.append(f" Next: `{w.command}`.")
        if not text:
            text.append("Nothing waits: evidence that agents submit shows here.")
        self.query_one("#queue-header", Static).update(text)

    # -- decisions -----------------------------------------------------------
    def on_evidence_table_requested(self, message: EvidenceTable.Requested) -> None:
        message.stop()
        uids = message.uids
        n = len(uids)
        if message.action == "approve" and message.confirm:
            self.app.push_screen(
                ConfirmScreen("Approve all", f"Nothing is marked: approve all {count(n, 'piece')} of evidence in "
                                             f"the inbox? Approved evidence is queued for Update.",
                              yes=f"Approve {n}"),
                lambda yes: self.approve(uids) if yes else None)
        elif message.action == "approve":
            self.approve(uids)
        elif message.action == "reject" and message.confirm:
            self.app.push_screen(
                ConfirmScreen("Reject all", f"Nothing is marked: reject all {count(n, 'piece')} of evidence in the "
                                            f"inbox? They leave the inbox and are kept with the reason you give next.",
                              yes=f"Reject {n}", destructive=True),
                lambda yes: self.ask_reject(uids) if yes else None)
        elif message.action == "reject":
            self.ask_reject(uids)
        elif message.action == "view":
            ev = next((e for e in self.evidence if e.uid == uids[0]), None)
            if ev is not None:
                self.app.push_screen(EvidenceScreen(ev), lambda answer: self._after_view(ev.uid, answer))

    def _after_view(self, uid: str, answer: str | None) -> None:
        if answer == "approve":
            self.approve([uid])
        elif answer == "reject":
            self.ask_reject([uid])

    def ask_reject(self, uids: list[str]) -> None:
        def done(reason: str | None) -> None:
            if reason:
                self.reject(uids, reason)

        if len(uids) == 1:
            ev = next((e for e in self.evidence if e.uid == uids[0]), None)
            what = f"“{clip(printable(ev.first_line), 48)}”" if ev is not None else "this evidence"
            prompt = f"Why is {what} rejected? It leaves the inbox and is kept with this reason."
        else:
            prompt = (f"Why are these {count(len(uids), 'piece')} of evidence rejected? They leave the inbox and "
                      "each is kept with this reason.")
        self.app.push_screen(PromptScreen("Reject evidence", prompt, placeholder="reason",
                                          empty_error="A rejection needs a reason.", input_id="reject-reason"), done)

    def approve(self, uids: list[str]) -> None:
        self.query_one(EvidenceTable).expect_decision(uids)
        self._approve(uids)

    def reject(self, uids: list[str], reason: str) -> None:
        self.query_one(EvidenceTable).expect_decision(uids)
        self._reject(uids, reason)

    @work(thread=True, exclusive=True, group="main-evidence-write", exit_on_error=False)
    def _approve(self, uids: list[str]) -> None:
        from rmtui.engine.evidence.queue import EvidenceQueue

        try:
            with EvidenceQueue(workbench(self).root) as q:
                q.approve(uids)
        except EngineError as exc:
            self.post_message(EngineFailed("approve", error_text(exc)[0]))
            return
        self.post_message(EvidenceDecided("approve", uids, dict.fromkeys(uids, "inbox"),
                                          f"approved {count(len(uids), 'piece')} of evidence"))

    @work(thread=True, exclusive=True, group="main-evidence-write", exit_on_error=False)
    def _reject(self, uids: list[str], reason: str) -> None:
        from rmtui.engine.evidence.queue import EvidenceQueue

        try:
            with EvidenceQueue(workbench(self).root) as q:
                before = {u: q.get(u).state for u in uids}
                q.reject(uids, reason)
        except EngineError as exc:
            self.post_message(EngineFailed("reject", error_text(exc)[0]))
            return
        self.post_message(EvidenceDecided("reject", uids, before, f"rejected {len(uids)}: {reason}"))

    @property
    def can_undo(self) -> bool:
        return bool(self.decisions)

    def undo(self) -> None:
        if not self.decisions:
            return
        decision = self.decisions.pop()
        self.refresh_bindings()
        self.query_one(EvidenceTable).put_cursor_on(decision.uids[0])
        self._undo(decision)

    @work(thread=True, exclusive=True, group="main-evidence-write", exit_on_error=False)
    def _undo(self, decision: EvidenceDecided) -> None:
        from rmtui.engine.evidence.queue import EvidenceQueue

        try:
            with EvidenceQueue(workbench(self).root) as q:
                if decision.action == "approve":
                    q.unapprove(decision.uids)
                else:
                    for state in ("inbox", "queued"):
                        group = [u for u in decision.uids if decision.before.get(u) == state]
                        if group:
                            q.unreject(group, to=state)
        except EngineError as exc:
            text = error_text(exc)[0]
            if "claimed" in text:
                text += ": a batch has it now, so the approval stands"
            self.post_message(EngineFailed("undo", text))
            return
        verb = "approval" if decision.action == "approve" else "rejection"
        back = "the inbox" if set(decision.before.values()) == {"inbox"} else "where it was"
        self.post_message(EvidenceDecided("undo", decision.uids, {},
                                          f"undid the {verb} of {count(len(decision.uids), 'piece')} of evidence: "
                                          f"back in {back}"))

    def on_evidence_decided(self, message: EvidenceDecided) -> None:
        if message.action != "undo":
            self.decisions.append(message)
            self.notify(f"{message.text} · {key_of(self.app, 'main.undo', 'u')} undoes")
        else:
            self.notify(message.text)
        self.refresh_bindings()
        self.post_message(self.Reload(("queue",)))

    # -- running Update ------------------------------------------------------
    @property
    def can_run_update(self) -> bool:
        """True when U would move queued evidence (a model is configured) and none runs."""
        w = self.waiting
        return (not self.updating) if w is not None and w.move in ("run_now", "retry") else False

    def why_no_update(self) -> str:
        """One line: why U cannot run Update now, and what would make it work."""
        if self.updating:
            return "Update is already running: its progress line is at the bottom."
        w = self.waiting
        if w is None:
            if self.counts.get("inbox"):
                return (f"Nothing is queued for Update: approve evidence first "
                        f"({key_of(self.app, 'evidence.approve', 'a')} in the evidence pane).")
            return "Nothing is queued for Update: evidence that agents submit and you approve is queued."
        key = key_of(self.app, "main.run_update", "U")
        if w.move == "configure":
            them = "it" if (w.queued or w.claimed) == 1 else "them"
            return f"{key} cannot run Update: {w.reason}. To move {them}: {w.command}."
        return f"{key} cannot run Update now: {w.reason}." + (f" Next: `{w.command}`." if w.command else "")

    def run_update(self) -> None:
        w = self.waiting
        if w is None or not self.can_run_update:
            self.notify(self.why_no_update(), title="Update now", severity="warning", timeout=10, markup=False)
            return
        self.updating = True
        self.refresh_bindings()
        self.screen.query_one(ProgressLine).start("Update")
        self._run_update(w.move)

    @work(thread=True, exclusive=True, group="main-update", exit_on_error=False)
    def _run_update(self, move: str) -> None:
        from rmtui.engine import progress
        from rmtui.engine.roles.update_driver import BatchFailed, BatchLanded, UpdateDriver

        def report(step: progress.Progress) -> None:
            self.post_message(EngineProgress("update", step))

        try:
            with progress.reporting(report):
                driver = UpdateDriver(workbench(self).root)
                out = driver.retry() if move == "retry" else driver.run_once(force=True)
        except EngineError as exc:
            self.post_message(EngineFailed("update", error_text(exc)[0]))
            return
        if isinstance(out, BatchFailed):
            self.post_message(EngineFailed("update", f"batch {out.batch_id[:12]} failed: {out.failure.message}"
                                                     f" (it is now {out.batch_state})"))
        elif isinstance(out, BatchLanded):
            landed = (out.receipt.landed_commit or "")[:10]
            changed = ", ".join(out.receipt.changed_paths) or "no memory change"
            self.post_message(EngineDone(f"Update {out.state}" + (f" as {landed}" if landed else "")
                                         + f": {changed}", reload=("queue", "operations")))
        else:
            self.post_message(EngineDone("Update: nothing to run", reload=("queue", "operations")))

    def on_engine_progress(self, message: EngineProgress) -> None:
        self.screen.query_one(ProgressLine).show(message.progress)

    def _update_ended(self) -> None:
        if self.updating:
            self.updating = False
            self.screen.query_one(ProgressLine).stop()
            self.refresh_bindings()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker's unexpected error: leave the busy state, then the app shows the bug
        (as :class:`~rmtui.tui.screens.base.WorkbenchScreen` does for a screen's workers)."""
        if event.state == WorkerState.ERROR:
            if event.worker.group == "main-update":
                self._update_ended()
            self.app.post_message(Worker.StateChanged(event.worker, event.state))

    def on_engine_done(self, message: EngineDone) -> None:
        self._update_ended()
        self.notify(message.text)
        if message.reload:
            self.post_message(self.Reload(message.reload))

    def on_engine_failed(self, message: EngineFailed) -> None:
        if message.action == "update":
            self._update_ended()
        if message.action in ("approve", "reject"):
            self.query_one(EvidenceTable).forget_decision()
        self.notify(f"{message.action}: {message.text}", severity="error", timeout=8)
        self.post_message(self.Reload(("queue",)))

    # -- corrections of a landing (receipts: c) ------------------------------
    def correct(self, receipt) -> None:
        """Ask what is wrong with a landed Update (or answer its question) and rework it."""
        r = receipt
        asked = (r.correction or {}) if r.correction and r.correction.get("status") == "needs_input" else {}
        changed = ", ".join(r.changed_paths[:3]) + (" …" if len(r.changed_paths) > 3 else "")
        what = f"the Update that landed {(r.landed_commit or '')[:10]}" + (f" (changed {changed})" if changed else "")
        prompt = (f"The correction of {what} asks: {printable(asked['message'])}\nYour answer:" if asked
                  else f"What is wrong with {what}? The update-correction role reworks it.")

        def done(comment: str | None) -> None:
            if comment:
                self.notify(f"correcting {what} …")
                self._correct(r.operation_id, comment)

        self.app.push_screen(PromptScreen("Correct a landing", prompt, placeholder="comment",
                                          empty_error="A correction needs a comment.", input_id="correct-comment"),
                             done)

    @work(thread=True, exclusive=True, group="main-correct", exit_on_error=False)
    def _correct(self, op_id: str, comment: str) -> None:
        from rmtui.engine.cycles.corrections import correct_landing

        try:
            out = correct_landing(workbench(self).root, op_id, comment)
        except EngineError as exc:
            self.post_message(EngineFailed("correct", error_text(exc)[0]))
            return
        if out.status == "failed":
            self.post_message(EngineFailed("correct", out.message))
            return
        text = {"applied": "correction applied", "no_change": "the landing stands",
                "needs_input": "the correction asks"}[out.status]
        self.post_message(EngineDone(f"{text}: {out.message}", reload=("operations",)))
