"""The learned second stage: features per candidate, a re-order of the head only, and off-switches."""

from __future__ import annotations

import importlib
import tempfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmtui.engine.errors import EngineError
from rmtui.engine.memory.roots import init_root
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.retrieval import stage2, stage2_weights
from rmtui.engine.retrieval.corpus import Corpus, load_corpus
from rmtui.engine.retrieval.ranking import fuse, tokenize
from rmtui.engine.retrieval.retrieve import first_stage, params_from_config, search
from rmtui.engine.retrieval.stage2_model import Weights

CHAT = [
    ("q1", "Ana: which database did the team pick for the ledger?"),
    ("a1", "Bo: we chose postgres, after a long week of benchmarks and a vote in the team meeting."),
    ("x1", "Bo: the weather was lovely today."),
    ("x2", "Ana: lunch was pasta again."),
    ("x3", "Bo: the printer jammed twice."),
    ("x4", "Ana: the database migration is scheduled."),
    ("x5", "Bo: ledger totals are reconciled nightly."),
    ("x6", "Ana: postgres upgrade went fine."),
]


def _write(root) -> None:
    lines = [f"- `{i}` {t} → []" for i, t in CHAT]
    (root.path / "MEMORY.md").write_text("# Memory {#mem}\n\n## Chat {#chat}\n\n" + "\n".join(lines) + "\n",
                                         encoding="utf-8")


def _ids(outcome) -> list[str]:
    return [outcome.corpus.entries[r.index].id for r in outcome.ranked]


def test_features_one_row_per_candidate(root, plain_backend):
    _write(root)
    corpus = load_corpus(root.path)
    params = params_from_config(root.config())
    first = first_stage(root, "which database for the ledger", corpus=corpus, backend=plain_backend, params=params)
    assert first.mode == "hybrid" and first.signals is not None
    fused = fuse(corpus, first.lexical, first.dense, params)
    cand = stage2.candidates(fused)
    assert len(cand) == len(CHAT)  # fewer entries than the pool: all of them
    states = stage2.token_states(first.signals, cand)
    assert states is not None and len(states) == len(CHAT)  # the in-process model gives token states
    x = stage2.features(corpus, first.signals, fused, cand, states)
    names = stage2.FEATURES + stage2.TOKEN_FEATURES
    assert x.shape == (len(CHAT), len(names)) and np.isfinite(x).all()
    assert np.array_equal(stage2.features(corpus, first.signals, fused, cand), x[:, :len(stage2.FEATURES)])
    col = {f: x[:, i] for i, f in enumerate(names)}
    assert np.all(np.diff(col["fused"]) <= 1e-6)  # candidates come best first
    ids = [corpus.entries[i].id for i in cand.tolist()]
    assert col["coverage"][ids.index("q1")] == pytest.approx(1.0)  # holds every word of the need
    assert col["coverage"][ids.index("x2")] == 0.0
    assert col["first"][0] == pytest.approx(1.0, abs=1e-5)  # the best candidate's vector, unit length
    assert col["length"][ids.index("a1")] > col["length"][ids.index("x3")]
    assert not col["lead"].any()  # no name of a lead ("Ana", "Bo") in the need
    # MaxSim: the turn holding the need's words matches them token by token, the printer does not
    assert col["maxsim"][ids.index("q1")] > col["maxsim"][ids.index("x3")] + 0.1
    assert 0 < col["maxsim"].max() <= 1.0
    # every feature also comes times the pool's thread (mean coherence with the node before)
    t = stage2.thread(col["coherence_prev"])
    assert t == pytest.approx(float(col["coherence_prev"].mean()) - stage2.THREAD_CENTRE, abs=1e-6)
    for f in stage2.BASE + ("maxsim",):
        assert np.allclose(col[f"{f}*thread"], col[f] * np.float32(t), atol=1e-6), f


