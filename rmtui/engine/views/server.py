"""The HTTP provider of shared views (routes: docs/formats.md, "Shared views"), on Starlette served by uvicorn.

Routes, each behind a bearer token issued for that view (``shared-view token``; only its
SHA-256 is kept):

- ``GET  /api/views/<view>/package``: the last built package of a file view, as a zip;
- ``GET  /api/share/questions/<view>/ready``: a question view is there;
- ``POST /api/share/questions/<view>/ask`` ``{"question"}``: the provider's retrieve role
  answers (``{"ok", "message", "data": {"view_id", "status", "answer"|"reason", "text"}}``).

With a hub root (by default ``.runtime/hub/``), the hub's routes too (:mod:`.hubroutes`:
publishing a version, invitations, accepting one, interactions, the provider's inbox), and
the package route also serves the hub's current version of a view to its connection tokens.

A missing or wrong token, or a token of another view, gets 401 and nothing else, and so
does a view that does not exist (no probing for names). Loopback only unless
``allow_remote``. Limits: request bodies (``max_body_bytes``), question length,
questions answered at once (``max_answers``, 429 past it), the answer time of the view's
``question.toml``, and connections: how many in all and per client address, and how long a
client may take to send a request head and body (:mod:`.connections`).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from pathlib import Path

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views.httpcommon import Limits, detail
from rmtui.engine.views.hubstore import HubStore

__all__ = ["DEFAULT_LIMITS", "Limits", "ViewServer", "hub_root_of", "is_loopback", "make_app"]

DEFAULT_LIMITS = Limits()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def hub_root_of(root: MemoryRoot) -> Path:
    """Where ``shared-view serve`` keeps its hub unless told otherwise (docs/formats.md, "The hub")."""
    return root.ensure_runtime() / "hub"


def make_app(root: MemoryRoot, limits: Limits = DEFAULT_LIMITS, hub: HubStore | None = None):
    """The Starlette app of ``root``'s views and, with ``hub``, the hub's routes; the handlers
    live in :mod:`.routes` and :mod:`.hubroutes`, what they share in :mod:`.httpcommon`. The
    package route is both tools': the view routes hand a token that is no view token to the hub."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from rmtui.engine.views.hubroutes import HubRoutes
    from rmtui.engine.views.routes import ViewRoutes

    hubs = HubRoutes(hub, limits) if hub is not None else None
    views = ViewRoutes(root, limits, hubs.package if hubs is not None else None)
    routes = [Route("/api/views/{view_id}/package", views.package, methods=["GET"]),
              Route("/api/share/questions/{view_id}/ready", views.ready, methods=["GET"]),
              Route("/api/share/questions/{view_id}/ask", views.ask, methods=["POST"])]
    if hubs is not None:
        routes += [Route("/health", hubs.health, methods=["GET"]),
                   Route("/api/views/{view_id}/versions", hubs.publish, methods=["POST"]),
                   Route("/api/views/{view_id}/invitations", hubs.create_invitation, methods=["POST"]),
                   Route("/api/shares/{share_id}/invitations", hubs.create_share_invitation, methods=["POST"]),
                   Route("/i/share/{token}", hubs.share_landing, methods=["GET"]),
                   Route("/api/share-invitations/{token}/view", hubs.describe_share_invitation, methods=["GET"]),
                   Route("/api/share-invitations/{token}/accept", hubs.accept_share_invitation, methods=["POST"]),
                   Route("/i/{token}", hubs.landing, methods=["GET"]),
                   Route("/api/invitations/{token}/view", hubs.describe_invitation, methods=["GET"]),
                   Route("/api/invitations/{token}/accept", hubs.accept_invitation, methods=["POST"]),
                   Route("/api/views/{view_id}/interactions", hubs.post_interaction, methods=["POST"]),
                   Route("/api/providers/{provider_id}/inbox", hubs.inbox, methods=["GET"])]

    async def http_error(request: Request, exc: Exception) -> Response:
        # an unknown route or method answers as the original hub's framework does
        if isinstance(exc, HTTPException):
            return detail(exc.status_code, exc.detail)
        return detail(500, "Internal Server Error")  # pragma: no cover - registered for HTTPException only

    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})


class ViewServer:
    """uvicorn serving :func:`make_app` on one bound socket (port 0 picks a free one)."""

    def __init__(self, root: MemoryRoot, *, host: str = "127.0.0.1", port: int = 8767, allow_remote: bool = False,
                 limits: Limits = DEFAULT_LIMITS, hub_root: Path | None = None, public_url: str | None = None) -> None:
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
        hub = HubStore(hub_root or hub_root_of(root), public_base_url=public_url, serving_url=self.url,
                       note_bytes_per_day=limits.note_bytes_per_day)
        try:
            hub.record_public_base_url()
        except BaseException:
            self.sock.close()
            raise
        self.hub = hub
        self.root = root
        config = uvicorn.Config(make_app(root, limits, hub), http=protocol, log_level="warning", access_log=False,
                                lifespan="off", limit_concurrency=limits.max_connections + 1,
                                timeout_keep_alive=limits.keep_alive_seconds, server_header=False)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def connect_urls(self) -> list[tuple[str, str, str]]:
        """``(kind, view, URL)`` for each view of the root: the URL ``shared-view connect`` takes."""
        from rmtui.engine.views.provider import list_views

        out = []
        for view in list_views(self.root):
            vid, kind = view["view_id"], view["kind"]
            path = f"/api/views/{vid}" if kind == "file" else f"/api/share/questions/{vid}"
            out.append((kind, vid, self.url + path))
        return out

    def connect_lines(self) -> str:
        """What ``shared-view serve`` prints below its first line: each view's connect URL."""
        lines = [f"  {kind} view {vid}: {url}" for kind, vid, url in self.connect_urls()]
        if lines:
            lines.append("  connect with `shared-view connect URL --token-env NAME` "
                         "(a token from `shared-view token VIEW`)")
        return "".join(line + "\n" for line in lines)

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
