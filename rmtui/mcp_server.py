"""The MCP front (stdio, official ``mcp`` SDK): the original RightMemory tool names plus a
read-only status tool. A thin front: every tool calls the engine; the server process keeps
the retrieval backend warm between calls.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Annotated

from mcp.types import CallToolResult, TextContent
from pydantic import Field, ValidationError

from rmtui.engine.errors import EngineError, UsageError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.mcp_retriever import WarmRetriever

SERVER_NAME = "rmtui"
INSTRUCTIONS = (
    "Long-term memory for coding work. Call rightmemory_retrieve when stored context could change "
    "the work; submit consequential evidence with rightmemory_submit_update (queued, not yet memory); "
    "capture guidance for future agents with rightmemory_capture_guidance."
)


# Argument schemas as the original's (strings, at least one character, described); the
# wording is ours.
SessionId = Annotated[str, Field(min_length=1, description=(
    "An identifier you pick once for this conversation and pass unchanged on every memory call in it "
    "(one line)."))]
Need = Annotated[str, Field(min_length=1, description=(
    "What context the current work needs from long-term memory, said briefly in your own words "
    "(not the user's message copied)."))]
IncludePending = Annotated[bool, Field(description=(
    "Also return submitted evidence that no Update has reconciled into memory yet (at most a few best "
    "matches, in a separate section marked as pending evidence, never as memory). Default true."))]
UpdateEvidence = Annotated[str, Field(min_length=1, description=(
    "A self-contained account: what happened, what holds now, and why keeping it could matter later."))]
GuidanceEvidence = Annotated[str, Field(min_length=1, description=(
    "A self-contained account of a signal about how agents should work: the earlier approach, what the "
    "user said or showed, and the direction that follows."))]

HistoryQuestion = Annotated[str, Field(min_length=1, description=(
    "What you want to know about how memory changed: when something was recorded, what a removed item "
    "said, why an item was edited."))]
HISTORY_DESCRIPTION = (
    "Ask the Historian (read-only) about past memory: earlier versions of memory files and the Pruner's "
    "ledgers. The answer is historical, not current guidance; it never changes memory.")

RETRIEVE_DESCRIPTION = (
    "Fetch stored cross-session context when it could change how the current work is understood or done. "
    "Describe the context you need rather than repeating the request. What the conversation and current "
    "evidence show wins over stored memory; if returned memory is stale or wrong, say so with "
    "rightmemory_submit_update.")
SUBMIT_DESCRIPTION = (
    "Hand in evidence worth keeping across sessions: decisions, facts that now hold, the direction of "
    "ongoing work, when losing it would cost rediscovery or worse decisions. Submit at a natural boundary; "
    "skip routine progress and details already kept in the project. Describe what happened and why it "
    "matters; do not dictate wording or placement. Evidence is queued and reconciled later: an empty "
    "result means it was saved; carry on without polling or resubmitting.")
GUIDANCE_DESCRIPTION = (
    "Capture a signal about how an agent should handle similar work in future: direct guidance, or a "
    "correction or redirection by the user (explicit or implied). Capture each occurrence once, with the "
    "prior approach, the user's signal and the resulting direction; do not invent a general rule. When the "
    "user asks memory to remember something, use rightmemory_submit_update instead. An empty result means "
    "it was captured.")


def build_server(root: MemoryRoot, retriever: WarmRetriever | None = None):
    """Build the MCP server for one root (also used in-process by tests of the tool logic):
    the server over the hardened transport, then each group of tools in turn (``retriever``:
    one already warming up, see :func:`serve`)."""
    server = _stdio_server_class()(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    _memory_tools(server, root, retriever)
    for register in TOOL_GROUPS:
        register(server, root)
    return server


def _stdio_server_class():
    """The SDK's server, its stdio run over :func:`hardened_stdio` instead of the SDK's transport."""
    from mcp.server.mcpserver import MCPServer

    class _Server(MCPServer):
        async def run_stdio_async(self) -> None:
            async with hardened_stdio() as (read_stream, write_stream):
                lowlevel = self._lowlevel_server
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    return _Server


def _memory_tools(server, root: MemoryRoot, retrieve: WarmRetriever | None = None) -> None:
    """The original tool's three tools: retrieve, submit an update, capture guidance."""
    retrieve = retrieve or WarmRetriever(root)

    @server.tool(name="rightmemory_retrieve", description=RETRIEVE_DESCRIPTION, structured_output=False)
    def rightmemory_retrieve(session_id: SessionId, need: Need,
                             include_pending: IncludePending = True) -> CallToolResult:
        def run() -> CallToolResult:
            result = retrieve(_session(session_id), _text_arg(need, "retrieval need"), include_pending)
            return _result(result.text, *result.warnings)

        return _call(run)

    @server.tool(name="rightmemory_submit_update", description=SUBMIT_DESCRIPTION, structured_output=False)
    def rightmemory_submit_update(session_id: SessionId, evidence: UpdateEvidence) -> CallToolResult:
        from rmtui.engine.evidence.queue import EvidenceQueue

        def run() -> CallToolResult:
            with EvidenceQueue(root) as q:
                q.submit(_session(session_id), _text_arg(evidence, "update evidence").encode("utf-8"))
            return _result()  # saved: an empty result, as the original answers

        return _call(run)

    @server.tool(name="rightmemory_capture_guidance", description=GUIDANCE_DESCRIPTION, structured_output=False)
    def rightmemory_capture_guidance(session_id: SessionId, evidence: GuidanceEvidence) -> CallToolResult:
        from rmtui.engine.writes.guidance import capture

        def run() -> CallToolResult:
            capture(root, _session(session_id), _text_arg(evidence, "guidance evidence").encode("utf-8"))
            return _result()

        return _call(run)


