"""What the REST routes need of the entity face's service (memento.entity_service.EntityService
provides it): 001's operations, each taking the caller's CallContext and raising memento.errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..graph import SearchMode
from ..graph_inputs import (
    ConsolidateMemoriesInput,
    CreateEntitiesInput,
    CreateRelationInput,
    DeleteMemoriesInput,
    SearchFilters,
    StoreMemoryInput,
    UpdateEntityInput,
    UpdateMemoryInput,
)
from ..graph_results import (
    ConsolidationReport,
    DeletedEntities,
    DeletedMemories,
    DeletedRelations,
    EntitiesOut,
    EntityDetail,
    EntityGraph,
    EntityOut,
    EntityPage,
    MemoryHits,
    MemoryOut,
    MemoryPage,
    RelationPage,
    RelationsOut,
    StoredMemory,
)
from ..models import CallContext


class EntityApi(Protocol):
    def store_memory(self, inp: StoreMemoryInput, ctx: CallContext) -> StoredMemory: ...
    def search(self, query: str, mode: SearchMode, filters: SearchFilters, limit: int, offset: int, ctx: CallContext) -> MemoryHits: ...
    def get_memory(self, memory_id: str, ctx: CallContext) -> MemoryOut: ...
    def list_memories(self, filters: SearchFilters, limit: int, offset: int, ctx: CallContext) -> MemoryPage: ...
    def update_memory(self, memory_id: str, inp: UpdateMemoryInput, ctx: CallContext) -> MemoryOut: ...
    def delete_memories(self, inp: DeleteMemoriesInput, ctx: CallContext) -> DeletedMemories: ...
    def consolidate_memories(self, inp: ConsolidateMemoriesInput, ctx: CallContext) -> ConsolidationReport: ...
    def create_entities(self, inp: CreateEntitiesInput, ctx: CallContext) -> EntitiesOut: ...
    def get_entity(self, entity_id: str, ctx: CallContext) -> EntityDetail: ...
    def list_entities(self, entity_type: str | None, q: str | None, limit: int, offset: int, ctx: CallContext) -> EntityPage: ...
    def update_entity(self, entity_id: str, inp: UpdateEntityInput, ctx: CallContext) -> EntityOut: ...
    def delete_entity_ids(self, ids: Sequence[str], cascade_memories: bool, ctx: CallContext) -> DeletedEntities: ...
    def entity_memories(self, entity_id: str, limit: int, offset: int, ctx: CallContext) -> MemoryPage: ...
    def entity_graph_by_id(
        self, entity_id: str, depth: int, min_strength: float, include_memories: bool, ctx: CallContext
    ) -> EntityGraph: ...
    def create_relation(self, inp: CreateRelationInput, ctx: CallContext) -> RelationsOut: ...
    def list_relations(
        self, entity_id: str | None, relation_type: str | None, limit: int, offset: int, ctx: CallContext
    ) -> RelationPage: ...
    def delete_relation_ids(self, ids: Sequence[str], ctx: CallContext) -> DeletedRelations: ...
