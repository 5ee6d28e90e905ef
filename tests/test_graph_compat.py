"""Graph rules as the original RightMemory reads them (docs/formats.md, "Graph files";
docs/architecture.md, "The memory root").

Roots the original accepts validate here (possibly with warnings, which never fail a run);
roots it rejects fail here; and nothing rmtui hands to roles or agents writes an anchor the
original rejects (``{F# id}``).
"""

from __future__ import annotations

import re
from pathlib import Path

import git
import pytest

from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.roles.tools import RoleTools
from rmtui.engine.writes.admission import AdmissionRefused, check_tree

REPO = Path(__file__).resolve().parent.parent
SPACED_ANCHOR = re.compile(r"\{[A-Za-z]*#\s+[^}]*\}|\{[A-Za-z]*#\}")

# A root the original accepts: no `## Focus`, an arrow list on an unanchored heading (title
# text there), a backticked bullet without an edge list (a plain bullet), other list markers,
# heading body paragraphs, `####` body text, and an F# chain across files.
ORIGINAL_ACCEPTS = {
    "MEMORY.md": (
        "# Memory\n\n"
        "Root prose describing this memory.\n\n"
        "## Build {#build}\n\n"
        "How the project is built; this paragraph describes the heading.\n\n"
        "- `hatch` Wheels are built with hatchling → [cfg:pyproject]\n"
        "  and this indented line continues the node.\n"
        "* `pyproject` pyproject.toml holds the package metadata → []\n"
        "+ `sdist` The sdist ships the tests → [dep:hatch]\n"
        "1. `ci` CI builds on every push → [ver:hatch]\n"
        "2) `tox` tox runs the matrix → [run:ci]\n"
        "- `make` is a plain bullet: no edge list\n"
        "- a plain bullet\n\n"
        "## Grouping → [dep:build]\n\n"
        "### Services {#services}\n\n"
        "#### Runbook {M#runbook}\n\n"
        "Body text under a terminal heading is fine.\n\n"
        "## Api {F#api} → [dep:build]\n\n"
        "The API service (summary paragraph in its own file).\n"
    ),
    "MEMORY_api.md": "API details.\n\n### Endpoints {F#endpoints}\n",
    "MEMORY_endpoints.md": "- `get-items` GET /items → [up:api, doc:hatch]\n",
    "MEMORY_runbook.md": "free form\n",
    "PURSUITS.md": (
        "# Pursuits\n\n"
        "## Ship {#ship} → [dep:build]\n\n"
        "- `make` is how the person builds, a plain bullet here\n\n"
        "**State:** half done\n\n"
        "**Next:**\n- `do` tag the release\n- talk to the team\n"
    ),
}


def _write(base: Path, files: dict[str, str]) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (base / name).write_text(text, encoding="utf-8")
    return base


def test_a_root_the_original_accepts_validates(tmp_path):
    report = validate_root(_write(tmp_path / "r", ORIGINAL_ACCEPTS))
    assert report.ok, [str(i) for i in report.errors]
    assert {(i.file, i.line, i.rule) for i in report.warnings} == {
        ("MEMORY.md", 15, "node-plain"),  # `make` in Memory: a plain bullet, flagged
        ("MEMORY.md", 18, "heading-unanchored-edges"),
    }
    g = report.graph
    assert g.focus == [] and g.focus_line is None
    assert {"hatch", "pyproject", "sdist", "ci", "tox", "get-items"} <= set(g.items)
    assert "make" not in g.items  # a plain bullet in both Memory and Pursuit
    assert (g.items["hatch"].line, g.items["hatch"].end_line) == (9, 10)
    grouping = next(i for i in g.ordered if i.kind == "heading" and i.line == 18)
    assert grouping.id is None and grouping.edges == [] and grouping.title == "Grouping → [dep:build]"
    assert g.items["get-items"].heading_path()[-2:] == [g.items["api"], g.items["endpoints"]]


