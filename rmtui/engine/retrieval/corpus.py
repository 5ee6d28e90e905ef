"""The retrieval corpus: searchable entries projected from the parsed graph (docs/architecture.md, "Retrieval").

One entry per node, one per heading that has its own body text, one per passage of an
``M#`` free-form file and one per ``S#`` skill. Each entry keeps its exact source location
(for rendering source text), its content hash (the key of delivery history and of the
vector cache), its ancestor headings (context for scoring and for rendering) and its
neighbours in source order (context for scoring).

Parsing a large root costs far more than the rest of a warm retrieve, so the corpus is
cached in ``.runtime/cache/`` and reused while every file it was built from is byte for
byte the same (checked by SHA-256; a long-lived process skips the hash of a file whose
status has not moved since it was last hashed, see :func:`current_fingerprint`).

When a file did change, the rebuild takes from the last build what only depends on an
unchanged file's own content: its parse (graph.py's ``ParseCache``) and its share of the
projection (each item's words and lines), both by the file's parse key, kept in memory
and in ``.runtime/cache/parse.bin``. The entries under each top-level ``F#`` heading (a
:class:`Segment`) are taken whole from the last build (in memory, or from the pieces of
the stale corpus file) when everything they depend on across files is as it was: the
heading and its scope, where the subtree starts, which of its ids are used elsewhere, the
digests of the backing files it names. Anything else is projected again item by item, so
the result is a cold build's, and after a one-node change only that file is projected.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import itertools
import marshal
import os
import re
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmtui.engine.errors import UsageError

if TYPE_CHECKING:  # the parser is imported only when the corpus must be rebuilt
    from rmtui.engine.evidence.queue import PendingRef
    from rmtui.engine.memory.graph import Graph, Item, ParseCache
    from rmtui.engine.memory.roots import MemoryRoot

CACHE_VERSION = 8  # 8: entries stored in pieces (segments and what lies between), each with its CRC-32
PASSAGE_CHARS = 1500
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_EDGE_TAIL_RE = re.compile(r"(?:→|->)\s*\[[^\]]*\]\s*$")  # an edge list ends a line: `→ [rel:x, dep:y]`
_NODE_HEAD_RE = re.compile(r"^[ \t]*[-*+]\s+`([^`]*)`\s*")
_SLUG_RE = re.compile(r"[-_.]+")
_ANCHOR_RE = re.compile(r"\s*\{[A-Z]*#\s*[^\s{}]+\}.*$")
#: Where promoted shared view imports live (the views package downloads, validates and promotes
#: them; retrieval only reads them): ``<root>/.runtime/shared_views/imports/<view>/dist/``.
IMPORTS_DIR = ".runtime/shared_views/imports"


@dataclass
class Entry:
    """One searchable unit with the exact place it came from."""

    key: str  # unique in the corpus: item id, or a source key like ``M#id:3-9``
    id: str | None  # graph id (None for unanchored headings); for sources the owner id
    kind: str  # "node" | "heading" | "source"
    file: str
    start_line: int
    end_line: int
    hash: str  # content hash: item hash for graph items, SHA-256 of the text for sources
    rank: int  # source (traversal) order
    text: str  # the entry's own words, cleaned for scoring
    lines: list[int] = field(default_factory=list)  # exact source lines rendered (1-based)
    ancestors: list[int] = field(default_factory=list)  # indices of ancestor heading records
    context: str = ""  # ancestor heading titles, outermost first
    prev: int = -1  # neighbouring entries (same parent, source order), -1 when none
    next: int = -1
    uncertain: bool = False
    label: str = ""  # for sources: the source id (``M#x``, ``S#x``)

    def to_tuple(self) -> tuple:
        return (self.key, self.id, self.kind, self.file, self.start_line, self.end_line, self.hash, self.rank,
                self.text, self.lines, self.ancestors, self.context, self.prev, self.next, self.uncertain, self.label)

    @classmethod
    def from_tuple(cls, t: tuple) -> Entry:
        return cls(*t)


class EntryList(Sequence):
    """Entries materialised on first access: a warm retrieve touches only the few it renders."""

    def __init__(self, rows: list[tuple]) -> None:
        self._rows = rows
        self._made: dict[int, Entry] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self._rows)))]
        if i < 0:
            i += len(self._rows)
        e = self._made.get(i)
        if e is None:
            e = self._made[i] = Entry.from_tuple(self._rows[i])
        return e

    def __iter__(self):
        return (self[i] for i in range(len(self._rows)))

    def column(self, n: int) -> list:
        """One field of every entry (tuple position, see :meth:`Entry.to_tuple`) without building entries."""
        return [r[n] for r in self._rows]

    def rows(self) -> list[tuple]:
        return self._rows


@dataclass
class HeadingRef:
    """An ancestor heading as rendered: its exact line and its identity."""

    id: str | None
    file: str
    line: int
    title: str
    hash: str


@dataclass
class Corpus:
    root: Path
    fingerprint: str
    entries: Sequence[Entry]
    headings: list[HeadingRef]  # every heading that is an ancestor of some entry
    files: dict[str, str]  # file name -> raw SHA-256 of what was parsed
    missing: list[str]  # referenced files that did not exist
    issues: int = 0
    texts: dict[str, list[str]] = field(default_factory=dict)  # file -> lines (filled on demand)
    #: file -> its status when this process last found it unchanged (see current_fingerprint)
    checked: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)
    #: the entries and heading records cut as the cache file stores them (_Projection.pieces)
    pieces: list = field(default_factory=list, repr=False, compare=False)
    _key_hashes: dict[str, str] | None = field(default=None, repr=False, compare=False)
    _paths: tuple[Path, list[tuple[str, str, str]]] | None = field(default=None, repr=False, compare=False)

    def by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in self.entries if e.id is not None and e.kind != "source"}

    def key_hashes(self) -> dict[str, str]:
        """Entry key -> content hash, for delivery history (no entry objects built); made
        once per corpus, as a long-lived process retrieves for a session again and again
        (7 ms at 50,000 nodes). Callers only read it."""
        if self._key_hashes is None:
            if isinstance(self.entries, EntryList):
                self._key_hashes = dict(zip(self.entries.column(0), self.entries.column(6), strict=True))
            else:
                self._key_hashes = {e.key: e.hash for e in self.entries}
        return self._key_hashes

    def neighbour_arrays(self):
        """(prev, next, nearest heading) index arrays, -1 where none; computed once."""
        import numpy as np

        if getattr(self, "_arrays", None) is None:
            if isinstance(self.entries, EntryList):
                rows = self.entries.rows()
                prev = [r[12] for r in rows]
                nxt = [r[13] for r in rows]
                group = [r[10][-1] if r[10] else -1 for r in rows]
            else:
                prev = [e.prev for e in self.entries]
                nxt = [e.next for e in self.entries]
                group = [e.ancestors[-1] if e.ancestors else -1 for e in self.entries]
            self._arrays = (np.asarray(prev, np.int64), np.asarray(nxt, np.int64), np.asarray(group, np.int64))
        return self._arrays

    def neighbour_steps(self, span: int):
        """For each step out to ``span`` (at least one): the (previous, next) entry that far
        from each entry, -1 where none; computed once per span, as fusion asks every query."""
        import numpy as np

        memo: dict[int, list] | None = getattr(self, "_steps", None)
        if memo is None:
            memo = {}
            self._steps = memo
        if span not in memo:
            prev, nxt, _ = self.neighbour_arrays()
            prev_p, next_p = np.append(prev, -1), np.append(nxt, -1)  # -1 reads the pad: stays -1
            steps, p, n = [], prev, nxt
            for _ in range(max(1, span)):
                steps.append((p, n))
                p, n = prev_p[p], next_p[n]
            memo[span] = steps
        return memo[span]

    def lines_of(self, name: str) -> list[str]:
        if name not in self.texts:
            self.texts[name] = _read_lines(self.root / name)
        return self.texts[name]


def _read_lines(path: Path) -> list[str]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def slug_words(ident: str | None) -> str:
    return _SLUG_RE.sub(" ", ident or "").strip()


def _before_edges(text: str) -> str:
    """``text`` up to its edge list, if it ends with one. Only an arrow can start that tail, so
    the pattern is tried at the arrows (leftmost first), not at every character of the line."""
    best = -1
    for arrow in ("→", "->"):
        i = text.find(arrow)
        while i >= 0 and (best < 0 or i < best):
            if _EDGE_TAIL_RE.match(text, i):
                best = i
                break
            i = text.find(arrow, i + 1)
    return text if best < 0 else text[:best]


def node_prose(line: str) -> str:
    """The words of a node line: no bullet, no backticks, no edge list."""
    m = _NODE_HEAD_RE.match(line)
    rest = line[m.end():] if m else line
    return _before_edges(rest).strip()


def heading_title(line: str) -> str:
    return _before_edges(_ANCHOR_RE.sub("", line.lstrip("#"))).strip()


def _traversal(graph: Graph) -> list[Item]:
    """Items in reading order, following F# headings into their backing files."""
    out: list[Item] = []
    stack = list(reversed(graph.roots))
    # each item has one parent and comes after it in its parse, so no item is met twice
    while stack:
        item = stack.pop()
        out.append(item)
        if item.children:
            stack.extend(reversed(item.children))
    return out


def _fenced_spans(lines: list[str]) -> list[tuple[int, int]]:
    """1-based inclusive spans of fenced code blocks (an open fence runs to the end)."""
    spans: list[tuple[int, int]] = []
    fence: str | None = None
    start = 0
    for i, line in enumerate(lines, 1):
        m = _FENCE_RE.match(line)
        if fence is None:
            if m:
                fence, start = m.group(1), i
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
            spans.append((start, i))
            fence = None
    if fence is not None:
        spans.append((start, len(lines)))
    return spans


def widen_to_fences(lines: list[str], start: int, end: int) -> tuple[int, int]:
    """Grow a line range so that it never cuts a fenced block in half."""
    changed = True
    while changed:
        changed = False
        for a, b in _fenced_spans(lines):
            if a <= end and b >= start and (a < start or b > end):
                start, end = min(start, a), max(end, b)
                changed = True
    return start, end


def line_passages(lines: list[str], limit: int = PASSAGE_CHARS) -> list[tuple[int, int]]:
    """Cover a free-form file with line ranges of about ``limit`` characters, whole fences kept."""
    out: list[tuple[int, int]] = []
    start, size = 1, 0
    for n, line in enumerate(lines, 1):
        if size and size + len(line) + 1 > limit:
            out.append((start, n - 1))
            start, size = n, 0
        size += len(line) + 1
    if lines:
        out.append((start, len(lines)))
    merged: list[tuple[int, int]] = []
    for a, b in out:
        a, b = widen_to_fences(lines, a, b)
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return [(a, b) for a, b in merged if any(lines[i - 1].strip() for i in range(a, b + 1))]


