"""The one validator every writer and `rmtui --headless validate` use (docs/architecture.md, "The memory root").

Graph rules come from the parser in :mod:`rmtui.engine.memory.graph`; this module adds the rules
for ``corrections.md`` and the agent correction collections, and the switch the supervisor
uses to leave correction capacity unenforced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rmtui.engine.memory.graph import Graph, Issue, ParseCache, _decode, _read_file, load_graph

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
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.is_error]

    @property
    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if not i.is_error]

    @property
    def ok(self) -> bool:
        """Valid: no errors. Warnings never make a root invalid."""
        return not self.errors

    def to_json(self) -> dict:
        return {"valid": self.ok, "errors": [i.to_json() for i in self.errors],
                "warnings": [i.to_json() for i in self.warnings], "counts": self.graph.counts()}


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
            issues.append(Issue(CORRECTIONS_FILE, idx, "corrections-format",
                                "only ## entries and ### sections are allowed"))
        elif entries and entries[-1][2]:
            entries[-1][2][-1][2].append(line)
    for lineno, title, sections in entries:
        if not title:
            issues.append(Issue(CORRECTIONS_FILE, lineno, "corrections-format", "entry has no title"))
        names = [s[1] for s in sections]
        if names != list(CORRECTION_SECTIONS):
            issues.append(Issue(CORRECTIONS_FILE, lineno, "corrections-format",
                                f"entry {title!r} needs ### Candidate, ### Proposed edit, ### Accepted edit "
                                f"in that order, found {names}"))
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


def check_collection_links(root: Path, graph: Graph) -> list[Issue]:
    """A correction collection is memory only through its fixed ``M#`` heading: a file that no
    heading links is never retrieved, so its entries are never read again. A warning here (a
    root from another tool may hold one); admission refuses a model role's write to an
    unlinked collection (:mod:`rmtui.engine.writes.admission`)."""
    linked = {i.backing_file for i in graph.ordered if i.heading_kind == "M#" and i.domain == "memory"}
    out = []
    for name in COLLECTION_FILES:
        if (root / name).is_file() and name not in linked:
            ident = name.removeprefix("MEMORY_").removesuffix(".md")
            out.append(Issue(name, 1, "collection-unlinked",
                             f"no heading links this collection, so retrieval never reaches it; link it with a "
                             f"heading `{{M#{ident}}}` in MEMORY.md", "warning"))
    return out


SHARED_VIEWS_FILE = "shared_views.toml"


def check_shared_view_headings(root: Path, graph: Graph) -> list[Issue]:
    """Each ``MF#``/``MQ#`` heading should resolve to its ``[connections.<id>]`` in ``shared_views.toml``
    (of type file / question). Warnings only: the heading is valid graph either way, the view just
    cannot be pulled or asked until it is connected."""
    import tomllib

    headings = [i for i in graph.ordered if i.heading_kind in ("MF#", "MQ#") and i.id and i.domain == "memory"]
    if not headings:
        return []
    try:
        data = tomllib.loads((root / SHARED_VIEWS_FILE).read_text(encoding="utf-8"))
        conns = data.get("connections", {})
        conns = conns if isinstance(conns, dict) else {}
    except FileNotFoundError:
        conns = {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []  # a broken registry is the config check's to report
    out = []
    for h in headings:
        want = "file" if h.heading_kind == "MF#" else "question"
        entry = conns.get(h.id)
        if not isinstance(entry, dict):
            out.append(Issue(h.file, h.line, "shared-view-unconnected",
                             f"{h.heading_kind}{h.id} has no [connections.{h.id}] in {SHARED_VIEWS_FILE}",
                             "warning"))
        elif entry.get("type") != want:
            out.append(Issue(h.file, h.line, "shared-view-type",
                             f"{h.heading_kind}{h.id} is connected as type {entry.get('type')!r}, not {want!r}",
                             "warning"))
    return out


def validate_root(root: Path | str, *, enforce_correction_capacity: bool = True,
                  parses: ParseCache | None = None) -> Report:
    """Parse and validate a root (or a worktree); every issue carries file, line and rule.

    ``Report.ok`` counts errors only; warnings are reported but never fail validation.
    ``parses``: earlier file parses to reuse (:func:`~rmtui.engine.memory.graph.load_graph`).
    """
    root = Path(root)
    graph = load_graph(root, parses)
    issues = list(graph.issues)
    issues.extend(check_corrections(root, enforce_capacity=enforce_correction_capacity))
    for name in COLLECTION_FILES:
        issues.extend(check_collection(root, name, enforce_capacity=enforce_correction_capacity))
    issues.extend(check_collection_links(root, graph))
    issues.extend(check_shared_view_headings(root, graph))
    issues.sort(key=lambda i: (i.file, i.line, i.rule))
    return Report(graph, issues)
