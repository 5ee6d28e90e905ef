"""Small wording helpers shared by the screens: counts of things, scores, ages and times,
shortened ids and texts."""

from __future__ import annotations

from datetime import UTC, datetime


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``, ``0 files`` (``plural`` for irregular nouns)."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def score_text(score: float) -> str:
    """A ranking score: three decimals within 0..1 (a similarity), else one (a BM25-like sum),
    so a score above 1 never reads as a probability."""
    return f"{score:.3f}" if 0.0 <= score <= 1.0 else f"{score:.1f}"


def age(seconds: float) -> str:
    """A short age: 45s, 12m, 3h, 2d."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def op_kind(kind: str) -> str:
    """What an operation is, in the tables' first column: its kind (a host agent's Update is a
    ``host task``)."""
    return "host task" if kind == "assistant" else kind


def op_tail(op_id: str) -> str:
    """The last eight characters of an operation id (``maintenance-20250601T101500Z-55ac76d8``:
    ``…55ac76d8``; the Pursuit editor's bare 32 hex alike): enough to tell two apart, the row
    key holds the whole id."""
    tail = op_id.rsplit("-", 1)[-1]
    return f"…{tail[-8:]}" if len(tail) > 8 or "-" in op_id else tail


def fit_line(parts: list[tuple[str, int]], width: int, sep: str = " · ") -> str:
    """``parts`` (text, priority) joined by ``sep`` in their order, leaving out the lowest
    priority ones until the line fits ``width`` cells: a notice (a filter's matches, the
    first validation error) is never the part cut off at the edge."""
    kept = list(parts)
    while len(kept) > 1 and len(sep.join(t for t, _ in kept)) > width:
        kept.remove(min(kept, key=lambda p: p[1]))
    return sep.join(t for t, _ in kept)


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def when(iso: str | None, now: float) -> str:
    """An ISO time of the engine's state files as ``06-02 09:30Z (5m ago)``; ``never`` for None."""
    if not iso:
        return "never"
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    ts = t.timestamp()
    shown = datetime.fromtimestamp(ts, UTC).strftime("%m-%d %H:%MZ")
    return f"{shown} ({age(now - ts)} ago)" if now >= ts else shown


def timestamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
