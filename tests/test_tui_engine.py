"""Engine-side pieces of the workbench: the demo root, the change watcher, user settings,
themes and the ``rmtui demo`` command registration."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import git
import pytest

from rmtui.engine.errors import UsageError
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.host.demo import EVIDENCE, create_demo_root, land_insight_log
from rmtui.engine.host.watch import (
    CYCLES,
    GRAPH,
    HEAD,
    INSIGHT,
    STATE,
    WORKTREE,
    ChangeSet,
    classify,
    watch_root,
)
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.writes.operations import OperationStore

# -- demo root ---------------------------------------------------------------------------

def test_demo_root_is_real_memory_with_receipts_log_and_waiting_evidence(tmp_path):
    root = create_demo_root(tmp_path / "demo")
    report = validate_root(root.path)
    assert report.ok, report.issues
    assert {"tidewater", "ing-poll", "flood-alerts", "fi-batch"} <= set(report.graph.items)
    assert report.graph.focus == ["flood-alerts"]
    repo = git.Repo(root.path)
    subjects = [c.message.splitlines()[0] for c in repo.iter_commits()]
    assert subjects[-1].startswith("init:") and len(subjects) == 3
    assert all("RightMemory-Operation:" in c.message for c in list(repo.iter_commits())[:2])
    assert not repo.is_dirty(untracked_files=True)
    st = OperationStore(root)
    try:
        receipts = {r.kind: r for r in st.receipts()}
    finally:
        st.close()
    assert receipts["maintenance"].phase == "committed" and "MEMORY.md" in receipts["maintenance"].changed_paths
    logs = list((root.path / "insight_logs").glob("*.md"))
    assert len(logs) == 1 and receipts["insight"].changed_paths == [f"insight_logs/{logs[0].name}"]
    assert root.config().get("update.approval") == "required"
    q = EvidenceQueue(root)
    try:
        counts = q.counts()
    finally:
        q.close()
    assert counts["inbox"] == len(EVIDENCE) - 1 and counts["queued"] == 1


def test_demo_root_refuses_a_non_empty_folder(tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(UsageError):
        create_demo_root(target)
    assert (target / "notes.txt").read_text() == "mine"


# -- watcher -----------------------------------------------------------------------------

def test_classify_keeps_what_fronts_show_and_drops_noise():
    assert classify("MEMORY.md") == GRAPH
    assert classify("insight_logs/2025-01-01-000000.md") == INSIGHT
    assert classify(".git/refs/heads/main") == HEAD
    assert classify(".runtime/state.sqlite3-wal") == STATE
    assert classify(".runtime/worktrees/maintenance-1/MEMORY.md") == WORKTREE
    assert classify(".runtime/insight/trigger-state.json") == CYCLES  # the points a gauge shows
    assert classify(".runtime/cycles/insight.json") == CYCLES  # the last outcome
    for noise in (".git/objects/ab/cdef", ".git/index", ".git/refs/heads/main.lock", ".runtime/memory.lock",
                  ".runtime/state.sqlite3-shm", ".runtime/worktrees/m-1/.git", "notes/x.txt",
                  ".runtime/insight/trigger-state.lock", ".runtime/cycles/insight.lock"):
        assert classify(noise) is None, noise
    assert classify(".runtime/state.sqlite3-wal", deleted=True) is None


def test_changesets_merge():
    a = ChangeSet(frozenset({"MEMORY.md"}), frozenset({GRAPH}))
    b = ChangeSet(frozenset({".runtime/worktrees/op-1/PURSUITS.md"}), frozenset({WORKTREE}))
    merged = a.merge(b)
    assert merged.kinds == {GRAPH, WORKTREE} and merged.worktree_names() == {"op-1"}


def test_watch_root_merges_a_publication_and_ignores_pure_reads(tmp_path):
    root = create_demo_root(tmp_path / "demo")
    stop = threading.Event()
    seen: list[ChangeSet] = []

    ready = threading.Event()

    def run() -> None:
        for cs in watch_root(root, stop_event=stop, on_ready=ready.set):
            seen.append(cs)

    # the probe's folder exists before the watch starts (a file made at once in a folder made
    # while watching can come before the watch on that folder)
    probe = root.runtime / "cycles" / "probe.json"
    probe.parent.mkdir(parents=True, exist_ok=True)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert ready.wait(30), "the watcher never started"
    # pure reads of the state database touch its WAL file but are not changes
    for _ in range(3):
        q = EvidenceQueue(root)
        q.list()
        q.close()
    # a file the watcher reports (a cycle's state file, no database change) marks where the
    # reads' events, had there been any, were all delivered: events arrive in order
    probe.write_text("{}", encoding="utf-8")
    rel = ".runtime/cycles/probe.json"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(rel in cs.paths for cs in seen):
        time.sleep(0.05)
    assert any(rel in cs.paths for cs in seen), seen
    assert not any(STATE in cs.kinds for cs in seen), seen
    probe.unlink()
    deadline = time.monotonic() + 10  # its removal reported too, so no later burst is the probe's
    while time.monotonic() < deadline and sum(rel in cs.paths for cs in seen) < 2:
        time.sleep(0.05)
    n0 = len(seen)
    land_insight_log(root, "# Insight\n\nA new reflection.\n")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(INSIGHT in cs.kinds for cs in seen[n0:]):
        time.sleep(0.05)
    bursts_with_log = [cs for cs in seen[n0:] if INSIGHT in cs.kinds]
    assert len(bursts_with_log) == 1, seen
    assert HEAD in set().union(*(cs.kinds for cs in seen[n0:]))
    # a real write by another process is a state change
    n = len(seen)
    subprocess.run([sys.executable, "-m", "rmtui", "--headless", "--root", str(root.path), "submit",
                    "--session", "s", "-"], input=b"evidence from elsewhere\n", check=True, capture_output=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(STATE in cs.kinds for cs in seen[n:]):
        time.sleep(0.05)
    stop.set()
    t.join(timeout=5)
    assert any(STATE in cs.kinds for cs in seen[n:])
    assert not t.is_alive()


# -- user settings and themes ---------------------------------------------------------------

def test_user_config_reads_keys_and_keeps_comments_when_saving_theme(tmp_path, monkeypatch):
    from rmtui.tui.userconfig import UserConfig, config_path

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    path = config_path()
    assert path == tmp_path / "xdg" / "rmtui" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('# my settings\n[keys]\n"evidence.approve" = "y"\n', encoding="utf-8")
    cfg = UserConfig.load()
    assert cfg.keys == {"evidence.approve": "y"} and cfg.theme is None and not cfg.problems
    cfg.save_theme("rmtui-light")
    text = path.read_text(encoding="utf-8")
    assert "# my settings" in text and UserConfig.load().theme == "rmtui-light"
    assert UserConfig.load().keys == {"evidence.approve": "y"}


def test_user_config_problems_never_stop_the_workbench(tmp_path):
    from rmtui.tui.userconfig import UserConfig

    bad = tmp_path / "config.toml"
    bad.write_text("theme = [1\n", encoding="utf-8")
    cfg = UserConfig.load(bad)
    assert cfg.problems and cfg.theme is None
    cfg.save_theme("rmtui-dark")  # a broken file is left for the person to fix
    assert bad.read_text(encoding="utf-8") == "theme = [1\n"
    bad.write_text('theme = 3\nfont = "x"\n[keys]\n"a.b" = ""\n', encoding="utf-8")
    problems = UserConfig.load(bad).problems
    assert len(problems) == 3


def test_shipped_themes_parse_and_a_broken_theme_is_reported(tmp_path):
    from rmtui.tui.themes import load_themes

    shipped = load_themes()
    assert {"rmtui-dark", "rmtui-light", "rmtui-tidepool"} <= set(shipped.names) and not shipped.problems
    light = next(t for t in shipped.themes if t.name == "rmtui-light")
    assert light.dark is False and light.variables["diff-added"]
    (tmp_path / "good.tcss").write_text("/* ok */\n$primary: #112233;\n$dark: false;\n")
    (tmp_path / "bad.tcss").write_text("$primary: not-a-colour;\n")
    (tmp_path / "junk.tcss").write_text("Screen { color: red; }\n")
    result = load_themes(tmp_path)
    assert result.names == ["good"]
    assert any("bad.tcss" in p for p in result.problems) and any("junk.tcss" in p for p in result.problems)
    good = result.themes[0]
    assert good.variables["diff-added"]  # derived from the theme when the file leaves it out


# -- the demo command ------------------------------------------------------------------------

def test_demo_command_is_registered_without_importing_textual():
    code = ("import sys; from rmtui.cli import build_parser; "
            "a = build_parser().parse_args(['demo', '--path', '/tmp/x']); "
            "assert a.tui_only and callable(a.tui_entry); "
            "assert 'textual' not in sys.modules, 'textual imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_demo_command_creates_the_root_and_opens_the_workbench_on_it(tmp_path, monkeypatch):
    import rmtui.tui.app as tui_app
    import rmtui.tui.terminal as terminal
    from rmtui import cli

    monkeypatch.setattr(terminal, "stdout_is_terminal", lambda: True)  # pytest's stdout is a capture, not one
    opened: list[Path] = []
    monkeypatch.setattr(tui_app, "run_app", lambda root: opened.append(root.path) or 0)
    assert cli.main(["demo", "--path", str(tmp_path / "d")]) == 0
    assert opened == [(tmp_path / "d").resolve()]
    assert validate_root(opened[0]).ok
    head = git.Repo(opened[0]).head.commit.hexsha
    assert cli.main(["demo", "--path", str(tmp_path / "d")]) == 0  # an existing demo is reopened as is
    assert git.Repo(opened[1]).head.commit.hexsha == head


def test_demo_command_refuses_headless(cli):
    res = cli("--headless", "demo")
    assert res.code == 2


def test_rmtui_demo_opens_the_workbench_in_a_terminal_and_quits_on_q(tmp_path):
    """The README's run command, end to end, in a real pseudo-terminal."""
    import os
    import pty
    import select

    target = tmp_path / "demo"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real CLI in a terminal
        try:
            os.environ.update({"TERM": "xterm-256color", "COLUMNS": "140", "LINES": "40"})
            os.execv(sys.executable, [sys.executable, "-m", "rmtui", "demo", "--path", str(target)])
        finally:
            os._exit(127)
    out = b""

    def read_until(marker: bytes, timeout: float) -> None:
        nonlocal out
        end = time.monotonic() + timeout
        while time.monotonic() < end and marker not in out:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    out += os.read(fd, 65536)
                except OSError:
                    return

    try:
        read_until(b"wait for your approval", 30)
        assert b"Memory graph" in out and b"wait for your approval" in out
        os.write(fd, b"q")
        read_until(b"demo root is kept", 15)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"demo root is kept at" in out
    assert validate_root(target).ok