def split_passages(text: str, limit: int = PASSAGE_CHARS) -> list[str]:
    """Scoring passages of one entry: whole when short, line-aligned windows when long."""
    if len(text) <= limit:
        return [text]
    parts: list[str] = []
    offset = 0
    while offset < len(text):
        end = min(offset + limit, len(text))
        if end < len(text):
            cut = text.rfind("\n", offset + limit // 2, end)
            if cut < 0:
                cut = text.rfind(" ", offset + limit // 2, end)
            if cut >= 0:
                end = cut + 1
        part = text[offset:end].strip()
        if part:
            parts.append(part)
        offset = end
    return parts


#: One item's own share of the projection, which only its file's content decides:
#: (words, rendered lines, end line), or None for a bare grouping heading.
Local = tuple[str, tuple[int, ...], int] | None


@dataclass
class Reuse:
    """What a rebuild takes from the last build of the same root, by each file's parse key:
    the file parses (graph.py) and each graph file's items' own projection (line -> Local)."""

    parses: ParseCache
    local: dict[str, dict[int, Local]] = field(default_factory=dict)
    #: each memo of ``local`` marshalled, with its size then: a file's memo is written as it was read
    blobs: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    #: the entries of the last build's segments (:class:`Segment`) by key; None until looked for
    segments: Segments | None = None

    def to_data(self) -> dict:
        blobs = {}
        for key, memo in self.local.items():
            got = self.blobs.get(key)
            blobs[key] = got if got is not None and got[0] == len(memo) else (len(memo), marshal.dumps(memo))
        self.blobs = blobs
        return {"version": _reuse_version(), "graph": self.parses.to_data(),
                "local": [(key, blob) for key, (_, blob) in blobs.items()]}

    @classmethod
    def from_data(cls, data: dict) -> Reuse:
        from rmtui.engine.memory.graph import ParseCache

        local, blobs = {}, {}
        for key, blob in data["local"]:
            memo = local[key] = marshal.loads(blob)
            blobs[key] = (len(memo), blob)
        return cls(ParseCache.from_data(data.get("graph")), local, blobs)


@dataclass
class Segment:
    """The entries and heading records a top-level ``F#`` heading's subtree projected to.

    A subtree's entries depend on its files' content and on a few facts from outside: the
    heading's own record and scope, the positions the subtree starts at (rank, entry and
    heading indices: ranks, ancestors and neighbours are global indices), which of its ids
    are used elsewhere too, and the digests of the backing files its headings name. The
    ``key`` digests the first ones; ``dup`` and ``backing`` hold the last two as they were.
    When all are the same the entries are the same, so they are taken as they are: a
    one-node change projects one file again."""

    key: bytes
    ids: tuple[str, ...]  # every id in the subtree
    dup: tuple[str, ...]  # those used more than once in the whole graph then
    backing: tuple[tuple[str, str, bool], ...]  # (name, digest chain, is a graph file) of each named backing file
    items: int  # items of the subtree (how far the traversal moves past it)
    rows: list[tuple]  # its entries, final (neighbours linked)
    headings: list[tuple]  # its heading records' fields (HeadingRef's order)
    blob: bytes = b""  # the five above marshalled, as the corpus file holds them

    def dumped(self) -> bytes:
        if not self.blob:
            self.blob = marshal.dumps((self.ids, self.dup, self.backing, self.items, self.rows, self.headings))
        return self.blob

    @classmethod
    def loads(cls, key: bytes, blob: bytes) -> Segment:
        ids, dup, backing, items, rows, headings = marshal.loads(blob)
        return cls(key, ids, dup, backing, items, rows, headings, blob)


@dataclass
class _Made:
    """A segment projected by this build, recorded once its rows are final."""

    key: bytes
    ids: tuple[str, ...]
    backing: tuple[str, ...]  # the backing files its headings name
    items: int


class Segments:
    """The last build's segments by key: those of this process's last build, or the corpus
    file's, each read from it (and its checksum checked) only when a key asks for it."""

    def __init__(self, made: dict[bytes, Segment] | None = None, raw: bytes = b"",
                 where: dict[bytes, tuple[int, int, int]] | None = None) -> None:
        self.made = made or {}
        self.raw = raw
        self.where = where or {}  # key -> (offset, size, crc32) in ``raw``

    def get(self, key: bytes) -> Segment | None:
        got = self.made.get(key)
        if got is None and key in self.where:
            off, size, crc = self.where[key]
            blob = self.raw[off:off + size]
            if len(blob) == size and zlib.crc32(blob) == crc:
                try:
                    got = self.made[key] = Segment.loads(key, blob)
                except (EOFError, ValueError, TypeError):
                    got = None  # a damaged block: that subtree is projected again
        return got


def build_corpus(root: Path, graph: Graph | None = None, *, imports: bool = True, reuse: Reuse | None = None) -> Corpus:
    """Project ``graph`` (parsed from ``root`` when not given) into retrieval entries.

    With ``imports``, every ``MF#`` heading whose view is imported brings that view's items
    too, with qualified ids (``MF#<view>/<id>``) and the heading as their context. With
    ``reuse``, unchanged files are neither parsed nor projected again, and ``reuse`` is left
    holding what this build used.
    """
    root = Path(root)
    with collector_paused():
        return _build(root, graph, imports, reuse)


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector off while a corpus is built: the parse and projection
    allocate some hundred thousand objects that all stay alive (items point to their
    parents), so the collections it would run meanwhile find nothing and at 10,000 nodes
    cost tens of milliseconds. Back on (if it was) when the build ends, however it ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _build(root: Path, graph: Graph | None, imports: bool, reuse: Reuse | None) -> Corpus:
    parsed_here = graph is None
    graph = graph if graph is not None else _parse_root(root, reuse.parses if reuse is not None else None)
    files = {name: d for name, gf in graph.files.items() if (d := gf.raw_digest or _digest(root / name)) is not None}
    missing = sorted({i.backing_file for i in graph.ordered
                      if i.backing_file and i.backing_file not in graph.files} |
                     {n for n in ("MEMORY.md", "PURSUITS.md") if n not in graph.files})
    projection = _Projection(graph, reuse.local if reuse is not None else {},
                             reuse.segments if reuse is not None else None)
    projection.project()
    corpus = Corpus(root, graph.fingerprint(), [], projection.headings, files, missing,
                    len(graph.issues), texts=dict(projection.texts))
    if imports:
        _add_imports(corpus, projection)
    rows = [tuple(row) for row in projection.entries]  # as a cached corpus holds them (a reused row is one)
    corpus.entries = EntryList(rows)
    corpus.pieces = projection.pieces(rows)
    if reuse is not None:
        reuse.local = projection.local
        reuse.segments = Segments({seg.key: seg for seg in corpus.pieces if isinstance(seg, Segment)})
    if parsed_here:
        _untie(graph)
    return corpus


def _untie(graph: Graph) -> None:
    """Break the parent/children cycles of a graph no one else holds, so that it is freed as
    soon as the build returns instead of by a collection that walks every young object."""
    for item in graph.ordered:
        item.parent = None
        item.children = []


def _parse_root(root: Path, parses: ParseCache | None = None) -> Graph:
    from rmtui.engine.memory.graph import MEMORY_ROOT_FILE, load_graph

    if not (root / MEMORY_ROOT_FILE).is_file():
        raise UsageError(f"{root} has no {MEMORY_ROOT_FILE}: not a memory root")
    return load_graph(root, parses)


class _Projection:
    """The walk that turns a parsed graph into entries, with the state its steps share:
    heading records, ancestor scopes per parent, and runs of neighbouring nodes."""

    def __init__(self, graph: Graph, previous: dict[str, dict[int, Local]] | None = None,
                 segments: Segments | None = None) -> None:
        self.graph = graph
        self.segments = segments or Segments()
        #: (entry start, heading start, entry end, heading end, the segment reused or one to record), in order
        self.marks: list[tuple[int, int, int, int, Segment | _Made]] = []
        self.texts = {name: gf.lines for name, gf in graph.files.items()}
        self.order = _traversal(graph)
        self.id_counts: dict[str, int] = {}
        for item in self.order:
            if item.id:
                self.id_counts[item.id] = self.id_counts.get(item.id, 0) + 1
        self.dups = {i for i, n in self.id_counts.items() if n > 1}
        self.previous = previous or {}
        self.local: dict[str, dict[int, Local]] = {}  # what this build's files' items project to on their own
        self.headings: list[HeadingRef] = []
        self.heading_index: dict[int, int] = {}
        #: each entry as a row (Entry.to_tuple's order): a list, its neighbours linked last, or a reused final tuple
        self.entries: list[Any] = []
        self.scopes: dict[int, tuple[list[int], str]] = {}  # parent -> (ancestor records, context), shared
        # Neighbours are the nodes of one run: the same parent, where a bare grouping heading (a
        # title with no text of its own: a speaker, a date, a sub-topic label) does not start a
        # run of its own, so the notes on either side of it stay each other's neighbours.
        self.runs: dict[int, list[int]] = {}
        self.bare: set[int] = set()

    def project(self) -> None:
        files = self.graph.files
        self.memo_of: dict[str, dict[int, Local]] = {}  # file name -> its memo of Local by line
        for name, gf in files.items():
            if gf.graph and gf.parse_key:
                self.memo_of[name] = self.local[gf.parse_key] = self.previous.get(gf.parse_key) or {}
        roots = self.segment_roots()
        rank, order = 0, self.order
        while rank < len(order):
            item = order[rank]
            self.one(item, rank)
            rank += 1
            got = roots.get(id(item))
            if got is not None and id(item) not in self.heading_index:
                rank = self.segment(item, rank, *got)
        self.link_neighbours()

    def one(self, item: Item, rank: int) -> None:
        """Project one item: its entry (unless it is a bare grouping heading) and its sources."""
        anc, context = self.scope_of(item.parent)
        memo = self.memo_of.get(item.file)
        if memo is not None and item.line in memo:
            local = memo[item.line]
        else:
            local = self.node_local(item) if item.kind == "node" else self.heading_local(item)
            if memo is not None:
                memo[item.line] = local
        if local is None:
            if item.heading_kind not in ("F#", "MF#", "MQ#"):
                self.bare.add(id(item))
            return  # a bare grouping heading is context, not a result
        text, own, end = local
        self.runs.setdefault(self.run_of(item.parent), []).append(len(self.entries))
        # the ancestors list is the scope's, shared by its entries (read only; marshal writes it once)
        self.entries.append([self.key_for(item), item.id, item.kind, item.file, item.line, end, item.hash, rank,
                             text, list(own), anc, context, -1, -1, item.uncertain, ""])
        if item.kind == "heading" and item.backing_file and item.backing_file in self.graph.files \
                and not self.graph.files[item.backing_file].graph:
            _source_entries(item, self.graph, self.entries, anc + [self.heading_ref(item)], self.headings,
                            rank)

    def segment_roots(self) -> dict[int, tuple[tuple, int]]:
        """Each heading of a root file whose children all come from the graph file it backs:
        id -> (the files of its subtree with their parse keys, how many items the subtree has)."""
        files = self.graph.files
        top: dict[int, list[tuple]] = {}  # id of a root file's heading -> the files under it
        for name, gf in files.items():
            claim, steps = gf.claimed_by, 0
            while claim is not None and files[claim.file].claimed_by is not None and steps < len(files):
                claim, steps = files[claim.file].claimed_by, steps + 1
            if claim is not None and files[claim.file].claimed_by is None:
                top.setdefault(id(claim), []).append((name, gf.parse_key or gf.digest, gf.graph))
        counts: dict[str, int] = {}
        for item in self.order:
            counts[item.file] = counts.get(item.file, 0) + 1
        out: dict[int, tuple[tuple, int]] = {}
        for name, gf in files.items():
            h = gf.claimed_by
            if h is None or id(h) not in top or files[h.file].claimed_by is not None or not gf.graph \
                    or h.backing_file != name or any(c.file == h.file for c in h.children):
                continue
            sub = top[id(h)]
            out[id(h)] = (tuple(sub), sum(counts.get(n, 0) for n, _, graph in sub if graph))
        return out

    def segment(self, head: Item, start: int, files: tuple, items: int) -> int:
        """The subtree under ``head`` (``items`` items from traversal position ``start``): the
        last build's entries when nothing they depend on moved, else projected item by item
        (and recorded for the next build). Returns the position after the subtree."""
        anc, context = self.scope_of(head.parent)
        line = self.texts[head.file][head.line - 1] if head.file in self.texts else head.title
        ref = (head.id, head.file, head.line, heading_title(line) or head.title, head.hash)
        e0, h0 = len(self.entries), len(self.headings)
        # repr, not marshal: marshal's bytes for equal values vary with how objects are shared
        key = hashlib.blake2b(repr((ref, tuple(anc), context, start, e0, h0, files)).encode("utf-8", "surrogatepass"),
                              digest_size=16).digest()
        seg = self.segments.get(key)
        if seg is not None and seg.items == items and self.fits(seg):
            self.entries.extend(seg.rows)
            self.headings.extend(HeadingRef(*h) for h in seg.headings)
            if seg.headings:
                self.heading_index[id(head)] = h0  # the subtree's first record is its heading's
            self.marks.append((e0, h0, len(self.entries), len(self.headings), seg))
            return start + items
        names = {n for n, _, _ in files}
        span = self.order[start:start + items]
        if len(span) != items or any(i.file not in names for i in span) \
                or (start + items < len(self.order) and self.order[start + items].file in names):
            return start  # not the subtree it should be (no parse makes one): projected item by item
        ids: list[str] = []
        backing: dict[str, None] = {}
        recordable = True
        for rank, item in enumerate(span, start):
            if item.id:
                ids.append(item.id)
            if item.kind == "heading":
                if item.heading_kind == "MF#":
                    recordable = False  # an import is merged under it later, by its scope
                if item.backing_file:
                    backing[item.backing_file] = None
            self.one(item, rank)
        if recordable:
            self.marks.append((e0, h0, len(self.entries), len(self.headings),
                               _Made(key, tuple(ids), tuple(backing), items)))
        return start + items

    def fits(self, seg: Segment) -> bool:
        """Whether the ids and backing files a segment depends on are as they were."""
        return (self.duplicated(seg.ids) == seg.dup
                and self.backing_of(tuple(n for n, _, _ in seg.backing)) == seg.backing)

    def duplicated(self, ids: tuple[str, ...]) -> tuple[str, ...]:
        if not self.dups:
            return ()
        return tuple(i for i in ids if i in self.dups)

    def backing_of(self, names: tuple[str, ...]) -> tuple[tuple[str, str, bool], ...]:
        files, digests = self.graph.files, self.graph.backing_digests
        return tuple((n, digests.get(n, ""), n in files and files[n].graph) for n in names)

    def pieces(self, rows: list[tuple]) -> list[Segment | tuple[list[tuple], list[tuple]]]:
        """The entries and heading records in order, cut into the segments (reused, or made by
        this build) and what lies between them, as the corpus file stores them."""
        out: list[Segment | tuple[list[tuple], list[tuple]]] = []
        heads = [(h.id, h.file, h.line, h.title, h.hash) for h in self.headings]
        e, h = 0, 0
        for e0, h0, e1, h1, seg in self.marks:
            if e0 > e or h0 > h:
                out.append((rows[e:e0], heads[h:h0]))
            if isinstance(seg, _Made):
                seg = Segment(seg.key, seg.ids, self.duplicated(seg.ids), self.backing_of(seg.backing), seg.items,
                              rows[e0:e1], heads[h0:h1])
            out.append(seg)
            e, h = e1, h1
        if e < len(rows) or h < len(heads):
            out.append((rows[e:], heads[h:]))
        return out

    def heading_ref(self, h: Item) -> int:
        if id(h) not in self.heading_index:
            self.heading_index[id(h)] = len(self.headings)
            line = self.texts[h.file][h.line - 1] if h.file in self.texts else h.title
            self.headings.append(HeadingRef(h.id, h.file, h.line, heading_title(line) or h.title, h.hash))
        return self.heading_index[id(h)]

    def key_for(self, item: Item) -> str:
        if item.id and self.id_counts.get(item.id, 0) == 1:
            return item.id
        return f"{item.id or 'heading'}@{item.file}:{item.line}"

    def scope_of(self, parent: Item | None) -> tuple[list[int], str]:
        if parent is None:
            return [], ""
        got = self.scopes.get(id(parent))
        if got is None:
            above, _ = self.scope_of(parent.parent)
            anc = above + [self.heading_ref(parent)]
            got = self.scopes[id(parent)] = (anc, " / ".join(self.headings[i].title for i in anc))
        return got

    def run_of(self, parent: Item | None) -> int:
        while parent is not None and id(parent) in self.bare:
            parent = parent.parent
        return id(parent) if parent is not None else -1

    def node_local(self, item: Item) -> Local:
        """A node's words: its line's prose and its continuation lines."""
        lines = self.texts.get(item.file, [])
        own = tuple(range(item.line, item.end_line + 1))
        words = [node_prose(lines[item.line - 1])] + [lines[n - 1].strip() for n in own[1:]]
        return " ".join(w for w in words if w), own, item.end_line

    def heading_local(self, item: Item) -> Local:
        """A heading's own lines (its children's spans in its file left out); None for a bare grouping heading."""
        lines = self.texts.get(item.file, [])
        covered: set[int] = set()
        for child in item.children:
            if child.file == item.file:
                covered.update(range(child.line, child.end_line + 1))
        own = [n for n in range(item.line, item.end_line + 1) if n not in covered]
        while own and not lines[own[-1] - 1].strip():
            own.pop()
        body = [lines[n - 1].strip() for n in own[1:] if lines[n - 1].strip()]
        if not body and item.heading_kind not in ("S#", "M#"):
            return None
        title = heading_title(lines[item.line - 1]) if lines else item.title
        return "\n".join([title, *body]), tuple(own), own[-1] if own else item.line

    def link_neighbours(self) -> None:
        for siblings in self.runs.values():
            nodes = [i for i in siblings if self.entries[i][2] == "node"]
            for a, b in itertools.pairwise(nodes):
                self.entries[a][13], self.entries[b][12] = b, a


def _add_imports(corpus: Corpus, projection: _Projection) -> None:
    """Append every imported view under its ``MF#`` heading; the fingerprint then covers the views."""
    views = [i for i in projection.order if i.heading_kind == "MF#" and i.domain == "memory" and i.id
             and i.id not in (".", "..")]
    parts = [corpus.fingerprint]
    rank_next = len(projection.order)
    for item in views:
        rel = f"{IMPORTS_DIR}/{item.id}/dist"
        sub = _imported(corpus.root / rel)
        if sub is None:
            corpus.missing.append(f"{rel}/MEMORY.md")  # appears with the first pull
            continue
        anc, context = projection.scope_of(item)
        _merge_import(item.id or "", rel, sub, projection.entries, projection.headings, anc, context, rank_next)
        rank_next += 1 + max((e.rank for e in sub.entries), default=0)
        corpus.files.update({f"{rel}/{n}": d for n, d in sub.files.items()})
        corpus.missing.extend(f"{rel}/{n}" for n in sub.missing)
        corpus.texts.update({f"{rel}/{n}": lines for n, lines in sub.texts.items()})
        corpus.issues += sub.issues
        parts.append(f"{item.id}\0{sub.fingerprint}")
    if len(parts) > 1:
        corpus.fingerprint = hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _imported(dist: Path) -> Corpus | None:
    """The corpus of one promoted import (MF profile), or None when there is none."""
    import stat

    from rmtui.engine.memory.graph import load_mf_graph

    try:
        if not stat.S_ISREG(os.lstat(dist / "MEMORY.md").st_mode) or os.path.islink(dist) \
                or os.path.islink(dist.parent):
            return None
    except OSError:
        return None
    return build_corpus(dist, load_mf_graph(dist), imports=False)


def _qualify(view: str, key: str) -> str:
    return f"MF#{view}/{key}"


def _merge_import(view: str, rel: str, sub: Corpus, entries: list[list], headings: list[HeadingRef],
                  anc: list[int], context: str, rank_base: int) -> None:
    """Append an import's entries: qualified ids and keys, files under ``rel``, the MF# heading's
    scope prepended to each entry's ancestors, ranks after the root's own entries."""
    h_off, e_off = len(headings), len(entries)
    headings.extend(HeadingRef(_qualify(view, h.id) if h.id else None, f"{rel}/{h.file}", h.line, h.title, h.hash)
                    for h in sub.headings)
    for e in sub.entries:
        entries.append([
            _qualify(view, e.key), _qualify(view, e.id) if e.id else None, e.kind, f"{rel}/{e.file}", e.start_line,
            e.end_line, e.hash, rank_base + e.rank, e.text, list(e.lines), anc + [h_off + i for i in e.ancestors],
            " / ".join(c for c in (context, e.context) if c), e.prev + e_off if e.prev >= 0 else -1,
            e.next + e_off if e.next >= 0 else -1, e.uncertain, _qualify(view, e.label) if e.label else ""])


def _source_entries(owner: Item, graph: Graph, entries: list[list], anc: list[int],
                    headings: list[HeadingRef], rank: int) -> None:
    name = owner.backing_file or ""
    lines = graph.files[name].lines
    context = " / ".join(headings[i].title for i in anc)
    if owner.heading_kind == "S#":
        text = "\n".join(lines).strip()
        if text:
            label = f"S#{owner.id}"
            entries.append(list(Entry(label, owner.id, "source", name, 1, len(lines),
                                      hashlib.sha256(text.encode()).hexdigest(), rank, text,
                                      list(range(1, len(lines) + 1)), anc, context, label=label).to_tuple()))
        return
    for a, b in line_passages(lines):
        text = "\n".join(lines[a - 1:b])
        label = f"M#{owner.id}"
        entries.append(list(Entry(f"{label}:{a}-{b}", owner.id, "source", name, a, b,
                                  hashlib.sha256(text.encode()).hexdigest(), rank, text.strip(),
                                  list(range(a, b + 1)), anc, context, label=label).to_tuple()))


# -- the cache ---------------------------------------------------------------

def _cache_path(root: Path) -> Path:
    return root / ".runtime" / "cache" / "corpus.bin"


def load_corpus(root: Path) -> Corpus:
    """The corpus of ``root`` now: the cached one if no parsed file changed, else rebuilt.

    Call it under the memory lock (docs/architecture.md, "Lock discipline") so the snapshot is consistent.
    """
    root = Path(root)
    key = str(root.resolve())
    memo = _MEMO.get(key)
    if memo is not None and current_fingerprint(root, memo):
        return memo  # a long-lived process (service, MCP, TUI) keeps the last corpus warm
    path = _cache_path(root)
    corpus = _read_cache(root, path)
    if corpus is None:
        with collector_paused():  # what the reuse file holds stays alive too
            reuse = _REUSE.get(key) or _read_reuse(path.with_name(REUSE_FILE))
            if reuse.segments is None:
                reuse.segments = _read_segments(path)
            try:
                corpus = build_corpus(root, reuse=reuse)
            except (IndexError, KeyError, TypeError, ValueError, AttributeError, EOFError):
                # what was reused does not fit (only a damaged reuse file that passed its checksum
                # could do that): built from nothing, as a cold start is
                reuse = Reuse(_empty_parses())
                corpus = build_corpus(root, reuse=reuse)
            _write_cache(path, corpus)
            _write_reuse(path.with_name(REUSE_FILE), reuse)
        _REUSE[key] = reuse
    _MEMO[key] = corpus
    return corpus


#: The last corpus per root in this process, reused while its files are unchanged.
_MEMO: dict[str, Corpus] = {}
#: What the last build per root in this process can lend the next one (see :class:`Reuse`).
_REUSE: dict[str, Reuse] = {}
#: The file next to the corpus cache that keeps a :class:`Reuse` for the next process.
REUSE_FILE = "parse.bin"


def _read_reuse(path: Path) -> Reuse:
    """The reuse file's parses and projections; an empty :class:`Reuse` when it is missing,
    damaged (its checksum), or of another version (everything is then parsed and projected
    again)."""
    try:
        raw = path.read_bytes()
        head = len(_REUSE_MAGIC) + _REUSE_SUM
        if raw.startswith(_REUSE_MAGIC) and reuse_checksum(raw[head:]) == raw[head - _REUSE_SUM:head]:
            data = marshal.loads(raw[head:])
            if isinstance(data, dict) and data.get("version") == _reuse_version():
                return Reuse.from_data(data)
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        pass
    return Reuse(_empty_parses())


_REUSE_MAGIC = b"RMTREUSE2"
_REUSE_SUM = 4


def reuse_checksum(payload: bytes) -> bytes:
    """CRC-32 of the reuse file's payload: it catches a torn or damaged file (what a derived
    cache must detect) at a tenth of a cryptographic digest's cost over megabytes."""
    return zlib.crc32(payload).to_bytes(_REUSE_SUM, "little")


def _empty_parses() -> ParseCache:
    from rmtui.engine.memory.graph import ParseCache

    return ParseCache()


def _reuse_version() -> str:
    """:data:`CACHE_VERSION` and a digest of this module's source: projections made by other code are not reused."""
    from rmtui.engine.fsutil import source_stamp

    return source_stamp(__file__, CACHE_VERSION)




def _write_reuse(path: Path, reuse: Reuse) -> None:
    from rmtui.engine.fsutil import atomic_write_bytes

    try:
        payload = marshal.dumps(reuse.to_data())
        atomic_write_bytes(path, [_REUSE_MAGIC, reuse_checksum(payload), payload],
                           durable=False)
    except (OSError, ValueError):
        pass  # a derived cache: failing to write it costs time, never correctness


def _read_cache(root: Path, path: Path) -> Corpus | None:
    """The cached corpus if every file it was built from is unchanged, else None.

    The file holds the length of a small marshalled head (version, file digests, missing
    names, and each piece's key, size and CRC-32), the head, then the pieces: the entries and
    heading records of each segment (see :class:`Segment`) and of what lies between them,
    each marshalled on its own. The head is checked first, so after an edit the stale entries
    are never read; a piece whose checksum fails makes the whole file a miss. Each part is
    read as bytes and unmarshalled from them: ``marshal.load`` on the file object is six times
    slower than ``loads``."""
    try:
        with path.open("rb") as fh:
            size = int.from_bytes(fh.read(4), "little")
            head = marshal.loads(fh.read(size))
            if not isinstance(head, dict) or head.get("version") != CACHE_VERSION:
                return None
            texts = _unchanged_texts(root, head)
            if texts is None:
                return None
            raw = fh.read()
        rows: list[tuple] = []
        headings: list[HeadingRef] = []
        pieces: list = []
        off = 0
        with collector_paused():
            for key, n, crc in head["pieces"]:
                blob = raw[off:off + n]
                off += n
                if len(blob) != n or zlib.crc32(blob) != crc:
                    return None
                if key:
                    seg = Segment.loads(key, blob)
                    got_rows, got_heads = seg.rows, seg.headings
                    pieces.append(seg)
                else:
                    got_rows, got_heads = marshal.loads(blob)
                    pieces.append((got_rows, got_heads))
                rows.extend(got_rows)
                headings.extend(HeadingRef(*h) for h in got_heads)
        return Corpus(root, head["fingerprint"], EntryList(rows), headings, head["files"], list(head["missing"]),
                      head["issues"], texts=texts, pieces=pieces)
    except (OSError, EOFError, ValueError, TypeError, KeyError, AttributeError):
        return None  # a damaged or foreign cache file: rebuilt


def _read_segments(path: Path) -> Segments:
    """The segments of the corpus file as it is (stale: a file changed since), each read when asked for."""
    try:
        raw = path.read_bytes()
        size = int.from_bytes(raw[:4], "little")
        head = marshal.loads(raw[4:4 + size])
        if not isinstance(head, dict) or head.get("version") != CACHE_VERSION:
            return Segments()
        where: dict[bytes, tuple[int, int, int]] = {}
        off = 4 + size
        for key, n, crc in head["pieces"]:
            if key:
                where[key] = (off, n, crc)
            off += n
        return Segments(raw=raw, where=where)
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        return Segments()


def _unchanged_texts(root: Path, head: dict) -> dict[str, list[str]] | None:
    """The lines of each file the head names, or None as soon as one differs from its digest
    or a file that was missing exists now."""
    texts: dict[str, list[str]] = {}
    for name, digest in head["files"].items():
        try:
            raw = (root / name).read_bytes()
        except OSError:
            return None
        if hashlib.sha256(raw).hexdigest() != digest:
            return None
        text = raw.decode("utf-8", errors="replace")
        if text.startswith("\ufeff"):
            text = text[1:]
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        texts[name] = lines
    for name in head["missing"]:
        if os.path.lexists(root / name):
            return None
    return texts


def _write_cache(path: Path, corpus: Corpus) -> None:
    from rmtui.engine.fsutil import atomic_write_bytes

    blobs: list[tuple[bytes, bytes]] = []
    pieces = corpus.pieces or [(corpus.entries.rows() if isinstance(corpus.entries, EntryList) else
                                [e.to_tuple() for e in corpus.entries],
                                [(h.id, h.file, h.line, h.title, h.hash) for h in corpus.headings])]
    for piece in pieces:
        blobs.append((piece.key, piece.dumped()) if isinstance(piece, Segment) else (b"", marshal.dumps(piece)))
    head = {
        "version": CACHE_VERSION,
        "fingerprint": corpus.fingerprint,
        "files": corpus.files,
        "missing": corpus.missing,
        "issues": corpus.issues,
        "pieces": [(key, len(blob), zlib.crc32(blob)) for key, blob in blobs],
    }
    try:
        raw_head = marshal.dumps(head)
        atomic_write_bytes(path, [len(raw_head).to_bytes(4, "little"), raw_head, *(b for _, b in blobs)],
                           durable=False)
    except OSError:
        pass  # a derived cache: failing to write it costs time, never correctness


#: A file changed this recently may change again within its file system's timestamp
#: granularity without its status changing, so it is hashed again rather than trusted.
RACY_NS = 2_000_000_000


def current_fingerprint(root: Path, corpus: Corpus) -> bool:
    """True when every file the corpus was built from is unchanged.

    Each file is hashed, except one whose status (inode, size, modification and change
    times) is what it was when an earlier call of this process hashed it, provided that
    hash was taken more than :data:`RACY_NS` after the file's last change: as Git's index
    treats a "racily clean" file. Any write moves the change time (which no tool can set
    back), so a warm call hashes only what changed; a freshly written file is hashed until
    it is old enough to be trusted."""
    now = time.time_ns()
    if corpus._paths is None or corpus._paths[0] != root or len(corpus._paths[1]) != len(corpus.files):
        # joined once per corpus: 250 files at 50,000 nodes
        corpus._paths = (root, [(name, digest, os.path.join(root, name)) for name, digest in corpus.files.items()])
    for name, digest, path in corpus._paths[1]:
        try:
            st = os.stat(path)
        except OSError:
            return False
        key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if corpus.checked.get(name) == key:
            continue
        if _digest(Path(path)) != digest:
            return False
        if max(st.st_mtime_ns, st.st_ctime_ns) < now - RACY_NS:
            corpus.checked[name] = key
    return not any(os.path.lexists(Path(root) / n) for n in corpus.missing)


# -- pending evidence ------------------------------------------------------------

#: The kind of a pending evidence entry and of its retrieval result.
PENDING_KIND = "pending-evidence"
_PENDING_VERSION = 1


@dataclass
class PendingCorpus:
    """Pending evidence as a corpus of its own, one entry per item in submission order.

    Kept apart from the memory corpus so that evidence coming and going never invalidates
    the memory's indexes; its fingerprint covers only uids and content hashes, so a state
    change (inbox to queued to claimed) reuses every index built for it.
    """

    refs: list[PendingRef]  # fresh on every load (states change without text changes)
    corpus: Corpus
    texts: dict[str, str]  # uid -> the full text
    #: built indexes of this very set (a BM25 index by its key), kept in memory only: the set
    #: changes with every submission, so a file cache would be rewritten on every call
    indexes: dict[str, object] = field(default_factory=dict)

    def text(self, i: int) -> str:
        return self.texts[self.refs[i].uid]


def _pending_fingerprint(refs: list[PendingRef]) -> str:
    h = hashlib.sha256(f"pending-{_PENDING_VERSION}".encode())
    for r in refs:
        h.update(f"\n{r.uid}\0{r.sha256}".encode())
    return h.hexdigest()


def load_pending(root: MemoryRoot) -> PendingCorpus:
    """The pending evidence of ``root`` now (see ``PENDING_STATES``).

    Every call reads the queue's pending rows without their text (one indexed query), so a
    submission, approval, rejection or consumption shows on the very next retrieval; the
    texts are read and the entries rebuilt only when that set of uids and hashes changed.
    """
    from rmtui.engine.evidence.queue import EvidenceQueue

    key = str(root.path.resolve())
    with EvidenceQueue(root) as q:
        refs = q.pending_refs(limit=PENDING_WINDOW)
        fp = _pending_fingerprint(refs)
        memo = _PENDING_MEMO.get(key)
        if memo is not None and memo.corpus.fingerprint == fp:
            return PendingCorpus(refs, memo.corpus, memo.texts, memo.indexes)
        known = memo.texts if memo is not None else {}
        texts = {r.uid: known[r.uid] for r in refs if r.uid in known}
        texts.update(q.pending_texts(r.uid for r in refs if r.uid not in known))  # only the new ones
    refs = [r for r in refs if r.uid in texts]  # consumed or rejected between the two reads
    entries = [Entry(f"pending:{r.uid}", None, PENDING_KIND, "", 0, 0, r.sha256, i, texts[r.uid])
               for i, r in enumerate(refs)]
    corpus = Corpus(root.path, _pending_fingerprint(refs), entries, [], {}, [])
    out = _PENDING_MEMO[key] = PendingCorpus(refs, corpus, {r.uid: texts[r.uid] for r in refs})
    return out


#: The last pending corpus per root in this process (a long-lived service reuses its entries).
_PENDING_MEMO: dict[str, PendingCorpus] = {}
#: How many of the newest pending items retrieval searches: fresh evidence is what an agent
#: needs before an Update; a backlog of thousands (a queue no Update drains) stays bounded.
PENDING_WINDOW = 256
