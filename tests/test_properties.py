"""Property-based tests (hypothesis) of the parsers that read what people and models write:
the graph parser and validator, the retrieval selection parser and the config loader.

Arbitrary input never crashes them: they answer, or raise only their documented error
(:class:`UsageError`). A generated valid root parses without issues and, selected whole,
renders back byte-identically through the retrieval renderer (the engine has no other
graph-to-Markdown renderer: the files are the source of truth and are never re-serialised).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import tomlkit
from compat_checker import check_graph
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.config import CONFIG_FILE, LOCAL_FILE, load_config, parse_config_text
from rmtui.engine.memory.graph import load_graph
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.retrieval.corpus import build_corpus
from rmtui.engine.retrieval.render import SELECTION_KEYS, render, resolve_selection

# RMTUI_HYPOTHESIS_EXAMPLES=1000 for a longer hunt; no example database in the work tree.
SETTINGS = settings(max_examples=int(os.environ.get("RMTUI_HYPOTHESIS_EXAMPLES", "60")), deadline=None,
                    database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# Markdown-ish text: the pieces the graph grammar cares about, mixed with arbitrary text.
FRAGMENTS = ["# Memory", "## ", "### ", "#### ", "#", "{#", "{F#", "{M#", "{S#", "{MF#", "{MQ#", "}", "`", "``",
             "- ", "* ", "1. ", "  ", "\t", "→ [", "-> [", "]", "rel:", "dep:", "sup:", ",", "```", "~~~",
             "**Next:**", "**State:**", "## Focus", "\n", "\n\n", "\r\n", "\r", "\ufeff", "\x00", "é", "e\u0301",
             "a", "id-1", "x.y_z", "---", "***", "> ", "<!-- ", " -->", "|", "\\", ":::body", ":::", "::::",
             "   ", "    ", ", ,"]
SAFE_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
MARKDOWNISH = st.lists(st.one_of(st.sampled_from(FRAGMENTS), SAFE_TEXT), max_size=40).map("".join)
FILE_TEXT = st.one_of(MARKDOWNISH, SAFE_TEXT)
FILE_BYTES = st.one_of(FILE_TEXT.map(lambda t: t.encode("utf-8")), st.binary(max_size=300))


# every example's root lives under one folder removed when this module's tests end
# (hypothesis runs hundreds of examples per test: a folder each in /tmp piled up by the
# thousand; a pytest-xdist worker exits without running interpreter-exit finalizers)
_EXAMPLES: list[Path] = []  # the folder, once a test made one


@pytest.fixture(autouse=True, scope="module")
def _remove_example_roots():
    yield
    for base in _EXAMPLES:
        shutil.rmtree(base, ignore_errors=True)


def _root_with(files: dict[str, bytes]) -> Path:
    if not _EXAMPLES:
        _EXAMPLES.append(Path(tempfile.mkdtemp(prefix="rmtui-prop-")))
    d = Path(tempfile.mkdtemp(dir=_EXAMPLES[0]))
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


@SETTINGS
@given(memory=FILE_BYTES, pursuits=st.one_of(st.none(), FILE_BYTES),
       backing=st.dictionaries(st.sampled_from(["MEMORY_a.md", "MEMORY_b-c.md", "MEMORY_SKILL_s.md", "PURSUIT_p.md",
                                                "corrections.md", "MEMORY_\u00e9.md"]), FILE_BYTES, max_size=3))
def test_graph_parser_and_validator_never_crash(memory, pursuits, backing):
    files = {"MEMORY.md": memory, **backing}
    if pursuits is not None:
        files["PURSUITS.md"] = pursuits
    root = _root_with(files)
    graph = load_graph(root)
    for issue in graph.issues:  # every issue is located and named
        assert issue.file and isinstance(issue.line, int) and issue.rule
        str(issue)
        json.dumps(issue.to_json())
    report = validate_root(root)
    json.dumps(report.to_json())
    assert report.ok == (not report.errors)
    graph.counts()
    graph.fingerprint()


# -- a generated valid root ----------------------------------------------------------------

WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=1, max_size=8)
PROSE = st.lists(WORD, min_size=1, max_size=8).map(" ".join)


@st.composite
def valid_memory(draw) -> tuple[str, list[str]]:
    """A MEMORY.md of ## and ### headings with nodes, edges to earlier items; its ids."""
    ids: list[str] = []

    def fresh() -> str:
        ident = draw(WORD.filter(lambda w: w not in ids)) + f"-{len(ids)}"
        ids.append(ident)
        return ident

    def nodes() -> list[str]:
        out = []
        for _ in range(draw(st.integers(1, 3))):
            ident = fresh()
            targets = draw(st.lists(st.sampled_from(ids[:-1]), max_size=2, unique=True)) if len(ids) > 1 else []
            edges = ", ".join(f"dep:{t}" for t in targets)
            out.append(f"- `{ident}` {draw(PROSE).capitalize()} → [{edges}]")
        return out

    blocks = ["# Memory"]
    for _ in range(draw(st.integers(1, 3))):
        blocks.append(f"## {draw(PROSE).title()} {{#{fresh()}}}")
        blocks.append("\n".join(nodes()))
        for _ in range(draw(st.integers(0, 2))):
            blocks.append(f"### {draw(PROSE).title()} {{#{fresh()}}}")
            blocks.append("\n".join(nodes()))
    return "\n\n".join(blocks), ids


