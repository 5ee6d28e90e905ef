"""The Pursuit editor's journal (docs/architecture.md, "Pursuit editor"): what the pending
edits are, kept under ``.runtime/pursuit-editor/`` so undo and redo survive a restart, and the
editor's view of the head with those edits laid over it.

Journal: ``session.json`` = {"record", "signature"} (HMAC-SHA256 keyed by the 32-byte
``signing-key`` file); blobs in ``blobs/<sha256>`` stored as ``B`` + bytes. Undo and redo
step the cursor by exactly one action, checking the view's digests of the action's files.

Revision: the original's formula (:func:`revision_of`) over the view, so both tools name one
root's state alike. A stale ``expected_revision`` is refused (exit 3) with the current one. The
journal is locked through ``session.lock``, the file the original's editor locks, so the two
editors exclude each other.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from rmtui.engine.errors import ConflictError
from rmtui.engine.evidence.queue import check_session_id
from rmtui.engine.fsutil import atomic_write_bytes, atomic_write_text
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.role_table import CORRECTIONS, MEMORY_GRAPH, PURSUIT, matches
from rmtui.engine.memory.roots import MemoryRoot

EDITOR_DIR = "pursuit-editor"
SEMANTIC = MEMORY_GRAPH + PURSUIT + CORRECTIONS
#: read for validation too, never edited
CONTEXT_FILES = ("shared_views.toml",)


class RevisionConflict(ConflictError):
    kind = "conflict"


class SessionConflict(ConflictError):
    kind = "session_conflict"


class HistoryConflict(ConflictError):
    kind = "history_conflict"


class RecoveryFailed(ConflictError):
    kind = "recovery_failed"


# -- files and blobs -----------------------------------------------------------------------

def editor_dir(root: MemoryRoot) -> Path:
    return root.ensure_runtime() / EDITOR_DIR


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _put_blob(root: MemoryRoot, text: str | None) -> str | None:
    if text is None:
        return None
    data = text.encode("utf-8", "surrogateescape")
    digest = sha(data)
    path = editor_dir(root) / "blobs" / digest
    if not path.exists():
        atomic_write_bytes(path, b"B" + data, mode=0o600)
    return digest


def get_blob(root: MemoryRoot, digest: str | None) -> str | None:
    if digest is None:
        return None
    try:
        raw = (editor_dir(root) / "blobs" / digest).read_bytes()
    except FileNotFoundError:
        raise RecoveryFailed(f"the Pursuit editor's journal lost blob {digest[:12]}; `pursuit discard` drops "
                             "the pending edits") from None
    if not raw.startswith(b"B") or sha(raw[1:]) != digest:
        raise RecoveryFailed(f"blob {digest[:12]} of the Pursuit editor's journal is damaged; `pursuit discard` "
                             "drops the pending edits")
    return raw[1:].decode("utf-8", "surrogateescape")


def signing_key(root: MemoryRoot) -> bytes:
    path = editor_dir(root) / "signing-key"
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
    path = editor_dir(root) / "session.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        record, signature = doc["record"], doc["signature"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        raise RecoveryFailed("the Pursuit editor's journal is unreadable; `pursuit discard` drops it") from None
    expected = hmac.new(signing_key(root), _canonical(record), hashlib.sha256).hexdigest()
    if not isinstance(signature, str) or not hmac.compare_digest(signature, expected):
        raise RecoveryFailed("the Pursuit editor's journal signature does not match; `pursuit discard` drops it")
    if record.get("version") != 1 or record.get("root_key") != root_key(root):
        raise RecoveryFailed("the Pursuit editor's journal belongs to another root or version")
    return record


def save_record(root: MemoryRoot, record: dict) -> None:
    record["updated_at"] = time.time()
    signature = hmac.new(signing_key(root), _canonical(record), hashlib.sha256).hexdigest()
    atomic_write_text(editor_dir(root) / "session.json", json.dumps({"record": record, "signature": signature},
                                                             indent=1, sort_keys=True) + "\n")


def drop_journal(root: MemoryRoot) -> None:
    d = editor_dir(root)
    (d / "session.json").unlink(missing_ok=True)
    shutil.rmtree(d / "blobs", ignore_errors=True)


def session_hash(session: str) -> str:
    """How the journal's ``owner`` and the commit's session trailer name a session
    (docs/formats.md, "Pursuit editor")."""
    return sha(session.encode("utf-8"))


def root_key(root: MemoryRoot) -> str:
    return sha(os.path.normpath(str(root.path.resolve())).encode("utf-8"))


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


_DETAIL_RE = re.compile(r"^(?:MEMORY_[A-Za-z0-9_.-]+|PURSUIT_(?!(?i:RULES)\.md$)[A-Za-z0-9_.-]+)\.md$")
REVISION_FILES = ("MEMORY.md", "PURSUITS.md", "corrections.md")


def revision_of(root: MemoryRoot, head: str, branch: str, view: dict[str, str]) -> str:
    """The original's revision: SHA-256 over the root key, the head and the branch ref (each
    NUL-terminated), then per semantic file, sorted by name (MEMORY.md, PURSUITS.md,
    corrections.md, and every MEMORY_<id>.md / PURSUIT_<id>.md but PURSUIT_RULES.md), its name
    NUL-terminated and the raw SHA-256 of ``file\0`` + its bytes (``missing\0`` when absent)."""
    h = hashlib.sha256()
    for part in (root_key(root), head, branch):
        h.update(part.encode("utf-8", "replace") + b"\0")
    names = set(REVISION_FILES) | {n for n in view if _DETAIL_RE.match(n)}
    for name in sorted(names):
        h.update(name.encode("utf-8", "surrogateescape") + b"\0")
        text = view.get(name)
        content = b"missing\0" if text is None else b"file\0" + text.encode("utf-8", "surrogateescape")
        h.update(hashlib.sha256(content).digest())
    return h.hexdigest()


# -- the session -----------------------------------------------------------------------------

class Session:
    """The journal and the view, loaded under the editor lock."""

    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.head, self.branch, self.head_files = _head_state(root)
        record = _load_record(root)
        if record is not None and record.get("publishing"):
            record = self._settle_publishing(record)
        if record is None or not self._pending(record):
            record = self._fresh(record)
        else:
            self._complete(record)
        self.record = record
        self.conflicts = self._conflicts()
        # the record maps every semantic file (as the original keeps it); what the edits did not
        # change is read from the head as it is now, so a commit meanwhile on another file stays
        self.view = dict(self.head_files)
        base, files = record["base_files"], record["files"]
        for path in set(base) | set(files):
            digest = files.get(path)
            if digest == base.get(path):
                continue
            if digest is None:
                self.view.pop(path, None)
                continue
            head = self.head_files.get(path)
            if head is not None and sha(head.encode("utf-8", "surrogateescape")) == digest:
                self.view[path] = head
            else:
                self.view[path] = get_blob(root, digest) or ""

    def _fresh(self, old: dict | None) -> dict:
        """A new record as the original begins one: files and base_files map every semantic file
        of the head to its digest (blobs are written with the first action)."""
        now = time.time()
        digests = {p: sha(t.encode("utf-8", "surrogateescape")) for p, t in self.head_files.items()
                   if matches(p, SEMANTIC)}
        modes = dict.fromkeys(digests, "100644")
        return {"version": 1, "root_key": root_key(self.root), "owner": (old or {}).get("owner"),
                "base_head": self.head,
                "base_revision": revision_of(self.root, self.head, self.branch, self.head_files),
                "base_files": digests, "files": dict(digests), "base_modes": modes, "modes": dict(modes),
                "revision": None, "batch_id": uuid.uuid4().hex, "batch_actions": 0, "started_at": now,
                "updated_at": now, "actions": [], "cursor": 0, "last_description": None, "publishing": None}

    def _complete(self, record: dict) -> None:
        """A journal an earlier rmtui wrote maps only the paths it changed: add the rest of the
        head's semantic files, unchanged, so the record is whole as the original expects it."""
        touched = {p for a in record["actions"] for side in ("before", "after") for p in a[side]}
        for path, text in self.head_files.items():
            if matches(path, SEMANTIC) and path not in record["base_files"] and path not in touched:
                digest = _put_blob(self.root, text)
                record["base_files"][path] = record["files"][path] = digest
                record["base_modes"][path] = record["modes"][path] = "100644"
        for key in ("files", "modes"):  # null digests of removed files leave the maps
            record[key] = {p: v for p, v in record[key].items() if v is not None}

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
            drop_journal(self.root)
            return None
        record["publishing"] = None
        save_record(self.root, record)
        return record

    def _conflicts(self) -> list[str]:
        """Paths the journal changed that the head changed too since the journal began."""
        rec, out = self.record, []
        for path in set(rec["base_files"]) | set(rec["files"]):
            digest = rec["base_files"].get(path)
            if rec["files"].get(path) == digest:
                continue
            now = self.head_files.get(path)
            if (None if now is None else sha(now.encode("utf-8", "surrogateescape"))) != digest:
                out.append(path)
        return sorted(out)

    @property
    def revision(self) -> str:
        return revision_of(self.root, self.head, self.branch, self.view)

    def check(self, expected: str | None) -> None:
        """Refuse (exit 3) when the head moved under the edits or ``expected`` is stale; whose
        edits these are is checked by :func:`rmtui.engine.pursuit.sessions.check_owner`."""
        if self.conflicts:
            raise RevisionConflict(
                f"memory changed under the pending Pursuit edits ({', '.join(self.conflicts[:5])}); checkpoint is "
                "impossible: `pursuit discard` drops the edits", details={"paths": self.conflicts,
                                                                            "revision": self.revision})
        if expected is not None and expected != self.revision:
            raise RevisionConflict("the Pursuit map changed since that revision; reload and try again",
                                   details={"revision": self.revision, "expected": expected})

    def record_action(self, op: dict, before_view: dict[str, str], after_view: dict[str, str], *,
                      description: str, selected_id: str | None, session: str | None) -> None:
        changed = sorted(p for p in set(before_view) | set(after_view) if before_view.get(p) != after_view.get(p))
        rec = self.record
        for path, digest in rec["base_files"].items():  # the base's blobs, written with the first action
            if not (editor_dir(self.root) / "blobs" / digest).exists():
                _put_blob(self.root, self.head_files.get(path))
        after: dict[str, str | None] = {p: _put_blob(self.root, after_view.get(p)) for p in changed}
        action: dict[str, Any] = {
            "id": uuid.uuid4().hex, "operation": op, "description": description, "selected_id": selected_id,
            "before": {p: _put_blob(self.root, before_view.get(p)) for p in changed}, "after": after,
            "before_modes": {p: rec["modes"].get(p) for p in changed},
            "after_modes": {p: "100644" if p in after_view else None for p in changed},
            "id_remaps": []}  # the original's action keys, no more
        del rec["actions"][rec["cursor"]:]  # a new action drops what could have been redone
        rec["actions"].append(action)
        rec["cursor"] += 1
        rec["batch_actions"] = rec["cursor"]
        rec["owner"] = session_hash(session) if session else rec.get("owner") or session_hash("rmtui")
        rec["last_description"] = description
        self._set_files(after)
        self.view = after_view
        rec["revision"] = self.revision
        save_record(self.root, rec)

    def _set_files(self, digests: dict[str, str | None]) -> None:
        """As the original: a file the edits removed leaves the maps (never a null digest)."""
        for path, digest in digests.items():
            if digest is None:
                self.record["files"].pop(path, None)
                self.record["modes"].pop(path, None)
            else:
                self.record["files"][path] = digest
                self.record["modes"][path] = "100644"

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
            if (None if now is None else sha(now.encode("utf-8", "surrogateescape"))) != digest:
                raise HistoryConflict(f"{path} is not as the action left it; undo/redo would lose changes")
        for path, digest in action[want].items():
            text = get_blob(self.root, digest)
            if text is None:
                self.view.pop(path, None)
            else:
                self.view[path] = text
        self._set_files(action[want])
        rec["cursor"] += direction
        rec["last_description"] = action["description"]
        rec["revision"] = self.revision
        save_record(self.root, rec)
        return action


def editor_lock(root: MemoryRoot):
    """The journal's lock: the original's ``.runtime/pursuit-editor/session.lock`` (flock)."""
    return file_lock(editor_dir(root) / "session.lock")


def check_session(session: str | None) -> str | None:
    """None (the local person) or a session id under the one session-id rule of every front."""
    return None if session is None else check_session_id(session)
