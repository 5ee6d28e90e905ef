"""Guidance capture (docs/architecture.md, "Guidance capture"): pending agent guidance goes to
``AGENT_GUIDANCE_INBOX.md``, each capture its own supervised commit; a person reviews it later
(docs/memory-doctrine.md, "Guidance inbox"), Update leaves it alone.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

from rmtui.engine.evidence.queue import check_session_id, decode_evidence
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes.program import program_write

INBOX = "AGENT_GUIDANCE_INBOX.md"
HEADER = "# Pending Agent Guidance\n"
COMMIT_MESSAGE = "guidance: capture pending evidence"


#: A captured line that Markdown (or a reader splitting the inbox on ``## GI-``) could take
#: for structure: an ATX heading, or a setext underline that turns the line above into one.
_STRUCTURE_RE = re.compile(r"^( {0,3})(#|=+[ \t]*$|-+[ \t]*$)")
_LINE_END_RE = re.compile(r"\r\n?")


def neutralise(text: str) -> str:
    """The captured body as plain text inside its entry: a line that would open a heading
    (``## GI-…`` forging a second entry with another session, or any other) is escaped
    with a backslash, which Markdown shows as the literal character. Line ends become
    ``\\n`` first: a lone ``\\r`` ends a Markdown line too."""
    lines = _LINE_END_RE.sub("\n", text).split("\n")
    return "\n".join(_STRUCTURE_RE.sub(r"\1\\\2", line) for line in lines)


def _entry(session: str, text: str, now: datetime) -> tuple[str, str]:
    gid = f"GI-{now:%Y%m%d}-{secrets.token_hex(4)}"
    body = (f"## {gid}\n\nSession: {session}\nSubmitted: {now:%Y-%m-%dT%H:%M:%S}Z\n\n"
            f"{neutralise(text.strip())}\n")
    return gid, body


def capture(root: MemoryRoot, session: str, data: bytes) -> dict:
    """Append one guidance entry through the supervisor; retried if another capture races."""
    check_session_id(session)
    text = decode_evidence(data, limit=root.config().get("update.max_evidence_bytes"))
    entry: dict[str, str] = {}

    def append(worktree: Path) -> list[str]:
        gid, body = _entry(session, text, datetime.now(UTC))
        entry["id"] = gid
        path = worktree / INBOX
        current = path.read_text(encoding="utf-8") if path.exists() else HEADER
        if not current.startswith(HEADER.strip()):
            current = HEADER + "\n" + current
        path.write_text(current.rstrip("\n") + "\n\n" + body, encoding="utf-8")
        return [INBOX]

    receipt = program_write(root, "guidance", "guidance", append, COMMIT_MESSAGE, what="guidance capture")
    return {"state": "captured", "id": entry["id"], "landed_commit": receipt.landed_commit,
            "operation_id": receipt.operation_id}
