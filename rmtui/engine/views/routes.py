"""The view routes of the shared view server (routes: docs/formats.md, "Shared views"), one step each.

:mod:`.server` assembles them with the hub's (:mod:`.hubroutes`); what every route shares
(limits, the bearer token, bounded JSON bodies, refusals) is :mod:`.httpcommon`. The package
route is also the hub's: the server hands it the hub's handler for tokens that are no view
token, and it refuses as the hub does (``{"detail": …}``), since an original client calls it.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views import files
from rmtui.engine.views.httpcommon import Limits, bearer, denied, detail, failure, read_json, send_package

if TYPE_CHECKING:
    from rmtui.engine.views.questions import QuestionAnswer

#: The hub's package handler: the answer for a request whose token is no view token of this root.
HubPackage = Callable[[Request, str], Awaitable[Response]]


def _hub_refusal(status: int, _error: str, message: str) -> Response:
    return detail(status, message)


# -- auth ----------------------------------------------------------------------------------------

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


# -- handlers ------------------------------------------------------------------------------------

class ViewRoutes:
    """The package and question routes of one root, under one set of limits."""

    def __init__(self, root: MemoryRoot, limits: Limits, hub_package: HubPackage | None = None) -> None:
        self.root = root
        self.limits = limits
        self.hub_package = hub_package
        self.answering = asyncio.Semaphore(limits.max_answers)

    async def package(self, request: Request) -> Response:
        """The view's own build for a view token; any other token goes to the hub, when one is served."""
        vid = view_of(self.root, request, "file")
        if vid is None:
            raw = request.path_params["view_id"]
            if self.hub_package is None or bearer(request) is None:
                return detail(401, "invalid bearer token")
            return await self.hub_package(request, raw)
        folder = files.builds_dir(self.root) / vid
        if not folder.is_dir():
            return detail(404, f"view {vid} has no published package yet")
        return await send_package(folder, vid, _hub_refusal)

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
