"""The hub's routes (docs/formats.md, "The hub"), served by ``shared-view serve`` beside the view routes.

Paths, JSON fields, status codes and error bodies are the original hub's, so an original
client publishes to and joins through rmtui, and rmtui's client (:mod:`.hub`) talks to
either: a refusal is ``{"detail": "<reason>"}``, and a body that is not a JSON object is 422
with the list of problems the original's framework sends. Bodies are bounded before they are
parsed: JSON bodies by ``Limits.max_body_bytes``, a published package by the hub's
``max_package_bytes``; what one connection may store as notes by its daily quota.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from rmtui.engine.views.httpcommon import Limits, bearer, detail, read_json, send_package
from rmtui.engine.views.hubstore import (
    INBOX_PAGE,
    Actor,
    HubRefused,
    HubStore,
    check_id,
    optional_text,
)

#: An interaction carries ``message`` (required), ``actor``, ``task_context`` and, as the
#: original passes them through, other fields of the consumer's note, within these bounds.
MAX_MESSAGE_CHARS = 4000
MAX_INTERACTION_KEYS = 32
#: A share bundles at most this many views.
MAX_SHARE_PARTS = 32
T = TypeVar("T")


def _problem(kind: str, msg: str) -> list[dict]:
    """The body of a 422 as the original's framework words it: a list of problems with the body."""
    return [{"type": kind, "loc": ["body"], "msg": msg}]


def _refuse(status: int, _error: str, message: str) -> Response:
    if status == 415:  # the original parses only JSON bodies; anything else is no object
        return detail(422, _problem("dict_type", "Input should be a valid dictionary"))
    if status == 400:
        return detail(422, _problem("json_invalid", "JSON decode error"))
    return detail(status, message)


def _package_refusal(status: int, _error: str, message: str) -> Response:
    return detail(status, message)


def _payload_text(payload: dict, key: str, *, required: bool = False, limit: int = 1000) -> str | None:
    """A string field of a body, worded as the original refuses it."""
    value = payload.get(key)
    if value is not None and not isinstance(value, str):
        raise HubRefused(400, f"{key} must be a string")
    clean = value.strip() if isinstance(value, str) else ""
    if required and not clean:
        raise HubRefused(400, f"{key} must be a non-empty string")
    if len(clean) > limit:
        raise HubRefused(400, f"{key} is longer than {limit} characters")
    return clean or None


def _share_parts(payload: dict) -> list[dict]:
    parts = payload.get("parts")
    if not isinstance(parts, list) or not parts:
        raise HubRefused(400, "parts must be a non-empty list")
    if len(parts) > MAX_SHARE_PARTS:
        raise HubRefused(400, f"a share has at most {MAX_SHARE_PARTS} parts")
    clean = []
    for part in parts:
        if not isinstance(part, dict):
            raise HubRefused(400, "each part must be an object")
        kind, view_id = part.get("type"), part.get("view_id")
        if not isinstance(kind, str) or not kind.strip():
            raise HubRefused(400, "part type must be a non-empty string")
        if not isinstance(view_id, str) or not view_id.strip():
            raise HubRefused(400, "part view_id must be a non-empty string")
        clean.append({"type": kind.strip(), "view_id": view_id.strip()})
    return clean


def _query_int(request: Request, key: str, default: int) -> int:
    raw = request.query_params.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise HubRefused(400, f"{key} must be an integer") from None


