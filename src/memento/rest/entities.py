"""001 §8.2-§8.3: `/api/entities` (create, list, read with relations, update, delete, subgraph,
memories) and `/api/relations` (create or update, list, delete)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from ..graph_inputs import CreateEntitiesInput, CreateRelationInput, EntityInput, UpdateEntityInput
from ..graph_results import (
    DeletedEntities,
    DeletedRelations,
    EntityDetail,
    EntityGraph,
    EntityOut,
    EntityPage,
    MemoryPage,
    RelationPage,
    RelationsOut,
)
from .entity_api import EntityApi
from .memories import Limit, Offset
from .routing import Ctx, json_response, run

EntityId = Annotated[str, Path(min_length=1, max_length=64, description="Entity id (ent-…).")]
RelationId = Annotated[str, Path(min_length=1, max_length=64, description="Relation id (rel-…).")]
TypeName = Annotated[str | None, Query(min_length=1, max_length=100)]


def entity_router(entities: EntityApi) -> APIRouter:
    api = APIRouter(prefix="/entities", tags=["entities"])

    @api.post(
        "",
        status_code=201,
        response_model=EntityOut,
        summary="Create entity",
        responses={200: {"model": EntityOut, "description": "An entity of that name existed: it is returned (updated)."}},
    )
    async def create(body: EntityInput, ctx: Ctx) -> object:
        out = await run(entities.create_entities, CreateEntitiesInput(entities=[body]), ctx)
        entity = out.entities[0]
        return json_response(entity, 201 if out.created else 200)

    @api.get("", response_model=EntityPage, summary="List entities")
    async def listing(
        ctx: Ctx,
        entity_type: Annotated[str | None, Query(min_length=1, max_length=100, description="Only this type.")] = None,
        q: Annotated[str | None, Query(min_length=1, max_length=255, description="Name contains this (any case).")] = None,
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> object:
        return json_response(await run(entities.list_entities, entity_type, q, limit, offset, ctx))

    @api.get("/{entity_id}", response_model=EntityDetail, summary="Get entity with relations")
    async def get(entity_id: EntityId, ctx: Ctx) -> object:
        return json_response(await run(entities.get_entity, entity_id, ctx))

    @api.put("/{entity_id}", response_model=EntityOut, summary="Update entity")
    async def update(entity_id: EntityId, body: UpdateEntityInput, ctx: Ctx) -> object:
        return json_response(await run(entities.update_entity, entity_id, body, ctx))

    @api.delete("/{entity_id}", response_model=DeletedEntities, summary="Delete entity (its relations go; memories stay)")
    async def delete(
        entity_id: EntityId,
        ctx: Ctx,
        cascade_memories: Annotated[bool, Query(description="Also delete the memories associated with it.")] = False,
    ) -> object:
        return json_response(await run(entities.delete_entity_ids, [entity_id], cascade_memories, ctx))

    @api.get("/{entity_id}/graph", response_model=EntityGraph, summary="Get entity subgraph")
    async def graph(
        entity_id: EntityId,
        ctx: Ctx,
        depth: Annotated[int, Query(ge=1, le=5, description="Hops from the entity.")] = 1,
        min_strength: Annotated[float, Query(ge=0.0, le=1.0, description="Only relations at least this strong.")] = 0.0,
        include_memories: Annotated[bool, Query(description="Each node's associated memories.")] = True,
    ) -> object:
        return json_response(await run(entities.entity_graph_by_id, entity_id, depth, min_strength, include_memories, ctx))

    @api.get("/{entity_id}/memories", response_model=MemoryPage, summary="Get entity's memories")
    async def memories(entity_id: EntityId, ctx: Ctx, limit: Limit = 20, offset: Offset = 0) -> object:
        return json_response(await run(entities.entity_memories, entity_id, limit, offset, ctx))

    return api


def relation_router(entities: EntityApi) -> APIRouter:
    api = APIRouter(prefix="/relations", tags=["relations"])

    @api.post(
        "",
        status_code=201,
        response_model=RelationsOut,
        summary="Create relation (missing entities are created as `unknown`)",
        responses={200: {"model": RelationsOut, "description": "The relation existed: it was updated."}},
    )
    async def create(body: CreateRelationInput, ctx: Ctx) -> object:
        out = await run(entities.create_relation, body, ctx)
        return json_response(out, 201 if out.created else 200)

    @api.get("", response_model=RelationPage, summary="List relations")
    async def listing(
        ctx: Ctx,
        entity_id: Annotated[str | None, Query(min_length=1, max_length=64, description="Touching this entity (either end).")] = None,
        relation_type: TypeName = None,
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> object:
        return json_response(await run(entities.list_relations, entity_id, relation_type, limit, offset, ctx))

    @api.delete("/{relation_id}", response_model=DeletedRelations, summary="Delete relation")
    async def delete(relation_id: RelationId, ctx: Ctx) -> object:
        return json_response(await run(entities.delete_relation_ids, [relation_id], ctx))

    return api