@SETTINGS
@given(valid_memory())
def test_a_valid_root_parses_cleanly_and_renders_back_byte_identically(generated):
    text, ids = generated
    root = _root_with({"MEMORY.md": (text + "\n").encode(), "PURSUITS.md": b"# Pursuits\n\n## Focus\n"})
    report = validate_root(root)
    assert report.ok and not report.issues, [str(i) for i in report.issues]
    assert set(ids) <= set(report.graph.items)
    corpus = build_corpus(root)
    units = resolve_selection(corpus, {"ids": ids, "sources": [], "recent_candidates": []})
    assert render(corpus, units, max_chars=10**7).text == text


# -- the validator agrees with the original's newest parser on what it accepts -----------------
# Each mutation of a generated valid root is a case the two used to disagree on; the checker in
# tests/compat_checker.py reads the graph as the original does, independently of the engine.

def _nodes(text: str) -> list[int]:
    return [i for i, line in enumerate(text.split("\n")) if line.startswith("- `")]


def _mutate(text: str, how: str, pick: int) -> dict[str, str]:
    lines = text.split("\n")
    nodes = _nodes(text)
    n = nodes[pick % len(nodes)]
    if how == "empty-edge":  # `[dep:a, , dep:b]` / `[,]`: an empty element is an error
        lines[n] = lines[n][:-1] + (",]" if lines[n].endswith("[]") else ", ]")
    elif how == "indented-headings":  # 1-3 spaces before a heading: still a heading
        lines = [(" " * (1 + k % 3) + ln) if ln.startswith("#") else ln for k, ln in enumerate(lines)]
    elif how == "nested-bullet":  # indented to the item above: nested text, not a node
        later = [i for i in nodes if i > 0 and lines[i - 1].startswith("- `")]
        if later:
            lines[later[pick % len(later)]] = "  " + lines[later[pick % len(later)]]
    elif how == "code-bullet":  # four spaces after a blank line: indented code, not a node
        lines[n] = "\n    " + lines[n]
    elif how == "unclosed-body":
        lines.insert(1, ":::body\nThe memory of this project.")
    elif how == "closed-body":
        lines.insert(1, "\n::::body\nThe memory of this project.\n- `body-bullet` is body text → []\n::::")
    elif how == "stray-body-close":
        lines.insert(1, "\nProse.\n:::")
    elif how == "bom":  # a byte-order mark makes the first line text, not a heading
        lines[0] = "\ufeff" + lines[0]
    elif how == "html-heading":  # a heading inside an HTML block (to its blank line) is HTML
        lines.insert(1, "\n<div>\n## Inside {#inside-html}\n</div>\n")
    elif how == "html-comment":
        lines.insert(1, "\n<!--\n\n## Old {#old-comment}\n-->\n")
    elif how == "html-node":  # and so is a node line
        lines[n] = "<details>\n" + lines[n] + "\n</details>\n"
    elif how == "ordered-after-paragraph":  # `2.` cannot interrupt a paragraph: text, not a node
        lines[n] = "Prose.\n2." + lines[n][1:]
    elif how == "terminal-bullet":
        lines.append("\n## Api {F#api}\n\n" + ("- a summary bullet" if pick % 2 else "1. a numbered line"))
    return {"MEMORY.md": "\n".join(lines) + "\n", "MEMORY_api.md": "API.\n"}


