"""Seed 003's working memory, workspaces and health under /v1, as the reference's hosted API mounts
them: `/working-memory/items` (the structured items), `/working-memory` (the legacy markdown
sections), `/workspaces` and `/health`; thin calls into the protocol face, answering its JSON
results (errors are problem documents)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Path, Query
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ..protocol_face.workmem_models import (
    DEFAULT_LIMIT,
    HealthReport,
    InitResult,
    ItemCreateInput,
    ItemDeleted,
    ItemFields,
    ItemList,
    ItemListInput,
    ItemOut,
    SectionBody,
    SectionOut,
    SectionWritten,
    WorkingMemoryOut,
    WorkspaceCreate,
    WorkspaceList,
)
from ..storage.workmem import ItemCategory, ItemStatus
from .routing import Ctx, json_response, run

if TYPE_CHECKING:
    from ..app import App

ItemIdPath = Annotated[str, Path(min_length=1, max_length=64, description="Item id.")]
SectionPath = Annotated[str, Path(min_length=1, max_length=200, description="Section name, e.g. active_work.")]


def list_input(category: ItemCategory | None, status: ItemStatus | None, query: str | None, limit: int, offset: int) -> ItemListInput:
    """The list filters of a query string (a value they refuse is the request's fault: 422)."""
    try:
        return ItemListInput(category=category, status=status, query=query, limit=limit, offset=offset)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]) from exc


def router(app: App) -> APIRouter:
    face = app.service.protocol
    api = APIRouter()

    # ------------------------------------------------------------ items (declared before /working-memory/{section})

    @api.get("/working-memory/items", response_model=ItemList, tags=["working memory"], summary="List items (priority, then newest)")
    async def list_items(
        ctx: Ctx,
        category: Annotated[ItemCategory | None, Query(description="Only this category.")] = None,
        status: Annotated[ItemStatus | None, Query(description="Only this status (default: active and paused).")] = None,
        query: Annotated[
            str | None, Query(max_length=500, description="Words that must all appear in title, content or next action.")
        ] = None,
        q: Annotated[str | None, Query(max_length=500, description="The same as query.")] = None,
        limit: Annotated[int, Query(ge=1, le=100, description="Page size (at most 100).")] = DEFAULT_LIMIT,
        offset: Annotated[int, Query(ge=0, le=100_000, description="Skip this many.")] = 0,
    ) -> object:
        inp = list_input(category, status, query if query is not None else q, limit, offset)
        return json_response(await run(face.items.listing, inp, ctx))

    @api.post("/working-memory/items", status_code=201, response_model=ItemOut, tags=["working memory"], summary="Create item")
    async def create_item(body: ItemCreateInput, ctx: Ctx) -> object:
        return json_response(await run(face.items.create, body, ctx), 201)

    @api.get("/working-memory/items/{item_id}", response_model=ItemOut, tags=["working memory"], summary="Get item")
    async def get_item(item_id: ItemIdPath, ctx: Ctx) -> object:
        return json_response(await run(face.items.get, item_id, ctx))

    @api.put(
        "/working-memory/items/{item_id}", response_model=ItemOut, tags=["working memory"], summary="Update item (only the fields given)"
    )
    async def update_item(item_id: ItemIdPath, body: ItemFields, ctx: Ctx) -> object:
        return json_response(await run(face.items.update, item_id, body, ctx))

    @api.delete("/working-memory/items/{item_id}", response_model=ItemDeleted, tags=["working memory"], summary="Delete item")
    async def delete_item(item_id: ItemIdPath, ctx: Ctx) -> object:
        return json_response(await run(face.items.delete, item_id, ctx))

    # ------------------------------------------------------------ the markdown sections

    @api.get("/working-memory", response_model=WorkingMemoryOut, tags=["working memory"], summary="The working-memory document as markdown")
    async def read_document(ctx: Ctx) -> object:
        return json_response(await run(face.sections.read, None, ctx))

    @api.get("/working-memory/{section}", response_model=SectionOut, tags=["working memory"], summary="One section")
    async def read_section(section: SectionPath, ctx: Ctx) -> object:
        return json_response(await run(face.sections.section, section, ctx))

    @api.put("/working-memory/{section}", response_model=SectionWritten, tags=["working memory"], summary="Replace a section's content")
    async def update_section(section: SectionPath, body: SectionBody, ctx: Ctx) -> object:
        return json_response(await run(face.sections.update, section, body.content, ctx))

    # ------------------------------------------------------------ workspaces and health

    @api.get("/workspaces", response_model=WorkspaceList, tags=["workspaces"], summary="The caller's workspaces")
    async def list_workspaces(ctx: Ctx) -> object:
        return json_response(await run(face.workspaces.listing, ctx))

    @api.post(
        "/workspaces",
        status_code=201,
        response_model=InitResult,
        tags=["workspaces"],
        summary="Create a workspace",
        responses={200: {"model": InitResult, "description": "It existed already (nothing changed)."}},
    )
    async def create_workspace(body: WorkspaceCreate, ctx: Ctx) -> object:
        made = await run(face.workspaces.create, body.name, ctx)
        return json_response(made, 200 if made.already_existed else 201)

    @api.get("/health", response_model=HealthReport, tags=["health"], summary="Counts of the caller's namespace")
    async def health(ctx: Ctx) -> object:
        return json_response(await run(face.health.report, ctx))

    return api
