"""The corpus cache file: its head of file digests is read first, a stale or damaged file is
rebuilt, and what a rebuild after a one-file change gives is what a cold build gives."""

from __future__ import annotations

import gc
import marshal

import numpy as np

from rmtui.engine.retrieval import corpus as corpus_mod
from rmtui.engine.retrieval.corpus import build_corpus, load_corpus
from rmtui.engine.retrieval.ranking import DEFAULT_PARAMS, LexicalIndex, lexical_key
from tests.retrieve_kit import write_small_root


def _same(a, b) -> None:
    assert [e.to_tuple() for e in a.entries] == [e.to_tuple() for e in b.entries]
    assert [(h.id, h.file, h.line, h.title, h.hash) for h in a.headings] == \
        [(h.id, h.file, h.line, h.title, h.hash) for h in b.headings]
    assert (a.fingerprint, a.files, a.missing, a.issues) == (b.fingerprint, b.files, b.missing, b.issues)
    assert a.texts == b.texts


def _cache(root):
    return root.path / ".runtime" / "cache" / "corpus.bin"


def test_a_one_file_change_rebuilds_what_a_cold_build_gives(root):
    write_small_root(root)
    load_corpus(root.path)
    people = root.path / "MEMORY_people.md"
    people.write_text(people.read_text().replace("\n", "\nThe billing owner moved to Lisbon.\n", 1))
    corpus_mod._MEMO.clear()  # a new process: the stale cache file is what it finds
    rebuilt = load_corpus(root.path)
    _same(rebuilt, build_corpus(root.path))
    assert "Lisbon" in " ".join(rebuilt.texts["MEMORY_people.md"])
    corpus_mod._MEMO.clear()  # and the file written after the rebuild reads back the same
    _same(load_corpus(root.path), rebuilt)


def _head(raw: bytes) -> tuple[dict, int]:
    """The cache file's head and where the entries start."""
    size = int.from_bytes(raw[:4], "little")
    return marshal.loads(raw[4:4 + size]), 4 + size


def test_a_stale_cache_is_refused_by_its_head_before_the_entries_are_read(root, monkeypatch):
    write_small_root(root)
    load_corpus(root.path)
    head, _ = _head(_cache(root).read_bytes())
    # no entries in the head: each piece's key, size and checksum only
    assert set(head) == {"version", "fingerprint", "files", "missing", "issues", "pieces"}
    assert all(isinstance(k, bytes) and isinstance(n, int) and isinstance(c, int) for k, n, c in head["pieces"])
    (root.path / "MEMORY.md").write_text((root.path / "MEMORY.md").read_text() + "\n- `late` A late note. → []\n")
    reads = []
    real_loads = marshal.loads
    monkeypatch.setattr(corpus_mod.marshal, "loads", lambda raw: reads.append(len(raw)) or real_loads(raw))
    corpus_mod._MEMO.clear()
    assert corpus_mod._read_cache(root.path, _cache(root)) is None
    assert len(reads) == 1 and reads[0] == len(marshal.dumps(head))  # the head only
    assert "late" in load_corpus(root.path).by_id()


def test_a_damaged_or_old_cache_file_is_rebuilt(root):
    write_small_root(root)
    cold = build_corpus(root.path)
    load_corpus(root.path)
    good = _cache(root).read_bytes()
    head, body_at = _head(good)
    old_head = marshal.dumps({**head, "version": 6})
    for bad in (good[:body_at], good[:body_at + 7], good[:3], b"\x00garbage", b"",
                len(old_head).to_bytes(4, "little") + old_head + good[body_at:],  # an older layout's version
                good[:body_at] + marshal.dumps([1, 2]),  # entries of the wrong shape
                (10**9).to_bytes(4, "little") + good[4:],  # a head length past the end
                marshal.dumps(head) + good[body_at:]):  # the head without its length
        _cache(root).write_bytes(bad)
        corpus_mod._MEMO.clear()
        assert corpus_mod._read_cache(root.path, _cache(root)) is None
        _same(load_corpus(root.path), cold)


def test_the_collector_is_back_on_after_a_build_even_a_failed_one(root, tmp_path):
    write_small_root(root)
    assert gc.isenabled()
    build_corpus(root.path)
    assert gc.isenabled()
    try:
        build_corpus(tmp_path / "not-a-root")
    except Exception:  # noqa: BLE001 - the refusal itself is tested elsewhere
        pass
    assert gc.isenabled()
    gc.disable()
    try:
        build_corpus(root.path)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()


def test_coverage_counts_an_entry_once_however_many_passages_hold_the_word(root):
    write_small_root(root)
    long_body = "\n".join(f"Billing invoice rule {i}: the ledger closes on day {i} of the month." for i in range(120))
    with (root.path / "MEMORY.md").open("a") as fh:
        fh.write(f"\n## Ledger {{#ledger}}\n\n{long_body}\n")
    corpus = load_corpus(root.path)
    lex = LexicalIndex.build(corpus, DEFAULT_PARAMS, lexical_key(corpus, DEFAULT_PARAMS))
    words = sorted(lex.vocab) + ["absent-word"]
    spans = [lex.owner[lex.indices[lex.indptr[t]:lex.indptr[t + 1]]] for t in lex.vocab.values()]
    assert any(len(o) > len(set(o.tolist())) for o in spans)  # some entry holds a word in several passages
    for weighted in (False, True):
        got = lex.coverage(words, weighted=weighted)
        want = np.zeros(lex.num_entries, dtype=np.float32)
        n, total = max(len(lex.owner), 1), 0.0
        for tok in words:
            t = lex.vocab.get(tok)
            a, b = (int(lex.indptr[t]), int(lex.indptr[t + 1])) if t is not None else (0, 0)
            w = float(np.log1p(n / max(b - a, 1))) if weighted else 1.0
            total += w
            for e in set(lex.owner[lex.indices[a:b]].tolist()):
                want[e] += w
        assert np.allclose(got, want / total)
        assert got.max() <= 1.0 + 1e-6


def test_the_cache_records_the_digest_of_the_bytes_each_file_had(root):
    import hashlib

    write_small_root(root)
    memory = root.path / "MEMORY.md"
    memory.write_bytes(b"\xef\xbb\xbf" + memory.read_bytes())  # a BOM: the parse reads the text after it
    corpus = load_corpus(root.path)
    assert corpus.files and all(
        digest == hashlib.sha256((root.path / name).read_bytes()).hexdigest() for name, digest in corpus.files.items())


def test_a_symlinked_graph_file_is_watched_through_its_target(root, tmp_path):
    write_small_root(root)
    memory = (root.path / "MEMORY.md").read_text()
    (root.path / "MEMORY.md").write_text(memory + "\n## Linked {F#linked}\n")
    target = tmp_path / "elsewhere.md"
    target.write_text("- `far-away` A note kept elsewhere → []\n")
    (root.path / "MEMORY_linked.md").symlink_to(target)
    first = load_corpus(root.path)  # the link is refused (an issue), its target is not parsed
    assert "far-away" not in first.by_id() and first.issues
    target.write_text("- `far-away` Changed → []\n")
    corpus_mod._MEMO.clear()
    assert corpus_mod._read_cache(root.path, _cache(root)) is None  # the target's change is seen
