"""Guidance capture (DESIGN.md section 4): pending agent guidance goes to
``AGENT_GUIDANCE_INBOX.md``, each capture its own supervised commit; Update folds it in later.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timezone
from pathlib import Path

import git

from rmtui.engine.admission import StaleBase
from rmtui.engine.errors import ConflictError
from rmtui.engine.queue import check_identifier, decode_evidence
from rmtui.engine.roots import MemoryRoot
from rmtui.engine.supervisor import IDENTITY, Supervisor

INBOX = "AGENT_GUIDANCE_INBOX.md"
HEADER = "# Pending Agent Guidance\n"
COMMIT_MESSAGE = "guidance: capture pending evidence"
ATTEMPTS = 5


def _entry(session: str, text: str, now: datetime) -> tuple[str, str]:
    gid = f"GI-{now:%Y%m%d}-{secrets.token_hex(4)}"
    body = f"## {gid}\n\nSession: {session}\nSubmitted: {now:%Y-%m-%dT%H:%M:%S}Z\n\n{text.strip()}\n"
    return gid, body


def capture(root: MemoryRoot, session: str, data: bytes) -> dict:
    """Append one guidance entry through the supervisor; retried if another capture races."""
    check_identifier(session, "session id")
    text = decode_evidence(data, limit=root.config().get("update.max_evidence_bytes"))
    last: Exception | None = None
    for _ in range(ATTEMPTS):
        with Supervisor(root) as sup:
            op = sup.begin("guidance", "guidance")
            now = datetime.now(timezone.utc)
            gid, body = _entry(session, text, now)
            path = Path(op.worktree) / INBOX
            current = path.read_text(encoding="utf-8") if path.exists() else HEADER
            if not current.startswith(HEADER.strip()):
                current = HEADER + "\n" + current
            path.write_text(current.rstrip("\n") + "\n\n" + body, encoding="utf-8")
            wt = git.Repo(op.worktree)
            try:
                wt.git.add(INBOX)
                wt.git.commit("-q", "-m", COMMIT_MESSAGE, env=IDENTITY)
            finally:
                wt.close()
            try:
                receipt = sup.finish(op, summary=f"captured {gid}", message=COMMIT_MESSAGE)
            except StaleBase as exc:
                sup.fail(op, str(exc))
                last = exc
                continue
            except Exception as exc:
                sup.fail(op, str(exc))
                raise
            return {"state": "captured", "id": gid, "landed_commit": receipt.landed_commit,
                    "operation_id": receipt.operation_id}
    raise ConflictError(f"guidance capture kept racing with other writers: {last}")
