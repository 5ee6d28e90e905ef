"""The shared-view server against idle, slow and greedy clients, over real loopback sockets:
sockets that never send a request, or trickle a head or a body, cannot keep the server from
answering; they are closed at their deadline, and one client's pile of connections gives way
to a new request."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest
from test_shared_views import make_provider
from test_shared_views_http import request

from rmtui.engine.views import files, provider
from rmtui.engine.views.server import Limits, ViewServer

PACKAGE = "/api/views/platform/package"


@pytest.fixture
def serve(tmp_path):
    root = make_provider(tmp_path)
    provider.create_file_view(root, "platform", ["platform"])
    provider.create_question_view(root, "ask-platform", title="Ask", instructions="Answer from memory.")
    provider.build(root, "platform")
    _, file_token = files.issue_token(root, "platform", "file")
    _, question_token = files.issue_token(root, "ask-platform", "question")
    servers: list[ViewServer] = []

    def start(limits: Limits | None = None) -> tuple[str, str, str]:
        srv = ViewServer(root, port=0, limits=limits or Limits())
        servers.append(srv)
        return srv.start(), file_token, question_token

    yield start
    for srv in servers:
        srv.stop()


def _connect(url: str) -> socket.socket:
    p = urlsplit(url)
    s = socket.create_connection((p.hostname, p.port), timeout=10)
    return s


def _closed_within(s: socket.socket, seconds: float) -> float:
    """Seconds until the server closed ``s`` (what it sent first is read and dropped)."""
    start = time.monotonic()
    s.settimeout(seconds)
    try:
        while s.recv(4096):
            pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection open for {seconds} s")
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def test_forty_idle_sockets_do_not_stop_the_server(serve):
    url, token, _ = serve()  # the default limits
    idle = [_connect(url) for _ in range(40)]
    try:
        time.sleep(0.3)  # every one of them is accepted and held
        for _ in range(3):
            status, body = request(url, "GET", PACKAGE, token=token)
            assert status == 200 and body.startswith(b"PK")
    finally:
        for s in idle:
            s.close()


def test_idle_and_trickling_heads_are_closed_at_the_header_deadline(serve):
    url, token, _ = serve(Limits(header_timeout_seconds=1.0, keep_alive_seconds=30))
    silent = _connect(url)
    trickle = _connect(url)
    trickle.sendall(b"GET " + PACKAGE.encode() + b" HTTP/1.1\r\nHost: x\r\n")
    start = time.monotonic()
    for _ in range(6):  # a byte every 0.25 s would reset an idle timer forever
        time.sleep(0.25)
        try:
            trickle.sendall(b"X")
        except OSError:
            break
    assert _closed_within(trickle, 3) + (time.monotonic() - start) < 3.5
    assert _closed_within(silent, 3) < 3
    assert request(url, "GET", PACKAGE, token=token)[0] == 200  # and the server answers on


def test_a_stalled_body_is_closed_at_the_body_deadline(serve):
    url, _, question_token = serve(Limits(body_timeout_seconds=1.0))
    s = _connect(url)
    s.sendall(b"POST /api/share/questions/ask-platform/ask HTTP/1.1\r\nHost: x\r\n"
              b"Authorization: Bearer " + question_token.encode() + b"\r\n"
              b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"question\": ")
    assert _closed_within(s, 4) < 4
    s.close()
    status, _ = request(url, "GET", "/api/share/questions/ask-platform/ready", token=question_token)
    assert status == 200


def test_one_clients_pile_gives_way_and_busy_connections_are_never_dropped(serve):
    url, token, question_token = serve(Limits(max_connections=6, max_connections_per_client=3,
                                              header_timeout_seconds=30))
    first = [_connect(url) for _ in range(3)]
    time.sleep(0.2)
    newer = [_connect(url) for _ in range(3)]  # each takes the place of the oldest idle one
    for s in first:
        assert _closed_within(s, 3) < 3
    # a request in flight is never evicted: a half-sent body keeps its connection
    busy = newer[0]
    busy.sendall(b"POST /api/share/questions/ask-platform/ask HTTP/1.1\r\nHost: x\r\n"
                 b"Authorization: Bearer " + question_token.encode() + b"\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{")
    time.sleep(0.2)
    status, body = request(url, "GET", PACKAGE, token=token)
    assert status == 200 and body.startswith(b"PK")
    busy.settimeout(0.3)
    with pytest.raises(TimeoutError):
        busy.recv(1)  # still open, still waiting for its body
    for s in newer:
        s.close()


def test_when_every_connection_is_busy_a_new_one_gets_503(serve):
    url, _, question_token = serve(Limits(max_connections=2, max_connections_per_client=2, body_timeout_seconds=5))
    busy = [_connect(url) for _ in range(2)]
    for s in busy:  # each is in the middle of a request body: never evicted
        s.sendall(b"POST /api/share/questions/ask-platform/ask HTTP/1.1\r\nHost: x\r\n"
                  b"Authorization: Bearer " + question_token.encode() + b"\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{")
    time.sleep(0.3)
    late = _connect(url)
    late.settimeout(5)
    answer = late.recv(4096)
    assert answer.startswith(b"HTTP/1.1 503 ") and b"every connection is busy" in answer
    for s in [*busy, late]:
        s.close()
