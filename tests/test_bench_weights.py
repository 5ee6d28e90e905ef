"""Loading an earlier fit of the second stage for the benches (bench/_weights.py)."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import _weights  # noqa: E402
from rmtui.engine.retrieval import stage2_weights  # noqa: E402

TODAY = (REPO / _weights.WEIGHTS_PATH).read_text(encoding="utf-8")


def test_a_git_revision_gives_that_revisions_weights():
    fit = _weights.load("HEAD")
    assert fit.label == "fit of HEAD"
    assert fit.tokens.features == stage2_weights.TOKENS.features
    assert len(fit.tokens.coef) == len(fit.tokens.features)


def test_a_fit_written_before_thread_span_reads_thread_unbounded(tmp_path):
    old = tmp_path / "old_weights.py"
    old.write_text(re.sub(r"\n    thread_span=\([^)]*\),", "", TODAY), encoding="utf-8")
    assert "thread_span" not in old.read_text(encoding="utf-8")
    fit = _weights.load(str(old))
    assert fit.plain.thread_span == _weights.UNBOUNDED
    assert fit.plain.coef == stage2_weights.PLAIN.coef


def test_weights_over_other_features_are_refused_naming_them(tmp_path):
    other = tmp_path / "w.py"
    other.write_text(TODAY.replace("'named_subject', ", "'named_person', ", 1), encoding="utf-8")
    with pytest.raises(_weights.WeightsError, match=r"PLAIN weights describe other features than today's "
                                                    r"\(theirs only: named_person; today's only: named_subject\)"):
        _weights.load(str(other))


def test_neither_a_file_nor_a_revision_is_refused():
    with pytest.raises(_weights.WeightsError, match="neither a file nor a Git revision"):
        _weights.load("no-such-revision-xyz")


def test_using_swaps_the_weights_the_stage_reads_and_restores_them_after_an_error():
    mine = _weights.Fit("mine", stage2_weights.TOKENS, stage2_weights.PLAIN)  # swapped: plainly not today's
    before = stage2_weights.PLAIN, stage2_weights.TOKENS
    with pytest.raises(RuntimeError), _weights.using(mine):
        assert stage2_weights.PLAIN is mine.plain and stage2_weights.TOKENS is mine.tokens
        raise RuntimeError
    assert before == (stage2_weights.PLAIN, stage2_weights.TOKENS)
    with _weights.using(None):
        assert before == (stage2_weights.PLAIN, stage2_weights.TOKENS)


def test_a_fit_over_fewer_features_than_todays_loads(tmp_path):
    """A fit made before a feature was added is scored on its own columns, so a refit can be
    judged against it in one run."""
    def without(w, name: str):
        keep = [i for i, f in enumerate(w.features) if f != name]
        return replace(w, **{k: tuple(getattr(w, k)[i] for i in keep) for k in ("features", "mean", "scale", "coef")})

    old = tmp_path / "old_weights.py"
    old.write_text(f"PLAIN = {without(stage2_weights.PLAIN, 'named_subject')!r}\n"
                   f"TOKENS = {without(stage2_weights.TOKENS, 'named_subject')!r}\n", encoding="utf-8")
    fit = _weights.load(str(old))
    assert "named_subject" not in fit.plain.features and "named_subject" in stage2_weights.PLAIN.features
    assert len(fit.tokens.coef) == len(fit.tokens.features) == len(stage2_weights.TOKENS.features) - 1
