"""`subscriptions/listen` (MCP 2026-07-28): change notifications on a request's own stream.

The stateless revision has no GET stream and no `resources/subscribe`: a client that wants
change notifications sends `subscriptions/listen` with a filter (`toolsListChanged`,
`promptsListChanged`, `resourcesListChanged`, `resourceSubscriptions`: URIs). The request
stays open: its first message is `notifications/subscriptions/acknowledged` naming what the
server agreed to honour, then every matching change follows, each tagged with
`_meta["io.modelcontextprotocol/subscriptionId"]` (the listen request's id). Over Streamable
HTTP they flow on the POST's SSE response; over stdio on stdout beside everything else. The
request ends when the client goes away (HTTP: closes the stream; stdio: notifications/cancelled)
or, gracefully, when the server shuts down (`end_all`): then the response carries the
subscription id.

A listen stream joins the hub's sessions as a listener `Session` owned by the caller's
principal, so the resource change fan-out (`ResourcesFeature.deliver`, which also receives
writes made through other replicas over the bus) reaches it exactly as it reaches a classic
session: only for changes the caller's namespace may see (namespace.sees), only for the URIs it
listed. What the filter did not ask for is never sent.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import Any

import anyio

from memento.mcp import jsonrpc, versions
from memento.mcp.context import Session
from memento.mcp.features import Handler, NotificationHandler, RequestContext, ServerHub
from memento.mcp.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcError
from memento.mcp.namespace import principal
from memento.mcp.resources import SUBSCRIPTIONS
from memento.mcp.task_extension import STATUS_NOTIFICATION, require_extension

log = logging.getLogger(__name__)

LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
MAX_URIS = 1000
"""resourceSubscriptions one listen request may name."""

FLAGS: dict[str, tuple[str, str]] = {
    # filter key -> (server capability that must declare listChanged, the notification it opts in to)
    "toolsListChanged": ("tools", "notifications/tools/list_changed"),
    "promptsListChanged": ("prompts", "notifications/prompts/list_changed"),
    "resourcesListChanged": ("resources", "notifications/resources/list_changed"),
}
RESOURCE_UPDATED = "notifications/resources/updated"


def _invalid(message: str) -> JsonRpcError:
    return JsonRpcError(INVALID_PARAMS, f"Invalid params: {message}")


def requested_filter(params: dict[str, Any]) -> dict[str, Any]:
    """The `notifications` filter of a listen request, checked: -32602 when malformed."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise _invalid("notifications must be an object (the SubscriptionFilter)")
    for key in FLAGS:
        if key in wanted and not isinstance(wanted[key], bool):
            raise _invalid(f"notifications.{key} must be a boolean")
    uris = wanted.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(u, str) and u for u in uris):
            raise _invalid("notifications.resourceSubscriptions must be an array of resource URIs")
        if len(uris) > MAX_URIS:
            raise _invalid(f"notifications.resourceSubscriptions names more than {MAX_URIS} URIs")
    task_ids = wanted.get("taskIds")  # the tasks extension (task_extension.py)
    if task_ids is not None and (
        not isinstance(task_ids, list) or not all(isinstance(t, str) and t for t in task_ids) or len(task_ids) > MAX_URIS
    ):
        raise _invalid(f"notifications.taskIds must be an array of at most {MAX_URIS} task ids")
    return wanted


class Listener:
    """One open listen stream: what it honours, and the request it answers on."""

    def __init__(self, ctx: RequestContext, honoured: dict[str, Any]) -> None:
        self.ctx = ctx
        self.honoured = honoured
        self.tag = {SUBSCRIPTION_ID: ctx.request_id}
        self.ended = anyio.Event()
        uris = honoured.get("resourceSubscriptions", [])
        self.uris = frozenset(uris)
        self.task_ids = frozenset(honoured.get("taskIds", []))
        self.methods = frozenset(method for key, (_, method) in FLAGS.items() if honoured.get(key))
        # What the fan-out sees: a session of the caller's principal watching the listed URIs.
        self.session = Session(
            id=f"listen-{secrets.token_urlsafe(18)}",
            protocol_version=versions.STATELESS,
            client_capabilities=dict(ctx.session.client_capabilities),
            initialized=True,
            principal=principal(ctx.session),
            log_level="",
            state={SUBSCRIPTIONS: sorted(self.uris)},
        )
        self.session.send = self._send

    def wants(self, message: dict[str, Any]) -> bool:
        method = message.get("method")
        if method == RESOURCE_UPDATED:
            params = message.get("params")
            return isinstance(params, dict) and params.get("uri") in self.uris
        if method == STATUS_NOTIFICATION:
            params = message.get("params")
            return isinstance(params, dict) and params.get("taskId") in self.task_ids
        return method in self.methods

    async def _send(self, message: dict[str, Any]) -> None:
        """A change notification from the fan-out: sent tagged when the filter asked for it."""
        if self.ended.is_set() or not self.wants(message):
            return
        params = dict(message.get("params") or {})
        meta = params.get("_meta")
        params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **self.tag}
        await self.ctx.notify(str(message["method"]), params)


