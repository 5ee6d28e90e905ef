"""One root, both tools, alternately (docs/formats.md): what rmtui writes is read the way the
original reads it (tests/compat_checker.py, which imports nothing from rmtui, runs the original's
own Git commands on the files rmtui left), and what the original writes, rmtui reads."""

from __future__ import annotations

import json
import subprocess

import compat_checker as original
import pytest
from test_shared_views import commit_files, git, make_consumer, make_provider

from rmtui.engine.sync import state as sync_state
from rmtui.engine.views import consumer, files, gitshare, provider


@pytest.fixture
def shared(tmp_path):
    """A provider that defined and published the view `platform` to a bare share repository."""
    prov = make_provider(tmp_path)
    provider.create_file_view(prov, "platform", ["platform"], exclude=["root-password"], title="Platform")
    repo = (tmp_path / "shares.git").as_uri()
    res = provider.build(prov, "platform")
    pub = gitshare.publish(prov, res.package, repo_url=repo, view_id="platform", title=res.info.title,
                           description=res.info.description, provider_id="alice")
    return prov, repo, pub


def test_views_rmtui_writes_the_original_reads(tmp_path, shared):
    prov, repo, pub = shared
    # the provider's view folder, as the original keeps it
    assert original.check_view_folder(prov.path, "platform") == []
    cache = original.share_cache_path(prov.path, repo, None)
    assert (cache / ".git").is_dir()
    assert original.check_share_toml((cache / "shares/platform/share.toml").read_text()) == []
    # the original can pull --ff-only in the provider's cache and finds the package there
    meta, package = original.read_git_share(prov.path, pub["join_url"])
    assert meta["file"]["view_id"] == "platform" and meta["file"]["title"] == "Platform Files"

    cons = make_consumer(tmp_path)
    assert consumer.connect_git(cons, pub["join_url"]).pull.status == "pulled"
    registry = (cons.path / "shared_views.toml").read_text()
    assert original.check_shared_views_registry(registry) == []
    assert 'git_url = "' + repo + '"' in registry and 'git_share_id = "platform"' in registry
    meta, package = original.read_git_share(cons.path, pub["join_url"])  # the consumer's cache, as the original
    imported = cons.path / ".runtime/shared_views/imports/platform"
    assert (package / "dist/MEMORY.md").read_bytes() == (imported / "dist/MEMORY.md").read_bytes()
    # a republish reaches a cache the original has just pulled in
    commit_files(prov, {"MEMORY.md": (prov.path / "MEMORY.md").read_text().replace("Helm 3.14", "Helm 3.16")})
    res = provider.build(prov, "platform")
    assert gitshare.publish(prov, res.package, repo_url=repo, view_id="platform", title="Platform",
                            description="", provider_id="alice")["pushed"]
    assert consumer.pull(cons, "platform")[0].changed
    _, package = original.read_git_share(cons.path, pub["join_url"])
    assert "Helm 3.16" in (package / "dist/MEMORY.md").read_text()


def test_views_the_original_writes_rmtui_reads(tmp_path, shared):
    _prov, repo, pub = shared
    cons = make_consumer(tmp_path)
    # the original's join: its cache clone, its registry entry (keys as it writes them)
    original.original_checkout(cons.path, repo, None)
    (cons.path / "shared_views.toml").write_text(
        "# RightMemory shared view registry\n\n[connections.platform]\ntype = \"file\"\n"
        "ref = \"rightmemory://mf/platform\"\nrelationship = \"human\"\nmaintainer = \"alice\"\n"
        f"accepted_from = \"{pub['join_url']}\"\n\n[connections.platform.target]\nkind = \"git-file\"\n"
        f"view_id = \"platform\"\ngit_url = \"{repo}\"\ngit_share_id = \"platform\"\n"
        f"accepted_from_url = \"{pub['join_url']}\"\n", encoding="utf-8")
    conn = files.load_connections(cons.path)["platform"]
    assert (conn.target["git_url"], conn.target["git_share_id"]) == (repo, "platform")
    result = consumer.pull_one(cons, conn)
    assert result.status == "pulled", result
    assert (cons.path / ".runtime/shared_views/imports/platform/dist/MEMORY.md").is_file()
    # rmtui left the original's clone a clone the original can keep pulling in
    original.original_checkout(cons.path, repo, None)
    assert git(original.share_cache_path(cons.path, repo, None), "status", "--porcelain") == ""


def test_an_entry_an_earlier_rmtui_wrote_still_reads(tmp_path, shared):
    _prov, repo, pub = shared
    cons = make_consumer(tmp_path)
    (cons.path / "shared_views.toml").write_text(
        "[connections.platform]\ntype = \"file\"\nref = \"rightmemory://mf/platform\"\n\n"
        f"[connections.platform.target]\nkind = \"git-file\"\nview_id = \"platform\"\n"
        f"accepted_from_url = \"{pub['join_url']}\"\n", encoding="utf-8")
    cache = original.share_cache_path(cons.path, repo, None)
    cache.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(cache)], check=True)  # an earlier rmtui's bare cache
    conn = files.load_connections(cons.path)["platform"]
    assert consumer.pull_one(cons, conn).status == "pulled"
    assert (cache / ".git").is_dir()  # replaced by a working clone
    original.original_checkout(cons.path, repo, None)


