"""API executors over the real anthropic/openai SDKs against a local scripted provider."""

from __future__ import annotations

import json

import pytest
from fake_provider import FakeProvider, Turn, call

from rmtui.engine.errors import OperationFailed, UnavailableError, UsageError
from rmtui.engine.memory.config import load_config, set_config_value
from rmtui.engine.roles.executors import (
    DebugTrace,
    ExecutorSettings,
    ToolSpec,
    build_executor,
    make_executor,
    resolve_role_executor,
)
from rmtui.engine.roles.tools import RoleTools

APIS = ["anthropic", "openai"]


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def executor_for(api: str, provider: FakeProvider, role: str = "update", **kw):
    settings = ExecutorSettings(role=role, provider=api, model="fake-model", api_base=provider.base(api),
                                api_key="sk-test-key", kwargs={"max_retries": 0}, **kw)
    return build_executor(settings)


@pytest.mark.parametrize("api", APIS)
def test_tool_loop_reads_edits_and_answers(api, provider, root):
    provider.push(
        call("read", path="MEMORY.md"),
        lambda seen: call("edit", path="MEMORY.md", old_text="# Memory\n",
                          new_text="# Memory\n\n- `fact-a` The build uses hatch → []\n"),
        Turn(text="Added fact-a."),
    )
    tools = RoleTools(root.path, "update")
    result = executor_for(api, provider).run(system="You are update.", prompt="Do it.", tools=tools.specs())
    assert result.text == "Added fact-a."
    assert result.requests == 3
    assert "`fact-a` The build uses hatch" in (root.path / "MEMORY.md").read_text()
    # the provider saw the tools, the system text, the key, and the read result came back to it
    first, second, third = provider.seen
    assert "edit" in first.tool_names and "git_commit" in first.tool_names
    assert first.system == "You are update."
    assert "sk-test-key" in (first.headers.get("x-api-key", ""), first.headers.get("authorization", "")[7:])
    assert "# Memory" in second.tool_results()[0]["content"]
    assert third.tool_results()[0]["content"].startswith("edited MEMORY.md")


@pytest.mark.parametrize("api", APIS)
def test_edit_without_read_is_refused_and_model_recovers(api, provider, root):
    provider.push(
        call("edit", path="MEMORY.md", old_text="# Memory", new_text="# Changed"),
        call("read", path="MEMORY.md"),
        call("edit", path="MEMORY.md", old_text="# Memory", new_text="# Memory again"),
        Turn(text="done"),
    )
    executor_for(api, provider).run(system="s", prompt="p", tools=RoleTools(root.path, "update").specs())
    refused = provider.seen[1].tool_results()[0]
    assert refused["is_error"] and "read MEMORY.md before changing it" in refused["content"]
    assert (root.path / "MEMORY.md").read_text().startswith("# Memory again")


@pytest.mark.parametrize("api", APIS)
def test_model_requests_are_bounded_per_turn(api, provider, root):
    provider.push(*[call("outline") for _ in range(10)])
    ex = executor_for(api, provider, max_requests=4)
    with pytest.raises(OperationFailed, match="all 4 requests"):
        ex.run(system="s", prompt="p", tools=RoleTools(root.path, "retrieve").specs())
    assert len(provider.seen) == 4


@pytest.mark.parametrize("api", APIS)
def test_tool_retries_are_bounded(api, provider, root):
    provider.push(*[call("read", path="../outside.md") for _ in range(10)])
    ex = executor_for(api, provider, tool_retries=2)
    with pytest.raises(OperationFailed, match="3 tool calls failed in a row"):
        ex.run(system="s", prompt="p", tools=RoleTools(root.path, "update").specs())
    assert len(provider.seen) == 3
    assert "leaves the root" in provider.seen[1].tool_results()[0]["content"]


def test_malformed_tool_arguments_go_back_as_an_error(provider, root):
    provider.push(Turn(tool_calls=[("read", {})], raw_arguments="{not json"), Turn(text="ok"))
    executor_for("openai", provider).run(system="s", prompt="p", tools=RoleTools(root.path, "update").specs())
    res = provider.seen[1].tool_results()[0]
    assert res["is_error"] and "not a JSON object" in res["content"]


@pytest.mark.parametrize("api", APIS)
def test_terminal_tool_ends_the_turn(api, provider, root):
    got = []
    spec = ToolSpec("finish", "finish", {"type": "object", "properties": {"x": {"type": "integer"}}},
                    lambda args: got.append(args) or "accepted", terminal=True)
    provider.push(call("finish", x=7))
    result = executor_for(api, provider).run(system="s", prompt="p", tools=[spec])
    assert result.terminal == {"name": "finish", "arguments": {"x": 7}, "result": "accepted"}
    assert got == [{"x": 7}] and len(provider.seen) == 1