@SETTINGS
@given(valid_memory(), st.sampled_from(["none", "empty-edge", "indented-headings", "nested-bullet", "code-bullet",
                                        "unclosed-body", "closed-body", "stray-body-close", "terminal-bullet", "bom",
                                        "html-heading", "html-comment", "html-node", "ordered-after-paragraph"]),
       st.integers(0, 50))
def test_the_validator_accepts_what_the_original_accepts_and_nothing_else(generated, how, pick):
    files = _mutate(generated[0], how, pick)
    root = _root_with({k: v.encode() for k, v in files.items()} | {"PURSUITS.md": b"# Pursuits\n"})
    report = validate_root(root)
    violations, ids = check_graph(files)
    assert report.ok == (not violations), ([str(i) for i in report.errors], violations)
    assert set(report.graph.items) == ids
    expected = {"empty-edge": "edge-empty", "unclosed-body": "body-fence", "stray-body-close": "body-fence",
                "terminal-bullet": "terminal-bullet"}.get(how)
    if expected:
        assert expected in {i.rule for i in report.errors}


# -- the selection parser --------------------------------------------------------------------

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                      st.text(max_size=20), st.sampled_from(["M#incidents", "S#release", "MF#x", "tooling",
                                                             "pytest-x", "start", "end"]))
JSON_ANY = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(["source_id", "ids", "ranges", "start", "end", *SELECTION_KEYS]),
                              st.text(max_size=8)), inner, max_size=4)), max_leaves=25)
SELECTION = st.one_of(JSON_ANY, st.fixed_dictionaries({}, optional={k: JSON_ANY for k in SELECTION_KEYS}))

_SELECTION_ROOT: list = []


def _selection_corpus():
    if not _SELECTION_ROOT:
        memory = ("# Memory\n\n## Tooling {#tooling}\n\n- `pytest-x` Run pytest with -x → []\n\n"
                  "### Incident notes {M#incidents}\n\n### Release checklist {S#release}\n")
        root = _root_with({"MEMORY.md": memory.encode(),
                           "MEMORY_incidents.md": b"# Incidents\n\n```sh\nredis-cli\n```\n\nafter\n",
                           "MEMORY_SKILL_release.md": b"1. Bump.\n2. Tag.\n"})
        _SELECTION_ROOT.append(build_corpus(root))
    return _SELECTION_ROOT[0]


@SETTINGS
@given(SELECTION, st.dictionaries(st.text(max_size=6), st.tuples(st.text(max_size=6), st.text(max_size=20)),
                                  max_size=2))
def test_selection_parser_answers_or_refuses_cleanly(selection, recent):
    corpus = _selection_corpus()
    try:
        units = resolve_selection(corpus, selection, recent=recent)
    except UsageError as exc:
        assert exc.message.startswith("selection")
        return
    render(corpus, units, max_chars=10**7)


@SETTINGS
@given(st.text(max_size=300))
def test_selection_from_model_json_text(raw):
    """What agent retrieval receives from a model: text that may or may not be JSON."""
    corpus = _selection_corpus()
    try:
        value = json.loads(raw)
    except ValueError:
        return
    try:
        resolve_selection(corpus, value)
    except UsageError:
        pass


# -- the config loader -----------------------------------------------------------------------

