"""The one HTTP client of embedding services: the RightMemory API (``/info``, ``/embed``,
``/rerank``) and rmtui's local retrieve route alike.

Standard library ``http.client`` over one kept-alive connection (``https://`` verified
against the system trust store, ``SSL_CERT_FILE``, or a given CA file), JSON in and out,
bearer token, bounded response size, and a total deadline per request: ``timeout`` bounds
the whole request (connect, send, every byte of the answer), so a service that sends its
answer a few bytes at a time cannot hold a call past it. Kept free of numpy so a warm CLI
call stays cheap.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import ssl
import time
from urllib.parse import urlsplit

from rmtui.engine.display import remote_text
from rmtui.engine.errors import UnavailableError, UsageError

MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class ServiceError(UnavailableError):
    """The embedding service could not complete a valid request (exit 4)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, details={"status": status} if status else None)
        self.status = status


class _Deadline(io.RawIOBase):
    """The answer's bytes as ``http.client`` reads them (the socket's own reader), each read
    bounded by what is left of the request's total time: a per-read timeout alone never ends
    a trickle."""

    def __init__(self, raw, sock: socket.socket, deadline: float) -> None:
        self.raw, self.sock, self.deadline = raw, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no whole answer before the deadline")
        self.sock.settimeout(left)
        return self.raw.readinto(buffer)

    def close(self) -> None:
        self.raw.close()  # the socket reader's reference: the connection's close waits for it
        super().close()


def _bounded_response(deadline: float) -> type[http.client.HTTPResponse]:
    """An answer class whose every read goes through :class:`_Deadline`."""

    class BoundedResponse(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args, **kwargs) -> None:
            super().__init__(sock, *args, **kwargs)
            self.fp = io.BufferedReader(_Deadline(self.fp.detach(), sock, deadline))

    return BoundedResponse


class JsonHttpClient:
    """JSON requests to one service base URL, reusing one connection between calls."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 120.0,
                 cafile: str | None = None) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"embedding service URL {url!r} must be http(s)://host:port")
        if parts.username or parts.password:
            raise UsageError(f"embedding service URL {url!r} must not carry credentials; use a token")
        self.url = url.rstrip("/")
        self._parts = parts
        self.token = token
        self.timeout = timeout
        self.cafile = cafile
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            host, port = self._parts.hostname or "", self._parts.port
            if self._parts.scheme == "https":
                context = ssl.create_default_context(cafile=self.cafile)
                self._conn = http.client.HTTPSConnection(host, port, timeout=self.timeout, context=context)
            else:
                self._conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, route: str, payload: dict | None = None) -> tuple[int, object]:
        """Send one request; (HTTP status, decoded JSON body or ``{}`` when empty)."""
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        body = None
        if payload is not None:
            body = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        path = (self._parts.path or "") + route
        deadline = time.monotonic() + self.timeout
        for attempt in (0, 1):  # a kept-alive connection may have been closed by the server
            reused = self._conn is not None and self._conn.sock is not None
            try:
                conn = self._connection()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no time left")
                conn.timeout = left  # connect and send
                if conn.sock is not None:
                    conn.sock.settimeout(left)
                conn.response_class = _bounded_response(deadline)
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
                status = resp.status
                if resp.will_close:
                    self.close()
                break
            except ssl.SSLCertVerificationError as exc:
                self.close()
                raise ServiceError(f"embedding service at {self.url} has an untrusted certificate: "
                                   f"{exc.verify_message}") from exc
            except TimeoutError as exc:  # asked once: a slow service is not asked again
                self.close()
                raise ServiceError(f"embedding service at {self.url} did not answer within "
                                   f"{self.timeout:g} s") from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt or not reused:
                    # a malformed answer's exception quotes the service's bytes (a bad status line)
                    raise ServiceError(f"embedding service at {self.url} is unavailable: {remote_text(exc)}") from exc
        if len(raw) > MAX_RESPONSE_BYTES:
            self.close()
            raise ServiceError("embedding service response is too large")
        try:
            return status, (json.loads(raw) if raw else {})
        except (ValueError, RecursionError):  # nested deeper than the parser follows is no answer either
            raise ServiceError(f"embedding service returned invalid JSON (HTTP {status})") from None
