"""Per-file reuse in a corpus rebuild: after a change only the changed files are parsed and
projected again, and every item, issue and entry is what a cold build of the same files gives."""

from __future__ import annotations

import pytest

from rmtui.engine.memory.graph import ParseCache, load_graph
from rmtui.engine.retrieval import corpus as corpus_mod
from rmtui.engine.retrieval.corpus import REUSE_FILE, build_corpus, load_corpus

MEMORY = """\
# Memory

## Tooling {#tooling}

How this project is built and tested.

- `pytest-flaky` The socket test is flaky on CI; rerun it once → [rel:alice-tz]
- `ruff-format` Format Python with ruff format, never black → []

## People {F#people}

## Services {F#services}

## Runbooks {M#runbooks}
"""

PEOPLE = """\
### Team {#team}

- `alice-tz` Alice works from Lisbon and prefers morning meetings → []
- `bob-role` Bob owns the billing service → [dep:billing]

### Visitors {#visitors}

- `carol-dog` Carol adopted a puppy named Biscuit → []

### Guide {M#guide}
"""

SERVICES = """\
### Billing {#billing-area}

- `billing` The billing service charges cards nightly → [rel:bob-role]
- `billing-db` Billing keeps its ledger in Postgres → []

### Search {F#search}
"""

SEARCH = """\
- `search-index` The search index is rebuilt every hour → []
"""

RUNBOOKS = "# Runbooks\n\nRestart the worker, then drain the queue.\n"

FILES = {"MEMORY.md": MEMORY, "MEMORY_people.md": PEOPLE, "MEMORY_services.md": SERVICES,
         "MEMORY_search.md": SEARCH, "MEMORY_runbooks.md": RUNBOOKS}


def _write(root, files: dict[str, str | None]) -> None:
    for name, text in files.items():
        path = root.path / name
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)


def graph_snapshot(graph) -> dict:
    """Everything a parse gives, with items named by their place in source order."""
    at = {id(i): n for n, i in enumerate(graph.ordered)}

    def ref(item):
        return None if item is None else at[id(item)]

    return {
        "items": [(i.kind, i.id, i.file, i.line, i.end_line, i.domain, i.title, i.level, i.heading_kind,
                   [(e.type, e.target) for e in i.edges], ref(i.parent), [ref(c) for c in i.children],
                   i.backing_file, i.hash, i.text) for i in graph.ordered],
        "ids": {k: ref(v) for k, v in graph.items.items()},
        "issues": [(str(x), x.severity) for x in graph.issues],
        "files": {k: (f.domain, f.graph, f.lines, f.digest, f.parse_key, [ref(i) for i in f.items], ref(f.claimed_by))
                  for k, f in graph.files.items()},
        "focus": (graph.focus, graph.focus_line),
        "fingerprint": graph.fingerprint(),
    }


def corpus_snapshot(corpus) -> tuple:
    return ([e.to_tuple() for e in corpus.entries],
            [(h.id, h.file, h.line, h.title, h.hash) for h in corpus.headings],
            corpus.fingerprint, corpus.files, corpus.missing, corpus.issues, corpus.texts)


