"""A cycle's last outcome as one line of text, shared by ``status`` (``core``) and the cycle
commands (``cycles``) without either importing the other."""

from __future__ import annotations

import time


def _when(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) else str(ts)


def outcome_line(out: dict | None) -> str:
    """A cycle's last outcome in one line (``prune status``, ``insight status``, ``status``)."""
    if not out:
        return "last run: none"
    line = f"last run: {out.get('state')} at {_when(out.get('at'))}"
    if out.get("landed_commit"):
        line += f" as {str(out['landed_commit'])[:12]}"
    if out.get("log"):
        line += f" ({out['log']})"
    if out.get("message") and out.get("state") == "failed":
        line += f": {out['message']}"
    return line
