"""The graph's parses kept between readings and processes: a warm reading gives exactly the graph
(items, hashes, backing digests, issues) a cold parse gives, scans only files whose bytes
changed (even an edit that keeps the size and time), and a damaged cache file costs nothing but time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import git
import pytest
from test_corpus_per_file import FILES, PEOPLE, SERVICES, _write, graph_snapshot

from rmtui.engine.memory import parse_store
from rmtui.engine.memory.graph import load_graph
from rmtui.engine.memory.parse_store import parse_file_path, with_parses
from rmtui.engine.memory.validation import validate_root


@pytest.fixture(autouse=True)
def new_process_state():
    parse_store.forget()
    yield
    parse_store.forget()


def full(graph) -> dict:
    return {**graph_snapshot(graph), "backing": graph.backing_digests}


def warm_read(root) -> tuple[dict, int, list[str]]:
    """A reading through the kept parses: (the graph, files scanned, the report's issues)."""

    def read(parses):
        parses.scanned = 0
        report = validate_root(root.path, parses=parses)
        return report, parses.scanned

    report, scanned = with_parses(root.path, read)
    return full(report.graph), scanned, [str(i) for i in report.issues]


def cold_read(root) -> tuple[dict, list[str]]:
    return full(load_graph(root.path)), [str(i) for i in validate_root(root.path).issues]


def test_a_new_process_reads_the_kept_parses_and_gets_the_cold_graph(root):
    _write(root, FILES)
    _write(root, {"MEMORY_services.md": SERVICES + "- `dangling` Points nowhere → [dep:nowhere]\n"})
    first, scanned, issues = warm_read(root)
    assert scanned == 5  # every graph file (the M# file is free-form: read, never scanned)
    assert parse_file_path(root.path).is_file()
    parse_store.forget()  # what a new process starts from: the file on disk
    again, scanned, again_issues = warm_read(root)
    assert scanned == 0
    assert (again, again_issues) == (first, issues) == cold_read(root)
    assert any("edge-dangling" in i for i in issues)  # findings come back from the kept parse too
    assert again["items"][0][13]  # item hashes are kept, not blank
    assert set(again["backing"]) >= {"MEMORY_people.md", "MEMORY_search.md"}


def test_a_file_edited_after_the_cache_was_written_is_scanned_again_even_with_its_size_and_time(root):
    _write(root, FILES)
    warm_read(root)
    path = root.path / "MEMORY_people.md"
    before = os.stat(path)
    edited = PEOPLE.replace("morning meetings", "evening meetings")  # the same length
    assert len(edited) == len(PEOPLE)
    path.write_text(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    for fresh in (False, True):  # this process's memory, then a new process's file
        if fresh:
            parse_store.forget()
        graph, scanned, issues = warm_read(root)
        assert (graph, issues) == cold_read(root)
        titles = [i[6] for i in graph["items"] if i[1] == "alice-tz"]
        assert titles == ["Alice works from Lisbon and prefers evening meetings"]
        assert scanned == (0 if fresh else 1)  # the new process reads the file the first reading rewrote
    parse_store.forget()
    path.write_text(PEOPLE.replace("morning meetings", "nightly meetings"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    graph, scanned, _ = warm_read(root)
    assert scanned == 1  # only the edited file
    titles = [i[6] for i in graph["items"] if i[1] == "alice-tz"]
    assert titles == ["Alice works from Lisbon and prefers nightly meetings"]


def test_a_damaged_cache_file_is_a_miss_and_is_written_again(root):
    _write(root, FILES)
    warm_read(root)
    path = parse_file_path(root.path)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    parse_store.forget()
    graph, scanned, issues = warm_read(root)
    assert scanned == 5
    assert (graph, issues) == cold_read(root)
    parse_store.forget()
    assert warm_read(root)[1] == 0  # the file was rewritten whole


def test_kept_parses_that_do_not_fit_are_dropped_for_a_cold_parse(root):
    """A file whose checksum holds but whose parses are not what the parser wrote (only a
    deliberate edit can make one): the reading falls back to scanning everything."""
    import marshal
    import zlib

    _write(root, FILES)
    warm_read(root)
    path = parse_file_path(root.path)
    raw = path.read_bytes()
    head = len(parse_store._MAGIC) + parse_store._SUM
    data = marshal.loads(raw[head:])
    data["parses"] = [(key, marshal.dumps(([("node", "x")], [("id", 7)], None))) for key, _ in data["parses"]]
    payload = marshal.dumps(data)
    path.write_bytes(parse_store._MAGIC + zlib.crc32(payload).to_bytes(4, "little") + payload)
    parse_store.forget()
    graph, scanned, issues = warm_read(root)
    assert scanned == 5
    assert (graph, issues) == cold_read(root)
    parse_store.forget()
    assert warm_read(root)[1] == 0  # the file was written again with parses that fit


def test_the_cache_lives_in_the_ignored_runtime_folder(root):
    _write(root, FILES)
    repo = git.Repo(root.path)
    repo.git.add("-A")
    repo.git.commit("-q", "-m", "files")
    warm_read(root)
    assert parse_file_path(root.path).is_file()
    assert repo.git.status("--porcelain", "--untracked-files=all") == ""


CHILD = r"""
import json, sys
from rmtui.engine.memory.parse_store import with_parses
from rmtui.engine.memory.validation import validate_root
def read(parses):
    report = validate_root(sys.argv[1], parses=parses)
    return report, parses.scanned
report, scanned = with_parses(sys.argv[1], read)
print(json.dumps({"scanned": scanned, "fingerprint": report.graph.fingerprint(),
                  "hashes": [i.hash for i in report.graph.ordered], "issues": [str(i) for i in report.issues]}))
"""


def test_a_second_process_scans_nothing(root):
    _write(root, FILES)
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD, str(root.path)], capture_output=True, text=True,
                                      check=True).stdout) for _ in range(2)]
    assert [r["scanned"] for r in runs] == [5, 0]
    cold = validate_root(root.path)
    for r in runs:
        assert r["hashes"] == [i.hash for i in cold.graph.ordered]
        assert r["fingerprint"] == cold.graph.fingerprint()
        assert r["issues"] == [str(i) for i in cold.issues]
