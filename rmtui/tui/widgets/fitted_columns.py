"""Columns that fit the pane they are in: a table never cuts a word in half at its edge.

A DataTable scrolls sideways when its columns are wider than the pane, so a narrow pane
showed ``committ`` for ``committed`` with the rest out of sight. A fitted table instead
leaves out its least needed columns until the others fit whole, and gives its one flexible
column (a free text: a lease, the changed paths) what is left, clipped with ``…`` as it is
drawn (the cell keeps the whole text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text

#: a flexible column narrower than this is left out rather than shown as a stub
FLEX_MIN = 8
#: ... and a column that would leave before it goes first when it would squeeze the
#: flexible one below this (a path list clipped to ``PURSUIT…`` says little)
FLEX_COMFORT = 16


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    #: 0: always shown; otherwise the column is left out when the pane is too narrow, the
    #: highest number first
    drop: int = 0
    #: takes the width the others leave, its text clipped
    flex: bool = False


@dataclass(frozen=True)
class Fit:
    """The columns shown and each one's width."""

    columns: tuple[Column, ...]
    widths: tuple[int, ...]


def fit_columns(columns: Sequence[Column], rows: Sequence[Sequence[str]], room: int | None,
                padding: int = 1) -> Fit:
    """Which of ``columns`` show in ``room`` cells and how wide (``room`` None: not laid out
    yet, every column at its natural width). Each column also takes ``padding`` cells on
    either side."""
    natural = [max([cell_len(c.label), *(cell_len(str(row[i])) for row in rows)]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))

    def need(indexes: list[int]) -> int:
        return sum((min(natural[i], FLEX_MIN) if columns[i].flex else natural[i]) + 2 * padding for i in indexes)

    if room is not None:
        while need(shown) > room:
            droppable = [i for i in shown if columns[i].drop]
            if not droppable:
                break
            shown.remove(max(droppable, key=lambda i: columns[i].drop))
    def flex_width(i: int) -> int:
        assert room is not None
        left = room - sum(natural[j] + 2 * padding for j in shown if j != i and not columns[j].flex) - 2 * padding
        return max(min(natural[i], FLEX_MIN), min(natural[i], left))

    flex = next((i for i in shown if columns[i].flex), None)
    while room is not None and flex is not None and flex_width(flex) < min(natural[flex], FLEX_COMFORT):
        before = [i for i in shown if not columns[i].flex and columns[i].drop > columns[flex].drop]
        if not before:
            break
        shown.remove(max(before, key=lambda i: columns[i].drop))
    widths = [flex_width(i) if columns[i].flex and room is not None else natural[i] for i in shown]
    return Fit(tuple(columns[i] for i in shown), tuple(widths))


def clipped(text: str) -> Text:
    """A flexible column's cell: drawn on one line, ending in ``…`` where the column cuts it."""
    return Text(text, no_wrap=True, overflow="ellipsis")
