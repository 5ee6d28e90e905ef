"""Connection limits of the shared-view server (docs/architecture.md, "Sync, shared views,
cycles"): what keeps idle, slow or greedy clients from holding the server's connections.

uvicorn counts every open connection against its concurrency limit but times out only the
gap after a response, and any byte resets that timer. So sockets that connect and never send
a request, or send one header byte now and then, would keep the server answering 503 for as
long as they stay open. The HTTP protocol here is uvicorn's own h11 protocol with three
rules added:

- a request head must arrive whole within ``header_timeout_seconds`` of the connection
  starting to wait for it (opening, or the end of the previous response), however the bytes
  trickle in; a request body within ``body_timeout_seconds`` of its head. Past either
  deadline the connection is closed.
- one client address holds at most ``max_connections_per_client`` connections, and all
  clients together ``max_connections``.
- at either bound a new connection takes the place of the oldest connection that is only
  waiting for a request (as a web server reuses its idle keep-alive connections when it runs
  out); when every connection is busy with a request, the new one gets 503 and is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
           b"content-length: 37\r\nconnection: close\r\n\r\nevery connection is busy; retry soon\n")


class ConnectionTable:
    """The admitted connections of one server, oldest first."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total = max(1, total)
        self.per_client = max(1, per_client)
        self.open: dict[Any, None] = {}  # insertion-ordered: the oldest first

    def _make_room(self, among: list[Any], bound: int) -> bool:
        """Close the oldest connections of ``among`` that wait for a request until fewer
        than ``bound`` are left; False when the busy ones alone reach the bound."""
        while len(among) >= bound:
            idle = next((c for c in among if c.waiting_for_request()), None)
            if idle is None:
                return False
            idle.evict()
            among.remove(idle)
        return True

    def admit(self, conn: Any) -> bool:
        same = [c for c in self.open if c.peer == conn.peer]
        if not self._make_room(same, self.per_client) or not self._make_room(list(self.open), self.total):
            return False
        self.open[conn] = None
        return True

    def remove(self, conn: Any) -> None:
        self.open.pop(conn, None)


def guarded_protocol(*, max_connections: int, max_connections_per_client: int, header_timeout_seconds: float,
                     body_timeout_seconds: float) -> type[asyncio.Protocol]:
    """The HTTP protocol class for one server (``uvicorn.Config(http=...)``): its own
    connection table, the limits of the module docstring."""
    table = ConnectionTable(max_connections, max_connections_per_client)

    class GuardedH11Protocol(H11Protocol):
        peer: str = ""
        admitted = False
        _deadline: asyncio.TimerHandle | None = None
        _phase: tuple[str, object] | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            peername = transport.get_extra_info("peername")
            self.peer = str(peername[0]) if isinstance(peername, tuple) and peername else ""
            if not table.admit(self):
                transport.write(REFUSAL)
                transport.close()
                return
            self.admitted = True
            super().connection_made(transport)
            self._follow()

        def connection_lost(self, exc: Exception | None) -> None:
            table.remove(self)
            self._disarm()
            if self.admitted:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.admitted:
                super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._follow()

        # -- the deadlines ------------------------------------------------------------------

        def waiting_for_request(self) -> bool:
            """No request in flight: the connection is only waiting for (the rest of) a head."""
            return self.admitted and (self.cycle is None or self.cycle.response_complete)

        def evict(self) -> None:
            self._close()

        def _follow(self) -> None:
            """Arm the deadline of what the connection now waits for from the client: a
            request head, or the body of the request in flight; none while it is served."""
            if self.transport is None or self.transport.is_closing():
                return
            if self.waiting_for_request():
                phase: tuple[str, object] | None = ("head", self.cycle)
            elif self.conn.their_state is h11.SEND_BODY:
                phase = ("body", self.cycle)
            else:
                phase = None
            if phase == self._phase:
                return  # the same wait goes on: its deadline does not move, however bytes trickle
            self._disarm()
            self._phase = phase
            if phase is not None:
                seconds = header_timeout_seconds if phase[0] == "head" else body_timeout_seconds
                self._deadline = self.loop.call_later(max(0.01, seconds), self._expire, phase)

        def _expire(self, phase: tuple[str, object]) -> None:
            self._deadline = None
            if phase == self._phase:
                self._close()

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _close(self) -> None:
            table.remove(self)  # gone from the count now, not once the loop reports it lost
            self._disarm()
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol
