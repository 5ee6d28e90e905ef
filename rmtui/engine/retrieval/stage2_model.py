"""The learned second stage's model: a linear model over standardised features. Apart from
``stage2`` so that the generated ``stage2_weights`` and the ranking that reads it both import
it, and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Weights:
    """A fitted linear model over standardised features (``stage2_weights.py`` holds two)."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    #: The lowest and highest ``stage2.thread`` of the pools it was fitted on: a pool outside
    #: them is read as the nearest end, since a linear model is not trusted beyond its data.
    thread_span: tuple[float, float]