def test_a_git_target_without_its_share_is_refused(tmp_path):
    text = ("[connections.v]\ntype = \"file\"\nref = \"rightmemory://mf/v\"\n\n"
            "[connections.v.target]\nkind = \"git-file\"\nview_id = \"v\"\ngit_url = \"file:///x.git\"\n")
    with pytest.raises(Exception, match="needs git_url and git_share_id"):
        files.parse_connections(text)
    bad = text + "git_share_id = \"v\"\ngit_branch = \"--upload-pack=x\"\n"
    with pytest.raises(Exception, match="not a branch name"):
        files.parse_connections(bad)


def test_sync_state_both_ways(root):
    path = sync_state.path_of(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the original failed last; the file carries a key this rmtui does not know
    path.write_text(json.dumps({"last_status": "offline", "last_message": "sync offline: git fetch failed",
                                "last_files": [], "last_failure_at": "2026-01-01T00:00:00+00:00",
                                "last_failure_status": "offline", "last_failure_message": "sync offline",
                                "last_failure_files": [], "last_successful_pull_at": "2025-12-31T00:00:00+00:00",
                                "future_key": {"kept": True}}), encoding="utf-8")
    st = sync_state.load(root)
    assert st.last_failure_status == "offline" and st.last_message.startswith("sync offline")
    st.record("synced", "validated incoming memory published", [])
    sync_state.save(root, st)
    data = json.loads(path.read_text())
    assert original.check_sync_state(data) == []
    assert data["future_key"] == {"kept": True} and data["last_status"] == "synced"
    assert not original.SYNC_FAILURE_KEYS & set(data)
    st = sync_state.load(root)
    st.record("conflict", "incoming memory could not be admitted", ["MEMORY.md"])
    sync_state.save(root, st)
    data = json.loads(path.read_text())
    assert original.check_sync_state(data) == [] and data["last_failure_files"] == ["MEMORY.md"]
    st.record("fresh", "last successful pull is fresh")  # the original records nothing for fresh
    sync_state.save(root, st)
    assert json.loads(path.read_text())["last_status"] == "conflict"


def test_the_checker_catches_what_it_checks(tmp_path):
    """The checks above can fail: each rule against a file that breaks it."""
    assert original.check_sync_state({"last_status": "synced", "last_status_message": "x", "last_files": []})
    assert original.check_sync_state({"last_status": "pushed", "last_message": "x", "last_files": [],
                                      "last_failure_at": "t"})
    assert original.check_shared_views_registry(
        "[connections.v]\ntype = \"file\"\nref = \"r\"\n[connections.v.target]\nkind = \"git-file\"\n")
    assert original.check_share_toml('version = 1\ntitle = "T"\ntransport = "git"\nparts = ["file"]\n'
                                     '[file]\ntitle = "T"\npath = "package"\nmanifest = "package/dist/manifest.toml"\n')
    bare = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(bare)], check=True)
    assert original.check_view_folder(bare, "v")


# -- the Pursuit editor ------------------------------------------------------------------------

PURSUIT_MEMORY = "# Memory\n\n## Tools {#tools}\n\n- `keep-node` The build uses just → []\n"
PURSUIT_MAP = "# Pursuits\n\n## Focus\n\n- `faster-builds`\n\n## Faster builds {#faster-builds} → [dep:keep-node]\n"


@pytest.fixture
def proot(root):
    commit_files(root, {"MEMORY.md": PURSUIT_MEMORY, "PURSUITS.md": PURSUIT_MAP})
    return root


def test_pursuit_rmtui_writes_the_original_reads(proot):
    from rmtui.engine import pursuit

    root = proot
    rev = pursuit.show(root).revision
    assert rev == original.original_pursuit_revision(root.path)  # one state, one revision, both tools
    pursuit.apply(root, {"type": "create", "title": "Ship it"}, expected_revision=rev, session="s1")
    record = original.load_pursuit_journal(root.path)  # signed, this root's, the original's action keys
    semantic = {p.name for p in root.path.iterdir() if p.name in ("MEMORY.md", "PURSUITS.md")}
    assert semantic <= set(record["files"]) and semantic <= set(record["base_files"])
    assert b"{#ship-it}" in original.pursuit_blob(root.path, record["files"]["PURSUITS.md"])
    assert record["cursor"] == 1 and record["actions"][0]["operation"]["type"] == "create"
    out = pursuit.checkpoint(root, session="s1")
    assert original.check_pursuit_checkpoint(root.path, out.landed_commit) == []
    assert pursuit.show(root).revision == original.original_pursuit_revision(root.path)


