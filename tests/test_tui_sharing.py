"""The Sharing screen (6) and the queue's machine column, with real Git and real keys: a bare
upstream over file:// shared by clones ("machines"), a provider root publishing a file view
to a Git share repository and answering a question view over HTTP on a loopback port."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_shared_views import PROVIDER_MEMORY, commit_files, make_consumer, make_provider, publish
from test_sync import land, memory_with
from test_sync_queue import choose_all, machine, submit
from test_tui_support import main_loaded, type_text, wait_for

from rmtui.engine import sync
from rmtui.engine.memory.roots import MemoryRoot, init_root
from rmtui.engine.sync.queue_git import GitQueue, device_id
from rmtui.engine.views import consumer, files, provider
from rmtui.engine.views.server import ViewServer
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.dialogs import HelpScreen, PromptScreen
from rmtui.tui.screens.sharing import AnswerScreen, SharingScreen
from rmtui.tui.widgets.evidence_table import EvidenceTable
from rmtui.tui.widgets.views_table import SharedViewsTable

SIZE = (120, 36)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def upstream(tmp_path) -> Path:
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    return bare


@pytest.fixture
def two(tmp_path, upstream) -> tuple[MemoryRoot, MemoryRoot]:
    """Machine a made the root and pushed it; machine b cloned it; sync on for both."""
    return machine(tmp_path, upstream, "a", first=True), machine(tmp_path, upstream, "b")


def footer_keys(app) -> dict[str, str]:
    return {key: b.binding.description for key, b in app.screen.active_bindings.items()
            if b.binding.show and b.enabled}


def shown(screen, selector: str) -> str:
    return str(screen.query_one(selector).content)


async def open_sharing(app, pilot) -> SharingScreen:
    await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
    await pilot.press("6")
    await wait_for(pilot, lambda: app.current_mode == "sharing", what="the sharing screen")
    screen = app.screen
    assert isinstance(screen, SharingScreen)
    await wait_for(pilot, lambda: screen.loaded >= {"sync", "views"}, what="the sharing panels")
    return screen


async def sync_key(pilot, screen: SharingScreen, key: str) -> dict:
    screen.outcome = None
    await pilot.press(key)
    await wait_for(pilot, lambda: screen.outcome is not None, timeout=60, what=f"{key} to finish")
    return screen.outcome


# -- sync -------------------------------------------------------------------------------------

async def test_P_pulls_an_incoming_commit_and_S_pushes_a_local_one(two, upstream):
    a, b = two
    land(a, "MEMORY.md", memory_with(("staging-port", "the staging DB listens on 5433")))
    assert sync.push(a).status == "pushed"
    git(b.path, "fetch", "-q", "origin")
    app = RmtuiApp(b)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sharing(app, pilot)
        assert screen.overview.behind == 1 and screen.overview.ahead == 0
        assert "origin/main · ahead 0, behind 1 ·" in shown(screen, "#sync-details")
        keys = footer_keys(app)
        assert keys.get("P") == "Pull" and keys.get("S") == "Push"
        out = await sync_key(pilot, screen, "P")
        assert out["status"] == "synced" and out["files"] == ["MEMORY.md"], out
        assert "staging-port" in (b.path / "MEMORY.md").read_text()  # the root changed on disk
        assert git(b.path, "rev-parse", "HEAD") == git(a.path, "rev-parse", "HEAD")
        assert "pull: synced · pulled 1 commit(s) from origin/main" in shown(screen, "#sync-outcome")
        await wait_for(pilot, lambda: screen.overview.behind == 0 and screen.overview.last_pull_at is not None,
                       what="the panel to follow the pull")
        assert shown(screen, "#sync-status").startswith("synced")
        # a local landing: ahead 1, then S sends it
        land(b, "MEMORY.md", memory_with(("staging-port", "5433"), ("b-fact", "written on machine b")))
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: screen.overview.ahead == 1, what="ahead 1")
        assert "ahead 1, behind 0" in shown(screen, "#sync-details")
        out = await sync_key(pilot, screen, "S")
        assert out["status"] == "pushed", out
        head = git(b.path, "rev-parse", "HEAD").strip()
        assert git(upstream, "rev-parse", "main").strip() == head  # published to the bare repository
        await wait_for(pilot, lambda: screen.overview.last_push_at is not None, what="the push time")
        assert "pushed never" not in shown(screen, "#sync-details")


async def test_an_unreachable_upstream_shows_offline(two, upstream, tmp_path):
    _, b = two
    shutil.move(str(upstream), str(tmp_path / "elsewhere.git"))
    app = RmtuiApp(b)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sharing(app, pilot)
        out = await sync_key(pilot, screen, "P")
        assert out["status"] == "offline", out
        await wait_for(pilot, lambda: screen.overview.status == "offline", what="offline in the panel")
        assert shown(screen, "#sync-status").startswith("offline")
        assert screen.query_one("#sync-status").has_class("-warn")
        assert "P" in footer_keys(app)  # offline is retried: the keys stay


async def test_with_sync_off_the_panel_says_how_to_enable_it_and_P_and_S_say_why_they_cannot(tmp_path):
    root = init_root(tmp_path / "solo")
    app = RmtuiApp(root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sharing(app, pilot)
        assert shown(screen, "#sync-status").startswith("disabled")
        assert "[sync] enabled = true" in shown(screen, "#sync-status")
        assert "[sync] enabled key of rightmemory.toml" in shown(screen, "#sync-details")
        assert "config set sync.enabled true" in shown(screen, "#sync-details")
        for key, verb in (("P", "pull"), ("S", "push")):
            app.clear_notifications()
            await pilot.press(key)
            await wait_for(pilot, lambda: bool(app._notifications), what=f"what {key} says")
            (note,) = list(app._notifications)
            # one line: why it cannot, and the command that turns sync on
            assert "\n" not in note.message and note.message.startswith(f"Sync is off, so there is nothing to {verb}")
            assert "rmtui --headless config set sync.enabled true" in note.message
        assert screen.outcome is None and screen.syncing is None
        assert "No shared views are connected" in shown(screen, "#views-header")


# -- shared views -----------------------------------------------------------------------------

@pytest.fixture
def views(tmp_path):
    """A consumer connected to a provider's file view (Git share) and question view (HTTP)."""
    prov = make_provider(tmp_path)
    provider.create_file_view(prov, "platform", ["platform"], exclude=["root-password"], title="Platform")
    provider.create_question_view(prov, "ask-platform", title="Ask the platform team",
                                  instructions="Answer from the platform memory only.")
    shares = (tmp_path / "shares.git").as_uri()
    publish(prov, shares)
    srv = ViewServer(prov, port=0)
    url = srv.start()
    _, question_token = files.issue_token(prov, "ask-platform", "question", "frontend team")
    cons = make_consumer(tmp_path)
    consumer.connect_git(cons, f"{shares}#share=platform")
    consumer.connect_http(cons, f"{url}/api/share/questions/ask-platform", question_token)
    yield prov, cons, shares
    srv.stop()


