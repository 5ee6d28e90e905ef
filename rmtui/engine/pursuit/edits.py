"""The Pursuit editor's operations, as text surgery on the parsed graph's line ranges of the
view: placement of a heading, cutting a block out, inserting one; then the whole resulting tree
is validated, and an invalid result is refused before anything is recorded.

Operations (``type``): ``create`` {title, parent_id?, after_id?}, ``rename`` {id, title},
``move`` {id, parent_id?, after_id?}, ``delete`` {id}, ``edit_body`` {id, body},
``set_focus`` {id, focused}. A delete also drops Focus entries and every edge (in Pursuit and
in Memory) to the deleted ids: the Memory exception, the only Memory change the editor makes,
which admission checks (``REFERENCE_REPAIR_ONLY``).

Not built (refused with ``invalid_operation``): nesting below ``###`` (the original splits
the ``###`` into an ``F#`` backing file), headings inside ``F#`` backing files, cross-file
moves; ``rename_many`` and id remaps (the ID-Remaps trailer is always ``[]``).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmtui.engine.errors import UsageError
from rmtui.engine.evidence.queue import check_text
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.pursuit.journal import editor_dir

ROOT_FILE = "PURSUITS.md"
OPS = ("create", "rename", "move", "delete", "edit_body", "set_focus")

_ANY_ANCHOR_RE = re.compile(r"\{[A-Z]*#")
_HEADING_LINE_RE = re.compile(r"^(#{1,6})(\s+|$)")
_EDGE_TAIL_RE = re.compile(r"(→|->)(\s*)\[([^\]]*)\](\s*)$")
_FOCUS_ENTRY_RE = re.compile(r"^\s*[-*+]\s+`([^`]+)`")


class InvalidOperation(UsageError):
    kind = "invalid_operation"


def parse_op(text: str) -> dict:
    """An operation given as JSON text, refused by name when it is not one: not JSON, nested
    deeper than the parser can follow, or not a flat object (:func:`check_op`)."""
    check_text(text, "--op")
    try:
        op = json.loads(text)
    except RecursionError:
        raise InvalidOperation("an operation is one flat JSON object; this one is nested too deep to read") from None
    except ValueError as exc:
        raise InvalidOperation(f"--op is not JSON: {exc}") from None
    return check_op(op)


def check_op(op: Any) -> dict:
    """What every front's operation must be before the editor reads it: an object of text keys
    whose values are text, a boolean, a number or null (no nesting), every text valid
    Unicode (a JSON ``\\ud800`` escape is not)."""
    if not isinstance(op, dict):
        raise InvalidOperation(f"an operation is an object whose type is one of {', '.join(OPS)}")
    for key, value in op.items():
        check_text(key, "an operation's field name")
        if value is not None and not isinstance(value, (str, bool, int, float)):
            raise InvalidOperation(f"operation field {key[:40]!r} must be text, a boolean, a number or null, "
                                   "not a nested value")
        if isinstance(value, str):
            check_text(value, f"operation field {key[:40]!r}")
    return op


def graph_of(root: MemoryRoot, view: dict[str, str]):
    from rmtui.engine.memory.graph import load_graph

    with _scratch(root, view) as folder:
        return load_graph(folder)


class _scratch:
    """The view written out to a private folder (the parser and validator read folders)."""

    def __init__(self, root: MemoryRoot, view: dict[str, str]) -> None:
        self.root, self.view = root, view

    def __enter__(self) -> Path:
        self.folder = Path(tempfile.mkdtemp(prefix="view-", dir=editor_dir(self.root)))
        try:
            for name, text in self.view.items():
                (self.folder / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        except BaseException:  # `with` calls no __exit__ when __enter__ fails: nothing is left behind
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        return self.folder

    def __exit__(self, *exc: Any) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def pursuit_parent(item: Any) -> Any:
    cur = item.parent
    while cur is not None and not (cur.kind == "heading" and cur.id):
        cur = cur.parent
    return cur


def slug(title: str) -> str:
    text = "".join(ch if (ch.isascii() and ch.isalnum()) else "-" for ch in title.lower())
    text = re.sub(r"-+", "-", text).strip("-")[:64].strip("-")
    if not text or text == "rules":
        return f"p-{secrets.token_hex(6)}"
    return text


def _new_id(title: str, graph: Any, view: dict[str, str]) -> str:
    base = slug(title)
    taken = {i.casefold() for i in graph.items} | {p.casefold() for p in view}

    def free(ident: str) -> bool:
        return ident.casefold() not in taken and f"pursuit_{ident}.md".casefold() not in taken

    if free(base):
        return base
    n = 2
    while not free(f"{base[: 64 - len(str(n)) - 1]}-{n}"):
        n += 1
    return f"{base[: 64 - len(str(n)) - 1]}-{n}"


def _check_title(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidOperation("a title is a non-empty string")
    title = value.strip()
    if "\n" in title or "\r" in title or "\x00" in title:
        raise InvalidOperation("a title is one line")
    if _ANY_ANCHOR_RE.search(title) or re.search(r"(→|->)\s*\[", title) or title.startswith("#"):
        raise InvalidOperation("a title carries no anchor, edge list or heading marks")
    return title


def _heading(graph: Any, ident: Any, what: str = "id") -> Any:
    if not isinstance(ident, str) or not ident:
        raise InvalidOperation(f"{what} must name a Pursuit")
    item = graph.items.get(ident)
    if item is None or item.domain != "pursuit" or item.kind != "heading":
        raise InvalidOperation(f"no Pursuit `{ident}`")
    return item


def _lines(view: dict[str, str], name: str) -> list[str]:
    text = view[name]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _join(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n"


def descendants(item: Any) -> list[Any]:
    out = []
    for c in item.children:
        out.append(c)
        out.extend(descendants(c))
    return out


def _placement(graph: Any, parent_id: Any, after_id: Any, moving: Any = None) -> tuple[str, int, int]:
    """Where a heading goes: (file, level, index of the line to insert after, 0-based count)."""
    parent = None
    if parent_id not in (None, ""):
        parent = _heading(graph, parent_id, "parent_id")
        if moving is not None and (parent is moving or parent in descendants(moving)):
            raise InvalidOperation("a Pursuit cannot move under itself")
        if parent.heading_kind not in (None, "#"):
            raise InvalidOperation(f"`{parent.id}` keeps its children in {parent.backing_file}; this editor does not "
                                   "place headings in backing files")
        if parent.level >= 3:
            raise InvalidOperation(f"`{parent.id}` is a ### heading; nesting below ### needs an F# backing file, "
                                   "which this editor does not create")
        level, name = parent.level + 1, parent.file
    else:
        level, name = 2, ROOT_FILE
    siblings = [i for i in graph.ordered if i.kind == "heading" and i.id and i.domain == "pursuit"
                and i.file == name and i.level == level and pursuit_parent(i) is parent and i is not moving]
    if after_id not in (None, ""):
        after = _heading(graph, after_id, "after_id")
        if after not in siblings:
            raise InvalidOperation(f"`{after.id}` is not a sibling at the new place")
        return name, level, after.end_line
    if siblings:
        return name, level, siblings[-1].end_line
    if parent is not None:
        return name, level, parent.end_line
    return name, level, -1  # the end of PURSUITS.md


def _cut(lines: list[str], start: int, end: int) -> list[str]:
    """Remove lines ``start..end`` (1-based, inclusive) and the blank line the cut doubles."""
    out = lines[:start - 1] + lines[end:]
    i = start - 1  # the first line after the cut
    before_blank = i == 0 or not out[i - 1].strip()
    if i < len(out) and not out[i].strip() and before_blank:
        del out[i]
    elif i >= len(out) and i > 0 and not out[i - 1].strip():
        del out[i - 1]
    return out


def _insert(lines: list[str], after: int, block: list[str]) -> list[str]:
    """Insert ``block`` after line ``after`` (1-based; -1 = end), blank-separated."""
    at = len(lines) if after < 0 else after
    head, tail = lines[:at], lines[at:]
    while head and not head[-1].strip():
        head.pop()
    while tail and not tail[0].strip():
        tail.pop(0)
    out = head + ([""] if head else []) + block
    if tail:
        out += [""] + tail
    return out


def _op_create(graph: Any, view: dict[str, str], op: dict) -> tuple[dict[str, str], str, str]:
    title = _check_title(op.get("title"))
    name, level, after = _placement(graph, op.get("parent_id"), op.get("after_id"))
    ident = _new_id(title, graph, view)
    new = dict(view)
    new[name] = _join(_insert(_lines(view, name), after, ["#" * level + f" {title} {{#{ident}}}"]))
    return new, f"pursuit: create {ident}", ident


def _op_rename(graph: Any, view: dict[str, str], op: dict) -> tuple[dict[str, str], str, str]:
    item = _heading(graph, op.get("id"))
    title = _check_title(op.get("title"))
    lines = _lines(view, item.file)
    line = lines[item.line - 1]
    m = re.search(r"\{[A-Z]*#" + re.escape(item.id) + r"\}", line)
    if m is None:
        raise InvalidOperation(f"the heading of `{item.id}` has no anchor this editor can keep")
    lines[item.line - 1] = "#" * item.level + f" {title} " + line[m.start():]
    return {**view, item.file: _join(lines)}, f"pursuit: rename {item.id}", item.id


def _block(graph: Any, item: Any) -> tuple[int, int]:
    """1-based inclusive line range of a heading with its same-file children."""
    return item.line, item.end_line


def _op_move(graph: Any, view: dict[str, str], op: dict, root: MemoryRoot) -> tuple[dict[str, str], str, str]:
    item = _heading(graph, op.get("id"))
    name, level, _after = _placement(graph, op.get("parent_id"), op.get("after_id"), moving=item)
    if name != item.file:
        raise InvalidOperation("this editor moves a Pursuit within its own file only")
    start, end = _block(graph, item)
    lines = _lines(view, item.file)
    block = lines[start - 1:end]
    delta = level - item.level
    heads = [h for h in [item, *descendants(item)] if h.kind == "heading" and h.file == item.file]
    for h in heads:
        new_level = h.level + delta
        if new_level > 3 and not (h.level == 4 and delta == 0):
            raise InvalidOperation(f"moving `{item.id}` there would nest `{h.id or h.title}` below ###")
        i = h.line - start
        block[i] = "#" * new_level + block[i][h.level:]
    removed = {**view, item.file: _join(_cut(lines, start, end))}
    graph2 = graph_of(root, removed)
    name2, _level2, after2 = _placement(graph2, op.get("parent_id"), op.get("after_id"))
    moved = {**removed, name2: _join(_insert(_lines(removed, name2), after2, block))}
    return moved, f"pursuit: move {item.id}", item.id


def _drop_edges(line: str, gone: set[str]) -> str:
    m = _EDGE_TAIL_RE.search(line)
    if not m:
        return line
    kept = [e.strip() for e in m.group(3).split(",") if e.strip()
            and e.strip().split(":", 1)[-1].strip() not in gone]
    return line[: m.start()] + f"{m.group(1)}{m.group(2)}[{', '.join(kept)}]{m.group(4)}"


def _op_delete(graph: Any, view: dict[str, str], op: dict) -> tuple[dict[str, str], str, str | None]:
    item = _heading(graph, op.get("id"))
    doomed = [item, *descendants(item)]
    gone = {i.id for i in doomed if i.id}
    new = dict(view)
    edits: dict[str, dict[int, str]] = {}  # file -> {line: the line without edges to deleted ids}
    for other in graph.ordered:
        if other in doomed or not any(e.target in gone for e in other.edges):
            continue
        lines = _lines(view, other.file)
        edits.setdefault(other.file, {})[other.line] = _drop_edges(lines[other.line - 1], gone)
    cuts: dict[str, list[tuple[int, int]]] = {item.file: [_block(graph, item)]}
    if graph.focus_line is not None and gone & set(graph.focus):
        lines = _lines(view, ROOT_FILE)
        n = graph.focus_line + 1
        while n <= len(lines):
            hm = _HEADING_LINE_RE.match(lines[n - 1])
            if hm and len(hm.group(1)) <= 2:
                break
            fm = _FOCUS_ENTRY_RE.match(lines[n - 1])
            if fm and fm.group(1) in gone:
                cuts.setdefault(ROOT_FILE, []).append((n, n))
            n += 1
    for name in set(edits) | set(cuts):
        lines = _lines(view, name)
        for n, text in edits.get(name, {}).items():  # rewrites keep the line count
            lines[n - 1] = text
        for start, end in sorted(cuts.get(name, []), reverse=True):
            lines = _cut(lines, start, end)
        new[name] = _join(lines)
    for h in doomed:
        if h.kind == "heading" and h.backing_file and h.backing_file in new:
            new.pop(h.backing_file)
    parent = pursuit_parent(item)
    return new, f"pursuit: delete {item.id}", parent.id if parent else None


def _op_edit_body(graph: Any, view: dict[str, str], op: dict) -> tuple[dict[str, str], str, str]:
    item = _heading(graph, op.get("id"))
    body = op.get("body")
    if not isinstance(body, str) or "\x00" in body:
        raise InvalidOperation("body is a string")
    body_lines = body.strip("\n").split("\n") if body.strip() else []
    if item.heading_kind == "F#" and item.backing_file:
        return {**view, item.backing_file: _join(list(body_lines))}, f"pursuit: edit body of {item.id}", item.id
    lines = _lines(view, item.file)
    first_child = min((c.line for c in item.children if c.kind == "heading" and c.file == item.file),
                      default=item.end_line + 1)
    tail = lines[first_child - 1:]
    while tail and not tail[0].strip():
        tail.pop(0)
    new_lines = lines[:item.line] + ([""] + body_lines if body_lines else []) + ([""] + tail if tail else [])
    return {**view, item.file: _join(new_lines)}, f"pursuit: edit body of {item.id}", item.id


def _op_set_focus(graph: Any, view: dict[str, str], op: dict) -> tuple[dict[str, str], str, str]:
    item = _heading(graph, op.get("id"))
    focused = op.get("focused")
    if not isinstance(focused, bool):
        raise InvalidOperation("focused is true or false")
    lines = _lines(view, ROOT_FILE)
    if focused == (item.id in graph.focus):
        return view, "", item.id  # already so: nothing to record
    if graph.focus_line is None:
        top = next((i for i, line in enumerate(lines) if _HEADING_LINE_RE.match(line)), -1)
        lines = _insert(lines, top + 1 if top >= 0 else 0, ["## Focus", "", f"- `{item.id}`"])
    else:
        n = graph.focus_line + 1
        last_entry = graph.focus_line
        entry_line = None
        while n <= len(lines):
            hm = _HEADING_LINE_RE.match(lines[n - 1])
            if hm and len(hm.group(1)) <= 2:
                break
            fm = _FOCUS_ENTRY_RE.match(lines[n - 1])
            if fm:
                last_entry = n
                if fm.group(1) == item.id:
                    entry_line = n
            n += 1
        if focused:
            if last_entry == graph.focus_line:
                lines = _insert(lines, graph.focus_line, [f"- `{item.id}`"])
            else:
                lines = lines[:last_entry] + [f"- `{item.id}`"] + lines[last_entry:]
        elif entry_line is not None:
            del lines[entry_line - 1]
    verb = "focus" if focused else "unfocus"
    return {**view, ROOT_FILE: _join(lines)}, f"pursuit: {verb} {item.id}", item.id


def apply_op(root: MemoryRoot, view: dict[str, str], op: dict) -> tuple[dict[str, str], str, str | None]:
    check_op(op)
    if op.get("type") not in OPS:
        raise InvalidOperation(f"an operation is an object whose type is one of {', '.join(OPS)}")
    graph = graph_of(root, view)
    kind = op["type"]
    handlers: dict[str, Callable[..., tuple[dict[str, str], str, str | None]]] = {
        "create": _op_create, "rename": _op_rename, "delete": _op_delete, "edit_body": _op_edit_body,
        "set_focus": _op_set_focus}
    selected: str | None
    if kind == "move":
        new, description, selected = _op_move(graph, view, op, root)
    else:
        new, description, selected = handlers[kind](graph, view, op)
    if new == view:
        return new, description, selected
    _validate(root, graph, new, op)
    return new, description, selected


def _validate(root: MemoryRoot, before: Any, view: dict[str, str], op: dict) -> None:
    from rmtui.engine.memory.validation import validate_root

    with _scratch(root, view) as folder:
        report = validate_root(folder, enforce_correction_capacity=False)
    if not report.ok:
        first = report.errors[0]
        raise InvalidOperation(f"the result would be invalid: {first}", details={"issues": [
            i.to_json() for i in report.errors[:20]]})
    after = report.graph
    kind = op["type"]
    ids_before, ids_after = set(before.items), set(after.items)
    if kind in ("rename", "edit_body", "set_focus", "move") and ids_before != ids_after:
        added, removed = sorted(ids_after - ids_before)[:5], sorted(ids_before - ids_after)[:5]
        raise InvalidOperation(f"{kind} may not add or remove items (added {added}, removed {removed})")
    if kind == "edit_body" and len(before.headings()) != len(after.headings()):
        raise InvalidOperation("edit_body may not add or remove headings")
