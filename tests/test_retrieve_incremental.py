"""The BM25 index after a change: only changed passages are tokenised again, and the index
scores exactly as one rebuilt from nothing; the scores are bm25s's own."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rmtui.engine.retrieval.corpus import build_corpus, load_corpus
from rmtui.engine.retrieval.ranking import (
    DEFAULT_PARAMS,
    LexicalIndex,
    best_per_entry,
    lexical_key,
    lexical_text,
    load_lexical,
    passages,
    query_tokens,
    tokenize_many,
)

WORDS = ("cache index parser retry token lock branch commit queue worker deploy config schema vector latency "
         "timeout socket proxy thread fixture migration sqlite postgres redis kafka docker layer pipeline lint "
         "release changelog endpoint bearer session cookie secret rotate backup restore snapshot oncall").split()
QUERIES = ["rotate the bearer secret", "Kafka worker retry", "docker layer cache", "postgres lock timeout",
           "zyzzyva quokka", "sqlite backup restore snapshot"]


def write_root(path, nodes: int = 120, seed: int = 5) -> None:
    """Three detail files of nodes under headings, one node with a long multi-passage text."""
    rnd = random.Random(seed)
    memory = ["# Memory", ""]
    made = 0
    for f in range(3):
        memory += [f"## Area {f} {{F#area-{f}}}", ""]
        lines: list[str] = []
        for s in range(4):
            lines += [f"### Topic {f}.{s} {{#t-{f}-{s}}}", ""]
            for k in range(nodes // 12):
                words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 18)))
                lines.append(f"- `n-{f}-{s}-{k}` {words.capitalize()}. → []")
                made += 1
            lines.append("")
        if f == 1:
            long = " ".join(rnd.choice(WORDS) for _ in range(600))
            lines += ["### Long {#long}", "", f"- `long-note` {long}. → []", ""]
        (path / f"MEMORY_area-{f}.md").write_text("\n".join(lines) + "\n")
    (path / "MEMORY.md").write_text("\n".join(memory) + "\n")


def edit(path, name: str, old: str, new: str) -> None:
    f = path / name
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new, 1))


def assert_same_scores(a: LexicalIndex, b: LexicalIndex) -> None:
    for q in QUERIES:
        toks = query_tokens(q, DEFAULT_PARAMS)
        for x, y in zip(a.score_parts(toks), b.score_parts(toks), strict=True):
            assert np.array_equal(x, y), q
        assert np.array_equal(a.scores(toks), b.scores(toks)), q
        assert np.array_equal(a.coverage(toks, weighted=True), b.coverage(toks, weighted=True)), q


def node_line(path, name: str, n: int) -> str:
    return [line for line in (path / name).read_text().splitlines() if line.startswith("- `")][n]


@pytest.mark.parametrize("change", ["edit", "add", "delete"])
def test_update_after_a_one_node_change_equals_a_full_rebuild(root, change):
    write_root(root.path)
    before = LexicalIndex.build(build_corpus(root.path), DEFAULT_PARAMS, "k0")
    target = node_line(root.path, "MEMORY_area-1.md", 7)
    if change == "edit":
        edit(root.path, "MEMORY_area-1.md", target, target.replace(" → []", " Zyzzyva quokka rotate. → []"))
    elif change == "add":  # every later node shifts one line and one rank; its neighbours change
        edit(root.path, "MEMORY_area-1.md", target, target + "\n- `added` Zyzzyva quokka retry kafka. → []")
    else:
        edit(root.path, "MEMORY_area-1.md", target + "\n", "")
    corpus = build_corpus(root.path)
    updated = LexicalIndex.build(corpus, DEFAULT_PARAMS, "k1", previous=before)
    rebuilt = LexicalIndex.build(corpus, DEFAULT_PARAMS, "k1")
    assert_same_scores(updated, rebuilt)
    # the changed node's passage and the windows it belongs to (itself and two neighbours per
    # side), nothing else, were tokenised or summed again
    assert 0 < updated.rebuilt <= 7, updated.rebuilt
    assert rebuilt.rebuilt > len(corpus.entries)
    top = np.argsort(-rebuilt.scores(query_tokens("zyzzyva quokka", DEFAULT_PARAMS)))[0]
    if change != "delete":
        assert corpus.entries[int(top)].id in ("n-1-0-7", "added")


def test_scores_are_bm25s_lucene_scores(root):
    """The same scores as bm25s's index of the same tokens, own passages and neighbour windows."""
    import bm25s

    write_root(root.path)
    corpus = build_corpus(root.path)
    params = DEFAULT_PARAMS
    idx = LexicalIndex.build(corpus, params, "k")
    parts, owner = passages([lexical_text(e, params) for e in corpus.entries])
    assert len(parts) > len(corpus.entries)  # the long note is several passages
    own = [t or ["\x00empty"] for t in tokenize_many(parts, stem=params.stem)]
    # a window: an entry's own words and those of its neighbours' own text, two per side
    bare = tokenize_many([e.text for e in corpus.entries], stem=params.stem)
    window: list[list[str]] = []
    for i, e in enumerate(corpus.entries):
        toks = [t for j, words in zip(owner.tolist(), own, strict=True) if j == i for t in words]
        p, q = e.prev, e.next
        for _ in range(params.lexical_window):
            if p >= 0:
                toks += bare[p]
                p = corpus.entries[p].prev
            if q >= 0:
                toks += bare[q]
                q = corpus.entries[q].next
        window.append(toks)
    for mine, tokens, own_of in ((idx, own, owner), (idx.window, window, np.arange(len(window)))):
        assert mine is not None
        ref = bm25s.BM25(k1=params.bm25_k1, b=params.bm25_b)
        ref.index(tokens, show_progress=False)
        for q in QUERIES:
            qt = query_tokens(q, params)
            per = np.zeros(len(tokens), np.float32)
            for t in qt:
                if t in ref.vocab_dict:
                    a, b = ref.scores["indptr"][ref.vocab_dict[t]], ref.scores["indptr"][ref.vocab_dict[t] + 1]
                    np.add.at(per, ref.scores["indices"][a:b], ref.scores["data"][a:b])
            expected = best_per_entry(per, own_of, len(corpus.entries))
            assert np.allclose(mine.own_scores(qt), expected, rtol=1e-5, atol=1e-6), q
            assert (expected > 0).any() or q == "zyzzyva quokka"


