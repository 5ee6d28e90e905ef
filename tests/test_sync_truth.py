"""Sync says what is true and refuses what would lose work, with real Git: a bare upstream over
``file://``, clones as machines, the CLI as a person or script runs it. An upstream that
rolled back this machine's pushes, an empty or deleted upstream branch, an unreachable one,
the queue each machine shows right after a pull, and what ``sync status`` and ``sync push``
say."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import test_sync
from test_sync import enable, git, ident, land, memory_with, snapshot

from rmtui.engine import sync
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import MemoryRoot, init_root
from rmtui.engine.writes import worktrees

machines = test_sync.machines  # the fixtures: machine A made the root and pushed it, B cloned it
upstream = test_sync.upstream


def submit(root: MemoryRoot, text: str, session: str = "s1") -> str:
    with EvidenceQueue(root) as q:
        return q.submit(session, text.encode())["uid"]


def listed(cli, root: MemoryRoot, state: str = "queued") -> list[str]:
    r = cli("--headless", "evidence", "list", "--state", state, "--json", "--root", str(root.path))
    assert r.code == 0, r.stderr
    return sorted(e["uid"] for e in r.json())


def shared_queue(upstream: Path) -> list[str]:
    out = git(upstream, "ls-tree", "-r", "--name-only", "main", "--", "update_queue/candidates/")
    return sorted(Path(p).stem for p in out.splitlines() if p)


def lone_root(tmp_path: Path, upstream: Path, name: str = "first") -> MemoryRoot:
    """A machine whose root has a remote but has never pushed (no upstream branch tracked)."""
    root = init_root(tmp_path / name)
    ident(root.path)
    git(root.path, "remote", "add", "origin", upstream.as_uri())
    enable(root)
    return root


# -- the queue shown is the queue held, right after a pull -------------------------------------------

def test_after_sync_pull_evidence_list_shows_the_shared_queue(machines, upstream, cli):
    a, b = machines
    keep, drop = submit(a, "The staging DB moved to port 5433.\n"), submit(a, "A fact withdrawn later.\n")
    assert cli("--headless", "sync", "push", "--root", str(a.path)).code == 0
    assert shared_queue(upstream) == sorted([keep, drop])
    r = cli("--headless", "sync", "pull", "--json", "--root", str(b.path))
    assert r.code == 0, r.stdout + r.stderr
    assert listed(cli, b) == shared_queue(upstream)  # what another machine queued, visible at once
    r = cli("--headless", "evidence", "cancel", drop, "--root", str(a.path))  # withdrawn on the first machine
    assert r.code == 0, r.stderr
    r = cli("--headless", "sync", "pull", "--json", "--root", str(b.path))
    assert r.code == 0, r.stdout + r.stderr
    assert listed(cli, b) == shared_queue(upstream) == [keep]
    assert listed(cli, b, "rejected") == [drop]


# -- history rewritten under this machine's own pushes ----------------------------------------------

def test_an_upstream_that_dropped_this_machines_push_is_refused_by_name(machines, upstream, tmp_path, cli):
    a, _b = machines
    pushed = land(a, "MEMORY.md", memory_with(("staging-port", "the staging DB listens on 5433")))
    assert sync.push(a).status == "pushed"
    before_push = git(upstream, "rev-parse", "main").strip()
    assert before_push == pushed
    git(upstream, "update-ref", "refs/heads/main", f"{pushed}~1")  # a force-push rolls it back
    rolled = git(upstream, "rev-parse", "main").strip()
    before = snapshot(a)
    for action in ("pull", "push"):
        r = cli("--headless", "sync", action, "--json", "--root", str(a.path))
        assert r.code == 3, (action, r.stdout, r.stderr)
        data = r.json()
        assert data["rule"] == "history-rewritten" and pushed[:10] in data["message"] and rolled[:10] in data["message"]
        assert "\n" not in data["message"]
        assert snapshot(a) == before  # nothing applied
        assert git(upstream, "rev-parse", "main").strip() == rolled  # and nothing re-pushed


# -- an empty or deleted upstream branch ------------------------------------------------------------

def test_first_machine_on_an_empty_upstream_pushes_with_sync_push(tmp_path, upstream, cli):
    root = lone_root(tmp_path, upstream)
    r = cli("--headless", "sync", "status", "--json", "--root", str(root.path))
    assert r.json()["status"] == "unconfigured" and "rmtui --headless sync push" in r.json()["message"]
    r = cli("--headless", "sync", "pull", "--json", "--root", str(root.path))
    assert r.code == 2 and "rmtui --headless sync push" in r.json()["message"]
    uid = submit(root, "The first fact of a new team.\n")
    r = cli("--headless", "sync", "push", "--json", "--root", str(root.path))
    assert r.code == 0, r.stdout + r.stderr
    assert r.json()["status"] == "pushed" and "origin/main" in r.json()["message"]
    assert git(root.path, "rev-parse", "--abbrev-ref", "main@{upstream}").strip() == "origin/main"
    assert shared_queue(upstream) == [uid]  # the queue went up once the branch existed
    assert git(upstream, "rev-parse", "main").strip() == git(root.path, "rev-parse", "HEAD").strip()
    r = cli("--headless", "sync", "status", "--json", "--root", str(root.path))
    assert r.json()["status"] == "pushed" and r.json()["upstream"] == "origin/main"
    assert (r.json()["ahead"], r.json()["behind"]) == (0, 0)


def test_a_tracked_but_empty_upstream_branch_is_fresh_not_an_error(tmp_path, upstream, cli):
    root = lone_root(tmp_path, upstream)
    git(root.path, "config", "branch.main.remote", "origin")
    git(root.path, "config", "branch.main.merge", "refs/heads/main")
    r = cli("--headless", "sync", "pull", "--json", "--root", str(root.path))
    assert r.code == 0 and r.json()["status"] == "fresh", r.stdout + r.stderr
    assert "couldn't find remote ref" not in r.stdout
    r = cli("--headless", "sync", "push", "--json", "--root", str(root.path))
    assert r.code == 0 and r.json()["status"] == "pushed", r.stdout + r.stderr


def test_a_deleted_upstream_branch_is_refused_with_the_fix(machines, upstream, cli):
    a, b = machines
    land(a, "MEMORY.md", memory_with(("one", "a fact")))
    assert sync.push(a).status == "pushed"
    assert sync.pull(b).status == "synced"
    git(upstream, "update-ref", "-d", "refs/heads/main")
    before = snapshot(b)
    for action in ("pull", "push"):
        r = cli("--headless", "sync", action, "--json", "--root", str(b.path))
        assert r.code == 1, (action, r.stdout, r.stderr)
        data = r.json()
        assert data["rule"] == "upstream-deleted", data
        assert "origin/main" in data["message"] and "git push origin HEAD:main" in data["message"]
        assert snapshot(b) == before
        assert subprocess.run(["git", "rev-parse", "--verify", "-q", "main"], cwd=upstream).returncode != 0


# -- status tells the truth; push says what it did ---------------------------------------------------

def test_status_reads_the_upstream_set_after_an_unconfigured_run(tmp_path, upstream, cli):
    root = lone_root(tmp_path, upstream)
    assert sync.pull(root).status == "unconfigured"
    git(root.path, "push", "-q", "-u", "origin", "main")
    r = cli("--headless", "sync", "status", "--json", "--root", str(root.path))
    assert r.json()["status"] != "unconfigured" and "no upstream" not in r.json()["message"], r.json()
    text = cli("--headless", "sync", "status", "--root", str(root.path)).stdout
    assert "unconfigured" not in text and "None" not in text, text
    r = cli("--headless", "status", "--root", str(root.path))
    assert r.code == 0 and "None" not in r.stdout, r.stdout


def test_sync_push_that_published_evidence_says_it_pushed(machines, upstream, cli):
    a, _b = machines
    uid = submit(a, "Pushed as a queue commit.\n")
    r = cli("--headless", "sync", "push", "--json", "--root", str(a.path))
    assert r.code == 0, r.stderr
    assert r.json()["status"] == "pushed" and "nothing to push" not in r.json()["message"], r.json()
    assert uid in " ".join(r.json()["files"]) and shared_queue(upstream) == [uid]
    status = json.loads((a.path / ".runtime" / "sync" / "state.json").read_text())
    assert status["last_status"] == "pushed" and status["last_successful_push_at"]


# -- an unreachable upstream is offline ---------------------------------------------------------------

def test_an_unreachable_upstream_is_offline_exit_4_naming_the_remote(machines, tmp_path, cli):
    a, _b = machines
    gone = (tmp_path / "moved-away.git").as_uri()
    git(a.path, "remote", "set-url", "origin", gone)
    submit(a, "Waiting to be published.\n")
    for action in ("push", "pull"):
        r = cli("--headless", "sync", action, "--json", "--root", str(a.path))
        assert r.code == 4, (action, r.stdout, r.stderr)
        data = r.json()
        assert data["error"] == "offline" and data["status"] == "offline", data
        assert "origin" in data["message"] and gone in data["message"] and "\n" not in data["message"]
        assert "and the repository exists" not in data["message"]
        text = cli("--headless", "sync", action, "--root", str(a.path))
        assert text.code == 4 and text.stdout.startswith("offline: cannot reach origin"), text.stdout


# -- a retrieval never waits for a pull ---------------------------------------------------------------

def test_retrieve_answers_while_the_pull_of_many_commits_waits_and_the_pull_lands_after(machines, upstream,
                                                                                       tmp_path, cli):
    """Structural: the test holds the sync lock, which a pull needs. A retrieval that pulled
    inline would wait on it (up to the lock's 60 s); this one answers from the root as it is,
    and the pull it started lands once the lock is free."""
    a, b = machines
    set_config_value(b.path, "embedding.local_service", False)  # lexical: no model start in this test
    work = tmp_path / "busy-machine"
    subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(work)], check=True)
    ident(work)
    for i in range(60):  # many incoming commits, each of which the pull checks
        facts = [(f"fact-{j}", f"incoming fact number {j}") for j in range(i + 1)]
        (work / "MEMORY.md").write_text(memory_with(*facts))
        git(work, "commit", "-qam", f"maintain: fact {i}")
    git(work, "push", "-q", "origin", "main")
    tip = git(work, "rev-parse", "HEAD").strip()
    before = git(b.path, "rev-parse", "HEAD").strip()
    with file_lock(worktrees.sync_lock_path(b)):
        r = cli("--headless", "retrieve", "--json", "--session", "reader", "--root", str(b.path),
                "incoming fact number 59", timeout=45)
        assert r.code == 0, r.stderr
        assert git(b.path, "rev-parse", "HEAD").strip() == before  # answered from the root as it was
        assert "fact-59" not in [x["id"] for x in r.json()["results"]]
    deadline = time.time() + 120
    while git(b.path, "rev-parse", "HEAD").strip() != tip and time.time() < deadline:
        time.sleep(0.1)
    assert git(b.path, "rev-parse", "HEAD").strip() == tip  # the background pull took all 60 in
    r = cli("--headless", "retrieve", "--json", "--session", "reader", "--root", str(b.path), "incoming fact number 59")
    assert "fact-59" in [x["id"] for x in r.json()["results"]]
