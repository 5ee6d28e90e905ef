"""The memory graph: one parser for RightMemory Markdown roots (docs/architecture.md, "The memory root").

The parsed :class:`Graph` is the engine object every later part uses: the retrieval
corpus, the TUI tree, the supervisor's validation. Parsing records structural problems
as :class:`Issue` values instead of raising, so one pass reports every error with its
file, line and rule. Cross-file rules live in :mod:`rmtui.engine.memory.validation`.

Each graph file is read in two steps: what the file says on its own (its items and
findings, a :class:`FileParse`, which a :class:`ParseCache` keeps by the file's name,
domain and content digest), then the steps that need the other files (first use of an
id, backing files, Focus entries), replayed in source order. After a one-file change only
that file is scanned again, and the graph is the same as a cold parse
(docs/architecture.md, "Retrieval").
"""

from __future__ import annotations

import bisect
import hashlib
import marshal
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
# CommonMark's optional closing sequence: ``## Title {#id} ##``.
_CLOSING_RE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
# A brace declaration ``{KIND#id}`` found in the (code-masked) heading text. RightMemory writes
# the id right after ``#`` (``{F#build}``); ``{F# build}`` and ``{#}`` are invalid heading ids.
_DECL_RE = re.compile(r"\{([A-Za-z]*#)([^{}]*)\}")
_ARROW_LIST_RE = re.compile(r"^(?:→|->)\s*\[(.*)\]$", re.S)
_EDGES_TAIL_RE = re.compile(r"(?:→|->)\s*\[([^\]]*)\]\s*$")
_ARROW_OPEN_RE = re.compile(r"(?:→|->)\s*\[")
# what follows a node's last `→ [`: the edge list, up to the `]` that ends the line
_EDGE_LIST_CLOSE_RE = re.compile(r"(.*)\]\s*$", re.S)
# A node is a list item whose first token is a backticked id (``- `id` prose → [...]``); any
# list marker RightMemory's newest parser reads (``-`` ``+`` ``*`` ``1.`` ``1)``).
_NODE_RE = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-+*]|[0-9]{1,9}[.)])[ \t]+`(?!`)(?P<id>[^`]*)`(?!`)(?P<rest>(?:\s.*)?)$"
)
# A list item's marker and the spaces after it: the item's content starts at the column after
# them, and a later line indented that far belongs to the item (a nested bullet is no node).
_ITEM_START_RE = re.compile(r"^( {0,3})([-+*]|[0-9]{1,9}[.)])( {1,4}(?! )| +|$)")
# ``:::body`` ... ``:::`` (the same run of colons) marks a heading's body explicitly.
_BODY_OPEN_RE = re.compile(r"^(:{3,})body[ \t]*$")
_BODY_CLOSE_RE = re.compile(r"^(:{3,})[ \t]*$")
_THEMATIC_BREAK_RE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
# A setext underline: after a paragraph line it closes the paragraph (a setext heading, which
# RightMemory never reads as a graph heading); ``-`` alone is one, not an empty list item.
_SETEXT_RE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
# CommonMark's HTML blocks (its kinds 1-7), as a line that opens one and what ends it: the
# first five end on a line holding their closing text (the opening line may hold it too), the
# others at a blank line. What an HTML block holds is HTML, never a heading or a node.
_HTML_BLOCK_TAGS = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|"
    "dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h1|h2|h3|h4|h5|h6|"
    "head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|"
    "p|param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul")
_HTML_ATTRIBUTE = r"""(?:\s+[a-zA-Z_:][a-zA-Z0-9:._-]*(?:\s*=\s*(?:[^"'=<>`\x00-\x20]+|'[^']*'|"[^"]*"))?)"""
_HTML_BLOCKS: tuple[tuple[re.Pattern[str], re.Pattern[str] | None], ...] = (
    (re.compile(r"<(?:script|pre|style|textarea)(?=\s|>|$)", re.I | re.A),
     re.compile(r"</(?:script|pre|style|textarea)>", re.I | re.A)),
    (re.compile(r"<!--"), re.compile(r"-->")),
    (re.compile(r"<\?"), re.compile(r"\?>")),
    (re.compile(r"<![A-Za-z]"), re.compile(r">")),
    (re.compile(r"<!\[CDATA\["), re.compile(r"\]\]>")),
    (re.compile(rf"</?(?:{_HTML_BLOCK_TAGS})(?=\s|/?>|$)", re.I | re.A), None),
)
# kind 7: a whole open or closing tag alone on its line; it cannot interrupt a paragraph
_HTML_TAG_LINE_RE = re.compile(
    rf"(?:<[A-Za-z][A-Za-z0-9-]*{_HTML_ATTRIBUTE}*\s*/?>|</[A-Za-z][A-Za-z0-9-]*\s*>)\s*$")


def _leaves_no_text(content: str) -> bool:
    """Whether a list item's content (its indentation removed up to the item's column) opens a
    block that no later line continues lazily: indented or fenced code, a heading, a rule, or
    an HTML block that may interrupt a paragraph."""
    inner = content.lstrip(" ")
    if len(content) - len(inner) >= 4:
        return True
    first = inner[:1]  # by its first character (a node's is a backtick): a 10,000-node parse stays fast
    if first in ("`", "~"):
        return inner[:3] in ("```", "~~~")
    if first == "#":
        return bool(_HEADING_RE.match(inner)) and len(inner) - len(inner.lstrip("#")) <= 6
    if first == "<":
        return any(opening.match(inner) for opening, _ in _HTML_BLOCKS)
    return first in ("*", "-", "_") and bool(_THEMATIC_BREAK_RE.match(inner))


#: what the previous line leaves open that a following line may continue (CommonMark's lazy
#: continuation): nothing, a top-level paragraph, or a list item's or block quote's text
_NO_TEXT, _PARAGRAPH, _NESTED_TEXT = 0, 1, 2
# RightMemory's Pursuit fields; a ``**Next:**`` block runs until the next field or heading.
_PURSUIT_FIELD_RE = re.compile(r"^\s*\*\*(State|Next|Done when|Status):\*\*", re.IGNORECASE)
_EDGE_TYPE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")

ERROR = "error"
WARNING = "warning"


def _literal_mask(text: str) -> str:
    """``text`` with backslash escapes and complete inline code spans blanked, offsets kept.

    Anchors and edge lists inside inline code or after a backslash are not graph syntax.
    """
    if "`" not in text and "\\" not in text:
        return text  # the common line: nothing to blank (keeps a 10,000-node parse fast)
    chars = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            chars[i] = chars[i + 1] = " "
            i += 2
        elif c == "`":
            j = i
            while j < n and text[j] == "`":
                j += 1
            close = re.search(r"(?<!`)" + text[i:j] + r"(?!`)", text[j:])
            if close is None:
                i = j
            else:
                end = j + close.end()
                chars[i:end] = " " * (end - i)
                i = end
        else:
            i += 1
    return "".join(chars)


@dataclass(frozen=True)
class Issue:
    """One validation finding: ``FILE:LINE: rule: message``.

    Errors make a root invalid. Warnings (``FILE:LINE: warning: rule: message``) point at
    text RightMemory reads differently than it looks (or that only some of its versions
    accept); they never fail validation.
    """

    file: str
    line: int
    rule: str
    message: str
    severity: str = ERROR  # "error" | "warning"

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def __str__(self) -> str:
        tag = "" if self.is_error else f"{self.severity}: "
        return f"{self.file}:{self.line}: {tag}{self.rule}: {self.message}"

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "rule": self.rule, "message": self.message,
                "severity": self.severity}


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
    #: the lines of the item's file; :attr:`text` joins its own from them when first asked for
    #: (a heading's block holds its children's: joining every block on every parse is wasted
    #: where only a few texts are read)
    source: list[str] | None = field(default=None, repr=False)
    _text: str | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        """The item's block as written: its lines ``line..end_line``."""
        if self._text is None:
            self._text = "\n".join(self.source[self.line - 1:self.end_line]) if self.source is not None else ""
        return self._text

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
    parse_key: str = ""  # name, domain and digest: what the file's own parse depends on (graph files)
    #: SHA-256 of the bytes as read ("" when none were: a symbolic link, an empty file): what
    #: the retrieval cache records, so it describes exactly the bytes this parse read
    raw_digest: str = ""


