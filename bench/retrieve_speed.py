"""Retrieve speed on a 10,000-node root, through the real CLI (a new process per call).

Prints, each against its target (the "Benchmarks" table of README.md) where it has one:
- first call on a cold machine: no embedding service running, no caches (corpus, BM25,
  vectors); the call starts the local warm service, answers within
  ``embedding.dense_budget_seconds`` and leaves a background indexer embedding the rest;
- time until the whole corpus is embedded (vectors and token states): the bench waits until a
  call reports a complete dense index (coverage 100 %, hybrid mode) before it measures anything
  warm; beside it its floor, the same passages through the bare model alone (ONNX Runtime's
  session, batched as the index build batches them) and the load average;
- warm ``retrieve`` end to end (new CLI process per call, service already running):
  median and p95 over N calls (target: median <= 100 ms); then the thin client against the
  full CLI path, interleaved, beside the floor (``python -c pass`` + the service's own time);
- warm ``retrieve`` on a root with sync on and on one with a Git share's view connected,
  interleaved with the plain root: each median and its ratio to the plain root's (target
  within 1.2x);
- restart to first answer: the warm service stopped (as after its idle exit), vectors
  cached, the first CLI ``retrieve`` until its answer, which must be a full hybrid answer
  (target <= 1.5 s), then the call after it; the runtime the service came up on is named;
- the static first pass (``embedding.first_pass = "static"``, set on the bench root): when every
  passage's static vector is on disk, counted from the first call's start (the vector file's
  time), beside its floor, the bare wordllama embed of the same passages in this process;
- with ``--int8``: the whole index of a copy of the root built by the int8 model
  (``embedding.precision = "int8"``) in this process, beside the bare int8 session's time;
- with ``--compare-torch``: the same service start on torch, and whether the top results of
  the needs are the same through both runtimes;
- re-index after a one-node change: corpus rebuild, BM25 update and re-embedding of
  the changed node, measured in-process on the engine functions the CLI runs (median of
  ``--repeats`` changes), as a new process (indexes from their files) and as a long-lived
  one (from its memory), plus the end-to-end time of the first CLI call after the change.

Every line ends with the floor measured in the same run: a bare ``python -c pass`` and
the in-process retrieve of the same needs (the engine in this process, model loaded here,
as the MCP server runs it), whose stages are printed once (query embedding, BM25, dense,
second stage, rendering, pending evidence). ``--save FILE`` writes the figures as JSON;
``--baseline FILE`` (a 10,000-node run's) prints each warm figure's ratio to it (target
for 50,000 nodes: within 1.5x). ``--reuse-vectors ROOT`` copies the vector and token caches
of an earlier bench root of the same size first (the same seeded texts), so the cold figure
and the index time are not measured: for a shared machine with no hour to spare.

The OS page cache is not dropped (that needs privileges this bench does not assume), so
"cold" means no service process, no model loaded in memory and no rmtui cache files.

``--reindex-only ROOT`` prints only the re-index lines (and the floors), on a copy of a
root kept by ``--keep-root`` (its vectors cached).

``--index-only`` stops after the cold call and the whole-index lines.

Usage: .venv/bin/python bench/retrieve_speed.py [--nodes 10000] [--calls 30] [--restarts 3] [--compare-torch] [--int8]
       [--index-only]
       [--save FILE] [--baseline FILE] [--reuse-vectors ROOT] [--keep-root DIR] [--reindex-only ROOT] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI sets it for every headless command
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402  (after OPENBLAS_NUM_THREADS, which it reads once)

from bench._model import add_model_option, set_setting, use_model  # noqa: E402
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


def bare_python(env: dict, runs: int = 7) -> float:
    """Median seconds of ``python -c pass``: the floor of any new process."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def coarse_agreement(root: MemoryRoot, sampled: int = 100) -> None:
    """On a root large enough for the coarse dense pass of a long-lived process: how often its
    shown top 10 is the exact scan's, and both dense stages, over the bench's needs and needs
    cut from random nodes (interleaved, in this process)."""
    from rmtui.engine.retrieval import coarse
    from rmtui.engine.retrieval.corpus import load_corpus
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend
    from rmtui.engine.retrieval.retrieve import search, warm_up

    backend = InProcessBackend.from_config(root.config())
    warm_up(root, backend)
    cache = VectorCache.open(root.runtime / "cache", backend.info().embedding_model)
    cache.prepare(wait=True)
    if not coarse.worth_it(cache.matrix):
        print(f"coarse dense pass: not used at this size (below {coarse.COARSE_ROWS} vectors) {FLOOR}")
        return
    corpus, cfg, rnd = load_corpus(root.path), root.config(), random.Random(11)
    texts = [e.text for e in corpus.entries]
    needs = NEEDS + [" ".join(rnd.choice(texts).split()[:rnd.randint(3, 8)]) for _ in range(sampled)]
    limit, same = coarse.COARSE_ROWS, 0
    dense: dict[bool, list[float]] = {False: [], True: []}
    try:
        for i, need in enumerate(needs):
            shown = {}
            for use in (True, False) if i % 2 else (False, True):
                coarse.COARSE_ROWS = limit if use else 1 << 62
                out = search(root, need, top=10, corpus=corpus, backend=backend, cfg=cfg)
                shown[use] = [r.index for r in out.ranked]
                dense[use].append(out.stages["dense"])
            same += shown[True] == shown[False]
    finally:
        coarse.COARSE_ROWS = limit
    exact, rough = (1000 * statistics.median(dense[k]) for k in (False, True))
    print(f"coarse dense pass (a long-lived process, from {limit} vectors): shown top 10 the exact scan's "
          f"in {same} of {len(needs)} needs; dense stage {rough:.1f} ms against {exact:.1f} ms exact {FLOOR}")