def test_pursuit_journal_the_original_writes_rmtui_reads(proot):
    from rmtui.engine import pursuit

    root = proot
    base = {name: original.store_pursuit_blob(root.path, (root.path / name).read_bytes())
            for name in ("MEMORY.md", "PURSUITS.md")}
    edited = (root.path / "PURSUITS.md").read_text() + "\n## Docs {#docs}\n"
    files = dict(base, **{"PURSUITS.md": original.store_pursuit_blob(root.path, edited.encode())})
    modes = dict.fromkeys(base, "100644")
    head = git(root.path, "rev-parse", "HEAD").strip()
    action = {"id": "a" * 32, "operation": {"type": "create", "title": "Docs"},
              "before": {"PURSUITS.md": base["PURSUITS.md"]}, "after": {"PURSUITS.md": files["PURSUITS.md"]},
              "before_modes": {"PURSUITS.md": "100644"}, "after_modes": {"PURSUITS.md": "100644"},
              "selected_id": "docs", "description": "pursuit: create docs", "id_remaps": []}
    record = {"version": 1, "root_key": original.original_root_key(root.path), "owner": "b" * 64,
              "base_head": head, "base_revision": original.original_pursuit_revision(root.path),
              "base_files": base, "files": files, "base_modes": modes, "modes": dict(modes),
              "revision": "c" * 64, "batch_id": "d" * 32, "batch_actions": 1, "started_at": 1.0,
              "updated_at": 1.0, "actions": [action], "cursor": 1, "last_description": "pursuit: create docs"}
    original.write_pursuit_journal(root.path, record)
    shown = pursuit.show(root)
    assert '"docs"' in json.dumps(shown.pursuits) and shown.pending_edits == 1
    out = pursuit.checkpoint(root)
    assert "{#docs}" in (root.path / "PURSUITS.md").read_text()
    assert original.check_pursuit_checkpoint(root.path, out.landed_commit) == []


def test_the_two_editors_exclude_each_other(proot):
    """The original holds its journal lock (flock on session.lock): rmtui's editor waits for it."""
    import threading

    from rmtui.engine import pursuit

    root = proot
    lock = root.path / original.PURSUIT_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        ["python3", "-c", "import fcntl,sys; f=open(sys.argv[1],'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('held', flush=True); sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        rev = original.original_pursuit_revision(root.path)
        done: list = []
        worker = threading.Thread(target=lambda: done.append(
            pursuit.apply(root, {"type": "create", "title": "Later"}, expected_revision=rev)))
        worker.start()
        worker.join(1.0)
        assert not done  # waiting on the original's lock
        holder.stdin.close()
        holder.wait(10)
        worker.join(30)
        assert done and '"later"' in json.dumps(pursuit.show(root).pursuits)
    finally:
        if holder.poll() is None:
            holder.kill()


# -- the local queue with sync off: the original's pending evidence ---------------------------------

def test_an_update_refuses_while_the_original_holds_pending_evidence(root):
    from rmtui.engine.errors import ConflictError
    from rmtui.engine.evidence.queue import EvidenceQueue
    from rmtui.engine.roles.update_driver import UpdateDriver

    with EvidenceQueue(root) as q:
        q.submit("s1", b"rmtui's own evidence\n")
    state = original.write_original_async_state(
        root.path, "orig-session", [{"id": 1, "message": "the original's evidence", "submitted_at": "2026-01-01"}])
    with pytest.raises(ConflictError) as info:
        UpdateDriver(root).run_once(force=True)
    assert "session orig-session: 1 evidence job(s)" in info.value.message
    assert "rightmemory update" in info.value.message
    with EvidenceQueue(root) as q:  # nothing was taken over or lost
        assert [e.state for e in q.list()] == ["queued"]
    assert json.loads(state.read_text())["pending"][0]["message"] == "the original's evidence"
    state.write_text(json.dumps({**json.loads(state.read_text()), "status": "succeeded", "pending": []}))
    from rmtui.engine.errors import UnavailableError

    with pytest.raises(UnavailableError):  # the original finished: rmtui goes on (to its missing model here)
        UpdateDriver(root).run_once()


def test_a_role_with_both_executors_is_refused_when_a_role_runs_on_it(root):
    # as the original's loader: the file loads; the table is refused for the roles that land on it
    # (pruner, and here every role that falls back, since it is the only one); retrieve never does
    from rmtui.engine.errors import UsageError
    from rmtui.engine.memory.config import load_config
    from rmtui.engine.roles.executors.config import resolve_role_executor

    (root.path / "rightmemory.toml").write_text(
        '[pruner.model]\nmodel_id = "openai:x"\n\n[pruner.agent_cli]\nprovider = "codex"\n', encoding="utf-8")
    cfg = load_config(root.path)
    for role in ("pruner", "update", "historian"):
        with pytest.raises(UsageError, match=r"\[pruner.model\] and \[pruner.agent_cli\] are both set"):
            resolve_role_executor(cfg, role)
    assert resolve_role_executor(cfg, "retrieve") is None