@dataclass
class Graph:
    root: Path
    files: dict[str, GraphFile] = field(default_factory=dict)
    items: dict[str, Item] = field(default_factory=dict)
    ordered: list[Item] = field(default_factory=list)  # every item, source order
    issues: list[Issue] = field(default_factory=list)
    focus: list[str] = field(default_factory=list)  # ordered Focus references (Pursuit heading ids)
    focus_line: int | None = None  # line of `## Focus` in PURSUITS.md (optional section)
    #: backing file -> digest of its bytes and of every backing file it pulls in (what the hash
    #: of a heading above it covers); every backing file some heading names, "" when missing
    backing_digests: dict[str, str] = field(default_factory=dict)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.is_error]

    @property
    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if not i.is_error]

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


def _edge_list(raw: str) -> tuple[list[Edge], list[tuple[str, str, str]]]:
    """Parse the inside of ``[...]``: edges and (rule, message, severity) problems."""
    edges: list[Edge] = []
    problems: list[tuple[str, str, str]] = []
    raw = raw.strip()
    if not raw:
        return edges, problems
    seen: set[tuple[str, str]] = set()
    for part in raw.split(","):
        part = part.strip()
        if not part:
            # older RightMemory skipped a stray comma, the newest rejects it
            problems.append(("edge-empty", f"empty edge element in [{raw}]", ERROR))
            continue
        typ, sep, target = part.partition(":")
        typ, target = typ.strip(), target.strip()
        if not sep or not _EDGE_TYPE_RE.match(typ) or not ID_RE.match(target):
            problems.append(("edge-malformed", f"malformed edge {part!r} (expected type:target)", ERROR))
            continue
        if typ not in EDGE_TYPES:
            problems.append(("edge-type", f"unknown edge type {typ!r} in {part!r}", ERROR))
            continue
        if (typ, target) in seen:
            problems.append(("edge-duplicate", f"duplicate edge {part!r}", ERROR))
            continue
        seen.add((typ, target))
        edges.append(Edge(typ, target))
    return edges, problems