# -- why queued evidence waits (engine: rmtui.engine.host.waiting) ----------------------------

def _queued(root):
    q = EvidenceQueue(root)
    try:
        return q.list(state="queued")
    finally:
        q.close()


def test_queue_waiting_names_what_queued_evidence_waits_for_and_what_moves_it(tmp_path):
    from rmtui.engine.host import assistant
    from rmtui.engine.host.waiting import RUN_NOW, queue_waiting
    from rmtui.engine.locks import try_lock
    from rmtui.engine.memory.config import set_config_value
    from rmtui.engine.roles.update_driver import DAEMON_LOCK, BatchStore

    root = create_demo_root(tmp_path / "demo")
    (queued,) = _queued(root)
    w = queue_waiting(root)
    assert (w.state, w.move, w.queued) == ("no_runner", "configure", 1)
    assert w.reason == "no Update model is configured and no host task is open"
    assert "[update.model]" in w.command and "assistant update begin" in w.command

    set_config_value(root.path, "update.model.model_id", "openai:some-model")
    w = queue_waiting(root)
    assert (w.state, w.move, w.command) == ("no_driver", "run_now", RUN_NOW)

    fd = try_lock(root.runtime / DAEMON_LOCK)  # a daemon runs
    try:
        w = queue_waiting(root, now=queued.created_at + 10)
        assert w.state == "debounce" and w.until == pytest.approx(queued.created_at + 3600, abs=0.01)
        assert "a session is ready 3600 s after its last submit" in w.reason and w.move == "run_now"
        # one session short of the target: ready sessions wait the max wait more (the original's rule)
        w = queue_waiting(root, now=queued.created_at + 3601)
        assert w.state == "debounce" and w.until == pytest.approx(queued.created_at + 3600 + 86400, abs=0.01)
        assert queue_waiting(root, now=queued.created_at + 3601 + 86400).state == "ready"
    finally:
        os.close(fd)

    batches = BatchStore(root)
    try:
        batches.upsert("batch-1", [queued.uid], [queued.session], "forced")
        batches.update("batch-1", state="needs_manual_recovery", attempts=3, last_error="model: refused")
    finally:
        batches.close()
    w = queue_waiting(root)
    assert (w.state, w.move) == ("held", "retry") and "failed 3 times: model: refused" in w.reason
    batches = BatchStore(root)
    try:
        batches.update("batch-1", state="superseded")
    finally:
        batches.close()

    hosted = create_demo_root(tmp_path / "hosted")  # no model: a host agent takes the batch
    task = assistant.begin(hosted, retry=True)
    assert task.claimed
    w = queue_waiting(hosted)
    assert (w.state, w.claimed, w.queued) == ("claimed", 1, 0)
    assert task.task_id in w.reason and "lease until" in w.reason and w.move is None


