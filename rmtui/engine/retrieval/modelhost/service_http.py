"""The one HTTP client of embedding services: the RightMemory API (``/info``, ``/embed``,
``/rerank``) and rmtui's local retrieve route alike.

Standard library ``http.client`` over one kept-alive connection (``https://`` verified
against the system trust store, ``SSL_CERT_FILE``, or a given CA file), JSON in and out,
bearer token, bounded response size. Kept free of numpy so a warm CLI call stays cheap.
"""

from __future__ import annotations

import http.client
import json
import ssl
from urllib.parse import urlsplit

from rmtui.engine.display import remote_text
from rmtui.engine.errors import UnavailableError, UsageError

MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class ServiceError(UnavailableError):
    """The embedding service could not complete a valid request (exit 4)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, details={"status": status} if status else None)
        self.status = status


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
        for attempt in (0, 1):  # a kept-alive connection may have been closed by the server
            try:
                conn = self._connection()
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
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt:
                    # a malformed answer's exception quotes the service's bytes (a bad status line)
                    raise ServiceError(f"embedding service at {self.url} is unavailable: {remote_text(exc)}") from exc
        if len(raw) > MAX_RESPONSE_BYTES:
            self.close()
            raise ServiceError("embedding service response is too large")
        try:
            return status, (json.loads(raw) if raw else {})
        except (ValueError, RecursionError):  # nested deeper than the parser follows is no answer either
            raise ServiceError(f"embedding service returned invalid JSON (HTTP {status})") from None