THREAD = [  # one conversation: each turn follows from the one before
    "Ana: should the ledger move from mysql to postgres?",
    "Bo: postgres would give the ledger proper transactions.",
    "Ana: then we plan the ledger migration to postgres next sprint.",
    "Bo: I will draft the postgres migration plan for the ledger.",
    "Ana: the migration plan should cover ledger backups in postgres.",
    "Bo: postgres backups for the ledger run nightly after the migration.",
]
FACTS = [  # separate facts: a node says nothing about the one before it
    "The printer on floor two jams on thick paper.",
    "Postgres listens on port 5432 by default.",
    "Lunch orders close at eleven on Fridays.",
    "The ledger totals are reconciled nightly.",
    "Badges are renewed every January.",
    "The staging cluster runs in Frankfurt.",
]


def _thread_of(tmp_path, name, texts, backend) -> float:
    from rmtui.engine.memory.roots import init_root

    root = init_root(tmp_path / name)
    lines = [f"- `{name}-{i}` {t} → []" for i, t in enumerate(texts)]
    (root.path / "MEMORY.md").write_text("# Memory {#mem}\n\n## Notes {#notes}\n\n" + "\n".join(lines) + "\n",
                                         encoding="utf-8")
    corpus = load_corpus(root.path)
    params = params_from_config(root.config())
    first = first_stage(root, "postgres ledger migration", corpus=corpus, backend=backend, params=params)
    assert first.signals is not None
    fused = fuse(corpus, first.lexical, first.dense, params)
    cand = stage2.candidates(fused)
    x = stage2.features(corpus, first.signals, fused, cand)
    return stage2.thread(x[:, stage2.FEATURES.index("coherence_prev")])


def test_thread_tells_a_conversation_from_a_list_of_facts(tmp_path, plain_backend):
    conversation = _thread_of(tmp_path, "talk", THREAD, plain_backend)
    facts = _thread_of(tmp_path, "facts", FACTS, plain_backend)
    assert conversation > facts + 0.1
    assert stage2.thread(np.zeros(0, dtype=np.float32)) == 0.0  # no candidates: no lean either way
    # a pool far outside what the fit saw (a few nodes, most first under their heading) is
    # read as the farthest the fit saw, not extrapolated
    for w in (stage2_weights.PLAIN, stage2_weights.TOKENS):
        low, high = w.thread_span
        assert -0.3 < low < 0 < high < 0.3  # the fitted pools: lists of facts below, conversations above
        assert stage2.thread(np.zeros(9, dtype=np.float32), w.thread_span) == low
        assert stage2.thread(np.ones(9, dtype=np.float32), w.thread_span) == high
        centre = np.full(9, stage2.THREAD_CENTRE, dtype=np.float32)
        assert stage2.thread(centre, w.thread_span) == pytest.approx(0.0, abs=1e-6)


def test_lead_label_and_maxsim():
    corpus = Corpus.__new__(Corpus)
    texts = ["Bo: the ledger is in postgres", "Ana: Bo said the ledger is in postgres", "no lead here: Bo",
             "A sentence that goes on far too long before its colon: Bo", "Bo said:the ledger",
             "**Bo:** the ledger", "Staging DB: moved to port 5433"]
    corpus.entries = [SimpleNamespace(kind="node", text=t) for t in texts]  # type: ignore[misc]
    corpus.entries.append(SimpleNamespace(kind="heading", text="Bo: a heading"))  # type: ignore[attr-defined]
    cand = np.arange(len(corpus.entries))
    hits = stage2.lead_hits(corpus, tokenize("What did Bo say?"), cand)
    # Bo's own notes (markup aside); not one that names him after the lead, a long prefix, a
    # colon inside a word run, or a heading
    assert hits.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert stage2.lead_hits(corpus, tokenize("the staging database port"), cand).tolist()[6] == 1.0
    need = np.eye(4, dtype=np.float32)[:2]  # two need tokens
    states = [np.asarray([[127, 0, 0, 0], [0, 127, 0, 0]], np.int8),  # both matched exactly
              np.asarray([[127, 0, 0, 0]], np.int8),  # one of the two
              np.zeros((0, 4), np.int8)]  # no tokens at all
    assert stage2.maxsim(need, states).tolist() == pytest.approx([1.0, 0.5, 0.0])


