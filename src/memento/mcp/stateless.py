"""MCP 2026-07-28: one request answered with no session (the stateless revision).

A 2026 request names its protocol version, the client's capabilities and (optionally) the
client's identity and wanted log level in `params._meta`; nothing is carried over from an
earlier request on the same connection. `handle_stateless` checks that `_meta`, builds a
throwaway `Session` from it (owned by the transport's principal), dispatches through the
normal handlers of `McpServer`, and stamps every result with `resultType` and the server's
identity. Transports route a message here when `stateless_request` says it is a 2026 one
(stdio), or when it comes without a session (Streamable HTTP).
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any

import memento
from memento.auth.principal import Principal
from memento.mcp import jsonrpc, versions
from memento.mcp.context import LOG_LEVELS, CallContext, Session, Sink, StreamCloser
from memento.mcp.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError, RequestId

if TYPE_CHECKING:
    from memento.mcp.server import McpServer

log = logging.getLogger(__name__)

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

HEADER_MISMATCH = -32020
"""HTTP headers that disagree with the body (or required ones missing): HeaderMismatchError."""
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
"""The request needs a client capability its `_meta` did not declare."""
UNSUPPORTED_PROTOCOL_VERSION = -32022
"""The request names a protocol version this server does not serve statelessly."""

DISCOVER = "server/discover"
RESULT_COMPLETE = "complete"

DISCOVER_TTL_MS = 300_000
"""How long a client may cache `server/discover`: what it says is fixed while the process
runs, but an upgrade or a restart with other toolsets may change it."""


CACHE_HINTS: dict[str, tuple[int, str]] = {
    # Fixed for the process (toolsets, prompts and templates are configuration), the same for
    # every caller: shared caches may keep them as long as discover.
    "tools/list": (DISCOVER_TTL_MS, "public"),
    "prompts/list": (DISCOVER_TTL_MS, "public"),
    "resources/templates/list": (DISCOVER_TTL_MS, "public"),
    # Memories: what a caller sees depends on its credential, and any write changes it.
    "resources/list": (0, "private"),
    "resources/read": (0, "private"),
}
"""`ttlMs` and `cacheScope` (2026-07-28 CacheableResult) by method, unless the handler set them."""


def unsupported_version(requested: str) -> JsonRpcError:
    """UnsupportedProtocolVersionError (-32022): the versions we speak, and what was asked."""
    if versions.is_supported(requested):
        message = f"Unsupported protocol version: {requested} is served only after initialize; stateless requests use {versions.STATELESS}"
    else:
        message = f"Unsupported protocol version: {requested}"
    return JsonRpcError(UNSUPPORTED_PROTOCOL_VERSION, message, data={"supported": list(versions.REVISIONS), "requested": requested})


def missing_capability(required: dict[str, Any]) -> JsonRpcError:
    """MissingRequiredClientCapabilityError (-32021), e.g. `missing_capability({"sampling": {}})`."""
    names = ", ".join(sorted(required))
    return JsonRpcError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: {names} (declare it in io.modelcontextprotocol/clientCapabilities)",
        data={"requiredCapabilities": required},
    )


def request_meta(message: Any) -> dict[str, Any] | None:
    """`params._meta` of a message when it is an object, else None."""
    if not isinstance(message, dict):
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else None


def stateless_request(message: Any) -> bool:
    """Whether `message` is a 2026-07-28 request: `server/discover`, or a `_meta` naming a
    protocol version that no `initialize` negotiates (2026-07-28, or one we do not know, which
    `handle_stateless` refuses with -32022). A handshake client never sends that key with a
    handshake version, and if it did its session would serve it."""
    if not isinstance(message, dict):
        return False
    if message.get("method") == DISCOVER:
        return True
    meta = request_meta(message)
    if meta is None or META_PROTOCOL_VERSION not in meta:
        return False
    version = meta[META_PROTOCOL_VERSION]
    return not (isinstance(version, str) and versions.is_supported(version))


def _invalid(message: str) -> JsonRpcError:
    return JsonRpcError(INVALID_PARAMS, f"Invalid params: {message}")


def check_meta(meta: Any) -> dict[str, Any]:
    """The request's `_meta`, checked: -32602 for a missing or malformed required field,
    -32022 for a version we do not serve statelessly."""
    if not isinstance(meta, dict):
        raise _invalid(f"_meta with {META_PROTOCOL_VERSION} and {META_CLIENT_CAPABILITIES} is required")
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str) or not version:
        raise _invalid(f"_meta[{META_PROTOCOL_VERSION!r}] is required (a protocol version string)")
    if not versions.is_stateless(version):
        raise unsupported_version(version)
    if not isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
        raise _invalid(f"_meta[{META_CLIENT_CAPABILITIES!r}] is required (an object; {{}} declares none)")
    info = meta.get(META_CLIENT_INFO)
    if info is not None and not isinstance(info, dict):
        raise _invalid(f"_meta[{META_CLIENT_INFO!r}] must be an object")
    level = meta.get(META_LOG_LEVEL)
    if level is not None and level not in LOG_LEVELS:
        raise _invalid(f"_meta[{META_LOG_LEVEL!r}] must be one of " + ", ".join(LOG_LEVELS))
    return meta


def request_session(meta: dict[str, Any], principal: Principal, state: dict[str, Any] | None = None) -> Session:
    """The throwaway session one stateless request is answered in: what its `_meta` says,
    owned by the transport's principal, with no state carried over."""
    info = meta.get(META_CLIENT_INFO)
    level = meta.get(META_LOG_LEVEL)
    return Session(
        id=f"stateless-{secrets.token_urlsafe(18)}",
        protocol_version=versions.STATELESS,
        client_info=dict(info) if isinstance(info, dict) else {},
        client_capabilities=dict(meta[META_CLIENT_CAPABILITIES]),
        initialized=True,
        principal=principal,
        log_level=level if isinstance(level, str) else "",
        state=dict(state or {}),  # only what the transport hands every request (stdio: its connection's session)
    )