CAROL = "- `carol-dog` Carol adopted a puppy named Biscuit → []\n"
CHANGES = {
    "one node edited": {"MEMORY_people.md": PEOPLE.replace("morning meetings", "afternoon meetings")},
    "a file added": {"MEMORY.md": MEMORY + "\n## Infra {F#infra}\n",
                     "MEMORY_infra.md": "- `infra-dns` DNS is on Route53 → []\n"},
    "a backing file removed": {"MEMORY_search.md": None},
    "an id moved between files": {"MEMORY_people.md": PEOPLE.replace(CAROL, ""),
                                  "MEMORY_services.md": SERVICES + CAROL},
    "a duplicate id across files": {"MEMORY_services.md": SERVICES.replace("`billing-db`", "`alice-tz`")},
    "a backing link broken": {"MEMORY_services.md": SERVICES.replace("{F#search}", "{#search}")},
    "an edge made dangling": {"MEMORY_people.md": PEOPLE.replace("`bob-role`", "`bob-owner`")},
    "a free-form file edited": {"MEMORY_runbooks.md": RUNBOOKS + "\nPage the oncall when it fails twice.\n"},
    "a backing cycle": {"MEMORY_search.md": SEARCH + "\n### Back {F#services}\n"},
    "a nested backing file edited": {"MEMORY_search.md": SEARCH + "- `search-shards` Four shards → []\n"},
    "a named backing file created": {"MEMORY_guide.md": "# Guide\n\nAsk Alice before a release.\n"},
    "a heading added above the backed ones": {
        "MEMORY.md": MEMORY.replace("## People", "## Notes {#notes}\n\nSee below.\n\n## People")},
    "a node added before a later file": {
        "MEMORY_people.md": PEOPLE.replace(CAROL, CAROL + "- `carol-cat` And a cat → []\n")},
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_reused_parse_is_a_cold_parse(root, change):
    _write(root, FILES)
    cache = ParseCache()
    first = load_graph(root.path, cache)
    # every graph file once (the M# file is free-form: read, never scanned)
    assert cache.scanned == sum(f.graph for f in first.files.values()) == 5
    _write(root, CHANGES[change])
    cache.scanned = 0
    reused = load_graph(root.path, cache)
    cold = load_graph(root.path)
    assert graph_snapshot(reused) == graph_snapshot(cold)
    changed_graph_files = {n for n, t in CHANGES[change].items() if t is not None and n != "MEMORY_runbooks.md"}
    assert cache.scanned <= len(changed_graph_files)  # the unchanged files were not scanned again
    assert set(cache.parses) == {f.parse_key for f in cold.files.values() if f.graph}  # nothing left over


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_rebuild_after_a_change_is_a_cold_build(root, change):
    _write(root, FILES)
    load_corpus(root.path)
    _write(root, CHANGES[change])
    rebuilt = load_corpus(root.path)  # this process's memo of the last build lends the unchanged files
    assert corpus_snapshot(rebuilt) == corpus_snapshot(build_corpus(root.path))
    corpus_mod._MEMO.clear()
    corpus_mod._REUSE.clear()
    _write(root, {"MEMORY_people.md": PEOPLE + "\n- `dave-new` Dave joined the billing team → []\n"})
    again = load_corpus(root.path)  # a new process: the reuse file lends them
    assert corpus_snapshot(again) == corpus_snapshot(build_corpus(root.path))
    assert "dave-new" in again.by_id()


def test_only_the_changed_file_is_scanned_in_a_new_process(root, monkeypatch):
    _write(root, FILES)
    load_corpus(root.path)
    corpus_mod._MEMO.clear()
    corpus_mod._REUSE.clear()
    _write(root, {"MEMORY_services.md": SERVICES.replace("nightly", "hourly")})
    scanned: list[str] = []
    real = corpus_mod._parse_root

    def counting(path, parses=None):
        graph = real(path, parses)
        scanned.append(parses.scanned)
        return graph

    monkeypatch.setattr(corpus_mod, "_parse_root", counting)
    corpus = load_corpus(root.path)
    assert scanned == [1]
    assert "hourly" in corpus.by_id()["billing"].text


def test_a_damaged_reuse_file_is_ignored_and_rewritten(root):
    _write(root, FILES)
    load_corpus(root.path)
    path = root.path / ".runtime" / "cache" / REUSE_FILE
    good = path.read_bytes()
    for damaged in (b"", b"\x00" * 64, good[: len(good) // 2], b"not marshal at all"):
        path.write_bytes(damaged)
        corpus_mod._MEMO.clear()
        corpus_mod._REUSE.clear()
        _write(root, {"MEMORY_people.md": PEOPLE.replace("Lisbon", "Porto") + f"\n<!-- {len(damaged)} -->\n"})
        rebuilt = load_corpus(root.path)
        assert corpus_snapshot(rebuilt) == corpus_snapshot(build_corpus(root.path))
        assert "Porto" in rebuilt.by_id()["alice-tz"].text
        assert path.stat().st_size > 100  # written again for the next process


def test_a_reuse_file_with_a_flipped_byte_or_bad_indices_is_not_trusted(root, monkeypatch):
    import marshal

    _write(root, FILES)
    load_corpus(root.path)
    path = root.path / ".runtime" / "cache" / REUSE_FILE
    good = path.read_bytes()
    head = len(corpus_mod._REUSE_MAGIC) + corpus_mod._REUSE_SUM
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x40
    path.write_bytes(bytes(flipped))
    assert corpus_mod._read_reuse(path).parses.parses == {}  # the checksum refuses it
    # intact bytes whose parse names an item that is not there (only a writer's bug could):
    # the build falls back to a cold one
    data = marshal.loads(good[head:])
    key, blob = data["graph"]["parses"][0]
    items, events, focus = marshal.loads(blob)
    data["graph"]["parses"][0] = (key, marshal.dumps((items, [*events, ("id", len(items) + 5)], focus)))
    payload = marshal.dumps(data)
    path.write_bytes(corpus_mod._REUSE_MAGIC + corpus_mod.reuse_checksum(payload) + payload)
    assert len(corpus_mod._read_reuse(path).parses.parses) == len(data["graph"]["parses"])
    corpus_mod._MEMO.clear()
    corpus_mod._REUSE.clear()
    _write(root, {"MEMORY_people.md": PEOPLE.replace("Lisbon", "Porto")})
    assert corpus_snapshot(load_corpus(root.path)) == corpus_snapshot(build_corpus(root.path))
    corpus_mod._MEMO.clear()
    corpus_mod._REUSE.clear()  # and the file written after it is whole again
    assert corpus_mod._read_reuse(path).parses.parses


def _projected(monkeypatch) -> list[str]:
    """The files of the items projected one by one (not taken from the last build's segments)."""
    seen: list[str] = []
    real = corpus_mod._Projection.one

    def one(self, item, rank):
        seen.append(item.file)
        return real(self, item, rank)

    monkeypatch.setattr(corpus_mod._Projection, "one", one)
    return seen


@pytest.mark.parametrize("new_process", [False, True])
def test_a_one_node_change_projects_only_its_file_and_the_root_files(root, monkeypatch, new_process):
    _write(root, FILES)
    load_corpus(root.path)
    _write(root, {"MEMORY_people.md": PEOPLE.replace("morning meetings", "afternoon meetings")})
    if new_process:  # the segments come from the corpus file
        corpus_mod._MEMO.clear()
        corpus_mod._REUSE.clear()
    seen = _projected(monkeypatch)
    rebuilt = load_corpus(root.path)
    # the root files (their own items are no segment) and the changed file; not services nor search
    assert set(seen) - {"MEMORY.md", "PURSUITS.md"} == {"MEMORY_people.md"}
    assert corpus_snapshot(rebuilt) == corpus_snapshot(build_corpus(root.path))
    assert "afternoon" in rebuilt.by_id()["alice-tz"].text


def test_a_damaged_segment_in_the_corpus_file_is_projected_again(root, monkeypatch):
    import marshal

    _write(root, FILES)
    load_corpus(root.path)
    path = root.path / ".runtime" / "cache" / "corpus.bin"
    raw = bytearray(path.read_bytes())
    size = int.from_bytes(raw[:4], "little")
    head = marshal.loads(bytes(raw[4:4 + size]))
    off = 4 + size
    for key, n, _ in head["pieces"]:  # flip a byte in the middle of the first segment
        if key:
            raw[off + n // 2] ^= 0x20
            break
        off += n
    path.write_bytes(bytes(raw))
    corpus_mod._MEMO.clear()
    corpus_mod._REUSE.clear()
    assert corpus_mod._read_cache(root.path, path) is None  # its checksum refuses the whole file
    _write(root, {"MEMORY_services.md": SERVICES.replace("nightly", "hourly")})  # and a rebuild does not trust it
    seen = _projected(monkeypatch)
    rebuilt = load_corpus(root.path)
    assert corpus_snapshot(rebuilt) == corpus_snapshot(build_corpus(root.path))
    assert "MEMORY_people.md" in seen  # the damaged segment (people, the first) was projected again


def test_a_parse_read_from_the_reuse_file_is_kept_decoded_only_from_its_second_use(root):
    _write(root, FILES)
    load_corpus(root.path)
    corpus_mod._MEMO.clear()
    corpus_mod._REUSE.clear()  # a new process
    _write(root, {"MEMORY_people.md": PEOPLE.replace("Lisbon", "Porto")})
    load_corpus(root.path)
    parses = corpus_mod._REUSE[str(root.path.resolve())].parses.parses
    services = next(fp for key, fp in parses.items() if key.startswith("MEMORY_services.md\0"))
    assert services.items is None and services.keep  # linked once from its blob, not kept
    _write(root, {"MEMORY_people.md": PEOPLE.replace("Lisbon", "Braga")})
    rebuilt = load_corpus(root.path)  # the same process again: a long-lived one
    assert services.items is not None
    assert corpus_snapshot(rebuilt) == corpus_snapshot(build_corpus(root.path))