def test_second_stage_orders_the_head_by_its_weights(root, plain_backend, monkeypatch):
    _write(root)
    corpus = load_corpus(root.path)
    cfg = root.config()
    need = "which database for the ledger"
    before = search(root, need, top=5, corpus=corpus, backend=plain_backend, cfg=cfg,
                    params=replace(params_from_config(cfg), learned=False))
    # the token model values long entries, the plain one short ones: which one ran shows in the order
    monkeypatch.setattr(stage2_weights, "TOKENS", _only_length(stage2.FEATURES + stage2.TOKEN_FEATURES, 1.0))
    monkeypatch.setattr(stage2_weights, "PLAIN", _only_length(stage2.FEATURES, -1.0))
    after = search(root, need, top=5, corpus=corpus, backend=plain_backend, cfg=cfg)
    text = {e.id: e.text for e in corpus.entries}
    lengths = [len(text[i]) for i in _ids(after)]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] == max(len(t) for t in text.values())
    assert _ids(after) != _ids(before)
    # a model host without token states (a foreign RightMemory service): the plain weights
    vectors_only = SimpleNamespace(info=plain_backend.info, embed=plain_backend.embed, rerank=plain_backend.rerank)
    plain = search(root, need, top=5, corpus=corpus, backend=vectors_only, cfg=cfg)
    lengths = [len(text[i]) for i in _ids(plain)]
    assert lengths == sorted(lengths) and lengths[0] == min(len(t) for t in text.values())
    # weights fitted for other features are not applied: the first stage stands
    for name in ("TOKENS", "PLAIN"):
        monkeypatch.setattr(stage2_weights, name, Weights(("something", "else"), (0, 0), (1, 1), (1, 1), (-0.1, 0.1)))
    again = search(root, need, top=5, corpus=corpus, backend=plain_backend, cfg=cfg)
    assert _ids(again) == _ids(before)


def _only_length(names: tuple[str, ...], sign: float) -> Weights:
    coef = tuple(sign if f == "length" else 0.0 for f in names)
    return Weights(names, (0.0,) * len(names), (1.0,) * len(names), coef, (-0.1, 0.1))


def test_lexical_only_keeps_the_first_stage(root):
    _write(root)
    corpus = load_corpus(root.path)
    cfg = root.config()
    first = first_stage(root, "postgres", corpus=corpus, backend=None, params=params_from_config(cfg))
    assert first.mode == "lexical" and first.signals is None
    out = search(root, "postgres", top=3, corpus=corpus, backend=None, cfg=cfg)
    assert set(_ids(out)[:2]) == {"a1", "x6"}


def test_config_switch(root):
    assert params_from_config(root.config()).learned is True
    (root.path / "rmtui.toml").write_text("[retrieve]\nlearned_rerank = false\n", encoding="utf-8")
    assert params_from_config(root.config()).learned is False
    (root.path / "rmtui.toml").write_text('[retrieve]\nlearned_rerank = "yes"\n', encoding="utf-8")
    with pytest.raises(EngineError, match="learned_rerank"):
        root.config()


@given(st.lists(st.sampled_from([0.0, 0.0, 0.1, 0.5, 0.5, 0.9, 1.0, 2.5]), min_size=1, max_size=200), st.data())
def test_log_rank_counts_every_higher_entry(values, data):
    """The subset sort answers what a sort of every entry answers, ties and zeros included."""
    x = np.asarray(values, dtype=np.float32)
    cand = np.asarray(data.draw(st.lists(st.integers(0, len(x) - 1), min_size=1, max_size=60)), dtype=np.int64)
    want = np.log1p(np.asarray([(x > x[i]).sum() for i in cand], dtype=np.float32))
    assert np.array_equal(stage2._log_rank(x, cand), want)


