"""The embedding service: a RightMemory HTTP API server over a model backend.

API (compatible with RightMemory's client and server):
- ``GET /info`` -> ``{"version": 1, "embedding_model", "reranker_model", "dimensions",
  "max_batch_size", "max_candidates"}`` (plus ``cross_encoder``, ignored by others);
- ``POST /embed {"texts", "kind": "query"|"passage", "model"}`` -> ``{"model", "vectors"}``;
- ``POST /rerank {"query", "documents", "model"}`` -> ``{"model", "indices"}``.
Optional bearer token (401 when wrong), 409 when the request names another model
identity, 422 for malformed bodies and requests over the limits; errors carry ``detail``.

Why a service: loading torch and a model costs seconds, and a CLI process per agent call
would pay it every time. ``retrieve`` therefore talks to a configured service, or starts a
local one on demand (``embed_client.ensure_local_service``: detached, one per model and
user, guarded by lock files) that exits after ``embedding.idle_timeout_seconds`` without
requests. Only :func:`serve` loads a model (through :mod:`rmtui.engine.embeddings`).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from rmtui.engine.embed_client import (  # noqa: F401  (re-exported: one import for both sides)
    MAX_BODY_BYTES,
    MAX_TEXT_CHARS,
    TOKEN_ENV,
    LocalService,
    ServiceClient,
    ServiceError,
    ensure_local_service,
    service_dir,
    stop_local_service,
)
from rmtui.engine.embeddings import ModelInfo
from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import try_lock
from rmtui.engine.service_state import RETRIEVE_ROUTE


# -- server ------------------------------------------------------------------------------

class _ApiError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _texts(value, field_name: str, *, allow_empty_list: bool = False) -> list[str]:
    if not isinstance(value, list) or (not value and not allow_empty_list):
        raise _ApiError(422, f"{field_name} must be a non-empty list of strings")
    for t in value:
        if not isinstance(t, str) or not t.strip():
            raise _ApiError(422, f"{field_name} must hold non-blank strings")
        if len(t) > MAX_TEXT_CHARS:
            raise _ApiError(422, f"a text in {field_name} is longer than {MAX_TEXT_CHARS} characters")
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


class EmbeddingServer(ThreadingHTTPServer):
    """HTTP front of a model backend; tracks activity for the idle exit."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, backend, *, token: str | None = None, idle_timeout: float | None = None) -> None:
        super().__init__(address, _Handler)
        self.backend = backend
        self.token = token
        self.model_info: ModelInfo = backend.info()
        self.idle_timeout = idle_timeout
        self.last_activity = time.monotonic()
        self.busy = 0
        self._activity = threading.Lock()
        self.model_lock = threading.Lock()
        self.serves_retrieval = False  # the local warm service (token, state dir) also runs retrievals

    def touch(self, delta: int) -> None:
        with self._activity:
            self.busy += delta
            self.last_activity = time.monotonic()

    def idle_for(self) -> float:
        with self._activity:
            return 0.0 if self.busy else time.monotonic() - self.last_activity

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def watch_idle(self) -> threading.Thread:
        def loop() -> None:
            while True:
                time.sleep(min(1.0, max(0.05, (self.idle_timeout or 1) / 10)))
                if self.idle_timeout and self.idle_for() > self.idle_timeout:
                    self.shutdown()
                    return

        t = threading.Thread(target=loop, name="idle-watch", daemon=True)
        t.start()
        return t


