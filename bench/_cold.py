"""A bench root as a new root's first answers see it: the model's index incomplete.

Why: on a 10,000-node root the first call embeds what its budget allows (about a tenth of
the passages, the shortest first, as ``fill_vectors`` orders a query's work) and leaves the
rest to the background indexer; a call made while the indexer runs embeds only the need. A
bench root is small enough to be embedded in a few seconds, so that state is made, not
waited for: a copy of a fully indexed root whose model caches hold only the shortest
``fraction`` of its passages (vectors and token states, as a call stores them). Each question
is then asked with the deadline already past (nothing more is embedded), with
``embedding.first_pass`` off (today's first answer) or ``static``.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.retrieval.corpus import Corpus, load_corpus
from rmtui.engine.retrieval.retrieve import dense_index, params_from_config, search
from rmtui.engine.retrieval.tokens import TokenStore
from rmtui.engine.retrieval.vectors import VectorCache

#: The first passes compared, by ``embedding.first_pass``.
PASSES = ("off", "static")


def cold_copy(root: MemoryRoot, backend, fraction: float, dest: Path) -> tuple[MemoryRoot, Corpus]:
    """A copy of the fully indexed ``root`` at ``dest`` whose model caches hold the vectors and
    token states of only the shortest ``fraction`` of its distinct passages."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(root.path, dest, symlinks=True, ignore=shutil.ignore_patterns("cache"))
    cold = MemoryRoot(dest)
    corpus = load_corpus(cold.path)
    params = params_from_config(cold.config())
    ident = backend.info().embedding_model
    index = dense_index(corpus, params, root.runtime / "cache")
    blob = index.keys.tobytes()
    texts: dict[bytes, str] = {}
    for i in range(len(index.keys)):
        texts.setdefault(blob[32 * i:32 * i + 32], index.part(i))
    keep = sorted(texts, key=lambda k: len(texts[k]))[:round(fraction * len(texts))]
    if keep:
        full_vecs, _ = VectorCache.open(root.runtime / "cache", ident).lookup(keep)
        VectorCache.open(cold.runtime / "cache", ident).add(dict(zip(keep, full_vecs, strict=True)))
        states = TokenStore.open(root.runtime / "cache", ident).get(keep)
        TokenStore.open(cold.runtime / "cache", ident).add(
            {k: s for k, s in zip(keep, states, strict=True) if s is not None})
    return cold, corpus


def cold_ranks(cold: MemoryRoot, corpus: Corpus, backend, need: str, first_pass: str) -> list[str]:
    """The top 10 ids of a first answer on ``cold`` (nothing embedded but the need)."""
    cfg = cold.config()
    params = replace(params_from_config(cfg), first_pass=first_pass)
    out = search(cold, need, top=10, corpus=corpus, backend=backend, cfg=cfg, params=params,
                 deadline=time.monotonic())
    return [corpus.entries[r.index].id for r in out.ranked]


def print_cold(label: str, rows: dict[tuple[float, str], list[tuple[float, float]]], questions: int) -> None:
    """R@5 / R@10 per model coverage and first pass."""
    print(f"\n{label}, first answer with the model's index incomplete ({questions} questions; R@5 / R@10):")
    print("| passages embedded by the model | " + " | ".join(f"first_pass = {p}" for p in PASSES) + " |")
    print("|---|" + "---|" * len(PASSES))
    for fraction in sorted({f for f, _ in rows}):
        cells = []
        for p in PASSES:
            got = rows.get((fraction, p), [])
            cells.append(" / ".join(f"{statistics.fmean(g[i] for g in got):.3f}" for i in (0, 1)) if got else "-")
        print(f"| {fraction:.0%} (shortest first) | {' | '.join(cells)} |", flush=True)


def measure(root: MemoryRoot, backend, fractions: list[float], qs: list[dict], work: Path,
            score: Callable[[list[str], list[str]], tuple[float, float]],
            rows: dict[tuple[float, str], list[tuple[float, float]]]) -> None:
    """Ask every question of ``qs`` on a cold copy of ``root`` per fraction and first pass."""
    for fraction in fractions:
        cold, corpus = cold_copy(root, backend, fraction, work / f"{root.path.name}-cold")
        for p in PASSES:
            for q in qs:
                rows.setdefault((fraction, p), []).append(score(cold_ranks(cold, corpus, backend, q["q"], p),
                                                                q["evidence"]))
