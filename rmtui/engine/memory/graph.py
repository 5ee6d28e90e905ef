"""The memory graph: one parser for RightMemory Markdown roots (DESIGN.md section 2).

The parsed :class:`Graph` is the engine object every later part uses: the retrieval
corpus, the TUI tree, the supervisor's validation. Parsing records structural problems
as :class:`Issue` values instead of raising, so one pass reports every error with its
file, line and rule. Cross-file rules live in :mod:`rmtui.engine.validation`.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

EDGE_TYPES = frozenset(
    "dep emb bak agg ver ext up rel loc run cfg out in doc todo".split()
)
HEADING_KINDS = ("#", "F#", "M#", "S#", "MF#", "MQ#")
TYPED_KINDS = frozenset(HEADING_KINDS) - {"#"}
MEMORY_ONLY_KINDS = frozenset({"M#", "S#", "MF#", "MQ#"})
ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
NEXT_VERBS = frozenset({"do", "ask", "wait"})

MEMORY_ROOT_FILE = "MEMORY.md"
PURSUIT_ROOT_FILE = "PURSUITS.md"

_HEADING_RE = re.compile(r"^(#+)(?:\s+(.*?))?\s*$")
# ``{F#id}`` (RightMemory's spelling) and ``{F# id}`` are both accepted.
_ANCHOR_TAIL_RE = re.compile(
    r"^(?P<title>.*?)\s*\{(?P<kind>[A-Z]*#)\s*(?P<id>[^\s{}#][^\s{}]*)\}"
    r"\s*(?:(?:→|->)\s*\[(?P<edges>[^\]]*)\])?\s*$"
)
_EDGES_TAIL_RE = re.compile(r"(?:→|->)\s*\[([^\]]*)\]\s*$")
# A node is a ``-`` bullet whose first token is a backticked id (``- `id` prose → [...]``).
_NODE_RE = re.compile(r"^(?P<indent>[ \t]*)-\s+`(?P<id>[^`]*)`(?P<rest>(?:\s.*)?)$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_BULLET_RE = re.compile(r"^[ \t]*[-*+]\s+")
_NEXT_LABEL_RE = re.compile(r"^\*\*Next:\*\*")
_BOLD_LABEL_RE = re.compile(r"^\*\*[^*]+:\*\*")


@dataclass(frozen=True)
class Issue:
    """One validation error: ``FILE:LINE: rule: message``."""

    file: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}: {self.message}"

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "rule": self.rule, "message": self.message}


@dataclass(frozen=True)
class Edge:
    type: str
    target: str


@dataclass(eq=False)
class Item:
    """A heading or a node. Unanchored headings (``id is None``) structure the tree only."""

    kind: str  # "heading" | "node"
    id: str | None
    file: str
    line: int
    end_line: int
    domain: str  # "memory" | "pursuit"
    title: str
    level: int = 0  # heading level 1-4; 0 for nodes
    heading_kind: str | None = None  # "#", "F#", "M#", ... for headings
    edges: list[Edge] = field(default_factory=list)
    parent: Item | None = None
    children: list[Item] = field(default_factory=list)
    backing_file: str | None = None
    hash: str = ""
    text: str = ""

    @property
    def uncertain(self) -> bool:
        return self.kind == "node" and self.title.startswith("Uncertain:")

    @property
    def addressable(self) -> bool:
        return self.id is not None

    def ancestors(self) -> list[Item]:
        out: list[Item] = []
        cur = self.parent
        while cur is not None:
            out.append(cur)
            cur = cur.parent
        return out

    def heading_path(self) -> list[Item]:
        """Ancestor headings from the outermost to the nearest."""
        return list(reversed(self.ancestors()))

    def __repr__(self) -> str:
        return f"Item({self.kind} {self.id!r} {self.file}:{self.line})"


@dataclass
class GraphFile:
    """One parsed (or free-form) file of the graph."""

    path: str
    domain: str
    graph: bool  # parsed as graph (root or F# backing) vs free-form backing
    lines: list[str]
    digest: str
    items: list[Item] = field(default_factory=list)  # top-level items of this file
    claimed_by: Item | None = None


@dataclass
class Graph:
    root: Path
    files: dict[str, GraphFile] = field(default_factory=dict)
    items: dict[str, Item] = field(default_factory=dict)
    ordered: list[Item] = field(default_factory=list)  # every item, source order
    issues: list[Issue] = field(default_factory=list)
    focus: list[str] = field(default_factory=list)
    focus_line: int | None = None  # line of `## Focus` in PURSUITS.md

    @property
    def roots(self) -> list[Item]:
        out: list[Item] = []
        for name in (MEMORY_ROOT_FILE, PURSUIT_ROOT_FILE):
            gf = self.files.get(name)
            if gf is not None:
                out.extend(gf.items)
        return out

    def nodes(self) -> list[Item]:
        return [i for i in self.ordered if i.kind == "node"]

    def headings(self) -> list[Item]:
        return [i for i in self.ordered if i.kind == "heading"]

    def counts(self) -> dict[str, int]:
        nodes = sum(1 for i in self.ordered if i.kind == "node")
        headings = sum(1 for i in self.ordered if i.kind == "heading" and i.id is not None)
        return {
            "nodes": nodes,
            "headings": headings,
            "files": len(self.files),
            "uncertain": sum(1 for i in self.ordered if i.uncertain),
        }

    def fingerprint(self) -> str:
        """Identity of the whole parsed content; changes when any graph file changes."""
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode())
            h.update(b"\0")
            h.update(self.files[name].digest.encode())
        return h.hexdigest()

    def incoming(self, item_id: str) -> list[tuple[Item, Edge]]:
        return [(i, e) for i in self.ordered for e in i.edges if e.target == item_id]


def backing_name(kind: str, ident: str, domain: str) -> str | None:
    if kind == "F#":
        return f"PURSUIT_{ident}.md" if domain == "pursuit" else f"MEMORY_{ident}.md"
    if kind == "M#":
        return f"MEMORY_{ident}.md"
    if kind == "S#":
        return f"MEMORY_SKILL_{ident}.md"
    return None


def parse_edges(raw: str) -> tuple[list[Edge], list[str]]:
    """Parse the inside of ``[...]``; return edges and problems (malformed/type/duplicate)."""
    edges: list[Edge] = []
    problems: list[str] = []
    raw = raw.strip()
    if not raw:
        return edges, problems
    seen: set[tuple[str, str]] = set()
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue  # a stray comma, tolerated like RightMemory does
        typ, sep, target = part.partition(":")
        typ, target = typ.strip(), target.strip()
        if not sep or not typ or not target or not ID_RE.match(target):
            problems.append(f"edge-malformed: malformed edge {part!r} (expected type:target)")
            continue
        if typ not in EDGE_TYPES:
            problems.append(f"edge-type: unknown edge type {typ!r} in {part!r}")
            continue
        if (typ, target) in seen:
            problems.append(f"edge-duplicate: duplicate edge {part!r}")
            continue
        seen.add((typ, target))
        edges.append(Edge(typ, target))
    return edges, problems


def _read_file(root: Path, rel: str, issues: list[Issue], line: int = 1, ref: str | None = None) -> bytes | None:
    """Read a graph file, refusing symlinks and anything that is not a regular file."""
    path = root / rel
    where = ref or rel
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        issues.append(Issue(where, line, "symlink", f"{rel} is a symbolic link; graph files must be regular files"))
        return b""
    if not stat.S_ISREG(st.st_mode):
        issues.append(Issue(where, line, "not-regular", f"{rel} is not a regular file"))
        return b""
    return path.read_bytes()


def _decode(rel: str, data: bytes, issues: list[Issue]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        issues.append(Issue(rel, line, "encoding", f"not valid UTF-8 at byte {exc.start}"))
        return data.decode("utf-8", errors="replace")


class _Parser:
    def __init__(self, root: Path) -> None:
        self.graph = Graph(root=Path(root))
        self.issues = self.graph.issues
        self.claims: dict[str, Item] = {}  # lower-case backing name -> claiming heading
        self.focus_lines: dict[str, int] = {}

    def err(self, file: str, line: int, rule: str, message: str) -> None:
        self.issues.append(Issue(file, line, rule, message))

    # -- files -------------------------------------------------------------
    def run(self) -> Graph:
        root = self.graph.root
        for name, domain in ((MEMORY_ROOT_FILE, "memory"), (PURSUIT_ROOT_FILE, "pursuit")):
            data = _read_file(root, name, self.issues)
            if data is None:
                self.err(name, 0, "missing-file", f"{name} does not exist")
                continue
            self.parse_graph_file(name, domain, _decode(name, data, self.issues), parent=None)
        self.check_edges()
        return self.graph

    def load_backing(self, heading: Item, visiting: tuple[str, ...]) -> None:
        kind = heading.heading_kind or "#"
        name = backing_name(kind, heading.id or "", heading.domain)
        if name is None:
            return
        heading.backing_file = name
        key = name.lower()
        if kind == "F#" and key in (v.lower() for v in visiting):
            chain = " -> ".join(visiting + (name,))
            self.err(heading.file, heading.line, "backing-cycle", f"F# chain is cyclic: {chain}")
            return
        if key in self.claims:
            first = self.claims[key]
            self.err(heading.file, heading.line, "backing-duplicate",
                     f"{name} is already claimed by `{first.id}` at {first.file}:{first.line}")
            return
        self.claims[key] = heading
        data = _read_file(self.graph.root, name, self.issues, heading.line, ref=heading.file)
        if data is None:
            self.err(heading.file, heading.line, "backing-missing", f"backing file {name} of `{heading.id}` does not exist")
            return
        if kind == "F#":
            self.parse_graph_file(name, heading.domain, _decode(name, data, self.issues), parent=heading, visiting=visiting + (name,))
        else:
            text = _decode(name, data, self.issues)
            self.graph.files[name] = GraphFile(name, heading.domain, False, text.split("\n"),
                                               hashlib.sha256(data).hexdigest(), claimed_by=heading)

    # -- one graph file ----------------------------------------------------
    def parse_graph_file(self, name: str, domain: str, text: str, parent: Item | None,
                         visiting: tuple[str, ...] = ()) -> None:
        if text.startswith("\ufeff"):
            text = text[1:]
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        gf = GraphFile(name, domain, True, lines, hashlib.sha256(text.encode()).hexdigest(), claimed_by=parent)
        self.graph.files[name] = gf
        if "\x00" in text:
            self.err(name, text.count("\n", 0, text.index("\x00")) + 1, "encoding", "file contains NUL bytes")

        first_index = len(self.graph.ordered)  # items of this file are appended after here
        stack: list[Item] = []  # open headings in this file
        open_items: list[Item] = []  # headings of this file in order, for end lines
        file_items: list[Item] = []
        fence: str | None = None
        last_node: Item | None = None
        in_focus = False
        focus_seen: set[str] = set()
        in_next = False
        backing_headings: list[Item] = []

        def container() -> Item | None:
            return stack[-1] if stack else parent

        def attach(item: Item) -> None:
            cont = container()
            item.parent = cont
            if cont is not None:
                cont.children.append(item)
            if not stack:
                file_items.append(item)
            self.graph.ordered.append(item)

        for idx, line in enumerate(lines):
            lineno = idx + 1
            # fenced code is never graph
            fm = _FENCE_RE.match(line)
            if fence is not None:
                if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence) and not line.strip()[len(fm.group(1)):].strip():
                    fence = None
                continue
            if fm:
                fence = fm.group(1)
                last_node = None
                in_next = False
                continue

            hm = _HEADING_RE.match(line) if line.startswith("#") else None
            if hm and (hm.group(2) is not None or line.strip("#").strip() == ""):
                last_node = None
                in_next = False
                level = len(hm.group(1))
                rest = hm.group(2) or ""
                heading = self.parse_heading(name, lineno, level, rest, domain)
                if heading is None:
                    continue
                # close headings at the same or deeper level
                while stack and stack[-1].level >= heading.level:
                    stack.pop()
                attach(heading)
                stack.append(heading)
                open_items.append(heading)
                in_focus = (name == PURSUIT_ROOT_FILE and level == 2 and heading.id is None
                            and heading.title.strip().lower() == "focus")
                if in_focus:
                    self.graph.focus_line = lineno
                if heading.heading_kind in TYPED_KINDS and heading.id:
                    backing_headings.append(heading)
                continue

            if not line.strip():
                last_node = None
                continue

            if _NEXT_LABEL_RE.match(line):
                in_next = True
                last_node = None
                continue
            if in_next and _BOLD_LABEL_RE.match(line):
                in_next = False

            nm = _NODE_RE.match(line)
            if nm:
                ident = nm.group("id").strip()
                rest = nm.group("rest")
                if in_focus:
                    last_node = None
                    if rest.strip():
                        em = _EDGES_TAIL_RE.search(rest)
                        if em:
                            self.err(name, lineno, "focus-entry", "Focus bullets name a Pursuit heading, they are not nodes")
                            continue
                    if ident in focus_seen:
                        self.err(name, lineno, "focus-duplicate", f"`{ident}` is listed twice in Focus")
                        continue
                    focus_seen.add(ident)
                    self.graph.focus.append(ident)
                    self.focus_lines[ident] = lineno
                    continue
                if in_next and domain == "pursuit":
                    last_node = None
                    if ident not in NEXT_VERBS:
                        self.err(name, lineno, "next-entry",
                                 f"**Next:** entries start with `do`, `ask` or `wait`, not `{ident}`")
                    continue
                em = _EDGES_TAIL_RE.search(rest)
                if em is None:
                    last_node = None
                    if domain == "memory":
                        self.err(name, lineno, "node-edges",
                                 f"node `{ident}` has no edge list (end it with → [] when it has no edges)")
                    continue
                prose = rest[: em.start()].strip()
                node = Item("node", ident, name, lineno, lineno, domain, prose)
                self.check_id(node)
                node.edges = self.item_edges(name, lineno, em.group(1), ident)
                attach(node)
                last_node = node
                continue

            if in_focus and _BULLET_RE.match(line):
                self.err(name, lineno, "focus-entry", "Focus bullets must be - `pursuit-id`")
                continue
            if in_next and _BULLET_RE.match(line) and domain == "pursuit":
                self.err(name, lineno, "next-entry", "**Next:** entries must be - `do|ask|wait` ...")
                continue
            # continuation of a node: indented lines directly below it
            if last_node is not None and line[:1] in (" ", "\t"):
                last_node.end_line = lineno
                continue
            last_node = None

        gf.items = file_items
        # end lines and blocks
        for i, h in enumerate(open_items):
            end = len(lines)
            for later in open_items[i + 1:]:
                if later.level <= h.level:
                    end = later.line - 1
                    break
            while end > h.line and not lines[end - 1].strip():
                end -= 1
            h.end_line = end
        for item in self.graph.ordered[first_index:]:
            if item.file == name:
                item.text = "\n".join(lines[item.line - 1: item.end_line])

        self.check_heading_structure(name, open_items)
        for heading in backing_headings:
            if heading.heading_kind in ("MF#", "MQ#"):
                continue
            self.load_backing(heading, visiting)

    def parse_heading(self, name: str, lineno: int, level: int, rest: str, domain: str) -> Item | None:
        kind: str | None = None
        ident: str | None = None
        edges_raw: str | None = None
        title = rest
        am = _ANCHOR_TAIL_RE.match(rest)
        if am:
            title, kind, ident, edges_raw = am.group("title"), am.group("kind"), am.group("id"), am.group("edges")
        else:
            if _EDGES_TAIL_RE.search(rest):
                self.err(name, lineno, "heading-anchor", "a heading with edges needs an anchor {KIND id}")
                title = rest[: _EDGES_TAIL_RE.search(rest).start()].strip()  # type: ignore[union-attr]
            elif re.search(r"\{[^{}]*\}\s*$", rest):
                self.err(name, lineno, "heading-anchor", f"malformed heading anchor in {rest!r}")
        if level > 4:
            # the level is kept so nesting stays right; #### rules do not apply to it
            self.err(name, lineno, "heading-depth", f"headings go at most to ####, found {'#' * level}")
        if not title.strip() and ident is None:
            self.err(name, lineno, "heading-title", "heading has no title")
        if kind is not None and kind not in HEADING_KINDS:
            self.err(name, lineno, "heading-kind", f"unknown heading kind {kind!r}")
            kind = "#"
        item = Item("heading", ident, name, lineno, lineno, domain, title.strip(), level=level, heading_kind=kind)
        if ident is not None:
            self.check_id(item)
        if kind in MEMORY_ONLY_KINDS and domain != "memory":
            self.err(name, lineno, "kind-domain", f"{kind} headings are allowed only in Memory files")
            item.heading_kind = "#"  # no backing file is looked for on its behalf
        if edges_raw is not None:
            item.edges = self.item_edges(name, lineno, edges_raw, ident)
        return item

    def item_edges(self, name: str, lineno: int, raw: str, own: str | None) -> list[Edge]:
        edges, problems = parse_edges(raw)
        for p in problems:
            rule, _, msg = p.partition(": ")
            self.err(name, lineno, rule, msg)
        out = []
        for e in edges:
            if own is not None and e.target == own:
                self.err(name, lineno, "edge-self", f"edge {e.type}:{e.target} points at its own item")
                continue
            out.append(e)
        return out

    def check_id(self, item: Item) -> None:
        ident = item.id or ""
        if not ID_RE.match(ident):
            self.err(item.file, item.line, "id-format", f"id {ident!r} must match [A-Za-z0-9_.-]+")
            return
        first = self.graph.items.get(ident)
        if first is not None:
            self.err(item.file, item.line, "duplicate-id",
                     f"id `{ident}` is already used at {first.file}:{first.line}")
            return
        self.graph.items[ident] = item

    def check_heading_structure(self, name: str, headings: list[Item]) -> None:
        for h in headings:
            has_children = any(
                c.file == name for c in h.children
            )
            if h.level == 4:
                if h.heading_kind not in TYPED_KINDS:
                    self.err(name, h.line, "h4-typed", "a #### heading must be typed (F#, M#, S#, MF#, MQ#)")
                if h.parent is None or h.parent.file != name or h.parent.level != 3:
                    self.err(name, h.line, "h4-parent", "a #### heading must sit directly under a ###")
                if has_children:
                    self.err(name, h.line, "h4-children", "a #### heading is terminal: no child headings or nodes")
            if h.heading_kind == "F#" and has_children:
                self.err(name, h.line, "backing-children",
                         f"F# heading `{h.id}` keeps its children in its backing file, not here")

    def check_edges(self) -> None:
        items = self.graph.items
        for item in self.graph.ordered:
            if not item.edges:
                continue
            ancestors = None
            for e in item.edges:
                if e.target not in items:
                    self.err(item.file, item.line, "edge-dangling", f"edge {e.type}:{e.target} names no existing item")
                    continue
                if e.type == "rel":
                    if ancestors is None:
                        ancestors = {a.id for a in item.ancestors() if a.id}
                    if e.target in ancestors:
                        self.err(item.file, item.line, "edge-rel-ancestor",
                                 f"rel:{e.target} points at an ancestor heading")


def _backing_digest(graph: Graph, name: str | None, memo: dict[str, str],
                    backed_by_file: dict[str, list[Item]]) -> str:
    """Digest of a backing file plus, for F# files, every backing file it pulls in."""
    if not name or name not in graph.files:
        return ""
    if name in memo:
        return memo[name]
    memo[name] = ""  # cycle guard
    gf = graph.files[name]
    h = hashlib.sha256(gf.digest.encode())
    if gf.graph:
        for item in backed_by_file.get(name, ()):
            h.update(_backing_digest(graph, item.backing_file, memo, backed_by_file).encode())
    memo[name] = h.hexdigest()
    return memo[name]