def server_info() -> dict[str, Any]:
    """The Implementation stamped on every 2026 result's `_meta`."""
    from memento.mcp.server import SERVER_NAME, SERVER_TITLE

    return versions.server_info(versions.STATELESS, name=SERVER_NAME, server_version=memento.__version__, title=SERVER_TITLE)


def stamp(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """`result` with `resultType` ("complete" unless the handler chose one, e.g.
    "input_required"), the server's identity in `_meta`, and the caching hints of a complete
    cacheable result."""
    out = dict(result)
    out.setdefault("resultType", RESULT_COMPLETE)
    hints = CACHE_HINTS.get(method)
    if hints is not None and out["resultType"] == RESULT_COMPLETE:
        out.setdefault("ttlMs", hints[0])
        out.setdefault("cacheScope", hints[1])
    meta = out.get("_meta")
    out["_meta"] = {**(meta if isinstance(meta, dict) else {}), META_SERVER_INFO: server_info()}
    return out


async def handle_stateless(
    server: McpServer,
    message: Any,
    *,
    principal: Principal,
    sink: Sink | None,
    closer: StreamCloser | None = None,
    in_flight: dict[RequestId, CallContext] | None = None,
    state: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Answer one 2026-07-28 JSON-RPC message with no session; None when no response is due.

    `sink` carries the request's notifications (progress, logs at the `_meta` log level);
    `in_flight`, when the transport keeps one, lets a later `notifications/cancelled` on the
    same connection reach the request (stdio); `state` seeds each request's session state (stdio:
    its connection's session, the default working memory of calls that name no session handle,
    mcp/handles.py). Never raises: a bug answers -32603."""
    try:
        return await _answer(server, message, principal=principal, sink=sink, closer=closer, in_flight=in_flight, state=state)
    except Exception:  # boundary: whatever a message does, its sender gets an answer
        log.exception("handling a stateless message failed")
        return jsonrpc.error_response(None, INTERNAL_ERROR, "Internal error")


async def _answer(
    server: McpServer,
    message: Any,
    *,
    principal: Principal,
    sink: Sink | None,
    closer: StreamCloser | None,
    in_flight: dict[RequestId, CallContext] | None,
    state: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    try:
        parsed = jsonrpc.parse_message(message)
    except JsonRpcError as exc:
        return exc.to_response()
    if isinstance(parsed, jsonrpc.Notification):
        if parsed.method == "notifications/cancelled" and in_flight is not None:
            rid = parsed.params.get("requestId")
            target = in_flight.get(rid) if isinstance(rid, (str, int)) else None
            if target is not None:
                target.cancel()
        return None  # nothing else a 2026 client notifies needs an answer or changes state
    if isinstance(parsed, jsonrpc.Response):
        return None  # a 2026 server sends no requests, so no response answers one of ours
    try:
        meta = check_meta(parsed.params.get("_meta"))
    except JsonRpcError as exc:
        return exc.to_response(parsed.id)
    session = request_session(meta, principal, state)
    if in_flight is not None:
        session.in_flight = in_flight  # the connection's table: cancellation finds the request
    reply = await server.handle_one(message, session, sink, closer=closer)
    if reply is not None and isinstance(reply.get("result"), dict):
        reply["result"] = stamp(parsed.method, reply["result"])
    return reply
