"""A team sharing one queue under faults: ``--machines`` clones of one upstream served by a
real ``git daemon`` on loopback, each submitting ``--evidence`` pieces of evidence while it
pulls, pushes and reconciles batches as a host would (`assistant update begin`/`complete`,
no model: a no-change batch still lands its update record).

Faults, all at random (``--seed``): ``sync pull`` and ``sync push`` children are SIGKILLed
mid-way, a machine is SIGKILLed while it holds a lease (and restarted: its disk state stays),
and the upstream goes away for ``--outage`` seconds.

Prints evidence acknowledged (a submit answered ``saved``) against evidence landed (named by
an update record in the upstream's history), duplicates, lost, wedged machines (a machine
whose pull or ``assistant update begin`` still fails once the faults are over), the time to
drain after the last submit, and the queue overhead per batch (begin + complete, median and
p95), with the floor beside it: a bare ``python -c pass`` and rmtui's in-process begin of an
idle queue, measured in the same run. Targets: acknowledged == landed, 0 duplicates, 0 wedged.

Usage: .venv/bin/python bench/team.py [--machines 8] [--evidence 200] [--outage 30] [--batch 15]
       (smaller: --machines 3 --evidence 20 --outage 10)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._git import UPSTREAM, serve_upstream  # noqa: E402
from rmtui.engine.errors import EngineError  # noqa: E402
from rmtui.engine.evidence.queue import EvidenceQueue  # noqa: E402
from rmtui.engine.host import assistant  # noqa: E402
from rmtui.engine.memory.config import set_config_value  # noqa: E402
from rmtui.engine.memory.roots import MemoryRoot, init_root  # noqa: E402

ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@local",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@local", "PYTHONPATH": str(REPO)}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=ENV).stdout


def rmtui(*args: str) -> list[str]:
    return [sys.executable, "-m", "rmtui", "--headless", *args]


def make_machine(tmp: Path, url: str, name: str, args, *, first: bool) -> MemoryRoot:
    path = tmp / name
    if first:
        root = init_root(path)
        git(path, "remote", "add", "origin", url)
        git(path, "push", "-q", "-u", "origin", "main")
    else:
        git(tmp, "clone", "-q", url, str(path))
        root = init_root(path, force=True)
    git(path, "config", "user.name", name)
    git(path, "config", "user.email", f"{name}@local")
    for key, value in (("sync.enabled", True), ("sync.push_after_landing", False),
                       ("sync.lease_seconds", args.lease_seconds), ("sync.fetch_timeout_seconds", 10),
                       ("update.async.target_batch_candidates", args.batch), ("assistant.lease_seconds", 600)):
        set_config_value(root.path, key, value)
    return root


# -- one machine (a worker process) -----------------------------------------------------------------

def log(path: Path, **event) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(event) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def child(argv: list[str], rng: random.Random, kill_p: float, events: Path, what: str) -> None:
    """Run ``argv``; with probability ``kill_p`` SIGKILL it after a random moment."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, start_new_session=True)
    if rng.random() < kill_p:
        try:
            proc.wait(timeout=rng.uniform(0.2, 2.5))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log(events, kind="kill", what=what)
    try:
        _out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        err = b"timed out"
    if proc.returncode not in (0, -signal.SIGKILL) and b"Traceback" in err:
        log(events, kind="traceback", what=what, stderr=err.decode("utf-8", "replace")[-2000:])


def host_turn(root: MemoryRoot, events: Path, *, force: bool, die_p: float, rng: random.Random) -> None:
    """One host Update turn in-process: begin (claims under the shared lease), then complete
    with no edit; may die holding the lease."""
    started = time.perf_counter()
    out = assistant.begin(root, retry=force)
    begun = time.perf_counter()
    if not isinstance(out, assistant.Begun):
        return  # idle: no batch is ready
    if not out.claimed:  # a task left by this machine's earlier life: finish it
        try:
            assistant.complete(root, out.task_id)
        except EngineError:
            assistant.begin(root, retry=True)
        return
    if rng.random() < die_p:
        log(events, kind="kill", what="lease holder")
        os.kill(os.getpid(), signal.SIGKILL)
    assistant.complete(root, out.task_id)
    log(events, kind="batch", begin=begun - started, complete=time.perf_counter() - begun,
        size=len(out.task.candidate_uids) if isinstance(out.task, assistant.UpdateTask) else 0)


