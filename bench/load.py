"""Load bench: agents retrieving and submitting while the Update driver lands batches.

``--agents`` agents (default 8) each loop ``retrieve`` then ``submit`` for ``--minutes``
(default 5): the first ``--mcp-agents`` (default half) through the MCP server over stdio
(the official ``mcp`` client, one server process per agent, as a host runs it), the others
through the headless CLI (a new process per call; retrieval through the local warm
service). Meanwhile a driver runs Update passes (``update run-now`` processes, one after
another) against a scripted fake model provider (``tests/fake_provider.py``) that reads, edits, validates,
adds and commits one new node per batch, so batches land through the supervisor while the
agents read and write.

Prints requests served, errors (target 0), p50/p95 latency per minute for each call kind
(target: p95 in the last minute within 1.5x of the first), batches landed, and evidence
acknowledged vs present in the queue (target: equal).

Usage: .venv/bin/python bench/load.py [--minutes 5] [--agents 8] [--mcp-agents 4] [--batch 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from fake_provider import FakeProvider, Seen, Turn  # noqa: E402
from foundation import WORDS, build_root  # noqa: E402

from rmtui.engine.memory.roots import init_root  # noqa: E402


class Stats:
    """Latencies and outcomes of every call, by kind (``mcp retrieve``, ``cli submit``…)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.lock = threading.Lock()
        self.calls: list[tuple[str, float, float, bool]] = []  # kind, started (s from start), seconds, ok
        self.errors: list[str] = []
        self.acknowledged: set[str] = set()

    def record(self, kind: str, t0: float, seconds: float, ok: bool, error: str | None = None) -> None:
        with self.lock:
            self.calls.append((kind, t0 - self.start, seconds, ok))
            if not ok:
                self.errors.append(f"{kind}: {error}"[:300])


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def need_text(rng) -> str:
    return " ".join(rng.sample(WORDS, 3))


def cli(*args: str, input: bytes | None = None, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmtui", "--headless", *args], input=input, capture_output=True,
                          env=env, timeout=timeout, cwd=str(REPO))


# -- agents ---------------------------------------------------------------------------------

def cli_agent(n: int, root: Path, env: dict, stats: Stats, stop: threading.Event, warm: threading.Barrier) -> None:
    import random

    rng = random.Random(n)
    session = f"agent-{n}"
    cli("retrieve", "--root", str(root), "--session", session, "warm up", env=env)  # not counted
    warm.wait()
    i = 0
    while not stop.is_set():
        i += 1
        t0 = time.monotonic()
        try:
            r = cli("retrieve", "--json", "--root", str(root), "--session", session, need_text(rng), env=env)
            ok, err = r.returncode == 0, r.stderr.decode(errors="replace").strip()[-200:]
        except subprocess.TimeoutExpired:
            ok, err = False, "timeout"
        stats.record("cli retrieve", t0, time.monotonic() - t0, ok, err)
        marker = f"load-{n}-{i}-{uuid.uuid4().hex[:8]}"
        evidence = f"Agent {n} observed {need_text(rng)} during load run ({marker}).\n".encode()
        t0 = time.monotonic()
        try:
            r = cli("submit", "--json", "--root", str(root), "--session", session, "--request", marker, "-",
                    input=evidence, env=env)
            ok = r.returncode == 0 and json.loads(r.stdout)["state"] in ("saved", "duplicate")
            err = r.stderr.decode(errors="replace").strip()[-200:]
        except (subprocess.TimeoutExpired, ValueError, KeyError) as exc:
            ok, err = False, repr(exc)
        stats.record("cli submit", t0, time.monotonic() - t0, ok, err)
        if ok:
            with stats.lock:
                stats.acknowledged.add(marker)


def mcp_agent(n: int, root: Path, env: dict, stats: Stats, stop: threading.Event, warm: threading.Barrier) -> None:
    asyncio.run(_mcp_agent(n, root, env, stats, stop, warm))


async def _mcp_agent(n: int, root: Path, env: dict, stats: Stats, stop: threading.Event,
                     warm: threading.Barrier) -> None:
    import random

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    rng = random.Random(n)
    session = f"agent-{n}"
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "rmtui", "--headless", "mcp", "--root", str(root)],
                                   env=env, cwd=str(REPO))
    async with Client(params, read_timeout_seconds=600) as client:
        first = await client.call_tool("rightmemory_retrieve", {"session_id": session, "need": "warm up"})
        assert not first.is_error, first
        await asyncio.to_thread(warm.wait)
        i = 0
        while not stop.is_set():
            i += 1
            t0 = time.monotonic()
            try:
                res = await client.call_tool("rightmemory_retrieve", {"session_id": session, "need": need_text(rng)})
                ok, err = not res.is_error, str(res.content)[:200]
            except Exception as exc:  # noqa: BLE001 - every failure is counted
                ok, err = False, repr(exc)
            stats.record("mcp retrieve", t0, time.monotonic() - t0, ok, err)
            marker = f"load-{n}-{i}-{uuid.uuid4().hex[:8]}"
            t0 = time.monotonic()
            try:
                res = await client.call_tool("rightmemory_submit_update", {
                    "session_id": session,
                    "evidence": f"Agent {n} observed {need_text(rng)} during load run ({marker})."})
                ok, err = not res.is_error, str(res.content)[:200]
            except Exception as exc:  # noqa: BLE001
                ok, err = False, repr(exc)
            stats.record("mcp submit", t0, time.monotonic() - t0, ok, err)
            if ok:
                with stats.lock:
                    stats.acknowledged.add(marker)


# -- the Update driver and its scripted model --------------------------------------------------

class EndlessScript(list):
    """The fake provider's script, never exhausted: every turn comes from ``step``."""

    def __init__(self, step) -> None:
        super().__init__()
        self.step = step

    def __bool__(self) -> bool:
        return True

    def pop(self, index: int = -1):  # noqa: ARG002
        return self.step


def update_turn(seen: Seen) -> Turn:
    """One Update batch: read, edit (one new node), validate, add, commit, report."""
    stage = sum(1 for m in seen.body.get("messages", []) if m.get("role") == "assistant")
    ident = "load-" + uuid.uuid5(uuid.NAMESPACE_OID, json.dumps(seen.user_texts()[:1])).hex[:12]
    steps = [
        ("read", {"path": "MEMORY.md"}),
        ("edit", {"path": "MEMORY.md", "old_text": "# Memory\n",
                  "new_text": f"# Memory\n\n- `{ident}` A fact the load bench's Update batch recorded → []\n"}),
        ("validate_memory", {}),
        ("git_add", {"paths": ["MEMORY.md"]}),
        ("git_commit", {"message": f"update: {ident}"}),
    ]
    if stage < len(steps):
        return Turn(tool_calls=[steps[stage]])
    return Turn(text=f"Changed: {ident} (new). Skipped: none.")


def driver_loop(root_path: Path, env: dict, stop: threading.Event, outcomes: dict, errors: list,
                durations: list) -> None:
    """Update passes as a host's scheduler would run them: ``update run-now`` processes."""
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            r = cli("update", "run-now", "--json", "--root", str(root_path), env=env, timeout=600)
            out = json.loads(r.stdout) if r.stdout.strip() else {"state": "error", "error": r.stderr.decode()[-300:]}
        except (subprocess.TimeoutExpired, ValueError) as exc:
            out = {"state": "error", "error": repr(exc)}
        state = out.get("state") or out.get("error", "error")
        outcomes[state] = outcomes.get(state, 0) + 1
        if state in ("committed", "no_change"):
            durations.append(time.monotonic() - t0)
        elif state != "idle":
            errors.append(json.dumps({k: out.get(k) for k in ("state", "batch_id", "error", "message")},
                                     default=str)[:300])
        stop.wait(1.0 if state == "idle" else 0.2)


# -- main -------------------------------------------------------------------------------------

def setup(tmp: Path, provider: FakeProvider, env: dict, batch: int) -> Path:
    root = init_root(tmp / "root")
    build_root(root.path, files=100, nodes_per_file=5)
    subprocess.run(["git", "-C", str(root.path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root.path), "commit", "-qm", "load bench root"], check=True, env=env)
    for key, value in (("update.model.model_id", "anthropic:fake-model"),
                       ("update.model.api_base", provider.base("anthropic")),
                       ("update.model.kwargs", "{max_retries = 0}"),
                       ("update.async.target_batch_candidates", str(batch))):
        r = cli("config", "set", "--root", str(root.path), key, value, env=env)
        if r.returncode != 0:
            raise SystemExit(f"config set {key} failed: {r.stderr.decode()}")
    subprocess.run(["git", "-C", str(root.path), "commit", "-qam", "config: fake update model"], env=env,
                   capture_output=True)  # when `config set` left the change in the work tree
    r = cli("retrieve-index", "--root", str(root.path), env=env, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"retrieve-index failed: {r.stderr.decode()}")
    return root.path


