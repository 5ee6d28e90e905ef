"""The HTTP provider of shared views (routes: docs/formats.md, "Shared views"), on Starlette served by uvicorn.

Routes, each behind a bearer token issued for that view (``shared-view token``; only its
SHA-256 is kept):

- ``GET  /api/views/<view>/package``: the last built package of a file view, as a zip;
- ``GET  /api/share/questions/<view>/ready``: a question view is there;
- ``POST /api/share/questions/<view>/ask`` ``{"question"}``: the provider's retrieve role
  answers (``{"ok", "message", "data": {"view_id", "status", "answer"|"reason", "text"}}``).

A missing or wrong token, or a token of another view, gets 401 and nothing else, and so
does a view that does not exist (no probing for names). Loopback only unless
``allow_remote``. Limits: request bodies (``max_body_bytes``), question length,
questions answered at once (``max_answers``, 429 past it), the answer time of the view's
``question.toml``, and connections: how many in all and per client address, and how long a
client may take to send a request head and body (:mod:`.connections`).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views import files

JSON_TYPES = ("application/json",)


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 16 * 1024
    max_answers: int = 2
    max_connections: int = 32
    max_connections_per_client: int = 8
    keep_alive_seconds: int = 5
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 10.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bearer(request) -> str | None:
    value = request.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authorized(root: MemoryRoot, token: str | None, view_id: str, kind: str) -> bool:
    """A token issued for ``view_id`` of ``kind``, compared by hash in constant time."""
    if token is None:
        return False
    digest = files.token_hash(token)
    ok = False
    for entry in files.token_hashes(root).values():
        if entry.get("view_id") == view_id and entry.get("kind") == kind:
            ok |= hmac.compare_digest(str(entry.get("sha256", "")), digest)
    return ok


def make_app(root: MemoryRoot, limits: Limits = Limits()):
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    answering = asyncio.Semaphore(limits.max_answers)

    def denied() -> Response:
        return JSONResponse({"ok": False, "error": "unauthorized", "message": "a valid bearer token is required"},
                            status_code=401, headers={"WWW-Authenticate": 'Bearer realm="rightmemory"'})

    def failure(status: int, error: str, message: str) -> Response:
        return JSONResponse({"ok": False, "error": error, "message": message}, status_code=status)

    def view_of(request: Request, kind: str) -> str | None:
        vid = request.path_params["view_id"]
        try:
            files.check_view_id(vid)
        except UsageError:
            return None
        return vid if authorized(root, _bearer(request), vid, kind) else None

    async def package(request: Request) -> Response:
        from rmtui.engine.views.package import validate_package, zip_package

        vid = view_of(request, "file")
        if vid is None:
            return denied()
        folder = files.builds_dir(root) / vid
        if not folder.is_dir():
            return failure(404, "not_built", f"view {vid} has no published package yet")

        def load() -> tuple[bytes, str]:
            for attempt in (0, 1):  # a rebuild may be swapping the folder right now
                try:
                    info = validate_package(folder, vid)
                    return zip_package(folder), info.digest
                except (FileNotFoundError, NotADirectoryError):
                    if attempt:
                        raise
                    time.sleep(0.05)
            raise FileNotFoundError(folder)  # pragma: no cover

        try:
            data, digest = await run_in_threadpool(load)
        except Exception as exc:
            return failure(503, "unavailable", f"the package of {vid} cannot be served: {exc}")
        return Response(data, media_type="application/zip",
                        headers={"X-RightMemory-Package-Version": digest, "Cache-Control": "no-store"})

    async def ready(request: Request) -> Response:
        vid = view_of(request, "question")
        if vid is None:
            return denied()
        return JSONResponse({"ok": True, "message": "shared view question ready",
                             "data": {"view_id": vid, "status": "ready"}})

    async def ask(request: Request) -> Response:
        from rmtui.engine.views import questions
        from rmtui.engine.views.provider import load_question

        vid = view_of(request, "question")
        if vid is None:
            return denied()
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limits.max_body_bytes):
            return failure(413, "too_large", f"request bodies are at most {limits.max_body_bytes} bytes")
        if request.headers.get("content-type", "").split(";")[0].strip() not in JSON_TYPES:
            return failure(415, "bad_input", "send JSON: {\"question\": \"...\"}")
        from starlette.requests import ClientDisconnect

        body = b""
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > limits.max_body_bytes:
                    return failure(413, "too_large", f"request bodies are at most {limits.max_body_bytes} bytes")
        except ClientDisconnect:  # gone, or closed past the body deadline: nobody reads an answer
            return failure(408, "timeout", "the request body did not arrive in time")
        try:
            import json

            payload = json.loads(body)
        except ValueError:
            return failure(400, "bad_input", "the body is not JSON")
        if not isinstance(payload, dict) or set(payload) != {"question"} or not isinstance(payload["question"], str):
            return failure(400, "bad_input", "send exactly {\"question\": \"...\"}")
        question = payload["question"].strip()
        if not question or len(question) > questions.MAX_QUESTION_CHARS:
            return failure(400, "bad_input", f"the question must be 1 to {questions.MAX_QUESTION_CHARS} characters")
        try:
            spec, _ = await run_in_threadpool(load_question, root.path, vid)
        except UsageError as exc:
            return JSONResponse({"ok": True, "message": "shared view question unavailable",
                                 "data": questions.result(vid, "unavailable", reason=exc.message)})
        if answering.locked():
            return failure(429, "busy", "the provider is answering other questions; ask again shortly")
        async with answering:
            try:
                data = await asyncio.wait_for(run_in_threadpool(questions.answer, root, vid, question),
                                              timeout=max(1, spec.answer_timeout_seconds))
            except TimeoutError:
                data = questions.result(vid, "unavailable",
                                        reason=f"no answer within {spec.answer_timeout_seconds} s")
        return JSONResponse({"ok": True, "message": f"shared view question {data['status']}", "data": data})

    routes = [Route("/api/views/{view_id}/package", package, methods=["GET"]),
              Route("/api/share/questions/{view_id}/ready", ready, methods=["GET"]),
              Route("/api/share/questions/{view_id}/ask", ask, methods=["POST"])]
    return Starlette(routes=routes)


class ViewServer:
    """uvicorn serving :func:`make_app` on one bound socket (port 0 picks a free one)."""

    def __init__(self, root: MemoryRoot, *, host: str = "127.0.0.1", port: int = 8767, allow_remote: bool = False,
                 limits: Limits = Limits()) -> None:
        import uvicorn

        if not is_loopback(host) and not allow_remote:
            raise UsageError(f"{host} is not a loopback address; serving shared views beyond this machine "
                             "needs --allow-remote (and TLS in front of it)")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError as exc:
            self.sock.close()
            raise UsageError(f"cannot listen on {host}:{port}: {exc}") from None
        self.sock.listen(64)
        self.sock.set_inheritable(True)
        bound = self.sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound}"
        from rmtui.engine.views.connections import guarded_protocol

        protocol = guarded_protocol(max_connections=limits.max_connections,
                                    max_connections_per_client=limits.max_connections_per_client,
                                    header_timeout_seconds=limits.header_timeout_seconds,
                                    body_timeout_seconds=limits.body_timeout_seconds)
        # the protocol bounds connections itself; uvicorn's own limit (which answers 503 to a
        # request while idle connections fill it) sits just past that bound
        config = uvicorn.Config(make_app(root, limits), http=protocol, log_level="warning", access_log=False,
                                lifespan="off", limit_concurrency=limits.max_connections + 1,
                                timeout_keep_alive=limits.keep_alive_seconds, server_header=False)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """Serve in this (main) thread until SIGINT or SIGTERM, then stop gracefully and return.

        uvicorn shuts down on the signal and then raises it again for the handlers it found;
        the quiet ones set here take it, so a stopped server is a normal end (exit 0).
        """
        import signal

        quiet = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.server.run(sockets=[self.sock])
        finally:
            for sig, handler in quiet.items():
                signal.signal(sig, handler)
            self.sock.close()

    def start(self) -> str:
        """Serve from a background thread (tests, the TUI); returns the base URL once listening."""
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise UsageError("the shared view server did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sock.close()