def worker(args) -> None:
    root = MemoryRoot(Path(args.root))
    events = Path(args.events)
    rng = random.Random(f"{args.seed}-{root.path.name}-{os.getpid()}")
    acked = sum(1 for line in events.read_text().splitlines() if '"ack"' in line) if events.exists() else 0
    while acked < args.evidence:
        with EvidenceQueue(root) as q:
            for _ in range(min(rng.randint(1, 5), args.evidence - acked)):
                text = f"{root.path.name} fact {acked}: value {rng.randint(0, 10**9)}\n"
                res = q.submit(f"{root.path.name}-s{acked % 3}", text.encode())
                if res["state"] == "saved":
                    log(events, kind="ack", uid=res["uid"])
                    acked += 1
        child(rmtui("sync", "push", "--root", str(root.path)), rng, args.kill_p, events, "push")
        if rng.random() < 0.5:
            child(rmtui("sync", "pull", "--root", str(root.path)), rng, args.kill_p, events, "pull")
        try:
            host_turn(root, events, force=False, die_p=args.die_p, rng=rng)
        except EngineError as exc:  # offline, a lost race, a conflict: the next turn tries again
            log(events, kind="error", message=exc.message[:300], code=exc.exit_code)
        except Exception:  # noqa: BLE001 - a defect: reported as a traceback, the machine goes on
            log(events, kind="traceback", what="host turn", stderr=traceback.format_exc()[-2000:])
    log(events, kind="done")


# -- the run ------------------------------------------------------------------------------------

def landed_uids(bare: Path) -> list[str]:
    out: list[str] = []
    listing = git(bare, "log", "--format=%x00%H", "--diff-filter=A", "--name-only", "main", "--", "update_records")
    for chunk in listing.split("\0")[1:]:
        sha, *paths = [line for line in chunk.splitlines() if line.strip()]
        for rel in paths:
            out += [c["uid"] for c in json.loads(git(bare, "show", f"{sha}:{rel}"))["candidates"]]
    return out


def events_of(tmp: Path, names: list[str]) -> list[dict]:
    out = []
    for n in names:
        p = tmp / f"{n}.events"
        if p.exists():
            out += [dict(json.loads(line), machine=n) for line in p.read_text().splitlines() if line.strip()]
    return out


def spawn(args, tmp: Path, name: str) -> subprocess.Popen:
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", "--root", str(tmp / name),
            "--events", str(tmp / f"{name}.events"), "--evidence", str(args.evidence), "--seed", str(args.seed),
            "--kill-p", str(args.kill_p), "--die-p", str(args.die_p)]
    return subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=open(tmp / f"{name}.stderr", "ab"))


