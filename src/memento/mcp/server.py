"""The MCP protocol core: sessions, the initialize handshake and method dispatch.

Transports decode bytes, find or create the session, and call `McpServer.handle` with one
decoded JSON value; it answers with a response envelope, or None for notifications and
responses. Version-specific shapes come from `versions`, the tools from `tools`.
"""

from __future__ import annotations

import base64
import binascii
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread

import memento
from memento.auth.principal import ANONYMOUS, Principal
from memento.errors import MementoError
from memento.mcp import handles, jsonrpc, mrtr, versions
from memento.mcp.client_features import confirm_forget, lend_to_evaluator, lent_model
from memento.mcp.context import LOG_LEVELS, CallContext, Session, Sink, StreamCloser
from memento.mcp.extensions import tasks_of
from memento.mcp.fixtures import FIXTURE_TOOLS, FIXTURE_TOOLS_BY_NAME, fixture_tools_at
from memento.mcp.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, JsonRpcError, Notification, Request
from memento.mcp.namespace import MEMORY_SESSION, service_context
from memento.mcp.namespace import principal as session_principal
from memento.mcp.stateless import DISCOVER_TTL_MS
from memento.mcp.task_fixtures import task_fixture_tools
from memento.mcp.tools import ToolSpec, call_tool
from memento.mcp.toolsets import REGISTRY, selected_tools, tool_definitions

if TYPE_CHECKING:
    from memento.app import App
    from memento.mcp.features import Feature, NotificationHandler, RequestContext, ServerHub

__all__ = ["CallContext", "McpServer", "Session"]

log = logging.getLogger(__name__)

SERVER_NAME = "memento"
SERVER_TITLE = "Memento memory"
INSTRUCTIONS = (
    "Memento is your persistent memory across sessions. At session start call `context` to load "
    "preferences, known errors and procedures. During work, `recall` before solving a problem you "
    "may have met before, `remember` durable facts, decisions, errors and procedures as short "
    "typed fragments, `link` causes to resolutions, and `amend` fragments as knowledge changes. At "
    "session end call `reflect` with a summary. scope=session keeps a fragment only for this "
    "session."
)
DEFAULT_PAGE_SIZE = 50
# Tools whose calls get the client's model (CallContext.complete) when it offers sampling: seed
# 003's, whose drafts (distill, crystallize) use a model when one is there. No other tool needs one.
SAMPLING_TOOLS = frozenset(spec.name for spec in REGISTRY.get("protocol").tools) | {"summarize_thread"}  # 004's draft too


CoreHandler = Callable[[CallContext, dict[str, Any]], Awaitable[dict[str, Any]]]


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"tools:{offset}".encode()).decode()


def decode_cursor(cursor: object, total: int) -> int:
    """The offset an opaque cursor stands for; anything we did not issue is -32602."""
    if not isinstance(cursor, str):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: cursor must be a string")
    try:
        kind, _, offset = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        value = int(offset)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor") from None
    if kind != "tools" or not 0 < value < total:
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
    return value


