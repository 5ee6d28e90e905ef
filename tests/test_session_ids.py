"""One session-id rule at every front: bidi overrides and isolates, C1 controls (a lone CSI,
NEL) and ESC are refused alike, by the real CLI and the MCP tools over stdio, with one line
that shows the id escaped, and nothing is stored."""

from __future__ import annotations

import pytest
from mcp import Client
from test_mcp import _params, _text

from rmtui.engine.evidence.queue import EvidenceQueue

HOSTILE = {
    "rlo": "invoice\u202etxt.exe",  # RIGHT-TO-LEFT OVERRIDE
    "lre": "a\u202ab",
    "lri": "a\u2066b",
    "pdi": "a\u2069",
    "csi": "a\x9b2Jb",  # C1 CSI: a terminal takes it for ESC [
    "nel": "a\x85b",  # C1 NEXT LINE
    "esc": "a\x1b[2Jb",
    "line-separator": "a\u2028b",
}

FRONTS = [
    ("submit", "--session", "{s}", "--request", "r1"),
    ("assistant", "submit", "--session", "{s}", "--request", "r1"),
    ("assistant", "context", "--session", "{s}"),
    ("guidance", "submit", "--session", "{s}"),
    ("retrieve", "--session", "{s}", "how are tests run"),
]


def _nothing_stored(root) -> None:
    with EvidenceQueue(root) as q:
        assert q.list() == []
    assert not (root.path / "AGENT_GUIDANCE_INBOX.md").exists()


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: " ".join(f[:2]))
def test_every_cli_front_refuses_hostile_session_ids(cli, root, front):
    for name, session in HOSTILE.items():
        argv = [a.replace("{s}", session) for a in front]
        r = cli("--headless", *argv, "--root", str(root.path), input="The project lints with ruff.\n")
        assert r.code == 2, (name, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
        assert "session id" in r.stderr and "bidirectional text controls" in r.stderr, (name, r.stderr)
        raw = session.replace("a", "").replace("b", "")
        assert not any(c in r.stderr for c in raw if not c.isalnum() and c not in "[.()"), (name, r.stderr)
        _nothing_stored(root)


def test_plain_session_ids_still_pass(cli, root):
    for session in ("codex-1", "Sitzung äöü", "会话 7", "claude:abc.def"):
        r = cli("--headless", "submit", "--session", session, "--request", "r", "--root", str(root.path),
                input="The project lints with ruff.\n")
        assert r.code == 0, (session, r.stderr)


async def test_mcp_tools_refuse_hostile_session_ids(root):
    async with Client(_params(root), read_timeout_seconds=120) as client:
        for session in HOSTILE.values():
            for tool, args in (("rightmemory_submit_update", {"evidence": "x"}),
                               ("rightmemory_capture_guidance", {"evidence": "x"}),
                               ("rightmemory_retrieve", {"need": "how are tests run"})):
                res = await client.call_tool(tool, {"session_id": f" {session} ", **args})
                assert res.is_error and "bidirectional text controls" in _text(res), (tool, session, _text(res))
    _nothing_stored(root)
