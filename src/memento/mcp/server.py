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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread

import memento
from memento.mcp import jsonrpc, versions
from memento.mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    JsonRpcError,
    Notification,
    Request,
)
from memento.mcp.tools import TOOLS, ToolSpec, call_tool
from memento.models import CallContext

if TYPE_CHECKING:
    from memento.app import App

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


@dataclass
class Session:
    """One client connection's negotiated state."""

    id: str
    protocol_version: str | None = None  # set when initialize is answered
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    initialized: bool = False  # notifications/initialized received
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def ready(self) -> bool:
        return self.protocol_version is not None


Handler = Callable[[Session, dict[str, Any]], Awaitable[dict[str, Any]]]


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
    """Protocol core shared by every transport; owns the session table."""

    def __init__(
        self, app: App, *, tools: Sequence[ToolSpec] = TOOLS, page_size: int = DEFAULT_PAGE_SIZE
    ) -> None:
        self.app = app
        self.tools = tuple(tools)
        self.tools_by_name = {spec.name: spec for spec in self.tools}
        self.page_size = page_size
        self.sessions: dict[str, Session] = {}
        self._handlers: dict[str, Handler] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
        }

    # ------------------------------------------------------------------ sessions

    def create_session(self) -> Session:
        """A fresh, uninitialised session with an unguessable id."""
        session = Session(id=secrets.token_urlsafe(24))
        self.sessions[session.id] = session
        return session

    def get_session(self, session_id: str) -> Session | None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.last_seen = time.monotonic()
        return session

    async def close_session(self, session_id: str) -> bool:
        """Forget the session and expunge its working memory; False when it did not exist."""
        if self.sessions.pop(session_id, None) is None:
            return False
        try:
            expunged = await anyio.to_thread.run_sync(self.app.service.end_session, session_id)
        except Exception:  # boundary: closing must always succeed for the transport
            log.exception("ending session %s failed", session_id)
        else:
            log.info(
                "session %s closed (%s working-memory fragments expunged)", session_id, expunged
            )
        return True

    async def close_idle_sessions(self, idle_seconds: float) -> int:
        """Close sessions unseen for `idle_seconds`; returns how many were closed."""
        cutoff = time.monotonic() - idle_seconds
        stale = [sid for sid, s in self.sessions.items() if s.last_seen < cutoff]
        for sid in stale:
            await self.close_session(sid)
        return len(stale)

    async def close_all_sessions(self) -> None:
        for sid in list(self.sessions):
            await self.close_session(sid)

    # ------------------------------------------------------------------ dispatch

    async def handle(self, message: Any, session: Session) -> dict[str, Any] | None:
        """Answer one decoded JSON-RPC message; None when no response is due."""
        try:
            parsed = jsonrpc.parse_message(message)
        except JsonRpcError as exc:
            return exc.to_response()
        session.last_seen = time.monotonic()
        if isinstance(parsed, Notification):
            self._notification(session, parsed)
            return None
        if not isinstance(parsed, Request):
            return None  # a response to nothing we asked: drop it
        try:
            result = await self._dispatch(session, parsed)
        except JsonRpcError as exc:
            return exc.to_response(parsed.id)
        except Exception:  # boundary: a bug answers -32603 instead of killing the connection
            log.exception("handling %s failed", parsed.method)
            return jsonrpc.error_response(parsed.id, INTERNAL_ERROR, "Internal error")
        return jsonrpc.result_response(parsed.id, result)

    async def _dispatch(self, session: Session, request: Request) -> dict[str, Any]:
        handler = self._handlers.get(request.method)
        if handler is None:
            raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
        if not session.ready and request.method not in ("initialize", "ping"):
            raise JsonRpcError(INVALID_REQUEST, "Session not initialized: send initialize first")
        return await handler(session, request.params)

    def _notification(self, session: Session, note: Notification) -> None:
        if note.method == "notifications/initialized":
            session.initialized = True
        elif note.method == "notifications/cancelled":
            # Service calls run to completion in worker threads; their late answer is harmless.
            log.debug("client cancelled %s", note.params.get("requestId"))
        else:
            log.debug("ignoring notification %s", note.method)

    # ------------------------------------------------------------------ methods

    async def _initialize(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        if session.ready:
            raise JsonRpcError(INVALID_REQUEST, "Session already initialized")
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
        client_info = params.get("clientInfo", {})
        capabilities = params.get("capabilities", {})
        if not isinstance(client_info, dict) or not isinstance(capabilities, dict):
            raise JsonRpcError(
                INVALID_PARAMS, "Invalid params: clientInfo and capabilities must be objects"
            )
        version = versions.negotiate(requested)
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
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": versions.server_info(
                version, name=SERVER_NAME, server_version=memento.__version__, title=SERVER_TITLE
            ),
            "instructions": INSTRUCTIONS,
        }

    async def _ping(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _tools_list(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        version = _version(session)
        start = 0
        if params.get("cursor") is not None:
            start = decode_cursor(params["cursor"], len(self.tools))
        page = self.tools[start : start + self.page_size]
        result: dict[str, Any] = {"tools": [spec.definition(version) for spec in page]}
        if start + self.page_size < len(self.tools):
            result["nextCursor"] = encode_cursor(start + self.page_size)
        return result

    async def _tools_call(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: name must be a string")
        spec = self.tools_by_name.get(name)
        if spec is None:
            raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        ctx = CallContext(session_id=session.id)
        return await call_tool(spec, arguments, self.app.service, ctx, _version(session))


def _version(session: Session) -> str:
    assert session.protocol_version is not None  # guarded by _dispatch
    return session.protocol_version
