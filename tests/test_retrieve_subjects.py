"""Ranking reads a note's subject wherever the note puts it (lead label, tail label, heading,
opening words), and a bare grouping heading does not cut the neighbours of a run of notes."""

from __future__ import annotations

import numpy as np

from rmtui.engine.retrieval import stage2
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.ranking import DEFAULT_PARAMS, dense_text, fuse, tokenize
from rmtui.engine.retrieval.retrieve import first_stage, params_from_config
from rmtui.engine.retrieval.subjects import heading_label, lead_label, subject_label, tail_label

NOTES = """# Project {#proj}

## Staging DB {#staging}

- `s1` moved to port 5433 last week → []
- `s2` Backups: nightly at 02:00 → []

## Build and release {#build}

How the project is built and shipped.

### Ana {#by-ana}

- `a1` we chose postgres for the ledger → []

### Bo {#by-bo}

- `b1` the ledger totals are reconciled nightly → []
- `b2` the release is cut on Fridays (release train) → []

### A long heading that is not a label at all {#long}

- `l1` nothing here names a subject → []
- `l2` Ana said that the ledger moved → []
"""


def _corpus(root):
    (root.path / "MEMORY.md").write_text(NOTES, encoding="utf-8")
    return load_corpus(root.path)


def test_subject_found_in_every_place_a_note_puts_it(root):
    corpus = _corpus(root)
    by = corpus.by_id()
    assert lead_label(by["s2"]) == "Backups" and subject_label(corpus, by["s2"]) == "Backups"
    assert tail_label(by["b2"]) == "release train" and subject_label(corpus, by["b2"]) == "release train"
    assert heading_label(corpus, by["s1"]) == "Staging DB" and subject_label(corpus, by["s1"]) == "Staging DB"
    assert subject_label(corpus, by["a1"]) == "Ana"
    # a long title is a sentence, not a label: the sentence's opening words stand for the subject
    assert heading_label(corpus, by["l1"]) == "" and subject_label(corpus, by["l1"]) == "nothing here names"
    assert subject_label(corpus, by["l2"]) == "Ana said that"
    # the subject hit: "Ana" named by the need, whether she is the lead label or the heading
    ids = [e.id for e in corpus.entries]
    cand = [ids.index("a1"), ids.index("b1"), ids.index("l2"), ids.index("l1")]
    hits = stage2.subject_hits(corpus, tokenize("what did Ana choose"), np.asarray(cand))
    assert hits.tolist() == [1.0, 0.0, 1.0, 0.0]


def test_dense_text_leads_with_a_subject_written_last_or_only_in_its_heading(root):
    corpus = _corpus(root)
    ids = [e.id for e in corpus.entries]
    assert dense_text(corpus, ids.index("a1"), DEFAULT_PARAMS) == "Ana: we chose postgres for the ledger"
    assert (dense_text(corpus, ids.index("b2"), DEFAULT_PARAMS)
            == "release train: the release is cut on Fridays (release train)")
    # a lead label is the subject already; a long heading is no label
    assert dense_text(corpus, ids.index("s2"), DEFAULT_PARAMS) == "Backups: nightly at 02:00"
    assert dense_text(corpus, ids.index("l1"), DEFAULT_PARAMS) == "nothing here names a subject"


def test_bare_grouping_headings_keep_a_run_of_neighbours(root):
    corpus = _corpus(root)
    by = corpus.by_id()
    ids = [e.id for e in corpus.entries]
    # Ana's and Bo's turns sit under bare speaker headings of one section: still neighbours
    assert by["a1"].next == ids.index("b1") and by["b1"].prev == ids.index("a1")
    assert by["b2"].next == ids.index("l1")
    # a heading with text of its own starts a new run: no neighbour across it
    assert by["s2"].next == -1 and by["a1"].prev == -1
    assert by["s1"].next == ids.index("s2")


def test_context_cover_counts_the_need_words_a_nodes_headings_hold(root, plain_backend):
    corpus = _corpus(root)
    ids = [e.id for e in corpus.entries]
    params = params_from_config(root.config())
    first = first_stage(root, "staging port", corpus=corpus, backend=plain_backend, params=params)
    assert first.signals is not None
    cand = np.asarray([ids.index(i) for i in ("s1", "s2", "l1")])
    x = stage2.features(corpus, first.signals, fuse(corpus, first.lexical, first.dense, params), cand)
    heading = x[:, stage2.FEATURES.index("context_cover")].tolist()
    # s1 and s2 sit under "Staging DB" (one of the need's two words, whatever their own text says); l1 does not
    assert 0.0 < heading[0] == heading[1] < 1.0 and heading[2] == 0.0



def test_named_subject_finds_the_needs_name_wherever_the_note_puts_it(root, plain_backend):
    corpus = _corpus(root)
    ids = [e.id for e in corpus.entries]
    params = params_from_config(root.config())
    first = first_stage(root, "What did Ana choose for the ledger?", corpus=corpus, backend=plain_backend,
                        params=params)
    assert first.signals is not None and first.signals.names == {"ana"}
    cand = np.asarray([ids.index(i) for i in ("a1", "l2", "b1", "l1")])
    x = stage2.features(corpus, first.signals, fuse(corpus, first.lexical, first.dense, params), cand)
    # a1 names Ana only in its heading, l2 in its sentence: both are Ana's; b1 is Bo's (and
    # holds "ledger", a word of the need but no name), l1 nobody's
    assert x[:, stage2.FEATURES.index("named_subject")].tolist() == [1.0, 1.0, 0.0, 0.0]
    # a need that names nobody ("How" starts the sentence): no name to find
    plain = first_stage(root, "How are the ledger totals reconciled?", corpus=corpus, backend=plain_backend,
                        params=params)
    assert plain.signals is not None and plain.signals.names == frozenset()
    x = stage2.features(corpus, plain.signals, fuse(corpus, plain.lexical, plain.dense, params), cand)
    assert x[:, stage2.FEATURES.index("named_subject")].tolist() == [0.0] * 4