def _assign_hashes(graph: Graph) -> None:
    """Each item's hash covers its own block and the backing files that block pulls in."""
    memo: dict[str, str] = {}
    by_file: dict[str, list[Item]] = {}
    for item in graph.ordered:
        by_file.setdefault(item.file, []).append(item)
    backed_by_file = {name: [i for i in items if i.kind == "heading" and i.backing_file]
                      for name, items in by_file.items()}
    for name, items in by_file.items():
        backed = backed_by_file[name]  # in source order, so sorted by line
        lines = [b.line for b in backed]
        digests = [_backing_digest(graph, b.backing_file, memo, backed_by_file) for b in backed]
        for item in items:
            h = hashlib.sha256(item.text.encode())
            if item.kind == "heading" and backed:
                lo = bisect.bisect_left(lines, item.line)
                hi = bisect.bisect_right(lines, item.end_line)
                for digest in digests[lo:hi]:
                    h.update(b"\0")
                    h.update(digest.encode())
            item.hash = h.hexdigest()


def load_graph(root: Path | str) -> Graph:
    """Parse the Memory and Pursuit graphs of ``root`` (a work tree or worktree)."""
    parser = _Parser(Path(root))
    graph = parser.run()
    focus_lines = parser.focus_lines
    pursuit_headings = {i.id for i in graph.ordered if i.kind == "heading" and i.domain == "pursuit" and i.id}
    for ident in graph.focus:
        if ident not in pursuit_headings:
            graph.issues.append(Issue(PURSUIT_ROOT_FILE, focus_lines.get(ident, 0), "focus-unknown",
                                      f"Focus names `{ident}`, which is not a Pursuit heading"))
    if PURSUIT_ROOT_FILE in graph.files and graph.focus_line is None:
        graph.issues.append(Issue(PURSUIT_ROOT_FILE, 1, "focus-missing", "PURSUITS.md has no ## Focus section"))
    _assign_hashes(graph)
    return graph
