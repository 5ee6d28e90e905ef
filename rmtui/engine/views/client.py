"""The consumer's HTTP client of a shared view provider (routes: docs/formats.md, "Shared views"), on ``http.client``.

``GET /api/views/<view>/package`` (the version-2 package as a zip), ``GET
/api/share/questions/<view>/ready`` and ``POST /api/share/questions/<view>/ask``, each with
the connection's bearer token. Responses are size-bounded; a refused token is told apart
from an unreachable provider, and both from one too slow to answer within the request's
total budget.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from rmtui.engine.display import remote_text
from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.views import files
from rmtui.engine.views.deadline import Deadline
from rmtui.engine.views.package import MAX_BYTES

MAX_JSON_BYTES = 1024 * 1024
MAX_PACKAGE_BYTES = MAX_BYTES + 1024 * 1024  # a zip of a maximal package, with headroom for its directory
_VIEW_PATH = re.compile(r"^(?P<base>.*?)/api/views/(?P<id>[^/]+)(?:/package)?/?$")
_QUESTION_PATH = re.compile(r"^(?P<base>.*?)/api/share/questions/(?P<id>[^/]+)(?:/ask|/ready)?/?$")


def refusal_text(raw: bytes) -> str:
    """The reason a refusal gives, from either body a provider or hub sends: rmtui's
    ``{"message": …}``, the hub's ``{"detail": "…"}``, or the list of problems the original
    hub's framework sends as ``detail`` (``[{"msg": …}, …]``); else the bytes themselves."""
    try:
        got = json.loads(raw)
    except (ValueError, RecursionError):
        return raw.decode("utf-8", "replace")
    if not isinstance(got, dict):
        return raw.decode("utf-8", "replace")
    found = got.get("message") or got.get("detail")
    if isinstance(found, list):
        found = "; ".join(str(p.get("msg")) if isinstance(p, dict) else str(p) for p in found[:5])
    return str(found) if found else ""


class ProviderError(UnavailableError):
    """The provider could not be reached, refused the token, or answered nonsense (exit 4)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, details={"status": status} if status else None)
        self.status = status


@dataclass(frozen=True)
class ProviderURL:
    base_url: str
    kind: str  # "file" | "question"
    view_id: str


def parse_provider_url(url: str) -> ProviderURL:
    """``http(s)://host[:port][/prefix]/api/views/<view>`` (a file view),
    ``…/api/share/questions/<view>`` (a question view), or a base URL with ``#view=<id>`` /
    ``#question=<id>``."""
    p = urlsplit(url.strip())
    if p.scheme not in ("http", "https") or not p.hostname:
        raise UsageError(f"{url!r} must be an http(s):// URL of a shared view provider")
    if p.username or p.password:
        raise UsageError(f"{url!r} must not carry credentials; pass the token with --token-env")
    frag = dict(part.split("=", 1) for part in p.fragment.split("&") if "=" in part)
    base_path = p.path.rstrip("/")
    if "view" in frag or "question" in frag:
        kind = "file" if "view" in frag else "question"
        vid = frag.get("view") or frag.get("question") or ""
    elif m := _VIEW_PATH.match(p.path):
        kind, vid, base_path = "file", m.group("id"), m.group("base")
    elif m := _QUESTION_PATH.match(p.path):
        kind, vid, base_path = "question", m.group("id"), m.group("base")
    else:
        raise UsageError(f"{url!r} names no view: use …/api/views/<view>, …/api/share/questions/<view>, "
                         "or add #view=<view>")
    base = urlunsplit((p.scheme, p.netloc, base_path, "", ""))
    return ProviderURL(base.rstrip("/"), kind, files.check_view_id(vid))


