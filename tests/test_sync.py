"""Sync with a Git upstream, with real Git: a bare repository over ``file://`` shared by
several clones ("machines"), the CLI as scripts use it, and the fake provider as the
sync-reconciler's model."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from fake_provider import FakeProvider, Turn, call

from rmtui.engine import sync
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import MemoryRoot, init_root
from rmtui.engine.writes.supervisor import Supervisor

NODE = "- `{id}` {text} → []\n"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def ident(cwd: Path) -> None:
    git(cwd, "config", "user.name", "machine")
    git(cwd, "config", "user.email", "machine@local")


@pytest.fixture
def upstream(tmp_path) -> Path:
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    return bare


def enable(root: MemoryRoot, *, push_after_landing: bool = False) -> None:
    """Sync on; the post-landing background push off unless asked, so each test decides when
    machines talk (test_post_landing_push_reaches_the_upstream covers it)."""
    set_config_value(root.path, "sync.enabled", True)
    set_config_value(root.path, "sync.push_after_landing", push_after_landing)


@pytest.fixture
def machines(tmp_path, upstream):
    """Machine A made the root and pushed it; machine B cloned it and adopted it."""
    a = init_root(tmp_path / "a")
    ident(a.path)
    git(a.path, "remote", "add", "origin", upstream.as_uri())
    git(a.path, "push", "-q", "-u", "origin", "main")
    enable(a)
    subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(tmp_path / "b")], check=True)
    b = init_root(tmp_path / "b", force=True)
    ident(b.path)
    enable(b)
    return a, b


def land(root: MemoryRoot, rel: str, text: str, message: str = "maintain: edit") -> str:
    """A local landing through the supervisor (as maintenance would)."""
    with Supervisor(root) as sup:
        op = sup.begin("maintain", "maintenance")
        (Path(op.worktree) / rel).write_text(text, encoding="utf-8")
        git(Path(op.worktree), "add", "-A")
        git(Path(op.worktree), "-c", "user.name=m", "-c", "user.email=m@l", "commit", "-qm", message)
        return sup.finish(op).landed_commit


def memory_with(*nodes: tuple[str, str]) -> str:
    return "# Memory\n\n## Facts {#facts}\n\n" + "".join(NODE.format(id=i, text=t) for i, t in nodes)


def snapshot(root: MemoryRoot) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in root.path.iterdir() if p.is_file()} | {
        "HEAD": git(root.path, "rev-parse", "HEAD").encode()}


def foreign_push(upstream: Path, tmp: Path, files: dict[str, str | None], *, symlink: dict | None = None,
                 executable: tuple = ()) -> str:
    """Another machine (plain Git, no rmtui) pushes a commit straight to the upstream."""
    work = tmp / f"foreign-{time.time_ns()}"
    subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(work)], check=True)
    ident(work)
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text or "", encoding="utf-8")
    for rel, target in (symlink or {}).items():
        (work / rel).symlink_to(target)
    for rel in executable:
        (work / rel).chmod(0o755)
    git(work, "add", "-A", "-f")
    git(work, "commit", "-qm", "foreign change")
    git(work, "push", "-q", "origin", "main")
    return git(work, "rev-parse", "HEAD").strip()


def test_landing_on_one_machine_reaches_the_other(machines):
    a, b = machines
    land(a, "MEMORY.md", memory_with(("staging-port", "the staging DB listens on 5433")))
    pushed = sync.push(a)
    assert pushed.status == "pushed", pushed
    pulled = sync.pull(b)
    assert pulled.status == "synced", pulled
    assert "staging-port" in (b.path / "MEMORY.md").read_text()
    assert git(b.path, "rev-parse", "HEAD") == git(a.path, "rev-parse", "HEAD")  # the exact upstream commit
    assert pulled.receipt["kind"] == "sync" and pulled.files == ["MEMORY.md"]
    state = json.loads((b.path / ".runtime" / "sync" / "state.json").read_text())
    assert state["last_status"] == "synced" and state["last_successful_pull_at"]
    assert sync.pull(b).message == "up to date"


def test_cli_contract_status_pull_push(machines, cli):
    a, b = machines
    land(a, "MEMORY.md", memory_with(("cli-node", "set by the CLI test")))
    r = cli("--headless", "sync", "push", "--json", "--root", str(a.path))
    assert r.code == 0 and r.json()["status"] == "pushed"
    r = cli("--headless", "sync", "status", "--json", "--root", str(b.path))
    assert r.code == 0 and r.json()["upstream"] == "origin/main"
    r = cli("--headless", "sync", "pull", "--root", str(b.path))
    assert r.code == 0 and r.stdout.startswith("synced: pulled 1 commit(s) from origin/main")
    r = cli("--headless", "sync", "status", "--json", "--root", str(b.path))
    assert r.json()["ahead"] == 0 and r.json()["behind"] == 0


def test_disabled_and_unconfigured(tmp_path, cli):
    root = init_root(tmp_path / "solo")
    r = cli("--headless", "sync", "pull", "--json", "--root", str(root.path))
    assert r.json()["status"] == "disabled"
    enable(root)
    r = cli("--headless", "sync", "pull", "--json", "--root", str(root.path))
    assert r.code == 2 and r.json()["status"] == "unconfigured"


@pytest.mark.parametrize("case", ["off-list", "symlink", "executable", "malformed-queue-record",
                                  "misnamed-queue-record"])
def test_incoming_bad_paths_are_refused_and_the_root_is_untouched(machines, upstream, tmp_path, case):
    _, b = machines
    before = snapshot(b)
    if case == "off-list":
        foreign_push(upstream, tmp_path, {"notes.txt": "not memory\n"})
        bad = "notes.txt"
    elif case == "symlink":
        foreign_push(upstream, tmp_path, {}, symlink={"MEMORY_link.md": "/etc/passwd"})
        bad = "MEMORY_link.md"
    elif case == "executable":
        foreign_push(upstream, tmp_path, {"MEMORY_run.md": "# Run\n"}, executable=("MEMORY_run.md",))
        bad = "MEMORY_run.md"
    elif case == "malformed-queue-record":
        bad = f"update_queue/candidates/{'a' * 32}.json"
        foreign_push(upstream, tmp_path, {bad: '{"uid": "' + "a" * 32 + '", "uid": 1'})
    else:  # well-formed JSON under another candidate's name
        bad = f"update_queue/candidates/{'b' * 32}.json"
        foreign_push(upstream, tmp_path, {bad: json.dumps({"uid": "c" * 32})})
    res = sync.pull(b)
    assert res.status == "error" and bad in res.message, res
    assert snapshot(b) == before


def test_invalid_incoming_graph_without_a_reconciler_is_a_conflict_and_nothing_lands(machines, upstream, tmp_path):
    _, b = machines
    before = snapshot(b)
    foreign_push(upstream, tmp_path, {"MEMORY.md": "# Memory\n\n- `dangling` points nowhere → [dep:nowhere]\n"})
    res = sync.pull(b)
    assert res.status == "conflict" and "no model is configured" in res.message, res
    assert snapshot(b) == before


def test_unreachable_upstream_is_offline_and_the_next_push_publishes_everything(machines, upstream, tmp_path):
    a, b = machines
    moved = tmp_path / "moved.git"
    upstream.rename(moved)
    land(a, "MEMORY.md", memory_with(("offline-1", "written while offline")))
    res = sync.push(a)
    assert res.status == "offline", res
    land(a, "MEMORY.md", memory_with(("offline-1", "written while offline"), ("offline-2", "and another")))
    assert sync.pull(a).status == "offline"
    moved.rename(upstream)
    assert sync.push(a).status == "pushed"
    assert sync.pull(b).status == "synced"
    text = (b.path / "MEMORY.md").read_text()
    assert text.count("offline-1") == 1 and "offline-2" in text


def test_push_refused_pulls_merges_and_retries_once(machines):
    a, b = machines
    land(a, "MEMORY.md", memory_with(("from-a", "machine A's fact")))
    assert sync.push(a).status == "pushed"
    land(b, "PURSUITS.md", "# Pursuits\n\n## Ship sync {#ship-sync}\n")
    res = sync.push(b)
    assert res.status == "pushed", res
    merged = (b.path / "MEMORY.md").read_text()
    assert sync.pull(a).status == "synced"
    assert (a.path / "MEMORY.md").read_text() == merged


def test_rewritten_upstream_is_refused(machines, upstream, tmp_path):
    a, b = machines
    land(a, "MEMORY.md", memory_with(("first", "one")))
    sync.push(a)
    assert sync.pull(b).status == "synced"
    work = tmp_path / "rewriter"
    subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(work)], check=True)
    ident(work)
    git(work, "reset", "-q", "--hard", "HEAD~1")
    (work / "MEMORY.md").write_text(memory_with(("other", "history rewritten")))
    git(work, "commit", "-qam", "rewrite")
    git(work, "push", "-q", "--force", "origin", "main")
    before = snapshot(b)
    res = sync.pull(b)
    assert res.status == "error" and "rewritten" in res.message, res
    assert snapshot(b) == before


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def _diverge(a: MemoryRoot, b: MemoryRoot) -> None:
    base = memory_with(("port", "the staging DB listens on 5432"))
    land(a, "MEMORY.md", base)
    assert sync.push(a).status == "pushed"
    assert sync.pull(b).status == "synced"
    land(a, "MEMORY.md", memory_with(("port", "the staging DB listens on 5433")))
    assert sync.push(a).status == "pushed"
    land(b, "MEMORY.md", memory_with(("port", "the staging DB listens on 6543")))


def test_same_node_edited_on_two_machines_without_reconciler_is_a_conflict(machines, cli):
    a, b = machines
    _diverge(a, b)
    before = snapshot(b)
    r = cli("--headless", "sync", "pull", "--json", "--root", str(b.path))
    assert r.code == 3 and r.json()["status"] == "conflict" and r.json()["files"] == ["MEMORY.md"]
    assert snapshot(b) == before
    assert "6543" in (b.path / "MEMORY.md").read_text()
    assert not list((b.path / ".runtime" / "worktrees").glob("sync-*"))


def test_same_node_edited_on_two_machines_is_repaired_by_the_reconciler(machines, provider):
    a, b = machines
    _diverge(a, b)
    set_config_value(b.path, "sync-reconciler.model.model_id", "anthropic:fake-model")
    set_config_value(b.path, "sync-reconciler.model.api_base", provider.base("anthropic"))
    resolved = memory_with(("port", "the staging DB listens on 5433 (6543 was an old local note)"))
    provider.push(
        call("git_status"),
        call("read", path="MEMORY.md"),
        call("delete", path="MEMORY.md"),
        call("create", path="MEMORY.md", content=resolved),
        call("validate_memory"),
        call("git_add", paths=["MEMORY.md"]),
        call("git_commit", message="sync: reconcile staging port"),
        Turn(text="Resolved the port conflict: kept 5433 from upstream."),
    )
    res = sync.pull(b)
    assert res.status == "synced", res
    assert (b.path / "MEMORY.md").read_text() == resolved
    head = git(b.path, "rev-parse", "HEAD").strip()
    parents = git(b.path, "rev-list", "--parents", "-n", "1", head).split()[1:]
    assert len(parents) == 2  # one merge commit completes the repair
    assert sync.pull(a).status == "synced"  # and it was pushed
    assert (a.path / "MEMORY.md").read_text() == resolved


def test_post_landing_push_reaches_the_upstream(machines, upstream):
    a, _ = machines
    set_config_value(a.path, "sync.push_after_landing", True)
    landed = land(a, "MEMORY.md", memory_with(("auto-pushed", "pushed after landing")))
    deadline = time.time() + 60
    while time.time() < deadline:
        tip = subprocess.run(["git", "rev-parse", "main"], cwd=upstream, capture_output=True, text=True).stdout.strip()
        if tip == landed:
            break
        time.sleep(0.2)
    assert tip == landed


def test_a_reading_agent_sees_other_machines_memory_after_a_bounded_pull_check(machines, cli):
    """The pull check runs beside the retrieval, never in its way: the retrieval answers from
    the root as it is and starts the pull; the next retrieval reads what it brought."""
    a, b = machines
    set_config_value(b.path, "embedding.local_service", False)  # lexical: no model start in this test
    landed = land(a, "MEMORY.md", memory_with(("deploy-window", "deploys happen on Tuesdays after noon")))
    assert sync.push(a).status == "pushed"
    r = cli("--headless", "retrieve", "--json", "--session", "reader", "--root", str(b.path), "when are deploys")
    assert r.code == 0, r.stderr
    state_file = b.path / ".runtime" / "sync" / "state.json"

    def pulled() -> bool:  # the upkeep is done: the branch moved, the file followed, the check is recorded
        return (git(b.path, "rev-parse", "HEAD").strip() == landed
                and "deploy-window" in (b.path / "MEMORY.md").read_text(encoding="utf-8")
                and state_file.exists() and bool(json.loads(state_file.read_text() or "{}").get("last_pull_check_at")))

    deadline = time.time() + 90
    while not pulled() and time.time() < deadline:
        time.sleep(0.1)
    assert pulled()
    r = cli("--headless", "retrieve", "--json", "--session", "reader", "--root", str(b.path), "when are deploys")
    assert [x["id"] for x in r.json()["results"]][:1] == ["deploy-window"], r.stdout
    state = json.loads((b.path / ".runtime" / "sync" / "state.json").read_text())
    assert state["last_pull_check_at"]
    # within five minutes no second fetch: a new upstream commit is not seen yet
    land(a, "MEMORY.md", memory_with(("deploy-window", "deploys happen on Tuesdays after noon"),
                                      ("freeze", "no deploys in December")))
    assert sync.push(a).status == "pushed"
    r = cli("--headless", "retrieve", "--json", "--session", "reader", "--root", str(b.path), "december freeze")
    assert "freeze" not in [x["id"] for x in r.json()["results"]]
