"""A host's sync repair is admitted like every other landing: the merge commit it makes for
``assistant complete`` of a sync-reconciler task must pass the incoming-pull rules and the
supervisor's admission of its tree, read from Git objects. Each hostile repair below is
refused by the rule's name (exit 1); nothing lands, nothing is pushed, and the task stays
open so an honest repair can still complete it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_cycles_host import complete, head, rm, sh
from test_sync import _diverge, machines, memory_with, upstream  # noqa: F401  (fixtures)

from rmtui.engine import sync
from rmtui.engine.evidence.queue import EvidenceQueue

RESOLVED = memory_with(("port", "the staging DB listens on 5433 (6543 was an old local note)"))


def upstream_head(bare: Path) -> str:
    return subprocess.run(["git", "rev-parse", "main"], cwd=bare, capture_output=True, text=True,
                          check=True).stdout.strip()


def open_repair(a, b, bare: Path, *, with_candidate: bool = False) -> dict:
    """Machines diverge on one node; B's pull waits for a repair; a host begins it."""
    _diverge(a, b)
    if with_candidate:  # the upstream also brings a queued candidate from A (published straight to it)
        with EvidenceQueue(a) as q:
            uid = q.submit("sess-a", b"the staging DB moved to 5433 last week")["uid"]
        assert sync.push(a).status in ("pushed", "synced")
        assert uid in sh(bare, "ls-tree", "-r", "--name-only", "main", "update_queue/")
    assert rm(b, "sync", "pull", expect=3)["status"] == "conflict"
    task = rm(b, "assistant", "begin", "--role", "sync-reconciler")
    assert task["claimed"] and task["context"]["conflicts"] == ["MEMORY.md"], task
    return task


def write(wt: Path, rel: str, data: bytes | str) -> None:
    path = wt / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def hostile_symlink(wt: Path, _task: dict) -> None:
    (wt / "MEMORY_keys.md").symlink_to("/etc/passwd")


def hostile_executable(wt: Path, _task: dict) -> None:
    os.chmod(wt / "MEMORY.md", 0o755)


def hostile_latin1(wt: Path, _task: dict) -> None:
    write(wt, "MEMORY.md", RESOLVED.encode() + b"- `cafe` caf\xe9 \xe2\x86\x92 []\n")


def hostile_case_pair(wt: Path, _task: dict) -> None:
    write(wt, "MEMORY_Notes.md", "# Notes\n")
    write(wt, "MEMORY_notes.md", "# notes\n")


def hostile_oversized(wt: Path, _task: dict) -> None:
    write(wt, "MEMORY.md", RESOLVED + "- `big` " + "x" * (4 * 1024 * 1024) + " → []\n")


def hostile_view_file(wt: Path, _task: dict) -> None:
    write(wt, "shared_views/mine/view.md", "# A view the reconciler may not write\n")


def hostile_queue_rewrite(wt: Path, task: dict) -> None:
    (cand,) = [p for p in task["context"]["incoming"] if p.startswith("update_queue/candidates/")]
    write(wt, cand, (wt / cand).read_text().replace("5433", "6543"))


def hostile_queue_drop(wt: Path, task: dict) -> None:
    (cand,) = [p for p in task["context"]["incoming"] if p.startswith("update_queue/candidates/")]
    sh(wt, "rm", "-q", "-f", "--", cand)


def _hidden(flag: str):
    def hide(wt: Path, _task: dict) -> str:
        """Commit an invalid graph, then show a valid file on disk behind an index flag."""
        write(wt, "MEMORY.md", RESOLVED + "- `dangling` points nowhere → [dep:nowhere]\n")
        return flag
    return hide


CASES = {
    "symlink": (hostile_symlink, "symlink", False),
    "executable": (hostile_executable, "executable", False),
    "not-text": (hostile_latin1, "not-text", False),
    "case-collision": (hostile_case_pair, "case-collision", False),
    "file-too-large": (hostile_oversized, "file-too-large", False),
    "off-role-path": (hostile_view_file, "forbidden-path", False),
    "queue-rewritten": (hostile_queue_rewrite, "queue-rewritten", True),
    "queue-dropped": (hostile_queue_drop, "queue-rewritten", True),
    "skip-worktree": (_hidden("--skip-worktree"), "hidden-change", False),
    "assume-unchanged": (_hidden("--assume-unchanged"), "hidden-change", False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_repair_is_refused_by_name_and_nothing_lands_or_is_pushed(machines, upstream, case):  # noqa: F811
    a, b = machines
    hostile, rule, with_candidate = CASES[case]
    task = open_repair(a, b, upstream, with_candidate=with_candidate)
    wt = Path(task["worktree"])
    write(wt, "MEMORY.md", RESOLVED)
    flag = hostile(wt, task)
    sh(wt, "add", "-A")
    sh(wt, "commit", "-q", "-m", f"sync: repair ({case})")
    if flag:  # what is on disk (valid) is no longer what is committed (invalid)
        sh(wt, "update-index", flag, "MEMORY.md")
        write(wt, "MEMORY.md", RESOLVED)
        assert sh(wt, "status", "--porcelain") == ""
    local, remote = head(b), upstream_head(upstream)
    out = complete(task, expect=1)
    assert out["details"]["rule"] == rule and f"{rule}:" in out["message"], out
    assert head(b) == local and upstream_head(upstream) == remote  # nothing landed, nothing pushed
    assert "6543" in (b.path / "MEMORY.md").read_text() and not (b.path / "MEMORY_keys.md").exists()
    assert wt.is_dir()  # the task stays open for an honest repair


def test_after_a_refusal_the_honest_repair_completes_the_same_task(machines, upstream):  # noqa: F811
    a, b = machines
    task = open_repair(a, b, upstream)
    wt = Path(task["worktree"])
    write(wt, "MEMORY.md", RESOLVED)
    hostile_symlink(wt, task)
    sh(wt, "add", "-A")
    sh(wt, "commit", "-q", "-m", "sync: repair with a link")
    assert complete(task, expect=1)["details"]["rule"] == "symlink"
    ctx = task["context"]
    sh(wt, "reset", "-q", "--hard", ctx["head"])  # start the merge again and repair it honestly
    subprocess.run(["git", "merge", "--no-commit", ctx["upstream_commit"]], cwd=wt, capture_output=True)
    write(wt, "MEMORY.md", RESOLVED)
    sh(wt, "add", "MEMORY.md")
    sh(wt, "commit", "-q", "-m", "sync: reconcile staging port")
    out = complete(task)
    assert out["status"] == "synced" and (b.path / "MEMORY.md").read_text() == RESOLVED, out
    assert upstream_head(upstream) == head(b)  # the merge was pushed
