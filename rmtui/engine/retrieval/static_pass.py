"""The static first pass: a dense score for every passage while the transformer index is incomplete.

A new root's first answers used to see the transformer's (MiniLM's) vectors for the few
passages embedded so far and nothing for the rest, which were ranked by BM25 alone. With
``embedding.first_pass = "static"`` every passage also gets a static vector
(``modelhost/static_model.py``): all of them in seconds, cached like the transformer's by
(model identity, text hash) in a file of their own, written by the first call or the
background indexer, whichever comes first.

The two models' cosines are on different scales, so they are never compared or mixed as
numbers: while the transformer index is incomplete, a passage it has embedded keeps its
transformer cosine, and every other passage gets the transformer cosine of the same *rank*
(its static score's rank among all passages, read off the distribution of the transformer
cosines embedded so far). The dense channel thus keeps the transformer's scale, which the
fusion weights, the relevance gate and the second stage were fitted on. Once the
transformer index is complete the static pass is not consulted (nor its model imported).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rmtui.engine.errors import UsageError
from rmtui.engine.retrieval.vectors import VectorCache

#: The values of ``embedding.first_pass``: ``off`` (a new root's missing passages have no
#: dense score until the index completes) or ``static``.
FIRST_PASSES = ("off", "static")
#: Transformer cosines needed before static ranks are mapped onto their distribution;
#: with fewer, the static cosines are used as they are (one model only, never mixed).
MIN_REFERENCE = 8


def check_first_pass(value: str) -> str:
    if value not in FIRST_PASSES:
        raise UsageError(f"embedding.first_pass must be one of {', '.join(map(repr, FIRST_PASSES))}, not {value!r}")
    return value


@dataclass
class StaticPass:
    """The static vectors of one key set and the model that made them."""

    cache: VectorCache
    embedder: object  # modelhost.static_model.StaticEmbedder
    filled: int  # passages embedded by this call

    def scores(self, keys: np.ndarray, need: str) -> np.ndarray:
        """The static cosine of ``need`` with each passage (0 where a vector is missing)."""
        q = self.embedder.embed([need])[0]  # type: ignore[attr-defined]
        out, _ = self.cache.scores(keys, q)
        return out


def fill_static(cache_dir: Path, keys: np.ndarray, part) -> StaticPass:
    """Embed every passage the static cache lacks (``part(i)``: the text of passage ``i``)."""
    from rmtui.engine.retrieval.modelhost.static_model import identity, static_embedder

    embedder = static_embedder()
    cache = VectorCache.open(cache_dir, identity())
    _, missing = cache.rows(keys)
    if not missing:
        return StaticPass(cache, embedder, 0)
    blob = keys.tobytes()
    todo: dict[bytes, str] = {}
    for i in missing:
        k = blob[32 * i:32 * i + 32]
        if k not in todo:
            todo[k] = part(i)
    vecs = embedder.embed(list(todo.values()))
    cache.add(dict(zip(todo, vecs, strict=True)), [blob[i:i + 32] for i in range(0, len(blob), 32)])
    return StaticPass(cache, embedder, len(todo))


def blend(dense: np.ndarray, missing: list[int], static: np.ndarray) -> np.ndarray:
    """Per passage: the transformer cosine where it exists (``dense``, ``missing`` its gaps),
    else the transformer cosine at the static score's rank (see the module's docstring)."""
    if not missing:
        return dense
    out = np.array(dense, dtype=np.float32)
    have = np.ones(len(dense), dtype=bool)
    have[missing] = False
    reference = np.sort(out[have])
    if len(reference) < MIN_REFERENCE:
        out[~have] = static[~have]
        return out
    # each passage's static rank among all passages, as a quantile in (0, 1)
    ranks = np.empty(len(static), dtype=np.float64)
    ranks[np.argsort(static, kind="stable")] = np.arange(len(static))
    at = (ranks[~have] + 0.5) / len(static)
    mapped = np.interp(at, (np.arange(len(reference)) + 0.5) / len(reference), reference)
    # beyond the reference's ends interp repeats its last value: a trace of the rank keeps order there
    out[~have] = (mapped + 1e-6 * at).astype(np.float32)
    return out