def test_plain_bullets_and_prose_under_focus_are_text(tmp_path):
    files = dict(ORIGINAL_ACCEPTS, **{"PURSUITS.md": (
        "# Pursuits\n\n## Focus\n\nWhat matters this week:\n\n- the release first\n- `ship` shipping\n"
        "- `docs` → [rel:ship]\n\n## Ship {#ship}\n\n## Docs {#docs}\n")})
    report = validate_root(_write(tmp_path / "r", files))
    assert report.ok, [str(i) for i in report.errors]
    assert report.graph.focus == ["ship", "docs"] and report.graph.focus_line == 3
    assert [(i.line, i.rule) for i in report.warnings if i.file == "PURSUITS.md"] == [(9, "focus-edges")]


def test_headless_validate_exits_0_with_only_warnings(tmp_path, cli):
    root = _write(tmp_path / "r", ORIGINAL_ACCEPTS)
    r = cli("--headless", "validate", "--path", str(root))
    assert r.code == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[:2] == [
        "MEMORY.md:15: warning: node-plain: `make` has no edge list, so it is a plain bullet, not a node "
        "(end it with → [] to make it a node)",
        "MEMORY.md:18: warning: heading-unanchored-edges: edge list on a heading without an anchor: RightMemory "
        "reads it as title text and ignores the edges; add an anchor such as {#id}",
    ]
    assert lines[2].startswith("valid: ") and lines[2].endswith("(2 warnings)")
    data = cli("--headless", "validate", "--path", str(root), "--json").json()
    assert data["valid"] is True and data["errors"] == []
    assert [(w["line"], w["rule"], w["severity"]) for w in data["warnings"]] == [
        (15, "node-plain", "warning"), (18, "heading-unanchored-edges", "warning")]


def test_headless_validate_rejects_a_spaced_anchor_with_a_fix(tmp_path, cli):
    root = _write(tmp_path / "r", {"MEMORY.md": "# Memory\n\n## Build {F# build}\n", "MEMORY_build.md": "x\n",
                                   "PURSUITS.md": "# Pursuits\n"})
    r = cli("--headless", "validate", "--path", str(root))
    assert r.code == 1
    assert r.stdout.strip() == ("MEMORY.md:3: heading-anchor: invalid heading id in {F# build}; "
                                "write {F#build} with no space after F#")


@pytest.mark.parametrize("line,rule", [
    ("- `a` x → [rel:b] and more", "node-edges"),  # arrow present but the list does not end the line
    ("- `a` x → [rel:b", "node-edges"),
    ("- `a` x→ [rel:b]", "node-edges"),  # the arrow needs a space before it
    ("- `bad id` x → []", "id-format"),
])
def test_an_arrow_list_that_does_not_parse_is_an_error(tmp_path, line, rule):
    report = validate_root(_write(tmp_path / "r", {
        "MEMORY.md": f"# Memory\n\n{line}\n- `b` target → []\n", "PURSUITS.md": "# Pursuits\n"}))
    assert [(i.line, i.rule) for i in report.errors] == [(3, rule)]


def test_node_lines_keep_inline_code_and_several_arrows(tmp_path):
    report = validate_root(_write(tmp_path / "r", {
        "MEMORY.md": "# Memory\n\n- `a` maps `x -> [y]` to z -> w → [dep:b]\n- `b` the `→ [` marker → []\n",
        "PURSUITS.md": "# Pursuits\n"}))
    assert report.ok and not report.issues, [str(i) for i in report.issues]
    assert report.graph.items["a"].title == "maps `x -> [y]` to z -> w"
    assert [(e.type, e.target) for e in report.graph.items["a"].edges] == [("dep", "b")]