class HubRoutes:
    """The publish, invitation, interaction and inbox routes of one hub root."""

    def __init__(self, store: HubStore, limits: Limits) -> None:
        self.store = store
        self.limits = limits

    async def call(self, fn: Callable[..., T], *args: object) -> T | Response:
        try:
            return await run_in_threadpool(fn, *args)
        except HubRefused as exc:
            return detail(exc.status, exc.detail)

    async def _object(self, request: Request) -> dict | Response:
        """An optional JSON object body (empty means ``{}``), bounded and refused as the hub refuses."""
        if request.headers.get("content-length") == "0":
            return {}
        payload = await read_json(request, self.limits.max_body_bytes, "a JSON object", refuse=_refuse)
        if isinstance(payload, Response):
            return payload
        if not isinstance(payload, dict):
            return detail(422, _problem("dict_type", "Input should be a valid dictionary"))
        return payload

    async def _actor(self, request: Request, action: str, view_id: str | None = None) -> Actor | Response:
        actor = await run_in_threadpool(self.store.find_token, bearer(request), action)
        if actor is None:
            await run_in_threadpool(self.store.reject, action, view_id)
            return detail(401, "invalid bearer token")
        return actor

    async def connection_actor(self, request: Request, view_id: str) -> Actor | Response:
        """A connect token of ``view_id``: 401 when it is none at all, 403 when it is another view's."""
        token = bearer(request)
        actor = await run_in_threadpool(self.store.find_token, token, "connect", view_id=view_id)
        if actor is not None:
            return actor
        if await run_in_threadpool(self.store.find_token, token, "connect"):
            return detail(403, "token is not scoped to view")
        await run_in_threadpool(self.store.reject, "connect", view_id)
        return detail(401, "invalid bearer token")

    # -- provider -----------------------------------------------------------------------------

    async def publish(self, request: Request) -> Response:
        view_id = request.path_params["view_id"]
        actor = await self._actor(request, "publish", view_id)
        if isinstance(actor, Response):
            return actor
        if actor.provider_id is None:
            return detail(403, "publisher token has no provider scope")
        owned = await self._owned(view_id, actor)
        if owned is not None:
            return owned
        if "application/zip" not in request.headers.get("content-type", ""):
            return detail(415, "publish body must be application/zip")
        config = await self.call(self.store.config)
        if isinstance(config, Response):
            return config
        limit = config.max_package_bytes
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return detail(413, "package upload is too large")
        body = b""
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    return detail(413, "package upload is too large")
        except ClientDisconnect:
            return detail(408, "the package did not arrive in time")
        if not body:
            return detail(400, "publish body is required")
        out = await self.call(self.store.publish, view_id, body, actor)
        return out if isinstance(out, Response) else JSONResponse(out, status_code=201)

    async def _owned(self, view_id: str, actor: Actor) -> Response | None:
        """403 when the view exists and belongs to another provider (the original asks this first)."""
        try:
            vid = check_id(view_id, "view_id")
        except HubRefused as exc:
            return detail(exc.status, exc.detail)
        row = await self.call(self.store.view, vid)
        if isinstance(row, Response):
            return row
        if row is not None and row["provider_id"] not in (None, actor.provider_id):
            return detail(403, "token cannot manage this view")
        return None

    async def create_invitation(self, request: Request) -> Response:
        view_id = request.path_params["view_id"]
        actor = await self._actor(request, "publish", view_id)
        if isinstance(actor, Response):
            return actor
        if actor.provider_id is None:
            return detail(403, "publisher token has no provider scope")
        owned = await self._owned(view_id, actor)
        if owned is not None:
            return owned
        payload = await self._object(request)
        if isinstance(payload, Response):
            return payload
        try:
            label = optional_text(payload.get("label"), "label", 200)
            expires = optional_text(payload.get("expires_at"), "expires_at", 64)
        except HubRefused as exc:
            return detail(exc.status, exc.detail)
        out = await self.call(lambda: self.store.create_invitation(view_id, actor, label=label, expires_at=expires))
        return out if isinstance(out, Response) else JSONResponse(out, status_code=201)

    async def create_share_invitation(self, request: Request) -> Response:
        """``POST /api/shares/<share>/invitations`` {title, parts: [{type, view_id}], label, expires_at}."""
        actor = await self._actor(request, "publish")
        if isinstance(actor, Response):
            return actor
        if actor.provider_id is None:
            return detail(403, "publisher token has no provider scope")
        payload = await self._object(request)
        if isinstance(payload, Response):
            return payload
        try:
            title = _payload_text(payload, "title", required=True, limit=200)
            parts = _share_parts(payload)
            label = _payload_text(payload, "label", limit=200)
            expires = _payload_text(payload, "expires_at", limit=64)
        except HubRefused as exc:
            return detail(exc.status, exc.detail)
        out = await self.call(lambda: self.store.create_share_invitation(
            request.path_params["share_id"], actor, title=str(title), parts=parts, label=label, expires_at=expires))
        return out if isinstance(out, Response) else JSONResponse(out, status_code=201)

    async def share_landing(self, request: Request) -> Response:
        token = request.path_params["token"]
        info = await self.call(self.store.describe_share_invitation, token)
        if isinstance(info, Response):
            return info
        return JSONResponse({"share_id": info["share_id"], "title": info["title"], "provider_id": info["provider_id"],
                             "parts": info["parts"],
                             "api": {"view": f"/api/share-invitations/{token}/view",
                                     "accept": f"/api/share-invitations/{token}/accept"}})

    async def describe_share_invitation(self, request: Request) -> Response:
        return await self._describe(request, self.store.describe_share_invitation)

    async def accept_share_invitation(self, request: Request) -> Response:
        return await self._accept(request, self.store.accept_share_invitation)

    async def _describe(self, request: Request, describe) -> Response:
        info = await self.call(describe, request.path_params["token"])
        return info if isinstance(info, Response) else JSONResponse(info)

    async def _accept(self, request: Request, accept) -> Response:
        """An invitation (of a view or a share) accepted for the ``consumer_label`` the body names."""
        payload = await self._object(request)
        if isinstance(payload, Response):
            return payload
        try:
            label = optional_text(payload.get("consumer_label"), "consumer_label", 200)
        except HubRefused as exc:
            return detail(exc.status, exc.detail)
        out = await self.call(accept, request.path_params["token"], label)
        return out if isinstance(out, Response) else JSONResponse(out, status_code=201)

    async def package(self, request: Request, view_id: str) -> Response:
        """``GET /api/views/<view>/package`` for a connection token: the hub's current version."""
        try:
            vid = check_id(view_id, "view_id")
        except HubRefused:
            return detail(401, "invalid bearer token")
        actor = await self.connection_actor(request, vid)
        if isinstance(actor, Response):
            return actor
        folder = await self.call(self.store.current_version, vid)
        if isinstance(folder, Response):
            return folder
        if folder is None:
            return detail(404, "view not found")
        return await send_package(folder, vid, _package_refusal)

    async def inbox(self, request: Request) -> Response:
        try:
            provider_id = check_id(request.path_params["provider_id"], "provider_id")
        except HubRefused as exc:
            return detail(exc.status, exc.detail)
        token = bearer(request)
        find = self.store.find_token
        allowed = (await run_in_threadpool(find, token, "admin")
                   or await run_in_threadpool(lambda: find(token, "publish", provider_id=provider_id)))
        if not allowed:
            if await run_in_threadpool(find, token, "publish"):
                return detail(403, "token cannot read provider inbox")
            await run_in_threadpool(self.store.reject, "publish")
            return detail(401, "invalid bearer token")
        try:  # the original's listings page with ?limit= (1 to 200) and ?offset=
            limit, offset = _query_int(request, "limit", INBOX_PAGE), _query_int(request, "offset", 0)
        except HubRefused as exc:
            return detail(exc.status, exc.detail)
        items = await self.call(self.store.inbox, provider_id, limit, offset)
        if isinstance(items, Response):
            return items
        return JSONResponse({"provider_id": provider_id, "interactions": items})

    # -- consumer -----------------------------------------------------------------------------

    async def landing(self, request: Request) -> Response:
        token = request.path_params["token"]
        info = await self.call(self.store.describe_invitation, token)
        if isinstance(info, Response):
            return info
        return JSONResponse({"view_id": info["view_id"], "title": info["title"], "description": info["description"],
                             "api": {"view": f"/api/invitations/{token}/view",
                                     "accept": f"/api/invitations/{token}/accept"}})

    async def describe_invitation(self, request: Request) -> Response:
        return await self._describe(request, self.store.describe_invitation)

    async def accept_invitation(self, request: Request) -> Response:
        return await self._accept(request, self.store.accept_invitation)

    async def post_interaction(self, request: Request) -> Response:
        view_id = request.path_params["view_id"]
        actor = await self.connection_actor(request, view_id)
        if isinstance(actor, Response):
            return actor
        payload = await self._object(request)
        if isinstance(payload, Response):
            return payload
        try:
            clean = interaction_payload(payload)
        except HubRefused as exc:
            return detail(exc.status, exc.detail)
        out = await self.call(self.store.record_interaction, view_id, actor, clean)
        return out if isinstance(out, Response) else JSONResponse(out, status_code=201)

    async def health(self, request: Request) -> Response:
        ready = self.store.db_path.is_file() and self.store.config_path.is_file()
        return JSONResponse({"status": "ok" if ready else "uninitialized", "initialized": ready,
                             "storage": self.store.storage_root.is_dir()})


def interaction_payload(payload: dict) -> dict:
    """What an interaction stores: ``message`` (required), ``actor`` (default ``consumer``),
    ``task_context``, and the note's other fields as sent."""
    if len(payload) > MAX_INTERACTION_KEYS:
        raise HubRefused(400, f"an interaction carries at most {MAX_INTERACTION_KEYS} fields")
    message = optional_text(payload.get("message"), "message", MAX_MESSAGE_CHARS)
    if message is None:
        raise HubRefused(400, "message must be a non-empty string")
    clean: dict = {"actor": optional_text(payload.get("actor"), "actor", 200) or "consumer", "message": message}
    context = optional_text(payload.get("task_context"), "task_context", MAX_MESSAGE_CHARS)
    if context:
        clean["task_context"] = context
    for key, value in payload.items():
        if key not in ("actor", "message", "task_context"):
            if len(key) > 64:
                raise HubRefused(400, "interaction field names are at most 64 characters")
            clean[key] = value
    return clean
