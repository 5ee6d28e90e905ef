"""Deciding on evidence in the workbench, safely: the cursor stays in the inbox, a bulk decision
over the whole inbox asks first, each decision can be undone until a batch claims it, and the
evidence pane says why queued evidence is not moving and what moves it (``U`` runs Update).

Every step presses the keys a person would; state is read back from the runtime database.
"""

from __future__ import annotations

import pytest
from fake_provider import FakeProvider, Turn, commit_update_model
from test_tui_support import evidence_states, main_loaded, quiet, row_to, type_text, wait_for

from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.memory.roots import init_root
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.dialogs import ConfirmScreen, PromptScreen
from rmtui.tui.widgets.evidence_pane import EvidencePane
from rmtui.tui.widgets.evidence_table import EvidenceTable
from rmtui.tui.widgets.progress_line import ProgressLine

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


def inbox(root) -> list[str]:
    """Inbox uids in submission order (the table's order within the inbox group)."""
    q = EvidenceQueue(root)
    try:
        return [e.uid for e in q.list(state="inbox")]
    finally:
        q.close()


def state(root, uid) -> str:
    return evidence_states(root)[uid][0]


async def evidence_pane(app, pilot) -> EvidenceTable:
    await wait_for(pilot, lambda: main_loaded(app), what="the main screen to load")
    await pilot.press("e")
    table = app.screen.query_one(EvidenceTable)
    assert app.focused is table
    return table


def record_progress(line: ProgressLine) -> list[str]:
    """Every text the progress line shows from now on, as it is shown."""
    shown: list[str] = []
    text = line.query_one(".progress-text")
    for name in ("start", "show"):
        real = getattr(line, name)

        def recorded(*args, _real=real):
            _real(*args)
            shown.append(str(text.render()))

        setattr(line, name, recorded)
    return shown


def header(app) -> str:
    return str(app.screen.query_one("#queue-header").render())


async def test_after_approve_and_reject_the_cursor_stays_on_the_next_undecided_row(demo):
    first, second, third = inbox(demo)
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        table = await evidence_pane(app, pilot)
        assert table.current_key == first
        await pilot.press("a")
        await wait_for(pilot, lambda: table.rows_by_key[first].state == "queued", what="the approval to show")
        assert table.current_key == second  # not the approved row, now in the queued group
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the reason prompt")
        await type_text(pilot, "duplicate of tw-config")
        await pilot.press("enter")
        await wait_for(pilot, lambda: table.rows_by_key[second].state == "rejected", what="the rejection to show")
        assert table.current_key == third
        assert [state(demo, u) for u in (first, second, third)] == ["queued", "rejected", "inbox"]
        # the last inbox row decided: the cursor stays on the row now at that place
        await pilot.press("a")
        await wait_for(pilot, lambda: table.rows_by_key[third].state == "queued", what="the last approval")
        assert table.current is not None and table.check_action("approve", ()) is None


async def test_bulk_decisions_without_marks_ask_first_and_say_how_many(demo):
    uids = inbox(demo)
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        table = await evidence_pane(app, pilot)
        await pilot.press("A")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        question = str(app.screen.query_one("#confirm-question").render())
        assert "approve all 3 pieces of evidence" in question
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="the dialog to close")
        await quiet(app, pilot)
        assert all(state(demo, u) == "inbox" for u in uids)
        # with marks, A approves just the marked ones without asking (m walks down)
        await pilot.press("m")
        await pilot.press("A")
        await wait_for(pilot, lambda: state(demo, uids[0]) == "queued", what="the marked approval")
        assert not isinstance(app.screen, ConfirmScreen)
        assert [state(demo, u) for u in uids[1:]] == ["inbox", "inbox"]
        # reject all is destructive: it asks, and enter on the focused button cancels
        await wait_for(pilot, lambda: table.rows_by_key[uids[0]].state == "queued", what="the table")
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the reject-all confirmation")
        assert "reject all 2 pieces" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="the dialog to close")
        await quiet(app, pilot)
        assert not isinstance(app.screen, PromptScreen)
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation again")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the reason for all")
        await type_text(pilot, "stale")
        await pilot.press("enter")
        await wait_for(pilot, lambda: [state(demo, u) for u in uids[1:]] == ["rejected", "rejected"],
                       what="the bulk rejection")
        # the whole bulk rejection is one decision: u brings both back to the inbox
        await pilot.press("u")
        await wait_for(pilot, lambda: [state(demo, u) for u in uids[1:]] == ["inbox", "inbox"], what="the undo")
        assert evidence_states(demo)[uids[1]][1] is None  # the reason went with the rejection


