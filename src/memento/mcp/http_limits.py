"""Limits that keep one client from exhausting the HTTP server: body size and read timeouts.

`RequestLimits` is one ASGI middleware around the whole app. A request whose Content-Length
exceeds its route's limit is refused with 413 before a byte of the body is read; a chunked
body, or one longer than it said, is counted while it streams in and refused at the limit, so
a request never holds more than the limit in memory. The whole body must arrive within the
body timeout, else 408. Either answer closes the connection, which stops the upload.

`header_timeout_protocol` makes uvicorn's HTTP/1.1 protocol close a connection whose request
line and headers do not arrive in time (uvicorn itself only times out idle keep-alives).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import anyio
import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from memento.mcp import jsonrpc
from memento.mcp.jsonrpc import INVALID_REQUEST

log = logging.getLogger(__name__)

MCP_PATHS = ("/mcp", "/message", "/sse")  # answered with a JSON-RPC error body
FORM_PATHS = ("/register", "/authorize", "/token", "/revoke")  # OAuth: small forms and JSON
FORM_LIMIT_BYTES = 64 * 1024


class _Refused(Exception):
    """Raised into the app once the limits middleware has answered the request itself."""


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # h11 refuses a malformed Content-Length before the app sees it
    return None


def _refusal(path: str, status: int, message: str) -> bytes:
    if path in MCP_PATHS:
        return json.dumps(jsonrpc.error_response(None, INVALID_REQUEST, message)).encode()
    error = "request_too_large" if status == 413 else "request_timeout"
    return json.dumps({"error": error, "error_description": message}).encode()


class RequestLimits:
    """Refuse bodies over the route's size limit (413) or slower than the body timeout (408)."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    def limit_for(self, path: str) -> int:
        """The body limit of a route: small for the OAuth forms, the setting elsewhere."""
        if path in FORM_PATHS:
            return min(FORM_LIMIT_BYTES, self.max_body_bytes)
        return self.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        limit = self.limit_for(path)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._answer(send, path, 413, f"Request body too large (limit {limit} bytes)")
            return
        guard = _BodyGuard(self, scope, receive, send, limit)
        try:
            await self.app(scope, guard.receive, guard.send)
        except _Refused:
            pass  # already answered; the app's own reaction (if any) was dropped

    @staticmethod
    async def _answer(send: Send, path: str, status: int, message: str) -> None:
        log.info("refused a request to %s: %s", path, message)
        body = _refusal(path, status, message)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                # Connection: close makes uvicorn drop the connection: the rest of the body is
                # never read.
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"connection", b"close"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _BodyGuard:
    """One request's receive/send, counting the body and timing it."""

    def __init__(self, limits: RequestLimits, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        self.limits = limits
        self.path: str = scope["path"]
        self.inner_receive = receive
        self.inner_send = send
        self.limit = limit
        self.received = 0
        self.body_done = False
        self.started = False  # the app began its response
        self.answered = False  # this guard answered instead of the app
        self.deadline: float | None = None

    async def receive(self) -> Message:
        if self.body_done:  # after the body: disconnect waits of streaming responses, untimed
            return await self.inner_receive()
        loop = asyncio.get_running_loop()
        if self.deadline is None:
            self.deadline = loop.time() + self.limits.body_timeout_s
        message: Message | None = None
        with anyio.move_on_after(max(0.0, self.deadline - loop.time())):
            message = await self.inner_receive()
        if message is None:
            await self._refuse(408, "Request body not received in time")
        assert message is not None
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                await self._refuse(413, f"Request body too large (limit {self.limit} bytes)")
            self.body_done = not message.get("more_body", False)
        else:
            self.body_done = True  # http.disconnect
        return message

    async def _refuse(self, status: int, message: str) -> None:
        if not self.started:
            self.answered = True
            await RequestLimits._answer(self.inner_send, self.path, status, message)
        raise _Refused(message)

    async def send(self, message: Message) -> None:
        if self.answered:
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self.inner_send(message)


def header_timeout_protocol(timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing connections whose request headers take over `timeout_s`."""

    class HeaderTimeoutProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(timeout_s, self._headers_overdue)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _serving(self) -> bool:
            """Whether a request's headers are in and its response is still being made."""
            return self.cycle is not None and not self.cycle.response_complete

        def _headers_overdue(self) -> None:
            self._header_timer = None
            # Waiting for headers, or for the rest of a body nobody reads any more (answered
            # without it, e.g. 401): uvicorn would wait, and discard, for as long as it trickles.
            waiting = self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self._serving()
            if waiting and not self.transport.is_closing():
                log.info("closed a connection whose request did not arrive in time")
                self.timeout_keep_alive_handler()  # uvicorn's own way of closing an idle one

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self._serving():
                self._disarm()  # the headers are in; the body has its own (ASGI) timeout

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection gets the same time

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol
