"""Foundation benchmark: parse+validate a 10,000-node root, and evidence submits per second.

Targets (the engine-foundation issue): validate 10,000 nodes in under 1 s; over 200
submits/s from one process. Run: ``.venv/bin/python bench/foundation.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.graph import load_graph
from rmtui.engine.memory.roots import init_root
from rmtui.engine.memory.validation import validate_root

EDGE_TYPES = ("dep", "rel", "ext", "doc", "loc", "cfg", "run", "ver")
WORDS = ("cache invalidation queue worker retries deploy schema migration index parser token "
         "release staging rollback budget latency profile graph memory session config").split()


def build_root(path: Path, *, files: int = 500, nodes_per_file: int = 20, seed: int = 7) -> int:
    """Write MEMORY.md with ``files`` F# headings, each backed by a detail file of nodes."""
    rng = random.Random(seed)
    node_ids = [f"n{f:03d}-{k:02d}" for f in range(files) for k in range(nodes_per_file)]
    domains = 10
    per_domain = files // domains
    mem = ["# Memory", ""]
    for d in range(domains):
        mem += [f"# Domain {d} {{#dom{d}}}", "", f"What domain {d} is about.", ""]
        for g in range(per_domain // 10):
            mem += [f"## Group {d}.{g} {{#grp{d}-{g}}} → [rel:dom{(d + 1) % domains}]", ""]
            for k in range(10):
                f = d * per_domain + g * 10 + k
                mem += [f"### Topic {f} {{F#topic{f:03d}}}", "",
                        f"Summary of topic {f}: {' '.join(rng.sample(WORDS, 6))}.", ""]
                lines = [f"Details of topic {f}.", ""]
                for n in range(nodes_per_file):
                    ident = f"n{f:03d}-{n:02d}"
                    targets = set()
                    for _ in range(rng.randint(0, 3)):
                        t = rng.choice(node_ids)
                        if t != ident:
                            targets.add((rng.choice(EDGE_TYPES), t))
                    if rng.random() < 0.25:  # a pointer to another topic's heading
                        other = rng.randrange(files)
                        if other != f:
                            targets.add(("doc", f"topic{other:03d}"))
                    edges = ", ".join(f"{t}:{x}" for t, x in sorted(targets))
                    prose = " ".join(rng.choices(WORDS, k=rng.randint(8, 20)))
                    lines.append(f"- `{ident}` {prose.capitalize()}. → [{edges}]")
                (path / f"MEMORY_topic{f:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (path / "MEMORY.md").write_text("\n".join(mem) + "\n", encoding="utf-8")
    (path / "PURSUITS.md").write_text(
        "# Pursuits\n\n## Focus\n\n- `ship-it`\n\n## Ship it {#ship-it} → [rel:dom0]\n\n**Next:**\n- `do` release\n",
        encoding="utf-8")
    return len(node_ids)


def bench_validate(root: Path, runs: int) -> tuple[float, float, dict]:
    """Median seconds of parse alone (load_graph) and of parse+validate (validate_root)."""
    parse_times, times = [], []
    report = None
    for _ in range(runs):
        t0 = time.perf_counter()
        load_graph(root)
        parse_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        report = validate_root(root)
        times.append(time.perf_counter() - t0)
    assert report is not None
    if not report.ok:
        raise SystemExit("synthetic root does not validate:\n" + "\n".join(map(str, report.issues[:10])))
    edges = sum(len(i.edges) for i in report.graph.ordered)
    return statistics.median(parse_times), statistics.median(times), {**report.graph.counts(), "edges": edges}


def bench_submit(root_path: Path, count: int) -> float:
    root = init_root(root_path)
    queue = EvidenceQueue(root)
    texts = [f"Evidence {i}: {' '.join(WORDS[i % len(WORDS):] + WORDS[:i % len(WORDS)])}\n".encode()
             for i in range(count)]
    t0 = time.perf_counter()
    for i, data in enumerate(texts):
        out = queue.submit("bench-session", data, request=f"req-{i}")
        assert out["state"] == "saved"
    elapsed = time.perf_counter() - t0
    queue.close()
    return count / elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5, help="validate runs (median is printed)")
    ap.add_argument("--submits", type=int, default=1000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmtui-bench-") as tmp:
        graph_root = Path(tmp) / "graph"
        graph_root.mkdir()
        n = build_root(graph_root)
        parse, median, counts = bench_validate(graph_root, args.runs)
        print(f"root: {counts['nodes']} nodes, {counts['headings']} headings, {counts['edges']} edges, "
              f"{counts['files']} files")
        print(f"parse (load_graph): median {parse * 1000:.0f} ms over {args.runs} runs")
        print(f"parse+validate (validate_root): median {median * 1000:.0f} ms over {args.runs} runs (target < 1000 ms)")
        assert counts["nodes"] == n
        rate = bench_submit(Path(tmp) / "queue", args.submits)
        print(f"submit: {rate:.0f} submits/s over {args.submits} durable submits from one process (target > 200/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