#: Ways memory notes put what a note is about: a lead label, inside the sentence, last, in
#: markup, nowhere (the heading above holds it).
NOTE_FORMATS = (
    lambda name, text: f"{name}: {text}",
    lambda name, text: f"{name} said that {text}",
    lambda name, text: f"{text} ({name})",
    lambda name, text: f"**State:** {text} {name}",
    lambda name, text: text,
)
WORDS = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters="'-/."), min_size=1, max_size=12)
PROSE = st.lists(WORDS, min_size=1, max_size=14).map(" ".join)
NOTE = st.tuples(st.integers(0, len(NOTE_FORMATS) - 1), WORDS, PROSE, st.sampled_from(("", ":", ";", "!", "?", ",")))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(NOTE, min_size=1, max_size=12), st.lists(WORDS, min_size=1, max_size=6).map(" ".join),
       st.booleans())
def test_any_note_format_gets_a_reorder_of_the_first_stage_head(plain_backend, notes, need, headed):
    """Whatever the notes look like -- any script, labels anywhere or nowhere, punctuation, under
    a heading or not -- the second stage only re-orders the first stage's candidates: every
    feature is finite, no entry is dropped or repeated, and the shown results come from the pool."""
    with tempfile.TemporaryDirectory() as tmp:
        root = init_root(Path(tmp) / "root")
        lines = ["# Memory {#mem}", ""]
        for i, (fmt, name, text, mark) in enumerate(notes):
            if headed and i % 4 == 0:
                lines += ["", f"## {name} {{#h{i}}}", ""]
            lines.append(f"- `n{i}` {NOTE_FORMATS[fmt](name, text)}{mark} → []")
        (root.path / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert validate_root(root.path).ok
        corpus = load_corpus(root.path)
        params = params_from_config(root.config())
        first = first_stage(root, need, corpus=corpus, backend=plain_backend, params=params)
        assert first.signals is not None
        fused = fuse(corpus, first.lexical, first.dense, params)
        cand = stage2.candidates(fused)
        x = stage2.features(corpus, first.signals, fused, cand, stage2.token_states(first.signals, cand))
        assert x.shape[0] == len(cand) and np.isfinite(x).all()
        cfg = root.config()
        off = search(root, need, top=len(notes), corpus=corpus, backend=plain_backend, cfg=cfg,
                     params=replace(params, learned=False))
        on = search(root, need, top=len(notes), corpus=corpus, backend=plain_backend, cfg=cfg)
        ids = _ids(on)
        assert len(ids) == len(set(ids)) and all(np.isfinite(r.score) for r in on.ranked)
        pool = {corpus.entries[i].id for i in cand}
        assert set(ids) <= pool and len(ids) == len(_ids(off))


def test_time_rules_read_a_stated_time_and_a_need_that_asks_when():
    from rmtui.engine.retrieval.stage2_time import asks_time, dated

    for text in ("Ana moved to Berlin last March.", "I went to a support group yesterday", "We met 3 weeks ago",
                 "the cluster was rebuilt in 2022", "Staging moved on Friday", "for a few years now",
                 "next summer we go camping", "Released in May", "back in a couple of months"):
        assert dated(text), text
    # "may" the verb, a unit of time without a count, a number that is no year: no time stated
    for text in ("you may use the cache", "it takes years to learn", "listen on port 5433", "Ana likes Berlin",
                 "our one-year-old is cute"):
        assert not dated(text), text
    for need in ("When did Ana move to Berlin?", "how long has staging run on 5433", "What year did Bo start?",
                 "Ana and Bo. When did they meet?"):
        assert asks_time(need), need
    for need in ("the build fails when the cache is cold", "what did Ana choose", "Where did Bo move from?"):
        assert not asks_time(need), need


DATED = [
    ("t1", "Ana moved to Berlin last March, after the offer came through."),
    ("t2", "Ana loves Berlin and its parks, and moved her whole studio there."),
    ("t3", "Bo: the ledger is in postgres."),
]


def test_time_features_mark_the_node_that_says_when_for_a_need_that_asks_when(root, plain_backend):
    lines = [f"- `{i}` {t} → []" for i, t in DATED]
    (root.path / "MEMORY.md").write_text("# Memory {#mem}\n\n## Notes {#notes}\n\n" + "\n".join(lines) + "\n",
                                         encoding="utf-8")
    corpus = load_corpus(root.path)
    params = params_from_config(root.config())
    for need, asks in (("When did Ana move to Berlin?", True), ("Why did Ana move to Berlin?", False)):
        first = first_stage(root, need, corpus=corpus, backend=plain_backend, params=params)
        assert first.signals is not None and first.signals.asks_time is asks
        fused = fuse(corpus, first.lexical, first.dense, params)
        cand = stage2.candidates(fused)
        x = stage2.features(corpus, first.signals, fused, cand)
        ids = [corpus.entries[i].id for i in cand.tolist()]
        col = {f: dict(zip(ids, x[:, stage2.FEATURES.index(f)].tolist(), strict=True)) for f in ("dated", "dated_when")}
        assert col["dated"] == {"t1": 1.0, "t2": 0.0, "t3": 0.0}
        assert col["dated_when"] == {"t1": float(asks), "t2": 0.0, "t3": 0.0}


def test_a_fit_over_fewer_features_reorders_on_its_own_columns(root, plain_backend, monkeypatch):
    """An earlier fit, made before a feature was added, still re-orders (the benches score it
    beside today's); weights naming a feature the code does not compute are not applied."""
    _write(root)
    corpus = load_corpus(root.path)
    cfg = root.config()
    need = "which database for the ledger"
    fewer = tuple(f for f in stage2.FEATURES if not f.startswith("named_subject"))
    monkeypatch.setattr(stage2_weights, "TOKENS", _only_length(fewer + stage2.TOKEN_FEATURES, 1.0))
    monkeypatch.setattr(stage2_weights, "PLAIN", _only_length(fewer, 1.0))
    out = search(root, need, top=5, corpus=corpus, backend=plain_backend, cfg=cfg)
    text = {e.id: e.text for e in corpus.entries}
    lengths = [len(text[i]) for i in _ids(out)]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] == max(len(t) for t in text.values())


