"""Client side of the embedding service: the validating API client and the local warm
service launcher.

Kept apart from the server (``embed_service``) so that a CLI call never imports the
server's stack. HTTP itself is :mod:`rmtui.engine.retrieval.modelhost.service_http`, the one client
shared with the warm retrieve route. See ``embed_service`` for the API.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rmtui.engine import progress
from rmtui.engine.display import remote_text
from rmtui.engine.errors import ConflictError, EngineError, UnavailableError, UsageError
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import LinkedLockFile, file_lock, try_lock
from rmtui.engine.retrieval.modelhost import service_lookup
from rmtui.engine.retrieval.modelhost.model_info import ModelInfo
from rmtui.engine.retrieval.modelhost.service_http import MAX_RESPONSE_BYTES, JsonHttpClient, ServiceError  # noqa: F401  (re-exported)
from rmtui.engine.retrieval.modelhost.service_state import (
    RETRIEVE_ROUTE,
    TOKENS_ROUTE,
    read_state,
    resolve_model_path,
    service_dir,
)

MAX_TEXT_CHARS = 131072
MAX_BODY_BYTES = 64 * 1024 * 1024
TOKEN_ENV = "RIGHTMEMORY_EMBEDDING_API_KEY"


# -- client ------------------------------------------------------------------------------

class ServiceClient:
    """Client of any RightMemory embedding service; validates every answer."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 120.0,
                 info: dict | None = None, cafile: str | None = None) -> None:
        self.http = JsonHttpClient(url, token, timeout=timeout, cafile=cafile)
        self.url = self.http.url
        self._info: ModelInfo | None = None
        self._no_tokens = False  # the service has no token route (a foreign RightMemory service)
        if info is not None:  # known from the local service's state file: saves a round trip
            try:
                self._info = self._parse_info(info)
            except ServiceError:
                self._info = None

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, route: str, payload: dict | None = None) -> dict:
        status, data = self.http.request(method, route, payload)
        if status != 200:
            detail = data.get("detail") if isinstance(data, dict) else None
            msg = f"embedding service rejected {route}: HTTP {status}" + (f": {remote_text(detail)}" if detail else "")
            if status == 409:
                raise ConflictError(msg, details={"status": 409})
            raise ServiceError(msg, status=status)
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

    def embed(self, texts: list[str], kind: str):
        import numpy as np

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

    def embed_tokens(self, texts: list[str], kind: str):
        """Vectors and token states (rmtui's own route); None from a service without it."""
        import base64

        import numpy as np

        from rmtui.engine.retrieval.tokens import dequantize

        if self._no_tokens:
            return None
        info = self.info()
        vecs = np.zeros((len(texts), info.dimensions), dtype=np.float32)
        states: list = []
        for off in range(0, len(texts), info.max_batch_size):
            batch = texts[off:off + info.max_batch_size]
            try:
                d = self.request("POST", TOKENS_ROUTE, {"texts": batch, "kind": kind, "model": info.embedding_model})
            except ServiceError as exc:
                if exc.status in (404, 405):  # a RightMemory service without rmtui's route
                    self._no_tokens = True
                    return None
                raise
            if d.get("model") != info.embedding_model:
                raise ConflictError("embedding model changed during retrieval; retry the request")
            got, sts = d.get("vectors"), d.get("states")
            if not isinstance(got, list) or not isinstance(sts, list) or not len(got) == len(sts) == len(batch):
                raise ServiceError("embedding service returned the wrong number of token states")
            vecs[off:off + len(batch)] = [_check_vector(v, info.dimensions) for v in got]
            for st in sts:
                ok = isinstance(st, dict) and type(st.get("count")) is int and isinstance(st.get("int8"), str)
                try:
                    raw = base64.b64decode(st["int8"], validate=True) if ok else b""
                except ValueError:
                    ok = False
                if not ok or len(raw) != st["count"] * info.dimensions:
                    raise ServiceError("embedding service returned malformed token states")
                states.append(dequantize(np.frombuffer(raw, dtype=np.int8).reshape(st["count"], info.dimensions)))
        return vecs, states

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


