"""The kill matrix: every writer kind is SIGKILLed — its whole process group, Git children
included — at every phase boundary of an operation and inside the Git commands of publication; then
`recover` runs, the writer's job is finished the way a person or host would finish it, and the root
must be whole: no Git lock files, index and work tree equal to HEAD, a valid graph, every piece of
evidence queued or consumed (never claimed, never lost), nothing published twice.

Sync gets the same treatment on a second machine: a pull (inside `git worktree add` of its staging
worktree, at its publication's boundaries, around its push), a push, a host's repair completion and
the takeover of another machine's expired queue lease; after `recover` and a retry the machine still
syncs, its upstream holds exactly its head, and nothing lands twice.

A writer started with ``RMTUI_CRASHPOINT=<point>`` and ``RMTUI_CRASHPOINT_READY=<file>`` writes the
point's name to the file when it gets there and waits; the test then kills its process group.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from supervisor_kit import add_memory_node, commit, git, porcelain, seed

from rmtui.engine.evidence.batching import batch_id
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.host import assistant
from rmtui.engine.memory.roots import MemoryRoot, init_root, open_root
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.writes import maintain
from rmtui.engine.writes.config_check import config_issues
from rmtui.engine.writes.operations import FINAL_PHASES
from rmtui.engine.writes.publication import MARKER, PIN_PREFIX
from rmtui.engine.writes.supervisor import Supervisor

WRITER = Path(__file__).with_name("supervisor_writer.py")
#: Phase boundaries of begin, prepare and publication, and two points inside publication's Git
#: commands: ``during-cas`` (``update-ref`` holding the branch's and HEAD's locks) and
#: ``during-sync`` (``update-index`` holding the root's ``index.lock``).
POINTS = ("after-running", "after-worktree", "after-prepared", "after-lock", "before-cas", "during-cas",
          "after-cas", "during-sync", "after-worktree-sync", "after-publish", "after-final")
BEGIN_POINTS = ("after-running", "after-worktree")
#: Lock files a kill inside a Git command leaves in the root (cleared by `recover`).
LEAVES = {"during-cas": {".git/HEAD.lock", ".git/refs/heads/main.lock"}, "during-sync": {".git/index.lock"}}
KINDS = ("update", "maintenance", "assistant", "guidance")
NODE = "killed-writer"
GUIDANCE = "Prefer small commits when the build is red."


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("killmatrix") / "root"
    seed(init_root(path))
    return path


def rmtui(*args: str) -> list[str]:
    return [sys.executable, "-m", "rmtui", "--headless", *args]


def killed_at(argv: list[str], point: str, tmp: Path, *, stdin: bytes | None = None) -> bool:
    """Run ``argv`` in a session of its own; when it reaches ``point``, SIGKILL its process group.
    Answers whether it got there (a writer that finished first is left as it ended)."""
    ready = tmp / f"ready-{point}"
    ready.unlink(missing_ok=True)
    env = {**os.environ, "RMTUI_CRASHPOINT": point, "RMTUI_CRASHPOINT_READY": str(ready)}
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
    assert proc.stdin is not None
    proc.stdin.close()
    deadline = time.monotonic() + 120
    while not ready.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            assert proc.returncode == 0, (argv, point, out, err)
            return False
        assert time.monotonic() < deadline, f"{point} never reached by {argv}"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert ready.read_text() == point
    return True


def assert_valid(rp: Path) -> None:
    """What `rmtui validate` checks (the graph, then the config), without a process per case."""
    report = validate_root(rp)
    report.issues.extend(config_issues(rp))
    assert report.ok, [str(i) for i in report.issues]


def run(argv: list[str], *, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, input=stdin, capture_output=True)
    assert proc.returncode == 0, (argv, proc.stdout.decode(), proc.stderr.decode())
    return proc


class Case:
    """One writer kind against one fresh root: set up, the killed run, finishing the job, checks."""

    def __init__(self, kind: str, root: MemoryRoot, tmp: Path) -> None:
        self.kind, self.root, self.tmp, self.rp = kind, root, tmp, root.path
        self.uids: list[str] = []
        self.task: dict = {}

    def queue(self, n: int) -> list[str]:
        with EvidenceQueue(self.root) as q:
            self.uids = [q.submit("sess", f"fact {i} for {self.kind}".encode())["uid"] for i in range(n)]
        return self.uids

    def edit(self, wt: Path, *, commit_it: bool) -> None:
        text = (wt / "MEMORY.md").read_text()
        if f"`{NODE}`" in text:
            return
        new = add_memory_node(text, NODE, "Written by a writer that was killed.")
        if commit_it:
            commit(wt, {"MEMORY.md": new}, f"{self.kind}: {NODE}")
        else:
            (wt / "MEMORY.md").write_text(new)

    def live_op(self, kind: str):
        with Supervisor(self.root) as sup:
            ops = [o for o in sup.store.list(kind=kind) if not o.final]
        return ops[-1] if ops else None

    # -- the killed run ------------------------------------------------------------------------------
    def kill(self, point: str) -> bool:
        rp = str(self.rp)
        if self.kind == "update":
            uids = self.queue(2)
            with EvidenceQueue(self.root) as q:
                bid = batch_id([q.get(u) for u in uids])
                q.claim(uids, bid)
            argv = [sys.executable, str(WRITER), rp, "update", "--batch", bid, "--uids", ",".join(uids), "--node", NODE]
            return killed_at(argv, point, self.tmp)
        if self.kind == "guidance":
            return killed_at(rmtui("guidance", "submit", "--session", "sess", "--root", rp, "-"), point, self.tmp,
                             stdin=GUIDANCE.encode())
        if self.kind == "maintenance":
            if point in BEGIN_POINTS:
                return killed_at(rmtui("maintain", "begin", "--root", rp), point, self.tmp)
            op = maintain.begin(self.root)
            self.edit(Path(op.worktree), commit_it=False)  # `land` commits the person's edits itself
            return killed_at(rmtui("maintain", "land", "-m", f"maintain: {NODE}", "--root", rp), point, self.tmp)
        self.queue(3)  # assistant
        if point in BEGIN_POINTS:
            return killed_at(rmtui("assistant", "update", "begin", "--retry", "--root", rp), point, self.tmp)
        self.task = assistant.begin(self.root, retry=True)
        assert self.task.claimed, self.task
        self.edit(Path(self.task.task.worktree), commit_it=True)
        return killed_at(rmtui("assistant", "update", "complete", "--task", self.task.task_id, "--root", rp),
                         point, self.tmp)

    # -- after recover: finish the job as its owner would ---------------------------------------------
    def finish_job(self) -> None:
        rp = str(self.rp)
        if self.kind == "maintenance":
            op = self.live_op("maintenance")
            if op is not None and not Path(op.worktree).is_dir():  # killed inside `begin`
                run(rmtui("maintain", "abort", "--root", rp))
                op = None
            if op is None and f"`{NODE}`" not in (self.rp / "MEMORY.md").read_text():
                op = maintain.begin(self.root)
            if op is not None:
                self.edit(Path(op.worktree), commit_it=False)
                run(rmtui("maintain", "land", "--root", rp))
        elif self.kind == "assistant":
            op = self.live_op("assistant")
            if op is not None and not Path(op.worktree).is_dir():  # killed inside `begin`
                task = assistant.begin(self.root, retry=True)
                op = self.live_op("assistant")
                assert task.claimed and op is not None
            if op is not None:
                self.edit(Path(op.worktree), commit_it=True)
                run(rmtui("assistant", "update", "complete", "--task", op.id, "--root", rp))

    # -- the root must be whole ------------------------------------------------------------------------
    def check(self) -> dict:
        rp = self.rp
        locks = sorted(str(p.relative_to(rp)) for p in (rp / ".git").rglob("*.lock"))
        assert locks == [], locks
        assert not (self.root.runtime / MARKER).exists()
        assert porcelain(rp) == ""  # index and work tree equal HEAD
        assert git(rp, "diff-index", "--cached", "HEAD") == ""
        assert_valid(rp)
        fsck = subprocess.run(["git", "fsck", "--no-dangling", "--no-progress"], cwd=rp, capture_output=True)
        assert fsck.returncode == 0 and not fsck.stdout.strip(), fsck
        with Supervisor(self.root) as sup:
            ops = sup.store.list()
        assert all(o.phase in FINAL_PHASES and all(e.state == "done" for e in o.effects) for o in ops), ops
        wts = [x for x in git(rp, "worktree", "list", "--porcelain").splitlines() if x.startswith("worktree ")]
        assert len(wts) == 1, wts
        assert git(rp, "for-each-ref", "refs/heads/rmtui/op/", PIN_PREFIX) == ""
        memory = (rp / "MEMORY.md").read_text()
        landed = memory.count(f"`{NODE}`")
        assert landed <= 1  # nothing published twice
        with EvidenceQueue(self.root) as q:
            states = {u: q.get(u).state for u in self.uids}
        assert "claimed" not in states.values(), states  # never left claimed
        if self.kind == "update":
            # abandoned before preparation: back in the queue; prepared: published by recover
            assert set(states.values()) == ({"consumed"} if landed else {"queued"}), (states, landed)
        if self.kind in ("maintenance", "assistant"):
            assert landed == 1  # the job was finished after the crash
        if self.kind == "assistant":
            assert list(states.values()).count("consumed") == 3  # the finished task consumed its batch
        if self.kind == "guidance":
            inbox = rp / "AGENT_GUIDANCE_INBOX.md"
            captured = inbox.read_text().count(GUIDANCE) if inbox.exists() else 0
            committed = [o for o in ops if o.kind == "guidance" and o.phase == "committed"]
            assert captured == len(committed) <= 1  # an unacknowledged capture lands once or not at all
        return {"landed": landed, "states": states}


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("kind", KINDS)
def test_kill_the_process_group_at_every_boundary_then_recover(template, tmp_path, kind, point):
    dest = tmp_path / "root"
    shutil.copytree(template, dest, symlinks=True)
    root = open_root(dest)
    case = Case(kind, root, tmp_path)
    assert case.kill(point), f"{kind} never reached {point}"
    left = {str(p.relative_to(dest)) for p in (dest / ".git").rglob("*.lock")}
    assert LEAVES.get(point, set()) <= left, left  # the kill really left Git's locks behind
    if point == "after-cas":  # the ref moved; index and work tree behind it, never ahead
        assert git(dest, "diff-index", "--cached", "--name-only", "HEAD") != ""
    r = subprocess.run(rmtui("recover", "--root", str(dest), "--json"), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    case.finish_job()
    case.check()
    # and the root still takes work: one more supervised landing goes through
    with Supervisor(root) as sup:
        op = sup.begin("update", "update")
        text = (Path(op.worktree) / "MEMORY.md").read_text()
        commit(op.worktree, {"MEMORY.md": add_memory_node(text, "after-the-crash")})
        assert sup.finish(op).phase == "committed"
    assert porcelain(dest) == "" and "`after-the-crash`" in (dest / "MEMORY.md").read_text()
    assert sorted(str(p) for p in (dest / ".git").rglob("*.lock")) == []


# -- sync: a pull, a push and a host's repair completion, killed at every boundary ----------------

#: Where a sync dies: inside `git worktree add` of its staging worktree (the admin entry's HEAD
#: still null), at each boundary of its publication through the supervisor, around its push.
PUBLISH_POINTS = ("after-lock", "during-cas", "after-cas", "during-sync", "after-final")
PUSH_POINTS = ("sync-before-push", "sync-after-push")
#: A takeover of another machine's expired lease dies around the queue's push.
SYNC_CASES = ([("pull", p) for p in ("sync-during-worktree-add", *PUBLISH_POINTS, *PUSH_POINTS)]
              + [("push", p) for p in PUSH_POINTS]
              + [("repair", p) for p in (*PUBLISH_POINTS, *PUSH_POINTS)]
              + [("takeover", p) for p in ("queue-before-push", "queue-after-push")])


def _sh(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """An upstream and two machines: A made the root and pushed it, B cloned and adopted it."""
    from test_sync import enable, ident

    base = tmp_path_factory.mktemp("killmatrix-sync")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(base / "upstream.git")], check=True)
    a = init_root(base / "a")
    ident(a.path)
    _sh(a.path, "remote", "add", "origin", (base / "upstream.git").as_uri())
    _sh(a.path, "push", "-q", "-u", "origin", "main")
    enable(a)
    subprocess.run(["git", "clone", "-q", (base / "upstream.git").as_uri(), str(base / "b")], check=True)
    b = init_root(base / "b", force=True)
    ident(b.path)
    enable(b)
    return base


def _backing(title: str, node: str) -> str:
    from test_sync import memory_with

    return memory_with((node, f"written on machine {title}")).replace("# Memory", f"# {title}")


class SyncCase:
    """One sync kind on a fresh copy of the world, killed on machine B."""

    def __init__(self, kind: str, world: Path, tmp: Path) -> None:
        shutil.copytree(world, tmp / "w", symlinks=True)
        self.kind, self.tmp, self.up = kind, tmp, tmp / "w" / "upstream.git"
        for m in ("a", "b"):
            _sh(tmp / "w" / m, "remote", "set-url", "origin", self.up.as_uri())
        self.a, self.b = open_root(tmp / "w" / "a"), open_root(tmp / "w" / "b")
        self.task: dict = {}
        self.resolved = ""
        self.uids: list[str] = []

    def setup(self) -> list[str]:
        from test_sync import _diverge, land, memory_with

        from rmtui.engine import sync

        if self.kind == "repair":
            _diverge(self.a, self.b)
            assert sync.pull(self.b).status == "conflict"
            self.task = assistant.begin_role(self.b, "sync-reconciler")
            assert self.task.claimed, self.task
            wt = Path(self.task.task.worktree)
            self.resolved = memory_with(("port", "the staging DB listens on 5433 (6543 was a local note)"))
            (wt / "MEMORY.md").write_text(self.resolved)
            _sh(wt, "add", "MEMORY.md")
            _sh(wt, "-c", "user.name=h", "-c", "user.email=h@l", "commit", "-q", "-m", "sync: reconcile the port")
            return list(self.task.task.complete)
        if self.kind == "takeover":  # A claims a batch with a 1 s lease and dies; B takes it over
            from rmtui.engine.memory.config import set_config_value

            set_config_value(self.a.path, "sync.lease_seconds", 1)
            with EvidenceQueue(self.a) as q:
                self.uids = [q.submit("sess-a", f"takeover fact {i}".encode())["uid"] for i in range(2)]
            assert sync.push(self.a).status in ("pushed", "synced")
            assert assistant.begin(self.a, retry=True).claimed
            time.sleep(1.5)
            return rmtui("assistant", "update", "begin", "--retry", "--root", str(self.b.path))
        if self.kind == "pull":
            land(self.a, "MEMORY_alpha.md", _backing("Alpha", "alpha-node"))
            assert sync.push(self.a).status == "pushed"
        land(self.b, "MEMORY_beta.md", _backing("Beta", "beta-node"))
        return rmtui("sync", self.kind, "--root", str(self.b.path))

    def finish_job(self) -> None:
        rp = str(self.b.path)
        if self.kind == "repair":
            if assistant.task_status(self.b, self.task.task_id).to_json().get("state") != "done":
                run(list(self.task.task.complete))
        elif self.kind == "takeover":
            task = assistant.begin(self.b, retry=True)
            assert task.claimed and sorted(task.task.candidate_uids) == sorted(self.uids), task
            wt = Path(task.task.worktree)
            commit(wt, {"MEMORY.md": add_memory_node((wt / "MEMORY.md").read_text(), "taken-over")}, "update: takeover")
            run(rmtui("assistant", "update", "complete", "--task", task.task_id, "--root", rp))
        elif self.kind == "pull":
            run(rmtui("sync", "pull", "--root", rp))
        run(rmtui("sync", "push", "--root", rp))

    def check(self) -> None:
        rp = self.b.path
        locks = sorted(str(p.relative_to(rp)) for p in (rp / ".git").rglob("*.lock"))
        assert locks == [], locks
        assert not (self.b.runtime / MARKER).exists()
        assert porcelain(rp) == "" and git(rp, "diff-index", "--cached", "HEAD") == ""
        assert_valid(rp)
        fsck = subprocess.run(["git", "fsck", "--no-dangling", "--no-progress"], cwd=rp, capture_output=True, text=True)
        assert fsck.returncode == 0 and not (fsck.stdout + fsck.stderr).strip(), fsck
        with Supervisor(self.b) as sup:
            ops = sup.store.list()
        assert all(o.phase in FINAL_PHASES and all(e.state == "done" for e in o.effects) for o in ops), ops
        wts = [x for x in git(rp, "worktree", "list", "--porcelain").splitlines() if x.startswith("worktree ")]
        assert len(wts) == 1, wts
        assert not list((self.b.runtime / "worktrees").glob("sync-*"))
        head = git(rp, "rev-parse", "HEAD")
        assert _sh(self.up, "rev-parse", "main").strip() == head  # pushed, exactly this
        if self.kind == "takeover":
            assert (rp / "MEMORY.md").read_text().count("`taken-over`") == 1
            with EvidenceQueue(self.b) as q:
                assert {q.get(u).state for u in self.uids} == {"consumed"}
            landed = _sh(self.up, "ls-tree", "-r", "--name-only", "main").split()
            assert not [f for f in landed if f.startswith("update_queue/candidates/") or f == "update_queue/lease.json"]
            records = [f for f in landed if f.startswith("update_records/")]
            assert len(records) == 1 and all(u in _sh(self.up, "show", f"main:{records[0]}") for u in self.uids)
        elif self.kind == "repair":
            assert (rp / "MEMORY.md").read_text() == self.resolved
            assert len(git(rp, "rev-list", "--parents", "-n", "1", head).split()) == 3  # the one merge
        else:
            assert (rp / "MEMORY_beta.md").read_text().count("`beta-node`") == 1
        if self.kind == "pull":
            assert (rp / "MEMORY_alpha.md").read_text().count("`alpha-node`") == 1


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "point"), SYNC_CASES)
def test_kill_a_sync_at_every_boundary_then_recover(world, tmp_path, kind, point):
    case = SyncCase(kind, world, tmp_path)
    argv = case.setup()
    assert killed_at(argv, point, tmp_path), f"{kind} never reached {point}"
    if point == "sync-during-worktree-add":  # the wedge: a dead staging worktree fails every fetch
        assert list((case.b.runtime / "worktrees").glob("sync-*"))
    if kind != "pull":  # a pull recovers by itself first, as `assistant update begin` does
        r = subprocess.run(rmtui("recover", "--root", str(case.b.path), "--json"), capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    case.finish_job()
    case.check()
