"""Pilot tests of the workbench flows, on real demo roots with real workers and file events.

Each test drives the app with the keys a person would press (never by setting widget state)
and checks what a person would notice: state on disk, commits, what the screen shows.
"""

from __future__ import annotations

import sys
from datetime import UTC
from pathlib import Path

import git
import pytest
from test_tui_support import (
    evidence_states,
    main_loaded,
    option_to,
    palette_lists,
    quiet,
    row_to,
    run_in_thread,
    tab_to,
    type_text,
    wait_for,
)
from textual.command import CommandPalette
from textual.widgets import Markdown

from rmtui.engine.host.demo import EVIDENCE, create_demo_root, land_insight_log
from rmtui.engine.memory.config import set_config_value
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.dialogs import ConfirmScreen, EvidenceScreen, PromptScreen
from rmtui.tui.screens.diff import DiffScreen
from rmtui.tui.widgets.diff_view import DiffFileView
from rmtui.tui.widgets.evidence_table import EvidenceTable
from rmtui.tui.widgets.memory_tree import MemoryTree
from rmtui.tui.widgets.preview import EdgeList, ItemPreview
from rmtui.tui.widgets.receipts_table import ReceiptsTable

SIZE = (140, 44)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return create_demo_root(tmp_path / "demo")


def footer_keys(app) -> dict[str, str]:
    """What the footer offers now: key -> description (only enabled, shown bindings)."""
    return {key: b.binding.description for key, b in app.screen.active_bindings.items()
            if b.binding.show and b.enabled}


async def started(app, pilot):
    """The main screen loaded and the root watch in place: these tests change the root behind the
    app and wait for it to show the change (the watch starts after the first screen, and on a busy
    machine its start took seconds: a change waited for from before then timed out)."""
    await wait_for(pilot, lambda: main_loaded(app) and app.watching.is_set(), what="the main screen and the watch")
    return app.screen


def inbox_uids(root) -> list[str]:
    return [uid for uid, (state, _) in evidence_states(root).items() if state == "inbox"]


async def select_row(pilot, table: EvidenceTable, uid: str) -> None:
    """Focus the evidence pane (``e``) and walk its cursor to ``uid`` with the arrow keys."""
    if pilot.app.focused is not table:
        await pilot.press("e")
    await row_to(pilot, table, uid)


# -- evidence ------------------------------------------------------------------------------

async def test_approve_and_reject_evidence_change_state_on_disk(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        table = screen.query_one(EvidenceTable)
        first, second, third = inbox_uids(demo)
        await select_row(pilot, table, first)
        await pilot.press("a")
        await wait_for(pilot, lambda: evidence_states(demo)[first][0] == "queued", what="approval on disk")
        await wait_for(pilot, lambda: table.rows_by_key[first].state == "queued", what="the table to refresh")
        # approve does not apply to queued evidence: disabled, and pressing it changes nothing
        await select_row(pilot, table, first)
        await pilot.pause()
        assert table.check_action("approve", ()) is None
        await pilot.press("a")
        await quiet(app, pilot)
        assert evidence_states(demo)[first][0] == "queued"

        await select_row(pilot, table, second)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the reason prompt")
        await pilot.press("enter")  # an empty reason is refused, the dialog stays
        assert isinstance(app.screen, PromptScreen)
        assert "needs a reason" in str(app.screen.query_one(".dialog-error").render())
        await type_text(pilot, "already in memory as tw-config")
        await pilot.press("enter")
        await wait_for(pilot, lambda: evidence_states(demo)[second][0] == "rejected", what="rejection on disk")
        assert evidence_states(demo)[second] == ("rejected", "already in memory as tw-config")
        assert evidence_states(demo)[third][0] == "inbox"


async def test_bulk_approve_marked_then_view_and_approve_the_rest(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        table = screen.query_one(EvidenceTable)
        first, second, third = inbox_uids(demo)
        await select_row(pilot, table, first)
        await pilot.press("m")
        await select_row(pilot, table, third)
        await pilot.press("m")
        await pilot.press("A")
        await wait_for(pilot, lambda: [evidence_states(demo)[u][0] for u in (first, second, third)]
                       == ["queued", "inbox", "queued"], what="the marked evidence to be approved")
        await wait_for(pilot, lambda: table.rows_by_key[third].state == "queued", what="the table to refresh")
        await select_row(pilot, table, second)
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, EvidenceScreen), what="the evidence view")
        text = EVIDENCE[[e[1] for e in EVIDENCE].index("req-format")][2]
        assert "ruff format" in text and evidence_states(demo)[second][0] == "inbox"
        shown = " ".join(str(w.render()) for w in app.screen.query("Static"))
        assert "ruff format" in shown and "claude-session-7f3a" in shown
        await pilot.press("a")
        await wait_for(pilot, lambda: evidence_states(demo)[second][0] == "queued", what="approval from the view")
        # nothing is left in the inbox: bulk approve is disabled now
        await wait_for(pilot, lambda: table.check_action("approve_all", ()) is None, what="bulk approve disabled")


