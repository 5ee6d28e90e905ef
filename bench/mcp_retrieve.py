"""MCP benchmark: `rightmemory_retrieve` through the official client over stdio, 10,000-node root.

Prints, against its targets (the "Benchmarks" table of README.md):
- start to first answer: a new MCP server process (vectors cached) from spawn until its first
  retrieve answers (<= 1.0 s), and which runtime loads the model (ONNX Runtime or torch); first
  with no warm service running, so that the server launches it before importing the SDK and
  the first answer comes from it (its start, model load and index reads included), then with
  the warm service already running (as after any CLI retrieve or another agent's server within
  its idle time), then with ``embedding.local_service`` off (the model loads in the server),
  then with the MCP fork server running (a child of a process that has imported the SDK
  serves: ``rmtui/mcp_forkserver.py``); then the first retrieve when it comes 2 s after the
  server initialised, as an agent's does;
- warm retrieve: median and p95 over N calls (median <= 25 ms).

Each line ends with the floor measured in the same run: a bare ``python -c pass``, a
``python`` that only imports the SDK's server (``mcp.server.mcpserver``: the part of any
server start this project cannot shorten), and the in-process retrieve of the same needs in
this process (the engine and the model loaded here, no MCP framing), whose stages are printed
(query embedding, BM25, dense, second stage, rendering, pending evidence).

Run: ``.venv/bin/python bench/mcp_retrieve.py [--nodes 10000] [--calls N] [--starts N]``.
``--root DIR`` measures a copy of a kept bench root whose vectors are cached (for 50,000 nodes,
``bench/retrieve_speed.py --nodes 50000 --keep-root DIR`` makes one: embedding them again here
would take another half hour); ``--warm-only`` prints only the floor and the warm line;
``--save FILE`` / ``--baseline FILE`` write the warm and in-process medians and print a later
run's ratio to them (target for 50,000 nodes: within 1.5x of 10,000); ``--side-by-side ROOT``
also runs a server on a copy of a second kept root beside the first and times warm calls to
both, taking turns, so that the ratio is not the machine's drift between two runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI sets it for the server it starts
import random
import shutil
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

from rmtui.engine.memory.roots import MemoryRoot, init_root  # noqa: E402

START_TARGET_S = 1.0
WARM_TARGET_MS = 25.0


def warm_needs(calls: int) -> list[str]:
    rng = random.Random(3)
    return [" ".join(rng.sample(WORDS, 3)) for _ in range(calls)]


class Floor:
    """A bare interpreter, an interpreter that only imports the MCP SDK's server (what every
    server start pays before it can answer, whatever it does itself), and the in-process
    retrieve of the same needs, measured in this run."""

    python = 0.0
    sdk = 0.0
    inproc = 0.0
    stages: dict[str, float] = {}

    def __str__(self) -> str:
        return (f"[floor: python -c pass {1000 * self.python:.0f} ms; python importing the MCP SDK's server "
                f"{1000 * self.sdk:.0f} ms; in-process retrieve {1000 * self.inproc:.1f} ms]")


def _median_run(*args: str, runs: int = 7) -> float:
    """Median wall time of ``python *args`` over ``runs`` new processes."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


FLOOR = Floor()


def measure_floor(root: Path, calls: int) -> None:
    from rmtui.engine.memory.roots import MemoryRoot
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend
    from rmtui.engine.retrieval.retrieve import retrieve, warm_up
    from rmtui.engine.retrieval.vectors import VectorCache

    FLOOR.python = _median_run("-c", "pass")
    FLOOR.sdk = _median_run("-c", "import mcp.server.mcpserver")
    mem = MemoryRoot(root)
    backend = InProcessBackend.from_config(mem.config())  # the root's own model (``--model`` of the speed bench)
    warm_up(mem, backend)  # as the server warms up (and idles until its first call)
    VectorCache.open(mem.runtime / "cache", backend.info().embedding_model).prepare(wait=True)
    for i in range(5):
        retrieve(mem, f"floor-settle-{i}", "release budget", backend=backend)
    times, stages = [], {}
    for i, need in enumerate(warm_needs(calls)):
        t0 = time.perf_counter()
        out = retrieve(mem, f"floor-{i}", need, backend=backend)
        times.append(time.perf_counter() - t0)
        for k, v in {"corpus snapshot": out.timings["corpus"], **out.timings["stages"]}.items():
            stages.setdefault(k, []).append(v)
    FLOOR.inproc = statistics.median(times)
    FLOOR.stages = {k: statistics.median(v) for k, v in stages.items()}
    print("in-process retrieve, stage medians: " + ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in FLOOR.stages.items())
          + f"; total {1000 * FLOOR.inproc:.1f} ms (target: <= {WARM_TARGET_MS:.0f} ms: "
          f"{verdict(1000 * FLOOR.inproc <= WARM_TARGET_MS)}) {FLOOR}")


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


