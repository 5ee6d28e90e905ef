"""Fit the learned second stage of retrieval (rmtui/engine/retrieval/stage2.py) on LoCoMo.

The development conversations (all but ``locomo.HELD_OUT``) give the training rows: for each
question, the first stage's best ``stage2.POOL`` candidates with their features (computed by
the engine's own ``stage2.features``), labelled 1 when the candidate is an evidence turn. A
logistic regression over standardised features is fitted and written to
``rmtui/engine/retrieval/stage2_weights.py``; the held-out conversations are only scored,
before and after, so the printed held-out figure is a fair one.

Usage: .venv/bin/python bench/fit_stage2.py [--work DIR] [--dry-run]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from locomo import DEFAULT_DATA, HELD_OUT, build_root, questions, recall  # noqa: E402

from rmtui.engine.retrieval import stage2  # noqa: E402
from rmtui.engine.retrieval.corpus import load_corpus  # noqa: E402
from rmtui.engine.retrieval.ranking import fuse  # noqa: E402
from rmtui.engine.retrieval.retrieve import cli_backend, first_stage, params_from_config  # noqa: E402

WEIGHTS = REPO / "rmtui" / "engine" / "retrieval" / "stage2_weights.py"


def rows_of(data_dir: Path, work: Path) -> list[dict]:
    """One row per question: candidates, their features and labels, and the conversation."""
    rows: list[dict] = []
    backend = None
    for f in sorted(data_dir.glob("conv-*.json")):
        root = build_root(f, work / f.stem)
        cfg = root.config()
        backend = backend or cli_backend(root, cfg, wait_seconds=180.0)
        corpus = load_corpus(root.path)
        params = params_from_config(cfg)
        ids = [e.id for e in corpus.entries]
        for q in questions(f):
            first = first_stage(root, q["q"], corpus=corpus, backend=backend, params=params)
            assert first.signals is not None, "the second stage needs dense scores"
            fused = fuse(corpus, first.lexical, first.dense, params)
            cand = stage2.candidates(fused)
            x = stage2.features(corpus, first.signals, fused, cand)
            evidence = set(q["evidence"])
            y = np.asarray([ids[i] in evidence for i in cand.tolist()], dtype=np.int8)
            rows.append({**q, "conv": f.stem, "cand": [ids[i] for i in cand.tolist()], "x": x, "y": y})
        print(f"  {f.stem}: {len(corpus.entries)} entries", flush=True)
    return rows


def figures(rows: list[dict], score) -> str:
    r5, r10 = [], []
    for r in rows:
        order = np.argsort(-score(r["x"]), kind="stable")
        ranked = [r["cand"][i] for i in order]
        r5.append(recall(ranked, r["evidence"], 5))
        r10.append(recall(ranked, r["evidence"], 10))
    return f"R@5 {statistics.fmean(r5):.3f}  R@10 {statistics.fmean(r10):.3f}"


def _tuple(values) -> str:
    return "(" + ", ".join(f"{float(v):.6g}" for v in values) + ",)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--work", type=Path, help="where to build the roots (default: a temporary folder)")
    ap.add_argument("--dry-run", action="store_true", help="print the figures, do not write the weights")
    args = ap.parse_args()
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    with tempfile.TemporaryDirectory(prefix="rmtui-stage2-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = rows_of(args.data, work)
    dev = [r for r in rows if r["conv"] not in HELD_OUT]
    held = [r for r in rows if r["conv"] in HELD_OUT]
    x = np.vstack([r["x"] for r in dev])
    y = np.concatenate([r["y"] for r in dev])
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(max_iter=5000).fit(scaler.transform(x), y)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    coef = model.coef_[0]

    def learned(z: np.ndarray) -> np.ndarray:
        return ((z - scaler.mean_) / scale) @ coef

    def first(z: np.ndarray) -> np.ndarray:
        return -np.arange(len(z), dtype=np.float64)  # candidates come in first-stage order

    print(f"{len(dev)} development questions ({len(x)} candidate rows), {len(held)} held out ({', '.join(HELD_OUT)})")
    print(f"development  first stage {figures(dev, first)}  ->  learned {figures(dev, learned)}")
    print(f"held out     first stage {figures(held, first)}  ->  learned {figures(held, learned)}")
    if args.dry_run:
        return
    WEIGHTS.write_text(
        '"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).\n\n'
        f"Fitted on the LoCoMo development conversations ({len(dev)} questions, {len(x)} candidate rows); "
        f"held out: {', '.join(HELD_OUT)}.\n\"\"\"\n\n"
        f"FEATURES: tuple[str, ...] = {stage2.FEATURES!r}\n"
        f"MEAN: tuple[float, ...] = {_tuple(scaler.mean_)}\n"
        f"SCALE: tuple[float, ...] = {_tuple(scale)}\n"
        f"COEF: tuple[float, ...] = {_tuple(coef)}\n", encoding="utf-8")
    print(f"wrote {WEIGHTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
