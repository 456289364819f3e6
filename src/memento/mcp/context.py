"""The core side of the feature contract (`features.py`): sessions and request contexts.

A `Session` is what a feature sees as a `SessionView`; its `notify` goes to the transport's
standalone channel (the GET stream, stdout, or the legacy SSE stream). A `CallContext` is the
`RequestContext` of one request; its channel is the transport's sink for messages related to
that request (the POST's SSE stream, stdout, the legacy SSE stream).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from memento.auth.principal import ANONYMOUS, Principal
from memento.mcp import jsonrpc, versions
from memento.mcp.jsonrpc import INTERNAL_ERROR, JsonRpcError, RequestId

log = logging.getLogger(__name__)

Sink = Callable[[dict[str, Any]], Awaitable[None]]
"""Delivers one outgoing JSON-RPC message (a notification or a server→client request)."""

StreamCloser = Callable[[int | None], Awaitable[bool]]
"""Ends the connection a request's messages currently flow on (an SSE stream the client can
resume), optionally telling the client when to reconnect (`retry`, in ms); False when there is
no such stream. Supplied by transports that can do it (Streamable HTTP); see `close_stream`."""

LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""RFC 5424 severities in increasing order, as MCP's logging utility names them."""
DEFAULT_LOG_LEVEL = "info"


def log_rank(level: str) -> int:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else 0


class _Pending:
    """One server→client request waiting for the client's response."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None


async def _drop(message: dict[str, Any]) -> None:
    log.debug("no channel for %s; dropped", message.get("method"))


@dataclass(eq=False)
class Session:
    """One client connection's negotiated state (a `SessionView`)."""

    id: str
    protocol_version: str | None = None  # set when initialize is answered
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    initialized: bool = False  # notifications/initialized received
    principal: Principal = ANONYMOUS  # who opened it; only they may use it (see namespace.py)
    log_level: str = DEFAULT_LOG_LEVEL  # "" : emit no log messages (a 2026 request without _meta logLevel)
    state: dict[str, Any] = field(default_factory=dict)  # feature state shared across replicas
    delivers: bool = True  # False: another replica holds this session's notification stream
    last_seen: float = field(default_factory=time.monotonic)
    send: Sink = _drop  # the standalone channel, set by the transport
    in_flight: dict[RequestId, CallContext] = field(default_factory=dict)
    pending: dict[RequestId, _Pending] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def ready(self) -> bool:
        return self.protocol_version is not None

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """A notification not tied to any request."""
        await self.send(jsonrpc.notification(method, params))

    def next_request_id(self) -> str:
        return f"memento-{next(self._ids)}"

    def resolve(self, response: jsonrpc.Response) -> bool:
        """Hand the client's response to the request waiting for it; False when none is."""
        if response.id is None:
            return False
        pending = self.pending.pop(response.id, None)
        if pending is None:
            return False
        if response.error is not None:
            pending.error = response.error if isinstance(response.error, dict) else {}
        else:
            pending.result = response.result if isinstance(response.result, dict) else {}
        pending.done.set()
        return True

    def fail_pending(self) -> None:
        """The session ended: every waiting server→client request fails."""
        for pending in self.pending.values():
            pending.error = {"code": INTERNAL_ERROR, "message": "session closed"}
            pending.done.set()
        self.pending.clear()


class CallContext:
    """One request being answered (a `RequestContext`)."""

    def __init__(
        self,
        session: Session,
        request_id: RequestId,
        version: str,
        meta: dict[str, Any],
        sink: Sink | None = None,
        closer: StreamCloser | None = None,
    ) -> None:
        self.session = session
        self.request_id = request_id
        self.version = version
        self.meta = meta
        self.cancelled = anyio.Event()
        self.cancel_scope: anyio.CancelScope | None = None
        self._sink = sink
        self._closer = closer

    async def _send(self, message: dict[str, Any]) -> None:
        if self._sink is not None:
            await self._sink(message)
        else:
            await self.session.send(message)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._send(jsonrpc.notification(method, params))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        token = self.meta.get("progressToken")
        if token is None or isinstance(token, bool) or not isinstance(token, (str, int)):
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and versions.at_least(self.version, "2025-03-26"):
            params["message"] = message  # defined from 2025-03-26
        await self.notify("notifications/progress", params)

    async def log(self, level: str, data: Any, logger: str = "memento") -> None:
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        floor = self.session.log_level
        if not floor or log_rank(level) < log_rank(floor):
            return  # 2026: no logLevel in the request's _meta means no notifications/message at all
        await self.notify("notifications/message", {"level": level, "logger": logger, "data": data})

    async def request(self, method: str, params: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
        if versions.is_stateless(self.version):  # 2026 asks the client through input_required results (mrtr) instead
            raise JsonRpcError(INTERNAL_ERROR, f"{method}: a 2026-07-28 server sends no requests to the client")
        rid = self.session.next_request_id()
        pending = _Pending()
        self.session.pending[rid] = pending
        try:
            await self._send(jsonrpc.request(rid, method, params))
            with anyio.fail_after(timeout_s):
                await pending.done.wait()
        finally:
            self.session.pending.pop(rid, None)
        if pending.error is not None:
            raise JsonRpcError(
                int(pending.error.get("code", INTERNAL_ERROR)), str(pending.error.get("message", "error")), data=pending.error.get("data")
            )
        return pending.result or {}

    async def close_stream(self, retry_ms: int | None = None) -> bool:
        """Close the request's resumable stream now; the request goes on, and what it sends
        later (its response included) waits in the event store for the client to reconnect."""
        if self._closer is None:
            return False
        return await self._closer(retry_ms)

    def cancel(self) -> None:
        self.cancelled.set()
        if self.cancel_scope is not None:
            self.cancel_scope.cancel()
