"""001 §8.1: `/api/memories` — create (201), list with the §5.6 filters and a total, search in the
four modes, read, update, delete and consolidate, over the entity face's service."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

from ..graph import SearchMode
from ..graph_inputs import ConsolidateMemoriesInput, SearchFilters, StoreMemoryInput, UpdateMemoryInput
from ..graph_results import ConsolidationReport, MemoryHits, MemoryOut, MemoryPage, StoredMemory
from ..models import ForgetInput, ForgetMode, FragmentType, MemorySystem, RestoreInput, TTLTier, VerifyErasureInput
from ..results import ForgetResult, RestoreResult, VerifyErasureResult
from ..service import MemoryService
from .entity_api import EntityApi
from .routing import Ctx, json_response, run


def split_commas(value: Any) -> Any:
    """`types=a,b` and `types=a&types=b` both give [a, b]."""
    if isinstance(value, list):
        return [part.strip() for item in value for part in str(item).split(",") if part.strip()]
    return value


MemoryId = Annotated[str, Path(min_length=1, max_length=64, description="Memory id.")]
Types = Annotated[
    list[FragmentType] | None,
    BeforeValidator(split_commas),
    Query(max_length=len(FragmentType), description="Only these memory types (repeat the parameter or separate with commas)."),
]
Tags = Annotated[
    list[Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True, min_length=1, max_length=100)]] | None,
    BeforeValidator(split_commas),
    Query(max_length=50, description="Only memories carrying every one of these tags."),
]
Limit = Annotated[int, Query(ge=1, le=100, description="Page size (at most 100).")]
Offset = Annotated[int, Query(ge=0, le=1_000_000, description="Skip this many.")]


def filters(
    types: Types = None,
    tags: Tags = None,
    min_confidence: Annotated[float | None, Query(ge=0.0, le=1.0, description="Minimum effective confidence.")] = None,
    after_date: Annotated[datetime | None, Query(description="Created after this time (ISO 8601; UTC when no zone).")] = None,
    before_date: Annotated[datetime | None, Query(description="Created before this time (ISO 8601; UTC when no zone).")] = None,
    entity_id: Annotated[str | None, Query(min_length=1, max_length=64, description="Associated with this entity.")] = None,
    source: Annotated[str | None, Query(max_length=2000, description="Originating source.")] = None,
    memory_system: Annotated[MemorySystem | None, Query(description="Only this memory system (004 §3).")] = None,
    topic: Annotated[str | None, Query(min_length=1, max_length=200, description="Only this topic.")] = None,
    tier: Annotated[TTLTier | None, Query(description="Only this TTL tier: hot, warm, cold or permanent.")] = None,
    pinned: Annotated[bool | None, Query(description="Only pinned (true) or only unpinned (false) memories.")] = None,
) -> SearchFilters:
    """The §5.6 filters of a query string (a value they refuse is the request's fault: 422)."""
    try:
        return SearchFilters(
            memory_types=types,
            tags=tags,
            min_confidence=min_confidence,
            after_date=after_date,
            before_date=before_date,
            entity_id=entity_id,
            source=source,
            memory_system=memory_system,
            topic=topic,
            tier=tier,
            pinned=pinned,
        )
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]) from exc


Filters = Annotated[SearchFilters, Depends(filters)]


def router(entities: EntityApi, memory: MemoryService) -> APIRouter:
    api = APIRouter(prefix="/memories", tags=["memories"])

    @api.post(
        "",
        status_code=201,
        response_model=StoredMemory,
        summary="Create memory",
        responses={200: {"model": StoredMemory, "description": "An exact duplicate: the existing memory (nothing new stored)."}},
    )
    async def create(body: StoreMemoryInput, ctx: Ctx) -> object:
        stored = await run(entities.store_memory, body, ctx)
        return json_response(stored, 201 if stored.created or stored.duplicate is None else 200)

    @api.get("", response_model=MemoryPage, summary="List memories with filters (newest first)")
    async def listing(ctx: Ctx, filt: Filters, limit: Limit = 20, offset: Offset = 0) -> object:
        return json_response(await run(entities.list_memories, filt, limit, offset, ctx))

    @api.get("/search", response_model=MemoryHits, summary="Search (keyword, semantic, hybrid or graph)")
    async def search(
        ctx: Ctx,
        filt: Filters,
        q: Annotated[str, Query(min_length=1, max_length=2000, description="The query.")],
        mode: Annotated[SearchMode, Query(description="keyword, semantic, hybrid or graph.")] = SearchMode.HYBRID,
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> object:
        return json_response(await run(entities.search, q, mode, filt, limit, offset, ctx))

    @api.post("/consolidate", response_model=ConsolidationReport, summary="Trigger consolidation")
    async def consolidate(ctx: Ctx, body: ConsolidateMemoriesInput | None = None) -> object:
        return json_response(await run(entities.consolidate_memories, body or ConsolidateMemoriesInput(), ctx))

    @api.get("/{memory_id}", response_model=MemoryOut, summary="Get single memory")
    async def get(memory_id: MemoryId, ctx: Ctx) -> object:
        return json_response(await run(entities.get_memory, memory_id, ctx))

    @api.put("/{memory_id}", response_model=MemoryOut, summary="Update memory (a version of the old state is kept)")
    async def update(memory_id: MemoryId, body: UpdateMemoryInput, ctx: Ctx) -> object:
        return json_response(await run(entities.update_memory, memory_id, body, ctx))

    @api.delete(
        "/{memory_id}",
        response_model=ForgetResult,
        summary="Forget memory: soft (default, restorable) or hard (erased, with a receipt); its entities stay",
    )
    async def delete(
        memory_id: MemoryId,
        ctx: Ctx,
        mode: Annotated[ForgetMode, Query(description="soft: hidden, restorable; hard: erased everywhere (004 §5.1).")] = ForgetMode.SOFT,
    ) -> object:
        return json_response(await run(memory.forget, ForgetInput(id=memory_id, mode=mode, force=True), ctx))

    @api.post("/{memory_id}/restore", response_model=RestoreResult, summary="Restore a soft-forgotten memory")
    async def restore(memory_id: MemoryId, ctx: Ctx) -> object:
        return json_response(await run(memory.restore, RestoreInput(id=memory_id), ctx))

    return api


class VerifyBody(BaseModel):
    """A receipt that `DELETE /memories/{id}?mode=hard` returned, or its id."""

    model_config = ConfigDict(extra="forbid")

    receipt: dict[str, Any] | None = Field(default=None, description="The receipt, as returned.")
    receiptId: str | None = Field(default=None, min_length=1, max_length=2000, description="Or just its id.")


def erasure_router(memory: MemoryService) -> APIRouter:
    """`/api/erasures`: check an erasure receipt (004 §5.1 verify_erasure)."""
    api = APIRouter(prefix="/erasures", tags=["memories"])

    @api.post("/verify", response_model=VerifyErasureResult, summary="Verify an erasure receipt")
    async def verify(body: VerifyBody, ctx: Ctx) -> object:
        try:
            inp = VerifyErasureInput(receipt=body.receipt, receiptId=body.receiptId)
        except ValidationError as exc:
            raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from exc
        return json_response(await run(memory.verify_erasure, inp, ctx))

    return api