def _history_tool(server, root: MemoryRoot) -> None:
    """rmtui's read-only Historian."""

    @server.tool(name="rmtui_history", description=HISTORY_DESCRIPTION, structured_output=False)
    def rmtui_history(question: HistoryQuestion) -> CallToolResult:
        from rmtui.engine.cycles.historian import ask

        def run() -> CallToolResult:
            out = ask(root, _text_arg(question, "question"))
            return _result(f"[historical answer, from history up to {out.head[:12]}]\n\n{out.answer}")

        return _call(run)


def _status_tool(server, root: MemoryRoot) -> None:
    """rmtui's read-only status."""

    @server.tool(name="rmtui_status",
                 description="Read-only status: root, head commit, item counts, evidence by state.")
    def rmtui_status() -> str:
        from rmtui.engine.host.status import root_status

        return _call(lambda: json.dumps(root_status(root)))


#: The tool groups :func:`build_server` registers after the memory tools, in the order clients list them.
TOOL_GROUPS = (_history_tool, _status_tool)


def _result(*texts: str) -> CallToolResult:
    """Text items for the non-empty strings only (an empty result means success)."""
    return CallToolResult(content=[TextContent(type="text", text=t) for t in texts if t and t.strip()])


def _session(value: str) -> str:
    """The session id as the original's tools take it (surrounding whitespace stripped), then
    the one session-id rule every front applies."""
    from rmtui.engine.evidence.queue import check_session_id, check_text

    return check_session_id(check_text(value, "session id").strip())


def _text_arg(value: str, label: str) -> str:
    from rmtui.engine.evidence.queue import check_text

    if not check_text(value, label).strip():
        raise UsageError(f"{label} must not be empty")
    return value


