"""Retrieve speed on a 10,000-node root, through the real CLI (a new process per call).

Prints:
- first call on a cold machine: no embedding service running, no caches (corpus, BM25,
  vectors); the call starts the local warm service, answers within
  ``embedding.dense_budget_seconds`` and leaves a background indexer embedding the rest;
- time until the whole corpus is embedded by that background indexer;
- warm ``retrieve`` end to end (new CLI process per call, service already running):
  median and p95 over N calls;
- re-index after a one-node change: corpus re-parse, BM25 rebuild and re-embedding of
  the changed node, measured in-process on the engine functions the CLI runs, plus the
  end-to-end time of the first CLI call after the change.

The OS page cache is not dropped (that needs privileges this bench does not assume), so
"cold" means no service process, no model loaded in memory and no rmtui cache files.

Usage: .venv/bin/python bench/retrieve_speed.py [--nodes 10000] [--calls 30]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rmtui.engine.memory.roots import MemoryRoot, init_root  # noqa: E402
from rmtui.engine.retrieval.corpus import load_corpus  # noqa: E402
from rmtui.engine.retrieval.ranking import load_lexical  # noqa: E402
from rmtui.engine.retrieval.retrieve import cli_backend, dense_index, fill_vectors, params_from_config  # noqa: E402
from rmtui.engine.retrieval.vectors import VectorCache  # noqa: E402

TOPICS = ["build", "tests", "deploy", "database", "auth", "billing", "search", "frontend", "infra", "people"]
WORDS = ("cache index parser retry token lock branch commit queue worker build deploy config schema model "
         "vector latency timeout socket proxy thread async flaky fixture migration sqlite postgres redis kafka "
         "docker image layer pipeline lint format mypy ruff pytest coverage release version tag changelog "
         "endpoint bearer session cookie header payload json yaml toml secret rotate backup restore snapshot "
         "prefers avoid always never because after before when user team review owner oncall incident").split()
NEEDS = ["how do we rotate the bearer token secret", "why does the pytest fixture time out on the socket",
         "which database migration broke the billing queue", "docker layer cache invalidation rule",
         "who is oncall for search incidents", "release tag and changelog steps", "redis backup restore",
         "frontend lint and format preferences", "kafka worker retry policy", "postgres lock timeout"]


def build_root(dest: Path, nodes: int) -> MemoryRoot:
    """Memory with 10 areas x N F# detail files of ~20 nodes under ### headings."""
    rnd = random.Random(7)
    root = init_root(dest)
    memory = ["# Memory", ""]
    per_file, made, f = 200, 0, 0
    while made < nodes:
        area = TOPICS[f % len(TOPICS)]
        memory += [f"## {area.title()} notes {f} {{F#{area}-{f}}}", ""]
        lines = []
        for s in range(per_file // 20):
            lines += [f"### {area.title()} topic {f}.{s} {{#{area}-{f}-{s}}}", ""]
            for k in range(20):
                if made >= nodes:
                    break
                text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(8, 28)))
                lines.append(f"- `{area}-{f}-{s}-{k}` {text.capitalize()}. → []")
                made += 1
            lines.append("")
        (dest / f"MEMORY_{area}-{f}.md").write_text("\n".join(lines) + "\n")
        f += 1
    (dest / "MEMORY.md").write_text("\n".join(memory) + "\n")
    subprocess.run(["git", "-C", str(dest), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(dest), "commit", "-qm", "bench root"], check=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@l", "GIT_COMMITTER_NAME": "b",
                        "GIT_COMMITTER_EMAIL": "b@l"})
    return root


