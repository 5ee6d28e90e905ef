"""The Pursuit editor's store (COMPAT §8): operations against an expected revision, a signed
journal under ``.runtime/pursuit-editor/`` for undo/redo across restarts, and a checkpoint
that lands every pending edit as one commit through the supervisor.

The editor's *view* is the active head's semantic files overlaid with the journal's files at
its cursor; nothing is written to the active root until a checkpoint. Every operation is
applied to the view as text surgery on the parsed graph's line ranges, then the whole
resulting tree is validated; an invalid result is refused and nothing is recorded.

Operations (``type``): ``create`` {title, parent_id?, after_id?}, ``rename`` {id, title},
``move`` {id, parent_id?, after_id?}, ``delete`` {id}, ``edit_body`` {id, body},
``set_focus`` {id, focused}. A delete also drops Focus entries and every edge (in Pursuit and
in Memory) to the deleted ids: the Memory exception, the only Memory change the editor makes,
which admission checks (``REFERENCE_REPAIR_ONLY``).

Revision: SHA-256 over the root key (SHA-256 of the normalized root path), the head, the
branch ref and each semantic file of the view (name and content hash, sorted). A stale
``expected_revision`` is refused (exit 3) with the current one.

Journal: ``session.json`` = {"record", "signature"} (HMAC-SHA256 keyed by the 32-byte
``signing-key`` file); blobs in ``blobs/<sha256>`` stored as ``B`` + bytes. Undo and redo
step the cursor by exactly one action, checking the view's digests of the action's files.

Not built (refused with ``invalid_operation``): nesting below ``###`` (the original splits
the ``###`` into an ``F#`` backing file), headings inside ``F#`` backing files, cross-file
moves; ``rename_many`` and id remaps (the ID-Remaps trailer is always ``[]``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmtui.engine.errors import ConflictError, EngineError, OperationFailed, UsageError
from rmtui.engine.fsutil import atomic_write_bytes, atomic_write_text
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.role_table import CORRECTIONS, MEMORY_GRAPH, PURSUIT, matches
from rmtui.engine.memory.roots import MemoryRoot

EDITOR_DIR = "pursuit-editor"
WRITER = "pursuit-editor"
KIND = "pursuit"
SEMANTIC = MEMORY_GRAPH + PURSUIT + CORRECTIONS
#: read for validation too, never edited
CONTEXT_FILES = ("shared_views.toml",)
ROOT_FILE = "PURSUITS.md"
OPS = ("create", "rename", "move", "delete", "edit_body", "set_focus")
MAX_SESSION = 1024

_ANY_ANCHOR_RE = re.compile(r"\{[A-Z]*#")
_HEADING_LINE_RE = re.compile(r"^(#{1,6})(\s+|$)")
_FENCE_RE = re.compile(r"^\s*(```+|~~~+)")
_EDGE_TAIL_RE = re.compile(r"(→|->)(\s*)\[([^\]]*)\](\s*)$")
_FOCUS_ENTRY_RE = re.compile(r"^\s*[-*+]\s+`([^`]+)`")


class InvalidOperation(UsageError):
    kind = "invalid_operation"


class RevisionConflict(ConflictError):
    kind = "conflict"


class SessionConflict(ConflictError):
    kind = "session_conflict"


class HistoryConflict(ConflictError):
    kind = "history_conflict"


class RecoveryFailed(ConflictError):
    kind = "recovery_failed"


# -- files and blobs -----------------------------------------------------------------------

def _dir(root: MemoryRoot) -> Path:
    return root.ensure_runtime() / EDITOR_DIR


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _put_blob(root: MemoryRoot, text: str | None) -> str | None:
    if text is None:
        return None
    data = text.encode("utf-8")
    digest = _sha(data)
    path = _dir(root) / "blobs" / digest
    if not path.exists():
        atomic_write_bytes(path, b"B" + data, mode=0o600)
    return digest


def _get_blob(root: MemoryRoot, digest: str | None) -> str | None:
    if digest is None:
        return None
    try:
        raw = (_dir(root) / "blobs" / digest).read_bytes()
    except FileNotFoundError:
        raise RecoveryFailed(f"the Pursuit editor's journal lost blob {digest[:12]}; `pursuit discard` drops "
                             "the pending edits") from None
    if not raw.startswith(b"B") or _sha(raw[1:]) != digest:
        raise RecoveryFailed(f"blob {digest[:12]} of the Pursuit editor's journal is damaged; `pursuit discard` "
                             "drops the pending edits")
    return raw[1:].decode("utf-8")


def _signing_key(root: MemoryRoot) -> bytes:
    path = _dir(root) / "signing-key"
    try:
        key = path.read_bytes()
        if len(key) == 32:
            return key
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    atomic_write_bytes(path, key, mode=0o600)
    return key


def _canonical(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _load_record(root: MemoryRoot) -> dict | None:
    path = _dir(root) / "session.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        record, signature = doc["record"], doc["signature"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        raise RecoveryFailed("the Pursuit editor's journal is unreadable; `pursuit discard` drops it") from None
    expected = hmac.new(_signing_key(root), _canonical(record), hashlib.sha256).hexdigest()
    if not isinstance(signature, str) or not hmac.compare_digest(signature, expected):
        raise RecoveryFailed("the Pursuit editor's journal signature does not match; `pursuit discard` drops it")
    if record.get("version") != 1 or record.get("root_key") != root_key(root):
        raise RecoveryFailed("the Pursuit editor's journal belongs to another root or version")
    return record


def _save_record(root: MemoryRoot, record: dict) -> None:
    record["updated_at"] = time.time()
    signature = hmac.new(_signing_key(root), _canonical(record), hashlib.sha256).hexdigest()
    atomic_write_text(_dir(root) / "session.json", json.dumps({"record": record, "signature": signature},
                                                             indent=1, sort_keys=True) + "\n")


def _drop_journal(root: MemoryRoot) -> None:
    d = _dir(root)
    (d / "session.json").unlink(missing_ok=True)
    shutil.rmtree(d / "blobs", ignore_errors=True)


#: the checkpoint's trailer block, in the original's order (COMPAT §8); the signature comes last
COMMIT_TRAILERS = {"editor": "RightMemory-Pursuit-Editor", "operation": "RightMemory-Operation",
                   "session": "RightMemory-Pursuit-Session", "action": "RightMemory-Pursuit-Action",
                   "target": "RightMemory-Pursuit-Target", "id_remaps": "RightMemory-Pursuit-ID-Remaps"}
SIGNATURE_TRAILER = "RightMemory-Pursuit-Signature"


def commit_signature(root: MemoryRoot, values: dict[str, str], parent: str, tree: str) -> str:
    """HMAC-SHA256 (the journal's signing key) over the trailer values, the root key, the
    parent and the tree: what authenticates an editor commit for a later undo."""
    payload = {**{k: v for k, v in values.items() if k in COMMIT_TRAILERS}, "root": root_key(root), "parent": parent,
               "tree": tree}
    encoded = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hmac.new(_signing_key(root), encoded, hashlib.sha256).hexdigest()


def trailer_values(message: str) -> tuple[str, dict[str, str]]:
    """(the message before its RightMemory trailer paragraphs, {key: value}); a later
    paragraph wins (the supervisor's operation trailer over an earlier one)."""
    names = {v: k for k, v in COMMIT_TRAILERS.items()} | {SIGNATURE_TRAILER: "signature"}
    paragraphs = message.rstrip().split("\n\n")
    values: dict[str, str] = {}
    while len(paragraphs) > 1 and all(line.startswith("RightMemory-") and ": " in line
                                      for line in paragraphs[-1].splitlines()):
        for line in paragraphs.pop().splitlines():
            name, _, value = line.partition(": ")
            if name in names:
                values.setdefault(names[name], value)
    return "\n\n".join(paragraphs), values


def sign_checkpoint(root: MemoryRoot, message: str, parent: str, tree: str) -> str:
    """The supervisor's signer for Pursuit checkpoints: one trailer block with the operation
    in place, signed over the exact parent and tree of the commit being made."""
    text, values = trailer_values(message)
    values.pop("signature", None)
    values.setdefault("id_remaps", "[]")
    block = "\n".join(f"{name}: {values[key]}" for key, name in COMMIT_TRAILERS.items() if key in values)
    return f"{text}\n\n{block}\n{SIGNATURE_TRAILER}: {commit_signature(root, values, parent, tree)}\n"


def session_hash(session: str) -> str:
    """How the journal's ``owner`` and the commit's session trailer name a session (COMPAT §8)."""
    return _sha(session.encode("utf-8"))


def root_key(root: MemoryRoot) -> str:
    return _sha(os.path.normpath(str(root.path.resolve())).encode("utf-8"))


# -- the head's files ------------------------------------------------------------------------

def _head_state(root: MemoryRoot) -> tuple[str, str, dict[str, str]]:
    """(head, branch ref, {top-level semantic or context file: text}) from Git objects."""
    import git

    repo = git.Repo(root.path)
    try:
        head = repo.git.rev_parse("HEAD")
        try:
            branch = repo.git.symbolic_ref("-q", "HEAD")
        except git.GitCommandError:
            branch = ""
        return head, branch, _files_at(repo, head)
    finally:
        repo.close()


def _files_at(repo: Any, rev: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for blob in repo.commit(rev).tree.blobs:  # top level only: graph files are top-level
        if blob.mode != 0o100644:
            continue
        if matches(blob.path, SEMANTIC) or blob.path in CONTEXT_FILES:
            files[blob.path] = blob.data_stream.read().decode("utf-8", "surrogateescape")
    return files


def revision_of(root: MemoryRoot, head: str, branch: str, view: dict[str, str]) -> str:
    h = hashlib.sha256()
    for part in (root_key(root), head, branch):
        h.update(part.encode())
        h.update(b"\0")
    for name in sorted(p for p in view if matches(p, SEMANTIC)):
        h.update(name.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
        h.update(_sha(view[name].encode("utf-8", "surrogateescape")).encode())
        h.update(b"\0")
    return h.hexdigest()


# -- the session -----------------------------------------------------------------------------

class _Session:
    """The journal and the view, loaded under the editor lock."""

    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.head, self.branch, self.head_files = _head_state(root)
        record = _load_record(root)
        if record is not None and record.get("publishing"):
            record = self._settle_publishing(record)
        if record is None or not self._pending(record):
            record = self._fresh(record)
        self.record = record
        self.conflicts = self._conflicts()
        self.view = dict(self.head_files)
        for path, digest in record["files"].items():
            text = _get_blob(root, digest)
            if text is None:
                self.view.pop(path, None)
            else:
                self.view[path] = text

    def _fresh(self, old: dict | None) -> dict:
        now = time.time()
        return {"version": 1, "root_key": root_key(self.root), "owner": (old or {}).get("owner"),
                "base_head": self.head, "base_revision": revision_of(self.root, self.head, self.branch, self.head_files),
                "base_files": {}, "files": {}, "base_modes": {}, "modes": {},
                "revision": None, "batch_id": uuid.uuid4().hex, "batch_actions": 0, "started_at": now,
                "updated_at": now, "actions": [], "cursor": 0, "last_description": None, "publishing": None}

    @staticmethod
    def _pending(record: dict) -> bool:
        return bool(record.get("actions"))

    def _settle_publishing(self, record: dict) -> dict | None:
        """A checkpoint was under way when the last process stopped: settle it by its receipt."""
        from rmtui.engine.writes.operations import OperationStore

        op_id = record["publishing"]
        with OperationStore(self.root) as store:
            op = store.find(op_id)
        if op is not None and not op.final:
            raise ConflictError(f"the Pursuit editor's checkpoint {op_id} is still in progress; "
                                "`rmtui --headless recover` finishes it")
        if op is not None and op.phase == "committed":
            _drop_journal(self.root)
            return None
        record["publishing"] = None
        _save_record(self.root, record)
        return record

    def _conflicts(self) -> list[str]:
        """Paths the journal changed that the head changed too since the journal began."""
        out = []
        for path, digest in self.record["base_files"].items():
            now = self.head_files.get(path)
            if (None if now is None else _sha(now.encode("utf-8", "surrogateescape"))) != digest:
                out.append(path)
        return sorted(out)

    @property
    def revision(self) -> str:
        return revision_of(self.root, self.head, self.branch, self.view)

    def check(self, expected: str | None, session: str | None) -> None:
        if self.conflicts:
            raise RevisionConflict(
                f"memory changed under the pending Pursuit edits ({', '.join(self.conflicts[:5])}); checkpoint is "
                "impossible: `pursuit discard` drops the edits", details={"paths": self.conflicts,
                                                                            "revision": self.revision})
        if expected is not None and expected != self.revision:
            raise RevisionConflict("the Pursuit map changed since that revision; reload and try again",
                                   details={"revision": self.revision, "expected": expected})
        owner = self.record.get("owner")
        if session is not None and owner and owner != session_hash(session) and self.record["cursor"]:
            raise SessionConflict(f"another session (sha256 {owner[:12]}) has pending Pursuit edits; it must "
                                  "checkpoint or discard them first", details={"owner": owner})

    def record_action(self, op: dict, before_view: dict[str, str], after_view: dict[str, str], *,
                      description: str, selected_id: str | None, session: str | None) -> None:
        changed = sorted(p for p in set(before_view) | set(after_view) if before_view.get(p) != after_view.get(p))
        rec = self.record
        for path in changed:  # what the head held when the journal first touched the path
            if path not in rec["base_files"]:
                text = self.head_files.get(path)
                rec["base_files"][path] = None if text is None else _sha(text.encode("utf-8", "surrogateescape"))
        after: dict[str, str | None] = {p: _put_blob(self.root, after_view.get(p)) for p in changed}
        action: dict[str, Any] = {
            "id": uuid.uuid4().hex, "operation": op, "description": description, "selected_id": selected_id,
            "before": {p: _put_blob(self.root, before_view.get(p)) for p in changed}, "after": after,
            "before_modes": {p: "100644" for p in changed if p in before_view},
            "after_modes": {p: "100644" for p in changed if p in after_view},
            "id_remaps": [], "at": time.time()}
        del rec["actions"][rec["cursor"]:]  # a new action drops what could have been redone
        rec["actions"].append(action)
        rec["cursor"] += 1
        rec["batch_actions"] = rec["cursor"]
        rec["owner"] = session_hash(session) if session else rec.get("owner") or session_hash("rmtui")
        rec["last_description"] = description
        self._set_files(after)
        self.view = after_view
        rec["revision"] = self.revision
        _save_record(self.root, rec)

    def _set_files(self, digests: dict[str, str | None]) -> None:
        for path, digest in digests.items():
            self.record["files"][path] = digest
            self.record["modes"][path] = "100644" if digest is not None else None

    def step(self, direction: int) -> dict:
        """Undo (-1) or redo (+1) one action, checking the view's digests first."""
        rec = self.record
        if direction < 0 and rec["cursor"] == 0:
            raise HistoryConflict("nothing to undo")
        if direction > 0 and rec["cursor"] >= len(rec["actions"]):
            raise HistoryConflict("nothing to redo")
        action = rec["actions"][rec["cursor"] - 1 if direction < 0 else rec["cursor"]]
        have, want = ("after", "before") if direction < 0 else ("before", "after")
        for path, digest in action[have].items():
            now = self.view.get(path)
            if (None if now is None else _sha(now.encode("utf-8", "surrogateescape"))) != digest:
                raise HistoryConflict(f"{path} is not as the action left it; undo/redo would lose changes")
        for path, digest in action[want].items():
            text = _get_blob(self.root, digest)
            if text is None:
                self.view.pop(path, None)
            else:
                self.view[path] = text
        self._set_files(action[want])
        rec["cursor"] += direction
        rec["last_description"] = action["description"]
        rec["revision"] = self.revision
        _save_record(self.root, rec)
        return action


def _lock(root: MemoryRoot):
    return file_lock(_dir(root) / "editor.lock")


def _check_session(session: str | None) -> str | None:
    if session is None:
        return None
    if not session or len(session) > MAX_SESSION or any(c in session for c in "\x00\r\n"):
        raise UsageError("a session id is 1 to 1024 characters on one line")
    return session


# -- reading the map -------------------------------------------------------------------------

def _graph_of(root: MemoryRoot, view: dict[str, str]):
    from rmtui.engine.memory.graph import load_graph

    with _scratch(root, view) as folder:
        return load_graph(folder)


class _scratch:
    """The view written out to a private folder (the parser and validator read folders)."""

    def __init__(self, root: MemoryRoot, view: dict[str, str]) -> None:
        self.root, self.view = root, view

    def __enter__(self) -> Path:
        self.folder = Path(tempfile.mkdtemp(prefix="view-", dir=_dir(self.root)))
        for name, text in self.view.items():
            (self.folder / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        return self.folder

    def __exit__(self, *exc: Any) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _pursuit_parent(item: Any) -> Any:
    cur = item.parent
    while cur is not None and not (cur.kind == "heading" and cur.id):
        cur = cur.parent
    return cur


def _body(graph: Any, item: Any) -> str:
    """What ``edit_body`` replaces: the lines under the heading up to its first child heading
    (an ``F#`` heading's whole backing file), so a front can show and prefill it."""
    if item.heading_kind == "F#" and item.backing_file:
        backing = graph.files.get(item.backing_file)
        return "\n".join(backing.lines).strip("\n") if backing is not None else ""
    first_child = min((c.line for c in item.children if c.kind == "heading" and c.file == item.file),
                      default=item.end_line + 1)
    return "\n".join(graph.files[item.file].lines[item.line:first_child - 1]).strip("\n")


def _tree(graph: Any) -> list[dict]:
    referrers: dict[str, list[str]] = {}  # id -> Memory items with an edge to it
    for other in graph.ordered:
        if other.domain == "memory":
            for e in other.edges:
                referrers.setdefault(e.target, []).append(other.id or f"{other.file}:{other.line}")
    out = []
    for item in graph.ordered:
        if item.domain != "pursuit" or item.kind != "heading" or not item.id:
            continue
        parent = _pursuit_parent(item)
        out.append({"id": item.id, "title": item.title, "level": item.level, "kind": item.heading_kind or "#",
                    "file": item.file, "line": item.line, "parent_id": parent.id if parent else None,
                    "children": [c.id for c in item.children if c.kind == "heading" and c.id],
                    "nodes": [c.id for c in item.children if c.kind == "node"],
                    "edges": [f"{e.type}:{e.target}" for e in item.edges],
                    "backing_file": item.backing_file, "focused": item.id in graph.focus,
                    "body": _body(graph, item), "memory_refs": referrers.get(item.id, []),
                    # what a delete would drop in Memory: edges to the item and everything under it
                    "delete_drops": [f"{r} → {i.id}" for i in [item, *_descendants(item)] if i.id
                                     for r in referrers.get(i.id, [])]})
    return out


def _state(s: _Session, graph: Any = None) -> dict:
    graph = graph if graph is not None else _graph_of(s.root, s.view)
    rec = s.record
    pending = sorted(p for p in set(s.view) | set(s.head_files) if s.view.get(p) != s.head_files.get(p))
    return {"revision": s.revision, "head": s.head, "base_head": rec["base_head"],
            "cursor": rec["cursor"], "actions": [a["description"] for a in rec["actions"]],
            "pending_edits": rec["cursor"], "changed_files": pending,
            "can_undo": rec["cursor"] > 0, "can_redo": rec["cursor"] < len(rec["actions"]),
            "owner": rec.get("owner"), "conflicts": s.conflicts, "focus": list(graph.focus),
            "pursuits": _tree(graph), "last_description": rec.get("last_description")}


def show(root: MemoryRoot) -> dict:
    """The editor's view: revision, the Pursuit tree with Focus order, pending edits."""
    with _lock(root):
        return _state(_Session(root))


# -- operations ---------------------------------------------------------------------------

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


def _descendants(item: Any) -> list[Any]:
    out = []
    for c in item.children:
        out.append(c)
        out.extend(_descendants(c))
    return out


def _placement(graph: Any, parent_id: Any, after_id: Any, moving: Any = None) -> tuple[str, int, int]:
    """Where a heading goes: (file, level, index of the line to insert after, 0-based count)."""
    parent = None
    if parent_id not in (None, ""):
        parent = _heading(graph, parent_id, "parent_id")
        if moving is not None and (parent is moving or parent in _descendants(moving)):
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
                and i.file == name and i.level == level and _pursuit_parent(i) is parent and i is not moving]
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
    heads = [h for h in [item, *_descendants(item)] if h.kind == "heading" and h.file == item.file]
    for h in heads:
        new_level = h.level + delta
        if new_level > 3 and not (h.level == 4 and delta == 0):
            raise InvalidOperation(f"moving `{item.id}` there would nest `{h.id or h.title}` below ###")
        i = h.line - start
        block[i] = "#" * new_level + block[i][h.level:]
    removed = {**view, item.file: _join(_cut(lines, start, end))}
    graph2 = _graph_of(root, removed)
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
    doomed = [item, *_descendants(item)]
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
    parent = _pursuit_parent(item)
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


def _apply_op(root: MemoryRoot, view: dict[str, str], op: dict) -> tuple[dict[str, str], str, str | None]:
    if not isinstance(op, dict) or op.get("type") not in OPS:
        raise InvalidOperation(f"an operation is an object whose type is one of {', '.join(OPS)}")
    graph = _graph_of(root, view)
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
        raise InvalidOperation(f"{kind} may not add or remove items "
                               f"(added {sorted(ids_after - ids_before)[:5]}, removed {sorted(ids_before - ids_after)[:5]})")
    if kind == "edit_body" and len(before.headings()) != len(after.headings()):
        raise InvalidOperation("edit_body may not add or remove headings")


def apply(root: MemoryRoot, op: dict, *, expected_revision: str | None, session: str | None = None) -> dict:
    """Apply one operation against ``expected_revision`` (None: whatever is current)."""
    session = _check_session(session)
    with _lock(root):
        s = _Session(root)
        s.check(expected_revision, session)
        before = dict(s.view)
        new, description, selected = _apply_op(root, before, op)
        for name in set(before) | set(new):
            if before.get(name) != new.get(name) and not (matches(name, PURSUIT) or (
                    op.get("type") == "delete" and matches(name, MEMORY_GRAPH))):
                raise OperationFailed(f"the Pursuit editor may not change {name}")
        changed = new != before
        if changed:
            s.record_action(op, before, new, description=description, selected_id=selected, session=session)
        out = _state(s)
        out.update(changed=changed, selected_id=selected, description=description or None)
        return out


def undo(root: MemoryRoot, *, expected_revision: str | None = None, session: str | None = None) -> dict:
    return _step(root, -1, expected_revision, session)


def redo(root: MemoryRoot, *, expected_revision: str | None = None, session: str | None = None) -> dict:
    return _step(root, +1, expected_revision, session)


def _step(root: MemoryRoot, direction: int, expected: str | None, session: str | None) -> dict:
    session = _check_session(session)
    with _lock(root):
        s = _Session(root)
        s.check(expected, session)
        action = s.step(direction)
        out = _state(s)
        out.update(changed=True, selected_id=action.get("selected_id"),
                   description=("undo: " if direction < 0 else "redo: ") + action["description"])
        return out


def discard(root: MemoryRoot) -> dict:
    """Drop every pending edit (and a journal that cannot be trusted)."""
    with _lock(root):
        _drop_journal(root)
        return _state(_Session(root))


def checkpoint(root: MemoryRoot, *, expected_revision: str | None = None, session: str | None = None) -> dict:
    """Land the pending edits as one commit through the supervisor; the journal then starts over."""
    import subprocess

    from rmtui.engine.writes.supervisor import COMMIT_SIGNERS, Supervisor

    COMMIT_SIGNERS[KIND] = sign_checkpoint
    session = _check_session(session)
    with _lock(root):
        s = _Session(root)
        s.check(expected_revision, session)
        rec = s.record
        changed = {p: t for p, t in s.view.items() if s.head_files.get(p) != t}
        removed = [p for p in s.head_files if p not in s.view]
        done = rec["actions"][: rec["cursor"]]
        if not changed and not removed:
            _drop_journal(root)
            out = _state(_Session(root))
            out.update(state="no_change", landed_commit=None)
            return out
        subject = done[0]["description"] if len(done) == 1 else "pursuit: edit map"
        owner = rec.get("owner") or session_hash(session or "rmtui")
        body = "\n".join(f"- {a['description']}" for a in done) if len(done) > 1 else ""
        trailers = ("RightMemory-Pursuit-Editor: 1\n"
                    f"RightMemory-Pursuit-Session: {owner}\n"
                    "RightMemory-Pursuit-Action: batch\nRightMemory-Pursuit-Target: -\n"
                    "RightMemory-Pursuit-ID-Remaps: []")  # the supervisor adds the operation and signs
        message = subject + ("\n\n" + body if body else "") + "\n\n" + trailers
        with Supervisor(root) as sup:
            op = sup.begin(KIND, WRITER)
            rec["publishing"] = op.id
            _save_record(root, rec)
            try:
                wt = Path(op.worktree)
                for path, text in changed.items():
                    (wt / path).write_text(text, encoding="utf-8", errors="surrogateescape")
                for path in removed:
                    (wt / path).unlink(missing_ok=True)
                env = {**os.environ, "GIT_AUTHOR_NAME": "rmtui", "GIT_AUTHOR_EMAIL": "rmtui@localhost",
                       "GIT_COMMITTER_NAME": "rmtui", "GIT_COMMITTER_EMAIL": "rmtui@localhost"}
                subprocess.run(["git", "add", "-A", "--", *changed, *removed], cwd=wt, check=True,
                               capture_output=True, env=env)
                subprocess.run(["git", "commit", "-q", "--no-verify", "-m", subject], cwd=wt, check=True,
                               capture_output=True, env=env)
                receipt = sup.finish(op, summary=f"{len(done)} Pursuit edit(s)", message=message)
            except (EngineError, subprocess.CalledProcessError) as exc:
                err = exc if isinstance(exc, EngineError) else OperationFailed(f"git failed: {exc.stderr!r}")
                sup.fail(sup.store.get(op.id), f"{err.kind}: {err.message}")
                rec["publishing"] = None
                _save_record(root, rec)
                raise err from None
        _drop_journal(root)
        out = _state(_Session(root))
        out.update(state=receipt.phase, landed_commit=receipt.landed_commit, operation_id=op.id,
                   changed_paths=receipt.changed_paths, message=subject)
        return out