def _alive(state_dir: Path) -> bool:
    try:
        fd = try_lock(state_dir / "alive.lock")
    except LinkedLockFile as exc:
        raise ServiceError(exc.message) from exc
    if fd is None:
        return True
    os.close(fd)
    return False


#: Services this process launched and has not seen ready yet, by state folder: a later wait
#: in the same process (the CLI launches early, then waits when it needs the model) keeps the
#: handle, so a service that dies while starting is reported with its exit status.
_launched: dict[Path, subprocess.Popen] = {}
#: A recorded launch counts as "starting" for this long (the ONNX export on a first start included).
STARTING_SECONDS = 600.0


def _prepare_dir(model_path: Path, reranker_path: str | None, precision: str = "float32") -> Path:
    """The service's state folder, made or checked (it and the services' folder) by the one
    folder rule (``service_lookup.FOLDER_RULE``): its state file holds the service's bearer
    token, and a folder another user controls could send this user's needs to their service."""
    state_dir = service_dir(model_path, reranker_path, precision)
    try:
        service_lookup.private_folder(state_dir.parent)
        service_lookup.private_folder(state_dir)
    except service_lookup.UnsafeFolder as exc:
        raise ServiceError(f"the local embedding service cannot use its folder: {exc}") from None
    return state_dir


