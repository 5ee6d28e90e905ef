"""The dense index after a change: each entry's passage keys come back from dense.bin by what
its dense text is made from, so only changed entries' texts are made and hashed, and the keys
(and the texts the indexer embeds) are those of a cold build."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rmtui.engine.retrieval import bm25
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.ranking import DEFAULT_PARAMS
from rmtui.engine.retrieval.retrieve import dense_index
from tests.test_retrieve_incremental import edit, node_line, write_root


def _made(monkeypatch) -> list[int]:
    made: list[int] = []
    real = bm25.doc_keys

    def counting(*a, **kw):
        docs = real(*a, **kw)
        made.append(docs.made)
        return docs

    monkeypatch.setattr("rmtui.engine.retrieval.retrieve.doc_keys", counting)
    return made


def _same_as_cold(index, corpus, params=DEFAULT_PARAMS) -> None:
    cold = dense_index(corpus, params)  # no cache folder: every text made
    assert index.keys.tobytes() == cold.keys.tobytes()
    assert np.array_equal(index.owner, cold.owner)
    assert [index.part(i) for i in range(len(index.owner))] == cold.parts


def test_a_one_node_change_makes_one_dense_text(root, monkeypatch):
    write_root(root.path)
    cache = root.runtime / "cache"
    made = _made(monkeypatch)
    dense_index(load_corpus(root.path), DEFAULT_PARAMS, cache)
    target = node_line(root.path, "MEMORY_area-1.md", 3)
    edit(root.path, "MEMORY_area-1.md", target, target.replace(" → []", " Zyzzyva quokka. → []"))
    corpus = load_corpus(root.path)
    index = dense_index(corpus, DEFAULT_PARAMS, cache)
    assert made[-1] == 1
    _same_as_cold(index, corpus)
    changed = next(i for i in range(len(index.owner)) if "Zyzzyva" in index.part(i))
    assert corpus.entries[int(index.owner[changed])].id == target.split("`")[1]


def test_a_renamed_heading_changes_the_dense_text_of_its_nodes(root, monkeypatch):
    write_root(root.path)
    cache = root.runtime / "cache"
    made = _made(monkeypatch)
    dense_index(load_corpus(root.path), DEFAULT_PARAMS, cache)
    edit(root.path, "MEMORY_area-2.md", "### Topic 2.1 {#t-2-1}", "### Ana {#t-2-1}")  # a short heading: a label
    corpus = load_corpus(root.path)
    index = dense_index(corpus, DEFAULT_PARAMS, cache)
    assert made[-1] == 10  # the ten nodes under it, which now embed as "Ana: ..."
    _same_as_cold(index, corpus)
    assert sum(index.part(i).startswith("Ana: ") for i in range(len(index.owner))) == 10


def test_other_dense_settings_or_a_damaged_file_reuse_nothing(root, monkeypatch):
    write_root(root.path)
    cache = root.runtime / "cache"
    made = _made(monkeypatch)
    corpus = load_corpus(root.path)
    dense_index(corpus, DEFAULT_PARAMS, cache)
    params = replace(DEFAULT_PARAMS, context_in_dense=True)
    index = dense_index(corpus, params, cache)
    assert made[-1] == len(corpus.entries)
    _same_as_cold(index, corpus, params)
    (cache / "dense.bin").write_bytes(b"\x00" * 100)
    index = dense_index(corpus, DEFAULT_PARAMS, cache)
    assert made[-1] == len(corpus.entries)
    _same_as_cold(index, corpus)


def test_identities_that_cannot_be_keys_reuse_nothing(root, monkeypatch):
    import marshal

    write_root(root.path)
    cache = root.runtime / "cache"
    made = _made(monkeypatch)
    dense_index(load_corpus(root.path), DEFAULT_PARAMS, cache)
    head = marshal.loads((cache / "dense.bin").read_bytes())
    head["idents"] = [[i] for i in head["idents"]]  # lists: not hashable
    head["key"] = "stale"
    (cache / "dense.bin").write_bytes(marshal.dumps(head))
    corpus = load_corpus(root.path)
    index = dense_index(corpus, DEFAULT_PARAMS, cache)
    assert made[-1] == len(corpus.entries)
    _same_as_cold(index, corpus)


def test_a_long_lived_process_reads_the_keys_file_once_and_follows_each_change(root, monkeypatch):
    from pathlib import Path

    from rmtui.engine.retrieval import retrieve as retrieve_mod

    write_root(root.path)
    cache = root.runtime / "cache"
    monkeypatch.setattr(retrieve_mod, "_DENSE_MEMO", {})
    dense_index(load_corpus(root.path), DEFAULT_PARAMS, cache)
    reads: list[str] = []
    real_read = Path.read_bytes

    def counting(self):
        reads.append(self.name)
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    corpus = load_corpus(root.path)
    again = dense_index(corpus, DEFAULT_PARAMS, cache)
    assert "dense.bin" not in reads  # the same corpus: the keys from memory
    _same_as_cold(again, corpus)
    target = node_line(root.path, "MEMORY_area-1.md", 2)
    edit(root.path, "MEMORY_area-1.md", target, target.replace(" → []", " Quokka zyzzyva. → []"))
    changed = load_corpus(root.path)
    index = dense_index(changed, DEFAULT_PARAMS, cache)
    _same_as_cold(index, changed)  # not the keys kept in memory: those were of the corpus before
    assert any("Quokka" in index.part(i) for i in range(len(index.owner)))
    with np.testing.assert_raises(ValueError):
        index.keys[0] = b"x"  # shared by later calls: nobody may write into them
