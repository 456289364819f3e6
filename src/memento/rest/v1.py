"""Seed 003's hosted API under /v1 (Memento Protocol): the same gate, credentials and problem
documents as /api, over the same service. X-Memento-Workspace selects a workspace (HttpGate,
auth.principal.workspace_namespace). Each part of the face adds its router here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.types import ASGIApp

from .. import __version__
from ..endpoint import RequestGate
from . import problems, v1_context, v1_distill, v1_identity, v1_items, v1_memories, v1_skips
from .guard import RestGuard

if TYPE_CHECKING:
    from ..app import App

OPENAPI_PATH = "/openapi.json"
DESCRIPTION = (
    "Memento Protocol's API (seed 003): memories with expiry and linkages, working memory, the skip list, "
    "the identity crystal, the context call and distillation. Authenticate with `Authorization: Bearer <key>`; "
    "`X-Memento-Workspace: <name>` selects a workspace (created on first use). Errors are RFC 9457 problem documents."
)


def create_v1_api(app: App, gate: RequestGate) -> ASGIApp:
    """The /v1 application over `app`'s service, behind `gate`."""
    api = FastAPI(
        title="Memento Protocol API", version=__version__, description=DESCRIPTION, openapi_url=OPENAPI_PATH, docs_url=None, redoc_url=None
    )
    problems.install(api, app.service.explain)
    api.include_router(v1_memories.router(app))
    api.include_router(v1_skips.router(app))
    api.include_router(v1_identity.router(app))
    api.include_router(v1_context.router(app))
    api.include_router(v1_items.router(app))  # working memory, workspaces, health
    api.include_router(v1_distill.router(app))

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(
                title=api.title, version=api.version, description=api.description, routes=api.routes, servers=[{"url": "/v1"}]
            )
            api.openapi_schema = problems.problem_responses(schema)
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    return RestGuard(api, gate, public=frozenset({OPENAPI_PATH}))
