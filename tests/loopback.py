"""A loopback HTTP server that answers every request with one JSON body: a misbehaving or planted
service, for tests of what a client trusts."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonAnswers:
    """Answers every GET and POST with ``body`` and records each request as (path, body bytes)."""

    def __init__(self, body: dict) -> None:
        raw = json.dumps(body).encode()
        self.requests: list[tuple[str, bytes]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer(b"")

            def do_POST(self) -> None:
                self._answer(self.rfile.read(int(self.headers.get("content-length") or 0)))

            def _answer(self, request_body: bytes) -> None:
                seen.append((self.path, request_body))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