# -- graph navigation ----------------------------------------------------------------------

async def test_follow_an_edge_and_go_back(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        preview = screen.query_one(ItemPreview)
        tree = screen.query_one(MemoryTree)
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the go-to prompt")
        await type_text(pilot, "ing-poll")
        await pilot.press("enter")
        await wait_for(pilot, lambda: preview.current_key == "ing-poll", what="ing-poll in the preview")
        assert tree.cursor_node.data.key == "ing-poll" and app.focused is tree
        await wait_for(pilot, lambda: "demo: seed" in preview.commit_text, what="the last commit of ing-poll")
        # ing-poll has one edge (→ dep ing-queue): the footer offers enter to follow it, and enter does
        assert footer_keys(app).get("enter") == "Follow edge"
        await pilot.press("enter")
        await wait_for(pilot, lambda: preview.current_key == "ing-queue", what="the followed edge")
        assert tree.cursor_node.data.key == "ing-queue"
        assert preview.border_title == "Preview · ing-poll › ing-queue"  # the breadcrumb
        # ing-queue has several (incoming edges are links too): enter opens its edge list
        edges = screen.query_one(EdgeList)
        incoming = [o.id for o in edges._options if o.id.startswith("in:")]
        assert {"in:dep:ing-poll", "in:dep:ing-dedupe", "in:dep:fi-batch"} <= set(incoming)
        await wait_for(pilot, lambda: footer_keys(app).get("enter") == "Edges", what="enter to offer the edges")
        await pilot.press("enter")
        assert app.focused is edges and edges.highlighted == 0
        await option_to(pilot, edges, "in:dep:ing-dedupe")
        await pilot.press("enter")
        await wait_for(pilot, lambda: preview.current_key == "ing-dedupe", what="the incoming edge followed")
        assert preview.border_title == "Preview · ing-poll › ing-queue › ing-dedupe"
        # escape in the edge list goes back to the tree without following
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.focused is screen.query_one(EdgeList), what="the edge list")
        await pilot.press("escape")
        assert app.focused is tree and preview.current_key == "ing-dedupe"
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: preview.current_key == "ing-queue", what="going back")
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: preview.current_key == "ing-poll", what="going back again")
        assert tree.cursor_node.data.key == "ing-poll" and preview.border_title == "Preview"
        assert "left_square_bracket" not in footer_keys(app)  # history is empty again: [ is not offered


