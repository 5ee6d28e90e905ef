"""The embedding service: a RightMemory HTTP API server over a model backend.

API (compatible with RightMemory's client and server):
- ``GET /info`` -> ``{"version": 1, "embedding_model", "reranker_model", "dimensions",
  "max_batch_size", "max_candidates"}`` (plus ``cross_encoder``, ignored by others);
- ``POST /embed {"texts", "kind": "query"|"passage", "model"}`` -> ``{"model", "vectors"}``;
- ``POST /rerank {"query", "documents", "model"}`` -> ``{"model", "indices"}``.
rmtui's own services add ``POST /rmtui/tokens {"texts", "kind", "model"}`` -> ``{"model",
"vectors", "states": [{"count", "int8"}]}`` (token states as base64 int8 rows, the second
stage's MaxSim feature) and, on the local warm service, ``POST /rmtui/retrieve``.
Optional bearer token (401 when wrong), 409 when the request names another model
identity, 422 for malformed bodies and requests over the limits; errors carry ``detail``.

Why a service: loading torch and a model costs seconds, and a CLI process per agent call
would pay it every time. ``retrieve`` therefore talks to a configured service, or starts a
local one on demand (``embed_client.ensure_local_service``: detached, one per model and
user, guarded by lock files) that exits after ``embedding.idle_timeout_seconds`` without
requests. Only :func:`serve` loads a model (through :mod:`rmtui.engine.retrieval.modelhost.embeddings`).

HTTP is uvicorn (h11, asyncio) under a small ASGI app: connections cost no thread; at
most :data:`MAX_CONNECTIONS` are served at once (more get 503), a connection that sends no
complete request head within :data:`HEAD_TIMEOUT` seconds is closed, a body must arrive
within :data:`BODY_TIMEOUT` (else 408) and fit :data:`MAX_BODY_BYTES` (else 413), the
bodies held at once fit :data:`MAX_INFLIGHT_BODY_BYTES` (else 503), and the model and
retrieval work runs on :data:`WORKER_THREADS` threads. Only requests being worked on keep
the service from its idle exit; a client stalled mid-body does not. Without a token the
service binds loopback addresses only.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rmtui.engine.errors import ConflictError, EngineError, UsageError
from rmtui.engine.fsutil import atomic_write_bytes
from rmtui.engine.locks import try_lock
from rmtui.engine.retrieval.modelhost.embed_client import (  # noqa: F401  (re-exported: one import for both sides)
    MAX_BODY_BYTES,
    MAX_TEXT_CHARS,
    TOKEN_ENV,
    LocalService,
    ServiceClient,
    ServiceError,
    ensure_local_service,
    launch_done,
    service_dir,
    stop_local_service,
)
from rmtui.engine.retrieval.modelhost.model_info import ModelInfo
from rmtui.engine.retrieval.modelhost.service_lookup import UnsafeFolder, private_folder
from rmtui.engine.retrieval.modelhost.service_state import RETRIEVE_ROUTE, TOKENS_ROUTE

#: Text one /embed or /rerank request may carry in all (a full batch of the longest texts).
MAX_REQUEST_CHARS = 64 * MAX_TEXT_CHARS
MAX_INFLIGHT_BODY_BYTES = 4 * MAX_BODY_BYTES
MAX_CONNECTIONS = 512  # open connections (idle ones cost a descriptor, no thread)
WORKER_THREADS = 4
#: Called with the root before each retrieval this service runs, never waited on: what the
#: command front installs (``retrieve_upkeep.start``, which starts the sync pull check and the
#: views' refresh in the background; this package may not import either).
BEFORE_RETRIEVE: Callable[[Any], object] | None = None
HEAD_TIMEOUT = 10.0
BODY_TIMEOUT = 30.0
KEEP_ALIVE_SECONDS = 5.0
SHUTDOWN_GRACE_SECONDS = 3.0

# -- server ------------------------------------------------------------------------------

class _ApiError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _text_ok(t) -> bool:
    """A non-blank string that is valid Unicode (a ``\\ud800`` escape decodes to a lone surrogate)."""
    if not isinstance(t, str) or not t.strip():
        return False
    try:
        t.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _texts(value, field_name: str, *, allow_empty_list: bool = False) -> list[str]:
    if not isinstance(value, list) or (not value and not allow_empty_list):
        raise _ApiError(422, f"{field_name} must be a non-empty list of strings")
    total = 0
    for t in value:
        if not _text_ok(t):
            raise _ApiError(422, f"{field_name} must hold non-blank strings of valid Unicode text")
        if len(t) > MAX_TEXT_CHARS:
            raise _ApiError(422, f"a text in {field_name} is longer than {MAX_TEXT_CHARS} characters")
        total += len(t)
    if total > MAX_REQUEST_CHARS:
        raise _ApiError(422, f"{field_name} hold {total} characters in all; the limit is {MAX_REQUEST_CHARS}")
    return value


def _exact_keys(body, keys: set[str]) -> dict:
    if not isinstance(body, dict):
        raise _ApiError(422, "request body must be a JSON object")
    missing, extra = keys - set(body), set(body) - keys
    if missing:
        raise _ApiError(422, f"missing field(s): {', '.join(sorted(missing))}")
    if extra:
        raise _ApiError(422, f"unknown field(s): {', '.join(sorted(extra))}")
    return body


def _parse_body(raw: bytes):
    try:
        return json.loads(raw) if raw else None
    except RecursionError:
        raise _ApiError(422, "request body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise _ApiError(422, "request body is not valid JSON") from None


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket for ``host`` (IPv4 or IPv6 literal, or a name) and ``port``."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"cannot bind the embedding service to {host!r}: {exc.strerror}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and addr[0] == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # `::` serves IPv4 too
        sock.bind(addr)
        sock.listen(2048)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        shown = f"[{host}]" if ":" in host else host
        if exc.errno == errno.EADDRINUSE:  # say which port, and the way out
            raise UsageError(f"cannot listen on {shown}:{port}: the address is already in use (another "
                             "program, or another embedding service, holds it): stop it or pass another --port"
                             ) from None
        raise UsageError(f"cannot listen on {shown}:{port}: {exc.strerror or exc}") from None
    return sock


class EmbeddingServer:
    """HTTP front of a model backend (uvicorn in :meth:`serve_forever`); tracks activity for
    the idle exit. The socket is bound on construction, so :attr:`url` is known at once."""

    def __init__(self, address, backend, *, token: str | None = None, idle_timeout: float | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.socket = _listen(address[0], address[1])
        self.server_address = self.socket.getsockname()
        self.backend = backend
        self.token = token
        self.model_info: ModelInfo = backend.info()
        self.idle_timeout = idle_timeout
        self.ssl_context = ssl_context
        self.last_activity = time.monotonic()
        self.busy = 0
        self.inflight_body_bytes = 0
        self._activity = threading.Lock()
        self.model_lock = threading.Lock()
        self.serves_retrieval = False  # the local warm service (token, state dir) also runs retrievals
        self.preloading: threading.Thread | None = None  # reading a root's indexes while the model loads
        self._uvicorn = None
        self._state = threading.Condition()
        self._phase = "new"  # new -> serving -> stopped
        self._serving_thread: threading.Thread | None = None
        self.head_timeout = HEAD_TIMEOUT  # per instance, so a test can shorten them
        self.body_timeout = BODY_TIMEOUT
        self._prepared = None

    def touch(self, delta: int) -> None:
        with self._activity:
            self.busy += delta
            self.last_activity = time.monotonic()

    def idle_for(self) -> float:
        with self._activity:
            return 0.0 if self.busy else time.monotonic() - self.last_activity

    def reserve_body(self, size: int) -> bool:
        with self._activity:
            if self.inflight_body_bytes + size > MAX_INFLIGHT_BODY_BYTES:
                return False
            self.inflight_body_bytes += size
            return True

    def release_body(self, size: int) -> None:
        with self._activity:
            self.inflight_body_bytes -= size

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        assert isinstance(host, str)  # an AF_INET/AF_INET6 socket's host is text
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    def prepare(self) -> None:
        """Load the HTTP stack now (imports, configuration), so that serving starts at once."""
        if self._prepared is None:
            self._prepared = self._make_uvicorn()

    def _make_uvicorn(self):
        import uvicorn

        config = uvicorn.Config(
            _App(self), lifespan="off", log_config=None, log_level="warning", access_log=False,
            http=_head_timeout_protocol(self.head_timeout), limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=int(KEEP_ALIVE_SECONDS), timeout_graceful_shutdown=int(SHUTDOWN_GRACE_SECONDS),
            server_header=False, proxy_headers=False)
        config.load()
        config.ssl = self.ssl_context
        return uvicorn.Server(config)

    def serve_forever(self, poll_interval: float = 0.2) -> None:  # noqa: ARG002 - uvicorn polls every 0.1 s
        """Serve until :meth:`shutdown` (or SIGTERM/SIGINT in the main thread)."""
        server, self._prepared = self._prepared or self._make_uvicorn(), None
        with self._state:
            if self._phase != "new":
                return
            self._uvicorn, self._phase = server, "serving"
            self._serving_thread = threading.current_thread()
        try:
            server.run(sockets=[self.socket])
        finally:
            with self._state:
                self._phase = "stopped"
                self._state.notify_all()

    def shutdown(self) -> None:
        """Stop serving; waits for :meth:`serve_forever` to return when it runs elsewhere."""
        with self._state:
            if self._phase == "new":
                self._phase = "stopped"
                return
            if self._uvicorn is not None:
                self._uvicorn.should_exit = True
            if threading.current_thread() is not self._serving_thread:
                self._state.wait_for(lambda: self._phase == "stopped", timeout=SHUTDOWN_GRACE_SECONDS + 10)

    def server_close(self) -> None:
        self.socket.close()

    def watch_idle(self) -> threading.Thread:
        def loop() -> None:
            while True:
                time.sleep(min(1.0, max(0.05, (self.idle_timeout or 1) / 10)))
                if self.idle_timeout and self.idle_for() > self.idle_timeout:
                    self.shutdown()  # also before serving has begun: it then never starts
                    return

        t = threading.Thread(target=loop, name="idle-watch", daemon=True)
        t.start()
        return t

    # -- the work, on a worker thread ----------------------------------------------------

    def handle(self, method: str, route: str, raw: bytes) -> dict:
        if method == "GET" and route == "/info":
            return self.model_info.to_json()
        body = _parse_body(raw)
        if route == "/embed":
            return self._embed(body)
        if route == "/rerank":
            return self._rerank(body)
        if route == TOKENS_ROUTE:
            return self._tokens(body)
        return self._retrieve(body)

    def _embed_request(self, body) -> tuple[list[str], str]:
        """The texts and kind of a valid /embed (or /rmtui/tokens) request for this model."""
        body = _exact_keys(body, {"texts", "kind", "model"})
        texts = _texts(body["texts"], "texts")
        if body["kind"] not in ("query", "passage"):
            raise _ApiError(422, "kind must be 'query' or 'passage'")
        info = self.model_info
        _check_model(body["model"], info.embedding_model, "embedding")
        if len(texts) > info.max_batch_size:
            raise _ApiError(422, f"embedding batch of {len(texts)} exceeds the limit of {info.max_batch_size}")
        return texts, body["kind"]

    def _embed(self, body) -> dict:
        texts, kind = self._embed_request(body)
        vecs = _LockedBackend(self).embed(texts, kind)
        return {"model": self.model_info.embedding_model, "vectors": np.round(vecs.astype(np.float64), 7).tolist()}

    def _tokens(self, body) -> dict:
        import base64

        from rmtui.engine.retrieval.tokens import quantize

        texts, kind = self._embed_request(body)
        vecs, states = _LockedBackend(self).embed_tokens(texts, kind)
        return {"model": self.model_info.embedding_model, "vectors": np.round(vecs.astype(np.float64), 7).tolist(),
                "states": [{"count": len(s), "int8": base64.b64encode(quantize(s).tobytes()).decode("ascii")}
                           for s in states]}

    def _retrieve(self, body) -> dict:
        """Our own local warm service also runs whole retrievals, so a CLI call need not load
        numpy, the corpus or the vectors itself: same engine function, same locks and history."""
        from rmtui.engine.memory.roots import open_root
        from rmtui.engine.retrieval.retrieve import retrieve

        # sent only when they differ (older callers leave them out); ``render`` ("json" or
        # "text"): the thin client's call, answered with what it prints, so that it needs
        # neither json nor re to print it
        optional = {"include_pending": True, "render": None}
        body = _exact_keys({**optional, **body} if isinstance(body, dict) else body,
                           {"root", "session", "need", "top", "include_returned", *optional})
        if body["render"] not in (None, "json", "text"):
            raise _ApiError(422, 'render must be "json", "text" or null')
        for key in ("root", "session", "need"):
            if not _text_ok(body[key]):
                raise _ApiError(422, f"{key} must be a non-blank string of valid Unicode text")
        if body["top"] is not None and type(body["top"]) is not int:
            raise _ApiError(422, "top must be an integer or null")
        for flag in ("include_returned", "include_pending"):
            if type(body[flag]) is not bool:
                raise _ApiError(422, f"{flag} must be true or false")
        if self.preloading is not None:  # what it has not read yet, this call would read anyway;
            self.preloading.join(PRELOAD_WAIT_SECONDS)  # bounded: a root held locked by a writer, or another root
        try:
            root = open_root(body["root"])
            if BEFORE_RETRIEVE is not None:
                BEFORE_RETRIEVE(root)
            res = retrieve(root, body["session"], body["need"], top=body["top"],
                           include_returned=body["include_returned"], include_pending=body["include_pending"],
                           backend=_LockedBackend(self))
        except EngineError as exc:
            return {"ok": False, "exit_code": exc.exit_code, "error": exc.to_json()}
        data = res.to_json()
        if body["render"] is None:
            return {"ok": True, "data": data, "text": res.text}
        from rmtui.engine.display import json_line, text_block, warning_lines

        data["via"] = "local-service"
        return {"ok": True, "stderr": warning_lines(data.get("warnings", [])),
                "stdout": json_line(data) if body["render"] == "json" else text_block(res.text)}

    def _rerank(self, body) -> dict:
        body = _exact_keys(body, {"query", "documents", "model"})
        if not _text_ok(body["query"]) or len(body["query"]) > MAX_TEXT_CHARS:
            raise _ApiError(422, "query must be a non-blank string")
        docs = _texts(body["documents"], "documents")
        info = self.model_info
        _check_model(body["model"], info.reranker_model, "reranker")
        if len(docs) > info.max_candidates:
            raise _ApiError(422, f"{len(docs)} candidates exceed the limit of {info.max_candidates}")
        order = _LockedBackend(self).rerank(body["query"], docs)
        return {"model": info.reranker_model, "indices": [int(i) for i in order]}


class _Disconnected(Exception):
    pass


class _App:
    """The ASGI application: routing, auth and body limits on the event loop; the work
    (JSON parsing included: a large body must not stall the loop) on worker threads."""

    def __init__(self, server: EmbeddingServer) -> None:
        import anyio

        self.server = server
        self.limiter = anyio.CapacityLimiter(WORKER_THREADS)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        import anyio

        server = self.server
        method, route = scope["method"], scope["path"]
        headers = dict(scope["headers"])
        reserved = 0
        close = False
        try:
            try:
                if not self._authorized(headers.get(b"authorization", b"")):
                    raise _ApiError(401, "invalid model-service credentials")
                known = route in ("/info", "/embed", "/rerank", TOKENS_ROUTE) or (
                    route == RETRIEVE_ROUTE and server.serves_retrieval)
                if not known or (method, route == "/info") not in (("GET", True), ("POST", False)):
                    raise _ApiError(404 if not known else 405, f"no route {method} {route}")
                if method == "GET":  # answered at once, even while every worker is busy
                    server.touch(0)
                    status, payload = 200, server.model_info.to_json()
                else:
                    reserved, raw = await self._body(receive, headers)
                    server.touch(+1)  # from here the request is work: it holds off the idle exit
                    try:
                        status, payload = 200, await anyio.to_thread.run_sync(
                            server.handle, method, route, raw, limiter=self.limiter)
                    finally:
                        server.touch(-1)
            except _ApiError as exc:
                status, payload = exc.status, {"detail": exc.detail}
                close = exc.status in (408, 413)  # the rest of that body is not read
            except _Disconnected:
                return
            except Exception as exc:  # noqa: BLE001 - a model failure must still answer, never hang the client
                status, payload = 500, {"detail": f"model failure: {type(exc).__name__}: {exc}"[:500]}
        finally:
            if reserved:
                server.release_body(reserved)
        await self._send(send, status, payload, close=close)

    def _authorized(self, value: bytes) -> bool:
        token = self.server.token
        if not token:
            return True
        return secrets.compare_digest(value, f"Bearer {token}".encode())

    async def _body(self, receive, headers) -> tuple[int, bytes]:
        """The request body within the limits; answers (bytes reserved, body)."""
        import anyio

        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                raise _ApiError(422, "bad Content-Length") from None
            if size < 0:
                raise _ApiError(422, "bad Content-Length")
            if size > MAX_BODY_BYTES:
                raise _ApiError(413, "request body is too large")
        else:
            size = MAX_BODY_BYTES  # chunked: reserve the most it may grow to
        if not self.server.reserve_body(size):
            raise _ApiError(503, "the service holds too many request bodies; retry shortly")
        chunks: list[bytes] = []
        got = 0
        try:
            with anyio.fail_after(self.server.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Disconnected
                    chunk = message.get("body", b"")
                    got += len(chunk)
                    if got > MAX_BODY_BYTES:
                        raise _ApiError(413, "request body is too large")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            self.server.release_body(size)
            raise _ApiError(408, f"the request body did not arrive within {self.server.body_timeout:g} s") from None
        except BaseException:
            self.server.release_body(size)
            raise
        return size, b"".join(chunks)

    @staticmethod
    async def _send(send, status: int, payload: dict, *, close: bool = False) -> None:
        data = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        if close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})


def _head_timeout_protocol(head_timeout: float):
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimeoutH11(H11Protocol):
        """uvicorn's h11 protocol, plus: a connection must send each complete request head
        within ``head_timeout`` (uvicorn alone waits forever for a first request, and a client
        dribbling header bytes keeps resetting its keep-alive timer)."""

        _head_timer = None
        _seen_cycle = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(head_timeout, self._check_head)

        def _check_head(self) -> None:
            cycle = self.cycle
            between = cycle is None or cycle.response_complete
            if between and cycle is self._seen_cycle:  # no new request for a whole period
                if not self.transport.is_closing():
                    self.transport.close()
                return
            self._seen_cycle = cycle
            self._head_timer = self.loop.call_later(head_timeout, self._check_head)

        def connection_lost(self, exc) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

    return HeadTimeoutH11


def _check_model(asked, served: str, what: str) -> None:
    """422 for a malformed model field, 409 when the caller expects another model identity."""
    if not isinstance(asked, str):
        raise _ApiError(422, "model must be a string")
    if asked != served:
        raise _ApiError(409, f"{what} model is {served}, not {asked}; retry retrieval")


class _LockedBackend:
    """The server's model, taken under its lock (requests are served from several threads)."""

    def __init__(self, server: EmbeddingServer) -> None:
        self._server = server

    def info(self) -> ModelInfo:
        return self._server.model_info

    def embed(self, texts: list[str], kind: str) -> np.ndarray:
        with self._server.model_lock:
            return self._server.backend.embed(texts, kind)

    def embed_tokens(self, texts: list[str], kind: str):
        with self._server.model_lock:
            return self._server.backend.embed_tokens(texts, kind)

    def rerank(self, query: str, documents: list[str]) -> list[int]:
        with self._server.model_lock:
            return self._server.backend.rerank(query, documents)


