"""A coarse first pass over a large vector matrix, for a process that retrieves many times.

Scoring every passage of a 50,000-node root exactly reads its whole 77 MB matrix on every
call: about 7 ms here, bound by memory bandwidth, a third of a warm retrieve. A long-lived
process (the warm service, the MCP server) therefore keeps the matrix projected on its
:data:`DIM` main directions (a quarter of the bytes). A retrieve scores every passage on the
projection, then scores exactly:

- the :data:`RESCORED` best passages by that coarse score;
- the passages the caller adds around the best of them (the retriever adds the lexical
  leaders, which fusion may lift, and the neighbours each of them borrows score from).

The other passages keep their coarse score. Measured on a 50,000-node root over 270 needs
(``bench/retrieve_speed.py`` prints the agreement it sees): the coarse score is off by 0.002
on average, no passage of a need's true top 50 ranked below 714th by its coarse score, and
the shown results matched the exact scan's. Below :data:`COARSE_ROWS` rows the exact scan
is cheap and always used. The projection is built in a background thread once the same
matrix is scored a second time, so a one-shot CLI call never pays for it, or as soon as a
front warms up (the MCP server); calls before it is ready scan exactly. See
docs/architecture.md, "Retrieval at 50,000 nodes".
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rmtui.engine.retrieval.topk import at_least

#: Rows from which a long-lived process scores on the projection first.
COARSE_ROWS = 20_000
#: Directions kept (of 384 for the default model): 98 % of the variance of a 50,000-node root.
DIM = 96
#: Passages rescored exactly, by coarse score (a true top-50 passage was seen down to 714th).
RESCORED = 1024
#: The best passages (after rescoring) whose neighbours fusion reads: more than the second
#: stage's candidate pool.
BEST = 256
#: Rows the directions are computed from (evenly spaced through the matrix).
SAMPLE = 8192


#: Given the best positions (scored exactly), the positions to score exactly as well: the
#: passages whose exact score fusion also reads.
Widen = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Projection:
    """A matrix on its main directions."""

    basis: np.ndarray  # dim x k, orthonormal columns
    rows: np.ndarray  # n x k: the matrix times the basis


def project(matrix: np.ndarray, dim: int | None = None) -> Projection:
    """The top ``dim`` (:data:`DIM`) eigenvectors of the rows' second moment (not centred: it
    approximates dot products, so the rows' shared direction is worth keeping), and the rows
    on them."""
    dim = DIM if dim is None else dim
    sample = matrix[::max(1, len(matrix) // SAMPLE)]
    _, vecs = np.linalg.eigh(sample.T.astype(np.float64) @ sample)
    basis = np.ascontiguousarray(vecs[:, ::-1][:, :dim], dtype=np.float32)
    rows = matrix @ basis
    if not (np.isfinite(basis).all() and np.isfinite(rows).all()):  # one bad row would spoil every score
        raise ValueError("rows that are not finite: no projection")
    return Projection(basis, rows)


def scores(proj: Projection, matrix: np.ndarray, query: np.ndarray, rows: np.ndarray,
           widen: Widen | None = None) -> np.ndarray:
    """The score of each of ``rows`` (rows of ``matrix``) for ``query``: exact for the best
    :data:`RESCORED` by coarse score (and for the positions ``widen`` adds to the best
    :data:`BEST` of those), coarse for the rest."""
    q = np.asarray(query, dtype=np.float32)
    if len(rows) <= RESCORED:
        return matrix[rows] @ q
    out = (proj.rows @ (proj.basis.T @ q))[rows]
    top = at_least(out, RESCORED)
    out[top] = np.take(matrix, rows[top], axis=0) @ q  # take: the same rows, a faster gather
    if widen is not None:  # what fusion reads around the best, exactly too
        more = np.setdiff1d(widen(top[at_least(out[top], BEST)]), top, assume_unique=True)
        out[more] = np.take(matrix, rows[more], axis=0) @ q
    return out


def worth_it(matrix: np.ndarray) -> bool:
    """Whether a coarse pass saves anything: many rows, and more columns than it keeps."""
    return matrix.ndim == 2 and len(matrix) >= COARSE_ROWS and matrix.shape[1] > DIM


class Slot:
    """The projection of one matrix: built in the background when asked for a second time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asks = 0
        self._built: Projection | None = None
        self._thread: threading.Thread | None = None

    def get(self, matrix: np.ndarray) -> Projection | None:
        """The projection when built; None (scan exactly) before, or for a small matrix."""
        if not worth_it(matrix):
            return None
        with self._lock:
            if self._built is not None or self._thread is not None:
                return self._built
            self._asks += 1
            if self._asks >= 2:
                self._start(matrix)
        return None

    def start(self, matrix: np.ndarray) -> None:
        """Build the projection in the background now (a front warming up knows it is long-lived)."""
        if worth_it(matrix):
            with self._lock:
                if self._built is None and self._thread is None:
                    self._start(matrix)

    def _start(self, matrix: np.ndarray) -> None:  # under the lock
        self._thread = threading.Thread(target=self._build, args=(matrix,), name="rmtui-coarse", daemon=True)
        self._thread.start()

    def _build(self, matrix: np.ndarray) -> None:
        try:
            built = project(matrix)
        except (np.linalg.LinAlgError, ValueError, MemoryError):
            return  # no projection: this matrix keeps being scanned exactly
        with self._lock:
            self._built = self._built or built

    def build(self, matrix: np.ndarray) -> Projection | None:
        """The projection now, or None for a small matrix; waits for a build already under way
        rather than starting another."""
        if not worth_it(matrix):
            return None
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()
        if self._built is None:
            self._build(matrix)
        return self._built


def scan(matrix: np.ndarray, query: np.ndarray, rows: np.ndarray, slot: Slot | None,
         widen: Widen | None = None) -> np.ndarray:
    """The scores of ``rows`` for ``query``: on the projection when ``slot`` has one, else exact."""
    proj = slot.get(matrix) if slot is not None else None
    q = np.asarray(query, dtype=np.float32)
    if proj is None:
        return (matrix @ q)[rows]
    return scores(proj, matrix, q, rows, widen)
