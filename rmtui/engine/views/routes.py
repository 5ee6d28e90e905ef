"""The route handlers of the shared view server (routes: docs/formats.md, "Shared views"), one step each.

:mod:`.server` assembles them; this module holds the three concerns a handler is made of:
the refusals every route answers the same way, the bearer-token check of a view, and the
bounded reading of a JSON body (size, media type, the body deadline).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views import files

if TYPE_CHECKING:
    from rmtui.engine.views.hubroutes import HubRoutes
    from rmtui.engine.views.questions import QuestionAnswer
    from rmtui.engine.views.server import Limits

JSON_TYPES = ("application/json",)


# -- refusals ------------------------------------------------------------------------------------

def denied() -> Response:
    return JSONResponse({"ok": False, "error": "unauthorized", "message": "a valid bearer token is required"},
                        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="rightmemory"'})


def failure(status: int, error: str, message: str) -> Response:
    return JSONResponse({"ok": False, "error": error, "message": message}, status_code=status)


# -- auth ----------------------------------------------------------------------------------------

def bearer(request: Request) -> str | None:
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


def view_of(root: MemoryRoot, request: Request, kind: str) -> str | None:
    """The route's view id when it is well formed and the bearer token was issued for it, else None."""
    vid = request.path_params["view_id"]
    try:
        files.check_view_id(vid)
    except UsageError:
        return None
    return vid if authorized(root, bearer(request), vid, kind) else None


# -- limits --------------------------------------------------------------------------------------

async def read_json(request: Request, max_bytes: int, shape: str, *,
                    refuse: Callable[[int, str, str], Response] = failure) -> object | Response:
    """The request's JSON body, or the refusal to send: over ``max_bytes`` (413, checked on the
    declared length and again while streaming), not JSON (415/400), or not all there in time (408).
    ``shape`` shows the sender what to send instead; ``refuse`` shapes the refusal (the hub's differs)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
        return refuse(413, "too_large", f"request bodies are at most {max_bytes} bytes")
    if request.headers.get("content-type", "").split(";")[0].strip() not in JSON_TYPES:
        return refuse(415, "bad_input", f"send JSON: {shape}")
    body = b""
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_bytes:
                return refuse(413, "too_large", f"request bodies are at most {max_bytes} bytes")
    except ClientDisconnect:  # gone, or closed past the body deadline: nobody reads an answer
        return refuse(408, "timeout", "the request body did not arrive in time")
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return refuse(400, "bad_input", "the body is not JSON")


# -- handlers ------------------------------------------------------------------------------------

class ViewRoutes:
    """The package and question routes of one root, under one set of limits."""

    def __init__(self, root: MemoryRoot, limits: Limits, hub: HubRoutes | None = None) -> None:
        self.root = root
        self.limits = limits
        self.hub = hub
        self.answering = asyncio.Semaphore(limits.max_answers)

    async def package(self, request: Request) -> Response:
        """The view's own build for a view token; for a hub connection token, the hub's current version."""
        vid = view_of(self.root, request, "file")
        if vid is None:
            return await self._hub_package(request)
        folder = files.builds_dir(self.root) / vid
        if not folder.is_dir():
            return failure(404, "not_built", f"view {vid} has no published package yet")
        return await self._send_package(folder, vid)

    async def _hub_package(self, request: Request) -> Response:
        from rmtui.engine.views.hubroutes import detail

        vid = request.path_params["view_id"]
        if self.hub is None or bearer(request) is None:
            return denied()
        try:
            files.check_view_id(vid)
        except UsageError:
            return denied()
        actor = await self.hub.connection_actor(request, vid)
        if isinstance(actor, Response):
            return denied() if actor.status_code == 401 else actor
        folder = await self.hub.call(self.hub.store.current_version, vid)
        if isinstance(folder, Response):
            return folder
        if folder is None:
            return detail(404, "view not found")
        return await self._send_package(folder, vid)

    async def _send_package(self, folder, vid: str) -> Response:
        try:
            data, digest = await run_in_threadpool(_load_package, folder, vid)
        except Exception as exc:  # noqa: BLE001 - any failure to read the package is a 503, not a 500
            return failure(503, "unavailable", f"the package of {vid} cannot be served: {exc}")
        return Response(data, media_type="application/zip",
                        headers={"X-RightMemory-Package-Version": digest, "Cache-Control": "no-store"})

    async def ready(self, request: Request) -> Response:
        vid = view_of(self.root, request, "question")
        if vid is None:
            return denied()
        return JSONResponse({"ok": True, "message": "shared view question ready",
                             "data": {"view_id": vid, "status": "ready"}})

    async def ask(self, request: Request) -> Response:
        from rmtui.engine.views import questions

        vid = view_of(self.root, request, "question")
        if vid is None:
            return denied()
        payload = await read_json(request, self.limits.max_body_bytes, '{"question": "..."}')
        if isinstance(payload, Response):
            return payload
        if not isinstance(payload, dict) or set(payload) != {"question"} or not isinstance(payload["question"], str):
            return failure(400, "bad_input", "send exactly {\"question\": \"...\"}")
        question = payload["question"].strip()
        if not question or len(question) > questions.MAX_QUESTION_CHARS:
            return failure(400, "bad_input", f"the question must be 1 to {questions.MAX_QUESTION_CHARS} characters")
        data = await self._answer(vid, question)
        if data is None:
            return failure(429, "busy", "the provider is answering other questions; ask again shortly")
        return JSONResponse({"ok": True, "message": f"shared view question {data.status}", "data": data.to_json()})

    async def _answer(self, vid: str, question: str) -> QuestionAnswer | None:
        """The provider's answer within the view's answer time; None when every answer slot is taken."""
        from rmtui.engine.views import questions
        from rmtui.engine.views.provider import load_question

        try:
            spec, _ = await run_in_threadpool(load_question, self.root.path, vid)
        except UsageError as exc:
            return questions.result(vid, "unavailable", reason=exc.message)
        if self.answering.locked():
            return None
        async with self.answering:
            try:
                return await asyncio.wait_for(run_in_threadpool(questions.answer, self.root, vid, question),
                                              timeout=max(1, spec.answer_timeout_seconds))
            except TimeoutError:
                return questions.result(vid, "unavailable", reason=f"no answer within {spec.answer_timeout_seconds} s")


def _load_package(folder, vid: str) -> tuple[bytes, str]:
    """The package as a zip and its digest; one retry because a rebuild may be swapping the folder right now."""
    from rmtui.engine.views.package import validate_package, zip_package

    for attempt in (0, 1):
        try:
            info = validate_package(folder, vid)
            return zip_package(folder), info.digest
        except (FileNotFoundError, NotADirectoryError):
            if attempt:
                raise
            time.sleep(0.05)
    raise FileNotFoundError(folder)  # pragma: no cover