def parse_edges(raw: str) -> tuple[list[Edge], list[str]]:
    """Parse the inside of ``[...]``; return edges and errors (``rule: message``)."""
    edges, problems = _edge_list(raw)
    return edges, [f"{rule}: {msg}" for rule, msg, sev in problems if sev == ERROR]


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


#: The files a root's graph starts from; the MF profile (an imported view's ``dist/``) has MEMORY.md only.
ROOT_FILES = ((MEMORY_ROOT_FILE, "memory"), (PURSUIT_ROOT_FILE, "pursuit"))
MF_ROOT_FILES = ((MEMORY_ROOT_FILE, "memory"),)


@dataclass(eq=False)
class _FileScan:
    """What is open at the current line while one graph file is read top to bottom."""

    name: str
    domain: str
    lines: list[str]
    stack: list[Item] = field(default_factory=list)  # open headings in this file
    headings: list[Item] = field(default_factory=list)  # headings of this file in order, for end lines
    items: list[Item] = field(default_factory=list)  # top-level items of this file
    every: list[Item] = field(default_factory=list)  # every item of this file, in source order
    focus_line: int | None = None  # line of `## Focus` (PURSUITS.md)
    backing: list[Item] = field(default_factory=list)  # typed headings whose backing file is read after
    fence: str | None = None  # the open code fence
    fence_col: int = 0  # the column of the list item a fence sits in (0: the top level)
    #: the open HTML block's end: a pattern its closing line holds, None for a blank line
    html_end: re.Pattern[str] | None = None
    in_html: bool = False
    text: int = _NO_TEXT  # what the previous line leaves open (_PARAGRAPH, ...), see above
    empty_item: bool = False  # the previous line opened a list item with nothing after its marker
    body_fence: tuple[str, int] | None = None  # (colons, line) of an open :::body
    last_node: Item | None = None  # the node that indented lines continue
    list_col: int | None = None  # content column of the open top-level list item
    after_blank: bool = False
    in_focus: bool = False  # inside `## Focus` (a Pursuit file), until the next heading of depth <= 2
    in_next: bool = False  # inside a Pursuit `**Next:**` block

    def terminal(self) -> Item | None:
        """The F# or terminal #### heading of this file the current line sits under."""
        for h in reversed(self.stack):
            if (h.heading_kind == "F#" and h.id) or (h.level == 4 and h.heading_kind in TYPED_KINDS):
                return h
        return None


#: Bumped when what a file's own parse records changes; the cache key also covers this
#: module's source, so a parser edit never reads results of the parser before it.
PARSE_VERSION = 3  # 2: no item text (an item's text is its lines, joined when first read); 3: CommonMark blocks


@dataclass
class FileParse:
    """What one graph file says on its own, independent of every other file: its items as
    plain tuples (each graph makes fresh :class:`Item` objects from them, so a cached parse is
    never shared between graphs) and its events, replayed in order when the graph is linked."""

    key: str
    #: (kind, id, line, end_line, title, level, heading_kind, edges, parent index, hash); an item's text is
    #: its lines ``line..end_line``, not kept here (a heading's block holds its children's: the texts
    #: would be most of the reuse file, written and read again on every change)
    items: list[tuple] | None  # None: not decoded from ``blob`` yet
    events: list[tuple] | None  # Issue fields ("issue", ...) or ("id" | "backing", item index) or ("focus", id, line)
    focus_line: int | None
    blob: bytes = b""  # the three above, marshalled once: an unchanged file's parse is written as it was read
    #: whether a decoded parse is kept: not on its first use (a new process links each file once,
    #: and tens of thousands of tuples kept alive cost the collector more than a second decode),
    #: from its second on (the process is a long-lived one, rebuilding again and again)
    keep: bool = False

    def dumped(self) -> bytes:
        if not self.blob:
            self.blob = marshal.dumps((self.items, self.events, self.focus_line))
        return self.blob

    def parts(self) -> tuple[list[tuple], list[tuple], int | None]:
        """(items, events, focus line), decoded from the blob when not kept."""
        if self.items is not None and self.events is not None:
            return self.items, self.events, self.focus_line
        items, events, focus_line = marshal.loads(self.blob)
        if self.keep:
            self.items, self.events, self.focus_line = items, events, focus_line
        self.keep = True
        return items, events, focus_line


class ParseCache:
    """File parses by key (name, domain, content digest), reused by the next parse of a root:
    after a change only the changed files are scanned again. ``load_graph`` keeps in it what
    the graph it built used, nothing else, so it never grows past one root's files."""

    def __init__(self, parses: dict[str, FileParse] | None = None) -> None:
        self.parses: dict[str, FileParse] = parses or {}
        self.scanned = 0  # files scanned (not reused) by the last parse that used this cache

    def to_data(self) -> dict:
        """The parses as plain data (for marshal), tagged with the parser that made them."""
        return {"version": _parser_identity(), "parses": [(fp.key, fp.dumped()) for fp in self.parses.values()]}

    @classmethod
    def from_data(cls, data: object) -> ParseCache:
        """The parses of :meth:`to_data`'s output; an empty cache when it is of another parser
        or not that shape. The holder of the data checks it is intact (a checksum) first."""
        if not isinstance(data, dict) or data.get("version") != _parser_identity() \
                or not isinstance(data.get("parses"), list):
            return cls()
        try:
            parses = {key: FileParse(key, None, None, None, blob) for key, blob in data["parses"]
                      if isinstance(key, str) and isinstance(blob, bytes)}  # each decoded when linked
            return cls(parses)
        except (TypeError, ValueError):
            return cls()