class Floor:
    """The floors every line prints: a bare interpreter, and the in-process retrieve of the
    same needs (model loaded in this process, caches warm), with its stages."""

    def __init__(self) -> None:
        self.python = 0.0
        self.inproc: float | None = None
        self.stages: dict[str, float] = {}

    def measure(self, root: MemoryRoot, env: dict, calls: int = 20) -> None:
        from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend
        from rmtui.engine.retrieval.retrieve import retrieve, warm_up

        self.python = bare_python(env)
        backend = InProcessBackend.from_config(root.config())
        warm_up(root, backend)  # as the MCP server warms up (and idles until its first call)
        VectorCache.open(root.runtime / "cache", backend.info().embedding_model).prepare(wait=True)
        for i in range(3):
            retrieve(root, f"floor-warm-{i}", NEEDS[i % len(NEEDS)], backend=backend)
        times, stages = [], {}
        for i in range(calls):
            t0 = time.perf_counter()
            out = retrieve(root, f"floor-{i}-{random.random()}", NEEDS[i % len(NEEDS)], backend=backend)
            times.append(time.perf_counter() - t0)
            for k, v in {"corpus snapshot": out.timings["corpus"], **out.timings["stages"]}.items():
                stages.setdefault(k, []).append(v)
        self.inproc = statistics.median(times)
        self.stages = {k: statistics.median(v) for k, v in stages.items()}

    def __str__(self) -> str:
        inproc = f"{1000 * self.inproc:.1f} ms" if self.inproc is not None else "not yet measured"
        return f"[floor: python -c pass {1000 * self.python:.0f} ms; in-process retrieve {inproc}]"


FLOOR = Floor()


def cli(root: Path, session: str, need: str, env: dict) -> tuple[float, dict, str]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "retrieve", "--json", "--root", str(root),
                        "--session", session, need], capture_output=True, text=True, env=env, cwd=str(REPO))
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"retrieve failed ({p.returncode}): {p.stderr}")
    return dt, json.loads(p.stdout), p.stderr


def compare_paths(root: Path, env: dict, calls: int) -> None:
    """Thin client against the full CLI path, interleaved call by call (a loaded machine slows
    all of them alike), with the floors measured in the same loop: a bare interpreter and the
    service's own time for the same query (one HTTP request from this process)."""
    from rmtui.engine.retrieval.modelhost.client_settings import read_settings, settings_digest
    from rmtui.engine.retrieval.modelhost.service_http import JsonHttpClient
    from rmtui.engine.retrieval.modelhost.service_state import RETRIEVE_ROUTE, read_state, service_dir

    rec = read_settings(root, settings_digest(root))
    if rec is None:
        print("thin client: no settings record (no call was delegated): not measured")
        return
    st = read_state(service_dir(Path(rec["model"]), rec["reranker"], rec.get("precision", "float32")))
    client = JsonHttpClient(st["url"], st["token"])
    out: dict[str, list[float]] = {"floor": [], "service": [], "full": [], "thin": []}
    for i in range(calls):
        need = NEEDS[i % len(NEEDS)]
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        out["floor"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        client.request("POST", RETRIEVE_ROUTE, {"root": str(root), "session": f"svc-{i}", "need": need,
                                                "top": None, "include_returned": False})
        out["service"].append(time.perf_counter() - t0)
        for path, flag in (("full", "0"), ("thin", "1")):
            dt, data, err = cli(root, f"{path}-{i}", need,
                                {**env, "RMTUI_THIN_CLIENT": flag, "RMTUI_CLIENT_TRACE": "1"})
            if (path == "thin") != ("thin client answered" in err):
                raise SystemExit(f"the {path} call took the other path: {err}")
            out[path].append(dt)
    client.close()
    med = {k: 1000 * statistics.median(v) for k, v in out.items()}
    floor = med["floor"] + med["service"]
    print(f"warm retrieve by path, {calls} interleaved calls (medians): thin client {med['thin']:.0f} ms, "
          f"full CLI path {med['full']:.0f} ms; floor {floor:.0f} ms = python -c pass {med['floor']:.0f} ms + "
          f"service's own time {med['service']:.0f} ms (target: thin <= floor + 25 ms: "
          f"{verdict(med['thin'] <= floor + 25)}) {FLOOR}")
    FIGURES.update(thin_ms=med["thin"], full_ms=med["full"], thin_floor_ms=floor)


GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@l", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@l"}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def sharing_roots(root: MemoryRoot, tmp: Path) -> dict[str, Path]:
    """Copies of the bench root (caches included) as people who share memory have them: one
    with sync on (a bare upstream over file://, the branch tracking it), one with a Git
    share's file view connected (a small provider root publishes it)."""
    from rmtui.engine.memory.config import set_config_value
    from rmtui.engine.views import consumer, gitshare, provider

    synced = tmp / "sync-root"
    shutil.copytree(root.path, synced, symlinks=True)
    upstream = tmp / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(upstream)], check=True)
    _git(synced, "remote", "add", "origin", upstream.as_uri())
    _git(synced, "push", "-q", "-u", "origin", "main")
    set_config_value(synced, "sync.enabled", True)
    set_config_value(synced, "sync.push_after_landing", False)

    prov = init_root(tmp / "provider")
    (prov.path / "MEMORY.md").write_text("# Memory\n\n## Platform {#platform}\n\n"
                                         "- `deploy-k8s` We deploy with Helm to the prod cluster → []\n")
    _git(prov.path, "add", "-A")
    _git(prov.path, "commit", "-qm", "provider memory")
    provider.create_file_view(prov, "platform", ["platform"], title="Platform")
    built = provider.build(prov, "platform")
    shares = (tmp / "shares.git").as_uri()
    gitshare.publish(prov, built.package, repo_url=shares, view_id="platform", title=built.info.title,
                     description=built.info.description, provider_id="bench")
    viewer = tmp / "view-root"
    shutil.copytree(root.path, viewer, symlinks=True)
    consumer.connect_git(MemoryRoot(viewer), f"{shares}#share=platform")
    return {"sync on": synced, "view connected": viewer}


