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


def _held(hits: list[bool], key_hits: dict[str, list[bool]], category: int = 2) -> list[dict]:
    return [{"conv": "conv-43", "category": category, "evidence": ["a"],
             **{key: ["a" if h[i] else "b"] for key, h in key_hits.items()}}
            for i in range(len(hits))]


def test_held_out_tables_print_the_earlier_fit_beside_todays(capsys):
    from bench._weights import Fit
    from rmtui.engine.retrieval import stage2_weights

    fit = Fit("fit of abc123", stage2_weights.PLAIN, stage2_weights.TOKENS)
    hits = {"hybrid": [True, True, False, False], "previous": [True, True, True, False],
            "first": [False, False, False, True]}
    rows = {"first": _held(hits["hybrid"], hits), "inside": _held(hits["hybrid"], hits, category=3)}
    locomo.print_layouts(rows, fit)
    locomo.print_categories(rows, fit)
    out = capsys.readouterr().out
    assert "| layout | questions | default | fit of abc123 | learned off |" in out
    # R@1 / R@5 / R@10 of today's fit, the earlier one and the first stage, per layout and together
    assert "| 4 | 0.500 / 0.500 / 0.500 | 0.750 / 0.750 / 0.750 | 0.250 / 0.250 / 0.250 |" in out
    assert "| all layouts | 8 | 0.500 / 0.500 / 0.500 | 0.750 / 0.750 / 0.750 |" in out
    assert "| ranking | single-hop (0) | multi-hop (0) | temporal (4) | open-domain (4) |" in out
    assert "| fit of abc123 | 0.000 / 0.000 | 0.000 / 0.000 | 0.750 / 0.750 | 0.750 / 0.750 |" in out


def test_held_out_tables_without_an_earlier_fit_print_no_column_for_it(capsys):
    hits = {"hybrid": [True, False], "first": [False, False]}
    locomo.print_layouts({"first": _held(hits["hybrid"], hits)})
    out = capsys.readouterr().out
    assert "| layout | questions | default | learned off |" in out and "fit of" not in out


def test_a_bad_earlier_fit_is_refused_with_exit_2_before_any_root_is_built(tmp_path):
    import subprocess

    bad = tmp_path / "weights.py"
    bad.write_text("PLAIN = 1\n", encoding="utf-8")
    out = subprocess.run([sys.executable, str(Path(locomo.__file__)), "--work", str(tmp_path / "w"),
                          "--compare-weights", str(bad)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--compare-weights weights.py: defines no PLAIN and TOKENS weights" in out.stderr
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").iterdir())
