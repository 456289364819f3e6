"""The legacy HTTP+SSE transport (MCP 2024-11-05), beside Streamable HTTP in the same app.

`GET /sse` creates a session and opens its event stream; the first event is `endpoint`, whose
data is the URL to post to (`/message?sessionId=...`). `POST /message?sessionId=...` takes one
JSON-RPC message and answers 202 at once; responses, notifications and server→client requests
all travel on the SSE stream as `message` events. Closing the stream ends the session.

Both endpoints authenticate like `/mcp` (Authorization: Bearer; 000 §12's `accessKey` query
parameter is refused, as credentials in URLs leak into logs), and `/message` only accepts
the credential that opened the session. A client that stops reading its stream is cut off
(and its session ended) once MEMENTO_STREAM_QUEUE_LIMIT messages wait for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from memento.mcp import jsonrpc
from memento.mcp.http_gate import owns
from memento.mcp.http_json import JSONResponse  # total: always valid JSON
from memento.mcp.jsonrpc import INVALID_REQUEST, JsonRpcError
from memento.mcp.sse_streams import SseResponse, overflowing

if TYPE_CHECKING:
    from memento.mcp.http import McpHttp

log = logging.getLogger(__name__)

MESSAGE_PATH = "/message"
_END = object()


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(jsonrpc.error_response(None, INVALID_REQUEST, message), status_code=status)


class LegacySse:
    """`/sse` and `/message`, sharing the sessions, guards and features of `McpHttp`."""

    def __init__(self, http: McpHttp) -> None:
        self.http = http
        self.server = http.server
        self._queues: dict[str, asyncio.Queue[Any]] = {}
        self._cuts: dict[str, Callable[[], None]] = {}  # ends a session's stream at once
        self._tasks: set[asyncio.Task[None]] = set()

    def close_all(self) -> None:
        for queue in self._queues.values():
            queue.put_nowait(_END)

    def _deliver(self, session_id: str, queue: asyncio.Queue[Any], message: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Queue a message for the stream; a client that stopped reading is cut off instead."""
        if not overflowing(queue, self.http.streams.queue_limit):
            queue.put_nowait(message)
            return
        if self._queues.pop(session_id, None) is not None:
            log.warning("cut legacy SSE session %s: the client is not reading", session_id)
        cut = self._cuts.pop(session_id, None)
        if cut is not None:
            cut()  # the stream ends, and with it the session

    def session_count(self) -> int:
        """Sessions with an open legacy stream."""
        return len(self._queues)

    def open_sessions(self) -> set[str]:
        """Sessions whose legacy stream is open (never idle, for the session cap)."""
        return set(self._queues)

    def end(self, session_id: str) -> None:
        queue = self._queues.pop(session_id, None)
        if queue is not None:
            queue.put_nowait(_END)

    async def connect(self, request: Request) -> Response:
        refused = self.http.gate.guard(request)
        if refused is not None:
            return refused
        principal = self.http.gate.authenticate(request)
        if isinstance(principal, Response):
            return principal
        if self.http._closing:
            return _error(503, "Server is shutting down")
        if not await self.http.make_room():
            return _error(503, "Service Unavailable: too many sessions")
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def send(message: dict[str, Any]) -> None:
            self._deliver(session.id, queue, message)

        session = self.server.create_session(send, principal)
        self._queues[session.id] = queue
        log.info("legacy SSE session %s opened", session.id)

        async def events() -> AsyncIterator[bytes]:
            try:
                yield f"event: endpoint\ndata: {MESSAGE_PATH}?sessionId={session.id}\n\n".encode()
                while True:
                    item: Any = None
                    with anyio.move_on_after(15.0):
                        item = await queue.get()
                    if item is _END:
                        return
                    if item is None:
                        if self.server.get_session(session.id) is None:
                            return
                        yield b": keepalive\n\n"
                        continue
                    yield b"event: message\ndata: " + jsonrpc.dumps(item) + b"\n\n"
            finally:
                self._queues.pop(session.id, None)
                self._cuts.pop(session.id, None)
                with anyio.CancelScope(shield=True):
                    await self.server.close_session(session.id)

        response = SseResponse(events())
        self._cuts[session.id] = response.cut
        return response

    async def message(self, request: Request) -> Response:
        refused = self.http.gate.guard(request)
        if refused is not None:
            return refused
        principal = self.http.gate.authenticate(request)
        if isinstance(principal, Response):
            return principal
        session_id = request.query_params.get("sessionId") or request.query_params.get("session_id")
        if not session_id:
            return _error(400, "Bad Request: sessionId is required")
        session = self.server.session_table.get(session_id)
        queue = self._queues.get(session_id)
        if session is None or queue is None or not owns(session, principal):
            return _error(404, "Session not found")  # another credential's session is unknown too
        self.server.get_session(session_id)  # refreshes last_seen
        try:
            value = jsonrpc.decode(await request.body())
        except JsonRpcError as exc:
            return JSONResponse(exc.to_response(), status_code=400)

        async def send(message: dict[str, Any]) -> None:
            self._deliver(session.id, queue, message)

        async def run() -> None:
            reply = await self.server.handle(value, session, send)
            if reply is not None:
                self._deliver(session.id, queue, reply)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Response("Accepted", status_code=202)