@pytest.mark.parametrize("api", APIS)
def test_conversation_keeps_history_across_turns(api, provider, root):
    provider.push(Turn(text="first answer"), Turn(text="second answer"))
    conv = executor_for(api, provider).start(system="s", tools=[])
    assert conv.send("one").text == "first answer"
    assert conv.send("two").text == "second answer"
    assert provider.seen[1].user_texts() == ["one", "two"]


@pytest.mark.parametrize("api", APIS)
def test_debug_trace_records_starts_calls_outputs_and_failures(api, provider, root):
    trace = DebugTrace.for_role(root.runtime, "update", enabled=True)
    provider.push(call("read", path="MEMORY.md"), call("read", path="nope.md"), Turn(text="end"))
    executor_for(api, provider).run(system="s", prompt="p", tools=RoleTools(root.path, "update").specs(), trace=trace)
    assert trace.path.parent == root.runtime / "debug"
    events = [json.loads(line) for line in trace.path.read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "finish"
    assert kinds.count("tool_call") == 2
    outputs = [e for e in events if e["event"] == "tool_output"]
    assert outputs[0]["is_error"] is False and outputs[1]["is_error"] is True


@pytest.mark.parametrize("api", APIS)
def test_unreachable_endpoint_is_unavailable(api, root):
    ex = build_executor(ExecutorSettings(role="update", provider=api, model="m", api_base="http://127.0.0.1:9",
                                         api_key="k", kwargs={"max_retries": 0}, timeout_seconds=5))
    with pytest.raises(UnavailableError, match="cannot reach"):
        ex.run(system="s", prompt="p", tools=[])


@pytest.mark.parametrize("api", APIS)
def test_provider_error_is_an_operation_failure(api, provider):
    # an empty script answers 400: the SDK raises, the executor reports it
    with pytest.raises(OperationFailed, match="400"):
        executor_for(api, provider).run(system="s", prompt="p", tools=[])


# -- configuration -----------------------------------------------------------------------

def test_role_borrows_from_first_configured_role_but_retrieve_never(root, monkeypatch):
    """The original's order: update, dreamer, insight, reviewer, pruner, sync-reconciler, ..."""
    monkeypatch.setenv("MY_KEY", "secret-1")
    set_config_value(root.path, "insight.model.model_id", "openai:gpt-5")
    set_config_value(root.path, "insight.model.api_key_env", "MY_KEY")  # rmtui.toml
    set_config_value(root.path, "pruner.model.model_id", "anthropic:claude-sonnet-4-5")
    cfg = load_config(root.path)
    hist = resolve_role_executor(cfg, "historian")
    assert hist.borrowed and hist.source_role == "insight"  # insight comes before pruner
    assert (hist.settings.provider, hist.settings.model, hist.settings.api_key) == ("openai", "gpt-5", "secret-1")
    assert hist.settings.role == "historian"
    assert resolve_role_executor(cfg, "pruner").source_role == "pruner"
    assert resolve_role_executor(cfg, "retrieve") is None
    with pytest.raises(UnavailableError, match="no model is configured for role 'retrieve'"):
        make_executor(cfg, "retrieve")


def test_agent_cli_table_and_conflicts(root):
    set_config_value(root.path, "update.agent_cli.provider", "codex")
    set_config_value(root.path, "update.agent_cli.model", "gpt-5-codex")
    r = resolve_role_executor(load_config(root.path), "sync-reconciler")
    assert (r.kind, r.settings.provider, r.settings.model, r.source_role) == ("agent_cli", "codex",
                                                                              "gpt-5-codex", "update")
    with pytest.raises(UsageError, match="both set"):  # refused as written: the original refuses it at load
        set_config_value(root.path, "update.model.model_id", "openai:gpt-5")
    assert load_config(root.path).table("update.agent_cli")["provider"] == "codex"  # the file is unchanged


def test_bad_model_id_and_missing_key(root, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    set_config_value(root.path, "update.model.model_id", "claude-sonnet-4-5")
    with pytest.raises(UsageError, match="must be 'anthropic:<model>'"):
        make_executor(load_config(root.path), "update")
    set_config_value(root.path, "update.model.model_id", "anthropic:claude-sonnet-4-5")
    with pytest.raises(UnavailableError, match="ANTHROPIC_API_KEY"):
        make_executor(load_config(root.path), "update")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    ex = make_executor(load_config(root.path), "update")
    assert ex.settings.api_key == "from-env" and ex.describe == "anthropic:claude-sonnet-4-5"


def test_engine_import_does_not_load_sdks_or_torch():
    import subprocess
    import sys

    code = ("import sys, rmtui.engine.roles.executors, rmtui.engine.roles.tools, rmtui.engine.memory.role_table; "
            "bad = [m for m in ('anthropic','openai','torch','textual','prompt_toolkit') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
