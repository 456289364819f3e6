"""The Streamable HTTP transport (MCP 2025-03-26 and later) on Starlette, served by uvicorn.

`POST /mcp` carries one JSON-RPC message (or, for 2025-03-26 sessions, a batch). A request is
answered with a JSON body, or with an SSE stream when answering it produces related messages
(progress, logs, server→client requests), the client prefers SSE, or — from 2025-11-25 — it
is a `tools/call` and the client accepts SSE as much as JSON; notifications and responses get
202. From 2025-11-25 every SSE stream opens with a priming event (an id, `retry`, empty data),
so a request may close its POST stream mid-call (`RequestContext.close_stream`, SEP-1699) and
the client resumes with `GET` + `Last-Event-ID`. `initialize` without a session creates one
and returns it in `Mcp-Session-Id`; every other message must name a live session (400 without,
404 unknown).
`GET /mcp` opens the session's stream for server-initiated messages, or, with
`Last-Event-ID`, resumes the stream an event belonged to from the event store. `DELETE /mcp`
ends the session. Origin and Host are checked on every request (DNS rebinding). The legacy
HTTP+SSE transport (2024-11-05) lives in `sse_legacy` and shares this app.

MCP 2026-07-28 has no sessions: a POST carrying a 2026 request (`stateless.stateless_request`)
is checked against its headers (`http_headers`, 400 / -32020) and answered by
`stateless.handle_stateless` with the caller's principal — JSON, or an SSE stream of that
request's own notifications ending with its response; no session id, no event ids, nothing to
resume, and closing the stream cancels the request. `subscriptions/listen` (`subscriptions`) is
such a stream that stays open. GET and DELETE at 2026 are 405.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from memento.auth.keys import describe
from memento.auth.principal import Principal
from memento.mcp import http_headers, jsonrpc, versions
from memento.mcp.cluster import LocalDirectory, SessionDirectory
from memento.mcp.events import EventStore, MemoryEventStore, StoredEvent
from memento.mcp.http_gate import HttpGate, owns, rpc_error
from memento.mcp.http_json import JSONResponse  # total: always valid JSON
from memento.mcp.http_negotiation import accepts
from memento.mcp.http_replicas import Replicas, answers
from memento.mcp.jsonrpc import INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, JsonRpcError
from memento.mcp.server import McpServer, Session
from memento.mcp.sse_streams import END, KEEPALIVE_S, STANDALONE, Cut, SseResponse, Stream, Streams, overflowing, sse_event
from memento.mcp.stateless import (
    HEADER_MISMATCH,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    check_meta,
    handle_stateless,
    stateless_request,
)
from memento.mcp.subscriptions import LISTEN, subscriptions_of
from memento.mcp.toolsets import tool_definitions

__all__ = ["McpHttp"]

log = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
LAST_EVENT_HEADER = "last-event-id"
DEFAULT_VERSION_HEADER = "2025-03-26"  # what a request without MCP-Protocol-Version means
STATELESS_400 = frozenset({PARSE_ERROR, INVALID_REQUEST, HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION})
"""JSON-RPC errors a 2026 request gets with HTTP 400 (as does a malformed `_meta`, -32602);
-32601 gets 404; every other answer, errors of the method itself included, 200."""
STREAMED_METHODS = frozenset({"tools/call"})
"""Requests answered as a (primed, resumable) SSE stream from 2025-11-25 even when they send
nothing else: the ones that may run long. Quick ones (ping, lists, reads) stay JSON unless
they send related messages; `initialize` is always JSON."""


class _Done:
    """Queued on a 2026 response stream once its request finished (`reply`: its response)."""

    def __init__(self, reply: dict[str, Any] | None) -> None:
        self.reply = reply


def stateless_status(reply: dict[str, Any]) -> int:
    """The HTTP status of a 2026 JSON answer: 404 for -32601, 400 for a bad request."""
    error = reply.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if code == METHOD_NOT_FOUND:
        return 404
    return 400 if code in STATELESS_400 else 200


class McpHttp:
    """The `/mcp` endpoint: session routing, HTTP framing and SSE delivery around `McpServer`."""

    def __init__(
        self,
        server: McpServer,
        *,
        gate: HttpGate,
        session_ttl_s: float,
        event_store: EventStore | None = None,
        directory: SessionDirectory | None = None,
        max_sessions: int = 1000,
        queue_limit: int = 1000,
    ) -> None:
        self.server = server
        self.max_sessions = max_sessions
        self.gate = gate
        self.session_ttl_s = session_ttl_s
        self.store: EventStore = event_store if event_store is not None else MemoryEventStore()
        self.directory: SessionDirectory = directory if directory is not None else LocalDirectory()
        self.streams = Streams(self.store, queue_limit=queue_limit)
        self.replicas = Replicas(server, self.streams, self.store, self.directory, closing=lambda: self._closing)
        server.reachable = self._pushes  # the evaluator samples only through an open GET stream here
        self._stream_ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.legacy: Any = None  # the legacy SSE endpoints, when mounted
        self._schemas: dict[str, Any] | None = None  # tools' inputSchemas (x-mcp-header), built once

    # ------------------------------------------------------------------ lifecycle

    def started(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.server.started()

    def begin_shutdown(self) -> None:
        """Close every SSE stream so the server can drain; safe from a signal handler."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._close_streams)

    def _close_streams(self) -> None:
        # Only the standby GET streams: a streamed tool-call answer ends by itself when its call
        # finishes, so in-flight results still reach their clients during a graceful shutdown.
        self._closing = True
        self.streams.end_standby()
        listening = subscriptions_of(self.server.features)
        if listening is not None:
            listening.end_all()  # 2026 listen streams end with their response
        if self.legacy is not None:
            self.legacy.close_all()

    # ------------------------------------------------------------------ other replicas

    def on_replica_message(self, payload: dict[str, Any]) -> None:
        """A session hand-over message from another replica (bus thread): handled on the loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self.replicas.handle, payload)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def session_counts(self) -> dict[str, int]:
        """Live sessions per transport (ops: /health and /metrics)."""
        legacy = self.legacy.session_count() if self.legacy is not None else 0
        return {"streamable_http": max(len(self.server.session_table) - legacy, 0), "legacy_sse": legacy}

    async def close_all(self) -> None:
        """Shutdown: end the sessions only this process knows; leave shared ones to the others."""
        for sid in list(self.server.session_table):
            if self.directory.alive(sid):
                self.replicas.evict(sid)
            else:
                await self.server.close_session(sid)

    def _sse_response(
        self,
        stream: Stream,
        queue: asyncio.Queue[Any],
        backlog: list[StoredEvent],
        *,
        session: Session,
        preamble: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> SseResponse:
        def keepalive() -> bool:
            if self._closing or self.server.get_session(session.id) is None:  # refreshes it here
                return False
            self.directory.sync(session)  # an open stream keeps the session alive everywhere
            return True

        return self.streams.response(
            stream, queue, backlog, keepalive=keepalive, preamble=preamble, headers={"Mcp-Session-Id": session.id, **(headers or {})}
        )

    # ------------------------------------------------------------------ endpoint

    async def endpoint(self, request: Request) -> Response:
        refused = self.gate.guard(request)
        if refused is not None:
            return refused
        principal = self.gate.authenticate(request)
        if isinstance(principal, Response):
            return principal
        await self._expire_idle()
        if request.method in ("GET", "DELETE") and versions.is_stateless(request.headers.get(VERSION_HEADER, "").strip()):
            # 2026-07-28 has neither the GET stream nor sessions to end (subscriptions/listen instead).
            refused_method = rpc_error(405, INVALID_REQUEST, f"Method Not Allowed: {versions.STATELESS} serves POST only")
            refused_method.headers["Allow"] = "POST"
            return refused_method
        if request.method == "POST":
            return await self._post(request, principal)
        if request.method == "GET":
            return await self._get(request, principal)
        if request.method == "DELETE":
            return await self._delete(request, principal)
        return Response(status_code=405, headers={"Allow": "GET, POST, DELETE"})

    async def _expire_idle(self) -> None:
        # An open GET stream refreshes its session on every keepalive, so it never expires here.
        for sid in self.server.idle_sessions(self.session_ttl_s):
            if self.directory.alive(sid):  # idle here, still in use through another replica
                self.replicas.evict(sid)
                continue
            await self._end_session(sid)

    async def _end_session(self, sid: str) -> None:
        """End a session the normal way: streams, working memory, the shared directory."""
        await self.server.close_session(sid)
        self.streams.end_session(sid)
        self.directory.remove(sid)
        if self.legacy is not None:
            self.legacy.end(sid)

    async def make_room(self) -> bool:
        """Room for one more session (MEMENTO_MAX_SESSIONS): at the cap, the least recently used
        idle session (no open stream, no request in flight) is ended; False when none is idle."""
        table = self.server.session_table
        if len(table) < self.max_sessions:
            return True
        streaming = {sid for (sid, _), stream in self.streams.live.items() if stream.subscriber is not None}
        if self.legacy is not None:
            streaming |= self.legacy.open_sessions()
        idle = [s for s in table.values() if s.id not in streaming and not s.in_flight]
        if not idle:
            return False
        oldest = min(idle, key=lambda s: s.last_seen)
        log.info("session cap (%d) reached: ending the least recently used session %s", self.max_sessions, oldest.id)
        await self._end_session(oldest.id)
        return True

    def _session(self, request: Request, principal: Principal) -> Session | Response:
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            return rpc_error(400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required")
        session = self.server.session_table.get(session_id)
        if session is None:
            session = self.replicas.adopt(session_id)
        if session is not None and not owns(session, principal):
            # Another credential's session: as unknown as a session that never existed.
            log.warning("refused %s the session of another credential", describe(principal))
            session = None
        if session is None:
            return rpc_error(404, INVALID_REQUEST, "Session not found")
        session = self.server.get_session(session_id) or session  # refreshes last_seen
        version = request.headers.get(VERSION_HEADER, DEFAULT_VERSION_HEADER)
        if not versions.is_supported(version):
            return rpc_error(400, INVALID_REQUEST, f"Unsupported MCP-Protocol-Version: {version}")
        return session

    async def _post(self, request: Request, principal: Principal) -> Response:
        json_q, sse_q = accepts(request)
        if json_q <= 0 or sse_q <= 0:
            return rpc_error(406, INVALID_REQUEST, "Not Acceptable: accept both application/json and text/event-stream")
        if not request.headers.get("content-type", "").lower().startswith("application/json"):
            return rpc_error(415, INVALID_REQUEST, "Unsupported Media Type: send application/json")
        body = await request.body()  # RequestLimits already refused one over MEMENTO_MAX_BODY_BYTES
        try:
            value = jsonrpc.decode(body)
        except JsonRpcError as exc:
            return JSONResponse(exc.to_response(), status_code=400)
        if isinstance(value, list):
            return await self._post_batch(request, value, principal)
        try:
            message = jsonrpc.parse_message(value)
        except JsonRpcError as exc:
            return JSONResponse(exc.to_response(), status_code=400)

        if self._is_stateless(request, value):
            return await self._post_stateless(request, value, principal, prefer_sse=sse_q > json_q)
        if isinstance(message, jsonrpc.Request) and message.method == "initialize":
            return await self._initialize(value, principal)
        found = self._session(request, principal)
        if isinstance(found, Response):
            return found
        session = found
        if not isinstance(message, jsonrpc.Request):
            if (
                isinstance(message, jsonrpc.Response)
                and message.id not in session.pending
                and self.directory.forward(session.id, "response", value)
            ):
                return Response(status_code=202)  # answers a request another replica sent
            await self.server.handle(value, session)
            self.directory.sync(session)
            return Response(status_code=202)
        if principal.kind == "oauth" and principal.read_only and self._writes(message):
            # OAuth clients can step up: 403 insufficient_scope names the scope to ask for. An
            # access key cannot, so its writes get the service's `forbidden` tool error instead.
            return self.gate.forbidden(request, "Forbidden: this token lacks the memory:write scope")
        streamed = sse_q == json_q and self._streams(session, message)
        return await self._answer(session, value, prefer_sse=sse_q > json_q or streamed)

    # ------------------------------------------------------------------ 2026-07-28: no sessions

    @staticmethod
    def _is_stateless(request: Request, value: Any) -> bool:
        """Whether a POSTed message is a 2026-07-28 one, answered with no session: its `_meta`
        (or `server/discover`) says so; or, sent without a session, its MCP-Protocol-Version
        header does (a 2026 request whose `_meta` is missing gets the -32602 it deserves). A
        2026 request that carries an Mcp-Session-Id is still stateless: the header is ignored."""
        if stateless_request(value):
            return True
        if not isinstance(value, dict) or value.get("method") == "initialize" or request.headers.get(SESSION_HEADER):
            return False
        return versions.is_stateless(request.headers.get(VERSION_HEADER, "").strip())

    def _input_schemas(self) -> dict[str, Any]:
        """Every callable tool's inputSchema by name (for the x-mcp-header parameters)."""
        if self._schemas is None:
            definitions = tool_definitions(self.server.tools, versions.STATELESS, structured=self.server.app.settings.structured_output)
            definitions += [tool.definition(versions.STATELESS) for tool in self.server.fixture_tools]
            self._schemas = {str(d["name"]): d.get("inputSchema") for d in definitions}
        return self._schemas

    def _check_headers(self, request: Request, value: Any) -> None:
        """SEP-2243: the standard headers, and a tool's Mcp-Param-* headers (HeaderMismatch)."""
        http_headers.check_standard(request.headers, value)
        params = value.get("params") if isinstance(value, dict) else None
        if value.get("method") != "tools/call" or not isinstance(params, dict):
            return
        schema = self._input_schemas().get(str(params.get("name")))
        if schema is not None:
            http_headers.check_custom(request.headers, schema, params.get("arguments"))

    async def _post_stateless(self, request: Request, value: Any, principal: Principal, *, prefer_sse: bool) -> Response:
        """Answer one 2026-07-28 message with no session: its headers and `_meta` checked first
        (400), then `handle_stateless`; JSON when it ends quietly, else an SSE stream of what it
        sends (progress, logs, a listen stream's notifications) ending with its response. No
        session id, no event ids, nothing to resume: closing the stream cancels the request."""
        rid = value.get("id")
        request_id = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
        try:
            self._check_headers(request, value)
            if "id" in value:  # a request: its _meta must name the revision and the client
                params = value.get("params")
                check_meta(params.get("_meta") if isinstance(params, dict) else None)
        except http_headers.HeaderMismatch as exc:
            return rpc_error(400, HEADER_MISMATCH, str(exc), request_id)
        except JsonRpcError as exc:
            return JSONResponse(exc.to_response(request_id), status_code=400)
        message = jsonrpc.parse_message(value)
        if isinstance(message, jsonrpc.Request):
            if principal.kind == "oauth" and principal.read_only and self._writes(message):
                return self.gate.forbidden(request, "Forbidden: this token lacks the memory:write scope")
            if message.method == LISTEN and self._closing:
                return rpc_error(503, INVALID_REQUEST, "Server is shutting down", request_id)
            listening = subscriptions_of(self.server.features)
            if message.method == LISTEN and listening is not None and listening.count() >= self.max_sessions:
                # Each open listen stream holds a connection: capped like sessions (MEMENTO_MAX_SESSIONS).
                return rpc_error(503, INVALID_REQUEST, "Service Unavailable: too many open subscriptions/listen streams", request_id)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        related = asyncio.Event()
        limit = self.streams.queue_limit

        async def sink(outgoing: dict[str, Any]) -> None:
            if overflowing(queue, limit):  # the client stopped reading: end its stream
                log.warning("cut a 2026 response stream: the client is not reading")
                queue.put_nowait(_Done(None))
                task.cancel()
                return
            queue.put_nowait(outgoing)
            related.set()

        task = asyncio.create_task(handle_stateless(self.server, value, principal=principal, sink=sink))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        waiter = asyncio.ensure_future(related.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done() and not related.is_set():
            reply = None if task.cancelled() else task.result()
            if reply is None:
                return Response(status_code=202)
            if not prefer_sse or "error" in reply:
                return JSONResponse(reply, status_code=stateless_status(reply))

        def done(finished: asyncio.Task[Any]) -> None:
            reply = None if finished.cancelled() or finished.exception() else finished.result()
            queue.put_nowait(_Done(reply if isinstance(reply, dict) else None))

        task.add_done_callback(done)

        async def events() -> AsyncIterator[bytes]:
            try:
                while True:
                    item: Any = None
                    with anyio.move_on_after(KEEPALIVE_S):
                        item = await queue.get()
                    if item is None:
                        yield b": keepalive\n\n"  # a quiet listen stream stays open through proxies
                        continue
                    if isinstance(item, _Done):
                        if item.reply is not None:
                            yield sse_event(item.reply)
                        return
                    yield sse_event(item)
            finally:
                if not task.done():
                    task.cancel()  # the client closed the stream: that cancels the request

        return SseResponse(events(), {"X-Accel-Buffering": "no"})

    async def _initialize(self, value: Any, principal: Principal) -> Response:
        """Start a session with an `initialize` request; its id goes back in `Mcp-Session-Id`."""
        if not await self.make_room():
            return rpc_error(503, INVALID_REQUEST, "Service Unavailable: too many sessions")
        session = self.server.create_session(principal=principal)
        session.send = self.replicas.sender(session)
        reply = await self.server.handle(value, session)
        assert isinstance(reply, dict)
        if "error" in reply:
            await self.server.close_session(session.id)  # a failed handshake keeps no session
            return JSONResponse(reply)
        self.directory.register(session)
        return JSONResponse(reply, headers={"Mcp-Session-Id": session.id})

    def _writes(self, request: jsonrpc.Request) -> bool:
        """Whether the request calls a memory tool that changes memory (not read-only)."""
        if request.method != "tools/call":
            return False
        spec = self.server.tools_by_name.get(str(request.params.get("name")))
        return spec is not None and not spec.hints.read_only

    @staticmethod
    def _streams(session: Session, request: jsonrpc.Request) -> bool:
        """Whether the request is answered as SSE even when quiet (see STREAMED_METHODS)."""
        return versions.sse_priming(session.protocol_version) and request.method in STREAMED_METHODS

    async def _answer(self, session: Session, value: Any, *, prefer_sse: bool) -> Response:
        """Run one request; JSON when it ends quietly, else an SSE stream of everything it sends."""
        stream = self.streams.open(session.id, f"post-{next(self._stream_ids)}")
        queue = self.streams.attach(stream)
        resumable = versions.sse_priming(session.protocol_version)
        if resumable:
            self.streams.publish(stream, None)
        related = asyncio.Event()

        async def sink(message: dict[str, Any]) -> None:
            self.streams.publish(stream, message)
            related.set()

        async def close(retry_ms: int | None) -> bool:
            # Only a stream whose client holds an event id (the priming event's) can be resumed.
            if not resumable or stream.finished:
                return False
            if stream.subscriber is not None:
                stream.subscriber.put_nowait(Cut(retry_ms))
                stream.subscriber = None  # from now on events wait in the store
            related.set()  # a request still waiting to be answered as JSON becomes a stream
            return True

        async def run() -> dict[str, Any] | list[dict[str, Any]] | None:
            try:
                return await self.server.handle(value, session, sink, closer=close)
            finally:
                self._tasks.discard(task)
                if self.server.session_table.get(session.id) is session:
                    self.directory.sync(session)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        if not prefer_sse:
            waiter = asyncio.ensure_future(related.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if task.done() and not related.is_set():
                # Quiet request: a plain JSON body; the stream never existed for the client.
                stream.subscriber = None
                self.streams.live.pop((session.id, stream.id), None)
                self.store.drop_stream(session.id, stream.id)
                reply = task.result()
                if reply is None:
                    return Response(status_code=202)  # cancelled meanwhile: no response
                return JSONResponse(reply)

        def done(finished: asyncio.Task[Any]) -> None:
            reply = None if finished.cancelled() or finished.exception() else finished.result()
            if isinstance(reply, dict):
                self.streams.publish(stream, reply)
            self.streams.finish(stream)

        task.add_done_callback(done)
        return self._sse_response(stream, queue, [], session=session)

    async def _post_batch(self, request: Request, batch: list[Any], principal: Principal) -> Response:
        found = self._session(request, principal)
        if isinstance(found, Response):
            return found
        if not self.server.accepts_batches(found):
            reply = jsonrpc.error_response(None, INVALID_REQUEST, "Invalid Request: batches are not supported")
            return JSONResponse(reply, status_code=400)
        replies = await self.server.handle(batch, found)  # related messages: the GET stream
        self.directory.sync(found)
        if replies is None:
            return Response(status_code=202)
        return JSONResponse(replies)

    def _pushes(self, session: Session) -> bool:
        """Whether a message on the session's standalone channel reaches its client now: this
        replica delivers its notifications and its GET stream is open here."""
        stream = self.streams.live.get((session.id, STANDALONE))
        return session.delivers and stream is not None and stream.subscriber is not None

    async def _get(self, request: Request, principal: Principal) -> Response:
        if accepts(request)[1] <= 0:
            return rpc_error(406, INVALID_REQUEST, "Not Acceptable: GET /mcp serves text/event-stream")
        found = self._session(request, principal)
        if isinstance(found, Response):
            return found
        if self._closing:
            return rpc_error(503, INVALID_REQUEST, "Server is shutting down")
        session = found
        last_event_id = request.headers.get(LAST_EVENT_HEADER)
        stream_id = None
        if last_event_id:
            stream_id = self.store.stream_of(session.id, last_event_id)
        if stream_id is not None and stream_id != STANDALONE:
            # Resume a POST's stream: what it sent after that id, then (if still running) the rest.
            backlog = self.store.after(session.id, stream_id, last_event_id)
            live = self.streams.live.get((session.id, stream_id))
            stream = live if live is not None else Stream(session.id, stream_id)
            queue = self.streams.attach(stream)
            if live is None:
                if self.directory.shared and not any(answers(e.message) for e in backlog):
                    # Perhaps still running on another replica: follow the shared store.
                    after = backlog[-1].id if backlog else str(last_event_id)
                    self._spawn(self.replicas.follow(stream, queue, stream_id, after))
                else:
                    queue.put_nowait(END)
            return self._sse_response(stream, queue, backlog, session=session)
        stream = self.streams.standalone(session.id)
        if stream_id is None and stream.subscriber is not None:
            return rpc_error(409, INVALID_REQUEST, "Conflict: this session's GET stream is open")
        moved_here = not session.delivers  # another replica held its notification stream
        if moved_here or last_event_id:
            self.directory.claim(session)  # its notifications flow here from now on
        if stream_id is None and moved_here and stream.delivered is None:
            # What the other replica delivered is unknown here: without a Last-Event-ID the
            # client gets what comes from now on, not the session's whole history again.
            backlog = []
        else:
            backlog = self.store.after(session.id, STANDALONE, last_event_id if stream_id is not None else stream.delivered)
        queue = self.streams.attach(stream)
        if versions.sse_priming(session.protocol_version):
            self.streams.publish(stream, None)  # after the backlog, so event ids stay in order
        return self._sse_response(stream, queue, backlog, preamble=b": stream open\n\n", session=session)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete(self, request: Request, principal: Principal) -> Response:
        found = self._session(request, principal)
        if isinstance(found, Response):
            return found
        self.streams.end_session(found.id)
        await self.server.close_session(found.id)
        self.directory.remove(found.id)
        return Response(status_code=204)