def report(stats: Stats, minutes: float, outcomes: dict, driver_errors: list, durations: list, root: Path) -> int:
    from rmtui.engine.evidence.queue import EvidenceQueue
    from rmtui.engine.memory.roots import open_root

    kinds = sorted({c[0] for c in stats.calls})
    served = len(stats.calls)
    failed = sum(1 for c in stats.calls if not c[3])
    by_kind = ", ".join(f"{k} {sum(1 for c in stats.calls if c[0] == k)}" for k in kinds)
    print(f"\nrequests served: {served} ({by_kind})")
    print(f"errors: {failed}" + (" (target 0)" if failed else ""))
    for e in stats.errors[:10]:
        print(f"  {e}")
    n_minutes = max(1, int(minutes + 0.999))
    print("\nlatency per minute, p50 / p95 ms (calls):")
    print("  minute  " + "".join(f"{k:>26}" for k in kinds))
    p95: dict[str, list[float]] = defaultdict(list)
    for m in range(n_minutes):
        row = f"  {m + 1:>6}  "
        for k in kinds:
            xs = [c[2] for c in stats.calls if c[0] == k and m * 60 <= c[1] < (m + 1) * 60]
            if xs:
                p95[k].append(pct(xs, 0.95))
                row += f"{1000 * statistics.median(xs):>9.0f} / {1000 * pct(xs, 0.95):>6.0f} ({len(xs):>4})"
            else:
                row += f"{'-':>26}"
        print(row)
    if n_minutes > 1:
        for k in kinds:
            if len(p95[k]) >= 2:
                ratio = p95[k][-1] / p95[k][0]
                print(f"  {k}: last-minute p95 / first-minute p95 = {ratio:.2f} (target <= 1.5)")
    landed = f"; a landing pass took median {statistics.median(durations):.1f} s" if durations else ""
    print(f"\nUpdate driver passes: {dict(sorted(outcomes.items()))}{landed}")
    for e in driver_errors[:5]:
        print(f"  driver: {e}")
    with EvidenceQueue(open_root(root)) as q:
        stored = q.list()
    present = {m for m in stats.acknowledged if any(m in e.text for e in stored)}
    by_state: dict[str, int] = defaultdict(int)
    for e in stored:
        by_state[e.state] += 1
    markers = [e.text for e in stored]
    dupes = sum(1 for m in stats.acknowledged if sum(m in t for t in markers) > 1)
    print(f"evidence acknowledged: {len(stats.acknowledged)}; present: {len(present)}"
          f" (target equal); stored by state: {dict(sorted(by_state.items()))}; duplicated: {dupes}")
    ok = failed == 0 and not driver_errors and present == stats.acknowledged and dupes == 0
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--mcp-agents", type=int, help="how many agents use MCP (default: half)")
    ap.add_argument("--batch", type=int, default=50, help="evidence per Update batch (default 50)")
    args = ap.parse_args(argv)
    n_mcp = args.agents // 2 if args.mcp_agents is None else args.mcp_agents
    with tempfile.TemporaryDirectory(prefix="rmtui-load-") as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "HOME": str(tmp / "home"), "RMTUI_SERVICE_DIR": str(tmp / "services"),
               "GIT_AUTHOR_NAME": "load", "GIT_AUTHOR_EMAIL": "load@localhost", "GIT_COMMITTER_NAME": "load",
               "GIT_COMMITTER_EMAIL": "load@localhost"}
        (tmp / "home").mkdir()
        os.environ.update({k: env[k] for k in ("HOME", "RMTUI_SERVICE_DIR")})
        provider = FakeProvider()
        provider.script = EndlessScript(update_turn)
        t_setup = time.monotonic()
        root = setup(tmp, provider, env, args.batch)
        print(f"root ready in {time.monotonic() - t_setup:.0f} s: {root}; {args.agents} agents "
              f"({n_mcp} MCP, {args.agents - n_mcp} CLI), {args.minutes:g} min")
        stop, stop_driver = threading.Event(), threading.Event()
        warm = threading.Barrier(args.agents + 1)
        stats = Stats(0.0)
        threads = []
        for n in range(args.agents):
            fn = mcp_agent if n < n_mcp else cli_agent
            threads.append(threading.Thread(target=fn, args=(n, root, env, stats, stop, warm), daemon=True))
        for t in threads:
            t.start()
        warm.wait(timeout=900)  # every agent has made its first (uncounted) call
        outcomes: dict[str, int] = {}
        driver_errors: list[str] = []
        durations: list[float] = []
        driver = threading.Thread(target=driver_loop, args=(root, env, stop_driver, outcomes, driver_errors, durations),
                                  daemon=True)
        stats.start = time.monotonic()
        driver.start()
        deadline = stats.start + args.minutes * 60
        while time.monotonic() < deadline:
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            provider.seen.clear()  # the provider keeps every request otherwise
            done = len(stats.calls)
            print(f"  {time.monotonic() - stats.start:>5.0f} s: {done} calls, {len(stats.errors)} errors, "
                  f"batches {outcomes}", flush=True)
        stop.set()
        for t in threads:
            t.join(timeout=300)
        stop_driver.set()
        driver.join(timeout=300)
        code = report(stats, args.minutes, outcomes, driver_errors, durations, root)
        provider.close()
        from rmtui.engine.retrieval.modelhost.embed_client import stop_local_service

        for state_dir in (tmp / "services").glob("*"):
            stop_local_service(state_dir)
        return code


if __name__ == "__main__":
    raise SystemExit(main())
