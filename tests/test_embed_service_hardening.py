"""The embedding service under hostile or careless clients: binding
rules, IPv6, concurrency, slow clients, body size and cost limits, bad bodies."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rmtui.engine.retrieval.modelhost.embed_service import (
    MAX_BODY_BYTES,
    MAX_REQUEST_CHARS,
    MAX_TEXT_CHARS,
    EmbeddingServer,
    _loopback_only,
)
from tests.retrieve_kit import TOKEN, ServerThread

AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def post(url_host: str, port: int, route: str, body: bytes, headers=None, timeout: float = 60):
    conn = http.client.HTTPConnection(url_host, port, timeout=timeout)
    try:
        conn.request("POST", route, body=body, headers=headers or AUTH)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def _port(srv) -> int:
    return srv.server.server_address[1]


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_non_loopback_bind_without_token_is_refused_before_loading_a_model(cli, host):
    r = cli("--headless", "embedding-service", "--host", host, "--port", "0", "--token-env", "RMTUI_NO_SUCH_TOKEN",
                timeout=60)
    assert r.code == 2, (r.stdout, r.stderr)
    assert "without a token" in r.stderr and "Traceback" not in r.stderr


def test_loopback_rule():
    assert _loopback_only("127.0.0.1") and _loopback_only("::1") and _loopback_only("localhost")
    assert _loopback_only("127.8.9.1")
    for host in ("0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "172.16.0.1", "fd00::1", "8.8.8.8"):
        assert not _loopback_only(host), host


def _ipv6_ok() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_ok(), reason="no IPv6 loopback here")
@pytest.mark.parametrize("host", ["::1", "::"])
def test_ipv6_bind_serves(plain_backend, host):
    srv = ServerThread(plain_backend, TOKEN, host=host)
    try:
        assert srv.url.startswith("http://[")
        conn = http.client.HTTPConnection("::1", _port(srv), timeout=30)
        conn.request("GET", "/info", headers=AUTH)
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["dimensions"] == 384
        conn.close()
    finally:
        srv.stop()


def test_fifty_concurrent_requests_are_all_answered(service):
    port = _port(service)
    info = json.loads(_get(port, "/info"))
    body = json.dumps({"texts": ["concurrency"], "kind": "query", "model": info["embedding_model"]}).encode()
    start = threading.Barrier(50)

    def one(i):
        start.wait()
        if i % 2:
            return post("127.0.0.1", port, "/embed", body)[0]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("GET", "/info", headers=AUTH)
            return conn.getresponse().status
        finally:
            conn.close()

    with ThreadPoolExecutor(50) as pool:
        statuses = list(pool.map(one, range(50)))
    assert statuses == [200] * 50


def _get(port: int, route: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", route, headers=AUTH)
        return conn.getresponse().read()
    finally:
        conn.close()


def test_idle_connections_cost_no_thread_and_are_closed(plain_backend):
    server = EmbeddingServer(("127.0.0.1", 0), plain_backend, token=TOKEN)
    server.head_timeout = 1.0
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    port = server.server_address[1]
    try:
        _get(port, "/info")
        before = threading.active_count()
        socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(200)]
        time.sleep(0.5)
        assert threading.active_count() - before < 10  # not a thread per connection
        socks[0].sendall(b"GET /info HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
        for s in socks:
            assert s.recv(1) == b""  # closed by the service within a few head timeouts
        assert json.loads(_get(port, "/info"))["version"] == 1
    finally:
        for s in socks:
            s.close()
        server.shutdown()
        server.server_close()


def test_stalled_body_gets_408_and_does_not_hold_off_the_idle_exit(plain_backend):
    server = EmbeddingServer(("127.0.0.1", 0), plain_backend, token=TOKEN, idle_timeout=1.0)
    server.body_timeout = 1.5
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    port = server.server_address[1]
    stalled = socket.create_connection(("127.0.0.1", port), timeout=20)
    stalled.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                    + b"\r\nContent-Length: 1000\r\n\r\n{\"texts\": [")
    answer = stalled.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    second = socket.create_connection(("127.0.0.1", port), timeout=20)
    second.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")  # and stays stalled
    watcher = server.watch_idle()
    t.join(timeout=15)
    assert not t.is_alive(), "a stalled client kept the service from its idle exit"
    watcher.join(timeout=5)
    assert not watcher.is_alive()
    stalled.close()
    second.close()
    server.server_close()


def test_bad_bodies_are_4xx_not_500(service):
    port = _port(service)
    info = json.loads(_get(port, "/info"))
    m = info["embedding_model"]
    cases = [
        b"[" * 200_000 + b"]" * 200_000,  # nested far past the parser's recursion limit
        b'{"texts": ["a\\ud800b"], "kind": "query", "model": "' + m.encode() + b'"}',  # lone surrogate
        b'{"texts": ["\\udfff"], "kind": "passage", "model": "' + m.encode() + b'"}',
        b'\xff\xfe not utf-8',
        b'{"texts": [["nested"]], "kind": "query", "model": "' + m.encode() + b'"}',
    ]
    for body in cases:
        status, out = post("127.0.0.1", port, "/embed", body)
        assert 400 <= status < 500, (body[:60], status, out)
        assert out["detail"]
    status, out = post("127.0.0.1", port, "/rerank", b'{"query": "\\ud800", "documents": ["d"], "model": "'
                       + info["reranker_model"].encode() + b'"}')
    assert status == 422, out


def test_retrieve_route_checks_its_fields(service, tmp_path):
    service.server.serves_retrieval = True
    try:
        port = _port(service)
        good = {"root": str(tmp_path), "session": "s", "need": "n", "top": None, "include_returned": False}
        for bad in ({"root": 7}, {"session": "a\ud800"}, {"need": ["x"]}, {"top": "3"}, {"include_returned": 1}):
            body = json.dumps({**good, **bad}).encode()
            status, out = post("127.0.0.1", port, "/rmtui/retrieve", body)
            assert status == 422, (bad, status, out)
    finally:
        service.server.serves_retrieval = False


def test_body_size_and_request_cost_are_bounded(service):
    port = _port(service)
    info = json.loads(_get(port, "/info"))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", "/embed")
    for k, v in {**AUTH, "Content-Length": str(MAX_BODY_BYTES + 1)}.items():
        conn.putheader(k, v)
    conn.endheaders()  # the body is never sent: the size alone is refused
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()
    # each text within its own limit, but more text in all than one request may carry
    n = MAX_REQUEST_CHARS // (MAX_TEXT_CHARS // 2) + 1
    assert n <= info["max_candidates"]
    docs = ["word " * (MAX_TEXT_CHARS // 10)] * n
    t0 = time.monotonic()
    status, out = post("127.0.0.1", port, "/rerank", json.dumps(
        {"query": "q", "documents": docs, "model": info["reranker_model"]}).encode())
    assert status == 422 and "limit" in out["detail"]
    assert time.monotonic() - t0 < 20
