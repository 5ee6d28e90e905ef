"""The MCP server over raw stdio bytes: every request with an id gets a
response, malformed input gets the JSON-RPC error the specification names, and the session
keeps working afterwards."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

import pytest

from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.mcp_server import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, parse_line


class RawServer:
    def __init__(self, root) -> None:
        env = {k: v for k, v in os.environ.items() if k.startswith(("HOME", "GIT_", "PATH", "RMTUI", "HF_"))}
        self.proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "mcp", "--root", str(root.path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.buf = b""

    def send(self, raw: bytes) -> None:
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = 60) -> dict:
        while b"\n" not in self.buf:
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            assert ready, "no answer from the MCP server"
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            assert chunk, "the MCP server closed its output"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, raw: bytes) -> dict:
        self.send(raw)
        return self.recv()

    def close(self) -> str:
        self.proc.stdin.close()
        self.proc.wait(30)
        return self.proc.stderr.read().decode("utf-8", "replace")


@pytest.fixture
def server(root):
    srv = RawServer(root)
    init = srv.call(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).encode())
    assert init["id"] == 1 and "result" in init
    srv.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    yield srv
    srv.close()


def _tool_call(rid, session: str, evidence: str) -> bytes:
    # written by hand so that escapes like \ud800 reach the wire as they are
    return (b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b',"method":"tools/call","params":{"name":'
            b'"rightmemory_submit_update","arguments":{"session_id":"' + session.encode() + b'","evidence":"'
            + evidence.encode() + b'"}}}')


MALFORMED = [
    (b"not json at all", None, PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":5,"method":', None, PARSE_ERROR),
    (b'\xff\xfe{"jsonrpc":"2.0","id":6,"method":"tools/list"}', None, PARSE_ERROR),
    (b"[" * 100_000, None, PARSE_ERROR),
    (b"[]", None, INVALID_REQUEST),
    (b'[{"jsonrpc":"2.0","id":7,"method":"tools/list"}]', None, INVALID_REQUEST),
    (b"42", None, INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":8}', 8, INVALID_REQUEST),
    (b'{"jsonrpc":"1.0","id":"nine","method":"tools/list"}', "nine", INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":10,"method":"tools/list","params":[1,2]}', 10, INVALID_PARAMS),
    (_tool_call(11, "a\\ud800", "x"), 11, INVALID_PARAMS),
    (_tool_call(12, "s", "lone \\udc00 surrogate"), 12, INVALID_PARAMS),
    (_tool_call("13", "\\udfff", "\\ud83d"), "13", INVALID_PARAMS),
]


def test_every_malformed_line_gets_the_named_error_and_the_session_goes_on(server, root):
    for raw, rid, code in MALFORMED:
        answer = server.call(raw)
        assert answer["jsonrpc"] == "2.0" and answer["id"] == rid, (raw[:60], answer)
        assert answer["error"]["code"] == code, (raw[:60], answer)
    server.send(b"   ")  # a blank line carries no message: no answer, no harm
    ok = server.call(_tool_call(20, "good-session", "valid evidence after the noise"))
    assert ok["id"] == 20 and ok["result"]["isError"] is False, ok
    listed = server.call(b'{"jsonrpc":"2.0","id":21,"method":"tools/list"}')
    assert {t["name"] for t in listed["result"]["tools"]} >= {"rightmemory_retrieve", "rightmemory_submit_update"}
    with EvidenceQueue(root) as q:
        assert [e.text for e in q.list()] == ["valid evidence after the noise"]


def test_unknown_method_and_bad_arguments_are_answered(server):
    unknown = server.call(b'{"jsonrpc":"2.0","id":30,"method":"no/such/method"}')
    assert unknown["id"] == 30 and unknown["error"]["code"] == -32601
    wrong = server.call(b'{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"rightmemory_submit_update",'
                        b'"arguments":{"session_id":7}}}')
    assert wrong["id"] == 31 and ("error" in wrong or wrong["result"]["isError"] is True)


def test_parse_line_refuses_without_the_sdk_guessing():
    import pytest as _pytest

    from rmtui.mcp_server import _Refused

    with _pytest.raises(_Refused) as exc:
        parse_line(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"k":"\\ud800"}}')
    assert exc.value.code == INVALID_PARAMS and exc.value.request_id == 1
    msg = parse_line(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
    assert msg.id == 2 and msg.method == "tools/list"
