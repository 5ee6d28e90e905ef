"""Every graph rule of docs/architecture.md, "The memory root", each with a failing and a passing root.

Each case writes a small root into tmp_path; the failing root must report the rule at the
expected file and line, and the passing root (the same shape with the fault removed) must
validate with no error at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmtui.engine.memory.graph import EDGE_TYPES, load_graph
from rmtui.engine.memory.validation import validate_root

MEM = "# Memory\n"
PUR = "# Pursuits\n\n## Focus\n"


@dataclass(frozen=True)
class Link:
    """A symbolic link to ``target`` (relative to the root)."""

    target: str


class Dir:
    """A directory where a file is expected."""


class Fifo:
    """A named pipe where a file is expected."""


def write_root(base: Path, files: dict) -> Path:
    """Write ``files`` over a minimal valid root; ``None`` removes a default file."""
    base.mkdir(parents=True, exist_ok=True)
    for name, content in {"MEMORY.md": MEM, "PURSUITS.md": PUR, **files}.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            continue
        if isinstance(content, Link):
            path.symlink_to(base / content.target)
        elif isinstance(content, Dir):
            path.mkdir()
        elif isinstance(content, Fifo):
            os.mkfifo(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return base


def where(report, rule: str) -> list[tuple[str, int]]:
    return [(i.file, i.line) for i in report.issues if i.rule == rule]


def correction_entry(title: str, *, sections=("Candidate", "Proposed edit", "Accepted edit")) -> str:
    return f"## {title}\n\n" + "".join(f"### {s}\n\nText of {s.lower()}.\n\n" for s in sections)


def collection_entry(title: str, body_lines: int) -> str:
    return f"### {title}\n" + "".join(f"- point {k}\n" for k in range(body_lines)) + "\n"


ALL_EDGES = ", ".join(f"{t}:b" for t in sorted(EDGE_TYPES))
NODE_B = "- `b` the target → []\n"

# (rule, failing files, expected (file, line), passing files)
CASES = [
    ("missing-file", {"PURSUITS.md": None}, ("PURSUITS.md", 0), {}),
    ("missing-file", {"MEMORY.md": None}, ("MEMORY.md", 0), {}),
    ("symlink", {"MEMORY.md": Link("real.md"), "real.md": MEM}, ("MEMORY.md", 1), {"real.md": MEM}),
    ("symlink",
     {"MEMORY.md": "# M\n\n## A {F#a}\n", "MEMORY_a.md": Link("other.md"), "other.md": NODE_B},
     ("MEMORY.md", 3),
     {"MEMORY.md": "# M\n\n## A {F#a}\n", "MEMORY_a.md": NODE_B}),
    ("not-regular", {"MEMORY.md": Dir()}, ("MEMORY.md", 1), {}),
    ("not-regular", {"MEMORY.md": "# M\n\n## A {M#a}\n", "MEMORY_a.md": Fifo()}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M\n\n## A {M#a}\n", "MEMORY_a.md": "free-form text\n"}),
    ("encoding", {"MEMORY.md": b"# Memory\n\n- `a` caf\xe9 \xff \xe2\x86\x92 []\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "\ufeff# Mémoire ✓\n\n- `a` café → []\n"}),
    ("encoding", {"MEMORY.md": b"# Memory\n\n- `a` x\x00y \xe2\x86\x92 []\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# Memory\n\n- `a` xy → []\n"}),
    ("heading-depth", {"MEMORY.md": "# M\n\n### S {#s}\n\n##### Deep\n"}, ("MEMORY.md", 5),
     {"MEMORY.md": "# M\n\n### S {#s}\n\n#### Deep {M#deep}\n", "MEMORY_deep.md": "notes\n"}),
    ("heading-anchor", {"MEMORY.md": "# M\n\n## Title {F# }\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M\n\n## Title {F#t}\n", "MEMORY_t.md": NODE_B}),
    ("heading-anchor",  # a space after the kind is an invalid heading id, as in RightMemory
     {"MEMORY.md": "# M\n\n## Title {F# t}\n", "MEMORY_t.md": NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M\n\n## Title {F#t}\n", "MEMORY_t.md": NODE_B}),
    ("heading-anchor", {"MEMORY.md": "# M\n\n## Packaging {# packaging}\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M\n\n## Packaging {#packaging}\n"}),
    ("heading-anchor", {"MEMORY.md": "# M\n\n## Empty {#}\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M\n\n## Empty {#empty}\n"}),
    ("heading-anchor", {"MEMORY.md": MEM + "\n## H {#bad/id}\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n## H {#good.id}\n"}),
    ("heading-edges", {"MEMORY.md": "# M {#m}\n\n## T {#t} → [dep:m\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M {#m}\n\n## T {#t} → [dep:m]\n"}),
    ("heading-edges", {"MEMORY.md": "# M {#m}\n\n## T {#t} -> dep:m\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M {#m}\n\n## T {#t} -> [dep:m] ##\n"}),
    ("heading-kind", {"MEMORY.md": "# M\n\n## K {X#k}\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M\n\n## K {S#k}\n", "MEMORY_SKILL_k.md": "# Skill\n"}),
    ("kind-domain", {"PURSUITS.md": PUR + "\n## K {M#k}\n", "MEMORY_k.md": "text\n"}, ("PURSUITS.md", 5),
     {"MEMORY.md": MEM + "\n## K {M#k}\n", "MEMORY_k.md": "text\n"}),
    ("kind-domain", {"PURSUITS.md": PUR + "\n## V {MF#v}\n"}, ("PURSUITS.md", 5),
     {"MEMORY.md": MEM + "\n## V {MF#v}\n"}),
    ("id-format", {"MEMORY.md": MEM + "\n- `bad id` x → []\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `ok.id_1-X` x → []\n"}),
    ("duplicate-id", {"MEMORY.md": MEM + "\n- `a` x → []\n- `a` y → []\n"}, ("MEMORY.md", 4),
     {"MEMORY.md": MEM + "\n- `a` x → []\n- `a2` y → []\n"}),
    ("duplicate-id",  # one namespace across Memory and Pursuit
     {"MEMORY.md": MEM + "\n- `a` x → []\n", "PURSUITS.md": PUR + "\n## A {#a}\n"}, ("PURSUITS.md", 5),
     {"MEMORY.md": MEM + "\n- `a` x → []\n", "PURSUITS.md": PUR + "\n## A {#pa}\n"}),
    ("node-edges",  # an arrow list is there but does not parse
     {"MEMORY.md": MEM + "\n- `a` x → [rel:b] trailing words\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:b]\n" + NODE_B}),
    ("node-edges", {"MEMORY.md": MEM + "\n* `a` x → [rel:b\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n* `a` x → [rel:b]\n" + NODE_B}),
    ("edge-malformed", {"MEMORY.md": MEM + "\n- `a` x → [rel]\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:b]\n" + NODE_B}),
    ("edge-malformed", {"MEMORY.md": MEM + "\n- `a` x → [rel:b c]\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:b]\n" + NODE_B}),
    ("edge-malformed", {"MEMORY.md": MEM + "\n- `a` x → [1rel:b]\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel: b]\n" + NODE_B}),
    ("edge-empty", {"MEMORY.md": MEM + "\n- `a` x → [rel:b,]\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:b]\n" + NODE_B}),
    ("edge-empty", {"MEMORY.md": MEM + "\n- `a` x → [dep:b, , rel:b]\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [dep:b, rel:b]\n" + NODE_B}),
    ("edge-empty", {"MEMORY.md": "# M {#m}\n\n## T {#t} → [,dep:m]\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M {#m}\n\n## T {#t} → [dep:m]\n"}),
    ("terminal-bullet", {"MEMORY.md": MEM + "\n## A {F#a}\n\n- a summary bullet\n", "MEMORY_a.md": "x\n"},
     ("MEMORY.md", 5),
     {"MEMORY.md": MEM + "\n## A {F#a}\n\nA summary paragraph.\n", "MEMORY_a.md": "- a summary bullet\n"}),
    ("terminal-bullet",
     {"MEMORY.md": MEM + "\n### S {#s}\n\n#### R {M#r}\n\n1. a numbered step\n", "MEMORY_r.md": "x\n"},
     ("MEMORY.md", 7),
     {"MEMORY.md": MEM + "\n### S {#s}\n\n#### R {M#r}\n\nSteps live in the file.\n", "MEMORY_r.md": "1. x\n"}),
    ("body-fence", {"MEMORY.md": MEM + "\n## A {#a}\n\n:::body\nThe body.\n"}, ("MEMORY.md", 5),
     {"MEMORY.md": MEM + "\n## A {#a}\n\n:::body\nThe body.\n:::\n"}),
    ("body-fence", {"MEMORY.md": MEM + "\n## A {#a}\n\n::::body\nThe body.\n:::\n"}, ("MEMORY.md", 5),
     {"MEMORY.md": MEM + "\n## A {#a}\n\n::::body\nThe body.\n:::\nstill body\n::::\n"}),
    ("body-fence", {"MEMORY.md": MEM + "\n## A {#a}\n\nProse.\n:::\n"}, ("MEMORY.md", 6),
     {"MEMORY.md": MEM + "\n## A {#a}\n\nProse.\n\n    :::\n"}),
    ("edge-type", {"MEMORY.md": MEM + "\n- `a` x → [bogus:b]\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + f"\n- `a` all fifteen types → [{ALL_EDGES}]\n" + NODE_B}),
    ("edge-duplicate", {"MEMORY.md": MEM + "\n- `a` x → [rel:b, rel:b]\n" + NODE_B}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:b, dep:b]\n" + NODE_B}),
    ("edge-self", {"MEMORY.md": MEM + "\n- `a` x → [rel:a]\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:b]\n" + NODE_B}),
    ("edge-dangling",  # a nested bullet belongs to its list item: it is no node
     {"MEMORY.md": MEM + "\n- `a` x → [rel:n]\n  - `n` nested → []\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:n]\n - `n` a sibling, one space in → []\n"}),
    ("edge-dangling",  # nor a bullet indented as code
     {"MEMORY.md": MEM + "\n- `a` x → [rel:n]\n\nProse.\n\n    - `n` code → []\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:n]\n\nProse.\n\n   - `n` three spaces in → []\n"}),
    ("edge-dangling", {"MEMORY.md": MEM + "\n- `a` x → [rel:nowhere]\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` x → [rel:b]\n" + NODE_B}),
    ("edge-dangling", {"MEMORY.md": MEM + "\n## H {#h} → [doc:nowhere]\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n## H {#h} → [doc:b]\n" + NODE_B}),
    ("edge-rel-ancestor", {"MEMORY.md": "# M {#m}\n\n- `a` x → [rel:m]\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M {#m}\n\n- `a` x → [dep:m]\n"}),
    ("edge-rel-ancestor",  # the F# heading is the ancestor of its backing file's nodes
     {"MEMORY.md": "# M\n\n## A {F#a}\n", "MEMORY_a.md": "intro\n\n- `n` x → [rel:a]\n"}, ("MEMORY_a.md", 3),
     {"MEMORY.md": "# M\n\n## A {F#a}\n", "MEMORY_a.md": "intro\n\n- `n` x → [up:a]\n"}),
    ("h4-typed", {"MEMORY.md": MEM + "\n### S {#s}\n\n#### T {#t}\n"}, ("MEMORY.md", 5),
     {"MEMORY.md": MEM + "\n### S {#s}\n\n#### T {M#t}\n", "MEMORY_t.md": "notes\n"}),
    ("h4-parent", {"MEMORY.md": MEM + "\n## S {#s}\n\n#### T {M#t}\n", "MEMORY_t.md": "notes\n"}, ("MEMORY.md", 5),
     {"MEMORY.md": MEM + "\n### S {#s}\n\n#### T {M#t}\n", "MEMORY_t.md": "notes\n"}),
    ("h4-children",
     {"MEMORY.md": MEM + "\n### S {#s}\n\n#### T {M#t}\n\n- `n` x → []\n", "MEMORY_t.md": "notes\n"},
     ("MEMORY.md", 5),
     {"MEMORY.md": MEM + "\n### S {#s}\n\n- `n` x → []\n\n#### T {M#t}\n", "MEMORY_t.md": "notes\n"}),
    ("h4-children",  # a backticked bullet under a terminal heading, even without edges
     {"MEMORY.md": MEM + "\n### S {#s}\n\n#### T {M#t}\n\n- `n` x\n", "MEMORY_t.md": "notes\n"},
     ("MEMORY.md", 7),
     {"MEMORY.md": MEM + "\n### S {#s}\n\n#### T {M#t}\n\nBody text is fine here.\n", "MEMORY_t.md": "notes\n"}),
    ("backing-children", {"MEMORY.md": MEM + "\n## A {F#a}\n\nSummary.\n\n- `n` x → []\n", "MEMORY_a.md": "x\n"},
     ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n## A {F#a}\n\nSummary.\n", "MEMORY_a.md": "- `n` x → []\n"}),
    ("backing-children", {"MEMORY.md": MEM + "\n## A {F#a}\n\n### Child\n", "MEMORY_a.md": "x\n"},
     ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n## A {F#a}\n", "MEMORY_a.md": "### Child\n"}),
    ("backing-children", {"MEMORY.md": MEM + "\n## A {F#a}\n\n- `n` no edges\n", "MEMORY_a.md": "x\n"},
     ("MEMORY.md", 5),
     {"MEMORY.md": MEM + "\n## A {F#a}\n\nSummary.\n", "MEMORY_a.md": "- `n` no edges\n"}),
    ("backing-missing", {"MEMORY.md": MEM + "\n## A {F#a}\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n## A {F#a}\n", "MEMORY_a.md": ""}),
    ("backing-missing", {"MEMORY.md": MEM + "\n## A {S#a}\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n## A {S#a}\n", "MEMORY_SKILL_a.md": "skill\n"}),
    ("backing-missing", {"PURSUITS.md": PUR + "\n## P {F#p}\n"}, ("PURSUITS.md", 5),
     {"PURSUITS.md": PUR + "\n## P {F#p}\n", "PURSUIT_p.md": "**Next:**\n- `do` it\n"}),
    ("backing-duplicate",  # MEMORY_Foo.md and MEMORY_foo.md are one file on many systems
     {"MEMORY.md": MEM + "\n## A {F#Foo}\n## B {M#foo}\n", "MEMORY_Foo.md": "", "MEMORY_foo.md": "x\n"},
     ("MEMORY.md", 4),
     {"MEMORY.md": MEM + "\n## A {F#Foo}\n## B {M#bar}\n", "MEMORY_Foo.md": "", "MEMORY_bar.md": "x\n"}),
    ("backing-cycle",
     {"MEMORY.md": MEM + "\n## A {F#a}\n", "MEMORY_a.md": "## B {F#b}\n", "MEMORY_b.md": "## C {F#A}\n"},
     ("MEMORY_b.md", 1),
     {"MEMORY.md": MEM + "\n## A {F#a}\n", "MEMORY_a.md": "## B {F#b}\n", "MEMORY_b.md": "## C {F#c}\n",
      "MEMORY_c.md": "- `leaf` x → []\n"}),
    ("focus-entry", {"PURSUITS.md": PUR + "\n- `bad id`\n\n## P {#p}\n"}, ("PURSUITS.md", 5),
     {"PURSUITS.md": PUR + "\n- `p` the release\n\n## P {#p}\n"}),
    ("focus-duplicate", {"PURSUITS.md": PUR + "\n- `p`\n- `p`\n\n## P {#p}\n"}, ("PURSUITS.md", 6),
     {"PURSUITS.md": PUR + "\n- `p`\n- `q`\n\n## P {#p}\n\n## Q {#q}\n"}),
    ("focus-unknown", {"PURSUITS.md": PUR + "\n- `nowhere`\n"}, ("PURSUITS.md", 5),
     {"PURSUITS.md": PUR + "\n- `p`\n\n## P {#p}\n"}),
    ("focus-unknown",  # a Memory heading is not a Pursuit
     {"MEMORY.md": MEM + "\n## M {#mh}\n", "PURSUITS.md": PUR + "\n- `mh`\n"}, ("PURSUITS.md", 5),
     {"MEMORY.md": MEM + "\n## M {#mh}\n", "PURSUITS.md": PUR + "\n- `p`\n\n## P {#p} → [rel:mh]\n"}),
    ("focus-unknown",  # a Pursuit heading inside a PURSUIT_<id>.md backing file counts
     {"PURSUITS.md": PUR + "\n- `inner`\n\n## P {F#p}\n", "PURSUIT_p.md": "## Other {#other}\n"},
     ("PURSUITS.md", 5),
     {"PURSUITS.md": PUR + "\n- `inner`\n\n## P {F#p}\n", "PURSUIT_p.md": "## Inner {#inner}\n"}),
    ("focus-unknown",  # a `###` does not end the Focus section
     {"PURSUITS.md": PUR + "\n### Now\n\n- `nowhere`\n"}, ("PURSUITS.md", 7),
     {"PURSUITS.md": PUR + "\n### Now\n\n- `p`\n\n## P {#p}\n\n- `p2` not Focus any more → []\n"}),
    ("reserved-id", {"PURSUITS.md": PUR + "\n## Rules {F#Rules}\n", "PURSUIT_Rules.md": "x\n"},
     ("PURSUITS.md", 5),
     {"PURSUITS.md": PUR + "\n## Rules {F#house-rules}\n", "PURSUIT_house-rules.md": "x\n",
      "MEMORY.md": MEM + "\n## Rules {F#rules}\n", "MEMORY_rules.md": "x\n"}),
    ("corrections-format",
     {"corrections.md": "# Corrections\n\n" + correction_entry("E1", sections=("Candidate", "Accepted edit"))},
     ("corrections.md", 3),
     {"corrections.md": "# Corrections\n\n" + correction_entry("E1")}),
    ("corrections-format",
     {"corrections.md": "## E1\n\n### Candidate\n\n### Proposed edit\n\nx\n\n### Accepted edit\n\ny\n"},
     ("corrections.md", 3),
     {"corrections.md": "## E1\n\n### Candidate\n\nc\n\n### Proposed edit\n\nx\n\n### Accepted edit\n\ny\n"}),
    ("corrections-format",  # sections out of order
     {"corrections.md": correction_entry("E1", sections=("Proposed edit", "Candidate", "Accepted edit"))},
     ("corrections.md", 1),
     {"corrections.md": correction_entry("E1")}),
    ("corrections-capacity",
     {"corrections.md": "".join(correction_entry(f"E{k}") for k in range(16))}, ("corrections.md", 1 + 15 * 14),
     {"corrections.md": "".join(correction_entry(f"E{k}") for k in range(15))}),
    ("collection-line-length",
     {"MEMORY_agent-corrections-writing.md": "### E\n- " + "x" * 199 + "\n"},
     ("MEMORY_agent-corrections-writing.md", 2),
     {"MEMORY_agent-corrections-writing.md": "### E\n- " + "x" * 198 + "\n"}),
    ("collection-entry-length",
     {"MEMORY_agent-corrections-design.md": collection_entry("E0", 3) + collection_entry("E1", 16)},
     ("MEMORY_agent-corrections-design.md", 6),
     {"MEMORY_agent-corrections-design.md": collection_entry("E0", 3) + collection_entry("E1", 15)}),
    ("collection-capacity",
     {"MEMORY_agent-corrections-writing.md": "".join(collection_entry(f"E{k}", 2) for k in range(16))},
     ("MEMORY_agent-corrections-writing.md", 1 + 15 * 4),
     {"MEMORY_agent-corrections-writing.md": "".join(collection_entry(f"E{k}", 2) for k in range(15))}),
    ("collection-capacity",  # 181 non-empty lines in 15 entries
     {"MEMORY_agent-corrections-design.md": "".join(collection_entry(f"E{k}", 11) for k in range(15)) + "tail\n"},
     ("MEMORY_agent-corrections-design.md", 1),
     {"MEMORY_agent-corrections-design.md": "".join(collection_entry(f"E{k}", 11) for k in range(15))}),
]

EMITTED_RULES = {
    "missing-file", "symlink", "not-regular", "encoding", "heading-depth", "heading-anchor", "heading-edges",
    "heading-kind", "kind-domain", "id-format", "duplicate-id", "node-edges", "edge-malformed",
    "edge-empty", "edge-type",
    "edge-duplicate", "edge-self", "edge-dangling", "edge-rel-ancestor", "h4-typed", "h4-parent", "h4-children",
    "backing-children", "backing-missing", "backing-duplicate", "backing-cycle", "focus-entry",
    "focus-duplicate", "focus-unknown", "reserved-id", "terminal-bullet", "body-fence", "corrections-format",
    "corrections-capacity",
    "collection-line-length", "collection-entry-length", "collection-capacity",
}

# Warnings: text RightMemory reads differently than it looks, or that only some of its versions
# accept. (rule, files with the warning, expected (file, line), the same root without it); both
# roots validate.
WARNING_CASES = [
    ("heading-unanchored-edges", {"MEMORY.md": "# M {#m}\n\n## Title → [dep:m]\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M {#m}\n\n## Title {#t} → [dep:m]\n\n## Grouping title\n"}),
    ("heading-anchor-text", {"MEMORY.md": "# M\n\n### T {#a} words\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": "# M\n\n### T words {#a}\n"}),
    ("heading-title", {"MEMORY.md": "# M\n\n##\n"}, ("MEMORY.md", 3), {"MEMORY.md": "# M\n\n## T\n"}),
    ("node-plain", {"MEMORY.md": MEM + "\n- `a` lacks its edge list\n"}, ("MEMORY.md", 3),
     {"MEMORY.md": MEM + "\n- `a` has an empty edge list → []\n"}),
    ("focus-edges", {"PURSUITS.md": PUR + "\n- `p` → []\n\n## P {#p}\n"}, ("PURSUITS.md", 5),
     {"PURSUITS.md": PUR + "\n- `p` the release\n\n## P {#p}\n"}),
    ("next-entry",
     {"PURSUITS.md": PUR + "\n## P {#p}\n\n**Next:**\n- `run` the tests\n"}, ("PURSUITS.md", 8),
     {"PURSUITS.md": PUR + "\n## P {#p}\n\n**State:** half done\n\n**Next:**\n- `do` run the tests\n"
      "- `ask` which release\n\n- `wait` for review\n- a plain bullet\n\n**Done when:** it ships\n\n"
      "**Status:** open\n"}),
]
WARNING_RULES = {c[0] for c in WARNING_CASES}


def _case_id(case) -> str:
    return f"{case[0]}@{case[2][0]}:{case[2][1]}"


def test_every_rule_has_a_case():
    assert {c[0] for c in CASES} == EMITTED_RULES
    assert not EMITTED_RULES & WARNING_RULES


@pytest.mark.parametrize("rule,failing,expected,passing", CASES, ids=[_case_id(c) for c in CASES])
def test_rule_fails_and_passes(tmp_path, rule, failing, expected, passing):
    bad = validate_root(write_root(tmp_path / "bad", failing))
    assert not bad.ok
    assert expected in where(bad, rule), [str(i) for i in bad.issues]
    good = validate_root(write_root(tmp_path / "good", passing))
    assert good.ok, [str(i) for i in good.issues]


@pytest.mark.parametrize("rule,warned,expected,clean", WARNING_CASES, ids=[_case_id(c) for c in WARNING_CASES])
def test_warning_reports_but_validates(tmp_path, rule, warned, expected, clean):
    report = validate_root(write_root(tmp_path / "warned", warned))
    assert report.ok, [str(i) for i in report.errors]
    found = [i for i in report.issues if i.rule == rule]
    assert expected in [(i.file, i.line) for i in found], [str(i) for i in report.issues]
    assert all(i.severity == "warning" and ": warning: " in str(i) for i in found)
    assert all(i.rule in WARNING_RULES for i in report.warnings)
    quiet = validate_root(write_root(tmp_path / "clean", clean))
    assert quiet.ok and not quiet.issues, [str(i) for i in quiet.issues]


def test_capacity_rules_switch_off_for_the_supervisor(tmp_path):
    root = write_root(tmp_path, {
        "corrections.md": "".join(correction_entry(f"E{k}") for k in range(20)),
        "MEMORY_agent-corrections-writing.md": "".join(collection_entry(f"E{k}", 2) for k in range(16)),
    })
    enforced = validate_root(root)
    assert {i.rule for i in enforced.errors} == {"corrections-capacity", "collection-capacity"}
    assert {i.rule for i in enforced.warnings} == {"collection-unlinked"}  # no M# heading links it
    relaxed = validate_root(root, enforce_correction_capacity=False)
    assert relaxed.ok, [str(i) for i in relaxed.issues]
    # the format rules still hold when capacity is off
    (root / "corrections.md").write_text(correction_entry("E", sections=("Candidate",)), encoding="utf-8")
    assert "corrections-format" in {i.rule for i in validate_root(root, enforce_correction_capacity=False).issues}


def test_fenced_code_is_not_graph(tmp_path):
    root = write_root(tmp_path, {"MEMORY.md": (
        "# Memory\n\n"
        "```markdown\n"
        "- `example` a node-shaped line without edges\n"
        "## Not a heading {F#nofile}\n"
        "- `n1` would be a duplicate → [rel:nowhere]\n"
        "```\n\n"
        "~~~~\n- `inside` tilde fence\n```\nstill fenced\n~~~~\n\n"
        "- `n1` the real node → []\n"
    )})
    report = validate_root(root)
    assert report.ok, [str(i) for i in report.issues]
    assert [i.id for i in report.graph.ordered if i.id] == ["n1"]
    assert report.graph.items["n1"].line == 15


def test_unclosed_fence_hides_the_rest_of_the_file(tmp_path):
    root = write_root(tmp_path, {"MEMORY.md": "# Memory\n\n```\n- `x` no edges\n"})
    report = validate_root(root)
    assert report.ok and report.graph.counts()["nodes"] == 0


def test_ascii_arrow_is_accepted_like_the_unicode_arrow(tmp_path):
    root = write_root(tmp_path, {"MEMORY.md": (
        "# Memory {#m}\n\n## Tools {#tools} -> [dep:m]\n\n"
        "- `a` uses b -> [dep:b]\n- `b` used by a → [rel:a]\n- `c` maps x -> y -> [ext:a]\n"
    )})
    report = validate_root(root)
    assert report.ok, [str(i) for i in report.issues]
    g = report.graph
    assert [(e.type, e.target) for e in g.items["a"].edges] == [("dep", "b")]
    assert [(e.type, e.target) for e in g.items["tools"].edges] == [("dep", "m")]
    assert g.items["c"].title == "maps x -> y"


def test_rightmemory_anchor_spellings(tmp_path):
    """`{#id}`, `{F#id}`, `{S#id}` name the kinds; a closing `#` run may end the heading."""
    root = write_root(tmp_path, {
        "MEMORY.md": "# Graph {#g}\n\n## Runbook {F#runbook} → [dep:g] ##\n\n## Skills\n\n### Skill {S#sk}\n",
        "MEMORY_runbook.md": "- `step` first → []\n",
        "MEMORY_SKILL_sk.md": "free form\n",
    })
    report = validate_root(root)
    assert report.ok and not report.issues, [str(i) for i in report.issues]
    g = report.graph
    assert g.items["g"].heading_kind == "#"
    assert (g.items["runbook"].heading_kind, g.items["runbook"].backing_file) == ("F#", "MEMORY_runbook.md")
    assert g.items["runbook"].title == "Runbook" and [e.target for e in g.items["runbook"].edges] == ["g"]
    assert g.items["step"].parent is g.items["runbook"]
    assert g.items["sk"].backing_file == "MEMORY_SKILL_sk.md"


@pytest.mark.parametrize("heading,fixed", [
    ("## Build {F# build}", "{F#build}"),
    ("### Packaging {# packaging}", "{#packaging}"),
    ("## Notes {M# notes}", "{M#notes}"),
])
def test_spaced_anchor_is_an_invalid_heading_id_with_a_fix_hint(tmp_path, heading, fixed):
    root = write_root(tmp_path, {"MEMORY.md": f"# Memory\n\n{heading}\n"})
    report = validate_root(root)
    assert not report.ok
    [issue] = report.errors
    assert (issue.file, issue.line, issue.rule, issue.severity) == ("MEMORY.md", 3, "heading-anchor", "error")
    assert "invalid heading id" in issue.message and f"write {fixed}" in issue.message
    assert report.graph.items == {}  # like RightMemory, the invalid anchor addresses nothing


def test_anchor_in_inline_code_or_escaped_is_text(tmp_path):
    root = write_root(tmp_path, {"MEMORY.md": "# Memory\n\n## Write `{F# x}` never\n\n## Escaped \\{#y}\n"})
    report = validate_root(root)
    assert report.ok and not report.issues, [str(i) for i in report.issues]
    assert report.graph.items == {}


def test_windows_line_endings_parse_like_unix_ones(tmp_path):
    text = ("# Memory {#m}\n\n## Api {F#api} -> [dep:m]\n\n## Facts\n\n```\n- `x` fenced\n```\n\n"
            "- `a` fact → [rel:b]\n- `b` fact → []\n")
    root = write_root(tmp_path, {"MEMORY.md": text.replace("\n", "\r\n").encode(),
                                 "MEMORY_api.md": b"- `e` endpoint \xe2\x86\x92 []\r\n",
                                 "PURSUITS.md": PUR.replace("\n", "\r\n") + "\r\n- `p`\r\n\r\n## P {#p}\r\n"})
    report = validate_root(root)
    assert report.ok, [str(i) for i in report.issues]
    g = report.graph
    assert set(g.items) == {"m", "api", "a", "b", "e", "p"}
    assert g.items["a"].title == "fact" and g.focus == ["p"]


def test_pursuit_lines_without_edges_are_body_text(tmp_path):
    root = write_root(tmp_path, {"PURSUITS.md": PUR + "\n## P {#p}\n\n- `make` is the build tool here\n"})
    report = validate_root(root)
    assert report.ok
    assert "make" not in report.graph.items


def test_uncertain_nodes_are_flagged(tmp_path):
    root = write_root(tmp_path, {"MEMORY.md": MEM + "\n- `u` Uncertain: the cache may be stale → []\n"
                                 "- `s` The cache is rebuilt nightly → []\n"})
    report = validate_root(root)
    assert report.ok
    g = report.graph
    assert g.items["u"].uncertain and not g.items["s"].uncertain
    assert g.counts()["uncertain"] == 1


def test_tree_structure_and_counts(tmp_path):
    root = write_root(tmp_path, {
        "MEMORY.md": "# Projects {#projects}\n\n## Api {F#api}\n\nThe API service.\n\n## Web {#web}\n\n- `w1` x → []\n",
        "MEMORY_api.md": "Details.\n\n### Endpoints {#endpoints}\n\n- `e1` GET /items → [rel:w1]\n  continues here\n",
        "PURSUITS.md": PUR + "\n- `ship`\n\n## Ship {#ship}\n",
    })
    report = validate_root(root)
    assert report.ok, [str(i) for i in report.issues]
    g = report.graph
    assert g.items["e1"].heading_path() == [g.items["projects"], g.items["api"], g.items["endpoints"]]
    assert (g.items["e1"].line, g.items["e1"].end_line) == (5, 6)
    assert g.focus == ["ship"]
    assert g.counts() == {"nodes": 2, "headings": 5, "files": 3, "uncertain": 0}
    assert [i.id for i in g.roots] == ["projects", None]


# -- content hashes ---------------------------------------------------------

HASH_ROOT = {
    "MEMORY.md": (
        "# Memory {#mem}\n\n## Service {F#svc}\n\nThe service.\n\n"
        "## Other {#other}\n\n- `o1` unrelated fact → []\n- `o2` another fact → []\n"
    ),
    "MEMORY_svc.md": "Service details.\n\n- `s1` port 8080 → []\n\n### Deep {F#deep}\n",
    "MEMORY_deep.md": "- `d1` deep fact → []\n",
}


def _hashes(path: Path) -> dict[str, str]:
    return {i.id: i.hash for i in load_graph(path).ordered if i.id}


def test_hash_is_stable_and_per_item(tmp_path):
    root = write_root(tmp_path, HASH_ROOT)
    first, again = _hashes(root), _hashes(root)
    assert first == again
    assert len(set(first.values())) == len(first)
    assert all(len(h) == 64 for h in first.values())


def test_hash_changes_with_the_node_text_only_for_that_node_and_its_headings(tmp_path):
    root = write_root(tmp_path, HASH_ROOT)
    before = _hashes(root)
    path = root / "MEMORY.md"
    path.write_text(path.read_text().replace("unrelated fact", "unrelated fact, revised"), encoding="utf-8")
    after = _hashes(root)
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"o1", "other", "mem"}  # the node and the headings whose block holds it


def test_hash_follows_pulled_in_backing_files(tmp_path):
    root = write_root(tmp_path, HASH_ROOT)
    before = _hashes(root)
    (root / "MEMORY_deep.md").write_text("- `d1` deep fact, corrected → []\n", encoding="utf-8")
    after = _hashes(root)
    changed = {k for k in before if before[k] != after[k]}
    # d1 itself, the F# headings that pull MEMORY_deep.md in (directly or through MEMORY_svc.md),
    # and the root heading that holds them; the unrelated branch keeps its hashes
    assert changed == {"d1", "deep", "svc", "mem"}
    assert after["o1"] == before["o1"] and after["other"] == before["other"] and after["s1"] == before["s1"]


def test_hash_ignores_unrelated_files(tmp_path):
    root = write_root(tmp_path, HASH_ROOT)
    before = _hashes(root)
    (root / "notes.txt").write_text("not part of memory\n", encoding="utf-8")
    (root / "corrections.md").write_text(correction_entry("E"), encoding="utf-8")
    assert _hashes(root) == before


# -- the CLI ---------------------------------------------------------------

def test_cli_validate_prints_file_line_rule_message_and_exits_1(root, cli):
    (root.path / "MEMORY.md").write_text(
        "# Memory\n\n- `a` x → [rel:zz]\n- `b` broken → [rel:a\n- `c` lacks edges\n", encoding="utf-8")
    r = cli("--headless", "validate", "--root", str(root.path))
    assert r.code == 1
    lines = r.stdout.strip().splitlines()
    assert lines == [
        "MEMORY.md:3: edge-dangling: edge rel:zz names no existing item",
        "MEMORY.md:4: node-edges: node `b` has a malformed edge list (end the line with → [type:target, ...])",
        "MEMORY.md:5: warning: node-plain: `c` has no edge list, so it is a plain bullet, not a node "
        "(end it with → [] to make it a node)",
    ]
    j = cli("--headless", "validate", "--root", str(root.path), "--json")
    assert j.code == 1
    data = j.json()
    assert data["valid"] is False
    assert [(e["file"], e["line"], e["rule"], e["severity"]) for e in data["errors"]] == [
        ("MEMORY.md", 3, "edge-dangling", "error"), ("MEMORY.md", 4, "node-edges", "error")]
    assert [(e["file"], e["line"], e["rule"], e["severity"]) for e in data["warnings"]] == [
        ("MEMORY.md", 5, "node-plain", "warning")]


def test_cli_validate_exits_0_on_a_valid_root(root, cli):
    (root.path / "MEMORY.md").write_text("# Memory\n\n- `a` x → []\n", encoding="utf-8")
    r = cli("--headless", "validate", "--root", str(root.path))
    assert r.code == 0, r.stdout + r.stderr
    assert r.stdout.startswith("valid:") and "1 nodes" in r.stdout
    assert cli("--headless", "validate", "--root", str(root.path), "--json").json()["valid"] is True


def test_cli_validate_path_checks_a_worktree_folder(tmp_path, root, cli):
    other = write_root(tmp_path / "wt", {"MEMORY.md": MEM + "\n##### too deep\n"})
    r = cli("--headless", "validate", "--root", str(root.path), "--path", str(other))
    assert r.code == 1
    assert r.stdout.strip() == "MEMORY.md:3: heading-depth: headings go at most to ####, found #####"
    missing = cli("--headless", "validate", "--root", str(root.path), "--path", str(tmp_path / "nowhere"))
    assert missing.code == 2 and "is not a folder" in missing.stderr


# -- properties --------------------------------------------------------------

_ids = st.from_regex(r"[a-z][a-z0-9_.-]{0,8}", fullmatch=True)
_words = st.text(alphabet=st.sampled_from("abcdefghij klmnop,.:;()"), min_size=1,
                 max_size=30).map(str.strip).filter(bool)


@st.composite
def valid_graphs(draw):
    """A random valid Memory tree: nested plain headings and nodes with edges to earlier ids."""
    idents = draw(st.lists(_ids, min_size=1, max_size=25, unique=True))
    lines = ["# Memory"]
    seen: list[str] = []
    level = 1
    ancestors: dict[int, str] = {}
    for ident in idents:
        if draw(st.booleans()):
            level = draw(st.integers(min_value=2, max_value=min(level + 1, 3)))
            for lv in [k for k in ancestors if k >= level]:
                del ancestors[lv]
            ancestors[level] = ident
            lines += ["", f"{'#' * level} {draw(_words)} {{#{ident}}}", ""]
        else:
            blocked = set(ancestors.values())
            pool = [s for s in seen if s not in blocked]
            targets = draw(st.lists(st.sampled_from(pool), max_size=3, unique=True)) if pool else []
            types = [draw(st.sampled_from(sorted(EDGE_TYPES))) for _ in targets]
            edges = ", ".join(f"{t}:{x}" for t, x in zip(types, targets, strict=True))
            arrow = draw(st.sampled_from(["→", "->"]))
            lines.append(f"- `{ident}` {draw(_words)} {arrow} [{edges}]")
        seen.append(ident)
    return "\n".join(lines) + "\n", idents


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=valid_graphs())
def test_generated_valid_graphs_validate(tmp_path_factory, graph):
    text, idents = graph
    root = write_root(tmp_path_factory.mktemp("g"), {"MEMORY.md": text})
    report = validate_root(root)
    assert report.ok, (text, [str(i) for i in report.issues])
    assert set(report.graph.items) == set(idents)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(list("#-`{}[]:,→> \n\tFMSQaz019_.~*\x00")
                                     + ["```", "->", "**Next:**", "## Focus\n", "{F#a}", "- `a` "]),
                     max_size=150).map("".join))
def test_parser_never_crashes_and_reports_real_lines(tmp_path_factory, text):
    root = write_root(tmp_path_factory.mktemp("t"), {"MEMORY.md": text, "PURSUITS.md": PUR + text})
    report = validate_root(root)
    counts = {"MEMORY.md": len(text.split("\n")), "PURSUITS.md": len((PUR + text).split("\n"))}
    for issue in report.issues:
        assert issue.rule and issue.message
        if issue.file in counts:
            assert 0 <= issue.line <= counts[issue.file], str(issue)
