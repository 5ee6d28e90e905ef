"""The LoCoMo bench's layout spread and its bootstrap interval (bench/locomo.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import locomo  # noqa: E402


def _rows(hits: list[bool], conv: str = "conv-42") -> list[dict]:
    return [{"conv": conv, "hybrid": ["a" if hit else "b"], "evidence": ["a"]} for hit in hits]


def test_layouts_that_answer_alike_have_no_spread_and_a_point_interval():
    hits = [True, False, True, True] * 25
    rows = {fmt: _rows(hits) for fmt in locomo.FORMATS}
    assert locomo.spread_interval(rows, "hybrid") == (0.0, 0.0, 0.0)


def test_the_spread_is_best_minus_worst_on_held_out_questions_only():
    base = [True] * 80 + [False] * 20
    worse = [True] * 70 + [False] * 30
    rows = {"first": _rows(base), "inside": _rows(worse) + _rows([False] * 50, conv="conv-26")}
    spread, low, high = locomo.spread_interval(rows, "hybrid")
    assert abs(spread - 0.10) < 1e-9
    # paired: the two layouts differ on exactly ten questions, so every draw sees a spread > 0
    assert 0.0 < low < spread < high < 0.25
