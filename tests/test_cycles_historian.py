"""The Historian: read-only answers from history (prune ledgers, past file versions), labelled
historical, from the CLI and the MCP tool ``rmtui_history``."""

from __future__ import annotations

import os
import sys

import git
import pytest
from cycles_kit import MEMORY, commit, configure, head, seed
from fake_provider import FakeProvider, Turn, call
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rmtui.engine.cycles.historian import ask
from rmtui.engine.writes.operations import OperationStore

ANSWER = "As of the seed commit, memory said the build used make (`old-node`); it was pruned since."


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def pruned_root(root, provider, api="openai"):
    configure(root, api, provider)
    seed(root)
    seeded = head(root)
    commit(root, "prune: expired active memory\n\nRemoved:\n- MEMORY.md#old-node: superseded by keep-node",
           {"MEMORY.md": MEMORY.replace("- `old-node` The build used make → []\n", "")})
    return seeded


def history_script(seeded: str) -> list:
    return [call("git_log", grep="prune:"), call("git_show", rev=seeded, path="MEMORY.md"), Turn(text=ANSWER)]


def test_ask_reads_ledgers_and_old_versions_and_writes_nothing(provider, root):
    seeded = pruned_root(root, provider)
    before = head(root)
    provider.push(*history_script(seeded))
    out = ask(root, "What did memory say about the build tool before it was pruned?")
    assert out.to_json() == {"label": "historical",
                             "question": "What did memory say about the build tool before it was pruned?",
                             "answer": ANSWER, "head": before, "prune_commits": 1}
    first = provider.seen[0]
    assert {"git_log", "git_show", "read", "outline"} <= set(first.tool_names)
    assert not {"edit", "create", "delete", "rename", "git_add", "git_commit"} & set(first.tool_names)
    assert "1 prune commit(s)" in first.user_texts()[0] and "Historian" in first.system
    assert "Removed:\n- MEMORY.md#old-node: superseded by keep-node" in provider.seen[1].tool_results()[0]["content"]
    assert "`old-node` The build used make" in provider.seen[2].tool_results()[0]["content"]
    # read-only: no operation, no commit, nothing changed
    assert head(root) == before and not git.Repo(root.path).is_dirty(untracked_files=True)
    with OperationStore(root) as store:
        assert store.list() == []


def test_history_ask_cli(provider, root, cli):
    seeded = pruned_root(root, provider, api="anthropic")
    provider.push(*history_script(seeded))
    r = cli("--headless", "history", "ask", "What was pruned?", "--root", str(root.path))
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("[historical answer, from history up to ") and ANSWER in r.stdout
    r = cli("--headless", "history", "ask", "  ", "--root", str(root.path))
    assert r.code == 2


async def test_rmtui_history_mcp_tool(provider, root):
    seeded = pruned_root(root, provider)
    provider.push(*history_script(seeded))
    env = {k: v for k, v in os.environ.items() if k.startswith(("HOME", "GIT_", "PATH", "RMTUI", "HF_"))}
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "rmtui", "--headless", "mcp", "--root", str(root.path)], env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        schema = listed["rmtui_history"].input_schema
        assert schema["required"] == ["question"] and listed["rmtui_history"].description
        result = await client.call_tool("rmtui_history", {"question": "What was pruned?"})
        assert not result.is_error
        text = "".join(getattr(c, "text", "") for c in result.content)
        assert text.startswith("[historical answer") and ANSWER in text