def _parser_identity() -> str:
    """:data:`PARSE_VERSION` and a digest of this module's source."""
    from rmtui.engine.fsutil import source_stamp

    return source_stamp(__file__, PARSE_VERSION)


class _Parser:
    def __init__(self, root: Path, root_files: tuple[tuple[str, str], ...] = ROOT_FILES,
                 cache: ParseCache | None = None) -> None:
        self.graph = Graph(root=Path(root))
        self.root_files = root_files
        self.issues = self.graph.issues
        self.sink: list = self.issues  # where findings go: the graph's issues, or a file's events while it is scanned
        self.claims: dict[str, Item] = {}  # case-folded backing name -> claiming heading
        self.focus_lines: dict[str, tuple[str, int]] = {}  # Focus reference -> (file, line)
        self.cache = cache
        self.used: dict[str, FileParse] = {}

    def err(self, file: str, line: int, rule: str, message: str) -> None:
        self.sink.append(Issue(file, line, rule, message))

    def warn(self, file: str, line: int, rule: str, message: str) -> None:
        self.sink.append(Issue(file, line, rule, message, WARNING))

    # -- files -------------------------------------------------------------
    def run(self) -> Graph:
        root = self.graph.root
        for name, domain in self.root_files:
            data = _read_file(root, name, self.issues)
            if data is None:
                self.err(name, 0, "missing-file", f"{name} does not exist")
                continue
            self.parse_graph_file(name, domain, _decode(name, data, self.issues), parent=None, raw=data)
        self.check_edges()
        if self.cache is not None:
            self.cache.parses = self.used
        return self.graph

    def load_backing(self, heading: Item, visiting: tuple[str, ...]) -> None:
        kind = heading.heading_kind or "#"
        name = backing_name(kind, heading.id or "", heading.domain)
        if name is None:
            return
        heading.backing_file = name
        key = name.casefold()
        if kind == "F#" and key in (v.casefold() for v in visiting):
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
            self.err(heading.file, heading.line, "backing-missing",
                     f"backing file {name} of `{heading.id}` does not exist")
            return
        if kind == "F#":
            self.parse_graph_file(name, heading.domain, _decode(name, data, self.issues), parent=heading,
                                  visiting=visiting + (name,), raw=data)
        else:
            text = _decode(name, data, self.issues)
            digest = hashlib.sha256(data).hexdigest()
            self.graph.files[name] = GraphFile(name, heading.domain, False, text.split("\n"), digest,
                                               claimed_by=heading, raw_digest=digest if data else "")

    # -- one graph file ----------------------------------------------------
    def parse_graph_file(self, name: str, domain: str, text: str, parent: Item | None,
                         visiting: tuple[str, ...] = (), raw: bytes = b"") -> None:
        # a byte-order mark is kept: as for CommonMark, the first line is then text, not a heading
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        raw_digest = hashlib.sha256(raw).hexdigest() if raw else ""
        encoded = text.encode()
        digest = raw_digest if raw_digest and encoded == raw else hashlib.sha256(encoded).hexdigest()
        key = f"{name}\0{domain}\0{digest}"
        gf = GraphFile(name, domain, True, lines, digest, claimed_by=parent, parse_key=key, raw_digest=raw_digest)
        self.graph.files[name] = gf
        fp = self.used.get(key) or (self.cache.parses.get(key) if self.cache is not None else None)
        if fp is None:
            fp = self.scan_file(key, name, domain, text, lines)
            if self.cache is not None:
                self.cache.scanned += 1
        self.used[key] = fp
        self.link(fp, gf, parent, visiting)

    def scan_file(self, key: str, name: str, domain: str, text: str, lines: list[str]) -> FileParse:
        """The file on its own: every line read, findings and cross-file steps recorded as events."""
        events: list = []
        self.sink = events
        try:
            if "\x00" in text:
                self.err(name, text.count("\n", 0, text.index("\x00")) + 1, "encoding", "file contains NUL bytes")
            scan = _FileScan(name, domain, lines)
            for lineno, line in enumerate(lines, start=1):
                self.scan_line(scan, lineno, line)
            self.close_file(scan)
        finally:
            self.sink = self.issues
        index = {id(item): n for n, item in enumerate(scan.every)}
        items = [(i.kind, i.id, i.line, i.end_line, i.title, i.level, i.heading_kind,
                  tuple((e.type, e.target) for e in i.edges), index[id(i.parent)] if i.parent is not None else -1,
                  hashlib.sha256(i.text.encode()).hexdigest()) for i in scan.every]
        out: list[tuple] = []
        for ev in events:
            if isinstance(ev, Issue):
                out.append(("issue", ev.file, ev.line, ev.rule, ev.message, ev.severity))
            elif ev[0] == "focus":
                out.append(ev)
            else:
                out.append((ev[0], index[id(ev[1])]))
        return FileParse(key, items, out, scan.focus_line)

    def link(self, fp: FileParse, gf: GraphFile, parent: Item | None, visiting: tuple[str, ...]) -> None:
        """Fresh items of one file parse hung under ``parent`` (the claiming F# heading), then its
        events in order: findings, first uses of ids, Focus entries, backing files last."""
        name, domain, lines = gf.path, gf.domain, gf.lines
        items: list[Item] = []
        parsed, events, focus_line = fp.parts()
        for kind, ident, line, end, title, level, hk, edges, up, digest in parsed:
            cont = items[up] if up >= 0 else parent
            item = Item(kind, ident, name, line, end, domain, title, level, hk,
                        [Edge(t, target) for t, target in edges] if edges else [], cont, [], None, digest,
                        lines)
            if cont is not None:
                cont.children.append(item)
            if up < 0:
                gf.items.append(item)
            items.append(item)
        self.graph.ordered.extend(items)
        if focus_line is not None and self.graph.focus_line is None:
            self.graph.focus_line = focus_line
        for ev in events:
            tag = ev[0]
            if tag == "issue":
                self.issues.append(Issue(*ev[1:]))
            elif tag == "id":
                self.register(items[ev[1]])
            elif tag == "backing":
                self.load_backing(items[ev[1]], visiting)
            else:
                self.focus_ref(name, ev[2], ev[1])

    def scan_line(self, scan: _FileScan, lineno: int, line: str) -> None:
        """Read one line of a graph file as a CommonMark block parse reads the top level: code, a
        body fence, HTML, a heading, a field, a list item or paragraph text."""
        if self.skip_fenced(scan, line):
            scan.text = _NO_TEXT
            return
        blank = not line.strip()
        flat = line.expandtabs(4)
        indent = len(flat) - len(flat.lstrip(" "))
        lazy_item = scan.text == _NESTED_TEXT and scan.list_col is not None and not scan.after_blank
        if blank and scan.empty_item:
            scan.list_col = None  # an item may open with one blank line only: this one stays empty
        scan.empty_item = False
        if self.inside_list_item(scan, lineno, blank, flat, indent):
            inner = flat[scan.list_col or 0:]
            if len(inner) - len(inner.lstrip(" ")) >= 4 and scan.text == _NESTED_TEXT:
                return  # more text of the item's paragraph, however far it is indented
            scan.text = _NO_TEXT if _leaves_no_text(inner) else _NESTED_TEXT
            return
        if blank:
            scan.last_node = None
            scan.text = _NO_TEXT
            return
        if indent == 0 and line.startswith(":") and not lazy_item and self.body_marker(scan, lineno, line):
            scan.text = _NO_TEXT
            return
        start = flat[indent:]
        if indent <= 3 and start.startswith("<") and self.html_start(scan, start):
            scan.text = _NO_TEXT
            return
        hm = _HEADING_RE.match(start) if indent <= 3 and start.startswith("#") else None
        if hm and len(hm.group(1)) <= 6 and (hm.group(2) is not None or line.strip("#").strip() == ""):
            self.heading_line(scan, lineno, len(hm.group(1)), hm.group(2) or "")
            scan.text = _NO_TEXT
            return
        if scan.domain == "pursuit":
            field_m = _PURSUIT_FIELD_RE.match(line)
            if field_m:
                scan.in_next = field_m.group(1).casefold() == "next"
                scan.last_node = None
                scan.list_col = None
                scan.text = scan.text or _PARAGRAPH  # paragraph text for CommonMark
                return
        if scan.text == _PARAGRAPH and _SETEXT_RE.match(flat):
            scan.text = _NO_TEXT  # it underlines the paragraph: neither a list item nor a rule
            scan.last_node = None
            return
        item_m = _ITEM_START_RE.match(flat) if not _THEMATIC_BREAK_RE.match(flat) else None
        if item_m is not None and scan.text == _PARAGRAPH:
            marker = item_m.group(2)
            # a list interrupting a paragraph must have content, and an ordered one must start at 1
            if not flat[item_m.end(2):].strip() or (marker[0].isdigit() and int(marker[:-1]) != 1):
                item_m = None
        if item_m is None:
            # continuation of a node: indented lines directly below it
            if scan.last_node is not None and line[:1] in (" ", "\t"):
                scan.last_node.end_line = lineno
            else:
                scan.last_node = None
            if indent <= 3 and start.startswith(">"):
                scan.list_col = None  # a block quote ends the list; its text continues lazily
                scan.text = _NESTED_TEXT
            elif _THEMATIC_BREAK_RE.match(flat):
                scan.text = _NO_TEXT
                scan.list_col = None
            elif scan.text == _NO_TEXT and indent < 4:
                scan.text = _PARAGRAPH  # (four spaces with no text open: indented code)
            return
        self.list_item_line(scan, lineno, line, item_m)
        # an empty item, or one that opens with code, a heading or HTML, holds no text a later line continues
        content = flat[item_m.end(2):]
        scan.empty_item = not content.strip()
        scan.text = _NO_TEXT if scan.empty_item or _leaves_no_text(content[1:]) else _NESTED_TEXT
        fm = _FENCE_RE.match(content[1:]) if scan.text == _NO_TEXT else None
        if fm and scan.list_col is not None:
            scan.fence, scan.fence_col = fm.group(1), scan.list_col  # code opening the item runs in it

    def skip_fenced(self, scan: _FileScan, line: str) -> bool:
        """Fenced code, an open ``:::body`` and an open HTML block are never graph: True when
        ``line`` is one of them."""
        fm = _FENCE_RE.match(line)
        if scan.fence is not None and scan.fence_col and line.strip() \
                and len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(" ")) < scan.fence_col:
            scan.fence = None  # the list item it sits in ends, and the fence with it
        if scan.fence is not None:
            fence = scan.fence
            if (fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence)
                    and not line.strip()[len(fm.group(1)):].strip()):
                scan.fence = None
            return True
        if scan.body_fence is not None:
            bm = _BODY_CLOSE_RE.match(line)
            if bm and bm.group(1) == scan.body_fence[0]:
                scan.body_fence = None
            return True
        if scan.in_html:
            if scan.html_end is None:
                if not line.strip(" \t\r"):
                    scan.in_html = False  # the blank line ends it and is read as one
                    return False
            elif scan.html_end.search(line):
                scan.in_html = False
            return True
        if fm:
            scan.fence = fm.group(1)
            scan.last_node = None
            flat = line.expandtabs(4)
            nested = scan.list_col is not None and len(flat) - len(flat.lstrip(" ")) >= scan.list_col
            scan.fence_col = scan.list_col if nested and scan.list_col is not None else 0
            if not nested:
                scan.list_col = None
            return True
        return False

    def html_start(self, scan: _FileScan, start: str) -> bool:
        """A line (its indentation removed) that opens an HTML block: True, and the block is open
        until its end; the opening line may also end it."""
        end: re.Pattern[str] | None = None
        for opening, closing in _HTML_BLOCKS:
            if opening.match(start):
                end = closing
                break
        else:
            if scan.text != _NO_TEXT or not _HTML_TAG_LINE_RE.match(start):
                return False  # (a lone tag cannot interrupt a paragraph: it is text then)
        scan.in_html = end is None or not end.search(start)
        scan.html_end = end
        scan.last_node = None
        scan.list_col = None
        return True

    def inside_list_item(self, scan: _FileScan, lineno: int, blank: bool, flat: str, indent: int) -> bool:
        """True when the line is nested content of the open list item (no node, no heading there)."""
        if not blank and scan.list_col is not None:
            if indent >= scan.list_col:
                if scan.last_node is not None:
                    scan.last_node.end_line = lineno
                scan.after_blank = False
                return True
            if (scan.after_blank or scan.text == _NO_TEXT) and not _ITEM_START_RE.match(flat):
                # a blank line, or an item with no text to continue, and an unindented line close the list
                scan.list_col = None
        scan.after_blank = blank
        return False

    def body_marker(self, scan: _FileScan, lineno: int, line: str) -> bool:
        """An unindented ``:::body`` opens a body; a stray closing line is an error. True when consumed."""
        bm = _BODY_OPEN_RE.match(line)
        if bm:
            scan.body_fence = (bm.group(1), lineno)
            scan.last_node = None
            scan.list_col = None
            return True
        if _BODY_CLOSE_RE.match(line):
            self.err(scan.name, lineno, "body-fence", f"{line.strip()} closes no open :::body fence")
            return True
        return False

    def heading_line(self, scan: _FileScan, lineno: int, level: int, rest: str) -> None:
        name, domain = scan.name, scan.domain
        scan.last_node = None
        scan.in_next = False
        scan.list_col = None
        heading = self.parse_heading(name, lineno, level, rest, domain)
        # close headings at the same or deeper level
        while scan.stack and scan.stack[-1].level >= heading.level:
            scan.stack.pop()
        self.attach(scan, heading)
        scan.stack.append(heading)
        scan.headings.append(heading)
        if domain == "pursuit" and level <= 2:
            scan.in_focus = level == 2 and heading.id is None and heading.title.casefold() == "focus"
            if scan.in_focus and name == PURSUIT_ROOT_FILE and scan.focus_line is None:
                scan.focus_line = lineno
        reserved = (heading.heading_kind == "F#" and domain == "pursuit"
                    and (heading.id or "").casefold() == "rules")  # {F#rules} in Pursuit: no backing
        if heading.heading_kind in TYPED_KINDS and heading.id and not reserved:
            scan.backing.append(heading)

    def list_item_line(self, scan: _FileScan, lineno: int, line: str, item_m: re.Match[str]) -> None:
        """A top-level list item: a node, a Focus or Next entry, or a plain bullet."""
        # its content starts after the marker and 1-4 spaces
        spaces = item_m.group(3)
        scan.list_col = item_m.end(2) + (len(spaces) if 1 <= len(spaces) <= 4 else 1)
        scan.last_node = None
        nm = _NODE_RE.match(line)
        if nm is None:
            th = scan.terminal() if not scan.in_focus and not scan.in_next else None
            if th is not None:
                self.err(scan.name, lineno, "terminal-bullet",
                         f"a list item under `{th.id}`: RightMemory rejects list items under an F# or "
                         "#### heading (write prose, or move it to the backing file)")
            return
        ident = nm.group("id")
        rest = nm.group("rest")
        if scan.in_focus:
            self.focus_entry(scan.name, lineno, ident, rest)
        elif scan.in_next:
            if ident.strip() not in NEXT_VERBS:
                self.warn(scan.name, lineno, "next-entry",
                          f"**Next:** entries start with `do`, `ask` or `wait`, not `{ident}`")
        else:
            self.node_line(scan, lineno, ident, rest)

    def node_line(self, scan: _FileScan, lineno: int, ident: str, rest: str) -> None:
        """A ``- `id` prose → [edges]`` bullet; without an edge list RightMemory reads a plain bullet."""
        name = scan.name
        markers = list(_ARROW_OPEN_RE.finditer(_literal_mask(rest)))
        if not markers:
            # no `→ [`: RightMemory reads a plain bullet, not a node
            th = scan.terminal()
            if th is not None:
                rule = "backing-children" if th.heading_kind == "F#" and th.level != 4 else "h4-children"
                self.err(name, lineno, rule,
                         f"`{th.id}` keeps no list items in its own file; "
                         + ("move it to the backing file" if th.heading_kind == "F#" else "it is terminal"))
            elif scan.domain == "memory" and ID_RE.match(ident):
                self.warn(name, lineno, "node-plain",
                          f"`{ident}` has no edge list, so it is a plain bullet, not a node "
                          "(end it with → [] to make it a node)")
            return
        last = markers[-1]
        tail = _EDGE_LIST_CLOSE_RE.match(rest[last.end():])
        if not ID_RE.match(ident):
            self.err(name, lineno, "id-format", f"id {ident!r} must match [A-Za-z0-9_.-]+")
            return
        if tail is None or not rest[last.start() - 1: last.start()].isspace():
            self.err(name, lineno, "node-edges",
                     f"node `{ident}` has a malformed edge list (end the line with → [type:target, ...])")
            return
        prose = rest[: last.start()].strip()
        node = Item("node", ident, name, lineno, lineno, scan.domain, prose)
        self.check_id(node)
        node.edges = self.item_edges(name, lineno, tail.group(1), ident)
        self.attach(scan, node)
        scan.last_node = node

    def attach(self, scan: _FileScan, item: Item) -> None:
        """Hang ``item`` under the open heading of its file (a top-level item's parent, the
        claiming F# heading, is set when the file is linked) and record its order."""
        cont = scan.stack[-1] if scan.stack else None
        item.parent = cont
        if cont is not None:
            cont.children.append(item)
        if not scan.stack:
            scan.items.append(item)
        scan.every.append(item)

    def close_file(self, scan: _FileScan) -> None:
        """After the last line: end lines and text of each item, structure checks, then the backing files."""
        name, lines = scan.name, scan.lines
        if scan.body_fence is not None:
            colons, line = scan.body_fence
            self.err(name, line, "body-fence", f"{colons}body is never closed (end the body with a line {colons})")
        for i, h in enumerate(scan.headings):
            end = len(lines)
            for later in scan.headings[i + 1:]:
                if later.level <= h.level:
                    end = later.line - 1
                    break
            while end > h.line and not lines[end - 1].strip():
                end -= 1
            h.end_line = end
        for item in scan.every:
            item.source = lines  # end lines are final now: its text is its lines
        self.check_heading_structure(name, scan.headings)
        for heading in scan.backing:
            if heading.heading_kind in ("MF#", "MQ#"):
                continue
            self.sink.append(("backing", heading))

    def focus_entry(self, name: str, lineno: int, ident: str, rest: str) -> None:
        """A ``- `id` …`` bullet under ``## Focus``: an ordered reference to a Pursuit heading."""
        if not ID_RE.match(ident):
            self.err(name, lineno, "focus-entry", f"invalid Focus reference id {ident!r}")
            return
        if _EDGES_TAIL_RE.search(_literal_mask(rest)):
            self.warn(name, lineno, "focus-edges",
                      "a Focus entry is a reference, not a node: its edge list is ignored")
        self.sink.append(("focus", ident, lineno))

    def focus_ref(self, name: str, lineno: int, ident: str) -> None:
        """The cross-file part of a Focus entry: each Pursuit heading listed once."""
        if ident in self.focus_lines:
            self.err(name, lineno, "focus-duplicate", f"`{ident}` is listed twice in Focus")
            return
        self.graph.focus.append(ident)
        self.focus_lines[ident] = (name, lineno)

    def parse_heading(self, name: str, lineno: int, level: int, rest: str, domain: str) -> Item:
        rest = _CLOSING_RE.sub("", rest).rstrip()
        mask = _literal_mask(rest)
        decls = list(_DECL_RE.finditer(mask))
        decl = stray = None
        edges_raw: str | None = None
        for m in decls:  # the anchor ends the heading; only an edge list may follow it
            suffix = rest[m.end():].strip()
            if not suffix or _ARROW_LIST_RE.match(suffix):
                decl = m
                break
        if decl is None:
            decl = next((m for m in decls if mask[m.end():].strip().startswith(("→", "->"))), None)
        if decl is None:
            stray = next((m for m in decls if m.group(1) in HEADING_KINDS), None)

        kind: str | None = None
        ident: str | None = None
        title = rest
        if decl is not None:
            title = rest[: decl.start()].rstrip()
            marker = decl.group(1)
            raw_id = rest[decl.start(2): decl.end(2)]
            if marker not in HEADING_KINDS:
                self.err(name, lineno, "heading-kind",
                         f"unsupported heading marker `{marker}` (known: {', '.join(HEADING_KINDS)})")
            elif not ID_RE.match(raw_id):
                fix = raw_id.strip()
                hint = (f"; write {{{marker}{fix}}} with no space after {marker}" if ID_RE.match(fix)
                        else f"; write {{{marker}id}} with an id of letters, numbers, dot, underscore or dash")
                self.err(name, lineno, "heading-anchor", f"invalid heading id in {{{marker}{raw_id}}}{hint}")
            else:
                kind, ident = marker, raw_id
                suffix = rest[decl.end():].strip()
                if suffix:
                    am = _ARROW_LIST_RE.match(suffix)
                    if am is None:
                        self.err(name, lineno, "heading-edges",
                                 f"malformed heading edge list {suffix!r} (expected → [type:target, ...])")
                    else:
                        edges_raw = am.group(1)
        elif stray is not None:
            self.warn(name, lineno, "heading-anchor-text",
                      f"{stray.group(0)} is followed by text, so RightMemory reads a plain heading; "
                      "put the anchor at the end of the heading")
        elif _EDGES_TAIL_RE.search(mask):
            # the original takes `→ [..]` without an anchor as title text and ignores its edges
            self.warn(name, lineno, "heading-unanchored-edges",
                      "edge list on a heading without an anchor: RightMemory reads it as title text and "
                      "ignores the edges; add an anchor such as {#id}")
        if level > 4:
            # the level is kept so nesting stays right; #### rules do not apply to it
            self.err(name, lineno, "heading-depth", f"headings go at most to ####, found {'#' * level}")
        if not title.strip() and decl is None:
            self.warn(name, lineno, "heading-title", "heading has no title")
        item = Item("heading", ident, name, lineno, lineno, domain, title.strip(), level=level, heading_kind=kind)
        if ident is not None:
            self.check_id(item)
        if kind in MEMORY_ONLY_KINDS and domain != "memory":
            self.err(name, lineno, "kind-domain", f"{kind} headings are allowed only in Memory files")
            item.heading_kind = "#"  # no backing file is looked for on its behalf
        if kind == "F#" and domain == "pursuit" and ident is not None and ident.casefold() == "rules":
            self.err(name, lineno, "reserved-id",
                     f"Pursuit F# id `{ident}` is reserved (RightMemory's legacy PURSUIT_RULES.md); choose another id")
        if edges_raw is not None:
            item.edges = self.item_edges(name, lineno, edges_raw, ident)
        return item

    def item_edges(self, name: str, lineno: int, raw: str, own: str | None) -> list[Edge]:
        edges, problems = _edge_list(raw)
        for rule, msg, severity in problems:
            self.sink.append(Issue(name, lineno, rule, msg, severity))
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
        self.sink.append(("id", item))

    def register(self, item: Item) -> None:
        """The cross-file part of an id: the first item to use it owns it."""
        ident = item.id or ""
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
    """Each item's hash covers its own block and the backing files that block pulls in.

    An item comes from its file's parse with the hash of its own block; only a heading
    whose block holds a typed heading with a backing file is hashed again here."""
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
        for b, digest in zip(backed, digests, strict=True):
            graph.backing_digests[b.backing_file or ""] = digest
        if not backed:
            continue
        for item in items:
            if item.kind != "heading":
                continue
            lo = bisect.bisect_left(lines, item.line)
            hi = bisect.bisect_right(lines, item.end_line)
            if lo == hi:
                continue
            h = hashlib.sha256(item.text.encode())
            for digest in digests[lo:hi]:
                h.update(b"\0")
                h.update(digest.encode())
            item.hash = h.hexdigest()


