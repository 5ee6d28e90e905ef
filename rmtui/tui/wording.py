"""Small wording helpers shared by the screens: counts of things, scores."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``, ``0 files`` (``plural`` for irregular nouns)."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def score_text(score: float) -> str:
    """A ranking score: three decimals within 0..1 (a similarity), else one (a BM25-like sum),
    so a score above 1 never reads as a probability."""
    return f"{score:.3f}" if 0.0 <= score <= 1.0 else f"{score:.1f}"
