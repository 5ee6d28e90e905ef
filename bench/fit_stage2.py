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
            states = stage2.token_states(first.signals, cand)
            assert states is not None, "the model host gives token states (the local service does)"
            x = stage2.features(corpus, first.signals, fused, cand, states)
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

    with tempfile.TemporaryDirectory(prefix="rmtui-stage2-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = rows_of(args.data, work)
    dev = [r for r in rows if r["conv"] not in HELD_OUT]
    held = [r for r in rows if r["conv"] in HELD_OUT]
    n_plain = len(stage2.FEATURES)
    print(f"{len(dev)} development questions ({sum(len(r['y']) for r in dev)} candidate rows), {len(held)} held "
          f"out ({', '.join(HELD_OUT)})")

    def first(z: np.ndarray) -> np.ndarray:
        return -np.arange(len(z), dtype=np.float64)  # candidates come in first-stage order

    print(f"development  first stage {figures(dev, first)}")
    print(f"held out     first stage {figures(held, first)}")
    models = {}
    for name, width in (("PLAIN", n_plain), ("TOKENS", n_plain + len(stage2.TOKEN_FEATURES))):
        models[name] = fit([r["x"][:, :width] for r in dev], [r["y"] for r in dev])
        score = score_of(models[name])
        print(f"{name:6s} ({width} features)  development {figures(dev, score)}  held out {figures(held, score)}")
    if args.dry_run:
        return
    names = {"PLAIN": stage2.FEATURES, "TOKENS": stage2.FEATURES + stage2.TOKEN_FEATURES}
    body = "".join(
        f"\n#: {'without' if name == 'PLAIN' else 'with'} token states\n{name} = Weights(\n"
        f"    features={names[name]!r},\n    mean={_tuple(mean)},\n    scale={_tuple(scale)},\n"
        f"    coef={_tuple(coef)},\n)\n" for name, (mean, scale, coef) in models.items())
    WEIGHTS.write_text(
        '"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).\n\n'
        f"Fitted on the LoCoMo development conversations ({len(dev)} questions, "
        f"{sum(len(r['y']) for r in dev)} candidate rows); held out: {', '.join(HELD_OUT)}.\n\"\"\"\n\n"
        "from rmtui.engine.retrieval.stage2_model import Weights\n" + body, encoding="utf-8")
    print(f"wrote {WEIGHTS.relative_to(REPO)}")


def fit(xs: list[np.ndarray], ys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logistic regression over standardised features: (mean, scale, coefficients)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x, y = np.vstack(xs), np.concatenate(ys)
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(max_iter=5000).fit(scaler.transform(x), y)
    return scaler.mean_, np.where(scaler.scale_ > 0, scaler.scale_, 1.0), model.coef_[0]


def score_of(model: tuple[np.ndarray, np.ndarray, np.ndarray]):
    mean, scale, coef = model

    def score(z: np.ndarray) -> np.ndarray:
        return ((z[:, :len(coef)] - mean) / scale) @ coef

    return score


if __name__ == "__main__":
    main()
