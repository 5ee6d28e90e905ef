"""Sync and the Git-backed queue, timed with real Git (a bare upstream over file://).

Prints:
- pull of one incoming commit (fetch, allow-list check, staging worktree, validation of the
  whole candidate, publication through the supervisor) on a 10,000-node root, median of N;
  target < 2 s;
- a 3-machine run end to end: each machine submits ``--evidence`` items concurrently while
  it runs the Update driver (a scripted fake provider answers every batch), then the queue
  is drained; prints wall time, batches, and the queue overhead per batch (driver turn time
  minus the model's own turn, i.e. refresh + claim + finalize + adoption); target < 1 s;
  checks every candidate landed in exactly one update record.

Usage: .venv/bin/python bench/sync.py [--runs 5] [--evidence 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from fake_provider import FakeProvider, Turn  # noqa: E402
from foundation import build_root  # noqa: E402

from rmtui.engine import sync  # noqa: E402
from rmtui.engine.evidence.queue import EvidenceQueue  # noqa: E402
from rmtui.engine.memory.config import set_config_value  # noqa: E402
from rmtui.engine.memory.roots import init_root  # noqa: E402
from rmtui.engine.roles.update_driver import UpdateDriver  # noqa: E402
from rmtui.engine.sync.queue_git import GitQueue  # noqa: E402


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@l", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@l",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def machine(tmp: Path, upstream: Path, name: str, *, first: bool = False, big: bool = False):
    path = tmp / name
    if first:
        root = init_root(path)
        if big:
            build_root(path)
            git(path, "add", "-A")
            git(path, "commit", "-qm", "bench root")
        git(path, "remote", "add", "origin", upstream.as_uri())
        git(path, "push", "-q", "-u", "origin", "main")
    else:
        subprocess.run(["git", "clone", "-q", upstream.as_uri(), str(path)], check=True)
        root = init_root(path, force=True)
    for key, value in (("user.name", "bench"), ("user.email", "bench@local")):
        git(path, "config", key, value)
    set_config_value(root.path, "sync.enabled", True)
    set_config_value(root.path, "sync.push_after_landing", False)
    return root


def bare(tmp: Path, name: str) -> Path:
    path = tmp / name
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path


def bench_pull(tmp: Path, runs: int) -> list[float]:
    upstream = bare(tmp, "big.git")
    a = machine(tmp, upstream, "big-a", first=True, big=True)
    b = machine(tmp, upstream, "big-b")
    times = []
    for i in range(runs + 1):
        detail = a.path / "MEMORY_topic000.md"
        detail.write_text(detail.read_text() + f"- `bench-{i}` an incoming fact number {i} → []\n")
        git(a.path, "commit", "-qm", f"maintain: incoming {i}", "--", detail.name)
        git(a.path, "push", "-q", "origin", "main")
        t0 = time.perf_counter()
        res = sync.pull(b)
        elapsed = time.perf_counter() - t0
        assert res.status == "synced", res
        if i:  # the first pull warms caches
            times.append(elapsed)
    return times


def bench_queue(tmp: Path, evidence: int) -> dict:
    import anthropic  # noqa: F401  (the SDK's import, ~1 s, is paid once per process, not per batch)

    upstream = bare(tmp, "queue.git")
    provider = FakeProvider()
    provider.push(*[Turn(text="Nothing durable in this batch.") for _ in range(evidence * 3)])
    roots = [machine(tmp, upstream, "q0", first=True)] + [machine(tmp, upstream, f"q{i}") for i in (1, 2)]
    for r in roots:
        set_config_value(r.path, "update.async.target_batch_candidates", 15)
        set_config_value(r.path, "update.model.model_id", "anthropic:fake-model")
        set_config_value(r.path, "update.model.api_base", provider.base("anthropic"))
    turns: list[float] = []
    submitted: list[str] = []
    lock = threading.Lock()

    def run_driver(root) -> None:
        t0 = time.perf_counter()
        out = UpdateDriver(root, coordinator=GitQueue(root)).run_once()
        if out.state != "idle":  # a batch turn (the scripted model answers at once)
            with lock:
                turns.append(time.perf_counter() - t0)

    def work(idx: int, root) -> None:
        for i in range(evidence):
            with EvidenceQueue(root) as q:
                uid = q.submit(f"q{idx}-s{i % 4}", f"machine {idx} fact {i}\n".encode())["uid"]
            with lock:
                submitted.append(uid)
            if i % 15 == 14:
                GitQueue(root).publish_pending()
                run_driver(root)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=work, args=(i, r)) for i, r in enumerate(roots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for _ in range(60):
        for r in roots:
            GitQueue(r).publish_pending()
            UpdateDriver(r, coordinator=GitQueue(r)).run_once(force=True)
        if not git(upstream, "ls-tree", "-r", "--name-only", "main", "--", "update_queue").strip():
            break
    wall = time.perf_counter() - t0
    provider.close()
    landed: list[str] = []
    for rel in git(upstream, "log", "--format=", "--name-only", "--diff-filter=A", "main", "--",
                   "update_records").split():
        sha = git(upstream, "log", "--format=%H", "--diff-filter=A", "-1", "main", "--", rel).strip()
        landed += [c["uid"] for c in json.loads(git(upstream, "show", f"{sha}:{rel}"))["candidates"]]
    return {"wall": wall, "turns": turns, "submitted": len(submitted), "landed": len(landed),
            "unique": len(set(landed)), "exact": sorted(landed) == sorted(submitted)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--evidence", type=int, default=100, help="evidence items per machine")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmtui-bench-sync-") as tmp:
        pulls = bench_pull(Path(tmp), args.runs)
        print(f"pull of one incoming commit, 10,000-node root: median {statistics.median(pulls) * 1000:.0f} ms "
              f"(min {min(pulls) * 1000:.0f}, max {max(pulls) * 1000:.0f}; target < 2000 ms)")
        q = bench_queue(Path(tmp), args.evidence)
        per = statistics.median(q["turns"]) if q["turns"] else float("nan")
        print(f"3 machines x {args.evidence} evidence, end to end: {q['wall']:.1f} s; {len(q['turns'])} batch turns "
              f"during submission; queue overhead per batch (refresh + claim + role turn with an instant model + "
              f"finalize + adoption): median {per * 1000:.0f} ms (target < 1000 ms)")
        print(f"candidates: submitted {q['submitted']}, landed {q['landed']} ({q['unique']} unique); "
              f"each exactly once: {q['exact']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
