"""Rendering of selected memory as exact source text (docs/architecture.md, "Retrieval").

Two callers, one renderer: embedding retrieval hands ranked corpus entries, agent
retrieval hands a model's selection ``{"ids", "sources", "recent_candidates"}`` (no other
keys) which is resolved here against the real files, model-free. Either way the output is
source text in source order: each item under its ancestor heading lines (once each),
node lines exact with their continuation lines, whole fenced blocks. Output longer than
``max_output_chars`` is an error, never a silent truncation.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from rmtui.engine.display import printable
from rmtui.engine.errors import UsageError
from rmtui.engine.retrieval.corpus import PENDING_KIND, Corpus, Entry, widen_to_fences

NO_STRONG_MATCH = "no strong match"
#: Pending evidence is rendered after memory, in a section of its own under this title.
PENDING_TITLE = "Pending evidence (not yet reconciled into memory)"
PENDING_NOTE = ("Submitted by agents and waiting for an Update; not memory. Quoted as submitted: it may be "
                "wrong, superseded, or rejected on review.")
#: How much of one piece of pending evidence is quoted (the rest: ``evidence show``).
PENDING_ITEM_CHARS = 2000
SELECTION_KEYS = ("ids", "sources", "recent_candidates")
_SOURCE_ID_RE = re.compile(r"^(?:MF#([A-Za-z0-9_.-]+)/)?(M#|S#|MF#)([A-Za-z0-9_.-]+)$")
#: An imported shared view (``MF#<view>``) or one of its items (``MF#<view>/<id>``).
_QUALIFIED_RE = re.compile(r"^MF#([A-Za-z0-9_.-]+)(?:/([A-Za-z0-9_.-]+))?$")


class OutputTooLarge(UsageError):
    """The rendered text exceeds ``retrieve.max_output_chars``."""


@dataclass
class Unit:
    """One rendered piece: an entry (or part of a subtree), a source range, or pending evidence."""

    key: str  # delivery key: item id, "M#id:a-b", "S#id", "recent:<uid>"
    id: str | None
    kind: str  # node | heading | source | recent
    file: str
    lines: list[int]
    ancestors: list[int]
    rank: float
    hash: str
    label: str = ""
    text: str = ""  # for recent evidence only
    score: float | None = None
    notice: str | None = None  # set by delivery when the item changed since it was delivered

    @property
    def start_line(self) -> int:
        return self.lines[0] if self.lines else 0

    @property
    def end_line(self) -> int:
        return self.lines[-1] if self.lines else 0


def unit_of(entry: Entry, score: float | None = None) -> Unit:
    # a free-form source follows its owning heading (they share the heading's rank)
    rank = float(entry.rank) + (0.5 if entry.kind == "source" else 0.0)
    return Unit(entry.key, entry.id, entry.kind, entry.file, list(entry.lines), list(entry.ancestors),
                rank, entry.hash, entry.label, score=score)


# -- selection schema (agent retrieval) --------------------------------------------------

def _str_list(value, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"selection: {where} must be a list of strings")
    return value


def resolve_selection(corpus: Corpus, selection, *, recent: dict[str, tuple[str, str]] | None = None) -> list[Unit]:
    """Resolve a model's selection against the corpus; anything unknown or extra is refused.

    ``recent`` maps a pending evidence uid to (submitted label, text) for this session.
    """
    if not isinstance(selection, dict):
        raise UsageError("selection must be a JSON object with ids, sources and recent_candidates")
    extra = sorted(set(selection) - set(SELECTION_KEYS))
    if extra:
        raise UsageError(f"selection has unknown keys: {', '.join(extra)} (allowed: {', '.join(SELECTION_KEYS)})")
    ids = _str_list(selection.get("ids", []), "ids")
    sources = selection.get("sources", [])
    if not isinstance(sources, list):
        raise UsageError("selection: sources must be a list")
    recent_ids = _str_list(selection.get("recent_candidates", []), "recent_candidates")

    from rmtui.engine.memory.graph import ID_RE

    units: list[Unit] = []
    by_id: dict[str, Entry] = {}
    heading_index: dict[str, int] = {}
    for e in corpus.entries:
        if e.id is not None and e.kind != "source" and e.id not in by_id:
            by_id[e.id] = e
    for i, h in enumerate(corpus.headings):
        if h.id is not None:
            heading_index.setdefault(h.id, i)
    views = imported_views(corpus)
    whole = [i for i in ids if i.startswith("MF#") and _check_view(i, views) and "/" not in i]
    unknown = [i for i in ids if i not in whole and (
        not (ID_RE.match(i) or i.startswith("MF#")) or (i not in by_id and i not in heading_index))]
    if unknown:
        raise UsageError(f"selection names unknown ids: {', '.join(unknown)}")
    for ident in dict.fromkeys(ids):
        if ident in whole:  # a whole imported view
            units.extend(unit_of(e) for e in corpus.entries if e.key.startswith(ident + "/"))
        else:
            units.extend(_subtree_units(corpus, ident, by_id, heading_index))

    for n, src in enumerate(sources):
        units.extend(_resolve_source(corpus, src, n))

    recent = recent or {}
    missing = [r for r in recent_ids if r not in recent]
    if missing:
        raise UsageError(f"selection names unknown recent candidates: {', '.join(missing)}")
    for pos, uid in enumerate(dict.fromkeys(recent_ids)):
        label, text = recent[uid]
        units.append(Unit(f"recent:{uid}", None, "recent", "", [], [], 1e12 + pos,
                          hashlib.sha256(text.encode()).hexdigest(), label=label, text=text))
    return _dedupe(units)


def imported_views(corpus: Corpus) -> set[str]:
    """The shared views whose items are in the corpus (their keys are ``MF#<view>/…``)."""
    return {e.key[3:].split("/", 1)[0] for e in corpus.entries if e.key.startswith("MF#") and "/" in e.key}


def _check_view(ident: str, views: set[str]) -> bool:
    """Refuse a malformed or unknown ``MF#`` qualifier with a clear error; True when it is fine."""
    m = _QUALIFIED_RE.match(ident)
    if m is None:
        raise UsageError(f"selection id {ident!r} is not a shared view id: use MF#<view> or MF#<view>/<id>")
    view = m.group(1)
    if view in (".", "..") or view not in views:
        raise UsageError(f"selection names shared view `MF#{view}`, which is not imported in this root")
    return True


def _subtree_units(corpus: Corpus, ident: str, by_id: dict[str, Entry], heading_index: dict[str, int]) -> list[Unit]:
    """A node selects itself; a heading selects itself and the graph under it (F# included).

    Free-form text is never pulled in by a heading: an ``M#`` file or an ``S#`` skill under the
    selected heading (or behind it) is its own source, asked for through ``sources``. A
    heading line and its body say when the text applies; the caller asks for the text.
    """
    entry = by_id.get(ident)
    if entry is not None and entry.kind == "node":
        return [unit_of(entry)]
    h = heading_index.get(ident)
    out = [unit_of(entry)] if entry is not None else []
    if h is not None:
        out.extend(unit_of(e) for e in corpus.entries if h in e.ancestors and e.kind != "source")
    if not out:  # a bare heading with nothing under it: render its own line
        ref = corpus.headings[h] if h is not None else None
        if ref is not None:
            out.append(Unit(ident, ident, "heading", ref.file, [ref.line], [], -1, ref.hash))
    return out


def _resolve_source(corpus: Corpus, src, n: int) -> list[Unit]:
    where = f"sources[{n}]"
    if not isinstance(src, dict):
        raise UsageError(f"selection: {where} must be an object")
    extra = sorted(set(src) - {"source_id", "ids", "ranges"})
    if extra:
        raise UsageError(f"selection: {where} has unknown keys: {', '.join(extra)}")
    sid = src.get("source_id")
    if not isinstance(sid, str) or (m := _SOURCE_ID_RE.match(sid)) is None:
        raise UsageError(f"selection: {where}.source_id must be M#id, S#id, MF#<view>/M#id or MF#<view>/S#id")
    view, kind, owner = m.groups()
    if view is not None:
        if kind == "MF#":
            raise UsageError(f"selection: `{sid}`: a shared view holds no other views")
        _check_view(f"MF#{view}", imported_views(corpus))
        owner = f"MF#{view}/{owner}"
    ids = _str_list(src.get("ids", []), f"{where}.ids")
    ranges = src.get("ranges", [])
    if not isinstance(ranges, list):
        raise UsageError(f"selection: {where}.ranges must be a list")
    if kind == "MF#":
        raise UsageError(f"selection: `{sid}` is a shared view, not a source; select it (or MF#{owner}/<id>) "
                         "in ids")
    entries = [e for e in corpus.entries if e.kind == "source" and e.label == sid]
    heading = next((i for i, h in enumerate(corpus.headings) if h.id == owner), None)
    if not entries and heading is None:
        raise UsageError(f"selection: unknown source `{sid}`")
    if kind == "S#":
        if ids or ranges:
            raise UsageError(f"selection: `{sid}` is one complete skill; give no ids or ranges")
        return [unit_of(e) for e in entries]
    if ids:
        raise UsageError(f"selection: `{sid}` is free-form Markdown; select line ranges, not ids")
    if not ranges:
        raise UsageError(f"selection: `{sid}` needs at least one line range")
    name = entries[0].file if entries else ""
    lines = corpus.lines_of(name) if name else []
    anc = entries[0].ancestors if entries else ([heading] if heading is not None else [])
    rank = entries[0].rank if entries else 0
    out = []
    for r in ranges:
        if not isinstance(r, dict) or set(r) != {"start", "end"} or not all(
                isinstance(r[k], int) and not isinstance(r[k], bool) for k in ("start", "end")):
            raise UsageError(f"selection: {where}.ranges items must be {{\"start\": int, \"end\": int}}")
        a, b = r["start"], r["end"]
        if a < 1 or b < a or b > len(lines):
            raise UsageError(f"selection: range {a}-{b} is outside `{sid}` (lines 1-{len(lines)})")
        a, b = widen_to_fences(lines, a, b)
        text = "\n".join(lines[a - 1:b])
        out.append(Unit(f"{sid}:{a}-{b}", owner, "source", name, list(range(a, b + 1)), list(anc),
                        rank + 0.5 + a / 1e6, hashlib.sha256(text.encode()).hexdigest(), label=sid))
    return out


def _dedupe(units: list[Unit]) -> list[Unit]:
    seen: dict[str, Unit] = {}
    for u in units:
        seen.setdefault(u.key, u)
    return list(seen.values())


# -- pending evidence -------------------------------------------------------------------------

def pending_label(session: str, display_id: int | None, submitted_at: str | None, state: str,
                  score: float | None = None) -> str:
    """Who submitted it, when, and where it stands: what a reader needs to weigh a claim."""
    from datetime import datetime

    when = submitted_at or "unknown time"
    try:
        when = datetime.fromisoformat(when).strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        pass
    parts = [f"session {session}", f"#{display_id}" if display_id is not None else "", f"submitted {when}", state,
             f"score {score:.3f}" if score is not None else ""]
    return ", ".join(p for p in parts if p)


def pending_excerpt(text: str, limit: int = PENDING_ITEM_CHARS) -> tuple[str, int]:
    """The quoted part of the evidence and how many characters were left out."""
    text = text.strip()
    if len(text) <= limit:
        return text, 0
    cut = text.rfind("\n", limit // 2, limit)
    end = cut if cut > 0 else limit
    return text[:end].rstrip(), len(text) - end


def pending_block(uid: str, label: str, text: str) -> str:
    """One pending item, quoted line by line after a header naming it as evidence.

    The text is untrusted: terminal controls are shown as escapes (:func:`printable`, as
    ``evidence list`` prints it) and every line is quoted, so it can never pass for memory
    or for another item's header.
    """
    body, left = pending_excerpt(text)
    lines = [f"Pending evidence `{printable(uid)}` ({printable(label)}; not settled memory):"]
    lines += [f"> {printable(line)}".rstrip() for line in body.split("\n")]
    if left:
        lines.append(f"> [{left} more characters: rmtui --headless evidence show {uid}]")
    return "\n".join(lines)


@dataclass
class PendingItem:
    """One piece of pending evidence as retrieval shows it (``score`` None when a model chose it)."""

    uid: str
    session: str
    display_id: int | None
    submitted_at: str | None
    state: str
    text: str
    score: float | None = None

    @property
    def label(self) -> str:
        return pending_label(self.session, self.display_id, self.submitted_at, self.state, self.score)

    def block(self) -> str:
        return pending_block(self.uid, self.label, self.text)

    def to_json(self) -> dict:
        body, left = pending_excerpt(self.text)
        return {"kind": PENDING_KIND, "uid": self.uid, "session": self.session, "display_id": self.display_id,
                "submitted_at": self.submitted_at, "state": self.state,
                "score": None if self.score is None else round(float(self.score), 6),
                "text": body, "truncated": left > 0}


def pending_section(blocks: list[str]) -> str:
    """The pending evidence section, or empty text when there is none."""
    return "\n\n".join([PENDING_TITLE, PENDING_NOTE, *blocks]) if blocks else ""


# -- rendering ----------------------------------------------------------------------------

@dataclass
class Rendered:
    text: str
    units: list[Unit] = field(default_factory=list)


def render(corpus: Corpus, units: list[Unit], *, max_chars: int, notices: list[str] | None = None,
           empty_text: str = NO_STRONG_MATCH) -> Rendered:
    """Source text of ``units`` in source order under their headings; error if too long."""
    ordered = sorted(units, key=lambda u: (u.rank, u.start_line))
    record_at: dict[tuple[str, int], int] = {}  # built only if a heading is shown (it spans every heading)
    blocks: list[str] = []
    path: list[int] = []  # heading records already shown for the current position
    current: list[str] = []
    last_kind = ""
    for u in ordered:
        if u.kind == "recent":
            continue
        anc = u.ancestors
        common = 0
        while common < len(path) and common < len(anc) and path[common] == anc[common]:
            common += 1
        new_headings = anc[common:]
        if new_headings or u.kind != "node" or last_kind != "node":
            if current:
                blocks.append("\n".join(current))
            current = []
        for h in new_headings:
            ref = corpus.headings[h]
            blocks.append(corpus.lines_of(ref.file)[ref.line - 1])
        path = list(anc)
        file_lines = corpus.lines_of(u.file)
        body = [file_lines[n - 1] for n in u.lines if 0 < n <= len(file_lines)]
        if u.notice:
            current.append(f"(changed since last delivered: {u.notice})")
        if u.kind == "source" and u.label.startswith("M#"):
            blocks.append(f"Source: `{u.label}` lines {u.start_line}-{u.end_line}")
        current.extend(body)
        if u.kind != "node":
            blocks.append("\n".join(current))
            current = []
        if u.kind == "heading":
            record_at = record_at or {(h.file, h.line): i for i, h in enumerate(corpus.headings)}
            if (u.file, u.start_line) in record_at:
                path = list(anc) + [record_at[(u.file, u.start_line)]]  # its children need not repeat it
        last_kind = u.kind
    if current:
        blocks.append("\n".join(current))
    if notices:
        blocks.append("\n".join(notices))
    text = "\n\n".join(b.rstrip("\n") for b in blocks if b.strip())
    pending = pending_section([pending_block(u.key[len("recent:"):], u.label, u.text)
                               for u in ordered if u.kind == "recent"])
    if pending:  # after memory, apart from it: never read as memory text
        text = f"{text or empty_text}\n\n{pending}"
    text = text or empty_text
    if len(text) > max_chars:
        raise OutputTooLarge(
            f"retrieve output is {len(text)} characters, over retrieve.max_output_chars = {max_chars}; "
            "ask for fewer results (--top) or raise the limit; nothing was truncated",
            details={"chars": len(text), "max_output_chars": max_chars})
    return Rendered(text, ordered)