def compare_sharing(root: MemoryRoot, tmp: Path, env: dict, calls: int) -> None:
    """Warm retrieve on a root with sync on and one with a view connected, interleaved call by
    call with the plain root: each median and its ratio to the plain root's (target within
    1.2x: the pull check and the view refresh run in the background, so these roots take the
    thin client's path like any other)."""
    roots = {"plain": root.path, **sharing_roots(root, tmp)}
    for path in roots.values():  # the first call records the new settings; then warm
        for i in range(3):
            cli(path, f"sharing-warmup-{i}", NEEDS[i % len(NEEDS)], env)
    out: dict[str, list[float]] = {name: [] for name in roots}
    paths: dict[str, set[str]] = {name: set() for name in roots}
    for i in range(calls):
        for name, path in roots.items():
            dt, _, err = cli(path, f"sharing-{i}", NEEDS[i % len(NEEDS)], {**env, "RMTUI_CLIENT_TRACE": "1"})
            out[name].append(dt)
            paths[name].add("thin" if "thin client answered" in err else "full")
    plain = 1000 * statistics.median(out["plain"])
    for name in roots:
        if name == "plain":
            continue
        med = 1000 * statistics.median(out[name])
        ratio = med / plain if plain else float("nan")
        print(f"warm retrieve, root with {name}, {calls} calls interleaved with the plain root: median {med:.0f} ms, "
              f"{ratio:.2f}x the plain root's {plain:.0f} ms (path: {', '.join(sorted(paths[name]))}; target: "
              f"within 1.2x: {verdict(ratio <= 1.2)}) {FLOOR}")
        FIGURES[f"{name.replace(' ', '_')}_ratio"] = ratio


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


WARM_TARGET_MS = 100
RESTART_TARGET_S = 1.5
INPROC_TARGET_MS = 25
REINDEX_TARGET_MS = 300
INDEX_TARGET_S = 30
#: What --save writes and --baseline compares.
FIGURES: dict[str, float] = {}


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def full(out: dict) -> bool:
    """A complete hybrid answer: the model answered and every passage had its vector."""
    return out.get("mode") == "hybrid" and out.get("dense_coverage") == 1.0