def test_cached_index_is_updated_not_rebuilt_across_processes(root):
    """The index file holds the term counts: a new process (the memo cleared) updates it."""
    from rmtui.engine.retrieval import ranking

    write_root(root.path)
    cache = root.runtime / "cache"
    first = load_lexical(load_corpus(root.path), DEFAULT_PARAMS, cache)
    assert first.rebuilt > 100
    target = node_line(root.path, "MEMORY_area-2.md", 3)
    edit(root.path, "MEMORY_area-2.md", target, target.replace(" → []", " Quokka. → []"))
    ranking._LEXICAL_MEMO.clear()
    corpus = load_corpus(root.path)
    second = load_lexical(corpus, DEFAULT_PARAMS, cache)
    assert 0 < second.rebuilt <= 7
    assert second.key == lexical_key(corpus, DEFAULT_PARAMS)
    assert_same_scores(second, LexicalIndex.build(corpus, DEFAULT_PARAMS, second.key))
    ranking._LEXICAL_MEMO.clear()
    again = load_lexical(corpus, DEFAULT_PARAMS, cache)  # from the file, as written
    assert again.rebuilt == 0 and again.key == second.key
    assert_same_scores(again, second)


def test_words_no_node_uses_leave_the_vocabulary(root):
    """Updates that drop words do not grow the vocabulary without end."""
    write_root(root.path)
    idx = LexicalIndex.build(build_corpus(root.path), DEFAULT_PARAMS, "k")
    base = len(idx.vocab)
    target = node_line(root.path, "MEMORY_area-0.md", 2)
    for round_ in range(8):  # each round: a node gains a quarter of the vocabulary in new words, then loses it
        fresh = " ".join(f"unique{round_}word{k}" for k in range(base // 4 + 1))
        grown = target.replace(" → []", f" {fresh}. → []")
        edit(root.path, "MEMORY_area-0.md", target, grown)
        idx = LexicalIndex.build(build_corpus(root.path), DEFAULT_PARAMS, f"k{round_}", previous=idx)
        edit(root.path, "MEMORY_area-0.md", grown, target)
    corpus = build_corpus(root.path)
    idx = LexicalIndex.build(corpus, DEFAULT_PARAMS, "last", previous=idx)
    assert len(idx.vocab) < 2 * base
    assert_same_scores(idx, LexicalIndex.build(corpus, DEFAULT_PARAMS, "last"))


def test_a_damaged_index_file_is_rebuilt_not_trusted(root):
    """Term ids beyond the vocabulary, offsets past the end: the file is refused and rebuilt."""
    from rmtui.engine.retrieval import ranking

    write_root(root.path)
    cache = root.runtime / "cache"
    corpus = load_corpus(root.path)
    good = load_lexical(corpus, DEFAULT_PARAMS, cache)
    assert good.rows is not None
    damaged = LexicalIndex.loads(good.dumps())
    assert damaged is not None and damaged.rows is not None
    damaged.rows.terms = damaged.rows.terms.copy()
    damaged.rows.terms[0] = len(good.vocab) + 5  # a word the vocabulary does not have
    assert LexicalIndex.loads(damaged.dumps()) is None
    cut = LexicalIndex.loads(good.dumps())
    assert cut is not None
    cut.indptr = cut.indptr.copy()
    cut.indptr[-1] += 3  # postings past the end
    assert LexicalIndex.loads(cut.dumps()) is None
    (cache / "bm25.bin").write_bytes(damaged.dumps())
    ranking._LEXICAL_MEMO.clear()
    target = node_line(root.path, "MEMORY_area-0.md", 1)
    edit(root.path, "MEMORY_area-0.md", target, target.replace(" → []", " Quokka. → []"))
    corpus = load_corpus(root.path)
    again = load_lexical(corpus, DEFAULT_PARAMS, cache)  # no update from the damaged rows: a full build
    assert again.rebuilt > len(corpus.entries)
    assert_same_scores(again, LexicalIndex.build(corpus, DEFAULT_PARAMS, again.key))


def test_a_new_process_builds_and_hashes_only_the_changed_entrys_text(root):
    """Each entry's keys come back from the index file by what its text is made from: after a
    one-node edit one entry's text is built again; a renamed heading re-keys the entries under it."""
    from rmtui.engine.retrieval import ranking

    write_root(root.path)
    cache = root.runtime / "cache"
    first = load_lexical(load_corpus(root.path), DEFAULT_PARAMS, cache)
    assert first.docs is not None and first.docs.made == len(first.docs.idents)
    target = node_line(root.path, "MEMORY_area-2.md", 4)
    edit(root.path, "MEMORY_area-2.md", target, target.replace(" → []", " Zyzzyva quokka. → []"))
    ranking._LEXICAL_MEMO.clear()
    corpus = load_corpus(root.path)
    second = load_lexical(corpus, DEFAULT_PARAMS, cache)
    assert second.docs is not None and second.docs.made == 1 and 0 < second.rebuilt <= 7
    rebuilt = LexicalIndex.build(corpus, DEFAULT_PARAMS, second.key)
    assert_same_scores(second, rebuilt)
    for a, b in zip(second.docs.arrays(), rebuilt.docs.arrays(), strict=True):
        assert a.tobytes() == b.tobytes()
    assert corpus.entries[int(np.argmax(second.scores(query_tokens("zyzzyva quokka", DEFAULT_PARAMS))))].id == \
        target.split("`")[1]
    edit(root.path, "MEMORY_area-0.md", "### Topic 0.1 {#t-0-1}", "### Renamed zyzzyva {#t-0-1}")
    ranking._LEXICAL_MEMO.clear()
    corpus = load_corpus(root.path)
    third = load_lexical(corpus, DEFAULT_PARAMS, cache)
    under = sum(1 for e in corpus.entries if "Renamed zyzzyva" in e.context)
    assert under == 10 and third.docs is not None and third.docs.made == under  # its heading is bare: no entry
    assert_same_scores(third, LexicalIndex.build(corpus, DEFAULT_PARAMS, third.key))


def test_entry_keys_that_do_not_fit_the_index_are_refused(root):
    write_root(root.path)
    good = LexicalIndex.build(build_corpus(root.path), DEFAULT_PARAMS, "k")
    assert good.docs is not None
    short = LexicalIndex.loads(good.dumps())
    assert short is not None and short.docs is not None
    short.docs.idents = short.docs.idents[:-1]  # one entry fewer than the index has
    assert LexicalIndex.loads(short.dumps()) is None
    wrong = LexicalIndex.loads(good.dumps())
    assert wrong is not None and wrong.docs is not None
    wrong.docs.owner = wrong.docs.owner[::-1].copy()  # passages no longer in entry order
    assert LexicalIndex.loads(wrong.dumps()) is None


def test_a_long_lived_process_reads_the_index_file_only_when_another_process_replaced_it(root, monkeypatch):
    from rmtui.engine.retrieval import ranking

    write_root(root.path)
    cache = root.runtime / "cache"
    load_lexical(load_corpus(root.path), DEFAULT_PARAMS, cache)
    reads: list[int] = []
    real = LexicalIndex.loads
    monkeypatch.setattr(LexicalIndex, "loads", classmethod(lambda cls, raw: reads.append(len(raw)) or real(raw)))
    target = node_line(root.path, "MEMORY_area-0.md", 2)
    edit(root.path, "MEMORY_area-0.md", target, target.replace(" → []", " Quokka. → []"))
    mine = load_lexical(load_corpus(root.path), DEFAULT_PARAMS, cache)
    assert reads == [] and 0 < mine.rebuilt <= 7  # the file holds what its memo holds: updated from the memo
    # another process (its own memo) changes the root and writes the file; this one then reads it
    edit(root.path, "MEMORY_area-0.md", target.replace(" → []", " Quokka. → []"), target)
    status = dict(ranking._LEXICAL_STATUS)
    ranking._LEXICAL_MEMO.clear()
    corpus = load_corpus(root.path)
    theirs = load_lexical(corpus, DEFAULT_PARAMS, cache)
    ranking._LEXICAL_MEMO[str(cache / "bm25.bin")] = mine  # back to this process's stale memo
    ranking._LEXICAL_STATUS.update(status)
    before = len(reads)
    got = load_lexical(corpus, DEFAULT_PARAMS, cache)
    assert len(reads) > before and got.rebuilt == 0 and got.key == theirs.key  # read, not rebuilt
    assert_same_scores(got, LexicalIndex.build(corpus, DEFAULT_PARAMS, got.key))


def test_an_index_file_with_a_flipped_byte_is_refused(root):
    """A flipped bit in a count fits every array's shape: the checksum refuses it."""
    write_root(root.path)
    good = LexicalIndex.build(build_corpus(root.path), DEFAULT_PARAMS, "k")
    raw = good.dumps()
    assert LexicalIndex.loads(raw) is not None
    head = int.from_bytes(raw[:8], "little")
    for at in (8 + head + 64, len(raw) // 2, len(raw) - 9):  # the own index's arrays, the window's
        flipped = bytearray(raw)
        flipped[at] ^= 0x01
        assert LexicalIndex.loads(bytes(flipped)) is None, at
