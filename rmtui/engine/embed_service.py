"""The embedding service: RightMemory HTTP API server, its client, and the local warm service.

API (compatible with RightMemory's client and server):
- ``GET /info`` -> ``{"version": 1, "embedding_model", "reranker_model", "dimensions",
  "max_batch_size", "max_candidates"}`` (plus ``cross_encoder``, ignored by others);
- ``POST /embed {"texts", "kind": "query"|"passage", "model"}`` -> ``{"model", "vectors"}``;
- ``POST /rerank {"query", "documents", "model"}`` -> ``{"model", "indices"}``.
Optional bearer token (401 when wrong), 409 when the request names another model
identity, 422 for malformed bodies and requests over the limits; errors carry ``detail``.

Why a service: loading torch and a model costs seconds, and a CLI process per agent call
would pay it every time. ``retrieve`` therefore talks to a configured service, or starts a
local one on demand (detached, one per model and user, guarded by lock files) that exits
after ``embedding.idle_timeout_seconds`` without requests. This module imports no torch;
only :func:`serve` loads a model (through :mod:`rmtui.engine.embeddings`).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from rmtui.engine.embeddings import ModelInfo
from rmtui.engine.errors import ConflictError, UnavailableError, UsageError
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import file_lock, try_lock

MAX_TEXT_CHARS = 131072
MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
TOKEN_ENV = "RIGHTMEMORY_EMBEDDING_API_KEY"


class ServiceError(UnavailableError):
    """The embedding service could not complete a valid request (exit 4)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, details={"status": status} if status else None)
        self.status = status


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
        if not isinstance(body["model"], str):
            raise _ApiError(422, "model must be a string")
        if body["model"] != info.embedding_model:
            raise _ApiError(409, f"embedding model is {info.embedding_model}, not {body['model']}; retry retrieval")
        if len(texts) > info.max_batch_size:
            raise _ApiError(422, f"embedding batch of {len(texts)} exceeds the limit of {info.max_batch_size}")
        with self.server.model_lock:
            vecs = self.server.backend.embed(texts, body["kind"])
        return {"model": info.embedding_model, "vectors": np.round(vecs.astype(np.float64), 7).tolist()}

    def _rerank(self, body) -> dict:
        body = _exact_keys(body, {"query", "documents", "model"})
        if not isinstance(body["query"], str) or not body["query"].strip() or len(body["query"]) > MAX_TEXT_CHARS:
            raise _ApiError(422, "query must be a non-blank string")
        docs = _texts(body["documents"], "documents")
        info = self.server.model_info
        if not isinstance(body["model"], str):
            raise _ApiError(422, "model must be a string")
        if body["model"] != info.reranker_model:
            raise _ApiError(409, f"reranker model is {info.reranker_model}, not {body['model']}; retry retrieval")
        if len(docs) > info.max_candidates:
            raise _ApiError(422, f"{len(docs)} candidates exceed the limit of {info.max_candidates}")
        with self.server.model_lock:
            order = self.server.backend.rerank(body["query"], docs)
        return {"model": info.reranker_model, "indices": [int(i) for i in order]}


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
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
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


# -- client ------------------------------------------------------------------------------