def wait_until_indexed(root: MemoryRoot, env: dict, timeout: float) -> tuple[float, dict]:
    """Until a call reports the whole corpus embedded: the background indexer done and the
    service answering. Warm figures are only meaningful after that."""
    from rmtui.engine.locks import try_lock

    t0 = time.time()
    lock = root.runtime / "cache" / "indexer.lock"
    n = 0
    while time.time() - t0 < timeout:
        fd = try_lock(lock)
        if fd is None:  # the indexer is still embedding
            time.sleep(0.5)
            continue
        os.close(fd)
        _, out, _ = cli(root.path, f"index-check-{n}", NEEDS[n % len(NEEDS)], env)
        n += 1
        if full(out):
            return time.time() - t0, out
        time.sleep(0.5)  # e.g. the service was still starting: dense skipped this call
    raise SystemExit(f"the dense index was not complete after {timeout:.0f} s")


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system, every thread) of this process or of ``pid``: on a shared machine
    the wall time of the same work moves with the load, its CPU time much less."""
    if pid is None:
        import resource

        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def service_pid(root: MemoryRoot) -> int | None:
    try:
        return int(json.loads((service_state_dir(root) / "state.json").read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def model_floor(root: MemoryRoot, precision: str = "float32") -> tuple[float, float, int, str]:
    """The whole index's floor: every passage of the root through the bare model alone, as the
    index build batches them (length-sorted, ``CPU_ENCODE_BATCH`` texts a forward pass), with
    no pooling, token states, HTTP or cache writes. ONNX Runtime's session when the model runs
    there (as the service does by default), else sentence-transformers' encode."""
    from rmtui.engine.retrieval.modelhost.device import CPU_ENCODE_BATCH
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend

    cfg = root.config()
    params = params_from_config(cfg)
    index = dense_index(load_corpus(root.path), params)
    texts = sorted({index.part(i) for i in range(len(index.keys))}, key=len)
    embedder = InProcessBackend(cfg.get("embedding.model"), cfg.get("embedding.model_path"),
                                precision=precision).embedder
    session = getattr(embedder, "session", None)
    if session is None:
        t, c = time.perf_counter(), cpu_seconds()
        embedder.encode(texts, "passage")
        return time.perf_counter() - t, cpu_seconds() - c, len(texts), "sentence-transformers encode"
    enc = embedder.tokenizer.encode_batch(texts)
    order = sorted(range(len(enc)), key=lambda i: len(enc[i].ids))
    names = {i.name for i in session.get_inputs()}
    t, c = time.perf_counter(), cpu_seconds()
    for off in range(0, len(order), CPU_ENCODE_BATCH):
        idx = order[off:off + CPU_ENCODE_BATCH]
        width = max(len(enc[i].ids) for i in idx)
        ids = np.zeros((len(idx), width), np.int64)
        mask = np.zeros_like(ids)
        for row, i in enumerate(idx):
            ids[row, :len(enc[i].ids)] = enc[i].ids
            mask[row, :len(enc[i].ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        session.run(None, {k: v for k, v in feed.items() if k in names})
    return (time.perf_counter() - t, cpu_seconds() - c, len(texts),
            f"the bare ONNX session, {CPU_ENCODE_BATCH} texts a pass")


def static_first_pass(root: MemoryRoot) -> None:
    """Turn the static first pass on for the bench root (rmtui.toml), whatever the default."""
    set_setting(root.path, "embedding", "first_pass", "static")


def static_done(root: MemoryRoot, started: float, timeout: float = 120.0) -> float | None:
    """Seconds from ``started`` (wall clock) until every passage had its static vector on disk,
    read off the static vector file's (and its log's) modification time; None if it never did."""
    from rmtui.engine.retrieval.modelhost.static_model import identity

    params = params_from_config(root.config())
    keys = dense_index(load_corpus(root.path), params, root.runtime / "cache").keys
    deadline = time.time() + timeout
    while time.time() < deadline:
        cache = VectorCache.open(root.runtime / "cache", identity())
        if cache.dim and not cache.rows(keys)[1]:
            times = [p.stat().st_mtime for p in (cache.path, cache.log_path) if p.exists()]
            return max(times) - started
        time.sleep(0.2)
    return None


def static_floor(root: MemoryRoot) -> tuple[float, float, float, int]:
    """The static pass's floor: the model's load, then every distinct passage of the root
    through the bare wordllama embed (this process; seconds, CPU seconds, load seconds, passages)."""
    from rmtui.engine.retrieval.modelhost.static_model import StaticEmbedder

    params = params_from_config(root.config())
    index = dense_index(load_corpus(root.path), params)
    texts = sorted({index.part(i) for i in range(len(index.keys))}, key=len)
    t = time.perf_counter()
    model = StaticEmbedder()
    loaded = time.perf_counter() - t
    t, c = time.perf_counter(), cpu_seconds()
    model.embed(texts)
    return time.perf_counter() - t, cpu_seconds() - c, loaded, len(texts)


def service_state_dir(root: MemoryRoot) -> Path:
    from rmtui.engine.retrieval.modelhost.embed_client import service_dir
    from rmtui.engine.retrieval.modelhost.embeddings import resolve_model_path

    cfg = root.config()
    return service_dir(resolve_model_path(cfg.get("embedding.model"), cfg.get("embedding.model_path")),
                       cfg.get("embedding.reranker_path"), str(cfg.get("embedding.precision")))


def runtime_of(state_dir: Path) -> str:
    try:
        return json.loads((state_dir / "state.json").read_text()).get("runtime", "?")
    except (OSError, ValueError):
        return "not running"


def measure_restarts(root: MemoryRoot, env: dict, restarts: int) -> list[float]:
    """Stop the service, then time the first CLI call (which starts it again) until its answer."""
    from rmtui.engine.retrieval.modelhost.embed_client import stop_local_service

    state_dir = service_state_dir(root)
    firsts = []
    for i in range(restarts):
        if not stop_local_service(state_dir):
            raise SystemExit("the warm service did not stop")
        dt, out, _ = cli(root.path, f"restart-{i}", NEEDS[(i + 3) % len(NEEDS)], env)
        runtime = runtime_of(state_dir)
        if not full(out):
            print(f"  restart {i + 1}: {dt:.2f} s but NOT a full answer (mode {out['mode']}, "
                  f"coverage {out['dense_coverage']}, warnings {out.get('warnings')})")
            firsts.append(float("inf"))
            continue
        dt2, out2, _ = cli(root.path, f"restart-next-{i}", NEEDS[(i + 4) % len(NEEDS)], env)
        print(f"  restart {i + 1}: first answer {dt:.2f} s (via {out.get('via')}, service on {runtime}); "
              f"next call {1000 * dt2:.0f} ms (via {out2.get('via')})")
        firsts.append(dt)
    return firsts


def compare_torch(root: MemoryRoot, env: dict, onnx_top: dict[str, list[str]]) -> None:
    """The service started on torch instead: start time, and the top results of the same needs."""
    from rmtui.engine.retrieval.modelhost.embed_client import ensure_local_service, stop_local_service
    from rmtui.engine.retrieval.modelhost.embeddings import resolve_model_path

    state_dir = service_state_dir(root)
    stop_local_service(state_dir)
    cfg = root.config()
    t0 = time.perf_counter()
    ensure_local_service(resolve_model_path(cfg.get("embedding.model"), cfg.get("embedding.model_path")),
                         cfg.get("embedding.reranker_path"), idle_timeout=600, wait_seconds=300, backend="torch")
    print(f"for comparison, the service started on {runtime_of(state_dir)}: ready after "
          f"{time.perf_counter() - t0:.2f} s (ONNX: see the restarts above)")
    same = 0
    for i, need in enumerate(NEEDS):
        _, out, _ = cli(root.path, f"torch-{i}", need, env)
        same += [r["id"] for r in out["results"]] == onnx_top[need]
    print(f"top results, ONNX vs torch query embedding (shared passage vectors): {same}/{len(NEEDS)} needs identical")
    stop_local_service(state_dir)


def reindex_after_change(root: MemoryRoot, env: dict, repeats: int = 5) -> None:
    """One node edited, ``repeats`` times in each of two processes' situations (a new sentence
    each time, so one passage is new): corpus rebuild, BM25 update, dense keys, re-embedding,
    in-process, on the engine functions the CLI runs; medians. "As a new process": the BM25
    index, the dense keys and the unchanged files' parses and segments come from their files
    (the in-process memos cleared); "in a long-lived process" (the warm service, the MCP
    server): from its memory.
    Then the first CLI call after another change."""
    from rmtui.engine.retrieval import corpus as corpus_mod
    from rmtui.engine.retrieval import ranking
    from rmtui.engine.retrieval import retrieve as retrieve_mod

    details = sorted(root.path.glob("MEMORY_*.md"))  # 200 nodes each: a small root has only one
    target = details[len(details) // 2]
    lines = target.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("- `"))
    cfg = root.config()
    params = params_from_config(cfg)
    backend = cli_backend(root, cfg, wait_seconds=120.0)
    cache = VectorCache.open(root.runtime / "cache", backend.info().embedding_model)
    settled = load_corpus(root.path)  # settle: the caches of the root as it is, made by this code
    dense_index(settled, params, root.runtime / "cache")
    load_lexical(settled, params, root.runtime / "cache")
    original = lines[i]
    # a word of this run in every new sentence: a kept root (--reuse-vectors) already holds the
    # vectors of an earlier run's sentences, and a passage found there is not re-embedded
    run = f"run{time.time_ns() % 10**9:09d}"
    for mode in ("new process", "long-lived process"):
        stages: dict[str, list[float]] = {}
        made = embedded = 0
        for r in range(repeats):
            lines[i] = original.replace(" → []", f" Also: rotate the {mode} secret every {r + 2} weeks ({run}). → []")
            target.write_text("\n".join(lines) + "\n")
            if mode == "new process":
                ranking._LEXICAL_MEMO.clear()  # the index comes from its file
                retrieve_mod._DENSE_MEMO.clear()  # the dense keys from theirs
                corpus_mod._REUSE.clear()  # and the unchanged files' parses and segments from theirs
            t0 = time.perf_counter()
            corpus = load_corpus(root.path)
            t1 = time.perf_counter()
            lex = load_lexical(corpus, params, root.runtime / "cache")
            t2 = time.perf_counter()
            index = dense_index(corpus, params, root.runtime / "cache")
            t3 = time.perf_counter()
            embedded = fill_vectors(cache, index, backend, deadline=None)
            t4 = time.perf_counter()
            made = lex.rebuilt
            for k, v in (("total", t4 - t0), ("corpus", t1 - t0), ("bm25", t2 - t1), ("dense", t3 - t2),
                         ("embed", t4 - t3)):
                stages.setdefault(k, []).append(1000 * v)
        med = {k: statistics.median(v) for k, v in stages.items()}
        FIGURES["reindex_ms" if mode == "new process" else "reindex_warm_ms"] = med["total"]
        print(f"re-index after a one-node change, as a {mode}, median of {repeats}: {med['total']:.0f} ms "
              f"(corpus rebuild {med['corpus']:.0f} ms, BM25 update {med['bm25']:.0f} ms with {made} passages and "
              f"windows re-tokenised, dense keys {med['dense']:.0f} ms, {embedded} passage re-embedded "
              f"{med['embed']:.0f} ms; totals {', '.join(f'{t:.0f}' for t in stages['total'])} ms) "
              f"(target: <= {REINDEX_TARGET_MS} ms: {verdict(med['total'] <= REINDEX_TARGET_MS)}) {FLOOR}")
    lines[i] = original.replace(" → []", f" Also: rotate the staging secret monthly ({run}). → []")
    target.write_text("\n".join(lines) + "\n")
    dt, out, _ = cli(root.path, "after-change", "rotate the staging secret monthly", env)
    print(f"first CLI call after another one-node change (re-index included): {1000 * dt:.0f} ms; "
          f"top result {out['results'][0]['id'] if out['results'] else None} {FLOOR}")


def reindex_only(src: Path, repeats: int) -> None:
    """The re-index lines alone, on a copy of a kept bench root, with the floors beside them."""
    from rmtui.engine.retrieval.modelhost.embed_client import stop_local_service

    with tempfile.TemporaryDirectory(prefix="rmtui-reindex-") as tmp:
        dest = Path(tmp) / "root"
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("*.lock", "warm-client.json"))
        root = MemoryRoot(dest)
        env = {**os.environ, "RMTUI_SERVICE_DIR": str(Path(tmp) / "services")}
        os.environ["RMTUI_SERVICE_DIR"] = env["RMTUI_SERVICE_DIR"]
        FLOOR.measure(root, env)
        try:
            reindex_after_change(root, env, repeats)
        finally:
            stop_local_service(service_state_dir(root))


def reuse_vectors(src: Path, root: MemoryRoot) -> None:
    for name in ("vectors", "tokens"):
        if (src / ".runtime" / "cache" / name).is_dir():
            shutil.copytree(src / ".runtime" / "cache" / name, root.runtime / "cache" / name, dirs_exist_ok=True)
    os.sync()  # the copy's writeback (600 MB of token states at 50,000 nodes) not during the figures


def int8_index(root: MemoryRoot, tmp: Path) -> None:
    """``--int8``: the whole index of a copy of the root with no caches, built in this process by
    the int8 model (``embedding.precision = "int8"``), beside its floor (the bare int8 session)."""
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend
    from rmtui.engine.retrieval.retrieve import index_root

    copy = tmp / "int8-root"
    shutil.copytree(root.path, copy, symlinks=True, ignore=shutil.ignore_patterns("cache"))  # no vectors
    backend = InProcessBackend(precision="int8")
    load = os.getloadavg()[0]
    t, c = time.monotonic(), cpu_seconds()
    out = index_root(MemoryRoot(copy), backend)
    dt, dc = time.monotonic() - t, cpu_seconds() - c
    floor_s, floor_c, passages, how = model_floor(MemoryRoot(copy), "int8")
    FIGURES.update(int8_index_s=dt, int8_index_cpu_s=dc, int8_index_floor_s=floor_s, int8_index_floor_cpu_s=floor_c)
    print(f"whole index with embedding.precision = \"int8\", in process: {out.get('indexed')} passages, vectors and "
          f"token states, in {dt:.1f} s, {dc:.1f} CPU s (target: <= {INDEX_TARGET_S} s: "
          f"{verdict(dt <= INDEX_TARGET_S)}); "
          f"floor: the same {passages} passages through {how} of the int8 model {floor_s:.1f} s, {floor_c:.1f} CPU s "
          f"(load average {load:.1f} before, {os.getloadavg()[0]:.1f} after) {FLOOR}")


def gpu_index(root: MemoryRoot, tmp: Path) -> None:
    """The whole index (vectors and token states) of a copy of the root with no caches, built in
    process on the GPU ``embedding.device = "auto"`` finds; a line saying so when there is none."""
    from rmtui.engine.retrieval.modelhost import device as devices

    dev = devices.resolve_device("auto")
    if not devices.is_gpu(dev):
        print("GPU: none here (embedding.device = \"auto\" runs on the CPU): no GPU line")
        return
    import torch

    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend
    from rmtui.engine.retrieval.retrieve import index_root

    copy = tmp / "gpu-root"
    shutil.copytree(root.path, copy, symlinks=True, ignore=shutil.ignore_patterns("cache"))  # no vectors
    t = time.monotonic()
    backend = InProcessBackend(device=dev, backend="torch")
    loaded = time.monotonic() - t
    t = time.monotonic()
    out = index_root(MemoryRoot(copy), backend)
    dt = time.monotonic() - t
    FIGURES["gpu_index_s"] = dt
    print(f"whole index on the GPU ({dev}: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}): "
          f"{out.get('indexed')} passages of {out.get('entries')} entries, vectors and token states, in {dt:.1f} s "
          f"(model load {loaded:.1f} s before it) {FLOOR}")


def compare_baseline(path: Path) -> None:
    base = json.loads(path.read_text())
    for key, label in (("warm_cli_ms", "warm CLI retrieve"), ("thin_ms", "warm thin client"),
                       ("inproc_ms", "in-process retrieve")):
        if key in base and key in FIGURES:
            ratio = FIGURES[key] / base[key]
            print(f"{label} vs the baseline's {base.get('nodes')} nodes: {FIGURES[key]:.1f} ms vs {base[key]:.1f} ms "
                  f"= {ratio:.2f}x (target: <= 1.5x: {verdict(ratio <= 1.5)}) {FLOOR}")


def main() -> None:
    from _bytecode import as_users_run

    as_users_run()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--index-timeout", type=float, default=3600)
    ap.add_argument("--compare-torch", action="store_true", help="also start the service on torch")
    ap.add_argument("--int8", action="store_true", help="also build the whole index with the int8 model")
    ap.add_argument("--index-only", action="store_true", help="stop after the cold call and the whole-index lines")
    ap.add_argument("--save", type=Path, help="write the figures as JSON here")
    ap.add_argument("--baseline", type=Path, help="a --save file of another run: print the ratios")
    ap.add_argument("--reuse-vectors", type=Path, help="copy vector/token caches of this earlier bench root")
    ap.add_argument("--keep-root", type=Path, help="copy the bench root here at the end (for --reuse-vectors)")
    ap.add_argument("--reindex-only", type=Path, metavar="ROOT",
                    help="only the re-index lines, on a copy of this kept bench root (vectors cached)")
    ap.add_argument("--repeats", type=int, default=5, help="one-node changes the re-index median is taken over")
    add_model_option(ap)
    args = ap.parse_args()
    if args.reindex_only:
        reindex_only(args.reindex_only, args.repeats)
        return
    with tempfile.TemporaryDirectory(prefix="rmtui-speed-") as tmp:
        tmp = Path(tmp)
        t = time.time()
        root = build_root(tmp / "root", args.nodes)
        print(f"root: {args.nodes} nodes built in {time.time() - t:.1f} s")
        env = {**os.environ, "RMTUI_SERVICE_DIR": str(tmp / "services")}
        os.environ["RMTUI_SERVICE_DIR"] = env["RMTUI_SERVICE_DIR"]
        FIGURES["nodes"] = args.nodes
        FLOOR.python = bare_python(env)
        if args.reuse_vectors:
            reuse_vectors(args.reuse_vectors, root)
            print(f"vectors and token states copied from {args.reuse_vectors}: cold call and index time not measured")

        use_model(root.path, args.model)
        static_first_pass(root)
        started = time.time()
        dt, out, err = cli(root.path, "cold", NEEDS[0], env)
        cov = out["dense_coverage"]
        print(f"first call, cold (no service, no caches{'' if not args.reuse_vectors else ' but vectors'}): "
              f"{dt:.2f} s; mode {out['mode']}, dense coverage {0 if cov is None else cov:.0%} of passages "
              f"(budget embedding.dense_budget_seconds = {root.config().get('embedding.dense_budget_seconds')})"
              f"{'; the rest ranked by the static first pass' if any('static' in w for w in out['warnings']) else ''}"
              f" {FLOOR}")
        static_at = static_done(root, started) if not args.reuse_vectors else None
        load, pid = os.getloadavg()[0], service_pid(root)
        served = cpu_seconds(pid) if pid else float("nan")
        waited, _ = wait_until_indexed(root, env, args.index_timeout)
        served = cpu_seconds(pid) - served if pid else float("nan")
        runtime = runtime_of(service_state_dir(root))
        if not args.reuse_vectors:
            floor_s, floor_c, passages, how = model_floor(root)
            left = (1.0 - (cov or 0.0)) * passages  # what the first call embedded is not the index's work
            FIGURES.update(index_s=waited, index_service_cpu_s=served, index_floor_s=floor_s, index_floor_cpu_s=floor_c)
            print(f"dense index complete (a call answered hybrid with 100 % coverage) {waited:.1f} s after the first "
                  f"call, vectors and token states (target: <= {INDEX_TARGET_S} s: "
                  f"{verdict(waited <= INDEX_TARGET_S)}), the service's CPU over it {served:.1f} s for the "
                  f"{left:.0f} passages the first call left ({1000 * served / max(left, 1):.1f} ms each); "
                  f"service on {runtime}; floor: all {passages} passages through {how} {floor_s:.1f} s, "
                  f"{floor_c:.1f} CPU s ({1000 * floor_c / max(passages, 1):.1f} ms each) "
                  f"(load average {load:.1f} at the first call, {os.getloadavg()[0]:.1f} now, "
                  f"{os.cpu_count()} CPUs) {FLOOR}")
            static_s, static_c, loaded, passages = static_floor(root)
            FIGURES.update(static_s=static_at if static_at is not None else float("nan"), static_floor_s=static_s,
                           static_floor_cpu_s=static_c, static_load_s=loaded)
            print(f"static first pass complete {'never' if static_at is None else f'{static_at:.1f} s'} after the "
                  f"first call (every passage's wordllama vector on disk, counted from the call's start: the call "
                  f"waits for the local service, then embeds them all before the model's share); floor: the bare "
                  f"wordllama embed of the same {passages} passages {static_s:.2f} s, {static_c:.2f} CPU s, after "
                  f"loading the model in {loaded:.2f} s (load average {load:.1f} at the first call) {FLOOR}")
        else:
            print(f"dense index complete (a call answered hybrid with 100 % coverage) {waited:.1f} s after the first "
                  f"call; service on {runtime} {FLOOR}")
        if not args.reuse_vectors:
            gpu_index(root, tmp)
            if args.int8:
                int8_index(root, tmp)
        if args.index_only:
            from rmtui.engine.retrieval.modelhost.embed_client import stop_local_service

            stop_local_service(service_state_dir(root))
            if args.save:
                args.save.write_text(json.dumps(FIGURES, indent=1) + "\n")
            return

        FLOOR.measure(root, env)
        FIGURES["inproc_ms"] = 1000 * (FLOOR.inproc or 0.0)
        FIGURES["python_ms"] = 1000 * FLOOR.python
        print("in-process retrieve (the MCP server's path), stage medians: "
              + ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in FLOOR.stages.items())
              + f"; total {1000 * (FLOOR.inproc or 0):.1f} ms (target: <= {INPROC_TARGET_MS} ms: "
              f"{verdict(1000 * (FLOOR.inproc or 0) <= INPROC_TARGET_MS)}) {FLOOR}")

        coarse_agreement(root)

        for i in range(3):  # settle the page cache and the service's first requests
            cli(root.path, f"warmup-{i}", NEEDS[i % len(NEEDS)], env)
        times, partial = [], 0
        top: dict[str, list[str]] = {}
        for i in range(args.calls):
            dt, out, _ = cli(root.path, f"warm-{i}", NEEDS[i % len(NEEDS)], env)
            partial += not full(out)
            top.setdefault(NEEDS[i % len(NEEDS)], [r["id"] for r in out["results"]])
            times.append(dt)
        med = 1000 * statistics.median(times)
        FIGURES["warm_cli_ms"] = med
        print(f"warm retrieve, new CLI process per call, {args.calls} calls: median {med:.0f} ms, "
              f"p95 {1000 * pct(times, 0.95):.0f} ms, min {1000 * min(times):.0f} ms "
              f"(target: median <= {WARM_TARGET_MS} ms: {verdict(med <= WARM_TARGET_MS)})"
              + (f"; {partial} calls were not full hybrid answers" if partial else "") + f" {FLOOR}")

        compare_paths(root.path, env, max(5, args.calls // 2))
        compare_sharing(root, tmp, env, max(5, args.calls // 2))

        print(f"restart to first answer (service stopped, vectors cached), {args.restarts} restarts:")
        firsts = measure_restarts(root, env, args.restarts)
        med_r = statistics.median(firsts)
        print(f"restart to first answer: median {med_r:.2f} s, worst {max(firsts):.2f} s "
              f"(target: every restart <= {RESTART_TARGET_S} s: {verdict(max(firsts) <= RESTART_TARGET_S)}) {FLOOR}")
        if args.compare_torch:
            compare_torch(root, env, top)

        reindex_after_change(root, env, args.repeats)
        if args.baseline:
            compare_baseline(args.baseline)
        if args.save:
            args.save.write_text(json.dumps(FIGURES, indent=1) + "\n")
        from rmtui.engine.retrieval.modelhost.embed_client import stop_local_service

        stop_local_service(service_state_dir(root))
        if args.keep_root:
            shutil.copytree(root.path, args.keep_root, dirs_exist_ok=True, symlinks=True, copy_function=_copy_present)


def _copy_present(src: str, dst: str) -> None:
    """Copy a file of the kept root unless it went away meanwhile: SQLite removes its ``-wal``
    and ``-shm`` files when the last connection (a process still finishing) closes, after it
    wrote their pages into the database itself."""
    try:
        shutil.copy2(src, dst)
    except FileNotFoundError:
        if os.path.lexists(src):
            raise


if __name__ == "__main__":
    main()
