"""The MCP server driven through the official ``mcp`` client over stdio, as a host would."""

from __future__ import annotations

import json
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rmtui.engine.evidence.queue import EvidenceQueue


def _params(root) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("HOME", "GIT_", "PATH", "RMTUI", "HF_"))}
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "rmtui", "--headless", "mcp", "--root", str(root.path)],
                                 env=env)


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_mcp_tools_over_stdio(memory_root):
    async with Client(_params(memory_root), read_timeout_seconds=120) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"rightmemory_retrieve", "rightmemory_submit_update", "rightmemory_capture_guidance",
                "rmtui_status"} <= tools

        status = json.loads(_text(await client.call_tool("rmtui_status", {})))
        assert status["items"]["nodes"] == 2 and status["valid"] is True

        listed = {t.name: t for t in (await client.list_tools()).tools}
        for name, args in (("rightmemory_retrieve", ["session_id", "need"]),
                           ("rightmemory_submit_update", ["session_id", "evidence"]),
                           ("rightmemory_capture_guidance", ["session_id", "evidence"])):
            schema = listed[name].input_schema
            assert sorted(schema["required"]) == sorted(args) and listed[name].description
            for arg in args:
                prop = schema["properties"][arg]
                assert prop["type"] == "string" and prop["minLength"] == 1 and prop["description"]

        saved = await client.call_tool(
            "rightmemory_submit_update", {"session_id": " mcp-1 ", "evidence": "ruff must run before pytest\n"})
        assert not saved.is_error and saved.content == []  # success is an empty result, as the original
        with EvidenceQueue(memory_root) as q:
            (item,) = q.list()
        assert item.session == "mcp-1" and item.text == "ruff must run before pytest\n"

        bad = await client.call_tool("rightmemory_submit_update", {"session_id": "a/b", "evidence": "x"})
        assert bad.is_error and "path separators" in _text(bad)
        for args in ({"session_id": "two\nlines", "evidence": "x"}, {"session_id": "s", "evidence": "  "},
                     {"session_id": "", "evidence": "x"}):
            refused = await client.call_tool("rightmemory_submit_update", args)
            assert refused.is_error, args

        text = _text(await client.call_tool("rightmemory_retrieve",
                                            {"session_id": "mcp-1", "need": "how are tests run"}))
        assert "`pytest-quiet` the project runs its tests with pytest -q" in text

        guided = await client.call_tool(
            "rightmemory_capture_guidance", {"session_id": "mcp-1", "evidence": "Prefer small commits."})
        assert not guided.is_error and guided.content == []
    assert "Prefer small commits." in (memory_root.path / "AGENT_GUIDANCE_INBOX.md").read_text()
