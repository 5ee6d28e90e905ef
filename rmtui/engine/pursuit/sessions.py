"""Whose pending Pursuit edits these are, as the person typed the session.

The journal names its owner as the original does, by the sha256 of the session, which a
person cannot read. rmtui keeps its own map from that hash back to the typed session in
``.runtime/pursuit-editor/sessions.json`` (rmtui's runtime state: the shared journal format
is unchanged), written when a session records an edit. A session rmtui never saw (one of the
original tool's) stays a hash. The file is checked entry by entry when read: an entry whose
hash does not match its session, or whose session breaks the session-id rule, is ignored.
"""

from __future__ import annotations

import json

from rmtui.engine.errors import UsageError
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.pursuit.journal import Session, SessionConflict, check_session, editor_dir, session_hash

SESSIONS_FILE = "sessions.json"
MAX_NAMES = 64  # the newest sessions kept; older ones read as their hash again


def _load(root: MemoryRoot) -> dict[str, str]:
    try:
        doc = json.loads((editor_dir(root) / SESSIONS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    names: dict[str, str] = {}
    for digest, session in (doc.items() if isinstance(doc, dict) else ()):
        try:
            if isinstance(session, str) and check_session(session) and session_hash(session) == digest:
                names[digest] = session
        except UsageError:
            continue
    return names


def remember(root: MemoryRoot, session: str) -> None:
    """Record ``session`` under its hash (call under the editor lock)."""
    names = _load(root)
    digest = session_hash(session)
    names.pop(digest, None)
    names[digest] = session  # newest last
    kept = dict(list(names.items())[-MAX_NAMES:])
    atomic_write_text(editor_dir(root) / SESSIONS_FILE, json.dumps(kept, indent=1) + "\n")


def name_of(root: MemoryRoot, owner: str | None) -> str | None:
    """The typed session whose hash is ``owner``, or None when rmtui never saw it."""
    return _load(root).get(owner) if owner else None


def describe(root: MemoryRoot, owner: str) -> str:
    """How a message names the owner: its typed session, else its hash."""
    name = name_of(root, owner)
    return f"session {name!r}" if name else f"a session rmtui has not seen (sha256 {owner[:12]})"


def check_owner(s: Session, session: str | None) -> None:
    """Refuse (exit 3) a session's change while another session's edits are pending, naming the
    owner as the person typed it and the command that drops its edits."""
    owner = s.record.get("owner")
    if session is not None and owner and owner != session_hash(session) and s.record["cursor"]:
        name = name_of(s.root, owner)
        drop = f"`pursuit discard --session {name}`" if name else "`pursuit discard`"
        raise SessionConflict(f"{describe(s.root, owner)} has pending Pursuit edits; it must checkpoint them, "
                              f"or {drop} drops them", details={"owner": owner, "owner_session": name})
