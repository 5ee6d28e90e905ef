"""Supervisor benchmark: one-item change on a 10,000-node root, end to end.

Each run begins an Update operation (record + worktree at the current head), changes one
node's prose in one detail file and commits it there, then finishes: admission (clean
check, per-commit path/mode/encoding checks, graph validation of the candidate), squash,
publication under ``memory.lock`` (CAS + work-tree fast-forward) and cleanup of the
worktree, branch and pin. Target: median under 1.5 s.

Run: ``.venv/bin/python bench/supervisor.py [--runs N] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from foundation import build_root  # noqa: E402

from rmtui.engine.memory.roots import init_root  # noqa: E402
from rmtui.engine.writes.supervisor import Supervisor  # noqa: E402

ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def git(cwd: Path, *args: str) -> None:
    import os

    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **ENV})


def one_change(sup: Supervisor, run: int) -> dict[str, float]:
    t0 = time.perf_counter()
    op = sup.begin("update", "update")
    t1 = time.perf_counter()
    wt = Path(op.worktree)
    detail = wt / f"MEMORY_topic{run % 500:03d}.md"
    text = detail.read_text(encoding="utf-8")
    ident = f"n{run % 500:03d}-00"
    detail.write_text(text.replace(f"- `{ident}` ", f"- `{ident}` Revised (run {run}). ", 1), encoding="utf-8")
    git(wt, "commit", "-q", "-am", f"update: revise {ident}")
    t2 = time.perf_counter()
    op = sup.prepare(sup.store.get(op.id), summary="bench")
    t3 = time.perf_counter()
    receipt = sup.publish(op)
    t4 = time.perf_counter()
    assert receipt.phase == "committed" and receipt.changed_paths == [detail.name], receipt
    assert not wt.exists()
    return {"begin": t1 - t0, "writer": t2 - t1, "admission": t3 - t2, "publish": t4 - t3,
            "supervisor": (t1 - t0) + (t4 - t2), "total": t4 - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="cProfile one extra run and print the top entries")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmtui-bench-sup-") as tmp:
        path = Path(tmp) / "root"
        root = init_root(path)
        nodes = build_root(path)
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "bench root")
        with Supervisor(root) as sup:
            one_change(sup, 9999)  # warm-up: caches, the SQLite file, git's object store
            runs = [one_change(sup, i) for i in range(args.runs)]
            print(f"root: {nodes} nodes in 500 detail files; {args.runs} runs, one-item change each")
            for key in ("begin", "writer", "admission", "publish", "supervisor", "total"):
                vals = [r[key] for r in runs]
                print(f"{key:10} median {statistics.median(vals) * 1000:7.0f} ms   "
                      f"min {min(vals) * 1000:6.0f}   max {max(vals) * 1000:6.0f}")
            sup_median = statistics.median(r["supervisor"] for r in runs)
            print(f"admission + publication end to end (begin + finish, worktree creation and cleanup "
                  f"included, writer's own edit excluded): median {sup_median * 1000:.0f} ms (target < 1500 ms)")
            if args.profile:
                prof = cProfile.Profile()
                prof.enable()
                one_change(sup, 4242)
                prof.disable()
                pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