def _loopback_only(host: str) -> bool:
    """Whether every address ``host`` stands for is a loopback address."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(i[4][0]).split("%", 1)[0]).is_loopback for i in infos)


def serve(*, host: str, port: int, model: str | None, model_path: str | None, reranker_path: str | None,
          token: str | None, idle_timeout: float | None, state_dir: Path | None = None,
          ready=None, backend: str = "auto", warm_roots: tuple[Path, ...] = (), device: str = "auto",
          precision: str = "float32") -> int:
    """Run the service until interrupted or idle; with ``state_dir``, as the local warm service.

    ``backend`` (``embedding.backend``) picks the embedder's runtime: with ONNX the service
    starts in well under a second, which is what makes its idle exit cheap. ``warm_roots``:
    roots whose indexes are read while the model loads (the root of the call that launched
    the service, which is about to ask for a retrieval of it).
    """
    if not _loopback_only(host) and not token:
        raise UsageError(f"refusing to serve on {host} without a token: other hosts could use the service; "
                         f"set a token (--token-env) or bind a loopback address such as 127.0.0.1 or ::1")
    alive_fd = None
    if state_dir is not None:
        try:  # the one folder rule of runtime folders (service_lookup.FOLDER_RULE)
            private_folder(state_dir)
        except UnsafeFolder as exc:
            raise UsageError(f"refusing to serve: {exc}") from None
        alive_fd = try_lock(state_dir / "alive.lock")
        if alive_fd is None:
            raise ConflictError(f"another embedding service already runs for {state_dir}")
        launch_done(state_dir)
    preloading = _preload(warm_roots, model_path) if state_dir is not None and token and model_path else None
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend  # the model: ONNX Runtime or torch

    models = InProcessBackend(model, model_path, reranker_path, device=device, backend=backend, precision=precision)
    models.warm_up()
    server = EmbeddingServer((host, port), models, token=token, idle_timeout=idle_timeout)
    server.serves_retrieval = state_dir is not None and bool(token)
    server.preloading = preloading
    server.prepare()  # before the state file announces the service
    state_file = state_dir / "state.json" if state_dir is not None else None
    if state_file is not None:
        state = {"pid": os.getpid(), "url": server.url, "token": token, "info": server.model_info.to_json(),
                 "started_at": time.time(), "runtime": models.runtime, "device": models.device,
                 "precision": precision}
        atomic_write_bytes(state_file, json.dumps(state).encode(), mode=0o600)  # its token: this user's only
    if ready is not None:
        ready(server)
    else:
        sys.stderr.write(f"rmtui embedding service on {server.url} ({server.model_info.embedding_model} "
                         f"on {models.runtime}, {models.device})\n")
        sys.stderr.flush()
    _stop_on_sigterm()
    if idle_timeout:
        server.watch_idle()
    try:
        server.serve_forever(poll_interval=0.2)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()
        if state_file is not None:
            try:
                if json.loads(state_file.read_text()).get("pid") == os.getpid():
                    state_file.unlink()
            except (OSError, ValueError):
                pass
        if alive_fd is not None:
            os.close(alive_fd)
    return 0


#: How long a retrieval waits for the preload of the launching root (which may be another root,
#: or wait itself on a root's lock) before it reads what it needs on its own.
PRELOAD_WAIT_SECONDS = 2.0


def _preload(roots: tuple[Path, ...], model_path: str) -> threading.Thread | None:
    """Read the roots' indexes in a thread while the model loads (the ONNX session's build
    and the file reads leave the interpreter lock free): the launching call's retrieval
    then finds them in memory. An optimisation only: a failure leaves that to the call."""
    if not roots:
        return None

    def run() -> None:
        from rmtui.engine.memory.roots import open_root
        from rmtui.engine.retrieval.modelhost.model_cache import model_identity
        from rmtui.engine.retrieval.retrieve import preload

        identity = model_identity(Path(model_path), "sentence-transformers")
        for root in roots:
            try:
                preload(open_root(root), identity)
            except Exception:  # noqa: BLE001 - the retrieval that follows meets and reports any error
                pass

    thread = threading.Thread(target=run, name="rmtui-preload", daemon=True)
    thread.start()
    return thread


def _stop_on_sigterm() -> None:
    """SIGTERM ends the service like Ctrl-C, so its state file is removed on the way out
    (uvicorn handles the signal while serving, then re-raises it here)."""
    import signal

    if threading.current_thread() is threading.main_thread():
        def stop(signum, frame):  # noqa: ARG001
            raise SystemExit(0)

        signal.signal(signal.SIGTERM, stop)