def cli(root: Path, session: str, need: str, env: dict) -> tuple[float, dict, str]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "retrieve", "--json", "--root", str(root),
                        "--session", session, need], capture_output=True, text=True, env=env, cwd=str(REPO))
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"retrieve failed ({p.returncode}): {p.stderr}")
    return dt, json.loads(p.stdout), p.stderr


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--calls", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rmtui-speed-") as tmp:
        tmp = Path(tmp)
        t = time.time()
        root = build_root(tmp / "root", args.nodes)
        print(f"root: {args.nodes} nodes built in {time.time() - t:.1f} s")
        env = {**os.environ, "RMTUI_SERVICE_DIR": str(tmp / "services")}
        os.environ["RMTUI_SERVICE_DIR"] = env["RMTUI_SERVICE_DIR"]

        dt, out, err = cli(root.path, "cold", NEEDS[0], env)
        cov = out["dense_coverage"]
        print(f"first call, cold (no service, no caches): {dt:.2f} s; mode {out['mode']}, "
              f"dense coverage {0 if cov is None else cov:.0%} of passages "
              f"(budget embedding.dense_budget_seconds = {root.config().get('embedding.dense_budget_seconds')})")
        t = time.time()
        lock = root.runtime / "cache" / "indexer.lock"
        from rmtui.engine.locks import try_lock

        time.sleep(1.0)
        while True:
            fd = try_lock(lock)
            if fd is not None:
                os.close(fd)
                break
            time.sleep(0.5)
        dt2, out2, _ = cli(root.path, "after-index", NEEDS[1], env)
        print(f"background indexer finished {time.time() - t:.1f} s after the first call; "
              f"next call dense coverage {out2['dense_coverage']:.0%}")

        for i in range(3):  # settle the page cache and the service's first requests
            cli(root.path, f"warmup-{i}", NEEDS[i % len(NEEDS)], env)
        times = []
        for i in range(args.calls):
            dt, out, _ = cli(root.path, f"warm-{i}", NEEDS[i % len(NEEDS)], env)
            assert out["mode"] == "hybrid" and out["dense_coverage"] == 1.0
            times.append(dt)
        print(f"warm retrieve, new CLI process per call, {args.calls} calls: median {1000 * statistics.median(times):.0f} ms, "
              f"p95 {1000 * pct(times, 0.95):.0f} ms, min {1000 * min(times):.0f} ms")

        # one-node change
        target = sorted(root.path.glob("MEMORY_*.md"))[3]
        lines = target.read_text().splitlines()
        i = next(n for n, line in enumerate(lines) if line.startswith("- `"))
        lines[i] = lines[i].replace(" → []", " Also: rotate the staging secret weekly. → []")
        target.write_text("\n".join(lines) + "\n")
        cfg = root.config()
        params = params_from_config(cfg)
        backend = cli_backend(root, cfg)
        t0 = time.perf_counter()
        corpus = load_corpus(root.path)
        t1 = time.perf_counter()
        load_lexical(corpus, params, root.runtime / "cache")
        t2 = time.perf_counter()
        cache = VectorCache.open(root.runtime / "cache", backend.info().embedding_model)
        n = fill_vectors(cache, dense_index(corpus, params, root.runtime / "cache"), backend, deadline=None)
        t3 = time.perf_counter()
        print(f"re-index after a one-node change: {1000 * (t3 - t0):.0f} ms (corpus re-parse {1000 * (t1 - t0):.0f} ms, "
              f"BM25 rebuild {1000 * (t2 - t1):.0f} ms, {n} passage re-embedded {1000 * (t3 - t2):.0f} ms)")
        target.write_text("\n".join(lines).replace("weekly", "monthly") + "\n")
        dt, out, _ = cli(root.path, "after-change", "rotate the staging secret monthly", env)
        print(f"first CLI call after another one-node change (re-index included): {1000 * dt:.0f} ms; "
              f"top result {out['results'][0]['id'] if out['results'] else None}")
        from rmtui.engine.retrieval.embed_client import service_dir, stop_local_service
        from rmtui.engine.retrieval.embeddings import resolve_model_path

        stop_local_service(service_dir(resolve_model_path(cfg.get("embedding.model"), cfg.get("embedding.model_path")),
                                       cfg.get("embedding.reranker_path")))


if __name__ == "__main__":
    main()