class SubscriptionsFeature:
    """The `subscriptions/listen` method and the listen streams open in this process."""

    def __init__(self) -> None:
        self._hub: ServerHub | None = None
        self._listeners: dict[str, Listener] = {}

    # ------------------------------------------------------------ contract

    def capabilities(self, version: str) -> dict[str, Any]:
        return {}

    def handlers(self) -> Mapping[str, Handler]:
        return {LISTEN: self._listen}

    def notification_handlers(self) -> Mapping[str, NotificationHandler]:
        return {}

    def attach(self, hub: ServerHub) -> None:
        self._hub = hub

    # ------------------------------------------------------------ the hub's view

    def listening(self) -> list[Session]:
        """The listener sessions the change fan-out reaches (McpServer.sessions adds them)."""
        return [listener.session for listener in self._listeners.values()]

    def count(self) -> int:
        return len(self._listeners)

    def end_all(self) -> None:
        """Shutdown: end every listen stream gracefully (each answers its request)."""
        for listener in list(self._listeners.values()):
            listener.ended.set()

    # ------------------------------------------------------------ the method

    def _honoured(self, wanted: dict[str, Any]) -> dict[str, Any]:
        """The part of the filter this server can honour: list changes only for lists whose
        capability declares listChanged, resource updates when resources are served."""
        capabilities: dict[str, Any] = {}
        declared = getattr(self._hub, "capabilities", None)
        if callable(declared):
            capabilities = declared(versions.STATELESS)
        honoured: dict[str, Any] = {}
        for key, (capability, _) in FLAGS.items():
            entry = capabilities.get(capability)
            if wanted.get(key) is True and isinstance(entry, dict) and entry.get("listChanged") is True:
                honoured[key] = True
        uris = wanted.get("resourceSubscriptions")
        resources = capabilities.get("resources")
        if uris and isinstance(resources, dict) and resources.get("subscribe") is True:
            honoured["resourceSubscriptions"] = list(dict.fromkeys(uris))
        return honoured

    async def _listen(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        if not versions.is_stateless(ctx.version):  # the handshake revisions have GET + resources/subscribe
            raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {LISTEN}")
        wanted = requested_filter(params)
        honoured = self._honoured(wanted)
        if wanted.get("taskIds"):  # task status needs the tasks extension in this request's capabilities (-32021)
            require_extension(ctx)
            honoured["taskIds"] = list(dict.fromkeys(wanted["taskIds"]))
        listener = Listener(ctx, honoured)
        # The acknowledgement comes first: registered only after it, nothing can overtake it.
        await ctx.notify(ACKNOWLEDGED, {"notifications": listener.honoured, "_meta": dict(listener.tag)})
        self._listeners[listener.session.id] = listener
        log.info("subscriptions/listen %r open: %s", ctx.request_id, jsonrpc.encode(listener.honoured))
        try:
            await listener.ended.wait()  # until shutdown; the client leaving cancels this
        finally:
            listener.ended.set()
            self._listeners.pop(listener.session.id, None)
            log.info("subscriptions/listen %r closed", ctx.request_id)
        return {"_meta": dict(listener.tag)}


def subscriptions_of(features: object) -> SubscriptionsFeature | None:
    """The subscriptions feature among a server's features, if it serves one."""
    if not isinstance(features, (list, tuple)):
        return None
    return next((f for f in features if isinstance(f, SubscriptionsFeature)), None)