def test_warnings_never_block_writers(tmp_path, root):
    # the supervisor's admission check
    wt = _write(tmp_path / "wt", ORIGINAL_ACCEPTS)
    assert check_tree(wt, "update") == []
    (wt / "MEMORY.md").write_text("# Memory\n\n## Build {F# build}\n", encoding="utf-8")
    with pytest.raises(AdmissionRefused, match="invalid heading id"):
        check_tree(wt, "update")
    # the roles' validate_memory tool
    memory = "# Memory\n\n## Grouping → [dep:x]\n\n- `x` a node → []\n"
    (root.path / "MEMORY.md").write_text(memory, encoding="utf-8")
    tools = {s.name: s.handler for s in RoleTools(root.path, "update").specs()}
    out = tools["validate_memory"]({})
    # the text `rmtui --headless validate` prints: the warnings, then the verdict
    assert out.splitlines()[-1].startswith("valid:") and "MEMORY.md:3: warning: heading-unanchored-edges" in out


def test_status_counts_errors_not_warnings(root, cli):
    (root.path / "MEMORY.md").write_text("# Memory\n\n## Grouping → [dep:x]\n\n- `x` a node → []\n",
                                         encoding="utf-8")
    repo = git.Repo(root.path)
    repo.git.add("MEMORY.md")
    repo.git.commit("-q", "-m", "memory: grouping")
    st = cli("--headless", "status", "--root", str(root.path), "--json").json()
    assert st["valid"] is True and st["errors"] == 0 and st["warnings"] == 1


# -- writers never write a spaced anchor ------------------------------------------------

def test_prompts_skills_and_readme_write_anchors_without_a_space():
    files = [*sorted((REPO / "prompts").glob("*.md")), *sorted((REPO / "skills").rglob("*.md")), REPO / "README.md"]
    assert files
    offenders = [f"{f.relative_to(REPO)}:{n}: {line}"
                 for f in files for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
                 if SPACED_ANCHOR.search(line)]
    assert offenders == []


def test_schema_reference_states_the_original_edge_meanings():
    schema = (REPO / "prompts" / "schema.md").read_text(encoding="utf-8")
    meanings = {
        "dep": "A depends on B", "emb": "A embeds a copy of B", "bak": "A is a backup or snapshot of B",
        "agg": "A aggregates B's outputs", "ver": "A verifies or tests B", "ext": "A extends B",
        "up": "A is upstream of B", "rel": "generic (only when nothing specific fits)",
        "loc": "A is located in B", "run": "A runs through B", "cfg": "A uses B as configuration",
        "out": "A outputs B", "in": "A consumes B", "doc": "A documents B", "todo": "A is a todo or blocker for B",
    }
    for edge, meaning in meanings.items():
        assert re.search(rf"^\| `{edge}` \| {re.escape(meaning)}", schema, re.M), edge
    # the schema's own example validates as written
    example = re.findall(r"^    (.*)$", schema.split("## Example", 1)[1], re.M)
    assert "## Build and release {F#build}" in example and "### Packaging {#packaging}" in example


def test_outline_tool_and_demo_root_write_anchors_without_a_space(tmp_path):
    root = create_demo_root(tmp_path / "demo")
    report = validate_root(root.path)
    assert report.ok and not report.issues, [str(i) for i in report.issues]
    for name in report.graph.files:
        text = (root.path / name).read_text(encoding="utf-8")
        assert not SPACED_ANCHOR.search(text), name
    outline = RoleTools(root.path, "retrieve").outline({})
    assert "## Ingestion {F#ingestion} → [rel:tw-config]" in outline
    assert "### Incident runbook {M#runbook}" in outline and "# Tidewater service {#tidewater}" in outline
    assert not SPACED_ANCHOR.search(outline), outline
    # what the outline prints is itself valid heading syntax
    for line in outline.splitlines():
        m = re.match(r"\s*(#+ .*?)  \(\S+:\d+\)$", line)
        if m:
            mem = tmp_path / "probe"
            _write(mem, {"MEMORY.md": f"{m.group(1).split(' → ')[0]}\n", "PURSUITS.md": "# Pursuits\n"})
            assert not [i for i in validate_root(mem).errors if i.rule.startswith("heading")], line