async def first_answer(root: Path, pause: float = 0.0) -> tuple[float, float]:
    """A fresh server: (seconds from spawn to initialised, seconds from spawn to the first
    answer); with ``pause``, the first call comes that long after the server initialised (as
    an agent's first retrieve does) and the second figure is that call's own time."""
    t0 = time.perf_counter()
    async with server(root) as client:
        ready = time.perf_counter() - t0
        if pause:
            await asyncio.sleep(pause)
            t0 = time.perf_counter()
        res = await client.call_tool("rightmemory_retrieve",
                                     {"session_id": "bench-start", "need": "cache invalidation"})
        total = time.perf_counter() - t0
        assert not res.is_error, res
    return ready, total


async def starts_to_first_answer(root: Path, starts: int, how: str, before=None) -> None:
    totals = []
    for i in range(starts):
        if before is not None:
            before()
        ready, total = await first_answer(root)
        totals.append(total)
        print(f"  start {i + 1}: server initialised after {ready * 1000:.0f} ms, first retrieve answered after "
              f"{total * 1000:.0f} ms")
    print(f"MCP server start to first answer ({how}; vectors cached, model on {runtime_used()}): "
          f"median {statistics.median(totals):.2f} s, worst {max(totals):.2f} s "
          f"(target: <= {START_TARGET_S} s: {verdict(statistics.median(totals) <= START_TARGET_S)}) {FLOOR}")


def stop_service() -> None:
    from rmtui.engine.retrieval.modelhost.embed_client import service_dir, stop_local_service
    from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path

    stop_local_service(service_dir(resolve_model_path(None, None), None))


def local_service(root: Path, on: bool) -> None:
    from rmtui.engine.memory.config import set_config_value

    set_config_value(root, "embedding.local_service", on)


async def run(root: Path, calls: int, starts: int, warm_only: bool = False) -> float:
    """The target lines; the warm median (ms)."""
    if not warm_only:
        await start_lines(root, starts)
    return await warm_line(root, calls)


async def start_lines(root: Path, starts: int) -> None:
    from rmtui import mcp_forkserver

    os.environ["RMTUI_MCP_FORKSERVER"] = "0"  # each start below imports the SDK itself
    await starts_to_first_answer(root, starts, "no warm service running: the server launches it", stop_service)
    await starts_to_first_answer(root, starts, "the warm service already running")
    stop_service()
    local_service(root, False)
    await starts_to_first_answer(root, starts, "embedding.local_service off: the model loads in the server")
    local_service(root, True)
    await first_answer(root)  # a full-path server ran: the warm service runs, and it leaves a fork server
    os.environ["RMTUI_MCP_FORKSERVER"] = "1"
    mcp_forkserver.launch()  # as a server that lived LAUNCH_DELAY seconds does
    sock = Path(mcp_forkserver.server_dir(), "sock")
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        await starts_to_first_answer(root, starts, "the fork server and the warm service running: a child of the "
                                                   "fork server, which has imported the SDK, serves")
    finally:
        mcp_forkserver.stop()
        os.environ["RMTUI_MCP_FORKSERVER"] = "0"
    late = [(await first_answer(root, pause=2.0))[1] for _ in range(starts)]
    print(f"first retrieve 2 s after the server initialised (the model warmed up meanwhile): median "
          f"{1000 * statistics.median(late):.0f} ms, worst {1000 * max(late):.0f} ms {FLOOR}")


def server(root: Path) -> Client:
    """An MCP client of a new ``rmtui mcp`` server on ``root`` (stdio)."""
    params = StdioServerParameters(command=sys.executable,  # this environment, as an agent passes its own
                                   args=["-m", "rmtui", "--headless", "mcp", "--root", str(root)],
                                   env=dict(os.environ))
    return Client(params, read_timeout_seconds=600)


async def warmed(client: Client) -> None:
    """As an agent's session goes: a first call, a few more, then the server's own model loads."""
    first = await client.call_tool("rightmemory_retrieve", {"session_id": "bench-0", "need": "cache invalidation"})
    assert not first.is_error, first
    for i in range(5):  # settle
        await client.call_tool("rightmemory_retrieve", {"session_id": f"settle-{i}", "need": "release budget"})
    await asyncio.sleep(3)  # the server's own model has loaded: warm calls answer in its process


async def timed_call(client: Client, session: str, need: str) -> float:
    t0 = time.perf_counter()
    res = await client.call_tool("rightmemory_retrieve", {"session_id": session, "need": need})
    assert not res.is_error, res
    return time.perf_counter() - t0


async def warm_line(root: Path, calls: int) -> float:
    async with server(root) as client:
        await warmed(client)
        times = [await timed_call(client, f"bench-{i + 1}", need) for i, need in enumerate(warm_needs(calls))]
    times.sort()
    med = statistics.median(times) * 1000
    print(f"warm MCP retrieve over stdio, {calls} calls: median {med:.1f} ms, "
          f"p95 {times[int(len(times) * 0.95) - 1] * 1000:.1f} ms "
          f"(target: median <= {WARM_TARGET_MS:.0f} ms: {verdict(med <= WARM_TARGET_MS)}) {FLOOR}")
    return med


