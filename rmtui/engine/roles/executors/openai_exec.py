"""OpenAI Chat Completions executor (tool calls) over the official ``openai`` SDK.

Any OpenAI-compatible endpoint works (a local llama.cpp server, vLLM, ...): set
``api_base`` to its ``/v1`` URL.
"""

from __future__ import annotations

import json
from typing import Any

from rmtui.engine.errors import OperationFailed
from rmtui.engine.roles.executors.base import (
    ApiExecutor,
    ExecutorSettings,
    ModelReply,
    ToolCall,
    ToolSpec,
    parse_arguments,
)


def to_messages(system: str, transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral transcript → Chat Completions messages (one ``tool`` message per result)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for entry in transcript:
        if entry["role"] == "user":
            out.append({"role": "user", "content": entry["text"]})
        elif entry["role"] == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": entry["text"] or None}
            if entry["tool_calls"]:
                msg["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name,
                                  "arguments": c.raw_arguments if c.raw_arguments is not None
                                  else json.dumps(c.arguments, ensure_ascii=False)}}
                    for c in entry["tool_calls"]]
            elif msg["content"] is None:
                msg["content"] = ""
            out.append(msg)
        else:
            for r in entry["results"]:
                content = ("ERROR: " + r["content"]) if r["is_error"] else r["content"]
                out.append({"role": "tool", "tool_call_id": r["id"], "content": content})
    return out


class OpenAIExecutor(ApiExecutor):
    provider = "OpenAI"

    def __init__(self, settings: ExecutorSettings) -> None:
        super().__init__(settings)
        import openai

        self._sdk = openai
        self.client = openai.OpenAI(**self.client_options("OPENAI_API_KEY"))

    def request(self, system: str, transcript: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        params = dict(self.settings.kwargs)
        if tools:
            params["tools"] = [{"type": "function",
                                "function": {"name": t.name, "description": t.description,
                                             "parameters": t.parameters}} for t in tools]
        resp = self.call_sdk(self._sdk, self.client.chat.completions.create, params, model=self.settings.model,
                             messages=to_messages(system, transcript))
        if not resp.choices:
            raise OperationFailed(f"{self.settings.role}: OpenAI API answered no choices")
        choice = resp.choices[0]
        message = choice.message
        calls: list[ToolCall] = []
        for tc in message.tool_calls or []:
            fn = getattr(tc, "function", None)
            if fn is None:
                continue
            args, raw = parse_arguments(fn.arguments)
            calls.append(ToolCall(tc.id, fn.name, args, raw))
        return ModelReply(message.content or "", calls, choice.finish_reason)
