"""Seed 001's ten tools (§7.2), the `entity` toolset: names, parameters and defaults as the seed
writes them, each a thin call into EntityService over the one engine."""

from __future__ import annotations

from memento.graph_inputs import (
    ConsolidateMemoriesInput,
    CreateEntitiesInput,
    CreateRelationsInput,
    DeleteEntitiesInput,
    DeleteMemoriesInput,
    DeleteRelationsInput,
    GetEntityGraphInput,
    GetMemoryStatsInput,
    RecallMemoriesInput,
    StoreMemoryInput,
)
from memento.graph_results import (
    ConsolidationReport,
    DeletedEntities,
    DeletedMemories,
    DeletedRelations,
    EntitiesOut,
    EntityGraph,
    MemoryHits,
    MemoryStats001,
    RelationsOut,
    StoredMemory,
)
from memento.mcp.tools import ToolSpec
from memento.mcp.versions import ToolHints
from memento.models import CallContext
from memento.service import MemoryService


def store_memory(service: MemoryService, inp: StoreMemoryInput, ctx: CallContext) -> StoredMemory:
    return service.entities.store_memory(inp, ctx)


def recall_memories(service: MemoryService, inp: RecallMemoriesInput, ctx: CallContext) -> MemoryHits:
    return service.entities.recall_memories(inp, ctx)


def create_entities(service: MemoryService, inp: CreateEntitiesInput, ctx: CallContext) -> EntitiesOut:
    return service.entities.create_entities(inp, ctx)


def create_relations(service: MemoryService, inp: CreateRelationsInput, ctx: CallContext) -> RelationsOut:
    return service.entities.create_relations(inp, ctx)


def delete_memories(service: MemoryService, inp: DeleteMemoriesInput, ctx: CallContext) -> DeletedMemories:
    return service.entities.delete_memories(inp, ctx)


def delete_entities(service: MemoryService, inp: DeleteEntitiesInput, ctx: CallContext) -> DeletedEntities:
    return service.entities.delete_entities(inp, ctx)


def delete_relations(service: MemoryService, inp: DeleteRelationsInput, ctx: CallContext) -> DeletedRelations:
    return service.entities.delete_relations(inp, ctx)


def get_entity_graph(service: MemoryService, inp: GetEntityGraphInput, ctx: CallContext) -> EntityGraph:
    return service.entities.get_entity_graph(inp, ctx)


def consolidate_memories(service: MemoryService, inp: ConsolidateMemoriesInput, ctx: CallContext) -> ConsolidationReport:
    return service.entities.consolidate_memories(inp, ctx)


def get_memory_stats(service: MemoryService, inp: GetMemoryStatsInput, ctx: CallContext) -> MemoryStats001:
    return service.entities.get_memory_stats(inp, ctx)


_READ = ToolHints(read_only=True, idempotent=True)

ENTITY_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "store_memory",
        "Store memory",
        "Create a memory with automatic embedding and deduplication; associate named entities (created if missing).",
        StoreMemoryInput,
        store_memory,
        StoredMemory,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "recall_memories",
        "Recall memories",
        "Search memories (keyword, semantic, hybrid or graph) with type, tag, confidence and entity filters.",
        RecallMemoriesInput,
        recall_memories,
        MemoryHits,
        ToolHints(read_only=True),
    ),
    ToolSpec(
        "create_entities",
        "Create entities",
        "Create named entities (people, projects, technologies, …); an existing name is returned, not duplicated.",
        CreateEntitiesInput,
        create_entities,
        EntitiesOut,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "create_relations",
        "Create relations",
        "Connect entities by name with typed, weighted relations; missing entities are created with type unknown.",
        CreateRelationsInput,
        create_relations,
        RelationsOut,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "delete_memories",
        "Delete memories",
        "Delete memories by id, or all that match every given filter (date, confidence, types).",
        DeleteMemoriesInput,
        delete_memories,
        DeletedMemories,
        ToolHints(destructive=True, idempotent=True),
    ),
    ToolSpec(
        "delete_entities",
        "Delete entities",
        "Delete entities and their relations; their memories too only with cascade_memories.",
        DeleteEntitiesInput,
        delete_entities,
        DeletedEntities,
        ToolHints(destructive=True, idempotent=True),
    ),
    ToolSpec(
        "delete_relations",
        "Delete relations",
        "Delete relations given by source, target and relation_type.",
        DeleteRelationsInput,
        delete_relations,
        DeletedRelations,
        ToolHints(destructive=True, idempotent=True),
    ),
    ToolSpec(
        "get_entity_graph",
        "Entity graph",
        "The subgraph around an entity: entities, relations and (optionally) their memories, to a depth.",
        GetEntityGraphInput,
        get_entity_graph,
        EntityGraph,
        _READ,
    ),
    ToolSpec(
        "consolidate_memories",
        "Consolidate memories",
        "Merge clusters of near-identical memories (dry_run previews); the absorbed text stays in the version trail.",
        ConsolidateMemoriesInput,
        consolidate_memories,
        ConsolidationReport,
        ToolHints(destructive=True),
    ),
    ToolSpec(
        "get_memory_stats",
        "Memory statistics",
        "Counts of memories, entities and relations, types, average confidence, oldest and newest memory.",
        GetMemoryStatsInput,
        get_memory_stats,
        MemoryStats001,
        _READ,
    ),
)