def test_indented_headings_nested_bullets_and_body_fences_read_as_the_original(tmp_path):
    memory = ("# Memory\n\n"
              "   ## Build {#build}\n\n"  # up to three spaces: a heading
              ":::body\nHow it is built.\n- `not-a-node` body text → []\n:::\n\n"
              "- `hatch` hatchling → [cfg:build]\n"
              "  - `nested` a nested bullet is text of `hatch` → []\n"
              "    ## Not a heading {#nope}\n\n"
              "    ## Code {#code}\n")  # after a blank line, still inside the list item
    report = validate_root(_write(tmp_path / "r", {"MEMORY.md": memory, "PURSUITS.md": "# Pursuits\n"}))
    assert report.ok and not report.issues, [str(i) for i in report.issues]
    g = report.graph
    assert set(g.items) == {"build", "hatch"}
    assert (g.items["hatch"].line, g.items["hatch"].end_line) == (10, 12)
    assert g.items["hatch"].heading_path()[-1] is g.items["build"]


# -- where the original's CommonMark reading and a line reading part ways -------------------------
# Each case is a root one tool used to land and the other to call invalid. ``original`` is the
# verdict of the original's newest parser (a CommonMark block parse, top level only), and
# tests/compat_checker.py, which reads the graph that way with a CommonMark parser and imports
# nothing from rmtui, must reach it too.

COMMONMARK_CASES = {
    # a byte-order mark is text: the first line is a paragraph, so `mem` is no heading
    "bom-memory": ({"MEMORY.md": "\ufeff# Memory {#mem}\n\n- `a` a fact → [dep:mem]\n"}, False, "edge-dangling"),
    "bom-backing": ({"MEMORY.md": "# Memory\n\n## Api {F#api}\n",
                     "MEMORY_api.md": "\ufeff### Endpoints {#endpoints}\n\n- `get` GET /x → [doc:endpoints]\n"},
                    False, "edge-dangling"),
    # an HTML block runs to the next blank line; a comment to its `-->`: no heading inside either
    "html-div-heading": ({"MEMORY.md": "# Memory\n\n<div>\n## Inside {#inside}\n</div>\n\n"
                                       "- `a` a fact → [dep:inside]\n"}, False, "edge-dangling"),
    "html-comment-heading": ({"MEMORY.md": "# Memory\n\n<!-- kept for later\n\n## Old {#old}\n-->\n\n"
                                           "- `a` a fact → [dep:old]\n"}, False, "edge-dangling"),
    # an ordered list that interrupts a paragraph must start at 1: `2.` here is paragraph text
    "ordered-after-paragraph": ({"MEMORY.md": "# Memory\n\nSome prose.\n2. `b` not a node → [dep:missing]\n"},
                                True, None),
    # the reverse of the HTML cases: a node line inside an HTML block is HTML, not a node
    "html-node": ({"MEMORY.md": "# Memory\n\n<details>\n- `x` inside → [dep:missing]\n</details>\n"}, True, None),
}


@pytest.mark.parametrize("case", sorted(COMMONMARK_CASES))
def test_the_validator_gives_the_originals_verdict(tmp_path, case):
    from compat_checker import check_graph

    files, original, rule = COMMONMARK_CASES[case]
    files = {"PURSUITS.md": "# Pursuits\n", **files}
    root = tmp_path / "r"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_bytes(text.encode("utf-8"))  # byte for byte: the BOM stays
    violations, ids = check_graph(files)
    assert (not violations) is original, violations  # the checker reads it as the original does
    report = validate_root(root)
    assert report.ok is original, [str(i) for i in report.errors]
    if rule:
        assert {i.rule for i in report.errors} == {rule}
    assert set(report.graph.items) == ids