class ServiceClient:
    """Client of any RightMemory embedding service; validates every answer."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 120.0,
                 info: dict | None = None) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"embedding service URL {url!r} must be http(s)://host:port")
        self.url = url.rstrip("/")
        self._parts = parts
        self.token = token
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._info: ModelInfo | None = None
        if info is not None:  # known from the local service's state file: saves a round trip
            try:
                self._info = self._parse_info(info)
            except ServiceError:
                self._info = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._parts.hostname, self._parts.port, timeout=self.timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, route: str, payload: dict | None = None) -> dict:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        body = None
        if payload is not None:
            body = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        prefix = self._parts.path or ""
        for attempt in (0, 1):  # a kept-alive connection may have been closed by the server
            try:
                conn = self._connection()
                conn.request(method, prefix + route, body=body, headers=headers)
                resp = conn.getresponse()
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
                break
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                self.close()
                if attempt:
                    raise ServiceError(f"embedding service at {self.url} is unavailable: {exc}") from exc
        if len(raw) > MAX_RESPONSE_BYTES:
            raise ServiceError("embedding service response is too large")
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            raise ServiceError(f"embedding service returned invalid JSON (HTTP {resp.status})") from None
        if resp.status != 200:
            detail = data.get("detail") if isinstance(data, dict) else None
            msg = f"embedding service rejected {route}: HTTP {resp.status}" + (f": {str(detail)[:300]}" if detail else "")
            if resp.status == 409:
                raise ConflictError(msg, details={"status": 409})
            raise ServiceError(msg, status=resp.status)
        if not isinstance(data, dict):
            raise ServiceError("embedding service response must be an object")
        return data

    def info(self, *, refresh: bool = False) -> ModelInfo:
        if self._info is not None and not refresh:
            return self._info
        self._info = self._parse_info(self.request("GET", "/info"))
        return self._info

    @staticmethod
    def _parse_info(d: dict) -> ModelInfo:
        ok = (type(d.get("version")) is int and d["version"] == 1
              and all(isinstance(d.get(k), str) and d[k] for k in ("embedding_model", "reranker_model"))
              and all(type(d.get(k)) is int and d[k] >= 1 for k in ("dimensions", "max_batch_size", "max_candidates")))
        if not ok:
            raise ServiceError("embedding service returned invalid model metadata")
        return ModelInfo(d["embedding_model"], d["reranker_model"], d["dimensions"], d["max_batch_size"],
                         d["max_candidates"], bool(d.get("cross_encoder", True)))

    def embed(self, texts: list[str], kind: str) -> np.ndarray:
        info = self.info()
        out = np.zeros((len(texts), info.dimensions), dtype=np.float32)
        for off in range(0, len(texts), info.max_batch_size):
            batch = texts[off:off + info.max_batch_size]
            d = self.request("POST", "/embed", {"texts": batch, "kind": kind, "model": info.embedding_model})
            if d.get("model") != info.embedding_model:
                raise ConflictError("embedding model changed during retrieval; retry the request")
            vecs = d.get("vectors")
            if not isinstance(vecs, list) or len(vecs) != len(batch):
                raise ServiceError("embedding service returned the wrong number of vectors")
            out[off:off + len(batch)] = [_check_vector(v, info.dimensions) for v in vecs]
        return out

    def rerank(self, query: str, documents: list[str]) -> list[int]:
        info = self.info()
        d = self.request("POST", "/rerank", {"query": query, "documents": documents, "model": info.reranker_model})
        if d.get("model") != info.reranker_model:
            raise ConflictError("reranker model changed during retrieval; retry the request")
        order = d.get("indices")
        if not isinstance(order, list) or any(type(i) is not int for i in order) \
                or sorted(order) != list(range(len(documents))):
            raise ServiceError("reranker must return each candidate index exactly once")
        return order


def _check_vector(value, dim: int) -> list[float]:
    if not isinstance(value, list) or len(value) != dim or any(type(x) not in (int, float) for x in value):
        raise ServiceError("embedding vector has invalid dimensions or values")
    norm = math.sqrt(sum(x * x for x in value))
    if not math.isfinite(norm) or norm <= 0:
        raise ServiceError("embedding vector must have a finite positive norm")
    return [x / norm for x in value]


# -- the local warm service --------------------------------------------------------------

@dataclass
class LocalService:
    url: str
    token: str
    state_dir: Path
    started: bool  # this call launched it
    info: dict | None = None


def service_dir(model_path: Path, reranker_path: str | None) -> Path:
    """Per user and model: one warm service shared by every root that uses the same model."""
    base = os.environ.get("RMTUI_SERVICE_DIR")
    if base:
        top = Path(base)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        top = Path(os.environ["XDG_RUNTIME_DIR"]) / "rmtui" / "embedding-services"
    else:
        top = Path.home() / ".cache" / "rmtui" / "embedding-services"
    key = hashlib.sha256(f"{model_path}\0{reranker_path or ''}".encode()).hexdigest()[:16]
    return top / key


def _read_state(state_dir: Path) -> dict | None:
    try:
        st = json.loads((state_dir / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) and isinstance(st.get("url"), str) else None


def _alive(state_dir: Path) -> bool:
    fd = try_lock(state_dir / "alive.lock")
    if fd is None:
        return True
    os.close(fd)
    return False


def ensure_local_service(model_path: Path, reranker_path: str | None, *, idle_timeout: float,
                         wait_seconds: float) -> LocalService:
    """The running local service for this model, started (detached) if none runs.

    Waits at most ``wait_seconds`` for it to be ready; a service still loading its model
    raises :class:`ServiceError` and keeps starting in the background for later calls.
    """
    state_dir = service_dir(model_path, reranker_path)
    state_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    started = False
    try:
        with file_lock(state_dir / "launch.lock", timeout=max(wait_seconds, 0.1)):
            st = _read_state(state_dir)
            if st is not None and _alive(state_dir):
                return LocalService(st["url"], st.get("token") or "", state_dir, False, st.get("info"))
            if not _alive(state_dir):
                (state_dir / "state.json").unlink(missing_ok=True)
                _launch(state_dir, model_path, reranker_path, idle_timeout)
                started = True
            while time.monotonic() < deadline:
                st = _read_state(state_dir)
                if st is not None:
                    return LocalService(st["url"], st.get("token") or "", state_dir, started, st.get("info"))
                if not _alive(state_dir) and time.monotonic() > deadline - wait_seconds + 2.0:
                    raise ServiceError(f"the local embedding service failed to start; see {state_dir / 'service.log'}"
                                       + _log_tail(state_dir))
                time.sleep(0.05)
    except ConflictError:
        pass  # another process is launching it and holds the launch lock past our budget
    raise ServiceError(f"the local embedding service is still starting (waited {wait_seconds:.0f} s)")


def _log_tail(state_dir: Path) -> str:
    try:
        lines = (state_dir / "service.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return (": " + lines[-1][:300]) if lines else ""


def _launch(state_dir: Path, model_path: Path, reranker_path: str | None, idle_timeout: float) -> None:
    token = secrets.token_urlsafe(24)
    env = dict(os.environ)
    env[TOKEN_ENV] = token
    argv = [sys.executable, "-m", "rmtui", "--headless", "embedding-service", "--host", "127.0.0.1", "--port", "0",
            "--model-path", str(model_path), "--idle-timeout", str(idle_timeout), "--state-dir", str(state_dir),
            "--token-env", TOKEN_ENV]
    if reranker_path:
        argv += ["--reranker-path", str(reranker_path)]
    log = open(state_dir / "service.log", "ab")
    try:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                         start_new_session=True, close_fds=True, cwd=str(state_dir))
    finally:
        log.close()
    # The child takes alive.lock first thing; give it a moment so callers see it as alive.
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5.0 and not _alive(state_dir):
        time.sleep(0.02)


def stop_local_service(state_dir: Path, timeout: float = 10.0) -> bool:
    """Ask a local service to stop (SIGTERM to its recorded pid); True if it is gone."""
    import signal

    st = _read_state(state_dir)
    if st is None or not _alive(state_dir):
        return True
    try:
        os.kill(int(st["pid"]), signal.SIGTERM)
    except (ProcessLookupError, ValueError, TypeError):
        return not _alive(state_dir)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not _alive(state_dir):
            return True
        time.sleep(0.05)
    return False
