"""Anthropic Messages API executor (tool use) over the official ``anthropic`` SDK."""

from __future__ import annotations

from typing import Any

from rmtui.engine.roles.executors.base import (
    ApiExecutor,
    ExecutorSettings,
    ModelReply,
    ToolCall,
    ToolSpec,
    parse_arguments,
)

DEFAULT_MAX_TOKENS = 8192


def to_messages(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral transcript → Messages API turns (tool results ride in a user turn)."""
    out: list[dict[str, Any]] = []

    def user_blocks() -> list[dict[str, Any]]:
        if out and out[-1]["role"] == "user":
            return out[-1]["content"]
        out.append({"role": "user", "content": []})
        return out[-1]["content"]

    for entry in transcript:
        if entry["role"] == "user":
            user_blocks().append({"type": "text", "text": entry["text"]})
        elif entry["role"] == "assistant":
            blocks: list[dict[str, Any]] = []
            if entry["text"]:
                blocks.append({"type": "text", "text": entry["text"]})
            for call in entry["tool_calls"]:
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
            if not blocks:
                blocks.append({"type": "text", "text": "(no answer)"})
            out.append({"role": "assistant", "content": blocks})
        else:
            target = user_blocks()
            for r in entry["results"]:
                target.append({"type": "tool_result", "tool_use_id": r["id"], "content": r["content"],
                               "is_error": r["is_error"]})
    return out


class AnthropicExecutor(ApiExecutor):
    provider = "Anthropic"

    def __init__(self, settings: ExecutorSettings) -> None:
        super().__init__(settings)
        import anthropic

        self._sdk = anthropic
        self.client = anthropic.Anthropic(**self.client_options("ANTHROPIC_API_KEY"))

    def request(self, system: str, transcript: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        params = dict(self.settings.kwargs)
        params.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        if tools:
            params["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                               for t in tools]
        msg = self.call_sdk(self._sdk, self.client.messages.create, params, model=self.settings.model,
                            system=system, messages=to_messages(transcript))
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in msg.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                args, raw = parse_arguments(block.input)
                calls.append(ToolCall(block.id, block.name, args, raw))
        return ModelReply("".join(texts), calls, msg.stop_reason)
