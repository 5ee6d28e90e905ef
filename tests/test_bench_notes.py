"""The notes-shaped bench sets and the second stage's fit (bench/notes.py, bench/fit_stage2.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import fit_stage2  # noqa: E402
import notes  # noqa: E402

NODE = re.compile(r"^- `([A-Za-z0-9_.-]+)` ", re.M)


def test_every_notes_question_points_at_nodes_of_its_own_project():
    projects = notes.projects()
    assert {p.name for p in projects} >= {"git", "pytest", "rmtui", "sqlite", "rightmemory", "docker", "cargo"}
    assert [p.name for p in projects if p.held_out] == ["cargo"]
    for p in projects:
        ids = [i for f in sorted(p.path.glob("MEMORY*.md")) for i in NODE.findall(f.read_text(encoding="utf-8"))]
        assert len(ids) == len(set(ids)), f"{p.name}: a node id twice"
        qs = p.questions()
        assert qs and all(q["q"].strip() and q["evidence"] for q in qs), p.name
        missing = {e for q in qs for e in q["evidence"]} - set(ids)
        assert not missing, f"{p.name}: evidence names no node: {sorted(missing)}"
        assert len({q["q"] for q in qs}) == len(qs), f"{p.name}: a question twice"


def _question(rng, evidence_at: int, n: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Candidates with a telling feature (high on the evidence), a noise one and a constant."""
    x = np.column_stack([rng.normal(0, 1, n), rng.normal(0, 1, n), np.ones(n)])
    y = np.zeros(n, dtype=np.int8)
    if evidence_at >= 0:
        x[evidence_at, 0] += 3.0
        y[evidence_at] = 1
    return x, y


def test_listwise_fit_learns_the_order_within_questions():
    rng = np.random.default_rng(7)
    qs = [_question(rng, int(rng.integers(0, 20))) for _ in range(60)] + [_question(rng, -1) for _ in range(5)]
    groups = ["locomo"] * 40 + ["notes"] * 25
    mean, scale, coef = fit_stage2.fit([x for x, _ in qs], [y for _, y in qs], groups)
    assert coef[0] > 0 and abs(coef[0]) > 5 * abs(coef[1])  # the telling feature, not the noise
    assert scale[2] == 1.0  # a constant column is left as it is, not divided by zero
    fresh = [_question(rng, int(rng.integers(0, 20))) for _ in range(30)]
    top = [int(np.argmax(((x - mean) / scale) @ coef)) == int(np.argmax(y)) for x, y in fresh]
    by_feature = [int(np.argmax(x[:, 0])) == int(np.argmax(y)) for x, y in fresh]
    assert sum(top) >= sum(by_feature) - 1  # as good as the telling feature alone (the best order here)


def test_a_rebuilt_notes_root_keeps_its_derived_caches(tmp_path):
    project = next(p for p in notes.projects() if p.held_out)
    root = notes.build_root(project, tmp_path / project.name)
    marker = root.runtime / "cache" / "vectors-marker"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_bytes(b"kept")
    (root.path / "MEMORY_stray.md").write_text("stray\n", encoding="utf-8")
    again = notes.build_root(project, tmp_path / project.name)
    assert (again.runtime / "cache" / "vectors-marker").read_bytes() == b"kept"
    assert not (again.path / "MEMORY_stray.md").exists()  # the memory itself is built afresh
    assert not (tmp_path / f".{project.name}.cache").exists()


def test_pool_report_shares_the_evidence_the_first_stage_holds_per_family_and_category():
    """``fit_stage2.py --pool``: where the evidence sits in the first stage's order tells whether
    the second stage (inside the pool) or the first stage (outside it) is the lever."""
    def row(family, held, cand, evidence, category=None):
        return {"family": family, "held": held, "cand": cand, "evidence": evidence,
                **({"category": category} if category else {})}

    pool = [f"n{i}" for i in range(40)]
    rows = [row("locomo/first", False, pool, ["n0", "n35"], 1),  # multi-hop: half in the best 10, all in the pool
            row("locomo/first", False, pool, ["n12"], 4),  # single-hop: within 30, not 10
            row("locomo/first", False, pool, ["x"], 4),  # outside the pool
            row("notes", True, pool, ["n3"])]
    lines = fit_stage2.pool_shares(rows).splitlines()
    assert lines[0] == "| part | questions | best 10 | best 30 | pool (40) |"
    cells = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in lines[2:]}
    assert cells["development locomo/first"] == ["3", "0.167", "0.500", "0.667 |"]
    assert cells["development locomo/first single-hop"] == ["2", "0.000", "0.500", "0.500 |"]
    assert cells["development locomo/first multi-hop"] == ["1", "0.500", "0.500", "1.000 |"]
    assert "development locomo/first temporal" not in cells  # no question of it
    assert cells["held out notes"] == ["1", "1.000", "1.000", "1.000 |"]