class McpServer:
    """Protocol core shared by every transport; owns the session table (a `ServerHub`)."""

    def __init__(
        self, app: App, *, tools: Sequence[ToolSpec] | None = None, page_size: int = DEFAULT_PAGE_SIZE, features: Sequence[Feature] = ()
    ) -> None:
        self.app = app
        self.tools = selected_tools(app.settings.toolsets) if tools is None else tuple(tools)
        self.tools_by_name = {spec.name: spec for spec in self.tools}
        self.page_size = page_size
        self.session_table: dict[str, Session] = {}
        self.features = tuple(features)
        self._handlers: dict[str, Any] = {  # CoreHandler, or a feature's Handler
            "initialize": self._initialize,
            "ping": self._ping,
            "logging/setLevel": self._set_level,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "server/discover": self._discover,  # 2026-07-28 only (versions.method_available)
        }
        self._note_handlers: dict[str, list[NotificationHandler]] = {}
        for feature in self.features:
            for method, handler in feature.handlers().items():
                if method in self._handlers:
                    raise ValueError(f"two handlers for {method}")
                self._handlers[method] = handler
            for method, note_handler in feature.notification_handlers().items():
                self._note_handlers.setdefault(method, []).append(note_handler)
        for feature in self.features:
            feature.attach(cast("ServerHub", self))
        self.tasks = tasks_of(self.features)
        # The conformance suite's test_* tools exist only when the operator asks for them.
        self.fixture_tools = FIXTURE_TOOLS if app.settings.conformance_fixtures else ()
        # Whether a session's standalone channel reaches its client now (the evaluator samples
        # through it): stdio always; the HTTP transport narrows it to an open GET stream.
        self.reachable: Callable[[Session], bool] = lambda session: True
        # 2026-07-28 multi round-trip requests: the sealer of requestState (mrtr.py).
        self.request_states = mrtr.RequestStates(app.store, app.settings.state_key, app.settings.state_ttl_s)

    def started(self) -> None:
        """Called by a transport from its running event loop, before the first message: features
        that deliver events from other threads (writes here or on other replicas) bind to it."""
        for feature in self.features:
            hook = getattr(feature, "started", None)
            if callable(hook):
                hook()

    # ------------------------------------------------------------------ sessions

    def sessions(self) -> list[Session]:
        """Live sessions (`ServerHub.sessions`), and the subscriptions/listen streams open here
        (2026-07-28: a feature's `listening()` sessions), so change notifications reach both."""
        listening = [s for f in self.features for s in getattr(f, "listening", list)()]
        return list(self.session_table.values()) + listening

    def create_session(self, send: Sink | None = None, principal: Principal = ANONYMOUS) -> Session:
        """A fresh, uninitialised session with an unguessable id, owned by `principal`."""
        session = Session(id=secrets.token_urlsafe(24), principal=principal)
        if send is not None:
            session.send = send
        self.session_table[session.id] = session
        return session

    def get_session(self, session_id: str) -> Session | None:
        session = self.session_table.get(session_id)
        if session is not None:
            session.last_seen = time.monotonic()
        return session

    async def close_session(self, session_id: str) -> bool:
        """Forget the session and expunge its working memory; False when it did not exist."""
        session = self.session_table.pop(session_id, None)
        if session is None:
            return False
        self.app.sampling.discard(session_id)
        session.fail_pending()
        for ctx in list(session.in_flight.values()):
            ctx.cancel()
        if self.app.settings.memory_session_persist:  # MEMORY_MCP_SESSION_PERSIST: kept for debugging
            log.info("session %s closed (working memory kept: MEMORY_MCP_SESSION_PERSIST)", session_id)
            return True
        try:
            context = service_context(session)  # the owner's rows only (namespace.py)
            expunged = 0
            for sid in dict.fromkeys(s for s in (session_id, context.memory_session_id) if s):  # and the 002 session it named
                expunged += await anyio.to_thread.run_sync(self.app.service.end_session, sid, context)
        except Exception:  # boundary: closing must always succeed for the transport
            log.exception("ending session %s failed", session_id)
        else:
            log.info("session %s closed (%s working-memory fragments expunged)", session_id, expunged)
        return True

    def adopt_session(self, session: Session) -> Session:
        """Serve a session another replica started (its state comes from the shared directory)."""
        return self.session_table.setdefault(session.id, session)

    def evict_session(self, session_id: str) -> bool:
        """Let go of this process's copy of a session that lives on elsewhere (another replica
        serves it): waiting server→client requests fail, working memory is kept."""
        session = self.session_table.pop(session_id, None)
        if session is None:
            return False
        self.app.sampling.discard(session_id)
        session.fail_pending()
        return True

    def idle_sessions(self, idle_seconds: float) -> list[str]:
        cutoff = time.monotonic() - idle_seconds
        return [sid for sid, s in self.session_table.items() if s.last_seen < cutoff]

    async def close_idle_sessions(self, idle_seconds: float) -> list[str]:
        """Close sessions unseen for `idle_seconds`; returns the ids of those closed."""
        stale = self.idle_sessions(idle_seconds)
        for sid in stale:
            await self.close_session(sid)
        return stale

    async def close_all_sessions(self) -> None:
        for sid in list(self.session_table):
            await self.close_session(sid)

    # ------------------------------------------------------------------ dispatch

    async def handle(
        self, message: Any, session: Session, sink: Sink | None = None, *, closer: StreamCloser | None = None
    ) -> dict[str, Any] | list[dict[str, Any]] | None:
        """Answer one decoded JSON-RPC value (a message, or a batch for 2025-03-26 sessions).

        `sink` carries messages related to a request (progress, logs, server→client requests);
        without one they go to the session's standalone channel. `closer` ends the stream the
        sink feeds (`RequestContext.close_stream`); a batch's requests never get one. None when
        no response is due.
        """
        try:
            if isinstance(message, list):
                return await self.handle_batch(message, session, sink)
            return await self.handle_one(message, session, sink, closer=closer)
        except Exception:  # boundary: whatever a message does, its sender gets an answer
            log.exception("handling a message failed")
            return jsonrpc.error_response(None, INTERNAL_ERROR, "Internal error")

    def accepts_batches(self, session: Session) -> bool:
        return session.protocol_version == "2025-03-26"

    async def handle_batch(
        self, batch: list[Any], session: Session, sink: Sink | None = None
    ) -> dict[str, Any] | list[dict[str, Any]] | None:
        if not self.accepts_batches(session):
            return jsonrpc.error_response(None, INVALID_REQUEST, "Invalid Request: batches are not supported")
        if not batch:
            return jsonrpc.error_response(None, INVALID_REQUEST, "Invalid Request: empty batch")
        replies: list[dict[str, Any] | None] = [None] * len(batch)

        async def one(index: int, item: Any) -> None:
            if isinstance(item, list):
                replies[index] = jsonrpc.error_response(None, INVALID_REQUEST, "Invalid Request: nested batch")
                return
            replies[index] = await self.handle_one(item, session, sink)

        async with anyio.create_task_group() as tg:
            for index, item in enumerate(batch):
                tg.start_soon(one, index, item)
        answered = [reply for reply in replies if reply is not None]
        return answered or None

    async def handle_one(
        self, message: Any, session: Session, sink: Sink | None = None, *, closer: StreamCloser | None = None
    ) -> dict[str, Any] | None:
        try:
            parsed = jsonrpc.parse_message(message)
        except JsonRpcError as exc:
            return exc.to_response()
        session.last_seen = time.monotonic()
        if isinstance(parsed, Notification):
            await self._notification(session, parsed)
            return None
        if isinstance(parsed, jsonrpc.Response):
            if not session.resolve(parsed):
                log.debug("dropping a response to nothing we asked (id %r)", parsed.id)
            return None
        meta = parsed.params.get("_meta")
        ctx = CallContext(
            session, parsed.id, session.protocol_version or versions.LATEST, meta if isinstance(meta, dict) else {}, sink, closer
        )
        cancellable = parsed.method != "initialize"  # the spec forbids cancelling initialize
        if cancellable:
            session.in_flight[parsed.id] = ctx
        try:
            with anyio.CancelScope() as scope:
                ctx.cancel_scope = scope
                try:
                    result = await self._dispatch(ctx, parsed)
                except JsonRpcError as exc:
                    return exc.to_response(parsed.id)
                except Exception:  # boundary: a bug answers -32603, the connection lives on
                    log.exception("handling %s failed", parsed.method)
                    return jsonrpc.error_response(parsed.id, INTERNAL_ERROR, "Internal error")
        finally:
            if session.in_flight.get(parsed.id) is ctx:
                del session.in_flight[parsed.id]
        if scope.cancelled_caught or ctx.cancelled.is_set():
            log.info("request %r (%s) cancelled by the client", parsed.id, parsed.method)
            return None  # a cancelled request gets no response
        return jsonrpc.result_response(parsed.id, result)

    async def _dispatch(self, ctx: CallContext, request: Request) -> dict[str, Any]:
        handler = self._handlers.get(request.method)
        if handler is None or not versions.method_available(ctx.version, request.method):
            raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
        if not ctx.session.ready and request.method not in ("initialize", "ping"):
            raise JsonRpcError(INVALID_REQUEST, "Session not initialized: send initialize first")
        if request.method != "initialize" and not versions.is_stateless(ctx.version):
            lend_to_evaluator(self.app, ctx.session, self.reachable)  # once per session that declared sampling
        exchange = None
        if versions.is_stateless(ctx.version) and request.method in mrtr.SUPPORTED_METHODS:  # the round it is in (mrtr.py)
            session = ctx.session
            exchange = await self.request_states.exchange(request.method, request.params, session.principal, session.client_capabilities)
        with mrtr.bound(exchange):
            result: dict[str, Any] = await handler(ctx, request.params)
        return result

    async def _notification(self, session: Session, note: Notification) -> None:
        if note.method == "notifications/initialized":
            session.initialized = True
        elif note.method == "notifications/cancelled":
            target = session.in_flight.get(note.params.get("requestId"))  # type: ignore[arg-type]
            if target is not None:
                target.cancel()
            else:  # unknown or already answered: ignored, as the spec says
                log.debug("cancellation of %r ignored", note.params.get("requestId"))
        for handler in self._note_handlers.get(note.method, ()):
            try:
                await handler(session, note.params)
            except Exception:  # boundary: a feature's bug must not break the connection
                log.exception("notification handler for %s failed", note.method)
        if note.method not in self._note_handlers and note.method not in ("notifications/initialized", "notifications/cancelled"):
            log.debug("ignoring notification %s", note.method)

    # ------------------------------------------------------------------ methods

    def capabilities(self, version: str) -> dict[str, Any]:
        """The server's capabilities for a session of `version`, features merged in."""
        caps: dict[str, Any] = {"logging": {}, "tools": {"listChanged": False}}
        for feature in self.features:
            _merge(caps, feature.capabilities(version))
        return versions.gate_capabilities(version, caps)

    async def _initialize(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        session = ctx.session
        if session.ready:
            raise JsonRpcError(INVALID_REQUEST, "Session already initialized")
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
        client_info = params.get("clientInfo", {})
        capabilities = params.get("capabilities", {})
        if not isinstance(client_info, dict) or not isinstance(capabilities, dict):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: clientInfo and capabilities must be objects")
        named = _named_session(client_info)
        version = versions.negotiate(requested)
        if named and MEMORY_SESSION not in session.state:  # MEMORY_MCP_SESSION_ID (stdio) comes first
            session.state[MEMORY_SESSION] = named
        session.protocol_version = version
        session.client_info = client_info
        session.client_capabilities = capabilities
        log.info(
            "session %s initialized: client %s %s, protocol %s (asked %s)",
            session.id,
            client_info.get("name"),
            client_info.get("version"),
            version,
            requested,
        )
        return {
            "protocolVersion": version,
            "capabilities": self.capabilities(version),
            "serverInfo": versions.server_info(version, name=SERVER_NAME, server_version=memento.__version__, title=SERVER_TITLE),
            "instructions": INSTRUCTIONS,
        }

    async def _discover(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        """server/discover (2026-07-28): what a stateless client may use, no session made.
        The same for every caller, so shared caches may keep it (`DISCOVER_TTL_MS`)."""
        return {
            "supportedVersions": list(versions.REVISIONS),
            "capabilities": self.capabilities(versions.STATELESS),
            "instructions": INSTRUCTIONS,
            "ttlMs": DISCOVER_TTL_MS,
            "cacheScope": "public",
        }

    async def _ping(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _set_level(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: level must be one of " + ", ".join(LOG_LEVELS))
        ctx.session.log_level = str(level)
        return {}

    async def _tools_list(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        version = ctx.version
        definitions = tool_definitions(self.tools, version, structured=self.app.settings.structured_output)
        definitions += [tool.definition(version) for tool in fixture_tools_at(self.fixture_tools, version)]
        definitions += [tool.definition(version) for tool in self._task_fixtures(version)]
        start = 0
        if params.get("cursor") is not None:
            start = decode_cursor(params["cursor"], len(definitions))
        result: dict[str, Any] = {"tools": definitions[start : start + self.page_size]}
        if start + self.page_size < len(definitions):
            result["nextCursor"] = encode_cursor(start + self.page_size)
        return result

    def _task_fixtures(self, version: str) -> tuple[Any, ...]:
        """The tasks-* conformance fixtures (2026-07-28, with the other fixtures only)."""
        return task_fixture_tools(version) if self.fixture_tools else ()

    async def _tools_call(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        """tools/call, reported to the app's observers (tool name and outcome, never content)."""
        name = params.get("name")
        known = isinstance(name, str) and (
            name in self.tools_by_name
            or (bool(self.fixture_tools) and name in FIXTURE_TOOLS_BY_NAME)
            or any(tool.name == name for tool in self._task_fixtures(ctx.version))
        )
        tool = str(name) if known else "unknown"
        outcome = "exception"
        started = time.perf_counter()
        try:
            result = await self._call_tool(ctx, params)
            outcome = "error" if result.get("isError") else ("task" if "task" in result or result.get("resultType") == "task" else "ok")
            return result
        except BaseException as exc:
            outcome = (
                "cancelled"
                if isinstance(exc, anyio.get_cancelled_exc_class())
                else "invalid"
                if isinstance(exc, JsonRpcError)
                else "exception"
            )
            raise
        finally:
            self.app.observers.tool_call(tool, outcome, time.perf_counter() - started)

    async def _call_tool(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: name must be a string")
        fixture = FIXTURE_TOOLS_BY_NAME.get(name) if self.fixture_tools else None
        fixture = fixture or next((tool for tool in self._task_fixtures(ctx.version) if tool.name == name), None)
        spec = self.tools_by_name.get(name) or handles.stateless_tool(ctx.version, name, self.tools)
        if spec is None and fixture is None:
            raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        rctx = cast("RequestContext", ctx)

        async def run(over: RequestContext | None = None) -> dict[str, Any]:
            call_ctx = rctx if over is None else over  # a 2026 task's own context (mcp/task_extension.py)
            if fixture is not None:
                return await fixture.call(call_ctx, arguments)
            assert spec is not None
            if name == "forget":
                refused = await confirm_forget(call_ctx, self.app, arguments)
                if refused is not None:
                    return refused
            service_ctx = service_context(ctx.session)  # the session's principal (namespace.py)
            call_arguments: dict[str, Any] = arguments
            if versions.is_stateless(ctx.version):  # no protocol session: a handle's, or none (mcp/handles.py)
                try:
                    call_arguments, service_ctx = await handles.stateless_context(
                        self.app.service, name, arguments, service_ctx, session_principal(ctx.session), ctx.session.state
                    )
                except MementoError as exc:
                    return handles.refused(ctx.version, exc, structured=self.app.settings.structured_output or spec.structured)
            structured = self.app.settings.structured_output or spec.structured
            if structured:  # the result's JSON goes twice (text and structuredContent): budgets count both
                service_ctx = replace(service_ctx, payload_copies=2)
            if name in SAMPLING_TOOLS:  # 003's drafts may use the client's model (MCP sampling)
                service_ctx = replace(service_ctx, complete=lent_model(call_ctx))
            try:
                return await call_tool(spec, call_arguments, self.app.service, service_ctx, ctx.version, call_ctx, structured=structured)
            except mrtr.InputNeeded as needed:  # 2026-07-28: the draft waits for the client's model (a retry)
                return needed.result

        if self.tasks is not None:
            created = await self.tasks.maybe_run_as_task(rctx, name, params, run)
            if created is not None:
                return created
        return await run()


MAX_SESSION_ID = 200


def _named_session(client_info: dict[str, Any]) -> str | None:
    """002 §4 option B: the session id a client names in clientInfo.extra.sessionId, if any."""
    extra = client_info.get("extra")
    if not isinstance(extra, dict) or extra.get("sessionId") is None:
        return None
    named = extra["sessionId"]
    if not isinstance(named, str) or not named.strip() or len(named) > MAX_SESSION_ID or not named.isprintable():
        raise JsonRpcError(INVALID_PARAMS, f"Invalid params: clientInfo.extra.sessionId must be 1-{MAX_SESSION_ID} printable characters")
    return named


def _merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Deep-merge capability objects (a feature may extend one the core declares)."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value