KEYS = ["update.approval", "update.max_evidence_bytes", "retrieve.top_k", "retrieve.backend", "embedding.model",
        "embedding.service_url", "embedding.idle_timeout_seconds", "update.async.target_batch_candidates",
        "update.model.model_id", "unknown.key", "retrieve", "update"]
TOML_VALUE = st.one_of(st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False),
                       st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
                       st.lists(st.integers(0, 9), max_size=3), st.sampled_from(["required", "none", "embedding"]))


@st.composite
def toml_docs(draw) -> str:
    doc = tomlkit.document()
    for dotted in draw(st.lists(st.sampled_from(KEYS), max_size=5, unique=True)):
        table = doc
        *parents, leaf = dotted.split(".")
        try:
            for p in parents:
                if p not in table:
                    table[p] = tomlkit.table()
                table = table[p]
            table[leaf] = draw(TOML_VALUE)
        except (TypeError, KeyError, tomlkit.exceptions.TOMLKitError, AttributeError):
            continue  # a key already holding a scalar where a table is needed
    return tomlkit.dumps(doc)


CONFIG_TEXT = st.one_of(toml_docs(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=200),
                        st.lists(st.sampled_from(["[update]", "[retrieve]", "top_k = ", "8", "\"x\"", "\n", "=",
                                                  "[[a]]", "\ufeff", "# c", "max_evidence_bytes = 99999999999999999999",
                                                  "approval = ", "\"required\""]), max_size=20).map("".join))


@SETTINGS
@given(CONFIG_TEXT, st.sampled_from([CONFIG_FILE, LOCAL_FILE]))
def test_config_text_parses_or_is_a_usage_error(text, name):
    try:
        parse_config_text(text, Path("/nonexistent") / name)
    except UsageError:
        pass


@SETTINGS
@given(st.one_of(CONFIG_TEXT.map(lambda t: t.encode("utf-8")), st.binary(max_size=200)),
       st.one_of(st.none(), CONFIG_TEXT.map(lambda t: t.encode("utf-8"))))
# found by this test: migrating [retrieve] top_k into an rmtui.toml where `retrieve` is a value
@example(shared=b"[retrieve]\ntop_k = 3\n", local=b"retrieve = false\n")
def test_config_loader_on_files_answers_or_refuses_cleanly(shared, local):
    files = {CONFIG_FILE: shared}
    if local is not None:
        files[LOCAL_FILE] = local
    root = _root_with(files)
    try:
        cfg = load_config(root)
    except UsageError:
        return
    for key in ("update.max_evidence_bytes", "retrieve.top_k", "update.approval"):
        cfg.get(key)


VALID_SHARED = st.fixed_dictionaries({}, optional={
    "max_output_chars": st.integers(1, 10**6), "generation_commits": st.integers(1, 500),
    "target_batch_candidates": st.integers(1, 100), "trace": st.booleans()})


@SETTINGS
@given(VALID_SHARED, st.sampled_from(["rightmemory.toml", "rmtui.toml"]))
def test_config_bom_is_tolerated_like_memory_md(values, bom_file):
    """A byte-order mark before a config file means the same as none (MEMORY.md tolerates one)."""
    doc = tomlkit.document()
    places = {"max_output_chars": ("retrieve",), "generation_commits": ("pruner",),
              "target_batch_candidates": ("update", "async"), "trace": ("debug",)}
    for key, value in values.items():
        table = doc
        for part in places[key]:
            table = table.setdefault(part, tomlkit.table())
        table[key] = value
    shared = tomlkit.dumps(doc).encode()
    local = b'[update]\napproval = "required"\n'
    files = {CONFIG_FILE: shared, LOCAL_FILE: local}
    expected = load_config(_root_with(files))
    files[bom_file] = b"\xef\xbb\xbf" + files[bom_file]
    got = load_config(_root_with(files))
    for key in ("retrieve.max_output_chars", "pruner.generation_commits",
                "update.async.target_batch_candidates", "debug.trace", "update.approval"):
        assert got.get(key) == expected.get(key), key
    assert got.get("update.approval") == "required"