def floor(root: MemoryRoot) -> tuple[float, float]:
    """A bare interpreter start, and rmtui's in-process begin of an idle queue (the network
    round trips it makes to the daemon included)."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare_start = time.perf_counter() - t
    t = time.perf_counter()
    try:
        assistant.begin(root)
    except EngineError:
        return bare_start, float("nan")
    return bare_start, time.perf_counter() - t


def run(args) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="rmtui-team-"))
    served = tmp / "served"
    daemon = serve_upstream(served)
    bare = served / UPSTREAM
    names = [f"m{i}" for i in range(args.machines)]
    roots = [make_machine(tmp, daemon.url, n, args, first=(i == 0)) for i, n in enumerate(names)]
    print(f"{args.machines} machines x {args.evidence} evidence over {daemon.url} (batch {args.batch}, "
          f"lease {args.lease_seconds} s, kill p={args.kill_p}, die-holding p={args.die_p}, outage {args.outage} s)")
    start = time.monotonic()
    procs = {n: spawn(args, tmp, n) for n in names}
    outage_at = start + args.outage_after
    outage_done = None
    restarts = 0
    while True:
        now = time.monotonic()
        if outage_done is None and now >= outage_at and args.outage > 0:
            daemon.stop()
            print(f"  upstream down at {now - start:.0f} s for {args.outage} s")
            time.sleep(args.outage)
            daemon.start()
            outage_done = time.monotonic()
        running = False
        for n, p in procs.items():
            code = p.poll()
            if code is None:
                running = True
            elif code == -signal.SIGKILL:  # died holding a lease: the machine restarts
                procs[n] = spawn(args, tmp, n)
                restarts += 1
                running = True
        if not running:
            break
        time.sleep(0.5)
    if outage_done is None and args.outage > 0:  # the submits finished first: the outage still happens
        daemon.stop()
        time.sleep(args.outage)
        daemon.start()
    submitted_at = time.monotonic()
    events = events_of(tmp, names)
    acked = [e["uid"] for e in events if e["kind"] == "ack"]
    # drain: every machine keeps taking turns (forced batches) until all acknowledged evidence landed
    deadline = submitted_at + args.drain_timeout
    stuck: dict[str, str] = {}
    landed: list[str] = []
    while time.monotonic() < deadline:
        for root in roots:
            try:
                subprocess.run(rmtui("sync", "push", "--root", str(root.path)), env=ENV, capture_output=True,
                               timeout=300)
                host_turn(root, tmp / f"{root.path.name}.events", force=True, die_p=0.0, rng=random.Random(0))
                stuck.pop(root.path.name, None)
            except EngineError as exc:
                stuck[root.path.name] = exc.message[:200]
            except Exception:  # noqa: BLE001 - a defect is shown beside the machine it stopped
                stuck[root.path.name] = traceback.format_exc()[-300:]
        landed = landed_uids(bare)
        if set(acked) <= set(landed):
            break
    drained = time.monotonic() - submitted_at
    wedged = {}
    for root in roots:  # once the faults are over every machine must pull and begin again
        pulled = subprocess.run(rmtui("sync", "pull", "--json", "--root", str(root.path)), env=ENV,
                                capture_output=True, text=True, timeout=300)
        begun = subprocess.run(rmtui("assistant", "update", "begin", "--root", str(root.path)), env=ENV,
                               capture_output=True, text=True, timeout=300)
        if pulled.returncode != 0 or begun.returncode != 0:
            wedged[root.path.name] = (pulled.stderr or begun.stderr).strip()[-200:]
    bare_start, idle_begin = floor(next((r for r in roots if r.path.name not in wedged), roots[0]))
    events = events_of(tmp, names)
    batches = [e["begin"] + e["complete"] for e in events if e["kind"] == "batch"]
    kills: dict[str, int] = {}
    for e in events:
        if e["kind"] == "kill":
            kills[e["what"]] = kills.get(e["what"], 0) + 1
    tracebacks = [e for e in events if e["kind"] == "traceback"]
    daemon.stop()
    counts: dict[str, int] = {}
    for u in landed:
        counts[u] = counts.get(u, 0) + 1
    dupes = sum(1 for c in counts.values() if c > 1)
    lost = sorted(set(acked) - set(landed))
    p95 = statistics.quantiles(batches, n=20)[-1] if len(batches) >= 2 else (batches[0] if batches else 0.0)
    print(f"  wall time {submitted_at - start:.0f} s submitting, kills {kills or 'none'}, "
          f"machine restarts {restarts}")
    print(f"evidence acknowledged {len(acked)}, landed {len(set(landed) & set(acked))} "
          f"(target: equal), duplicates {dupes} (target 0), lost {len(lost)}")
    print(f"wedged machines {len(wedged)} (target 0){': ' + json.dumps(wedged) if wedged else ''}")
    print(f"time to drain after the last submit and the outage: {drained:.1f} s"
          + ("" if not stuck else f" (still failing: {json.dumps(stuck)})"))
    if batches:
        print(f"queue overhead per batch (begin + complete, {len(batches)} batches): median "
              f"{statistics.median(batches):.2f} s, p95 {p95:.2f} s  "
              f"[floor: python -c pass {bare_start:.2f} s; in-process begin of an idle queue {idle_begin:.2f} s]")
    if tracebacks:
        print(f"TRACEBACKS in {len(tracebacks)} children: {tracebacks[0]['stderr'][-400:]}")
    print(f"(work directory {tmp})")
    return 0 if not lost and not dupes and not wedged and not tracebacks else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", type=int, default=8)
    ap.add_argument("--evidence", type=int, default=200, help="per machine")
    ap.add_argument("--batch", type=int, default=15, help="update.async.target_batch_candidates")
    ap.add_argument("--outage", type=float, default=30.0, help="seconds the upstream is down")
    ap.add_argument("--outage-after", type=float, default=20.0, help="seconds into the run")
    ap.add_argument("--lease-seconds", type=float, default=15.0, help="sync.lease_seconds (takeover after a kill)")
    ap.add_argument("--kill-p", type=float, default=0.3, help="chance a pull or push child is SIGKILLed")
    ap.add_argument("--die-p", type=float, default=0.2, help="chance a machine is SIGKILLed holding a lease")
    ap.add_argument("--drain-timeout", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--events", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
