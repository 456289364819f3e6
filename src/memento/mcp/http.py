"""The Streamable HTTP transport (MCP 2025-03-26 and later) on Starlette, served by uvicorn.

`POST /mcp` carries one JSON-RPC message; requests are answered with a JSON body (or a
single-event SSE stream when the client accepts only SSE), notifications and responses with
202. `initialize` without a session creates one and returns it in `Mcp-Session-Id`; every
other message must name a live session. `GET /mcp` opens a server-to-client SSE stream (idle
for now: the server sends no requests yet), `DELETE /mcp` ends the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from memento.mcp import jsonrpc, versions
from memento.mcp.jsonrpc import INVALID_REQUEST, JsonRpcError
from memento.mcp.server import McpServer, Session

if TYPE_CHECKING:
    from memento.app import App

log = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
MAX_BODY_BYTES = 4 * 1024 * 1024
KEEPALIVE_S = 15.0
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _rpc_error(status: int, code: int, message: str, request_id: Any = None) -> JSONResponse:
    return JSONResponse(jsonrpc.error_response(request_id, code, message), status_code=status)


def _accepts(request: Request) -> tuple[bool, bool]:
    """Whether the client accepts (JSON, SSE); a missing Accept header accepts anything."""
    header = request.headers.get("accept")
    if not header:
        return True, True
    kinds = {part.split(";")[0].strip().lower() for part in header.split(",")}
    anything = "*/*" in kinds
    json_ok = anything or "application/json" in kinds or "application/*" in kinds
    sse_ok = anything or "text/event-stream" in kinds or "text/*" in kinds
    return json_ok, sse_ok


def _sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + jsonrpc.encode(message).encode("utf-8") + b"\n\n"


class McpHttp:
    """The `/mcp` endpoint: session routing and HTTP framing around `McpServer`."""

    def __init__(
        self, server: McpServer, *, allowed_origins: list[str], session_ttl_s: float
    ) -> None:
        self.server = server
        self.allowed_origins = frozenset(allowed_origins)
        self.session_ttl_s = session_ttl_s
        self._streams: dict[str, set[asyncio.Event]] = {}
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle

    def started(self) -> None:
        self._loop = asyncio.get_running_loop()

    def begin_shutdown(self) -> None:
        """Close every GET stream so the server can drain; safe from a signal handler."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._close_streams)

    def _close_streams(self) -> None:
        self._closing = True
        for events in self._streams.values():
            for event in events:
                event.set()

    def _end_streams(self, session_id: str) -> None:
        for event in self._streams.pop(session_id, set()):
            event.set()

    # ------------------------------------------------------------------ endpoint

    async def endpoint(self, request: Request) -> Response:
        if not self._origin_allowed(request.headers.get("origin")):
            return _rpc_error(403, INVALID_REQUEST, "Forbidden: origin not allowed")
        await self._expire_idle()
        if request.method == "POST":
            return await self._post(request)
        if request.method == "GET":
            return await self._get(request)
        if request.method == "DELETE":
            return await self._delete(request)
        return Response(status_code=405, headers={"Allow": "GET, POST, DELETE"})

    def _origin_allowed(self, origin: str | None) -> bool:
        # Browsers send Origin; refusing foreign ones blocks DNS rebinding against a local server.
        if origin is None:
            return True
        if self.allowed_origins:
            return origin in self.allowed_origins or "*" in self.allowed_origins
        return (urlsplit(origin).hostname or "") in LOCAL_HOSTS

    async def _expire_idle(self) -> None:
        # An open GET stream refreshes its session on every keepalive, so it never expires here.
        expired_before = set(self.server.sessions)
        await self.server.close_idle_sessions(self.session_ttl_s)
        for sid in expired_before - set(self.server.sessions):
            self._end_streams(sid)

    def _session(self, request: Request) -> Session | Response:
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            return _rpc_error(
                400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"
            )
        session = self.server.get_session(session_id)
        if session is None:
            return _rpc_error(404, INVALID_REQUEST, "Session not found")
        version = request.headers.get(VERSION_HEADER)
        if version is not None and not versions.is_supported(version):
            return _rpc_error(400, INVALID_REQUEST, f"Unsupported MCP-Protocol-Version: {version}")
        return session

    async def _post(self, request: Request) -> Response:
        json_ok, sse_ok = _accepts(request)
        if not (json_ok or sse_ok):
            return _rpc_error(
                406, INVALID_REQUEST, "Not Acceptable: accept application/json or text/event-stream"
            )
        if not request.headers.get("content-type", "").lower().startswith("application/json"):
            return _rpc_error(415, INVALID_REQUEST, "Unsupported Media Type: send application/json")
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return _rpc_error(413, INVALID_REQUEST, "Request too large")
        try:
            value = jsonrpc.decode(body)
            message = jsonrpc.parse_message(value)
        except JsonRpcError as exc:
            return JSONResponse(exc.to_response(), status_code=400)

        created: Session | None = None
        session: Session
        if isinstance(message, jsonrpc.Request) and message.method == "initialize":
            session = created = self.server.create_session()
        else:
            found = self._session(request)
            if isinstance(found, Response):
                return found
            session = found

        reply = await self.server.handle(value, session)
        if reply is None:
            return Response(status_code=202)
        headers: dict[str, str] = {}
        if created is not None:
            if "error" in reply:
                await self.server.close_session(created.id)  # a failed handshake keeps no session
            else:
                headers["Mcp-Session-Id"] = created.id
        if json_ok:
            return JSONResponse(reply, headers=headers)
        return Response(_sse_event(reply), media_type="text/event-stream", headers=headers)

    async def _get(self, request: Request) -> Response:
        if not _accepts(request)[1]:
            return _rpc_error(
                406, INVALID_REQUEST, "Not Acceptable: GET /mcp serves text/event-stream"
            )
        found = self._session(request)
        if isinstance(found, Response):
            return found
        if self._closing:
            return _rpc_error(503, INVALID_REQUEST, "Server is shutting down")
        closed = asyncio.Event()
        self._streams.setdefault(found.id, set()).add(closed)
        return StreamingResponse(
            self._idle_stream(found.id, closed),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "Mcp-Session-Id": found.id},
        )

    async def _idle_stream(self, session_id: str, closed: asyncio.Event) -> AsyncIterator[bytes]:
        try:
            yield b": stream open\n\n"
            while not closed.is_set():
                with anyio.move_on_after(KEEPALIVE_S):
                    await closed.wait()
                if closed.is_set() or self.server.get_session(session_id) is None:
                    return
                yield b": keepalive\n\n"  # also how a vanished client is noticed
        finally:
            streams = self._streams.get(session_id)
            if streams is not None:
                streams.discard(closed)
                if not streams:
                    del self._streams[session_id]

    async def _delete(self, request: Request) -> Response:
        found = self._session(request)
        if isinstance(found, Response):
            return found
        self._end_streams(found.id)
        await self.server.close_session(found.id)
        return Response(status_code=204)


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def create_http_app(app: App) -> Starlette:
    """The ASGI application: `/mcp` and `/health`; closing the app is part of its shutdown."""
    mcp = McpHttp(
        McpServer(app),
        allowed_origins=app.settings.origins,
        session_ttl_s=app.settings.session_ttl_minutes * 60.0,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        mcp.started()
        try:
            yield
        finally:
            mcp._close_streams()
            await mcp.server.close_all_sessions()
            await anyio.to_thread.run_sync(app.close)
            log.info("HTTP server stopped")

    asgi = Starlette(
        routes=[
            Route(
                "/mcp", mcp.endpoint, methods=["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"]
            ),
            Route("/health", _health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    asgi.state.mcp = mcp
    return asgi


class _Server(uvicorn.Server):
    """uvicorn, plus: the first exit signal also ends the idle SSE streams it would wait for."""

    def __init__(self, config: uvicorn.Config, mcp: McpHttp) -> None:
        super().__init__(config)
        self._mcp = mcp

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._mcp.begin_shutdown()
        super().handle_exit(sig, frame)


def serve_http(app: App, host: str, port: int) -> None:
    """Serve MCP over Streamable HTTP until SIGTERM/SIGINT, then close every session and `app`."""
    asgi = create_http_app(app)
    config = uvicorn.Config(
        asgi, host=host, port=port, log_config=None, lifespan="on", timeout_graceful_shutdown=5
    )
    log.info("serving MCP on http://%s:%d/mcp", host, port)
    try:
        _Server(config, asgi.state.mcp).run()
    finally:
        app.close()  # idempotent; covers a start-up failure before the lifespan ran
