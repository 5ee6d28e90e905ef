"""The learned second stage: features per candidate, a re-order of the head only, and off-switches."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rmtui.engine.errors import EngineError
from rmtui.engine.retrieval import stage2, stage2_weights
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.ranking import fuse
from rmtui.engine.retrieval.retrieve import first_stage, params_from_config, search

CHAT = [
    ("q1", "Ana: which database did the team pick for the ledger?"),
    ("a1", "Bo: we chose postgres, after a long week of benchmarks and a vote in the team meeting."),
    ("x1", "Bo: the weather was lovely today."),
    ("x2", "Ana: lunch was pasta again."),
    ("x3", "Bo: the printer jammed twice."),
    ("x4", "Ana: the database migration is scheduled."),
    ("x5", "Bo: ledger totals are reconciled nightly."),
    ("x6", "Ana: postgres upgrade went fine."),
]


def _write(root) -> None:
    lines = [f"- `{i}` {t} → []" for i, t in CHAT]
    (root.path / "MEMORY.md").write_text("# Memory {#mem}\n\n## Chat {#chat}\n\n" + "\n".join(lines) + "\n",
                                         encoding="utf-8")


def _ids(outcome) -> list[str]:
    return [outcome.corpus.entries[r.index].id for r in outcome.ranked]


def test_shipped_weights_fit_the_features():
    assert tuple(stage2_weights.FEATURES) == stage2.FEATURES
    assert len(stage2_weights.COEF) == len(stage2_weights.MEAN) == len(stage2_weights.SCALE) == len(stage2.FEATURES)
    assert all(s > 0 for s in stage2_weights.SCALE)


def test_features_one_row_per_candidate(root, plain_backend):
    _write(root)
    corpus = load_corpus(root.path)
    params = params_from_config(root.config())
    first = first_stage(root, "which database for the ledger", corpus=corpus, backend=plain_backend, params=params)
    assert first.mode == "hybrid" and first.signals is not None
    fused = fuse(corpus, first.lexical, first.dense, params)
    cand = stage2.candidates(fused)
    assert len(cand) == len(CHAT)  # fewer entries than the pool: all of them
    x = stage2.features(corpus, first.signals, fused, cand)
    assert x.shape == (len(CHAT), len(stage2.FEATURES)) and np.isfinite(x).all()
    col = {f: x[:, i] for i, f in enumerate(stage2.FEATURES)}
    assert np.all(np.diff(col["fused"]) <= 1e-6)  # candidates come best first
    ids = [corpus.entries[i].id for i in cand.tolist()]
    assert col["coverage"][ids.index("q1")] == pytest.approx(1.0)  # holds every word of the need
    assert col["coverage"][ids.index("x2")] == 0.0
    assert col["first"][0] == pytest.approx(1.0, abs=1e-5)  # the best candidate's vector, unit length
    assert col["length"][ids.index("a1")] > col["length"][ids.index("x3")]


def test_second_stage_orders_the_head_by_its_weights(root, plain_backend, monkeypatch):
    _write(root)
    corpus = load_corpus(root.path)
    cfg = root.config()
    need = "which database for the ledger"
    before = search(root, need, top=5, corpus=corpus, backend=plain_backend, cfg=cfg,
                    params=replace(params_from_config(cfg), learned=False))
    # weights that only value length: the learned order is the longest entries first
    coef = tuple(1.0 if f == "length" else 0.0 for f in stage2.FEATURES)
    monkeypatch.setattr(stage2_weights, "COEF", coef)
    monkeypatch.setattr(stage2_weights, "MEAN", (0.0,) * len(coef))
    monkeypatch.setattr(stage2_weights, "SCALE", (1.0,) * len(coef))
    after = search(root, need, top=5, corpus=corpus, backend=plain_backend, cfg=cfg)
    text = {e.id: e.text for e in corpus.entries}
    lengths = [len(text[i]) for i in _ids(after)]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] == max(len(t) for t in text.values())
    assert _ids(after) != _ids(before)
    # weights fitted for other features are not applied: the first stage stands
    monkeypatch.setattr(stage2_weights, "FEATURES", ("something", "else"))
    again = search(root, need, top=5, corpus=corpus, backend=plain_backend, cfg=cfg)
    assert _ids(again) == _ids(before)


def test_lexical_only_keeps_the_first_stage(root):
    _write(root)
    corpus = load_corpus(root.path)
    cfg = root.config()
    first = first_stage(root, "postgres", corpus=corpus, backend=None, params=params_from_config(cfg))
    assert first.mode == "lexical" and first.signals is None
    out = search(root, "postgres", top=3, corpus=corpus, backend=None, cfg=cfg)
    assert set(_ids(out)[:2]) == {"a1", "x6"}


def test_config_switch(root):
    assert params_from_config(root.config()).learned is True
    (root.path / "rmtui.toml").write_text("[retrieve]\nlearned_rerank = false\n", encoding="utf-8")
    assert params_from_config(root.config()).learned is False
    (root.path / "rmtui.toml").write_text('[retrieve]\nlearned_rerank = "yes"\n', encoding="utf-8")
    with pytest.raises(EngineError, match="learned_rerank"):
        root.config()