def load_graph(root: Path | str, cache: ParseCache | None = None) -> Graph:
    """Parse the Memory and Pursuit graphs of ``root`` (a work tree or worktree); with ``cache``,
    files whose parse it holds are not scanned again, and it is left holding this graph's."""
    parser = _Parser(Path(root), cache=cache)
    graph = parser.run()
    # `## Focus` is optional; its backticked bullets must name Pursuit headings
    for ident in graph.focus:
        file, line = parser.focus_lines.get(ident, (PURSUIT_ROOT_FILE, 0))
        target = graph.items.get(ident)
        if target is None:
            graph.issues.append(Issue(file, line, "focus-unknown", f"Focus names `{ident}`, which does not exist"))
        elif target.kind != "heading" or target.domain != "pursuit":
            graph.issues.append(Issue(file, line, "focus-unknown",
                                      f"Focus names `{ident}`, which is not a Pursuit heading"))
    _assign_hashes(graph)
    return graph


def load_mf_graph(dist: Path | str) -> Graph:
    """An imported shared view's ``dist/`` under the MF profile (docs/formats.md, "Graph files"): MEMORY.md is the only
    root, no Pursuit and no Focus, and a nested ``MF#``/``MQ#`` heading is an error (a view
    never carries other views). The namespace (``MF#<view>``) is the importer's to apply."""
    parser = _Parser(Path(dist), MF_ROOT_FILES)
    graph = parser.run()
    for item in graph.ordered:
        if item.kind == "heading" and item.heading_kind in ("MF#", "MQ#"):
            graph.issues.append(Issue(item.file, item.line, "mf-nested",
                                      f"{item.heading_kind} heading `{item.id}` inside a shared view: "
                                      "a view cannot carry other shared views"))
    _assign_hashes(graph)
    return graph