async def test_undo_restores_each_decision_until_a_batch_claims_the_evidence(demo):
    first, second, _third = inbox(demo)
    queued_before = [u for u, (s, _) in evidence_states(demo).items() if s == "queued"][0]
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        table = await evidence_pane(app, pilot)
        screen = app.screen
        assert screen.check_action("undo", ()) is False  # nothing to undo: not offered
        await pilot.press("a")
        await wait_for(pilot, lambda: state(demo, first) == "queued", what="the approval")
        await wait_for(pilot, lambda: screen.check_action("undo", ()), what="undo to be offered")
        await pilot.press("u")
        await wait_for(pilot, lambda: state(demo, first) == "inbox", what="the undone approval")
        await wait_for(pilot, lambda: table.rows_by_key[first].state == "inbox", what="the table")
        assert table.current_key == first  # the cursor follows the decision back
        # a rejection of queued evidence goes back to the queue, not to the inbox
        await row_to(pilot, table, queued_before)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the reason prompt")
        await type_text(pilot, "wrong repo")
        await pilot.press("enter")
        await wait_for(pilot, lambda: state(demo, queued_before) == "rejected", what="the rejection")
        await pilot.press("u")
        await wait_for(pilot, lambda: state(demo, queued_before) == "queued", what="the rejection undone")
        # once a batch claims approved evidence, its approval can no longer be undone
        await wait_for(pilot, lambda: table.rows_by_key[queued_before].state == "queued", what="the table")
        await row_to(pilot, table, second)
        await pilot.press("a")
        await wait_for(pilot, lambda: state(demo, second) == "queued", what="the second approval")
        q = EvidenceQueue(demo)
        try:
            q.claim([second], "batch-from-another-process")
        finally:
            q.close()
        await pilot.press("u")
        await wait_for(pilot, lambda: any("claimed" in n.message for n in app._notifications),
                       what="the refusal to undo")
        assert state(demo, second) == "claimed"
        assert screen.check_action("undo", ()) is False  # the refused decision is not offered again


