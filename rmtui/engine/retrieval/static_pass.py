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
transformer index is complete the static pass is not consulted (nor its model imported),
and a gap of a few passages (an edit) is left to the transformer, as before.
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
#: Transformer cosines needed before static ranks are mapped onto their distribution.
MIN_REFERENCE = 8
#: With fewer, the static cosines alone serve (one model, nothing mixed), at this share of
#: their value: the static model ranks chats worse than BM25 does, so at full weight it
#: would pull down what BM25 alone finds; at a tenth it orders what BM25 scores alike and
#: finds what shares no word with the need (chosen on the development sets: bench/_cold.py).
ALONE_WEIGHT = 0.1
#: The static pass serves only a gap of more passages than this: fewer (a few edited
#: nodes) the model embeds within the query's budget or the indexer within seconds, and
#: loading the static model for them would cost more than it brings.
MIN_GAP = 64


def worth_it(missing: int) -> bool:
    """Whether a gap of ``missing`` passages in the model's index calls for the static pass."""
    return missing > MIN_GAP


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
    else the transformer cosine at the static score's rank (see the module's docstring), or,
    with too few transformer cosines to rank against, :data:`ALONE_WEIGHT` of the static one."""
    if not missing:
        return dense
    out = np.array(dense, dtype=np.float32)
    have = np.ones(len(dense), dtype=bool)
    have[missing] = False
    reference = np.sort(out[have])
    if len(reference) < MIN_REFERENCE:
        out[~have] = ALONE_WEIGHT * static[~have]
        return out
    # each passage's static rank among all passages, as a quantile in (0, 1)
    ranks = np.empty(len(static), dtype=np.float64)
    ranks[np.argsort(static, kind="stable")] = np.arange(len(static))
    at = (ranks[~have] + 0.5) / len(static)
    # the reference's lowest and highest values stand at 0 and 1: every rank falls between
    # two of them, so distinct ranks keep their order (none is clamped to an end)
    out[~have] = np.interp(at, np.linspace(0.0, 1.0, len(reference)), reference).astype(np.float32)
    return out
