"""A real local HTTP model provider for tests: Anthropic ``/v1/messages`` and OpenAI
``/v1/chat/completions``, answering scripted model turns (text and tool calls).

The engine talks to it through the official SDKs over real HTTP, exactly as it would to
a hosted API. A script step is a :class:`Turn`, or a callable receiving the parsed request
(:class:`Seen`) and returning a Turn, so a step can react to earlier tool results.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0  # seconds to wait before answering (a slow or hanging model)
    raw_arguments: str | None = None  # send this text as the first call's arguments (OpenAI)


def call(name: str, **arguments: Any) -> Turn:
    return Turn(tool_calls=[(name, arguments)])


@dataclass
class Seen:
    """One request as the provider saw it, in a provider-neutral shape."""

    api: str  # "anthropic" | "openai"
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools") or []
        if self.api == "anthropic":
            return [t["name"] for t in tools]
        return [t["function"]["name"] for t in tools]

    @property
    def system(self) -> str:
        if self.api == "anthropic":
            sys_ = self.body.get("system") or ""
            return sys_ if isinstance(sys_, str) else "".join(b.get("text", "") for b in sys_)
        msgs = self.body.get("messages") or []
        return msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""

    def tool_results(self) -> list[dict[str, Any]]:
        """Tool results sent back since the model's last turn: ``{"content", "is_error"}``."""
        msgs = self.body.get("messages") or []
        out: list[dict[str, Any]] = []
        if self.api == "anthropic":
            last = msgs[-1] if msgs else {}
            if last.get("role") == "user" and isinstance(last.get("content"), list):
                for b in last["content"]:
                    if b.get("type") == "tool_result":
                        content = b.get("content")
                        if isinstance(content, list):
                            content = "".join(x.get("text", "") for x in content)
                        out.append({"content": content, "is_error": bool(b.get("is_error"))})
            return out
        for m in reversed(msgs):
            if m["role"] != "tool":
                break
            content = m["content"]
            out.insert(0, {"content": content, "is_error": str(content).startswith("ERROR: ")})
        return out

    def user_texts(self) -> list[str]:
        out = []
        for m in self.body.get("messages") or []:
            if m["role"] != "user":
                continue
            c = m["content"]
            if isinstance(c, str):
                out.append(c)
            else:
                out += [b["text"] for b in c if b.get("type") == "text"]
        return out


Step = Turn | Callable[[Seen], Turn]


class FakeProvider:
    """Serve scripted turns on 127.0.0.1; ``push`` adds steps, ``seen`` records requests."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._ids = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/v1/messages"):
                    api = "anthropic"
                elif path.endswith("/chat/completions"):
                    api = "openai"
                else:
                    return self._send(404, {"error": {"type": "not_found", "message": self.path}})
                status, payload = provider._answer(api, body, {k.lower(): v for k, v in self.headers.items()})
                self._send(status, payload)

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def base(self, api: str) -> str:
        return self.url if api == "anthropic" else self.url + "/v1"

    def push(self, *steps: Step) -> FakeProvider:
        with self._lock:
            self.script.extend(steps)
        return self

    def wait_for(self, count: int, timeout: float = 30.0) -> None:
        """Block until ``count`` requests have arrived."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self.seen) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"only {len(self.seen)} of {count} requests arrived")
                self._arrived.wait(left)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, api: str, body: dict, headers: dict) -> tuple[int, dict]:
        seen = Seen(api, body, headers)
        with self._arrived:
            self.seen.append(seen)
            self._arrived.notify_all()
            step = self.script.pop(0) if self.script else None
        if step is None:
            return 400, _error(api, "fake provider: the script has no more turns")
        turn = step(seen) if callable(step) else step
        if turn.delay:
            time.sleep(turn.delay)
        with self._lock:
            self._ids += 1
            n = self._ids
        return 200, (_anthropic(body, turn, n) if api == "anthropic" else _openai(body, turn, n))


def _error(api: str, message: str) -> dict:
    if api == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"type": "invalid_request_error", "message": message, "code": None, "param": None}}


def _anthropic(body: dict, turn: Turn, n: int) -> dict:
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for i, (name, args) in enumerate(turn.tool_calls):
        content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args})
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
            "content": content, "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10}}


def _openai(body: dict, turn: Turn, n: int) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function",
             "function": {"name": name,
                          "arguments": turn.raw_arguments if (i == 0 and turn.raw_arguments is not None)
                          else json.dumps(args)}}
            for i, (name, args) in enumerate(turn.tool_calls)]
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


def commit_update_model(root_path, provider: FakeProvider) -> None:
    """Point the root's Update model at ``provider`` (OpenAI API, no SDK retries) and commit
    ``rightmemory.toml``, as a person configuring the model would."""
    import git

    from rmtui.engine.memory.config import set_config_value

    set_config_value(root_path, "update.model.model_id", "openai:fake-model")
    set_config_value(root_path, "update.model.api_base", provider.base("openai"))
    set_config_value(root_path, "update.model.kwargs", {"max_retries": 0})
    repo = git.Repo(root_path)
    repo.index.add(["rightmemory.toml"])
    repo.index.commit("config: update model")