def _call(fn):
    """Engine errors become a tool error the client sees, with the engine's message."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return fn()
    except EngineError as exc:
        raise ToolError(f"{exc.kind}: {exc.message}") from None


def serve(root: MemoryRoot, retriever: WarmRetriever | None = None) -> None:
    """Serve one root over stdio. Retrieval warms up meanwhile (``retriever``: one prepared
    before the SDK's import, see :mod:`rmtui.mcp_retriever`) while recovery runs, the tools
    are registered and the client says hello."""
    from rmtui.engine.writes.supervisor import Supervisor

    warm = (retriever or WarmRetriever(root)).start()
    with Supervisor(root) as sup:
        sup.recover()  # engine start: settle unfinished operations first
    try:
        build_server(root, warm).run("stdio")
    finally:
        warm.close()


# -- the stdio transport -----------------------------------------------------------------
#
# The SDK's ``stdio_server`` decodes stdin with ``errors="replace"`` and hands a line it
# cannot validate to the session as an exception, which the dispatcher only logs: a line
# that is not JSON, not UTF-8, or holds a lone surrogate escape (``"\\ud800"``, which the
# SDK's JSON parser refuses) got no answer at all, and the client waited forever. This
# transport checks each line first and answers what it refuses with the JSON-RPC error the
# specification names; only well-formed messages reach the SDK. Its writer never dies: a
# message that cannot be encoded as UTF-8 JSON is sent ASCII-escaped, and a response that
# cannot be serialised at all becomes an internal error for its id.

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32602, -32603
MAX_LINE_BYTES = 32 * 1024 * 1024


class _Refused(Exception):
    def __init__(self, code: int, message: str, request_id=None) -> None:
        super().__init__(message)
        self.code, self.message, self.request_id = code, message, request_id


def _request_id(obj):
    rid = obj.get("id") if isinstance(obj, dict) else None
    return rid if (isinstance(rid, str) and _encodable(rid)) or (type(rid) is int) else None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lone_surrogate_at(value, path: str = "") -> str | None:
    """Where in a decoded message a string holds a lone surrogate, or None."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return where or "the message"
        elif isinstance(item, dict):
            for k, v in item.items():
                if not _encodable(k):
                    return f"{where}.<key>" if where else "a key"
                stack.append((v, f"{where}.{k}" if where else k))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def parse_line(raw: bytes):
    """One stdin line as an SDK message; :class:`_Refused` names the JSON-RPC error."""
    import mcp_types as types

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(PARSE_ERROR, f"Parse error: the message is not valid UTF-8 (byte {exc.start})") from None
    try:
        obj = json.loads(text)
    except RecursionError:
        raise _Refused(PARSE_ERROR, "Parse error: the message is nested too deeply") from None
    except ValueError as exc:
        raise _Refused(PARSE_ERROR, f"Parse error: {exc}") from None
    if isinstance(obj, list):
        raise _Refused(INVALID_REQUEST, "Invalid Request: batches are not supported; send one message per line")
    if not isinstance(obj, dict):
        raise _Refused(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    rid = _request_id(obj)
    where = _lone_surrogate_at(obj)
    if where is not None:
        code = INVALID_PARAMS if where.startswith("params") and isinstance(obj.get("method"), str) else INVALID_REQUEST
        label = "Invalid params" if code == INVALID_PARAMS else "Invalid Request"
        raise _Refused(code, f"{label}: {where} holds a lone surrogate; strings must be valid Unicode", rid)
    if rid is not None and isinstance(obj.get("method"), str) and obj.get("params") is not None \
            and not isinstance(obj["params"], dict):
        raise _Refused(INVALID_PARAMS, "Invalid params: params must be an object", rid)
    try:
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except (ValidationError, ValueError):
        raise _Refused(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message MCP accepts", rid) from None


def _encode(message) -> bytes:
    """A message as one wire line: UTF-8 JSON, ASCII-escaped when it holds lone surrogates."""
    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    except Exception:  # noqa: BLE001 - pydantic refuses lone surrogates variously; plain JSON always works
        text = json.dumps(message.model_dump(by_alias=True, exclude_unset=True, mode="python"),
                          ensure_ascii=True, default=str)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(json.loads(text), ensure_ascii=True).encode("ascii") + b"\n"


def _error_line(request_id, code: int, message: str) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def _claim_stdio():
    """The wire's own descriptors; fd 0 then reads the null device and fd 1 writes to
    stderr, so a stray print or a child process cannot corrupt the protocol stream."""
    import fcntl
    import os

    sys.stdout.flush()
    try:
        wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
    except OSError:  # descriptors that cannot be duplicated: serve the streams in place
        return sys.stdin.buffer, sys.stdout.buffer, None

    def restore() -> None:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)

    return os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False), restore


def _read_line(fh) -> tuple[bytes, bool]:
    """The next line (without its end) and whether it was cut at :data:`MAX_LINE_BYTES`;
    ``(b"", False)`` only at end of input."""
    line = fh.readline(MAX_LINE_BYTES + 1)
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:  # drop the rest of an oversized line
            rest = fh.readline(1 << 20)
            if not rest or rest.endswith(b"\n"):
                return b"x", True
    if not line:
        return b"", False
    return line.rstrip(b"\r\n") or b" ", False


@contextlib.asynccontextmanager
async def hardened_stdio(stdin=None, stdout=None):
    """The MCP stdio transport: newline-delimited JSON-RPC on binary stdin/stdout."""
    import anyio
    from mcp.shared.message import SessionMessage

    restore = None
    if stdin is None or stdout is None:
        stdin, stdout, restore = _claim_stdio()
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    lock = anyio.Lock()

    async def emit(data: bytes) -> None:
        async with lock:
            await anyio.to_thread.run_sync(_write, stdout, data)

    async def reader() -> None:
        async with read_send:
            while True:
                raw, cut = await anyio.to_thread.run_sync(_read_line, stdin, abandon_on_cancel=True)
                if not raw:
                    return  # end of input: the session ends
                if cut:
                    await emit(_error_line(None, PARSE_ERROR, "Parse error: the message is longer than "
                                                              f"{MAX_LINE_BYTES} bytes"))
                    continue
                if not raw.strip():
                    continue  # a blank line carries no message
                try:
                    message = parse_line(raw)
                except _Refused as exc:
                    await emit(_error_line(exc.request_id, exc.code, exc.message))
                    continue
                await read_send.send(SessionMessage(message))

    async def writer() -> None:
        async with write_recv:
            async for session_message in write_recv:
                message = session_message.message
                try:
                    data = _encode(message)
                except Exception as exc:  # noqa: BLE001 - never lose the answer: say why it could not be sent
                    rid = getattr(message, "id", None)
                    if rid is None or not hasattr(message, "result") and not hasattr(message, "error"):
                        continue
                    data = _error_line(rid, INTERNAL_ERROR, f"Internal error: the response could not be encoded "
                                                            f"({type(exc).__name__})")
                await emit(data)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield read_recv, write_send
            finally:
                await write_send.aclose()
                tg.cancel_scope.cancel()
    finally:
        if restore is not None:
            restore()


def _write(fh, data: bytes) -> None:
    try:
        fh.write(data)
        fh.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass  # the client is gone; the reader sees end of input
