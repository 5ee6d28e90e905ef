"""What every route of ``shared-view serve`` shares: its limits, the bearer token of a request,
the bounded reading of a JSON body, the two shapes of a refusal, and sending a package.

It sits below :mod:`.routes` (the view routes), :mod:`.hubroutes` (the hub's) and
:mod:`.server` (which assembles them), so none of them needs another to be read or tested.
Starlette is imported where a response is made: a command that only reads ``Limits`` or the
hub root (``hub-token``) does not pay for the web stack.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

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
    #: what one hub connection (one consumer) may store as notes in a rolling day
    note_bytes_per_day: int = 2 * 1024 * 1024


# -- refusals ------------------------------------------------------------------------------------

def denied() -> Response:
    """The view routes' 401 (rmtui's own shape: these routes are not the hub's)."""
    from starlette.responses import JSONResponse

    return JSONResponse({"ok": False, "error": "unauthorized", "message": "a valid bearer token is required"},
                        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="rightmemory"'})


def failure(status: int, error: str, message: str) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse({"ok": False, "error": error, "message": message}, status_code=status)


def detail(status: int, text: object) -> Response:
    """The hub's refusal, as the original hub answers it: ``{"detail": <reason>}``."""
    from starlette.responses import JSONResponse

    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"detail": text}, status_code=status, headers=headers)


# -- auth ----------------------------------------------------------------------------------------

def bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


# -- bodies --------------------------------------------------------------------------------------

def _no_constant(name: str) -> object:
    # NaN and Infinity are not JSON: stored, they would make every later answer that carries them fail
    raise ValueError(f"{name} is not a JSON number")


async def read_json(request: Request, max_bytes: int, shape: str, *,
                    refuse: Callable[[int, str, str], Response] = failure) -> object | Response:
    """The request's JSON body, or the refusal to send: over ``max_bytes`` (413, checked on the
    declared length and again while streaming), not JSON (415/400), or not all there in time (408).
    ``shape`` shows the sender what to send instead; ``refuse`` shapes the refusal (the hub's differs)."""
    from starlette.requests import ClientDisconnect

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
        return json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return refuse(400, "bad_input", "the body is not JSON")


# -- packages ------------------------------------------------------------------------------------

async def send_package(folder: Path, vid: str, refuse: Callable[[int, str, str], Response] = failure) -> Response:
    """A validated package folder as a zip, with its digest in ``X-RightMemory-Package-Version``."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response

    try:
        data, digest = await run_in_threadpool(_load_package, folder, vid)
    except Exception as exc:  # noqa: BLE001 - any failure to read the package is a 503, not a 500
        return refuse(503, "unavailable", f"the package of {vid} cannot be served: {exc}")
    return Response(data, media_type="application/zip",
                    headers={"X-RightMemory-Package-Version": digest, "Cache-Control": "no-store"})


def _load_package(folder: Path, vid: str) -> tuple[bytes, str]:
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
