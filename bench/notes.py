"""Retrieval on notes-shaped memory (bench/notes/, see its README), with and without the
learned second stage, through the same engine search the headless retrieve runs.

Prints R@5, R@10 and MRR@10 per project for the default ranking and for
``learned_rerank = false``; the held-out project was never fitted on (bench/fit_stage2.py).
``--compare-weights FILE|REV`` also ranks with an earlier fit of the second stage (a weights
file, or the weights of a Git revision; ``bench/_weights.py``), in the same run on the same roots.
Every root is embedded in full (vectors and token states) before its first question.

``--cold 0,0.08`` instead asks the development projects' questions (with ``--held-out-only`` the
held-out ones) as a new root's first answers see them (bench/_cold.py): the model's index holding
only that share of the passages, with ``embedding.first_pass`` off and ``static``.

Usage: .venv/bin/python bench/notes.py [--work DIR] [--compare-weights FILE|REV] [--held-out-only] [--cold FRACTIONS]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._git import commit_all  # noqa: E402
from bench._index import index_fully  # noqa: E402
from bench._model import add_model_option, check_model_option, use_model  # noqa: E402
from bench._weights import Fit, add_compare_option, compared_fit, using  # noqa: E402
from rmtui.engine.memory.roots import MemoryRoot, init_root  # noqa: E402

NOTES = REPO / "bench" / "notes"
#: Never fitted on, never used to choose a feature.
HELD_OUT = ("cargo",)


@dataclass(frozen=True)
class Project:
    name: str
    path: Path

    @property
    def held_out(self) -> bool:
        return self.name in HELD_OUT

    def questions(self) -> list[dict]:
        return json.loads((self.path / "questions.json").read_text(encoding="utf-8"))


def projects() -> list[Project]:
    return [Project(p.name, p) for p in sorted(NOTES.iterdir()) if (p / "questions.json").is_file()]


def build_root(project: Project, dest: Path, model: str | None = None) -> MemoryRoot:
    """A fresh memory root holding the project's memory files, committed (the derived caches of
    an earlier build at ``dest`` are kept: vectors are cached by text, so nothing is embedded twice),
    embedded with ``model`` (None: the default)."""
    keep = None
    if dest.exists():
        cache = dest / ".runtime" / "cache"
        if cache.is_dir():
            keep = dest.parent / f".{dest.name}.cache"
            shutil.rmtree(keep, ignore_errors=True)
            cache.rename(keep)
        shutil.rmtree(dest)
    root = init_root(dest)
    if keep is not None:
        keep.rename(root.runtime / "cache")
    for f in project.path.glob("MEMORY*.md"):
        shutil.copyfile(f, dest / f.name)
    (dest / "PURSUITS.md").write_text("# Pursuits\n\n## Focus\n", encoding="utf-8")
    use_model(dest, model)
    commit_all(dest, f"notes {project.name}")
    return root


def scores(ranked: list[str], evidence: list[str]) -> tuple[float, float, float]:
    ev = set(evidence)
    r5 = sum(1 for e in ev if e in ranked[:5]) / len(ev)
    r10 = sum(1 for e in ev if e in ranked[:10]) / len(ev)
    hit = next((k for k, c in enumerate(ranked[:10]) if c in ev), None)
    return r5, r10, 0.0 if hit is None else 1.0 / (hit + 1)


def run(work: Path, fit: Fit | None = None, held_only: bool = False,
        model: str | None = None) -> dict[tuple[str, str], list[tuple]]:
    """Print each project's figures per ranking (``fit``'s beside today's, when given), then the
    held-out projects together; return the per-question scores by (project, ranking)."""
    from rmtui.engine.retrieval.corpus import load_corpus
    from rmtui.engine.retrieval.ranking import RankParams
    from rmtui.engine.retrieval.retrieve import cli_backend, params_from_config, search

    backend = None
    chosen = [p for p in projects() if p.held_out or not held_only]
    roots = []
    for project in chosen:  # every root fully indexed before any question is asked
        root = build_root(project, work / project.name, model)
        cfg = root.config()
        backend = backend or cli_backend(root, cfg, wait_seconds=180.0)
        corpus = load_corpus(root.path)
        took = index_fully(root, corpus, backend, cfg)
        print(f"  {project.name}: {len(corpus.entries)} entries, fully indexed in {took:.1f} s "
              "before the first question")
        roots.append((project, root, cfg, corpus))
    print("| project | questions | ranking | R@5 | R@10 | MRR@10 |\n|---|---|---|---|---|---|")
    got: dict[tuple[str, str], list[tuple]] = {}
    for project, root, cfg, corpus in roots:
        base = params_from_config(cfg)
        qs = project.questions()
        shown = [("default (second stage)", base, None), *([(fit.label, base, fit)] if fit else []),
                 ("learned_rerank = false", RankParams(**{**base.__dict__, "learned": False}), None),
                 ("BM25 only", RankParams(**{**base.__dict__, "lexical_only": True}), None)]
        for label, params, weights in shown:
            each = []
            with using(weights):
                for q in qs:
                    out = search(root, q["q"], top=10, corpus=corpus,
                                 backend=None if params.lexical_only else backend, cfg=cfg, params=params)
                    each.append(scores([corpus.entries[r.index].id for r in out.ranked], q["evidence"]))
            got[(project.name, label)] = each
            r5, r10, mrr = (statistics.fmean(g[i] for g in each) for i in range(3))
            part = "held out" if project.held_out else "development"
            print(f"| {project.name} ({part}) | {len(qs)} | {label} | {r5:.3f} | {r10:.3f} | {mrr:.3f} |", flush=True)
    held = [p.name for p, *_ in roots if p.held_out]
    if held:
        print(f"\nheld out ({', '.join(held)}), every question together:\n| ranking | questions | R@5 | R@10 | MRR@10 |"
              "\n|---|---|---|---|---|")
        for label in dict.fromkeys(label for _, label in got):
            each = [g for name in held for g in got.get((name, label), [])]
            r5, r10, mrr = (statistics.fmean(g[i] for g in each) for i in range(3))
            print(f"| {label} | {len(each)} | {r5:.3f} | {r10:.3f} | {mrr:.3f} |")
    return got


def run_cold(work: Path, fractions: list[float], held_only: bool = False) -> None:
    """``--cold``: the development (``held_only``: held-out) projects' first answers on a new root
    (bench/_cold.py)."""
    import os

    from bench._cold import measure, print_cold
    from rmtui.engine.retrieval.corpus import load_corpus
    from rmtui.engine.retrieval.retrieve import cli_backend

    backend = None
    rows: dict = {}
    chosen = [p for p in projects() if p.held_out == held_only]
    n = 0
    for project in chosen:
        root = build_root(project, work / project.name)
        cfg = root.config()
        backend = backend or cli_backend(root, cfg, wait_seconds=180.0)
        index_fully(root, load_corpus(root.path), backend, cfg)
        qs = project.questions()
        n += len(qs)
        measure(root, backend, fractions, qs, work, lambda ids, ev: scores(ids, ev)[:2], rows)
    print_cold(f"{'held-out' if held_only else 'development'} projects ({', '.join(p.name for p in chosen)})", rows, n)
    print(f"(load average {os.getloadavg()[0]:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, help="where to build the roots (default: a temporary folder)")
    add_compare_option(ap)
    add_model_option(ap)
    ap.add_argument("--held-out-only", action="store_true", help=f"only the held-out projects ({', '.join(HELD_OUT)})")
    ap.add_argument("--cold", metavar="FRACTIONS",
                    help="only the first answers of a new root on the development projects (with "
                         "--held-out-only: the held-out ones), the model's index holding these shares of the "
                         "passages (e.g. 0,0.08), first_pass off and static")
    args = ap.parse_args()
    check_model_option(ap, args)
    if args.cold:
        fractions = [float(x) for x in args.cold.split(",")]
        in_work(args.work, lambda work: run_cold(work, fractions, args.held_out_only))
        return
    fit = compared_fit(ap, args.compare_weights)
    in_work(args.work, lambda work: run(work, fit, args.held_out_only, args.model))


def in_work(work: Path | None, job) -> None:
    """Run ``job`` in ``work`` (made if missing), or in a temporary folder removed after it."""
    if work:
        work.mkdir(parents=True, exist_ok=True)
        job(work)
    else:
        with tempfile.TemporaryDirectory(prefix="rmtui-notes-") as tmp:
            job(Path(tmp))

if __name__ == "__main__":
    main()
