"""The executor interface and the provider-neutral tool-use loop (docs/architecture.md, "Executors").

A role runs as a conversation: instructions (system text), a set of tools, and user turns.
API executors (Anthropic Messages, OpenAI Chat Completions) share one loop here and differ
only in how they turn the neutral transcript into a request and a response into a
:class:`ModelReply`; that keeps request limits, tool retries and tracing identical for
every provider. CLI executors (``claude``, ``codex``) implement :class:`Executor` directly
because the provider program runs its own tools.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rmtui.engine.errors import EngineError, OperationFailed, UnavailableError, UsageError
from rmtui.engine.roles.executors.trace import DebugTrace


class ToolError(EngineError):
    """A tool refused or failed; the message goes back to the model as an error result."""

    exit_code = 1
    kind = "tool_error"


class AbortTurn(OperationFailed):
    """Raised by a tool handler to end the whole turn with this error (not sent to the model)."""


@dataclass
class ToolSpec:
    """One tool a role may call: JSON-schema ``parameters`` and a handler returning text."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[dict[str, Any]], str]
    terminal: bool = False  # a successful call ends the turn (e.g. a retrieval selection)


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None  # set when the provider sent text that is not JSON


@dataclass
class ModelReply:
    """What one model request answered, provider-neutral."""

    text: str
    tool_calls: list[ToolCall]
    stop_reason: str | None = None


@dataclass
class TurnResult:
    """The end of one user turn: final text, and the terminal tool's result if one ended it."""

    text: str
    requests: int
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    terminal: dict[str, Any] | None = None  # {"name", "arguments", "result"}


@dataclass
class ExecutorSettings:
    """Limits and identity of one configured role executor."""

    role: str
    provider: str
    model: str
    api_base: str | None = None
    api_key: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_requests: int = 40
    tool_retries: int = 3
    timeout_seconds: float = 300
    command: str | None = None  # CLI executors: the program to run


class Conversation(ABC):
    """A live conversation with a role; ``send`` runs one user turn to its end."""

    @abstractmethod
    def send(self, text: str) -> TurnResult: ...

    def close(self) -> None:  # pragma: no cover - default no-op
        return None


class Executor(ABC):
    """Runs a role. ``start`` opens a conversation; ``run`` is a one-shot convenience."""

    settings: ExecutorSettings

    @abstractmethod
    def start(self, *, system: str, tools: list[ToolSpec], cwd: str | None = None,
              trace: DebugTrace | None = None) -> Conversation: ...

    def run(self, *, system: str, prompt: str, tools: list[ToolSpec], cwd: str | None = None,
            trace: DebugTrace | None = None) -> TurnResult:
        conv = self.start(system=system, tools=tools, cwd=cwd, trace=trace)
        try:
            return conv.send(prompt)
        finally:
            conv.close()

    @property
    def describe(self) -> str:
        s = self.settings
        return f"{s.provider}:{s.model}" + (f" at {s.api_base}" if s.api_base else "")


# -- the shared API loop -----------------------------------------------------------------

