"""Seed 003's `/v1/memories`: store (201, or 200 for content stored already), recall or list,
read, update (fields changed, linkages added), delete (soft) and the linkage graph, over the
face's Memories (protocol_face/memories.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BeforeValidator, StringConstraints

from ..protocol_face.memory_models import (
    MAX_GRAPH_DEPTH,
    DeletedMemory,
    MemoryGraph,
    MemoryGraphInput,
    MemoryList,
    MemoryOut,
    ProtocolType,
    StoredMemory,
    StoreMemoryInput,
    UpdateMemoryInput,
)
from .memories import split_commas
from .routing import Ctx, json_response, run

if TYPE_CHECKING:
    from ..app import App

MemoryId = Annotated[str, Path(min_length=1, max_length=64, description="Memory id.")]
Tags = Annotated[
    list[Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True, min_length=1, max_length=100)]] | None,
    BeforeValidator(split_commas),
    Query(max_length=50, description="Only memories with any of these tags (repeat the parameter or separate with commas)."),
]
Type = Annotated[ProtocolType | None, Query(description="Only this type: fact, decision, observation or instruction.")]
Limit = Annotated[int, Query(ge=1, le=100, description="At most this many (default 10).")]
Search = Annotated[str | None, Query(max_length=2000, description="Words or a question: ranked recall (omitted: newest first).")]


def router(app: App) -> APIRouter:
    memories = app.service.protocol.memories
    api = APIRouter(prefix="/memories", tags=["memories"])

    @api.post(
        "",
        status_code=201,
        response_model=StoredMemory,
        summary="Store a memory (with tags, expiry and linkages)",
        responses={200: {"model": StoredMemory, "description": "The same content is stored already: that memory (linkages added to it)."}},
    )
    async def store(body: StoreMemoryInput, ctx: Ctx) -> object:
        stored = await run(memories.store, body, ctx)
        return json_response(stored, 201 if stored.created else 200)

    @api.get("", response_model=MemoryList, summary="Recall memories for a query, or list them")
    async def listing(ctx: Ctx, query: Search = None, tags: Tags = None, type: Type = None, limit: Limit = 10) -> object:
        return json_response(await run(memories.listing, query, tags or [], type, limit, ctx))

    @api.get("/recall", response_model=MemoryList, summary="Recall memories for a query (as GET /v1/memories?query=)")
    async def recall(
        ctx: Ctx,
        query: Annotated[str, Query(min_length=1, max_length=2000, description="Words or a question.")],
        tags: Tags = None,
        type: Type = None,
        limit: Limit = 10,
    ) -> object:
        return json_response(await run(memories.listing, query, tags or [], type, limit, ctx))

    @api.get("/{memory_id}", response_model=MemoryOut, summary="Get a memory")
    async def get(memory_id: MemoryId, ctx: Ctx) -> object:
        return json_response(await run(memories.get, memory_id, ctx))

    @api.put("/{memory_id}", response_model=MemoryOut, summary="Update a memory (fields given; linkages added)")
    async def update(memory_id: MemoryId, body: UpdateMemoryInput, ctx: Ctx) -> object:
        return json_response(await run(memories.update, memory_id, body, ctx))

    @api.delete("/{memory_id}", response_model=DeletedMemory, summary="Delete a memory (soft: restorable)")
    async def delete(memory_id: MemoryId, ctx: Ctx) -> object:
        return json_response(await run(memories.delete, memory_id, ctx))

    @api.get("/{memory_id}/graph", response_model=MemoryGraph, summary="The linkage graph around a memory (breadth first)")
    async def graph(
        memory_id: MemoryId,
        ctx: Ctx,
        depth: Annotated[int, Query(ge=1, le=MAX_GRAPH_DEPTH, description="Hops to follow (1-3, default 2).")] = 2,
    ) -> object:
        return json_response(await run(memories.graph, MemoryGraphInput(id=memory_id, depth=depth), ctx))

    return api