def _read_own(path: Path, limit: int = 1 << 16) -> str:
    """A small file of a state folder, read in place (never through a symlink)."""
    fd = os.open(path, os.O_RDONLY | service_lookup.NOFOLLOW)
    with open(fd, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def _starting(state_dir: Path) -> bool:
    """A launched service that has not yet taken its alive lock (still importing, or exporting)."""
    launch = _launch_record(state_dir)
    proc = _launched.get(state_dir)
    if proc is not None:  # this process launched it: starting while it runs and its record stands
        # (the service removes the record once it holds its lock: a service that has served and
        # is stopping is not starting, and a new one may be launched meanwhile)
        return proc.poll() is None and launch is not None and launch[0] == proc.pid
    if launch is None:
        return False
    pid, at = launch
    if time.time() - at > STARTING_SECONDS:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:  # a child that exited but was not reaped yet still answers signal 0
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _launch_record(state_dir: Path) -> tuple[int, float] | None:
    """(pid, time) of the launch recorded in ``launch.json``, if any."""
    try:
        launch = json.loads(_read_own(state_dir / "launch.json"))
        return int(launch["pid"]), float(launch["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def launch_done(state_dir: Path) -> None:
    """Called by the service once it holds its alive lock: from then on the lock tells whether it
    runs, and a stopping service must not look like one still starting."""
    try:
        if json.loads(_read_own(state_dir / "launch.json")).get("pid") == os.getpid():
            (state_dir / "launch.json").unlink()
    except (OSError, ValueError, AttributeError):
        pass


def start_local_service(model_path: Path, reranker_path: str | None, *, idle_timeout: float,
                        backend: str = "auto", warm_root: Path | None = None, device: str = "auto",
                        precision: str = "float32") -> bool:
    """Launch the local service unless it runs or is starting; never waits for it (True: launched).

    A CLI call that finds no service calls this first, so that the service starts while the
    CLI loads the corpus instead of after it (restart to first answer; `bench/retrieve_speed.py`).
    ``warm_root``: the root the service reads while its model loads (the caller's).
    """
    state_dir = _prepare_dir(model_path, reranker_path, precision)
    try:
        with file_lock(state_dir / "launch.lock", timeout=0.2):
            if _alive(state_dir) or _starting(state_dir):
                return False
            (state_dir / "state.json").unlink(missing_ok=True)
            _launch(state_dir, model_path, reranker_path, idle_timeout, backend, warm_root, device, precision)
            return True
    except ConflictError:
        return False  # another process holds the launch lock: it is launching or waiting
    except LinkedLockFile as exc:
        raise ServiceError(exc.message) from exc


def ensure_local_service(model_path: Path, reranker_path: str | None, *, idle_timeout: float,
                         wait_seconds: float, backend: str = "auto", device: str = "auto",
                         precision: str = "float32") -> LocalService:
    """The running local service for this model, started (detached) if none runs.

    Waits at most ``wait_seconds`` for it to be ready; a service still loading its model
    raises :class:`ServiceError` and keeps starting in the background for later calls.
    ``backend`` and ``device`` (``embedding.backend``, ``embedding.device``) apply to a service
    this call starts; one already running is used whatever its runtime and device (all answer
    with the same vectors). ``precision`` (``embedding.precision``) names another service: an
    int8 model answers other vectors.
    """
    state_dir = _prepare_dir(model_path, reranker_path, precision)
    deadline = time.monotonic() + wait_seconds
    try:
        with file_lock(state_dir / "launch.lock", timeout=max(wait_seconds, 0.1)):
            st = read_state(state_dir)
            if st is not None and _alive(state_dir):
                _launched.pop(state_dir, None)
                _not_failed(st["url"])
                return LocalService(st["url"], st.get("token") or "", state_dir, False, st.get("info"))
            proc = _launched.get(state_dir)
            if proc is None and not _alive(state_dir) and not _starting(state_dir):
                (state_dir / "state.json").unlink(missing_ok=True)
                proc = _launch(state_dir, model_path, reranker_path, idle_timeout, backend, device=device,
                               precision=precision)
            progress.report("starting the local embedding model (the first use takes a few seconds)")
            while time.monotonic() < deadline:
                st = read_state(state_dir)
                if st is not None:
                    _launched.pop(state_dir, None)
                    _not_failed(st["url"])
                    return LocalService(st["url"], st.get("token") or "", state_dir, proc is not None, st.get("info"))
                if proc is not None and proc.poll() is not None:
                    _launched.pop(state_dir, None)
                    raise ServiceError(f"the local embedding service failed to start (exit {proc.returncode}); "
                                       f"see {state_dir / 'service.log'}" + _log_tail(state_dir))
                if proc is None and not _alive(state_dir) and not _starting(state_dir):
                    raise ServiceError("the local embedding service stopped while starting; retry")
                time.sleep(0.02)
    except ConflictError:
        pass  # another process is launching it and holds the launch lock past our budget
    except LinkedLockFile as exc:
        raise ServiceError(exc.message) from exc
    raise ServiceError(f"the local embedding service is still starting (waited {wait_seconds:.0f} s)")


def _not_failed(url: str) -> None:
    """A service that failed this call already (no whole answer in time) is not asked again."""
    why = service_lookup.failure(url)
    if why is not None:
        raise ServiceError(f"the local embedding service at {url} failed this call already ({why}); "
                           "it is not asked again")


def _log_tail(state_dir: Path) -> str:
    try:
        with open(os.open(state_dir / "service.log", os.O_RDONLY | service_lookup.NOFOLLOW), "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return (": " + remote_text(lines[-1])) if lines else ""


def _launch(state_dir: Path, model_path: Path, reranker_path: str | None,
            idle_timeout: float, backend: str = "auto", warm_root: Path | None = None,
            device: str = "auto", precision: str = "float32") -> subprocess.Popen:
    """Start the service detached (own session: it outlives this process)."""
    token = secrets.token_urlsafe(24)
    env = dict(os.environ)
    env[TOKEN_ENV] = token
    argv = [sys.executable, "-m", "rmtui", "--headless", "embedding-service", "--host", "127.0.0.1", "--port", "0",
            "--model-path", str(model_path), "--idle-timeout", str(idle_timeout), "--state-dir", str(state_dir),
            "--token-env", TOKEN_ENV, "--backend", backend, "--device", device, "--precision", precision]
    if reranker_path:
        argv += ["--reranker-path", str(reranker_path)]
    if warm_root is not None:
        argv += ["--warm-root", str(warm_root)]
    # appended to in place: a symlink planted as the log is refused, never written through
    try:
        log = os.open(state_dir / "service.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | service_lookup.NOFOLLOW,
                      0o600)
    except OSError as exc:
        link = " (a symlink: a runtime folder's files are opened in place, never through a link)" \
            if os.path.islink(state_dir / "service.log") else ""
        raise ServiceError(f"the local embedding service cannot open its log {state_dir / 'service.log'}: "
                           f"{exc.strerror}{link}") from None
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                start_new_session=True, close_fds=True, cwd=str(state_dir))
    finally:
        os.close(log)
    _launched[state_dir] = proc
    atomic_write_text(state_dir / "launch.json", json.dumps({"pid": proc.pid, "at": time.time()}))
    return proc


#: How long a service that ignored SIGTERM gets to die of SIGKILL (the kernel frees its lock).
KILL_WAIT_SECONDS = 5.0


def stop_local_service(state_dir: Path, timeout: float = 10.0) -> bool:
    """Stop a local service: SIGTERM to its recorded pid, and SIGKILL if it still holds its
    lock after ``timeout`` (a stop that leaves a hung service running would keep its port,
    its memory and its folder); True once it is gone. A killed service cannot remove its own
    state file, so it is removed here."""
    import signal

    st = read_state(state_dir)
    if st is None or not _alive(state_dir):
        return True
    try:
        pid = int(st["pid"])
        os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, ValueError, TypeError):
        return not _alive(state_dir)
    if _gone_within(state_dir, timeout):
        return True
    try:
        os.kill(pid, signal.SIGKILL)  # still holding the lock: the same process, hung
    except ProcessLookupError:
        pass
    if not _gone_within(state_dir, KILL_WAIT_SECONDS):
        return False
    state = read_state(state_dir)
    if state is not None and state.get("pid") == pid:
        (state_dir / "state.json").unlink(missing_ok=True)
    return True


def _gone_within(state_dir: Path, seconds: float) -> bool:
    """Whether the service of ``state_dir`` lets its lock go within ``seconds``."""
    t0 = time.monotonic()
    while True:
        if not _alive(state_dir):
            return True
        if time.monotonic() - t0 >= seconds:
            return False
        time.sleep(0.05)


def delegation_model(cfg) -> Path | None:
    """The model whose local warm service runs this root's retrievals, or None where they are
    not its to run (the agent backend, a configured service, ``embedding.local_service`` off,
    no model)."""
    from rmtui.engine.memory.config import embedding_service

    if (cfg.get("retrieve.backend") != "embedding" or embedding_service(cfg) is not None
            or not cfg.get("embedding.local_service")):
        return None
    try:
        return resolve_model_path(cfg.get("embedding.model"), cfg.get("embedding.model_path"))
    except (UsageError, UnavailableError):
        return None


def delegate_retrieve(root_path: Path, cfg, session: str, need: str, *, top: int | None,
                      include_returned: bool, include_pending: bool = True, timeout: float | None = None,
                      wait_seconds: float = 0.0) -> dict | None:
    """Ask an already-running local warm service to run the retrieval; None when there is none.

    The service runs the very same engine ``retrieve`` (same locks, same delivery history);
    a short-lived CLI then pays neither numpy nor the corpus load. Anything unusual (a
    configured remote service, the agent backend, no service yet) answers None, and the
    caller retrieves in its own process, starting the service as usual. With
    ``wait_seconds``, a service that is starting is waited for that long (the MCP server,
    which launched it, waits rather than load a model of its own).
    ``include_pending`` is sent only when false (the route's default is true), so a service
    that does not know the field still serves the default; one that refuses it answers 422,
    and the caller then retrieves in its own process. ``timeout`` (``service_lookup.answer_seconds()``
    by default) bounds the whole answer; a service that failed (late, cut off, not HTTP) is
    noted, and neither this nor the caller's own retrieval asks it again in this process.
    """
    model = delegation_model(cfg)
    if model is None:
        return None
    state_dir = service_dir(model, cfg.get("embedding.reranker_path"), str(cfg.get("embedding.precision")))
    st = read_state(state_dir)
    if st is None and wait_seconds > 0:
        st = _state_once_started(state_dir, wait_seconds)
    if st is None or not st.get("token"):
        _launch_early(root_path, cfg, model)
        return None
    if service_lookup.failure(st["url"]) is not None:  # it failed this call already (the thin client asked it)
        _launch_early(root_path, cfg, model)  # (nothing, while it still holds its lock)
        return None
    client = JsonHttpClient(st["url"], st["token"], timeout=service_lookup.answer_seconds() if timeout is None
                            else timeout)
    body: dict = {"root": str(root_path), "session": session, "need": need, "top": top,
                  "include_returned": include_returned}
    if not include_pending:
        body["include_pending"] = False
    try:
        status, answer = client.request("POST", RETRIEVE_ROUTE, body)
    except (UnavailableError, UsageError) as exc:
        service_lookup.note_failure(st["url"], exc.message)
        _launch_early(root_path, cfg, model)  # a stale state file: the service is gone
        return None
    finally:
        client.close()
    if status != 200:
        return None  # an older service without the route, or a stale state file
    return answer if isinstance(answer, dict) and _well_formed(answer) else None


def _state_once_started(state_dir: Path, wait_seconds: float) -> dict | None:
    """The state of a service that is starting, once it is ready (None if it stops or is late)."""
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        st = read_state(state_dir)
        if st is not None or not (_starting(state_dir) or _alive(state_dir)):
            return st
        time.sleep(0.01)
    return None


def _well_formed(answer: dict) -> bool:
    """A service answer of the shape :func:`delegated_result` reads (anything else: retrieve here)."""
    if type(answer.get("ok")) is not bool:
        return False
    if answer["ok"]:
        return isinstance(answer.get("data"), dict) and isinstance(answer.get("text"), str)
    return type(answer.get("exit_code")) is int and isinstance(answer.get("error"), dict)


def delegated_result(answer: dict) -> tuple[dict, str]:
    """The data and text of a delegated retrieve's answer, or the engine error it reports,
    raised as the same error (the service is this user's own, reached with its token)."""
    if answer["ok"]:
        return answer["data"], answer["text"]
    err = answer["error"]
    details = err.get("details")
    exc = EngineError(str(err.get("message", "retrieval failed")),
                      details=details if isinstance(details, dict) else None)
    exc.exit_code, exc.kind = answer["exit_code"], str(err.get("error", "failed"))
    raise exc


def launch_for_root(root_path: Path, cfg) -> bool:
    """Start the local warm service now, without waiting, if this root's retrievals are its
    and the root's vectors are cached (True: it runs or is starting). The caller (the MCP
    server) delegates its first calls to it, so the service reads the root while it loads."""
    model = delegation_model(cfg)
    if model is None:
        return False
    _launch_early(root_path, cfg, model, preload=True)
    state_dir = service_dir(model, cfg.get("embedding.reranker_path"), str(cfg.get("embedding.precision")))
    return read_state(state_dir) is not None or _starting(state_dir) or _alive(state_dir)


def _launch_early(root_path: Path, cfg, model: Path, *, preload: bool = False) -> None:
    """No warm service: start one now, so that it loads its model while this CLI call loads
    the corpus, instead of after it (a restart then costs about one service start; `bench/retrieve_speed.py`).

    Only for a root whose vectors are cached already (a restart after the idle exit): a new or
    empty root may not need the model at all, and its first call starts the service as before.
    ``preload``: the service also reads the root while it loads, for a caller that will wait
    for its answer; a CLI call answers this time in its own process, which the reads would
    only slow down (two processes loading a model already fill both cores).
    """
    try:
        if not any((root_path / ".runtime" / "cache" / "vectors").glob("*.bin")):
            return
    except OSError:
        return
    try:
        start_local_service(model, cfg.get("embedding.reranker_path"),
                            idle_timeout=float(cfg.get("embedding.idle_timeout_seconds")),
                            backend=str(cfg.get("embedding.backend")), warm_root=root_path if preload else None,
                            device=str(cfg.get("embedding.device")), precision=str(cfg.get("embedding.precision")))
    except (OSError, EngineError):
        pass  # the call goes on in this process and starts the service itself, reporting any failure