async def test_enter_on_a_node_without_edges_opens_and_closes_it(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        tree = screen.query_one(MemoryTree)
        await pilot.press("g")
        await type_text(pilot, "conventions")
        await pilot.press("enter")
        await wait_for(pilot, lambda: tree.cursor_node.data.key == "conventions", what="the heading")
        assert not tree.cursor_node.is_expanded and "enter" not in footer_keys(app)
        await pilot.press("enter")
        assert tree.cursor_node.is_expanded
        await pilot.press("enter")
        assert not tree.cursor_node.is_expanded


async def test_filter_narrows_the_tree_and_escape_restores_it(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        tree = screen.query_one(MemoryTree)
        preview = screen.query_one(ItemPreview)

        def on_cursor() -> bool:
            node = tree.cursor_node
            return node is not None and preview.current_key == node.data.key

        # the preview shows an item first, then the filter moves the cursor elsewhere
        await pilot.press("g")
        await type_text(pilot, "ing-poll")
        await pilot.press("enter")
        await wait_for(pilot, lambda: preview.current_key == "ing-poll", what="ing-poll in the preview")
        await pilot.press("slash")
        await pilot.press(*"dedupe")
        await wait_for(pilot, lambda: tree.match_count == 1, what="the filter")
        assert tree.cursor_node.data.key == "ing-dedupe"
        await wait_for(pilot, on_cursor, what="the preview to follow the cursor while filtering")
        shown = {n.data.key for n in tree._by_key.values()}
        assert "ing-poll" not in shown and "ingestion" in shown  # matches keep their headings
        assert "1 matches" in str(screen.query_one("#status").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: not tree.filter_text, what="the filter to clear")
        assert tree.node_for("domain:pursuit") is not None and tree.node_for("tidewater") is not None
        await wait_for(pilot, on_cursor, what="the preview to stay on the cursor's item after escape")
        # a filter that matches nothing leaves no stale item in the preview
        await pilot.press("slash")
        await pilot.press(*"zzqx")
        await wait_for(pilot, lambda: tree.filter_text == "zzqx", what="the empty filter")
        await wait_for(pilot, lambda: preview.current_key != "ing-dedupe" and on_cursor(),
                       what="the preview to leave the filtered-out item")


# -- diffs ---------------------------------------------------------------------------------

async def test_open_a_receipts_diff_file_by_file(demo):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        receipts = screen.query_one(ReceiptsTable)
        maint = next(k for k, r in receipts.rows_by_key.items() if r.kind == "maintenance")
        await tab_to(pilot, receipts)
        await row_to(pilot, receipts, maint)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.loaded, what="the diff")
        views = list(app.screen.query(DiffFileView))
        assert [v.diff.path for v in views] == sorted(
            ["MEMORY.md", "MEMORY_SKILL_release.md", "MEMORY_ingestion.md", "MEMORY_runbook.md", "PURSUITS.md",
             "PURSUIT_faster-ingestion.md"])
        ingestion = next(v for v in views if v.diff.path == "MEMORY_ingestion.md")
        assert any(line.startswith("+- `ing-poll`") for line in ingestion.diff.lines) and ingestion.diff.added == 5
        assert maint in str(app.screen.query_one("#diff-header").render())
        await pilot.press("n")
        assert app.screen.query_one("#diff-files").highlighted == 1
        await pilot.press("escape")
        assert app.screen is screen


async def test_an_active_operation_is_listed_with_its_lease_and_opens_its_diff_so_far(demo):
    from rmtui.engine.writes import maintain
    from rmtui.tui.widgets.operations_table import OperationsTable

    app = RmtuiApp(demo)
    async with app.run_test(size=(200, 50)) as pilot:  # wide enough for the lease column
        screen = await started(app, pilot)
        op = await run_in_thread(maintain.begin, demo)
        wt = Path(op.worktree)
        (wt / "MEMORY_runbook.md").write_text("# Incident runbook\n\n1. Page the on-call first.\n", encoding="utf-8")
        (wt / "MEMORY_new.md").write_text("A new free-form note.\n", encoding="utf-8")
        ops = screen.query_one(OperationsTable)
        await wait_for(pilot, lambda: op.id in ops.rows_by_key, timeout=5, what="the operation to be listed")
        cell = lambda column: str(ops.get_cell(op.id, column))  # noqa: E731
        assert (cell("operation"), cell("phase")) == ("maintenance", "running")
        assert "maintenance, expires in 6d" in cell("lease")
        await tab_to(pilot, ops)
        await row_to(pilot, ops, op.id)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.loaded, what="the diff")
        views = {v.diff.path: v.diff for v in app.screen.query(DiffFileView)}
        assert set(views) == {"MEMORY_runbook.md", "MEMORY_new.md"}
        assert "+1. Page the on-call first." in views["MEMORY_runbook.md"].lines
        assert "+A new free-form note." in views["MEMORY_new.md"].lines
        assert "worktree, so far" in str(app.screen.query_one("#diff-header").render())


# -- insight -------------------------------------------------------------------------------

async def test_a_new_insight_log_is_tailed_live(demo):
    from datetime import datetime, timedelta

    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("2")
        insight = app.screen
        await wait_for(pilot, lambda: insight.loaded and len(insight.logs) == 1, what="the insight screen")
        when = datetime.now(UTC) + timedelta(days=1)
        path = await run_in_thread(lambda: land_insight_log(
            demo, "# Insight\n\n## The retry loop\n\nThree agents hit the same flaky test.\n", when=when))
        await wait_for(pilot, lambda: insight.shown == path.name, timeout=5, what="the new log to be shown")
        assert [log.name for log in insight.logs][0] == path.name and len(insight.logs) == 2
        md = insight.query_one("#insight-markdown", Markdown)
        assert "The retry loop" in md.source
        # paused: a further log is listed but the view stays where the person is
        await pilot.press("f")
        later = when + timedelta(hours=1)
        path2 = await run_in_thread(lambda: land_insight_log(demo, "# Insight\n\nAnother.\n", when=later))
        await wait_for(pilot, lambda: len(insight.logs) == 3, timeout=5, what="the third log")
        assert insight.shown == path.name and insight.logs[0].name == path2.name


