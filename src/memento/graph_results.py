"""The typed results of seed 001's face (its ten tools and the REST API), snake_case on the wire
as 001 writes them (the 000 face's results are camelCase: memento.results)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ConfigDict

from .graph import Entity, Relation
from .models import Fragment, FragmentType
from .results import COVERAGE, NO_GOOD_MATCH, Omitted, Result


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class SeedResult(Result):
    """A 001 result: field names as written (snake_case)."""

    model_config = ConfigDict(alias_generator=None, populate_by_name=True, serialize_by_alias=True, extra="forbid", frozen=True)


class MemoryOut(SeedResult):
    """One memory as 001 shows it (§2.1), with its effective confidence (§4.4)."""

    id: str
    content: str
    memory_type: FragmentType
    topic: str
    tags: list[str]
    confidence: float
    effective_confidence: float
    importance: float
    source: str | None
    context: str | None
    metadata: dict[str, Any]
    access_count: int
    last_accessed_at: str | None
    created_at: str
    has_embedding: bool
    entities: list[str] | None = Omitted(description="Names of the associated entities.")
    detail: str | None = Omitted(description="The full text when content was cut at 300 characters.")

    @classmethod
    def of(cls, f: Fragment, effective: float, entities: list[str] | None = None) -> MemoryOut:
        return cls(
            id=f.id,
            content=f.content,
            memory_type=f.type,
            topic=f.topic,
            tags=list(f.tags),
            confidence=round(f.confidence, 4),
            effective_confidence=round(effective, 4),
            importance=f.importance,
            source=f.source,
            context=f.context,
            metadata=dict(f.metadata),
            access_count=f.access_count,
            last_accessed_at=iso(f.accessed_at),
            created_at=f.created_at.isoformat(),
            has_embedding=f.has_embedding,
            entities=entities,
            detail=f.detail,
        )


class EntityOut(SeedResult):
    id: str
    name: str
    entity_type: str
    description: str | None
    metadata: dict[str, Any]
    has_embedding: bool
    created_at: str
    updated_at: str
    created: bool | None = Omitted(description="In create results: false when the entity already existed.")

    @classmethod
    def of(cls, e: Entity, created: bool | None = None) -> EntityOut:
        return cls(
            id=e.id,
            name=e.name,
            entity_type=e.entity_type,
            description=e.description,
            metadata=dict(e.metadata),
            has_embedding=e.has_embedding,
            created_at=e.created_at.isoformat(),
            updated_at=e.updated_at.isoformat(),
            created=created,
        )


class RelationOut(SeedResult):
    id: str
    source: str
    target: str
    source_id: str
    target_id: str
    relation_type: str
    strength: float
    confidence: float
    context: str | None
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    created: bool | None = Omitted(description="In create results: false when an existing relation was updated.")

    @classmethod
    def of(cls, r: Relation, created: bool | None = None) -> RelationOut:
        return cls(
            id=r.id,
            source=r.source_name,
            target=r.target_name,
            source_id=r.source_id,
            target_id=r.target_id,
            relation_type=r.relation_type,
            strength=r.strength,
            confidence=r.confidence,
            context=r.context,
            metadata=dict(r.metadata),
            created_at=r.created_at.isoformat(),
            updated_at=r.updated_at.isoformat(),
            created=created,
        )


class StoredMemory(SeedResult):
    """store_memory: the memory (new, or the existing one a duplicate was merged into)."""

    memory: MemoryOut
    created: bool
    duplicate: str | None = Omitted(description="exact | near: the memory already existed (near: merged into it).")
    entities: list[EntityOut]
    message: str | None = Omitted()


class MemoryHit(SeedResult):
    memory: MemoryOut
    score: float
    keyword_score: float | None = Omitted()
    semantic_score: float | None = Omitted()
    graph_score: float | None = Omitted()
    why: str


class MemoryHits(SeedResult):
    """recall_memories and REST search: scored memories, best first."""

    results: list[MemoryHit]
    total: int
    limit: int
    offset: int
    search_mode: str
    coverage: float | None = Omitted(description=COVERAGE)
    no_good_match: bool | None = Omitted(description=NO_GOOD_MATCH)


class MemoryPage(SeedResult):
    items: list[MemoryOut]
    total: int
    limit: int
    offset: int


class DeletedMemories(SeedResult):
    deleted: list[str]
    count: int
    kept: list[str] | None = Omitted(description="Matching memories kept: pinned (by filter) or not yours to change.")
    message: str | None = Omitted()


class EntitiesOut(SeedResult):
    entities: list[EntityOut]
    created: int


class EntityDetail(SeedResult):
    entity: EntityOut
    relations: list[RelationOut]
    memory_count: int


class EntityPage(SeedResult):
    items: list[EntityOut]
    total: int
    limit: int
    offset: int


class DeletedEntities(SeedResult):
    deleted: list[str]
    deleted_memories: list[str]
    not_found: list[str] | None = Omitted()


class RelationsOut(SeedResult):
    relations: list[RelationOut]
    created: int
    entities_created: list[EntityOut]


class RelationPage(SeedResult):
    items: list[RelationOut]
    total: int
    limit: int
    offset: int


class DeletedRelations(SeedResult):
    deleted: list[str]
    not_found: list[dict[str, str]] | None = Omitted()


class GraphNode(SeedResult):
    entity: EntityOut
    depth: int
    score: float  # best path: product of strength x confidence of its relations from the center
    memories: list[MemoryOut] | None = Omitted()


class EntityGraph(SeedResult):
    center: str
    depth: int
    nodes: list[GraphNode]
    edges: list[RelationOut]


class MergeCluster(SeedResult):
    primary_id: str
    absorbed_ids: list[str]
    min_similarity: float


class ConsolidationReport(SeedResult):
    clusters_found: int
    memories_merged: int
    memories_deleted: int
    dry_run: bool
    similarity_threshold: float
    clusters: list[MergeCluster]
    memories_pruned: int = 0


class MemoryStats001(SeedResult):
    """001 §7.2.10, field for field."""

    total_memories: int
    total_entities: int
    total_relations: int
    memories_by_type: dict[str, int]
    average_confidence: float | None
    oldest_memory: str | None
    newest_memory: str | None
    low_confidence_count: int