class ApiExecutor(Executor):
    """Base of the SDK executors: subclasses convert transcripts and call their SDK."""

    #: Provider name in messages ("Anthropic", "OpenAI"); subclasses set it.
    provider = "model"

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings

    def client_options(self, key_env: str) -> dict[str, Any]:
        """What both SDK clients take: key from the environment, endpoint, timeout, retries."""
        s = self.settings
        return {"api_key": require_key(s, key_env), "base_url": s.api_base or None,
                "timeout": s.timeout_seconds, "max_retries": int(s.kwargs.get("max_retries", 2))}

    def call_sdk(self, sdk: Any, fn: Callable[..., Any], params: dict[str, Any], **fixed: Any) -> Any:
        """Call one SDK method with the role's kwargs; map the SDK's errors to engine errors.

        Both official SDKs share these exception names, so the mapping is one rule here.
        """
        s = self.settings
        extra = {k: v for k, v in params.items() if k != "max_retries"}
        try:
            return fn(**fixed, **split_kwargs(fn, extra))
        except sdk.APIConnectionError as exc:
            raise UnavailableError(f"{s.role}: cannot reach {self.provider} API at "
                                   f"{s.api_base or 'the default endpoint'}: {exc}") from exc
        except sdk.AuthenticationError as exc:
            raise UnavailableError(f"{s.role}: {self.provider} API refused the key: {exc.message}") from exc
        except sdk.APIStatusError as exc:
            raise OperationFailed(f"{s.role}: {self.provider} API error {exc.status_code}: {exc.message}") from exc
        except sdk.APIError as exc:
            raise OperationFailed(f"{s.role}: {self.provider} API error: {exc}") from exc

    @abstractmethod
    def request(self, system: str, transcript: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        """Send one model request for the neutral transcript; raise EngineError on failure."""

    def start(self, *, system: str, tools: list[ToolSpec], cwd: str | None = None,
              trace: DebugTrace | None = None) -> Conversation:
        return ApiConversation(self, system, tools, trace)


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool arguments as a dict; text that is not a JSON object is kept for the error."""
    if isinstance(raw, dict):
        return raw, None
    if raw in (None, ""):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {}, str(raw)
    return (value, None) if isinstance(value, dict) else ({}, str(raw))


class ApiConversation(Conversation):
    """The tool-use loop: request, run the tools the model asked for, repeat.

    Neutral transcript entries: ``{"role": "user", "text"}``,
    ``{"role": "assistant", "text", "tool_calls": [ToolCall...]}`` and
    ``{"role": "tool", "results": [{"id", "name", "content", "is_error"}]}``.
    """

    def __init__(self, executor: ApiExecutor, system: str, tools: list[ToolSpec],
                 trace: DebugTrace | None) -> None:
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise UsageError(f"duplicate tool names: {names}")
        self.executor = executor
        self.system = system
        self.tools = {t.name: t for t in tools}
        self.tool_list = tools
        self.trace = trace or DebugTrace.disabled()
        self.transcript: list[dict[str, Any]] = []
        s = executor.settings
        self.trace.event("start", role=s.role, provider=s.provider, model=s.model, api_base=s.api_base,
                         tools=names)

    def send(self, text: str) -> TurnResult:
        s = self.executor.settings
        self.transcript.append({"role": "user", "text": text})
        self.trace.event("user", text=text)
        requests = 0
        failures = 0  # consecutive failed tool calls
        calls_log: list[dict[str, Any]] = []
        while True:
            if requests >= s.max_requests:
                self.trace.event("failure", error="max_requests", requests=requests)
                raise OperationFailed(
                    f"{s.role}: the model used all {s.max_requests} requests of this turn without finishing",
                    details={"requests": requests})
            requests += 1
            started = time.monotonic()
            try:
                reply = self.executor.request(self.system, self.transcript, self.tool_list)
            except EngineError as exc:
                self.trace.event("failure", error=exc.message, request=requests)
                raise
            self.trace.event("model_reply", request=requests, seconds=round(time.monotonic() - started, 3),
                             text=reply.text, stop_reason=reply.stop_reason,
                             tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments}
                                         for c in reply.tool_calls])
            self.transcript.append({"role": "assistant", "text": reply.text, "tool_calls": reply.tool_calls})
            if not reply.tool_calls:
                self.trace.event("finish", text=reply.text, requests=requests)
                return TurnResult(reply.text, requests, calls_log)
            results = []
            terminal = None
            for call in reply.tool_calls:
                content, is_error = self._run_tool(call)
                calls_log.append({"name": call.name, "arguments": call.arguments, "is_error": is_error})
                results.append({"id": call.id, "name": call.name, "content": content, "is_error": is_error})
                if is_error:
                    failures += 1
                else:
                    failures = 0
                    spec = self.tools.get(call.name)
                    if spec is not None and spec.terminal and terminal is None:
                        terminal = {"name": call.name, "arguments": call.arguments, "result": content}
            self.transcript.append({"role": "tool", "results": results})
            if terminal is not None:
                self.trace.event("finish", terminal=terminal["name"], requests=requests)
                return TurnResult(reply.text, requests, calls_log, terminal)
            if failures > s.tool_retries:
                self.trace.event("failure", error="tool_retries", failures=failures)
                raise OperationFailed(
                    f"{s.role}: {failures} tool calls failed in a row (limit {s.tool_retries} retries); "
                    f"last error: {results[-1]['content']}")

    def _run_tool(self, call: ToolCall) -> tuple[str, bool]:
        spec = self.tools.get(call.name)
        self.trace.event("tool_call", id=call.id, name=call.name, arguments=call.arguments)
        if spec is None:
            out, err = f"unknown tool {call.name!r}; available: {', '.join(self.tools)}", True
        elif call.raw_arguments is not None:
            out, err = f"arguments of {call.name} are not a JSON object: {call.raw_arguments[:200]!r}", True
        else:
            try:
                out, err = spec.handler(call.arguments), False
            except AbortTurn as exc:
                self.trace.event("failure", error=exc.message, tool=call.name)
                raise
            except (ToolError, UsageError) as exc:
                out, err = exc.message, True
            except EngineError as exc:
                out, err = f"{exc.kind}: {exc.message}", True
            except (TypeError, KeyError, ValueError) as exc:
                out, err = f"bad arguments for {call.name}: {exc}", True
        self.trace.event("tool_output", id=call.id, name=call.name, is_error=err, output=out)
        return out, err


def split_kwargs(fn: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """Configured model kwargs: those the SDK method names go as-is, the rest in ``extra_body``
    (so a provider-specific knob, or one an SDK version dropped, still reaches the server)."""
    import inspect

    known = set(inspect.signature(fn).parameters)
    out = {k: v for k, v in params.items() if k in known}
    extra = {k: v for k, v in params.items() if k not in known}
    if extra:
        out["extra_body"] = {**(out.get("extra_body") or {}), **extra}
    return out


def require_key(settings: ExecutorSettings, env_name: str) -> str:
    """The API key, or a placeholder for a keyless local endpoint; refuse a missing key."""
    if settings.api_key:
        return settings.api_key
    if settings.api_base:
        return "no-key"  # local OpenAI/Anthropic-compatible servers do not check keys
    raise UnavailableError(f"{settings.role}: no API key for {settings.provider}; set {env_name} "
                           f"(or name another variable with api_key_env in rmtui.toml)")
