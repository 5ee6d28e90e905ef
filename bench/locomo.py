"""LoCoMo evidence recall through rmtui's own retrieval.

Data: the LoCoMo conversations as ``conv-<n>.json`` files (each with ``conversation`` and
``qa``), in the folder given by ``--data``; without it the bench looks in ``shared/bench/locomo``
beside the checkout (where the team keeps its copy), so a fresh clone passes ``--data``.

For each conversation a memory root is built in the reference layout
(MEMORY.md with one F# heading per session, one node per turn in MEMORY_c<conv>-s<N>.md,
PURSUITS.md with an empty Focus). Every category 1-4 question is then asked:

- recall: through ``rmtui.engine.retrieval.retrieve.retrieve`` -- the function the headless
  ``retrieve --json --top 10`` command calls -- with the same model host the CLI uses
  (the local warm embedding service, over HTTP), one fresh session per question;
- BM25-only and dense-only: the same engine search with one signal switched off, same run;
- latency: the real CLI (``python -m rmtui --headless retrieve --json --top 10``, a new
  process per call, service already warm) on a sample of the questions, and its results
  are checked against the in-process ranking.

With several ``--formats`` (default: all of ``FORMATS``), the first layout gets the full table
and every layout its held-out line, default vs the learned second stage off, then how far apart
the layouts' held-out R@10 are, with a paired bootstrap interval over the questions, and the
held-out figures per layout and category.

``--compare-weights FILE|REV`` also ranks every question with an earlier fit of the second stage
(a weights file, or the weights of a Git revision, ``bench/_weights.py``) and prints it beside
today's in the held-out tables: one run, the same roots and vectors. ``--held-out-only`` builds and
asks only the held-out conversations (the figures that decide; the development ones are for fitting).
Every root is embedded in full (vectors and token states) before its first question.

``--cold 0,0.08`` instead asks the development conversations' questions (with ``--held-out-only``
the held-out ones) as a new root's first answers see them (bench/_cold.py): the model's index
holding only that share of the passages, with ``embedding.first_pass`` off and ``static``; R@5 /
R@10 per layout and share.

Usage: .venv/bin/python bench/locomo.py [--data DIR] [--sample N] [--explore] [--formats first,inside,...]
       [--compare-weights FILE|REV] [--held-out-only] [--cold FRACTIONS]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._git import commit_all  # noqa: E402
from bench._index import index_fully  # noqa: E402
from bench._model import add_model_option, check_model_option, use_model  # noqa: E402
from bench._weights import Fit, add_compare_option, compared_fit, using  # noqa: E402
from rmtui.engine.memory.roots import MemoryRoot, init_root  # noqa: E402
from rmtui.engine.retrieval.corpus import load_corpus  # noqa: E402
from rmtui.engine.retrieval.ranking import RankParams  # noqa: E402
from rmtui.engine.retrieval.retrieve import cli_backend, params_from_config, retrieve, search  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "bench" / "locomo"
KS = (1, 5, 10)
#: LoCoMo category numbers, as the LoCoMo data numbers them; printed in this order.
CATEGORIES = {4: "single-hop", 1: "multi-hop", 2: "temporal", 3: "open-domain"}
#: The ranking defaults were chosen on the other conversations; these were held out.
HELD_OUT = ("conv-42", "conv-43")
#: How a turn's speaker is written into memory. Real notes rarely start with a label, so the
#: second stage is fitted and scored on every layout: the label first (the reference layout's
#: layout), the speaker inside the sentence, the speaker last, and the speaker only in a
#: heading over each run of turns.
FORMATS = ("first", "inside", "last", "heading")


def turn_text(speaker: str, text: str, fmt: str) -> str:
    """One turn as node prose in the layout ``fmt`` (see :data:`FORMATS`)."""
    if fmt == "first":
        return f"{speaker}: {text}"
    if fmt == "inside":
        return f"{speaker} said that {text}"
    if fmt == "last":
        return f"{text} ({speaker})"
    if fmt == "heading":
        return text
    raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


def conv_name(path: Path) -> str:
    return path.stem.replace("conv-", "")


def build_root(conv_file: Path, dest: Path, fmt: str = "first", model: str | None = None) -> MemoryRoot:
    """The memory root of one conversation, in the reference layout (``fmt``: where the
    speaker goes, :data:`FORMATS`), embedded with ``model`` (None: the default)."""
    data = json.loads(conv_file.read_text())
    conv = data.get("conversation", data)
    c = conv_name(conv_file)
    keep = None
    if dest.exists():  # rebuild, keeping the derived caches (vectors) of an earlier run
        import shutil

        cache = dest / ".runtime" / "cache"
        if cache.is_dir():
            keep = dest.parent / f".{dest.name}.cache"
            shutil.rmtree(keep, ignore_errors=True)
            cache.rename(keep)
        shutil.rmtree(dest)
    root = init_root(dest)
    if keep is not None:
        keep.rename(root.runtime / "cache")
    memory = [f"# LoCoMo conversation {c} {{#conv-{c}}}", ""]
    sessions = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    for n in sessions:
        turns = conv.get(f"session_{n}") or []
        if not turns:
            continue
        when = conv.get(f"session_{n}_date_time", "")
        memory += [f"## Session {n} — {when} {{F#c{c}-s{n}}}", ""]
        lines: list[str] = []
        speaker = None
        for t in turns:
            d, k = t["dia_id"].strip().lstrip("D").split(":")
            text = " ".join(str(t.get("text", "")).split())
            cap = t.get("blip_caption")
            img = f" [image: {' '.join(str(cap).split())}]" if cap else ""
            if fmt == "heading" and t["speaker"] != speaker:
                lines += ([""] if lines else []) + [f"# {t['speaker']} {{#c{c}-D{d}-{k}-by}}", ""]
            speaker = t["speaker"]
            lines.append(f"- `c{c}-D{d}-{k}` {turn_text(t['speaker'], text + img, fmt)} → []")
        (dest / f"MEMORY_c{c}-s{n}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (dest / "MEMORY.md").write_text("\n".join(memory), encoding="utf-8")
    (dest / "PURSUITS.md").write_text("# Pursuits\n\n## Focus\n", encoding="utf-8")
    use_model(dest, model)
    commit_all(dest, f"locomo conversation {c}")
    return root


def questions(conv_file: Path) -> list[dict]:
    data = json.loads(conv_file.read_text())
    c = conv_name(conv_file)
    out = []
    for q in data["qa"]:
        if q.get("category") not in (1, 2, 3, 4):
            continue
        ev = []
        for e in q.get("evidence", []):
            for part in re.split(r"[;,\s]+", str(e)):
                m = re.fullmatch(r"D(\d+):(\d+)", part.strip())
                if m:
                    ev.append(f"c{c}-D{m.group(1)}-{m.group(2)}")
        if ev:
            out.append({"q": q["question"], "evidence": sorted(set(ev)), "category": q["category"]})
    return out


def recall(ranked_ids: list[str], evidence: list[str], k: int) -> float:
    top = set(ranked_ids[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def summarize(rows: list[dict], key: str) -> dict:
    return {f"R@{k}": statistics.fmean(recall(r[key], r["evidence"], k) for r in rows) for k in KS}


def run(data_dir: Path, work: Path, sample: int, explore: bool, formats: tuple[str, ...] = ("first",),
        fit: Fit | None = None, held_only: bool = False, model: str | None = None) -> None:
    """The recall table for the first layout of ``formats`` (and latency, the design table), then
    the held-out figure of every layout in ``formats`` (beside ``fit``'s, when given), every root
    embedded with ``model`` (None: the default)."""
    layout_rows = {}
    for n, fmt in enumerate(formats):
        if n == 0:
            layout_rows[fmt] = run_layout(data_dir, work / fmt, sample, explore, fmt, fit=fit, held_only=held_only,
                                          model=model)
        else:
            print(f"\nlayout {fmt!r}: the same conversations with the speaker {LAYOUTS[fmt]}")
            layout_rows[fmt] = run_layout(data_dir, work / fmt, 0, False, fmt, quiet=True, fit=fit,
                                          held_only=held_only, model=model)
    print_layouts(layout_rows, fit)
    print_categories(layout_rows, fit)


#: How each layout writes the speaker (for the printed tables).
LAYOUTS = {"first": "as a lead label (`Ana: ...`)", "inside": "inside the sentence (`Ana said that ...`)",
           "last": "last (`... (Ana)`)", "heading": "only in a heading over each run of turns"}


def rankings(fit: Fit | None) -> list[tuple[str, str]]:
    """(row key, column name) of each ranking the held-out tables print, ``fit``'s beside today's."""
    return [("hybrid", "default"), *([("previous", fit.label)] if fit else []), ("first", "learned off")]


def print_layouts(layout_rows: dict[str, list[dict]], fit: Fit | None = None) -> None:
    """Held-out R@1/R@5/R@10 of each layout: today's fit, ``fit`` (an earlier one, when given) and
    the learned second stage off, then all layouts together."""
    shown = rankings(fit)
    print(f"\nheld out ({', '.join(HELD_OUT)}), per layout of the speaker (R@1 / R@5 / R@10):")
    print(f"| layout | questions | {' | '.join(name for _, name in shown)} |\n|---|---|{'---|' * len(shown)}")
    every = [r for rows in layout_rows.values() for r in rows if r["conv"] in HELD_OUT]
    for fmt, held in [*((fmt, [r for r in rows if r["conv"] in HELD_OUT]) for fmt, rows in layout_rows.items()),
                      ("all layouts", every)]:
        cells = []
        for key, _ in shown:
            s = summarize(held, key) if held else {f"R@{k}": 0.0 for k in KS}
            cells.append(" / ".join(f"{s[f'R@{k}']:.3f}" for k in KS))
        print(f"| {fmt}{': ' + LAYOUTS[fmt] if fmt in LAYOUTS else ''} | {len(held)} | {' | '.join(cells)} |")
    if len(layout_rows) > 1:
        for key, name in shown:
            spread, low, high = spread_interval(layout_rows, key)
            print(f"{name}: R@10 spread over the layouts {spread:.3f} (95 % interval of a paired bootstrap "
                  f"over the held-out questions: {low:.3f} to {high:.3f})")


def print_categories(layout_rows: dict[str, list[dict]], fit: Fit | None = None) -> None:
    """Held-out R@5/R@10 per LoCoMo category, every layout together, for each ranking."""
    every = [r for rows in layout_rows.values() for r in rows if r["conv"] in HELD_OUT]
    cats = [(name, [r for r in every if r["category"] == c]) for c, name in CATEGORIES.items()]
    print(f"\nheld out, per category (every layout together; R@5 / R@10):\n"
          f"| ranking | {' | '.join(f'{name} ({len(sub)})' for name, sub in cats)} |\n|---|{'---|' * len(cats)}")
    for key, name in rankings(fit):
        cells = []
        for _, sub in cats:
            s = summarize(sub, key) if sub else {f"R@{k}": 0.0 for k in KS}
            cells.append(f"{s['R@5']:.3f} / {s['R@10']:.3f}")
        print(f"| {name} | {' | '.join(cells)} |")


def spread_interval(layout_rows: dict[str, list[dict]], key: str, k: int = 10, draws: int = 2000,
                    seed: int = 0) -> tuple[float, float, float]:
    """The held-out R@k spread over the layouts (best minus worst) and its 95 % bootstrap interval.

    Why: the layouts ask the same questions, so how far apart they are is known only as well as
    the question sample allows; the questions are drawn again with replacement, the same draw for
    every layout (paired), and the spread recomputed on each draw."""
    import numpy as np

    per = np.array([[recall(r[key], r["evidence"], k) for r in rows if r["conv"] in HELD_OUT]
                    for rows in layout_rows.values()])
    spread = float(np.ptp(per.mean(axis=1)))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, per.shape[1], size=(draws, per.shape[1]))
    spreads = np.ptp(per[:, picks].mean(axis=2), axis=0)
    low, high = np.percentile(spreads, [2.5, 97.5])
    return spread, float(low), float(high)


def run_layout(data_dir: Path, work: Path, sample: int, explore: bool, fmt: str, quiet: bool = False,
               fit: Fit | None = None, held_only: bool = False, model: str | None = None) -> list[dict]:
    files = sorted(f for f in data_dir.glob("conv-*.json") if not held_only or f.stem in HELD_OUT)
    if not files:
        sys.exit(f"no LoCoMo files in {data_dir}")
    print(f"LoCoMo: {len(files)} conversations from {data_dir}")
    rows: list[dict] = []
    roots = []
    t_build = time.time()
    for f in files:
        root = build_root(f, work / f.stem, fmt, model)
        with open(os.devnull, "w"):
            load_corpus(root.path)
        roots.append((f, root))
    print(f"built {len(roots)} roots in {time.time() - t_build:.1f} s")
    backend = None
    for f, root in roots:
        cfg = root.config()
        if backend is None:
            t = time.time()
            backend = cli_backend(root, cfg, wait_seconds=180.0)
            print(f"embedding service: {backend.url} ({backend.info().embedding_model}), "
                  f"ready in {time.time() - t:.1f} s")
        qs = questions(f)
        corpus = load_corpus(root.path)
        took = index_fully(root, corpus, backend, cfg)  # what the background indexer does after a first call
        print(f"  {f.stem}: {len(corpus.entries)} entries, {len(qs)} questions, fully indexed in {took:.1f} s "
              "before the first question")
        base = params_from_config(cfg)
        lex_p = RankParams(**{**base.__dict__, "lexical_only": True})
        den_p = RankParams(**{**base.__dict__, "dense_only": True})
        first_p = RankParams(**{**base.__dict__, "learned": False})
        # a model host without rmtui's token route (a foreign RightMemory service): no MaxSim
        vectors_only = SimpleNamespace(info=backend.info, embed=backend.embed, rerank=backend.rerank)
        for i, q in enumerate(qs):
            t0 = time.perf_counter()
            res = retrieve(root, f"bench-{f.stem}-{i}", q["q"], top=10, backend=backend, record=False)
            dt = time.perf_counter() - t0
            first = search(root, q["q"], top=10, corpus=corpus, backend=backend, cfg=cfg, params=first_p)
            row = {**q, "conv": f.stem, "root": root, "engine_s": dt, "hybrid": [r["id"] for r in res.results],
                   "first": [corpus.entries[r.index].id for r in first.ranked]}
            if fit is not None:
                with using(fit):
                    prev = search(root, q["q"], top=10, corpus=corpus, backend=backend, cfg=cfg)
                row["previous"] = [corpus.entries[r.index].id for r in prev.ranked]
            if not quiet:
                lex = search(root, q["q"], top=10, corpus=corpus, backend=None, cfg=cfg, params=lex_p)
                den = search(root, q["q"], top=10, corpus=corpus, backend=backend, cfg=cfg, params=den_p)
                plain = search(root, q["q"], top=10, corpus=corpus, backend=vectors_only, cfg=cfg)
                row.update(bm25=[corpus.entries[r.index].id for r in lex.ranked],
                           dense=[corpus.entries[r.index].id for r in den.ranked],
                           plain=[corpus.entries[r.index].id for r in plain.ranked])
            rows.append(row)
    if quiet:
        return rows
    n = len(rows)
    print(f"\n{n} questions (categories 1-4). How measured: recall through "
          "rmtui.engine.retrieval.retrieve.retrieve(), the "
          "function behind `rmtui --headless retrieve --json --top 10`, with the same local warm embedding "
          "service over HTTP, one fresh session per question (delivery history not recorded); the same search "
          "through a host without token states (the second stage's plain weights), first-stage-only, "
          "BM25-only and dense-only are the same engine search with the learned re-order or the other signal "
          "switched off, in the same run (the learned weights were fitted on the development conversations by "
          "bench/fit_stage2.py); latency "
          "of the real CLI on a sample below.")
    print_table(rows)
    held = [r for r in rows if r["conv"] in HELD_OUT]
    if held and len(held) < n:
        print(f"\nheld out ({', '.join(HELD_OUT)}: {len(held)} questions; the ranking defaults were chosen on the "
              "other conversations):")
        print_table(held)
    eng = sorted(r["engine_s"] for r in rows)
    print(f"engine retrieve() in-process: median {1000 * statistics.median(eng):.0f} ms, "
          f"p95 {1000 * eng[int(0.95 * (n - 1))]:.0f} ms")
    if sample:
        cli_latency(rows, sample)
    if explore:
        explore_variants(roots, backend)
    return rows


def print_table(rows: list[dict]) -> None:
    """R@1/5/10 of each method on all the rows, then per LoCoMo category."""
    cats = [(c, name, [r for r in rows if r["category"] == c]) for c, name in CATEGORIES.items()]
    head = " | ".join(f"{name} ({len(sub)}) R@1/5/10" for _, name, sub in cats)
    print(f"| method | R@1 | R@5 | R@10 | {head} |\n|---|---|---|---|{'---|' * len(cats)}")
    for key, label in (("hybrid", "rmtui retrieve (default)"),
                       ("plain", "host without token states (no MaxSim; a foreign service)"),
                       ("first", "first stage only (learned re-order off)"), ("bm25", "BM25 only (same engine)"),
                       ("dense", "dense only (same engine)")):
        s = summarize(rows, key)
        per = []
        for _, _, sub in cats:
            c = summarize(sub, key) if sub else {f"R@{k}": 0.0 for k in KS}
            per.append("/".join(f"{c[f'R@{k}']:.3f}" for k in KS))
        print(f"| {label} | {s['R@1']:.3f} | {s['R@5']:.3f} | {s['R@10']:.3f} | {' | '.join(per)} |")


def cli_latency(rows: list[dict], sample: int) -> None:
    """Real CLI, new process per call, warm service: latency, and the same ranking as in-process."""
    step = max(1, len(rows) // sample)
    picked = rows[::step][:sample]
    times, same = [], 0
    for i, r in enumerate(picked):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "retrieve", "--json", "--top", "10",
                               "--root", str(r["root"].path), "--session", f"cli-{i}-{time.time_ns()}", r["q"]],
                              capture_output=True, text=True, cwd=str(REPO))
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            print(f"CLI failed ({proc.returncode}): {proc.stderr.strip()[:300]}")
            continue
        ids = [x["id"] for x in json.loads(proc.stdout)["results"]]
        same += ids == r["hybrid"]
    times.sort()
    print(f"\nreal CLI `retrieve --json --top 10` (new process per call, warm service), {len(picked)} questions: "
          f"median {1000 * statistics.median(times):.0f} ms, p95 {1000 * times[int(0.95 * (len(times) - 1))]:.0f} ms; "
          f"identical ranking to the in-process engine call for {same}/{len(picked)}")


def explore_variants(roots, backend) -> None:
    """Design table: each variant measured on the same roots and questions (R@10)."""
    base = params_from_config(roots[0][1].config())
    variants = [
        ("earlier default (b=0.75, dense with headings, no BM25 window, neighbours 0.3, heading 0.2)",
         dict(bm25_b=0.75, context_in_dense=True, lexical_window=0, neighbour_weight=0.3, heading_weight=0.2)),
        ("BM25 only, no window, no neighbours", dict(lexical_only=True, lexical_window=0, neighbour_weight=0,
                                                     heading_weight=0)),
        ("dense only, no neighbours", dict(dense_only=True, neighbour_weight=0, heading_weight=0)),
        ("dense only, heading context", dict(dense_only=True, context_in_dense=True, neighbour_weight=0,
                                             heading_weight=0)),
        ("default without the BM25 neighbour window", dict(lexical_window=0)),
        ("default with BM25 b=0.75", dict(bm25_b=0.75)),
        ("default with heading context in dense", dict(context_in_dense=True)),
        ("default with neighbours 0.2", dict(neighbour_weight=0.2)),
        ("default with heading boost 0.4", dict(heading_weight=0.4)),
        ("default with reciprocal-rank fusion", dict(fusion="rrf")),
        ("default with fusion w=0.5", dict(lexical_weight=0.5)),
        ("previous default (fusion w=0.5, neighbours 0.2, heading 0.4, no proper-noun emphasis)",
         dict(lexical_weight=0.5, neighbour_weight=0.2, heading_weight=0.4, proper_noun_repeat=1)),
        ("default without proper-noun emphasis", dict(proper_noun_repeat=1)),
        ("default: BM25 b=0.3 + neighbour window 2 (0.5), dense without headings, fusion w=0.4, neighbours 0.1, "
         "heading 0.3, capitalised words of the need twice in BM25", dict()),
    ]
    qs = {f.stem: questions(f) for f, _ in roots}
    print("\n| variant | R@1 | R@5 | R@10 |\n|---|---|---|---|")
    for label, kw in variants:
        p = RankParams(**{**base.__dict__, **kw})
        rows = []
        for f, root in roots:
            cfg = root.config()
            corpus = load_corpus(root.path)
            for q in qs[f.stem]:
                out = search(root, q["q"], top=10, corpus=corpus, backend=backend, cfg=cfg, params=p)
                rows.append({**q, "ids": [corpus.entries[r.index].id for r in out.ranked]})
        s = summarize(rows, "ids")
        print(f"| {label} | {s['R@1']:.3f} | {s['R@5']:.3f} | {s['R@10']:.3f} |", flush=True)


def run_cold(data_dir: Path, work: Path, formats: tuple[str, ...], fractions: list[float],
             held_only: bool = False) -> None:
    """``--cold``: the development (``held_only``: held-out) conversations' first answers on a new
    root (bench/_cold.py)."""
    from bench._cold import measure, print_cold

    part = "held-out" if held_only else "development"
    files = sorted(f for f in data_dir.glob("conv-*.json") if (f.stem in HELD_OUT) == held_only)
    if not files:
        sys.exit(f"no {part} LoCoMo files in {data_dir}")
    backend = None
    every: dict = {}
    total = 0
    for fmt in formats:
        rows: dict = {}
        n = 0
        for f in files:
            root = build_root(f, work / fmt / f.stem, fmt)
            cfg = root.config()
            backend = backend or cli_backend(root, cfg, wait_seconds=180.0)
            index_fully(root, load_corpus(root.path), backend, cfg)
            qs = questions(f)
            n += len(qs)
            measure(root, backend, fractions, qs, work / fmt, lambda ids, ev: (recall(ids, ev, 5), recall(ids, ev, 10)),
                    rows)
        print_cold(f"{part} conversations ({', '.join(f.stem for f in files)}), layout {fmt!r}", rows, n)
        for k, v in rows.items():
            every.setdefault(k, []).extend(v)
        total += n
    if len(formats) > 1:
        print_cold(f"{part} conversations, every layout ({', '.join(formats)})", every, total)
    print(f"(load average {os.getloadavg()[0]:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo folder (default {DEFAULT_DATA})")
    ap.add_argument("--work", type=Path, help="where to build the roots (default: a temporary folder)")
    ap.add_argument("--sample", type=int, default=40, help="questions asked through the real CLI for latency")
    ap.add_argument("--explore", action="store_true", help="also print the design-variant table")
    ap.add_argument("--formats", default=",".join(FORMATS),
                    help=f"layouts of the speaker to score, the first one in full (default {','.join(FORMATS)})")
    add_compare_option(ap)
    add_model_option(ap)
    ap.add_argument("--held-out-only", action="store_true",
                    help=f"only the held-out conversations ({', '.join(HELD_OUT)})")
    ap.add_argument("--cold", metavar="FRACTIONS",
                    help="only the first answers of a new root on the development conversations (with "
                         "--held-out-only: the held-out ones), the model's index holding these shares of the "
                         "passages (e.g. 0,0.08), first_pass off and static")
    args = ap.parse_args()
    formats = tuple(args.formats.split(","))
    if unknown := [f for f in formats if f not in FORMATS]:
        ap.error(f"unknown layout {', '.join(unknown)}; one of {', '.join(FORMATS)}")
    check_model_option(ap, args)
    if args.cold:
        fractions = [float(x) for x in args.cold.split(",")]
        if args.work:
            args.work.mkdir(parents=True, exist_ok=True)
            run_cold(args.data, args.work, formats, fractions, args.held_out_only)
        else:
            with tempfile.TemporaryDirectory(prefix="rmtui-locomo-") as tmp:
                run_cold(args.data, Path(tmp), formats, fractions, args.held_out_only)
        return
    fit = compared_fit(ap, args.compare_weights)
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        run(args.data, args.work, args.sample, args.explore, formats, fit, args.held_out_only, args.model)
    else:
        with tempfile.TemporaryDirectory(prefix="rmtui-locomo-") as tmp:
            run(args.data, Path(tmp), args.sample, args.explore, formats, fit, args.held_out_only, args.model)


if __name__ == "__main__":
    main()
