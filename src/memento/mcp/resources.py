"""MCP resources: memory as readable, subscribable documents (D2; 002 §3.1, 004 §5.2).

Concrete resources are `memory://stats`, `memory://topics`, the caller's working memory and
the most recent fragments (paginated); templates address one fragment, one topic and one
session's working memory. Writes reach subscribers as `notifications/resources/updated`, and
writes that change the list as `notifications/resources/list_changed`: the service calls
its change listeners from worker threads, which hop onto the event loop here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, quote, unquote

import anyio.to_thread

from memento.errors import MementoError, NotFound
from memento.mcp import versions
from memento.mcp.features import Handler, NotificationHandler, RequestContext, ServerHub, SessionView
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.namespace import sees, service_context
from memento.mcp.paging import decode_cursor, encode_cursor, offset_page
from memento.models import ChangeEvent, MemoryStatsInput
from memento.results import FragmentView, Result

if TYPE_CHECKING:
    from memento.app import App

log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002
JSON_MIME = "application/json"
PAGE_SIZE = 50
STATS_URI = "memory://stats"
TOPICS_URI = "memory://topics"
SUBSCRIPTIONS = "resources/subscriptions"  # session.state key: the URIs the client watches
T = TypeVar("T")

Reader = Callable[[RequestContext, dict[str, str]], Awaitable[list[dict[str, Any]]]]
"""Reads a resource: the request, the template variables ({} for a concrete resource)."""
Completer = Callable[[RequestContext, str, dict[str, str]], Awaitable[list[str]]]
"""Completes one template variable: the request, the typed prefix, already-known arguments."""


def fragment_uri(fragment_id: str) -> str:
    return f"memory://fragments/{quote(fragment_id, safe='')}"


def topic_uri(topic: str) -> str:
    return f"memory://topics/{quote(topic, safe='')}"


def working_memory_uri(session_id: str) -> str:
    return f"memory://sessions/{quote(session_id, safe='')}/working-memory"


def json_contents(uri: str, payload: Result | dict[str, Any]) -> list[dict[str, Any]]:
    """One JSON resource content; a service result is serialised by its own `dump()`."""
    text = json.dumps(payload.dump() if isinstance(payload, Result) else payload, ensure_ascii=False, default=str)
    return [{"uri": uri, "mimeType": JSON_MIME, "text": text}]


def not_found(uri: str, version: str | None = None) -> JsonRpcError:
    """Resource not found: -32002 up to 2025-11-25, -32602 (Invalid params) from 2026-07-28 (SEP-2164)."""
    code = INVALID_PARAMS if version is not None and versions.is_stateless(version) else RESOURCE_NOT_FOUND
    return JsonRpcError(code, f"Resource not found: {uri}", data={"uri": uri})


def _describe(version: str, entry: dict[str, Any], title: str | None) -> dict[str, Any]:
    if title and versions.features(version).titles:
        entry["title"] = title
    return entry


@dataclass(frozen=True)
class StaticResource:
    """A concrete resource with a fixed URI."""

    uri: str
    name: str
    title: str
    description: str
    mime_type: str
    read: Reader
    query: bool = False  # also read with a `?name=value` query (its parameters are the variables)

    def definition(self, version: str) -> dict[str, Any]:
        entry = {"uri": self.uri, "name": self.name, "description": self.description, "mimeType": self.mime_type}
        return _describe(version, entry, self.title)


@dataclass(frozen=True)
class TemplateResource:
    """An RFC 6570 level-1 URI template (`{var}` stands for one percent-encoded segment)."""

    uri_template: str
    name: str
    title: str
    description: str
    mime_type: str
    read: Reader
    completers: Mapping[str, Completer] = field(default_factory=dict)

    @property
    def variables(self) -> list[str]:
        return re.findall(r"\{([A-Za-z0-9_]+)\}", self.uri_template)

    def match(self, uri: str) -> dict[str, str] | None:
        pattern = "".join(
            f"(?P<{part[1:-1]}>[^/?#]+)" if part.startswith("{") else re.escape(part)
            for part in re.split(r"(\{[A-Za-z0-9_]+\})", self.uri_template)
        )
        found = re.fullmatch(pattern, uri)
        return {k: unquote(v) for k, v in found.groupdict().items()} if found else None

    def definition(self, version: str) -> dict[str, Any]:
        entry = {"uriTemplate": self.uri_template, "name": self.name, "description": self.description, "mimeType": self.mime_type}
        return _describe(version, entry, self.title)


VAULT_URI = "memory://vault"


def vault_key_uri(key: str) -> str:
    return f"{VAULT_URI}/{quote(key, safe='')}"


def session_memory_uri(session_id: str) -> str:
    return f"memory://session/{quote(session_id, safe='')}"


def affected_uris(event: ChangeEvent) -> set[str] | None:
    """The URIs a committed change may have altered; None means possibly all of them."""
    if event.kind == "consolidated":
        return None
    if event.kind not in ("created", "amended", "deleted", "linked", "session_ended"):
        return set()  # the entity graph and sync notices change no resource of this face
    uris = {STATS_URI, TOPICS_URI}
    uris.update(fragment_uri(fid) for fid in event.fragment_ids)
    uris.update(topic_uri(t) for t in event.topics)
    if event.session_id:
        uris.update((working_memory_uri(event.session_id), session_memory_uri(event.session_id)))
    details = event.details or {}
    keys = [details["memory_key"]] if "memory_key" in details else list(details.get("memory_keys", ()))
    if keys and event.session_id is None:  # 002 §3.1: the vault and its keys
        uris.add(VAULT_URI)
        uris.update(vault_key_uri(str(k)) for k in keys)
    return uris


def changes_list(event: ChangeEvent) -> bool:
    """Whether the change adds or removes concrete resources (fragments, working memory)."""
    return event.kind in {"created", "deleted", "consolidated", "session_ended"}


class ResourcesFeature:
    """resources/list, templates/list, read, subscribe, unsubscribe and their notifications."""

    def __init__(self, page_size: int = PAGE_SIZE) -> None:
        self.page_size = page_size
        self.statics: list[StaticResource] = [
            StaticResource(
                STATS_URI,
                "stats",
                "Memory statistics",
                "Fragment counts by tier and type, embedding coverage, mean utility.",
                JSON_MIME,
                self._read_stats,
            ),
            StaticResource(
                TOPICS_URI, "topics", "Topics", "Every topic with its number of permanent fragments.", JSON_MIME, self._read_topics
            ),
        ]
        self.templates: list[TemplateResource] = [
            TemplateResource(
                "memory://fragments/{id}",
                "fragment",
                "Memory fragment",
                "One stored fragment as JSON.",
                JSON_MIME,
                self._read_fragment,
                {"id": self._complete_id},
            ),
            TemplateResource(
                "memory://topics/{topic}",
                "topic",
                "Fragments of a topic",
                "The permanent fragments of one topic, newest first.",
                JSON_MIME,
                self._read_topic,
                {"topic": self._complete_topic},
            ),
            TemplateResource(
                "memory://sessions/{sessionId}/working-memory",
                "working-memory",
                "Session working memory",
                "The scope=session fragments of your own MCP session.",
                JSON_MIME,
                self._read_working_memory,
                {"sessionId": self._complete_session},
            ),
        ]
        self._hub: ServerHub | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deliveries: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ contract

    def capabilities(self, version: str) -> dict[str, Any]:
        return {"resources": {"subscribe": True, "listChanged": True}}

    def handlers(self) -> Mapping[str, Handler]:
        return {
            "resources/list": self._list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._read,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
        }

    def notification_handlers(self) -> Mapping[str, NotificationHandler]:
        return {}

    def attach(self, hub: ServerHub) -> None:
        self._hub = hub
        hub.app.service.add_listener(self._on_change)
        if hub.app.bus is not None:  # writes through the other replicas
            hub.app.bus.on_change(self._on_change)
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None  # captured by the first request instead

    # ------------------------------------------------------------ extension points

    def add_static(self, resource: StaticResource) -> None:
        self.statics.append(resource)

    def add_template(self, template: TemplateResource) -> None:
        self.templates.append(template)

    def template(self, uri_template: str) -> TemplateResource | None:
        return next((t for t in self.templates if t.uri_template == uri_template), None)

    # ------------------------------------------------------------ handlers

    async def _list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self._remember_loop()
        position = decode_cursor("resources", params)
        if position is not None and (not isinstance(position, int) or position <= 0):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
        entries: list[dict[str, Any]] = []
        if position is None:
            entries = [r.definition(ctx.version) for r in self.statics]
        if position is None and not versions.is_stateless(ctx.version):  # 2026-07-28: no session, a list the same for all
            entries.append(
                _describe(
                    ctx.version,
                    {
                        "uri": working_memory_uri(ctx.session.id),
                        "name": "working-memory",
                        "description": "Working memory (scope=session fragments) of this session.",
                        "mimeType": JSON_MIME,
                    },
                    "This session's working memory",
                )
            )
        fragments, next_seq = await self._call(
            self.app.service.views.list_fragments_page, service_context(ctx.session), position, self.page_size
        )
        entries += [self._fragment_entry(ctx.version, f) for f in fragments]
        result: dict[str, Any] = {"resources": entries}
        if next_seq is not None:
            result["nextCursor"] = encode_cursor("resources", next_seq)
        return result

    async def _templates_list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        start, end, cursor = offset_page("templates", params, len(self.templates), self.page_size)
        result: dict[str, Any] = {"resourceTemplates": [t.definition(ctx.version) for t in self.templates[start:end]]}
        if cursor:
            result["nextCursor"] = cursor
        return result

    async def _read(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self._remember_loop()
        uri = _uri_param(params)
        reader, variables = self._resolve(uri, ctx.version)
        try:
            contents = await reader(ctx, variables)
        except NotFound:
            raise not_found(uri, ctx.version) from None
        return {"contents": contents}

    async def _subscribe(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self._remember_loop()
        uri = _uri_param(params)
        self._resolve(uri)  # only resources we serve can be watched
        watched = set(_watched(ctx.session)) | {uri}
        ctx.session.state[SUBSCRIPTIONS] = sorted(watched)
        return {}

    async def _unsubscribe(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        uri = _uri_param(params)
        ctx.session.state[SUBSCRIPTIONS] = [u for u in _watched(ctx.session) if u != uri]
        return {}

    # ------------------------------------------------------------ readers

    @property
    def app(self) -> App:
        if self._hub is None:
            raise RuntimeError("ResourcesFeature used before attach()")
        return self._hub.app

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await anyio.to_thread.run_sync(partial(fn, *args))
        except NotFound:
            raise
        except MementoError as exc:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {exc.message}") from None

    async def _read_stats(self, ctx: RequestContext, _: dict[str, str]) -> list[dict[str, Any]]:
        stats = await self._call(self.app.service.memory_stats, MemoryStatsInput(), service_context(ctx.session))
        return json_contents(STATS_URI, stats)

    async def _read_topics(self, ctx: RequestContext, _: dict[str, str]) -> list[dict[str, Any]]:
        topics = await self._call(self.app.service.views.list_topics, service_context(ctx.session))
        entries = [t.dump() | {"uri": topic_uri(t.topic)} for t in topics]
        return json_contents(TOPICS_URI, {"topics": entries, "count": len(entries)})

    async def _read_fragment(self, ctx: RequestContext, v: dict[str, str]) -> list[dict[str, Any]]:
        fragment = await self._call(self.app.service.views.get_fragment, v["id"], service_context(ctx.session))
        return json_contents(fragment_uri(v["id"]), fragment)

    async def _read_topic(self, ctx: RequestContext, v: dict[str, str]) -> list[dict[str, Any]]:
        fragments = await self._call(self.app.service.views.topic_fragments, v["topic"], service_context(ctx.session))
        if not fragments:
            raise NotFound(f"topic {v['topic']!r} has no fragments")
        return json_contents(
            topic_uri(v["topic"]), {"topic": v["topic"], "fragments": [f.dump() for f in fragments], "count": len(fragments)}
        )

    async def _read_working_memory(self, ctx: RequestContext, v: dict[str, str]) -> list[dict[str, Any]]:
        if versions.is_stateless(ctx.version):  # no protocol session to read (mcp/handles.py)
            raise NotFound("at MCP 2026-07-28 a session's working memory is read with the context tool and its session handle")
        if v["sessionId"] != ctx.session.id:
            raise NotFound("only your own session's working memory is readable")
        fragments = await self._call(self.app.service.views.working_memory, ctx.session.id, service_context(ctx.session))
        payload = {"sessionId": ctx.session.id, "fragments": [f.dump() for f in fragments], "count": len(fragments)}
        return json_contents(working_memory_uri(ctx.session.id), payload)

    # ------------------------------------------------------------ completers

    async def _complete_id(self, ctx: RequestContext, prefix: str, _: dict[str, str]) -> list[str]:
        return await self._call(self.app.service.views.fragment_ids, service_context(ctx.session), prefix, 100)

    async def _complete_topic(self, ctx: RequestContext, prefix: str, _: dict[str, str]) -> list[str]:
        topics = await self._call(self.app.service.views.list_topics, service_context(ctx.session), prefix, 100)
        return [t.topic for t in topics]

    async def _complete_session(self, ctx: RequestContext, prefix: str, _: dict[str, str]) -> list[str]:
        if versions.is_stateless(ctx.version):  # a request's throwaway session is nobody's to name
            return []
        return [ctx.session.id] if ctx.session.id.startswith(prefix) else []

    # ------------------------------------------------------------ helpers

    def _resolve(self, uri: str, version: str | None = None) -> tuple[Reader, dict[str, str]]:
        base, _, query = uri.partition("?")
        for resource in self.statics:
            if resource.uri == uri:
                return resource.read, {}
            if resource.query and resource.uri == base:
                return resource.read, dict(parse_qsl(query, keep_blank_values=True))
        for template in self.templates:
            variables = template.match(uri)
            if variables is not None:
                return template.read, variables
        raise not_found(uri, version)

    @staticmethod
    def _fragment_entry(version: str, fragment: FragmentView) -> dict[str, Any]:
        content = fragment.content
        entry = {
            "uri": fragment_uri(fragment.id),
            "name": fragment.id,
            "description": content if len(content) <= 120 else content[:119] + "…",
            "mimeType": JSON_MIME,
        }
        return _describe(version, entry, f"{fragment.type.value} · {fragment.topic}")

    # ------------------------------------------------------------ change notifications

    def started(self) -> None:
        """The transport's loop is running: changes can be delivered from now on."""
        self._loop = asyncio.get_running_loop()

    def _remember_loop(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()

    def _on_change(self, event: ChangeEvent) -> None:
        """Service listener (any thread): schedule delivery on the event loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._spawn_delivery, event)
        except RuntimeError:  # the loop closed between the check and the call
            pass

    def _spawn_delivery(self, event: ChangeEvent) -> None:
        task = asyncio.ensure_future(self.deliver(event))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def deliver(self, event: ChangeEvent) -> None:
        """Send the notifications one change calls for to every session that may see it."""
        if self._hub is None:
            return
        affected = affected_uris(event)
        for session in self._hub.sessions():
            if (
                not session.delivers
                or session.protocol_version is None
                or not sees(session, event.agent_id, working=event.session_id is not None)
            ):
                continue
            watched = set(_watched(session))
            for uri in sorted(watched if affected is None else watched & affected):
                await _notify(session, "notifications/resources/updated", {"uri": uri})
            if changes_list(event):
                await _notify(session, "notifications/resources/list_changed", {})


def _watched(session: SessionView) -> list[str]:
    value = session.state.get(SUBSCRIPTIONS)
    return [str(uri) for uri in value] if isinstance(value, list) else []


async def _notify(session: SessionView, method: str, params: dict[str, Any]) -> None:
    try:
        await session.notify(method, params)
    except Exception:  # boundary: one dead channel must not stop delivery to the others
        log.warning("could not deliver %s to session %s", method, session.id, exc_info=True)


def _uri_param(params: dict[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: uri must be a non-empty string")
    return uri
