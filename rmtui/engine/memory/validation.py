"""The one validator every writer and `rmtui --headless validate` use (DESIGN.md section 2).

Graph rules come from the parser in :mod:`rmtui.engine.graph`; this module adds the rules
for ``corrections.md`` and the agent correction collections, and the switch the supervisor
uses to leave correction capacity unenforced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rmtui.engine.graph import Graph, Issue, _decode, _read_file, load_graph

CORRECTIONS_FILE = "corrections.md"
COLLECTION_FILES = (
    "MEMORY_agent-corrections-writing.md",
    "MEMORY_agent-corrections-design.md",
)
MAX_CORRECTIONS = 15
COLLECTION_MAX_ENTRIES = 15
COLLECTION_MAX_LINES = 180
COLLECTION_MAX_ENTRY_LINES = 16
COLLECTION_MAX_LINE_CHARS = 200
CORRECTION_SECTIONS = ("Candidate", "Proposed edit", "Accepted edit")

_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")


@dataclass
class Report:
    graph: Graph
    issues: list[Issue]

    @property
    def ok(self) -> bool:
        return not self.issues

    def to_json(self) -> dict:
        return {"valid": self.ok, "errors": [i.to_json() for i in self.issues], "counts": self.graph.counts()}


def _unfenced(lines: list[str]):
    fence = None
    for idx, line in enumerate(lines, 1):
        m = _FENCE_RE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            yield idx, line, True
            continue
        if m:
            fence = m.group(1)
            yield idx, line, True
            continue
        yield idx, line, False


def check_corrections(root: Path, *, enforce_capacity: bool = True) -> list[Issue]:
    issues: list[Issue] = []
    data = _read_file(root, CORRECTIONS_FILE, issues)
    if not data:
        return issues
    lines = _decode(CORRECTIONS_FILE, data, issues).splitlines()
    entries: list[tuple[int, str, list[tuple[int, str, list[str]]]]] = []
    for idx, line, fenced in _unfenced(lines):
        if fenced:
            if entries and entries[-1][2]:
                entries[-1][2][-1][2].append(line)
            continue
        if line.startswith("## ") and not line.startswith("### "):
            entries.append((idx, line[3:].strip(), []))
        elif line.startswith("### "):
            if not entries:
                issues.append(Issue(CORRECTIONS_FILE, idx, "corrections-format", "### section outside a ## entry"))
                continue
            entries[-1][2].append((idx, line[4:].strip(), []))
        elif line.startswith("#") and not line.startswith("# "):
            issues.append(Issue(CORRECTIONS_FILE, idx, "corrections-format", "only ## entries and ### sections are allowed"))
        elif entries and entries[-1][2]:
            entries[-1][2][-1][2].append(line)
    for lineno, title, sections in entries:
        if not title:
            issues.append(Issue(CORRECTIONS_FILE, lineno, "corrections-format", "entry has no title"))
        names = [s[1] for s in sections]
        if names != list(CORRECTION_SECTIONS):
            issues.append(Issue(CORRECTIONS_FILE, lineno, "corrections-format",
                                f"entry {title!r} needs ### Candidate, ### Proposed edit, ### Accepted edit in that order, found {names}"))
            continue
        for sl, sname, body in sections:
            if not any(b.strip() for b in body):
                issues.append(Issue(CORRECTIONS_FILE, sl, "corrections-format", f"### {sname} of {title!r} is empty"))
    if enforce_capacity and len(entries) > MAX_CORRECTIONS:
        issues.append(Issue(CORRECTIONS_FILE, entries[MAX_CORRECTIONS][0], "corrections-capacity",
                            f"{len(entries)} entries; at most {MAX_CORRECTIONS} are allowed"))
    return issues


def check_collection(root: Path, name: str, *, enforce_capacity: bool = True) -> list[Issue]:
    issues: list[Issue] = []
    data = _read_file(root, name, issues)
    if not data:
        return issues
    lines = _decode(name, data, issues).splitlines()
    entries: list[list[int]] = []  # [start_line, non-empty line count]
    nonempty = 0
    for idx, line, _fenced in _unfenced(lines):
        if len(line) > COLLECTION_MAX_LINE_CHARS:
            issues.append(Issue(name, idx, "collection-line-length",
                                f"line has {len(line)} characters; at most {COLLECTION_MAX_LINE_CHARS}"))
        if not line.strip():
            continue
        nonempty += 1
        if line.startswith("### ") and not _fenced:
            entries.append([idx, 0])
        if entries:
            entries[-1][1] += 1
    for start, count in entries:
        if count > COLLECTION_MAX_ENTRY_LINES:
            issues.append(Issue(name, start, "collection-entry-length",
                                f"entry has {count} non-empty lines; at most {COLLECTION_MAX_ENTRY_LINES}"))
    if enforce_capacity:
        if len(entries) > COLLECTION_MAX_ENTRIES:
            issues.append(Issue(name, entries[COLLECTION_MAX_ENTRIES][0], "collection-capacity",
                                f"{len(entries)} entries; at most {COLLECTION_MAX_ENTRIES}"))
        if nonempty > COLLECTION_MAX_LINES:
            issues.append(Issue(name, 1, "collection-capacity",
                                f"{nonempty} non-empty lines; at most {COLLECTION_MAX_LINES}"))
    return issues


def validate_root(root: Path | str, *, enforce_correction_capacity: bool = True) -> Report:
    """Parse and validate a root (or a worktree); every error carries file, line and rule."""
    root = Path(root)
    graph = load_graph(root)
    issues = list(graph.issues)
    issues.extend(check_corrections(root, enforce_capacity=enforce_correction_capacity))
    for name in COLLECTION_FILES:
        issues.extend(check_collection(root, name, enforce_capacity=enforce_correction_capacity))
    issues.sort(key=lambda i: (i.file, i.line, i.rule))
    return Report(graph, issues)
