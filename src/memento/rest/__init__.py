"""The REST API of seed 001 (§8): a FastAPI application mounted at /api in the one web app.

Routes: memories (§8.1), entities (§8.2), relations (§8.3), analytics (§8.4), live events
(§8.5, SSE), export and import (004 §5.1). The OpenAPI 3.1 document at /api/openapi.json is
generated from the same pydantic models the MCP tools use. Authentication is /mcp's gate (RestGuard); every error is a problem
document (problems.py); blocking service calls run in worker threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.routing import Mount
from starlette.types import ASGIApp

from .. import __version__
from ..endpoint import RequestGate
from . import analytics, dashboard, entities, lifecycle, memories, problems, sessions, stream, transfer
from .entity_api import EntityApi
from .events import EventHub
from .guard import RestGuard
from .v1 import create_v1_api

if TYPE_CHECKING:
    from ..app import App

OPENAPI_PATH = "/openapi.json"
DESCRIPTION = (
    "Memento's REST face (seed 001 §8). Authenticate with `Authorization: Bearer <key>` (the access "
    "keys, named keys and OAuth tokens of /mcp); a key bound to an agent sees only that agent's "
    "memories, entities, relations, analytics and events; read-only keys may not change anything (403). "
    "Errors are RFC 9457 problem documents (application/problem+json)."
)


class ApiMount(Mount):
    """A Mount whose prefix takes any remaining path, newlines and all (Starlette's `.*` stops at a
    newline, and such a request would get the outer app's plain-text 404 instead of a problem)."""

    def __init__(self, path: str, app: ASGIApp) -> None:
        super().__init__(path, app=app)
        self.path_regex = re.compile(self.path_regex.pattern, re.DOTALL)


@dataclass
class RestApi:
    """The mounted application and its live-event hub (the server ends its streams at shutdown)."""

    asgi: ASGIApp
    fastapi: FastAPI
    hub: EventHub
    v1: ASGIApp  # seed 003's API (rest/v1.py)

    def mount(self, path: str = "/api") -> Mount:
        return ApiMount(path, self.asgi)

    def mount_v1(self, path: str = "/v1") -> Mount:
        return ApiMount(path, self.v1)


def create_rest_api(app: App, gate: RequestGate, entities_api: EntityApi) -> RestApi:
    """The /api application over `app`'s service and store, behind `gate`."""
    settings = app.settings
    hub = EventHub(
        app.store,
        ring_size=settings.events_ring_size,
        queue_limit=settings.stream_queue_limit,
        redis=app.redis.blocking if app.redis is not None else None,
        bus=app.bus,
    )
    app.service.add_listener(hub.on_change)
    app.service.erasure.add_participant(hub)  # a hard forget takes its text out of the event rings
    api = FastAPI(
        title="Memento REST API", version=__version__, description=DESCRIPTION, openapi_url=OPENAPI_PATH, docs_url=None, redoc_url=None
    )
    problems.install(api, app.service.explain)
    api.include_router(dashboard.router(app))  # before /memories/{id}: /memories/bulk
    api.include_router(memories.router(entities_api, app.service))
    api.include_router(memories.erasure_router(app.service))
    api.include_router(sessions.router(app.service))
    api.include_router(entities.entity_router(entities_api))
    api.include_router(entities.relation_router(entities_api))
    api.include_router(analytics.router(app.store, app.service))
    api.include_router(stream.router(hub, settings.sse_heartbeat_s))
    api.include_router(transfer.router(app.store, app.service))
    api.include_router(lifecycle.router(app.service))

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(
                title=api.title, version=api.version, description=api.description, routes=api.routes, servers=[{"url": "/api"}]
            )
            api.openapi_schema = problems.problem_responses(schema)
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    guarded = RestGuard(api, gate, public=frozenset({OPENAPI_PATH}))
    return RestApi(asgi=guarded, fastapi=api, hub=hub, v1=create_v1_api(app, gate))


__all__ = ["RestApi", "create_rest_api"]