# -- maintenance ---------------------------------------------------------------------------

EDIT_SCRIPT = """\
import sys
path = sys.argv[-1]
with open(path, "a", encoding="utf-8") as fh:
    fh.write({line!r} + "\\n")
"""


def editor(tmp_path: Path, name: str, line: str) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(EDIT_SCRIPT.format(line=line), encoding="utf-8")
    return f"{sys.executable} {script}"


async def test_land_a_maintenance_edit_and_see_a_refused_landing(demo, tmp_path, monkeypatch):
    app = RmtuiApp(demo)
    repo = git.Repo(demo.path)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("3")
        maint = app.screen
        await wait_for(pilot, lambda: maint.loaded, what="the maintenance screen")
        assert maint.check_action("land", ()) is None and maint.check_action("begin", ())
        await pilot.press("b")
        await wait_for(pilot, lambda: maint.status is not None and maint.files, what="a maintenance worktree")
        files = maint.query_one("#maint-files")
        await tab_to(pilot, files)
        await option_to(pilot, files, "MEMORY_ingestion.md")
        monkeypatch.setenv("EDITOR",
                           editor(tmp_path, "good", "- `ing-retry` Retries use jittered backoff. → [dep:ing-poll]"))
        await pilot.press("e")
        await wait_for(pilot, lambda: maint.status["dirty"] == ["MEMORY_ingestion.md"] and maint.status["valid"],
                       what="the edit to show as a valid change")
        head = repo.head.commit.hexsha
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the land prompt")
        await pilot.press("ctrl+a", "ctrl+k")  # clear the suggested message
        await type_text(pilot, "maintain: record jittered retries")
        await pilot.press("enter")
        # the branch moves before the root's files follow it (publish CASes the ref, then syncs the
        # work tree): the receipt says the landing is whole
        await wait_for(pilot, lambda: maint.status is None and maint.result is not None
                       and maint.result.plain.startswith("landed"), what="the receipt")
        assert repo.head.commit.hexsha != head
        assert repo.head.commit.message.startswith("maintain: record jittered retries")
        assert "`ing-retry`" in (demo.path / "MEMORY_ingestion.md").read_text(encoding="utf-8")

        # a second maintenance whose edit breaks the graph: errors show live, landing is refused
        await pilot.press("b")
        await wait_for(pilot, lambda: maint.status is not None and maint.files, what="the second worktree")
        await tab_to(pilot, files)
        await option_to(pilot, files, "MEMORY_ingestion.md")
        monkeypatch.setenv("EDITOR", editor(tmp_path, "bad", "- `ing-broken` Points nowhere. → [dep:no-such-item]"))
        await pilot.press("e")
        await wait_for(pilot, lambda: maint.status and not maint.status["valid"], what="the live validation error")
        assert "edge-dangling" in str(maint.query_one("#maint-errors").render())
        head = repo.head.commit.hexsha
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the land prompt")
        await pilot.press("enter")
        await wait_for(pilot, lambda: maint.result is not None and "refused" in maint.result.plain,
                       what="the refusal")
        assert "invalid-graph" in maint.result.plain and "no-such-item" in maint.result.plain
        assert repo.head.commit.hexsha == head
        assert "ing-broken" not in (demo.path / "MEMORY_ingestion.md").read_text(encoding="utf-8")
        assert maint.status is not None  # the worktree is kept for correction
        # aborting a worktree with changes asks first; no keeps it, yes discards it
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the abort confirmation")
        assert "MEMORY_ingestion.md" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is maint, what="the dialog to close")
        await quiet(app, pilot)
        assert maint.status is not None
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation again")
        await pilot.press("y")
        # the worktree leaves the disk (and the status) before the abort's receipt: `b` is taken after it
        await wait_for(pilot, lambda: maint.status is None and "aborted" in maint.result.plain, what="the abort")
        # a worktree without changes is aborted at once: nothing would be lost
        await pilot.press("b")
        await wait_for(pilot, lambda: maint.status is not None, what="a third worktree")
        await pilot.press("a")
        await wait_for(pilot, lambda: maint.status is None, what="the abort without a question")
        assert not isinstance(app.screen, ConfirmScreen)