async def side_by_side(root: Path, other: Path, calls: int) -> float:
    """Warm calls to two servers at once, one per root, taking turns (which goes first
    alternates): a machine whose speed drifts from minute to minute slows both alike, where
    two runs minutes apart (``--save`` / ``--baseline``) can differ by a third. The ratio of
    the medians, ``root`` over ``other``."""
    times: dict[Path, list[float]] = {root: [], other: []}
    async with server(root) as a, server(other) as b:
        await asyncio.gather(warmed(a), warmed(b))
        for i, need in enumerate(warm_needs(calls)):
            pair = ((root, a), (other, b))
            for path, client in pair if i % 2 == 0 else pair[::-1]:
                times[path].append(await timed_call(client, f"pair-{i}", need))
    med = {path: 1000 * statistics.median(ts) for path, ts in times.items()}
    ratio = med[root] / med[other]
    print(f"warm MCP retrieve side by side, {calls} calls to each of two servers taking turns: "
          f"{count_nodes(MemoryRoot(root))} nodes {med[root]:.1f} ms, {count_nodes(MemoryRoot(other))} nodes "
          f"{med[other]:.1f} ms = {ratio:.2f}x (target at 50,000 against 10,000 nodes: <= 1.5x: "
          f"{verdict(ratio <= 1.5)}) {FLOOR}")
    return ratio


def runtime_used() -> str:
    """What ``embedding.backend = auto`` picks here: ONNX when the bundled model has an export."""
    from rmtui.engine.retrieval.modelhost import onnx_model
    from rmtui.engine.retrieval.modelhost.model_cache import model_identity
    from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path

    identity = model_identity(resolve_model_path(None, None), "sentence-transformers")
    return "ONNX Runtime" if onnx_model.find_export(identity) else "torch (no ONNX export)"


def main(argv: list[str] | None = None) -> int:
    from _bytecode import as_users_run

    as_users_run()
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=10000, help="a multiple of 2,000 (20 nodes per detail file)")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--root", type=Path, help="a kept bench root with its vectors cached (bench/retrieve_speed.py "
                                              "--keep-root), measured on a copy instead of a root built here")
    ap.add_argument("--warm-only", action="store_true", help="only the floor and the warm retrieve line")
    ap.add_argument("--save", type=Path, help="write the warm and in-process medians as JSON here")
    ap.add_argument("--baseline", type=Path, help="a --save file of another root's run: print the ratios")
    ap.add_argument("--side-by-side", type=Path, metavar="ROOT",
                    help="a second kept root (say 10,000 nodes beside a 50,000-node --root): after the other "
                         "lines, warm calls to a server on each, taking turns, and the ratio of their medians")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RMTUI_SERVICE_DIR"] = str(Path(tmp) / "services")  # the indexing service: ours to stop
        if args.root:
            root = MemoryRoot(Path(shutil.copytree(args.root, Path(tmp) / "root", symlinks=True)))
            os.sync()  # the copy's writeback (600 MB of token states at 50,000 nodes) not during the figures
            print(f"root: a copy of {args.root} ({count_nodes(root)} nodes), vectors cached there")
        else:
            root = init_root(Path(tmp) / "root")
            n = build_root(root.path, files=args.nodes // 20)
            repo = git.Repo(root.path)
            repo.git.add("-A")
            repo.git.commit("-qm", "bench root")
            print(f"root: {n} nodes in {args.nodes // 20} detail files")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rmtui", "--headless", "retrieve-index", "--root", str(root.path)],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"dense index built once, before the server starts: {time.perf_counter() - t0:.0f} s")
        stop_service()
        measure_floor(root.path, args.calls)
        try:
            warm = asyncio.run(run(root.path, args.calls, args.starts, args.warm_only))
            if args.side_by_side:
                other = Path(shutil.copytree(args.side_by_side, Path(tmp) / "other", symlinks=True))
                os.sync()
                asyncio.run(side_by_side(root.path, other, args.calls))
        finally:
            stop_service()
        figures = {"nodes": count_nodes(root), "warm_mcp_ms": warm, "inproc_ms": 1000 * FLOOR.inproc}
        if args.baseline:
            base = json.loads(args.baseline.read_text())
            for key, label in (("warm_mcp_ms", "warm MCP retrieve"), ("inproc_ms", "in-process retrieve")):
                ratio = figures[key] / base[key]
                print(f"{label} vs the baseline's {base['nodes']} nodes: {figures[key]:.1f} ms vs {base[key]:.1f} ms "
                      f"= {ratio:.2f}x (target: <= 1.5x: {verdict(ratio <= 1.5)}) {FLOOR}")
        if args.save:
            args.save.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


def count_nodes(root: MemoryRoot) -> int:
    from rmtui.engine.memory.graph import load_graph

    return sum(1 for i in load_graph(root.path).ordered if i.kind == "node")


if __name__ == "__main__":
    raise SystemExit(main())