async def test_views_show_fresh_p_pulls_a_new_version_and_a_asks(views):
    prov, cons, shares = views
    app = RmtuiApp(cons)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sharing(app, pilot)
        table = screen.query_one(SharedViewsTable)
        assert app.focused is table
        rows = {v.view_id: v for v in table.views}
        assert (rows["platform"].kind, rows["platform"].status) == ("MF", "fresh")
        assert (rows["ask-platform"].kind, rows["ask-platform"].status) == ("MQ", "fresh")
        before = rows["platform"].items
        # ? lists the screen's keys and the views pane's, with their binding ids
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help screen")
        ids = {row.binding_id: row for row in app.screen.rows}
        assert ids["sharing.pull"].section == "Sharing" and ids["views.ask"].section == "Shared views"
        assert {"sharing.push", "views.pull", "views.pull_all", "app.screen.sharing"} <= set(ids)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="the help to close")
        # the provider publishes a new version; p pulls the view under the cursor
        commit_files(prov, {"MEMORY.md": PROVIDER_MEMORY.replace(
            "- `helm-ver` Helm 3.14 is pinned → []\n",
            "- `helm-ver` Helm 3.14 is pinned → []\n- `argo-cd` Argo CD syncs the charts → [dep:helm-ver]\n")})
        publish(prov, shares)
        assert table.get_row_index("ask-platform") == 0
        assert "p" not in footer_keys(app) and footer_keys(app).get("a") == "Ask"  # a question view: ask only
        await pilot.press("down")
        assert table.current.view_id == "platform"
        assert footer_keys(app).get("p") == "Pull view" and "a" not in footer_keys(app)
        await pilot.press("p")
        await wait_for(pilot, lambda: next(v for v in table.views if v.view_id == "platform").items == before + 1,
                       timeout=30, what="the new version")
        imported = cons.path / ".runtime/shared_views/imports/platform/dist/MEMORY.md"
        assert "argo-cd" in imported.read_text()
        # a asks the question view; the answer shows in a read-only dialog and is not stored
        memory = (cons.path / "MEMORY.md").read_bytes()
        await pilot.press("up", "a")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the question prompt")
        await type_text(pilot, "how do we deploy with helm")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, AnswerScreen), timeout=60, what="the answer")
        answer = app.screen
        assert answer.result.status == "answered", answer.result
        assert "deploy with Helm" in shown(answer, "#answer-text")
        assert "how do we deploy with helm" in shown(answer, "#answer-question")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="the answer to close")
        assert (cons.path / "MEMORY.md").read_bytes() == memory


async def test_r_pulls_every_file_view_and_a_failure_shows_stale(views, tmp_path):
    _, cons, shares = views
    shutil.move(str(tmp_path / "shares.git"), str(tmp_path / "moved.git"))
    app = RmtuiApp(cons)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sharing(app, pilot)
        table = screen.query_one(SharedViewsTable)
        await pilot.press("r")
        await wait_for(pilot, lambda: any(v.status == "stale" for v in table.views), timeout=30, what="stale")
        stale = next(v for v in table.views if v.view_id == "platform")
        assert stale.reason and "not fresh: platform" in shown(screen, "#views-header")


# -- the machine column of the queue ----------------------------------------------------------

async def test_queue_rows_name_the_machine_that_holds_their_batch(two):
    a, b = two
    uids = sorted(submit(a, f"fact {i}\n") for i in range(2))
    sync.push(a)
    qb = GitQueue(b)
    qb.refresh()
    assert qb.claim(choose_all(b)) is not None  # machine b holds the batch of a's evidence
    assert sync.pull(a).status == "synced"
    app = RmtuiApp(a)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        table = app.screen.query_one(EvidenceTable)
        await wait_for(pilot, lambda: table.machine_column, what="the machine column")
        other = device_id(b)[:8]
        for uid in uids:
            row = table.get_row(uid)
            assert str(row[2]) == other and str(row[1]) == "queued"
        screen = await open_sharing(app, pilot)
        assert f"lease held by machine {other}" in shown(screen, "#sync-details")


async def test_without_sync_the_queue_has_no_machine_column(tmp_path):
    root = init_root(tmp_path / "solo")
    submit(root, "a fact\n")
    app = RmtuiApp(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        table = app.screen.query_one(EvidenceTable)
        await wait_for(pilot, lambda: table.row_count == 1, what="the evidence")
        assert not table.machine_column and "machine" not in [str(c.label) for c in table.columns.values()]