# On a busy machine the Update (0.8 s of scripted model time) can start and end while the key
# press is still being awaited, and the toast it leaves expires long before a wait for it gives
# up: so the test records what the progress line shows, and every notification, as they happen.
async def test_the_queue_header_says_why_queued_evidence_waits_and_u_runs_update(demo, tmp_path):
    provider = FakeProvider()
    try:
        app = RmtuiApp(demo)
        said: list[str] = []  # every notification, kept: they expire from the screen after seconds
        shown_notify = app.notify

        def notify(message, *args, **kwargs):
            said.append(str(message))
            return shown_notify(message, *args, **kwargs)

        app.notify = notify  # type: ignore[method-assign]
        async with app.run_test(size=SIZE) as pilot:
            await evidence_pane(app, pilot)
            screen = app.screen
            await wait_for(pilot, lambda: "queued" in header(app), what="the queue header")
            text = header(app)
            assert "1 queued: no Update model is configured and no host task is open" in text
            assert "set [update.model] in rightmemory.toml" in text and "assistant update begin" in text
            # U cannot run Update yet: it says so in one line, with what would make it work
            app.clear_notifications()
            await pilot.press("U")
            await wait_for(pilot, lambda: bool(app._notifications), what="what U says")
            (note,) = list(app._notifications)
            assert "\n" not in note.message
            assert note.message.startswith("U cannot run Update: no Update model is configured")
            assert "set [update.model] in rightmemory.toml" in note.message
            # a model configured (rightmemory.toml changes: the screen reloads on its own)
            commit_update_model(demo.path, provider)
            await wait_for(pilot, lambda: "no Update daemon runs" in header(app), timeout=10,
                           what="the header to name the missing daemon")
            assert "Press U to run Update now" in header(app) and "update run-now" in header(app)
            queued = [u for u, (s, _) in evidence_states(demo).items() if s == "queued"]
            provider.push(Turn(text="", tool_calls=[("outline", {})], delay=0.8),
                          Turn(text="Skipped the only candidate: already known."))
            # the config commit may reload the screen once more after the header shows: press U
            # on the screen that is up once it offers the action
            await wait_for(pilot, lambda: app.screen.query_one(EvidencePane).can_run_update, timeout=10,
                           what="U to be able to run Update")
            screen = app.screen
            await pilot.press("e")  # the evidence pane focused again, whatever a reload focused
            assert app.focused is screen.query_one(EvidenceTable)
            line = screen.query_one(ProgressLine)
            shown = record_progress(line)  # a quick Update may come and go before the first look
            app.clear_notifications()
            said.clear()
            await pilot.press("U")
            try:
                await wait_for(pilot, lambda: any(t.startswith("Update") for t in shown), timeout=30,
                               what="the progress line")
            except AssertionError as exc:  # if U refused, what it said is the diagnosis; a bug, its error
                errors = [repr(w.error) for w in app.workers if w.error is not None]
                error = getattr(app.screen, "error", None)
                raise AssertionError(f"{exc}; U said {said}; screen "
                                     f"{type(app.screen).__name__} {error!r}; worker errors {errors}") from None
            await wait_for(pilot, lambda: any("update role" in t for t in shown), timeout=30,
                           what="the engine's step on the progress line")
            await wait_for(pilot, lambda: all(state(demo, u) == "consumed" for u in queued), timeout=30,
                           what="the Update to consume the queued evidence")
            await wait_for(pilot, lambda: not line.display, what="the progress line to go")
            assert any("Update no_change" in m for m in said), said
            await wait_for(pilot, lambda: "queued" not in header(app), what="the header to update")
    finally:
        provider.close()


async def test_U_with_nothing_queued_says_so_and_how_evidence_gets_queued(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    root = init_root(tmp_path / "empty")
    app = RmtuiApp(root)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen to load")
        app.clear_notifications()
        await pilot.press("U")
        await wait_for(pilot, lambda: bool(app._notifications), what="what U says")
        (note,) = list(app._notifications)
        assert note.message == ("Nothing is queued for Update: evidence that agents submit and you approve "
                                "is queued.")


async def test_a_failed_update_says_which_batch_failed_and_what_it_waits_for(demo):
    """U with a model that refuses every turn: the evidence goes back to the queue and the
    notification names the batch, the model's error and the batch's state now."""
    provider = FakeProvider()  # an empty script: every request is answered with an error
    try:
        commit_update_model(demo.path, provider)
        queued = [u for u, (s, _) in evidence_states(demo).items() if s == "queued"]
        assert queued
        app = RmtuiApp(demo)
        async with app.run_test(size=SIZE) as pilot:
            await evidence_pane(app, pilot)
            await wait_for(pilot, lambda: app.screen.query_one(EvidencePane).can_run_update, timeout=10,
                           what="U to be able to run Update")
            app.clear_notifications()
            await pilot.press("U")
            await wait_for(pilot, lambda: any(n.message.startswith("update: batch ") for n in app._notifications),
                           timeout=30, what="the failure's notification")
            (note,) = [n for n in app._notifications if n.message.startswith("update: batch ")]
            assert "failed: " in note.message and "fake provider: the script has no more turns" in note.message
            assert note.message.endswith("(it is now waiting_retry)") and note.severity == "error"
            assert all(state(demo, u) == "queued" for u in queued)  # the evidence is back, nothing lost
    finally:
        provider.close()