class _Watchdog:
    """Shuts the connection's socket when the deadline passes, wherever the request waits then
    (connect, TLS handshake, send, status line, headers, body): http.client's timeout bounds only
    each single read, which a peer sending a byte at a time never lets expire."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float) -> None:
        self.fired = False
        self._conn = conn
        self._done = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            sock = self._conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()


class ProviderClient:
    """``timeout`` bounds each request as a whole (not each read); ``deadline``, when given, is one
    budget every request of this client shares (an ``accept`` and its first pull)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0, cafile: str | None = None,
                 deadline: Deadline | None = None) -> None:
        self._parts = urlsplit(base_url.rstrip("/"))
        if self._parts.scheme not in ("http", "https") or not self._parts.hostname:
            raise UsageError(f"provider URL {base_url!r} must be http(s)://host[:port]")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.cafile = cafile
        self.deadline = deadline

    def _request(self, method: str, route: str, body: bytes | None, limit: int,
                 content_type: str = "application/json") -> tuple[int, dict, bytes]:
        budget = Deadline.after(self.timeout).sooner(self.deadline)
        slow = budget.too_slow(f"provider at {self.base_url}")
        left = budget.left()
        if left <= 0:
            raise ProviderError(slow)
        host, port = self._parts.hostname or "", self._parts.port
        conn: http.client.HTTPConnection
        if self._parts.scheme == "https":
            ctx = ssl.create_default_context(cafile=self.cafile)
            conn = http.client.HTTPSConnection(host, port, timeout=left, context=ctx)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=left)
        headers = {"Accept": "application/json, application/zip"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            headers["Content-Type"] = content_type
        watch = _Watchdog(conn, left)
        try:
            conn.connect()  # here, so the watchdog finds the socket from now on
            if watch.fired:
                raise ProviderError(slow)
            conn.request(method, (self._parts.path or "") + route, body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read(limit + 1)
            if watch.fired:  # what was read after the socket was shut is no answer
                raise ProviderError(slow)
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, raw
        except ssl.SSLCertVerificationError as exc:
            raise ProviderError(f"provider at {self.base_url} has an untrusted certificate: {exc.verify_message}") \
                from None
        except (OSError, http.client.HTTPException) as exc:
            if watch.fired or isinstance(exc, TimeoutError):
                raise ProviderError(slow) from None
            # a malformed answer's exception quotes the provider's bytes (a bad status line)
            raise ProviderError(f"provider at {self.base_url} is unreachable: {remote_text(exc)}") from None
        finally:
            watch.cancel()
            conn.close()

    def _check(self, status: int, raw: bytes, limit: int, what: str, ok: tuple[int, ...] = (200,)) -> None:
        if len(raw) > limit:
            raise ProviderError(f"{what}: the provider's answer is over {limit} bytes")
        if status in (401, 403):
            why = refusal_text(raw)
            raise ProviderError(f"{what}: the provider refused the token (HTTP {status}"
                                + (f": {remote_text(why, 200)})" if why else ")"), status=status)
        if status not in ok:
            raise ProviderError(f"{what}: HTTP {status}: {remote_text(refusal_text(raw))}", status=status)

    def _json(self, method: str, route: str, payload: dict | None, what: str, *, ok: tuple[int, ...] = (200,),
              body: bytes | None = None, content_type: str = "application/json") -> dict:
        if payload is not None:
            body = json.dumps(payload, ensure_ascii=False).encode()
        status, _headers, raw = self._request(method, route, body, MAX_JSON_BYTES, content_type)
        self._check(status, raw, MAX_JSON_BYTES, what, ok)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):  # nested deeper than the parser follows is no answer either
            raise ProviderError(f"{what}: the provider answered invalid JSON") from None
        if not isinstance(data, dict):
            raise ProviderError(f"{what}: the provider's answer is not a JSON object")
        return data

    def package(self, view_id: str) -> bytes:
        what = f"package of {view_id}"
        status, headers, raw = self._request("GET", f"/api/views/{quote(view_id, safe='')}/package", None,
                                             MAX_PACKAGE_BYTES)
        self._check(status, raw, MAX_PACKAGE_BYTES, what)
        if "zip" not in headers.get("content-type", ""):
            raise ProviderError(f"{what}: the provider did not send a zip package")
        return raw

    def ready(self, view_id: str) -> dict:
        return self._json("GET", f"/api/share/questions/{quote(view_id, safe='')}/ready", None,
                          f"question view {view_id}")

    def ask(self, view_id: str, question: str) -> dict:
        data = self._json("POST", f"/api/share/questions/{quote(view_id, safe='')}/ask", {"question": question},
                          f"question to {view_id}")
        inner = data.get("data")
        return inner if isinstance(inner, dict) else data
