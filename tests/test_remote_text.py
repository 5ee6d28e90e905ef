"""Text from another machine is quoted, never obeyed: a configured embedding service's error
detail, a view provider's error message and a Git remote's refusal reach stderr, status files
and JSON as one bounded line with ESC, C1 and bidi controls written as visible escapes (real
HTTP servers on loopback, a real Git fetch, the real CLI)."""

from __future__ import annotations

import json
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from test_sync import git, machines, upstream  # noqa: F401  (fixtures)

from rmtui.engine.display import REMOTE_TEXT_CHARS, remote_text
from rmtui.engine.memory.config import set_config_value
from tests.retrieve_kit import write_small_root

EVIL = "pwned \x1b[2J\x1b]0;title\x07 \u202eevil\u2066 \x9b31m\nsecond line\r\n"
RAW = ("\x1b", "\x07", "\u202e", "\u2066", "\x9b")


def _clean(text: str) -> None:
    for c in RAW:
        assert c not in text, (c, text[:400])


class Hostile:
    """Answers every request with ``status`` and a JSON body whose text fields carry ``EVIL``
    and a long tail (a broken or hostile remote party)."""

    def __init__(self, status: int, body: dict) -> None:
        payload = json.dumps(body).encode()

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile():
    started: list[Hostile] = []

    def start(status: int, body: dict) -> Hostile:
        started.append(Hostile(status, body))
        return started[-1]

    yield start
    for h in started:
        h.stop()


def test_remote_text_is_one_bounded_line_of_visible_escapes():
    out = remote_text(EVIL + "x" * 5000)
    _clean(out)
    assert "\n" not in out and "\r" not in out and len(out) <= REMOTE_TEXT_CHARS * 6 + 1 and out.endswith("…")
    assert out.startswith("pwned \\x1b[2J\\x1b]0;title\\x07 \\u202eevil\\u2066 \\x9b31m\\x0asecond line")
    assert remote_text(b"\xff\x1b") == "\ufffd\\x1b" and remote_text("fine") == "fine"


def test_embedding_service_error_detail_is_quoted_on_stderr(cli, root, hostile):
    svc = hostile(400, {"detail": EVIL + "y" * 5000})
    write_small_root(root)
    set_config_value(root.path, "embedding.service_url", svc.url)
    r = cli("--headless", "retrieve", "--root", str(root.path), "--session", "s1", "who looks after billing?")
    assert r.code == 0, r.stderr  # lexical retrieval answers; the service's refusal is a warning
    _clean(r.stderr)
    warning = [line for line in r.stderr.splitlines() if "warning" in line]
    assert warning and "pwned \\x1b[2J" in warning[0] and "second line" in warning[0], r.stderr
    assert all(len(line) < 2000 for line in r.stderr.splitlines()), [len(x) for x in r.stderr.splitlines()]


def test_view_provider_error_message_is_quoted(cli, tmp_path, hostile):
    from test_shared_views import make_consumer

    prov = hostile(500, {"ok": False, "message": EVIL + "z" * 100_000})
    cons = make_consumer(tmp_path)
    r = cli("--headless", "shared-view", "connect", f"{prov.url}/api/views/platform", "--token-env", "VIEW_TOKEN",
            "--root", str(cons.path), env={"VIEW_TOKEN": "t0ken"})
    assert r.code == 4, (r.stdout, r.stderr)
    both = r.stdout + r.stderr
    _clean(both)
    assert "HTTP 500: pwned \\x1b[2J" in both and "\\x0asecond line" in both, both[:1000]
    assert len(both) < 5000


def test_git_remote_refusal_is_quoted_in_sync_status(machines, cli, tmp_path):  # noqa: F811
    a, _ = machines
    script = tmp_path / "evil-upload-pack"
    msg = "ERR access denied \u202eevil\u2066 and more"
    pkt = f"{len(msg.encode()) + 4:04x}{msg}"
    script.write_text(f"#!/bin/sh\nprintf '%s' '{pkt}'\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    git(a.path, "config", "remote.origin.uploadpack", str(script))
    r = cli("--headless", "sync", "pull", "--json", "--root", str(a.path))
    out = json.loads(r.stdout)
    assert out["status"] in ("error", "offline") and "access denied \\u202eevil\\u2066" in out["message"], out
    state = (a.runtime / "sync" / "state.json").read_text(encoding="utf-8")
    _clean(state)
    assert "access denied" in state
    st = cli("--headless", "sync", "status", "--root", str(a.path))
    _clean(st.stdout + st.stderr)


class DeepHostile(Hostile):
    """Answers 200 with JSON nested far deeper than any parser follows."""

    def __init__(self) -> None:
        super().__init__(200, {})
        deep = b"[" * 200_000 + b"]" * 200_000
        handler = self.server.RequestHandlerClass

        def answer(h) -> None:
            h.send_response(200)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(deep)))
            h.end_headers()
            h.wfile.write(deep)

        handler.do_GET = handler.do_POST = answer  # type: ignore[attr-defined]


def test_json_nested_too_deep_from_a_remote_is_refused_by_name(cli, root, tmp_path):
    from test_shared_views import make_consumer

    svc = DeepHostile()
    try:
        write_small_root(root)
        set_config_value(root.path, "embedding.service_url", svc.url)
        r = cli("--headless", "retrieve", "--root", str(root.path), "--session", "s1", "who looks after billing?")
        assert r.code == 0 and "internal error" not in r.stderr and "invalid JSON" in r.stderr, r.stderr[:500]
        cons = make_consumer(tmp_path)
        r = cli("--headless", "shared-view", "connect", f"{svc.url}/api/share/questions/ask", "--token-env", "T",
                "--root", str(cons.path), env={"T": "t0ken"})
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr[:500]
        assert r.code == 4 and "invalid JSON" in r.stdout + r.stderr, (r.stdout[:300], r.stderr[:300])
    finally:
        svc.stop()


def test_a_garbage_status_line_is_quoted(cli, root, tmp_path):
    import socket

    from test_shared_views import make_consumer

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(EVIL.encode() + b"\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    try:
        write_small_root(root)
        set_config_value(root.path, "embedding.service_url", f"http://127.0.0.1:{port}")
        r = cli("--headless", "retrieve", "--root", str(root.path), "--session", "s1", "who looks after billing?")
        assert r.code == 0 and "unavailable" in r.stderr, r.stderr
        cons = make_consumer(tmp_path)
        v = cli("--headless", "shared-view", "connect", f"http://127.0.0.1:{port}/api/views/platform", "--token-env",
                "T", "--root", str(cons.path), env={"T": "t0ken"})
        assert v.code == 4 and "unreachable" in v.stdout + v.stderr, (v.stdout, v.stderr)
        for out in (r.stderr, v.stdout + v.stderr):
            _clean(out)
            assert len([line for line in out.splitlines() if "pwned" in line]) == 1, out
        # what a front (the workbench) shows is the engine's message itself
        from rmtui.engine.retrieval.modelhost.service_http import JsonHttpClient, ServiceError
        from rmtui.engine.views.client import ProviderClient, ProviderError

        with pytest.raises(ProviderError) as provider_error:
            ProviderClient(f"http://127.0.0.1:{port}", "t0ken", timeout=10).package("platform")
        with pytest.raises(ServiceError) as service_error:
            JsonHttpClient(f"http://127.0.0.1:{port}", None, timeout=10).request("GET", "/info")
        for exc in (provider_error.value, service_error.value):
            assert "pwned" in exc.message
            _clean(exc.message)
    finally:
        listener.close()