def test_a_bom_first_line_is_text_and_the_rest_of_the_file_still_parses(tmp_path):
    report = validate_root(_write(tmp_path / "r", {
        "MEMORY.md": "\ufeff# Memory\n\n## Build {#build}\n\n- `a` a fact → [dep:build]\n",
        "PURSUITS.md": "# Pursuits\n"}))
    assert report.ok, [str(i) for i in report.errors]
    assert set(report.graph.items) == {"build", "a"}
    first = report.graph.files["MEMORY.md"].lines[0]
    assert first == "\ufeff# Memory" and all(i.line != 1 for i in report.graph.ordered if i.file == "MEMORY.md")


@pytest.mark.parametrize("memory,ids", [
    # a blank line ends an HTML block of the div kind: what follows is read again
    ("<div>\n<p>html</p>\n</div>\n\n## After {#after}\n", {"after"}),
    # a comment ends on its `-->` line, blank lines inside or not
    ("<!-- note -->\n## After {#after}\n", {"after"}),
    ("<!--\n\n- `x` → []\n\n-->\n- `y` → []\n", {"y"}),
    # an inline tag that opens a line starts an HTML block only after a blank line or a heading
    ("Prose with\n<span>a tag</span>\n## After {#after}\n", {"after"}),
    ("## H {#h}\n<span>\n- `x` → []\n\n- `y` → []\n", {"h", "y"}),
    # after a list item, a div ends the list; an indented one is the item's own text
    ("- `a` → []\n<div>\n- `x` → []\n\n- `b` → []\n", {"a", "b"}),
    # `1.` may interrupt a paragraph, and any number may open a list after a blank line or a list
    ("Prose.\n1. `a` → []\n2. `b` → []\n", {"a", "b"}),
    ("Prose.\n\n3. `a` → []\n", {"a"}),
    ("- `a` → []\n  more of a\n2. `b` → []\n", {"a", "b"}),
    ("- `a` → []\n\nProse again\n2. `b` → []\n", {"a"}),
    # a heading goes to six `#`: seven is paragraph text, no heading at all
    ("## H {#h}\n\n####### Seven {#seven}\n", {"h"}),
])
def test_html_blocks_and_paragraph_interruptions_read_as_commonmark(tmp_path, memory, ids):
    from compat_checker import check_graph

    files = {"MEMORY.md": "# Memory\n\n" + memory, "PURSUITS.md": "# Pursuits\n"}
    assert check_graph(files) == ([], ids)
    report = validate_root(_write(tmp_path / "r", files))
    assert report.ok and not report.errors, [str(i) for i in report.errors]
    assert set(report.graph.items) == ids


@pytest.mark.parametrize("memory", [
    "## Kept {#kept}\n\n:::body\n##### Deep notes\n#### Also deep\n- `x` body text → []\n:::\n",  # body text
    "## Title `{X#y}` in code {#kept}\n",  # an anchor-like marker inside inline code is title text
    "## Title `{#y}`\n\n## Kept {#kept}\n",
    "## Title \\{X#y}\n\n## Kept {#kept}\n",  # escaped: not an anchor
    "## Title \\{#y}\n\n## Kept {#kept}\n",
])
def test_body_fences_inline_code_and_escapes_hide_markers_as_the_newest_original_does(tmp_path, memory):
    """The newest original checks headings in its CommonMark pass only (its older line-by-line
    second pass is gone): what a body fence holds is body text, and a marker in inline code
    or after a backslash is title text; no depth, marker or terminal rule fires on them."""
    from compat_checker import check_graph

    files = {"MEMORY.md": "# Memory\n\n" + memory, "PURSUITS.md": "# Pursuits\n"}
    assert check_graph(files) == ([], {"kept"})
    report = validate_root(_write(tmp_path / "r", files))
    assert report.ok and not report.issues, [str(i) for i in report.issues]
    assert set(report.graph.items) == {"kept"}
