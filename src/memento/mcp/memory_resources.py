"""Seed 004's resources (§5.2), served with the memento toolset beside 000's own: a read-only view
of one memory (`memory://memory/{id}`, the same JSON as `memory://fragments/{id}`) and a search
preview (`memory://memory/search?query=...&limit=...`: the top recalled memories, each with its
snippet, score and recall reason; `limit` 1-50, default 8)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar
from urllib.parse import quote

import anyio.to_thread
from pydantic import ValidationError

from memento.errors import MementoError, NotFound
from memento.mcp.features import RequestContext
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.namespace import service_context
from memento.mcp.resources import JSON_MIME, ResourcesFeature, StaticResource, TemplateResource, fragment_uri
from memento.models import RecallInput

SEARCH_URI = "memory://memory/search"
DEFAULT_LIMIT = 8  # 004 §8's recall default
MAX_LIMIT = 50
SNIPPET_CHARS = 200
T = TypeVar("T")


def memory_uri(fragment_id: str) -> str:
    return f"memory://memory/{quote(fragment_id, safe='')}"


def _json(uri: str, value: Any) -> list[dict[str, Any]]:
    return [{"uri": uri, "mimeType": JSON_MIME, "text": json.dumps(value, ensure_ascii=False)}]


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise JsonRpcError(INVALID_PARAMS, f"Invalid params: limit must be an integer from 1 to {MAX_LIMIT}")
    return int(raw)


def _snippet(text: str) -> str:
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


class MemoryResources:
    """The readers of 004's resources over a ResourcesFeature (its app, after attach)."""

    def __init__(self, feature: ResourcesFeature) -> None:
        self.feature = feature

    def install(self) -> None:
        self.feature.add_static(
            StaticResource(
                SEARCH_URI,
                "memory-search",
                "Memory search preview",
                "Read with ?query=...&limit=... (default 8): the best-matching memories with snippet, score and recall reason.",
                JSON_MIME,
                self._read_search,
                query=True,
            )
        )
        self.feature.add_template(
            TemplateResource(
                "memory://memory/{id}",
                "memory",
                "Memory",
                "One memory as JSON (read-only; same as memory://fragments/{id}).",
                JSON_MIME,
                self._read_memory,
            )
        )

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await anyio.to_thread.run_sync(partial(fn, *args))
        except NotFound:
            raise
        except MementoError as exc:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {exc.message}") from None

    async def _read_memory(self, ctx: RequestContext, v: dict[str, str]) -> list[dict[str, Any]]:
        fragment = await self._call(self.feature.app.service.views.get_fragment, v["id"], service_context(ctx.session))
        return _json(memory_uri(v["id"]), fragment.dump())

    async def _read_search(self, ctx: RequestContext, v: dict[str, str]) -> list[dict[str, Any]]:
        unknown = sorted(set(v) - {"query", "limit"})
        if unknown:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: unknown query parameter(s) {', '.join(unknown)}; use query and limit")
        query = v.get("query", "")
        limit = _limit(v.get("limit"))
        if not query.strip():  # listed, so clients read it bare: an empty preview that says how to ask
            return _json(
                SEARCH_URI, {"query": "", "items": [], "count": 0, "hint": f"read {SEARCH_URI}?query=<text>&limit=<1-{MAX_LIMIT}>"}
            )
        try:
            inp = RecallInput(query=query, limit=limit, includeLinks=False)
        except ValidationError as exc:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {exc.errors()[0]['msg']}") from None
        found = await self._call(self.feature.app.service.recall, inp, service_context(ctx.session))
        items = [
            {
                "id": f.id,
                "uri": fragment_uri(f.id),
                "snippet": _snippet(f.content),
                "score": f.score,
                "recallReason": f.recall_reason,
                "type": f.type.value,
                "memorySystem": f.memory_system.value,
            }
            for f in found.fragments[:limit]
        ]
        uri = f"{SEARCH_URI}?query={quote(query, safe='')}&limit={limit}"
        return _json(uri, {"query": query, "items": items, "count": len(items)})
