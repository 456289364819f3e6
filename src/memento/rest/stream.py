"""`GET /api/events`: the live events of 001 §8.5 as Server-Sent Events.

The stream opens with a `: connected` comment, replays what came after `Last-Event-ID` (this
process's ring, else Redis), then sends each new event visible to the caller as `id:`, `event:`
and `data:` lines, with a comment line every MEMENTO_SSE_HEARTBEAT_S seconds while idle. A client
that stops reading is cut off after MEMENTO_STREAM_QUEUE_LIMIT waiting events (it resumes with
Last-Event-ID); a shutting-down server ends every stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header
from starlette.responses import StreamingResponse

from ..models import MAINTENANCE_AGENTS, CallContext
from .events import EVENT_TYPES, EventHub, LiveEvent
from .routing import Ctx, run

CONNECTED = b": connected\n\n"
HEARTBEAT = b": heartbeat\n\n"
EVENTS_DOC = """Server-Sent Events, one per change the caller may see:

| event | data |
|---|---|
| memory_created | {"id", "content", "type"} |
| memory_updated | {"id", "changes"} |
| memory_deleted | {"id"} |
| entity_created | {"id", "name", "type"} |
| consolidation_complete | {"merged", "deleted"} |
| sync_complete | {"timestamp"} |

Every event has an `id:`; reconnect with `Last-Event-ID` to receive what you missed (as far as the
server's ring reaches). Comment lines (`: heartbeat`) keep an idle stream open."""


def audience(ctx: CallContext) -> str | None:
    """Whose events a stream sees: its agent; every agent's for an admin credential not narrowed."""
    if ctx.agent_id is None or ctx.agent_id in MAINTENANCE_AGENTS:
        return None
    return ctx.agent_id


async def events(hub: EventHub, agent: str | None, last_id: str | None, heartbeat_s: float) -> AsyncIterator[bytes]:
    sub = hub.subscribe(agent)
    try:
        yield CONNECTED
        seen: set[str] = set()
        if last_id:
            backlog = hub.backlog(last_id, agent)
            if backlog is None:
                backlog = await run(hub.backlog_from_redis, last_id, agent)
            for event in backlog:
                seen.add(event.id)
                yield event.encode()
        while True:
            try:
                item: LiveEvent | None = await asyncio.wait_for(sub.queue.get(), heartbeat_s)
            except TimeoutError:
                yield HEARTBEAT
                continue
            if item is None:
                return
            if item.id not in seen:
                yield item.encode()
    finally:
        hub.unsubscribe(sub)


def router(hub: EventHub, heartbeat_s: float) -> APIRouter:
    api = APIRouter(tags=["events"])

    @api.get(
        "/events",
        summary="Live events (Server-Sent Events)",
        description=EVENTS_DOC,
        response_class=StreamingResponse,
        responses={200: {"description": "An event stream.", "content": {"text/event-stream": {"schema": {"type": "string"}}}}},
    )
    async def stream(
        ctx: Ctx, last_event_id: Annotated[str | None, Header(max_length=200, description="Resume after this event id.")] = None
    ) -> StreamingResponse:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        body = events(hub, audience(ctx), last_event_id, heartbeat_s)
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    return api


__all__ = ["EVENT_TYPES", "router"]
