"""MCP benchmark: warm `rightmemory_retrieve` through the official client over stdio.

Target (hosts-as-the-model issue): warm MCP retrieval median under 100 ms on a
10,000-node root. Run: ``.venv/bin/python bench/mcp_retrieve.py [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import git
from mcp import Client
from mcp.client.stdio import StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
from foundation import WORDS, build_root  # noqa: E402

from rmtui.engine.memory.roots import init_root  # noqa: E402


async def run(root: Path, calls: int) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "rmtui", "--headless", "mcp", "--root", str(root)])
    rng = random.Random(3)
    async with Client(params, read_timeout_seconds=600) as client:
        t0 = time.perf_counter()
        first = await client.call_tool("rightmemory_retrieve", {"session_id": "bench-0", "need": "cache invalidation"})
        cold = time.perf_counter() - t0
        assert not first.is_error, first
        times = []
        for i in range(calls):
            need = " ".join(rng.sample(WORDS, 3))
            t0 = time.perf_counter()
            res = await client.call_tool("rightmemory_retrieve", {"session_id": f"bench-{i + 1}", "need": need})
            times.append(time.perf_counter() - t0)
            assert not res.is_error, res
    times.sort()
    print(f"first MCP retrieve (model load + index): {cold * 1000:.0f} ms")
    print(f"warm MCP retrieve over stdio, {calls} calls: median {statistics.median(times) * 1000:.1f} ms, "
          f"p95 {times[int(len(times) * 0.95) - 1] * 1000:.1f} ms (target: median < 100 ms)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=40)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = init_root(Path(tmp) / "root")
        n = build_root(root.path)
        repo = git.Repo(root.path)
        repo.git.add("-A")
        repo.git.commit("-qm", "bench root")
        print(f"root: {n} nodes in 500 detail files")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rmtui", "--headless", "retrieve-index", "--root", str(root.path)],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"dense index built once, before the server starts: {time.perf_counter() - t0:.0f} s")
        asyncio.run(run(root.path, args.calls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
