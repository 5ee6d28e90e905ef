"""Index a bench root completely before its first question is asked.

Why: a question asked while vectors or token states are still missing is ranked lexically
(or by the weights without token states) for part of the root, so its figure says nothing
about the ranking. Every bench root is therefore embedded in full, and checked to be, first.
"""

from __future__ import annotations

import time

from rmtui.engine.retrieval.retrieve import search


def index_fully(root, corpus, backend, cfg) -> float:
    """Embed every passage of ``corpus`` (vectors and token states) and return the seconds it
    took; exits naming the gap when the model host left any passage out."""
    t = time.time()
    out = search(root, "warm up", top=10, corpus=corpus, backend=backend, cfg=cfg, deadline=None)
    if out.dense_coverage is not None and out.dense_coverage < 1.0 or out.states_missing:
        raise SystemExit(f"{root.path}: index incomplete before the first question "
                         f"({out.dense_coverage or 0.0:.1%} of passages embedded, "
                         f"{out.states_missing} without token states)")
    return time.time() - t