async def test_a_file_that_is_not_a_memory_file_is_shown_and_refused_until_deleted_by_a_yes(demo, tmp_path,
                                                                                           monkeypatch):
    """`n` then a name like notes.txt: the file is never committed, so landing (which removes
    the worktree) is refused by name; only an explicit "Delete them and land" drops it."""
    app = RmtuiApp(demo)
    repo = git.Repo(demo.path)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("3")
        maint = app.screen
        await wait_for(pilot, lambda: maint.loaded, what="the maintenance screen")
        await pilot.press("b")
        await wait_for(pilot, lambda: maint.status is not None and maint.files, what="a maintenance worktree")
        wt = Path(maint.status["worktree"])
        monkeypatch.setenv("EDITOR", editor(tmp_path, "notes", "what I found about retries"))
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the new-file prompt")
        await type_text(pilot, "notes.txt")
        await pilot.press("enter")
        await wait_for(pilot, lambda: maint.status and maint.status["untracked"] == ["notes.txt"],
                       what="the stray file to show")
        assert "not memory files, never landed: notes.txt" in str(maint.query_one("#maint-status").render())
        head = repo.head.commit.hexsha
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the land prompt")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the offer to delete and land")
        question = str(app.screen.query_one("#confirm-question").render())
        assert "notes.txt" in question and "MEMORY_*.md" in question and "rename it" in question
        assert "refused" in maint.result.plain and "untracked-files" in maint.result.plain
        assert "notes.txt" in maint.result.plain
        await pilot.press("n")  # no: nothing lands, nothing is deleted
        await wait_for(pilot, lambda: app.screen is maint, what="the confirmation to close")
        assert repo.head.commit.hexsha == head and maint.status is not None
        assert (wt / "notes.txt").read_text() == "what I found about retries\n"
        # aborting says the file goes too
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the abort confirmation")
        assert "notes.txt" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is maint, what="the confirmation to close")
        assert (wt / "notes.txt").is_file()
        # an edit to a memory file, then yes: the stray file is deleted and the edit lands
        files = maint.query_one("#maint-files")
        await tab_to(pilot, files)
        await option_to(pilot, files, "MEMORY_ingestion.md")
        monkeypatch.setenv("EDITOR",
                           editor(tmp_path, "good", "- `ing-retry` Retries use jittered backoff. → [dep:ing-poll]"))
        await pilot.press("e")
        await wait_for(pilot, lambda: maint.status["dirty"] == ["MEMORY_ingestion.md"], what="the edit")
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the land prompt")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the offer again")
        await pilot.press("y")
        await wait_for(pilot, lambda: maint.status is None and maint.result is not None
                       and maint.result.plain.startswith("landed"), what="the receipt (the worktree gone)")
        assert repo.head.commit.hexsha != head
        assert "`ing-retry`" in (demo.path / "MEMORY_ingestion.md").read_text(encoding="utf-8")
        assert not wt.exists() and not (demo.path / "notes.txt").exists()


async def test_landing_is_refused_when_the_root_moved(demo, tmp_path, monkeypatch):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("3")
        maint = app.screen
        await wait_for(pilot, lambda: maint.loaded, what="the maintenance screen")
        await pilot.press("b")
        await wait_for(pilot, lambda: maint.status is not None, what="a maintenance worktree")
        await run_in_thread(land_insight_log, demo, "# Insight\n\nMoved the head.\n")
        await wait_for(pilot, lambda: not maint.status["head_current"], what="the head move to show")
        assert "landing will be refused" in str(maint.query_one("#maint-status").render())
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the land prompt")
        await pilot.press("enter")
        await wait_for(pilot, lambda: maint.result is not None and "refused" in maint.result.plain, what="refusal")
        assert "moved since maintenance began" in maint.result.plain


# -- themes, keys, palette -----------------------------------------------------------------

async def test_theme_switch_applies_and_is_remembered(demo, tmp_path):
    from textual.color import Color

    from rmtui.tui.userconfig import UserConfig, config_path

    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        assert app.theme == "rmtui-dark"
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the theme picker")
        await pilot.press(*"tidepool")
        await palette_lists(app, pilot, "tidepool")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.theme == "rmtui-tidepool", what="the theme switch")
        await wait_for(pilot, lambda: config_path().exists() and UserConfig.load().theme == "rmtui-tidepool",
                       what="the choice to be saved")
        await pilot.pause()
        assert screen.query_one(MemoryTree).styles.background == Color.parse("#10292f")
    again = RmtuiApp(demo)
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert again.theme == "rmtui-tidepool"


