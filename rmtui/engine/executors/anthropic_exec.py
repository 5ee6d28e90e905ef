"""Anthropic Messages API executor (tool use) over the official ``anthropic`` SDK."""

from __future__ import annotations

from typing import Any

from rmtui.engine.errors import OperationFailed, UnavailableError
from rmtui.engine.executors.base import (
    ApiExecutor,
    ExecutorSettings,
    ModelReply,
    ToolCall,
    ToolSpec,
    parse_arguments,
    require_key,
    split_kwargs,
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
    def __init__(self, settings: ExecutorSettings) -> None:
        super().__init__(settings)
        import anthropic

        self._sdk = anthropic
        self.client = anthropic.Anthropic(
            api_key=require_key(settings, "ANTHROPIC_API_KEY"),
            base_url=settings.api_base or None,
            timeout=settings.timeout_seconds,
            max_retries=int(settings.kwargs.get("max_retries", 2)),
        )

    def request(self, system: str, transcript: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        sdk = self._sdk
        params = {k: v for k, v in self.settings.kwargs.items() if k != "max_retries"}
        params.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        if tools:
            params["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                               for t in tools]
        try:
            msg = self.client.messages.create(model=self.settings.model, system=system,
                                              messages=to_messages(transcript), **split_kwargs(self.client.messages.create, params))
        except sdk.APIConnectionError as exc:
            raise UnavailableError(f"{self.settings.role}: cannot reach Anthropic API at "
                                   f"{self.settings.api_base or 'the default endpoint'}: {exc}") from exc
        except sdk.AuthenticationError as exc:
            raise UnavailableError(f"{self.settings.role}: Anthropic API refused the key: {exc.message}") from exc
        except sdk.APIStatusError as exc:
            raise OperationFailed(f"{self.settings.role}: Anthropic API error {exc.status_code}: {exc.message}") from exc
        except sdk.APIError as exc:
            raise OperationFailed(f"{self.settings.role}: Anthropic API error: {exc}") from exc
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in msg.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                args, raw = parse_arguments(block.input)
                calls.append(ToolCall(block.id, block.name, args, raw))
        return ModelReply("".join(texts), calls, msg.stop_reason)
