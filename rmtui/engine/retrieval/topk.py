"""The largest few of a score array, without partitioning all of it.

A retrieve picks the best few of 50,000 scores several times (the coarse dense pass, the
lexical leaders, the second stage's pool, the shown results); ``argpartition`` over the
whole array costs about 0.5 ms each time there. A threshold read from an evenly spaced
sample finds a small superset in one comparison instead, and only that is ordered. The
answer is the same as a full sort's: every position whose value reaches the k-th largest.
"""

from __future__ import annotations

import numpy as np

#: Arrays shorter than this are partitioned directly (the sample would save nothing).
_SAMPLED_FROM = 8192
#: About how many sample values a threshold is read from.
_SAMPLE = 2048


def at_least(x: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending) of every value of ``x`` that reaches its k-th largest: k of them,
    or more where values tie or the sample's threshold falls lower."""
    n = len(x)
    if k >= n:
        return np.arange(n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if n >= _SAMPLED_FROM:
        step = n // _SAMPLE
        sample = x[::step]
        j = min(len(sample), max(1, 2 * k // step))  # about 2k values of x reach the sample's j-th
        got = np.flatnonzero(x >= np.partition(sample, len(sample) - j)[len(sample) - j])
        if k <= len(got) <= 32 * k:
            return got
    return np.flatnonzero(x >= np.partition(x, n - k)[n - k])


def largest(x: np.ndarray, k: int) -> np.ndarray:
    """The positions of the ``k`` largest values of ``x``, best first (ties in position order)."""
    got = at_least(x, k)
    return got[np.lexsort((got, -x[got]))][:k]
