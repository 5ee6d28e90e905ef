"""Snapshots of the Sharing screen (6) on frozen roots: fixed commit dates, operation ids,
device ids, sync times and the app's clock, so each picture is identical from run to run.

- the sync panel of a machine that is behind its upstream while another machine holds the
  shared queue's lease (no views connected: the views pane says how to connect one);
- the views panel of a root without sync (the sync panel says how to turn it on);
- the read-only answer of a question view.

Update after an intended visual change with
``.venv/bin/python -m pytest tests/test_tui_sharing_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_shared_views import make_consumer, make_provider, publish
from test_sync import git, ident, land, memory_with
from test_sync_queue import machine
from test_tui_support import FROZEN_TS, freeze_engine, main_loaded, wait_for

from rmtui.engine import sync
from rmtui.engine.evidence import records
from rmtui.engine.sync import state as sync_state
from rmtui.engine.views import consumer, files, provider
from rmtui.engine.views.client import ProviderClient
from rmtui.engine.views.questions import QuestionAnswer
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.sharing import AnswerScreen, SharingScreen

SIZE = (120, 32)
A_DEVICE = "4a1c0de5" + "9" * 24
B_DEVICE = "b0b0cafe" + "1" * 24
UIDS = ("0" * 31 + "1", "0" * 31 + "2")
SUBMITTED = "2025-06-02T09:00:00+00:00"  # canonical UTC, as the original writes it (a pull refuses others)
#: The batch id of the two candidates, by the original's formula (a lease naming another is not honoured)
BATCH = records.batch_id([records.candidate(uid, "s1", i + 1, f"fact {i}\n", SUBMITTED) for i, uid in enumerate(UIDS)])


def set_device(root, device: str) -> None:
    path = root.runtime / "update_queue" / "device.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device_id": device}) + "\n", encoding="utf-8")


def queue_files() -> dict[str, str]:
    """Two candidates of machine a and a's lease on their batch, as the original writes them."""
    out = {f"update_queue/candidates/{uid}.json": records.record_bytes(
        records.candidate(uid, "s1", i + 1, f"fact {i}\n", SUBMITTED)).decode()
        for i, uid in enumerate(UIDS)}
    lease = {"schema_version": 1, "holder": A_DEVICE, "token": "7" * 32, "base_commit": "0" * 40,
             "batch_id": BATCH, "candidate_uids": list(UIDS), "expires_at": "2025-06-02T10:30:00+00:00"}
    out["update_queue/lease.json"] = records.record_bytes(lease).decode()
    return out


def push_queue(upstream: Path, work: Path) -> None:
    """Plain Git on another checkout publishes the queue files (nothing of rmtui involved)."""
    subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(work)], check=True)
    ident(work)
    for rel, text in queue_files().items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text, encoding="utf-8")
    git(work, "add", "-A", "-f")
    git(work, "commit", "-qm", "update queue: claim " + BATCH)
    git(work, "push", "-q", "origin", "main")


@pytest.fixture
def home(monkeypatch) -> Path:
    home = Path(os.environ["HOME"])
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    freeze_engine(monkeypatch)
    return home


@pytest.fixture
def behind(home):
    """Machine b: pulled a's lease, then a landed and pushed one commit b has fetched only."""
    upstream = home / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(upstream)], check=True)
    a, b = machine(home, upstream, "a", first=True), machine(home, upstream, "b")
    set_device(a, A_DEVICE)
    set_device(b, B_DEVICE)
    push_queue(upstream, home / "plain")
    assert sync.pull(b).status == "synced" and sync.pull(a).status == "synced"
    land(a, "MEMORY.md", memory_with(("staging-port", "the staging DB listens on 5433")))
    assert sync.push(a).status == "pushed"
    subprocess.run(["git", "fetch", "-q", "origin"], cwd=b.path, check=True)
    st = sync_state.load(b)
    st.last_successful_pull_at = "2025-06-02T09:12:00+00:00"
    st.last_successful_push_at = "2025-06-01T17:45:00+00:00"
    st.last_pull_check_at = None
    st.record("synced", "up to date")
    st.last_failure_at, st.last_failure_status = "2025-06-02T08:55:00+00:00", "offline"
    st.last_failure_message = "fetch from origin: Could not read from remote repository."
    sync_state.save(b, st)
    return b


@pytest.fixture
def viewer(home, monkeypatch):
    """A root without sync, connected to a Git-shared file view and an HTTP question view."""
    prov = make_provider(home)
    provider.create_file_view(prov, "platform", ["platform"], exclude=["root-password"], title="Platform")
    shares = (home / "shares.git").as_uri()
    publish(prov, shares)
    cons = make_consumer(home)
    consumer.connect_git(cons, f"{shares}#share=platform")
    consumer.connect_git(cons, f"{shares}#share=platform", as_id="platform-old")
    # the question view's provider is not running: the connection is recorded without a check
    monkeypatch.setattr(ProviderClient, "ready", lambda self, view_id: None)
    consumer.connect_http(cons, "http://127.0.0.1:8767/api/share/questions/ask-platform", "token-1")
    pulled = "2025-06-02T09:25:00+00:00"
    files.update_state(cons, "platform", last_success_at=pulled, last_attempt_at=pulled)
    files.update_state(cons, "platform-old", status="stale", last_success_at="2025-05-30T08:00:00+00:00",
                       reason="fetch from the share repository failed: repository not found")
    return cons


async def sharing(app, pilot) -> SharingScreen:
    await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
    await pilot.press("6")
    await wait_for(pilot, lambda: isinstance(app.screen, SharingScreen) and app.screen.loaded >= {"sync", "views"},
                   what="the sharing screen")
    app.clear_notifications()
    await pilot.pause(0.2)
    return app.screen


@pytest.mark.parametrize("size", [(80, 24), SIZE], ids=["80x24", "120x32"])
def test_sync_panel_behind_with_another_machines_lease(snap_compare, behind, size):
    app = RmtuiApp(behind, clock=lambda: FROZEN_TS, live=False)

    async def run_before(pilot) -> None:
        screen = await sharing(app, pilot)
        assert screen.overview.behind == 1 and screen.overview.lease is not None

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_views_panel_without_sync(snap_compare, viewer):
    app = RmtuiApp(viewer, clock=lambda: FROZEN_TS, live=False)

    async def run_before(pilot) -> None:
        screen = await sharing(app, pilot)
        assert {v.view_id for v in screen.views} == {"platform", "platform-old", "ask-platform"}

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_question_answer_dialog(snap_compare, viewer):
    app = RmtuiApp(viewer, clock=lambda: FROZEN_TS, live=False)
    result = QuestionAnswer("ask-platform", "answered",
                            answer="We deploy with Helm to the prod cluster; Helm 3.14 is pinned.")

    async def run_before(pilot) -> None:
        await sharing(app, pilot)
        await app.push_screen(AnswerScreen("how do we deploy?", result))
        await wait_for(pilot, lambda: isinstance(app.screen, AnswerScreen), what="the answer dialog")

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
