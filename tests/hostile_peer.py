"""A hostile peer: plain Git, no rmtui. It clones the upstream, writes whatever bytes it likes
under ``update_queue/`` or ``update_records/`` and pushes them straight back, as a broken or
malicious machine sharing the upstream could."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rmtui.engine.evidence import records


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def forge(url: str, tmp: Path, files: dict[str, bytes | str | None], message: str = "forged queue records") -> str:
    """Push one commit that writes (bytes/str) or removes (None) ``files``; answers its sha."""
    work = tmp / f"hostile-{time.time_ns()}"
    subprocess.run(["git", "clone", "-q", url, str(work)], check=True, capture_output=True)
    _git(work, "config", "user.name", "mallory")
    _git(work, "config", "user.email", "mallory@local")
    for rel, data in files.items():
        p = work / rel
        if data is None:
            p.unlink(missing_ok=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    _git(work, "add", "-A", "-f")
    _git(work, "commit", "-qm", message, "--allow-empty")
    _git(work, "push", "-q", "origin", "HEAD:main")
    return _git(work, "rev-parse", "HEAD").strip()


def show(url_or_bare: Path, rev: str, rel: str) -> bytes:
    return subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=url_or_bare, check=True, capture_output=True).stdout


def candidate(uid: str, *, session: str = "mallory", display_id: int = 1, message="forged evidence\n",
              submitted_at: str = "2026-07-27T12:00:00+00:00") -> dict:
    return {"schema_version": 1, "uid": uid, "session_id": session, "display_id": display_id, "message": message,
            "submitted_at": submitted_at}


def candidate_file(c: dict) -> tuple[str, bytes]:
    return f"update_queue/candidates/{c['uid']}.json", records.record_bytes(c)


def lease(holder: str, uids: list[str], batch_id: str, *, token: str = "f" * 32, base: str = "0" * 40,
          expires: datetime | str | None = None) -> bytes:
    when = expires if isinstance(expires, str) else (expires or datetime.now(UTC) + timedelta(hours=1)).isoformat()
    return records.record_bytes({"schema_version": 1, "holder": holder, "token": token, "base_commit": base,
                                 "batch_id": batch_id, "candidate_uids": sorted(uids), "expires_at": when})


def raw(data: dict) -> bytes:
    """JSON bytes without the record helpers' checks (for fields of the wrong type)."""
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