def test_an_embedding_model_with_weights_of_its_own_is_ranked_by_them(root, plain_backend, monkeypatch):
    """Cosines spread differently from one model to another, so a model named in
    ``stage2.MODEL_WEIGHTS`` reads the weights fitted on its scores, by the name in its identity;
    every other model reads the default ones. Here the same vectors under an mpnet identity."""
    _write(root)
    corpus = load_corpus(root.path)
    cfg = root.config()
    need = "which database for the ledger"
    mpnet = importlib.import_module(f"rmtui.engine.retrieval.{stage2.MODEL_WEIGHTS['all-mpnet-base-v2']}")
    for name, names in (("TOKENS", stage2.FEATURES + stage2.TOKEN_FEATURES), ("PLAIN", stage2.FEATURES)):
        monkeypatch.setattr(stage2_weights, name, _only_length(names, -1.0))  # the default: short entries first
        monkeypatch.setattr(mpnet, name, _only_length(names, 1.0))  # mpnet's: long entries first
    info = plain_backend.info()
    renamed = replace(info, embedding_model="all-mpnet-base-v2@" + info.embedding_model.partition("@")[2])
    as_mpnet = SimpleNamespace(info=lambda: renamed, embed=plain_backend.embed, embed_tokens=plain_backend.embed_tokens,
                               rerank=plain_backend.rerank)
    text = {e.id: e.text for e in corpus.entries}
    for backend, longest_first in ((plain_backend, False), (as_mpnet, True)):
        out = search(root, need, top=5, corpus=corpus, backend=backend, cfg=cfg)
        lengths = [len(text[i]) for i in _ids(out)]
        assert lengths == sorted(lengths, reverse=longest_first)
    for other in ("all-minilm-l6-v2@0123", "my-own-model@4567", ""):
        assert stage2.weights_module(other) == "stage2_weights"


def test_every_models_shipped_weights_fit_the_features():
    for module in {"stage2_weights", *stage2.MODEL_WEIGHTS.values()}:
        w = importlib.import_module(f"rmtui.engine.retrieval.{module}")
        for model, names in ((w.PLAIN, stage2.FEATURES), (w.TOKENS, stage2.FEATURES + stage2.TOKEN_FEATURES)):
            assert tuple(model.features) == names, module
            assert len(model.coef) == len(model.mean) == len(model.scale) == len(names)
            assert all(s > 0 for s in model.scale)