class _Handler(BaseHTTPRequestHandler):
    server: EmbeddingServer
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle on, the body would wait for the
    # client's delayed ACK (40 ms on Linux) on every kept-alive request.
    disable_nagle_algorithm = True

    def log_message(self, format, *args) -> None:  # noqa: A002 - quiet by default
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 401:
            self.send_header("WWW-Authenticate", "Bearer")
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        token = self.server.token
        if not token:
            return True
        return secrets.compare_digest(self.headers.get("Authorization", ""), f"Bearer {token}")

    def _dispatch(self, method: str) -> None:
        self.server.touch(+1)
        try:
            if not self._authorized():
                raise _ApiError(401, "invalid model-service credentials")
            route = self.path.split("?", 1)[0]
            if method == "GET" and route == "/info":
                self._send(200, self.server.model_info.to_json())
                return
            if method == "POST" and route in ("/embed", "/rerank"):
                body = self._body()
                self._send(200, self._embed(body) if route == "/embed" else self._rerank(body))
                return
            if method == "POST" and route == RETRIEVE_ROUTE and self.server.serves_retrieval:
                self._send(200, self._retrieve(self._body()))
                return
            raise _ApiError(404 if route not in ("/info", "/embed", "/rerank") else 405, f"no route {method} {route}")
        except _ApiError as exc:
            self._send(exc.status, {"detail": exc.detail})
        except Exception as exc:  # a model failure must still answer, never hang the client
            self._send(500, {"detail": f"model failure: {type(exc).__name__}: {exc}"[:500]})
        finally:
            self.server.touch(-1)

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def _body(self):
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise _ApiError(422, "bad Content-Length") from None
        if length > MAX_BODY_BYTES:
            raise _ApiError(413, "request body is too large")
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _ApiError(422, "request body is not valid JSON") from None

    def _embed(self, body) -> dict:
        body = _exact_keys(body, {"texts", "kind", "model"})
        texts = _texts(body["texts"], "texts")
        if body["kind"] not in ("query", "passage"):
            raise _ApiError(422, "kind must be 'query' or 'passage'")
        info = self.server.model_info
        _check_model(body["model"], info.embedding_model, "embedding")
        if len(texts) > info.max_batch_size:
            raise _ApiError(422, f"embedding batch of {len(texts)} exceeds the limit of {info.max_batch_size}")
        vecs = _LockedBackend(self.server).embed(texts, body["kind"])
        return {"model": info.embedding_model, "vectors": np.round(vecs.astype(np.float64), 7).tolist()}

    def _retrieve(self, body) -> dict:
        """Our own local warm service also runs whole retrievals, so a CLI call need not load
        numpy, the corpus or the vectors itself: same engine function, same locks and history."""
        from rmtui.engine.errors import EngineError
        from rmtui.engine.retrieve import retrieve
        from rmtui.engine.roots import open_root

        body = _exact_keys(body, {"root", "session", "need", "top", "include_returned"})
        try:
            root = open_root(body["root"])
            res = retrieve(root, body["session"], body["need"], top=body["top"],
                           include_returned=bool(body["include_returned"]), backend=_LockedBackend(self.server))
        except EngineError as exc:
            return {"ok": False, "exit_code": exc.exit_code, "error": exc.to_json()}
        return {"ok": True, "data": res.to_json(), "text": res.text}

    def _rerank(self, body) -> dict:
        body = _exact_keys(body, {"query", "documents", "model"})
        if not isinstance(body["query"], str) or not body["query"].strip() or len(body["query"]) > MAX_TEXT_CHARS:
            raise _ApiError(422, "query must be a non-blank string")
        docs = _texts(body["documents"], "documents")
        info = self.server.model_info
        _check_model(body["model"], info.reranker_model, "reranker")
        if len(docs) > info.max_candidates:
            raise _ApiError(422, f"{len(docs)} candidates exceed the limit of {info.max_candidates}")
        order = _LockedBackend(self.server).rerank(body["query"], docs)
        return {"model": info.reranker_model, "indices": [int(i) for i in order]}


def _check_model(asked, served: str, what: str) -> None:
    """422 for a malformed model field, 409 when the caller expects another model identity."""
    if not isinstance(asked, str):
        raise _ApiError(422, "model must be a string")
    if asked != served:
        raise _ApiError(409, f"{what} model is {served}, not {asked}; retry retrieval")


class _LockedBackend:
    """The server's model, taken under its lock (the HTTP server answers from several threads)."""

    def __init__(self, server: EmbeddingServer) -> None:
        self._server = server

    def info(self) -> ModelInfo:
        return self._server.model_info

    def embed(self, texts: list[str], kind: str) -> np.ndarray:
        with self._server.model_lock:
            return self._server.backend.embed(texts, kind)

    def rerank(self, query: str, documents: list[str]) -> list[int]:
        with self._server.model_lock:
            return self._server.backend.rerank(query, documents)


def _loopback_or_private(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_private


def serve(*, host: str, port: int, model: str | None, model_path: str | None, reranker_path: str | None,
          token: str | None, idle_timeout: float | None, state_dir: Path | None = None,
          ready=None) -> int:
    """Run the service until interrupted or idle; with ``state_dir``, as the local warm service."""
    if not _loopback_or_private(host) and not token:
        raise UsageError("without a token, bind the embedding service to a loopback or private address")
    alive_fd = None
    if state_dir is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
        alive_fd = try_lock(state_dir / "alive.lock")
        if alive_fd is None:
            raise ConflictError(f"another embedding service already runs for {state_dir}")
    from rmtui.engine.embeddings import InProcessBackend  # loads torch: only here

    backend = InProcessBackend(model, model_path, reranker_path)
    backend.warm_up()
    server = EmbeddingServer((host, port), backend, token=token, idle_timeout=idle_timeout)
    server.serves_retrieval = state_dir is not None and bool(token)
    if idle_timeout:
        server.watch_idle()
    state_file = state_dir / "state.json" if state_dir is not None else None
    if state_file is not None:
        state = {"pid": os.getpid(), "url": server.url, "token": token, "info": server.model_info.to_json(),
                 "started_at": time.time()}
        atomic_write_text(state_file, json.dumps(state))
        os.chmod(state_file, 0o600)
    if ready is not None:
        ready(server)
    else:
        sys.stderr.write(f"rmtui embedding service on {server.url} ({server.model_info.embedding_model})\n")
        sys.stderr.flush()
    _stop_on_sigterm()
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




def _stop_on_sigterm() -> None:
    """SIGTERM ends the service like Ctrl-C, so its state file is removed on the way out."""
    import signal

    if threading.current_thread() is threading.main_thread():
        def stop(signum, frame):  # noqa: ARG001
            raise SystemExit(0)

        signal.signal(signal.SIGTERM, stop)
