"""Retrieval on notes-shaped memory (bench/notes/, see its README), with and without the
learned second stage, through the same engine search the headless retrieve runs.

Prints R@5, R@10 and MRR@10 per project for the default ranking and for
``learned_rerank = false``; the held-out project was never fitted on (bench/fit_stage2.py).

Usage: .venv/bin/python bench/notes.py [--work DIR]
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


def build_root(project: Project, dest: Path) -> MemoryRoot:
    """A fresh memory root holding the project's memory files, committed."""
    if dest.exists():
        shutil.rmtree(dest)
    root = init_root(dest)
    for f in project.path.glob("MEMORY*.md"):
        shutil.copyfile(f, dest / f.name)
    (dest / "PURSUITS.md").write_text("# Pursuits\n\n## Focus\n", encoding="utf-8")
    commit_all(dest, f"notes {project.name}")
    return root


def scores(ranked: list[str], evidence: list[str]) -> tuple[float, float, float]:
    ev = set(evidence)
    r5 = sum(1 for e in ev if e in ranked[:5]) / len(ev)
    r10 = sum(1 for e in ev if e in ranked[:10]) / len(ev)
    hit = next((k for k, c in enumerate(ranked[:10]) if c in ev), None)
    return r5, r10, 0.0 if hit is None else 1.0 / (hit + 1)


def run(work: Path) -> None:
    from rmtui.engine.retrieval.corpus import load_corpus
    from rmtui.engine.retrieval.ranking import RankParams
    from rmtui.engine.retrieval.retrieve import cli_backend, params_from_config, search

    backend = None
    print("| project | questions | ranking | R@5 | R@10 | MRR@10 |\n|---|---|---|---|---|---|")
    for project in projects():
        root = build_root(project, work / project.name)
        cfg = root.config()
        backend = backend or cli_backend(root, cfg, wait_seconds=180.0)
        corpus = load_corpus(root.path)
        base = params_from_config(cfg)
        qs = project.questions()
        for label, params in (("default (second stage)", base),
                              ("learned_rerank = false", RankParams(**{**base.__dict__, "learned": False})),
                              ("BM25 only", RankParams(**{**base.__dict__, "lexical_only": True}))):
            got = []
            for q in qs:
                out = search(root, q["q"], top=10, corpus=corpus, backend=None if params.lexical_only else backend,
                             cfg=cfg, params=params)
                got.append(scores([corpus.entries[r.index].id for r in out.ranked], q["evidence"]))
            r5, r10, mrr = (statistics.fmean(g[i] for g in got) for i in range(3))
            part = "held out" if project.held_out else "development"
            print(f"| {project.name} ({part}) | {len(qs)} | {label} | {r5:.3f} | {r10:.3f} | {mrr:.3f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, help="where to build the roots (default: a temporary folder)")
    args = ap.parse_args()
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        run(args.work)
    else:
        with tempfile.TemporaryDirectory(prefix="rmtui-notes-") as tmp:
            run(Path(tmp))


if __name__ == "__main__":
    main()
