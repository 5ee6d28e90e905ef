"""Ranking: the BM25 neighbour window finds needs whose words are split across adjacent entries."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.ranking import (
    DEFAULT_PARAMS,
    LexicalIndex,
    fuse,
    tokenize,
)


def _write(root) -> None:
    (root.path / "MEMORY.md").write_text(
        "# Memory {#mem}\n\n"
        "## Chat {#chat}\n\n"
        "- `q1` Ana: which database did the team pick? → []\n"
        "- `a1` Bo: we chose postgres for the ledger. → []\n"
        "- `x1` Bo: the weather was lovely today. → []\n"
        "- `x2` Ana: lunch was pasta again. → []\n"
        "- `x3` Bo: the printer jammed twice. → []\n"
        "- `x4` Ana: the database migration is scheduled. → []\n",
        encoding="utf-8")


def test_window_joins_words_of_adjacent_entries(root):
    _write(root)
    corpus = load_corpus(root.path)
    ids = [e.id for e in corpus.entries]
    idx = LexicalIndex.build(corpus, DEFAULT_PARAMS, "k")
    assert idx.window is not None and idx.window_weight == DEFAULT_PARAMS.window_weight
    q = tokenize("team database postgres")
    own = idx.own_scores(q)
    both = idx.scores(q)
    # the answer holds one word of the need; with its neighbour's words it beats the far mention
    assert both[ids.index("a1")] > both[ids.index("x4")]
    assert both.max() <= 1 + DEFAULT_PARAMS.window_weight + 1e-6  # each part normalised to its best
    assert own[ids.index("x1")] == 0 and both[ids.index("x1")] > 0  # borrowed from its neighbour only


def test_window_stops_at_the_span(root):
    _write(root)
    corpus = load_corpus(root.path)
    ids = [e.id for e in corpus.entries]
    params = replace(DEFAULT_PARAMS, lexical_window=1)
    window = LexicalIndex.build(corpus, params, "k").window
    assert window is not None
    assert window.own_scores(tokenize("postgres"))[ids.index("q1")] > 0  # the next entry's words
    assert window.own_scores(tokenize("weather"))[ids.index("q1")] == 0  # two steps away
    assert window.own_scores(tokenize("weather"))[ids.index("a1")] > 0


def test_round_trip_keeps_the_window(root):
    _write(root)
    corpus = load_corpus(root.path)
    idx = LexicalIndex.build(corpus, DEFAULT_PARAMS, "k")
    back = LexicalIndex.loads(idx.dumps())
    assert back is not None and back.window is not None
    q = tokenize("database postgres")
    assert np.allclose(back.scores(q), idx.scores(q))


def test_no_window_is_the_plain_index(root):
    _write(root)
    corpus = load_corpus(root.path)
    plain = replace(DEFAULT_PARAMS, lexical_window=0)
    idx = LexicalIndex.build(corpus, plain, "k")
    assert idx.window is None
    back = LexicalIndex.loads(idx.dumps())
    assert back is not None and back.window is None
    q = tokenize("database")
    assert np.allclose(idx.scores(q), idx.own_scores(q))


def test_capitalised_words_inside_the_need_count_twice():
    from rmtui.engine.retrieval.ranking import query_tokens

    toks = query_tokens("Trips Caroline took to Sweden? Later she left.", DEFAULT_PARAMS)
    assert toks.count(tokenize("caroline")[0]) == 2
    assert toks.count(tokenize("sweden")[0]) == 2
    assert toks.count(tokenize("trips")[0]) == 1  # starts the need: not a proper noun
    assert toks.count(tokenize("later")[0]) == 1  # starts a sentence: not a proper noun
    plain = query_tokens("When did Caroline move?", replace(DEFAULT_PARAMS, proper_noun_repeat=1))
    assert plain == tokenize("When did Caroline move?")


def test_proper_noun_emphasis_ranks_the_named_entry_first(root):
    from rmtui.engine.retrieval.ranking import query_tokens

    (root.path / "MEMORY.md").write_text(
        "# Memory {#mem}\n\n"
        "- `n1` the Orion plan is late → []\n"
        "- `n2` the backup plan is drafted and the backup tested → []\n",
        encoding="utf-8")
    corpus = load_corpus(root.path)
    params = replace(DEFAULT_PARAMS, lexical_window=0)
    idx = LexicalIndex.build(corpus, params, "k")
    ids = [e.id for e in corpus.entries]
    need = "which backup plan mentions Orion"
    emph = idx.scores(query_tokens(need, params))
    assert ids[int(np.argmax(emph))] == "n1"
    flat = idx.scores(query_tokens(need, replace(params, proper_noun_repeat=1)))
    assert ids[int(np.argmax(flat))] == "n2"  # without the emphasis two matched words win


def test_fusion_lends_neighbours_and_headings_what_a_plain_reading_says(root):
    """Each entry borrows a share of its neighbours' scores (halved per further step) and of the
    best score under its heading; checked against a reading of that rule entry by entry."""
    (root.path / "MEMORY.md").write_text(
        "# Memory {#mem}\n\n- `top` a note above every heading → []\n\n"
        + "".join(f"## Part {h} {{#h{h}}}\n\n"
                  + "".join(f"- `n{h}-{i}` note {i} of part {h} → []\n" for i in range(h + 1)) + "\n"
                  for h in range(5)),
        encoding="utf-8")
    corpus = load_corpus(root.path)
    prev, nxt, group = corpus.neighbour_arrays()
    assert len(set(group.tolist())) == 6  # five headings and the top level
    rng = np.random.default_rng(4)
    for span in (1, 2, 3):
        params = replace(DEFAULT_PARAMS, neighbour_span=span, fusion="weighted")
        for _ in range(20):
            lex = (rng.random(len(corpus.entries)) * (rng.random(len(corpus.entries)) < 0.5)).astype(np.float32)
            dense = rng.normal(0.2, 0.3, len(corpus.entries)).astype(np.float32)
            base = params.lexical_weight * (lex / lex.max() if lex.max() > 0 else lex) \
                + (1 - params.lexical_weight) * np.clip(dense, 0, None)
            smoothed = []
            for i in range(len(base)):
                s, p, n, w = float(base[i]), int(prev[i]), int(nxt[i]), params.neighbour_weight
                for _ in range(span):
                    s += w * ((base[p] if p >= 0 else 0.0) + (base[n] if n >= 0 else 0.0))
                    p, n, w = (int(prev[p]) if p >= 0 else -1), (int(nxt[n]) if n >= 0 else -1), w / 2
                smoothed.append(s)
            best = {g: max([0.0] + [smoothed[j] for j in range(len(base)) if group[j] == g])
                    for g in set(group.tolist())}
            want = [smoothed[i] + params.heading_weight * best[int(group[i])] for i in range(len(base))]
            assert np.allclose(fuse(corpus, lex, dense, params), want, rtol=1e-5, atol=1e-6)