def test_queue_waiting_is_none_when_nothing_is_queued(tmp_path):
    from rmtui.engine.host.waiting import queue_waiting

    root = create_demo_root(tmp_path / "demo")
    q = EvidenceQueue(root)
    try:
        q.reject([e.uid for e in q.list(state="queued")], "not needed")
    finally:
        q.close()
    assert queue_waiting(root) is None


def test_evidence_decisions_can_be_undone_until_claimed(tmp_path):
    from rmtui.engine.errors import ConflictError

    root = create_demo_root(tmp_path / "demo")
    q = EvidenceQueue(root)
    try:
        first, second, _ = [e.uid for e in q.list(state="inbox")]
        q.approve([first])
        assert [e.state for e in q.unapprove([first])] == ["inbox"]
        q.reject([first], "no")
        undone = q.unreject([first])[0]
        assert (undone.state, undone.reason) == ("inbox", None)
        q.approve([second])
        q.reject([second], "no")
        assert q.unreject([second], to="queued")[0].state == "queued"
        q.claim([second], "batch-x")
        with pytest.raises(ConflictError, match="claimed"):
            q.unapprove([second])
        with pytest.raises(UsageError):
            q.unreject([first], to="claimed")
    finally:
        q.close()


def test_progress_reports_reach_only_the_listener_of_this_call():
    from rmtui.engine import progress

    seen: list = []
    progress.report("nobody listens")
    with progress.reporting(seen.append):
        progress.report("embedding memory passages", 3, 10)
        other: list = []
        t = threading.Thread(target=lambda: other.append(progress._listener.get()))
        t.start()
        t.join()
    progress.report("after")
    assert seen == [progress.Progress("embedding memory passages", 3, 10)] and other == [None]


async def test_a_change_made_while_the_watcher_starts_is_shown(tmp_path, monkeypatch):
    """On a busy machine the watcher thread can start seconds after the screens first read the
    root: evidence submitted in between must still show, without any later change to wake it."""
    import watchfiles
    from test_tui_support import main_loaded, wait_for

    from rmtui.tui.app import RmtuiApp
    from rmtui.tui.widgets.evidence_table import EvidenceTable

    root = create_demo_root(tmp_path / "demo")
    gate = threading.Event()
    real_watch = watchfiles.watch

    def late_watch(*args, **kwargs):  # the watch begins only when the test lets it
        gate.wait(30)
        yield from real_watch(*args, **kwargs)

    monkeypatch.setattr(watchfiles, "watch", late_watch)
    app = RmtuiApp(root)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: main_loaded(app), what="the main screen")
        table = app.screen.query_one(EvidenceTable)
        with EvidenceQueue(root) as q:
            uid = q.submit("late-session", b"Submitted while the watcher was still starting.\n")["uid"]
        gate.set()
        await wait_for(pilot, lambda: uid in table.rows_by_key, what="the evidence submitted meanwhile")