async def test_bindings_are_remapped_from_the_user_config(demo, tmp_path):
    from rmtui.tui.userconfig import UserConfig, config_path

    path = config_path()
    path.parent.mkdir(parents=True)
    path.write_text('[keys]\n"evidence.approve" = "y"\n"no.such.binding" = "z"\n', encoding="utf-8")
    app = RmtuiApp(demo, config=UserConfig.load())
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        assert any("no.such.binding" in n.message for n in app._notifications)
        table = screen.query_one(EvidenceTable)
        first = inbox_uids(demo)[0]
        await select_row(pilot, table, first)
        await pilot.press("a")
        await quiet(app, pilot)
        assert evidence_states(demo)[first][0] == "inbox"
        await pilot.press("y")
        await wait_for(pilot, lambda: evidence_states(demo)[first][0] == "queued", what="the remapped approve")


async def test_command_palette_lists_every_action_and_runs_one(demo):
    from rmtui.tui.app import binding_ids

    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        table = screen.query_one(EvidenceTable)
        first = inbox_uids(demo)[0]
        await select_row(pilot, table, first)
        helps = [c.help for c in app.get_system_commands(screen)]
        listed = {h.rsplit("binding id ", 1)[-1] for h in helps if "binding id" in h}
        main_ids = {i for i in binding_ids() if i.split(".")[0] in ("app", "main", "evidence", "operations",
                                                                   "receipts", "preview")}
        assert main_ids <= listed, main_ids - listed
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"Evidence: Approve")
        await palette_lists(app, pilot, "Evidence: Approve")
        await pilot.press("enter")
        await wait_for(pilot, lambda: evidence_states(demo)[first][0] == "queued", what="approve from the palette")


# -- live updates --------------------------------------------------------------------------

async def test_changes_from_other_processes_show_up_live(demo, cli, monkeypatch):
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        screen = await started(app, pilot)
        table = screen.query_one(EvidenceTable)
        before = len(table.rows_by_key)
        res = await run_in_thread(lambda: cli("--headless", "--root", str(demo.path), "submit", "--session", "agent-9",
                                              "-", input="The deploy script needs AWS_PROFILE=prod.\n"))
        assert res.code == 0
        await wait_for(pilot, lambda: len(table.rows_by_key) == before + 1, timeout=5, what="the new evidence")
        assert any(e.session == "agent-9" and e.state == "inbox" for e in table.rows_by_key.values())

        def land_node() -> None:
            from rmtui.engine.writes import maintain

            op = maintain.begin(demo)
            p = Path(op.worktree) / "MEMORY_ingestion.md"
            p.write_text(p.read_text(encoding="utf-8") + "- `ing-live` Added from elsewhere. → []\n", encoding="utf-8")
            maintain.land(demo, message="maintain: from another process")

        await run_in_thread(land_node)
        tree = screen.query_one(MemoryTree)
        await wait_for(pilot, lambda: tree.graph is not None and "ing-live" in tree.graph.items, timeout=5,
                       what="the graph to reload")
        receipts = screen.query_one(ReceiptsTable)
        await wait_for(pilot, lambda: len(receipts.rows_by_key) == 3, timeout=5, what="the new receipt")


# -- retrieve ------------------------------------------------------------------------------

async def test_retrieve_playground_shows_ranked_results_and_the_agents_text(demo):
    # no embedding service is reachable here: retrieval ranks with BM25 and says so
    set_config_value(demo.path, "embedding.service_url", "http://127.0.0.1:9")
    app = RmtuiApp(demo)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("4")
        screen = app.screen
        assert app.focused is screen.query_one("#need")
        await type_text(pilot, "how are duplicate gauge readings dropped")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.answer is not None, timeout=30, what="the retrieval")
        assert screen.answer.error is None, screen.answer.error
        ids = [r["id"] for r in screen.answer.results]
        assert "ing-dedupe" in ids
        assert "`ing-dedupe`" in screen.answer.text
        assert str(screen.query_one("#agent-text").render()).strip() == screen.answer.text.strip()
        assert screen.query_one("#results").row_count == len(ids)
        status = str(screen.query_one("#retrieve-status").render())
        assert "warning" in status and "mode lexical" in status
