"""The typed inputs of seed 001's ten tools (§7.2) and of the REST routes built on them, with the
parameter names, defaults and limits the seed writes (snake_case, as 001 spells them)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, Strict, StrictBool, StringConstraints, field_validator, model_validator

from .fields import MAX_LIST_ITEMS, AgentId, Content, FragmentId, OperationInput, ShortText, Tag, Topic, Unit, aware, non_blank, small_json
from .graph import DEFAULT_RELATION_CONFIDENCE, DEFAULT_STRENGTH, SearchMode
from .models import FragmentType, MemorySystem, TTLTier

EntityName = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
EntityType = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, to_lower=True, min_length=1, max_length=100)]
RelationTypeName = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, to_lower=True, min_length=1, max_length=100)]
Limit = Annotated[int, Strict(), Field(ge=1, le=100)]
Offset = Annotated[int, Strict(), Field(ge=0, le=1_000_000)]
AGENT = "Agent namespace (narrows a credential, never widens it)."


class StoreMemoryInput(OperationInput):
    """001 §7.2.1: create a memory with automatic embedding and deduplication."""

    content: Content = Field(description="Memory content text.")
    memory_type: FragmentType = Field(default=FragmentType.OBSERVATION, description="One of the memory types.")
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_LIST_ITEMS, description="Classification tags.")
    confidence: Unit = Field(default=1.0, description="Initial confidence [0-1].")
    source: ShortText | None = Field(default=None, description="Origin identifier.")
    context: ShortText | None = Field(default=None, description="Surrounding context.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Arbitrary metadata.")
    entity_names: list[EntityName] = Field(default_factory=list, max_length=MAX_LIST_ITEMS, description="Associate with named entities.")
    topic: Topic | None = Field(default=None, description="Topic (default: the memory type).")
    agent_id: AgentId | None = Field(default=None, description=AGENT)

    _content_not_blank = field_validator("content")(non_blank)
    _json_small = field_validator("metadata")(small_json)


class SearchFilters(OperationInput):
    """001 §5.6: filters every search mode (and a listing) applies."""

    memory_types: list[FragmentType] | None = Field(default=None, max_length=len(FragmentType), description="Filter by memory type.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Must contain all specified tags.")
    min_confidence: Unit | None = Field(default=None, description="Minimum effective confidence.")
    after_date: datetime | None = Field(default=None, strict=False, description="Created after this date.")
    before_date: datetime | None = Field(default=None, strict=False, description="Created before this date.")
    entity_id: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=64)] | None = Field(
        default=None, description="Associated with this entity."
    )
    source: ShortText | None = Field(default=None, description="Originating source.")
    memory_system: MemorySystem | None = Field(default=None, description="Only this memory system.")
    topic: Topic | None = Field(default=None, description="Only this topic.")
    tier: TTLTier | None = Field(default=None, description="Only this TTL tier: hot, warm, cold or permanent.")
    pinned: StrictBool | None = Field(default=None, description="Only pinned (true) or only unpinned (false) memories.")

    _times_aware = field_validator("after_date", "before_date")(aware)


class RecallMemoriesInput(OperationInput):
    """001 §7.2.2: search for relevant memories."""

    query: Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)] = Field(
        description="Search query."
    )
    search_mode: SearchMode = Field(default=SearchMode.HYBRID, description="keyword, semantic, hybrid, graph.")
    memory_types: list[FragmentType] | None = Field(default=None, max_length=len(FragmentType), description="Filter by types.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Filter by tags (all of them).")
    min_confidence: Unit = Field(default=0.1, description="Minimum effective confidence.")
    limit: Limit = Field(default=20, description="Max results (at most 100).")
    offset: Offset = Field(default=0, description="Skip this many results (pagination).")
    entity_name: EntityName | None = Field(default=None, description="Filter by entity association.")
    after_date: datetime | None = Field(default=None, strict=False, description="Created after this date.")
    before_date: datetime | None = Field(default=None, strict=False, description="Created before this date.")
    source: ShortText | None = Field(default=None, description="Originating source.")
    depth: Annotated[int, Strict(), Field(ge=1, le=3)] = Field(default=1, description="Hops from the named entities (graph mode).")
    memory_system: MemorySystem | None = Field(
        default=None, description="Only this memory system: working, episodic, semantic, procedural."
    )
    agent_id: AgentId | None = Field(default=None, description=AGENT)

    _times_aware = field_validator("after_date", "before_date")(aware)


class EntityInput(OperationInput):
    name: EntityName = Field(description="Entity name (unique per agent).")
    entity_type: EntityType = Field(description="person, organization, project, concept, location, technology, event, …")
    description: ShortText | None = Field(default=None, description="What it is.")
    metadata: dict[str, Any] | None = Field(default=None, description="Arbitrary metadata.")

    _json_small = field_validator("metadata")(small_json)


class CreateEntitiesInput(OperationInput):
    """001 §7.2.3: create named entities (deduplicated by name)."""

    entities: list[EntityInput] = Field(min_length=1, max_length=MAX_LIST_ITEMS, description="Entities to create.")
    agent_id: AgentId | None = Field(default=None, description=AGENT)


class RelationInput(OperationInput):
    source: EntityName = Field(description="Source entity name.")
    target: EntityName = Field(description="Target entity name.")
    relation_type: RelationTypeName = Field(description="works_at, manages, uses, depends_on, related_to, …")
    strength: Unit = Field(default=DEFAULT_STRENGTH, description="0-1.")
    confidence: Unit = Field(default=DEFAULT_RELATION_CONFIDENCE, description="0-1.")
    context: ShortText | None = Field(default=None, description="Where it was learned.")


class CreateRelationsInput(OperationInput):
    """001 §7.2.4: typed connections between entities (missing entities are created as `unknown`)."""

    relations: list[RelationInput] = Field(min_length=1, max_length=MAX_LIST_ITEMS, description="Relations to create.")
    agent_id: AgentId | None = Field(default=None, description=AGENT)


class DeleteMemoriesInput(OperationInput):
    """001 §7.2.5: delete memories by id or by filter (filters combine: all must hold)."""

    memory_ids: list[FragmentId] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Specific memory IDs to delete.")
    before_date: datetime | None = Field(default=None, strict=False, description="Delete all memories before this date.")
    min_confidence_below: Unit | None = Field(default=None, description="Delete all with effective confidence below this.")
    memory_types: list[FragmentType] | None = Field(default=None, max_length=len(FragmentType), description="Delete all of these types.")
    agent_id: AgentId | None = Field(default=None, description=AGENT)

    _times_aware = field_validator("before_date")(aware)

    @model_validator(mode="after")
    def _one_filter(self) -> DeleteMemoriesInput:
        if not self.memory_ids and self.before_date is None and self.min_confidence_below is None and not self.memory_types:
            raise ValueError("give at least one of memory_ids, before_date, min_confidence_below, memory_types")
        return self


class DeleteEntitiesInput(OperationInput):
    """001 §7.2.6: delete entities (their relations go too) and optionally their memories."""

    entity_names: list[EntityName] = Field(min_length=1, max_length=MAX_LIST_ITEMS, description="Names of entities to delete.")
    cascade_memories: StrictBool = Field(default=False, description="Also delete associated memories.")
    agent_id: AgentId | None = Field(default=None, description=AGENT)


class RelationKey(OperationInput):
    source: EntityName = Field(description="Source entity name.")
    target: EntityName = Field(description="Target entity name.")
    relation_type: RelationTypeName = Field(description="Relation type.")


class DeleteRelationsInput(OperationInput):
    """001 §7.2.7: delete specific relations."""

    relations: list[RelationKey] = Field(min_length=1, max_length=MAX_LIST_ITEMS, description="Relations to delete.")
    agent_id: AgentId | None = Field(default=None, description=AGENT)


class GetEntityGraphInput(OperationInput):
    """001 §7.2.8: the subgraph around an entity."""

    entity_name: EntityName = Field(description="Center entity.")
    depth: Annotated[int, Strict(), Field(ge=1, le=5)] = Field(default=1, description="Hop count for traversal.")
    min_strength: Unit = Field(default=0.0, description="Minimum relation strength.")
    include_memories: StrictBool = Field(default=True, description="Include associated memories.")
    agent_id: AgentId | None = Field(default=None, description=AGENT)


class ConsolidateMemoriesInput(OperationInput):
    """001 §7.2.9: merge clusters of near-identical memories now."""

    similarity_threshold: Unit | None = Field(default=None, description="Clustering threshold (default 0.85).")
    dry_run: StrictBool = Field(default=False, description="Preview without applying.")
    agent_id: AgentId | None = Field(default=None, description=AGENT)


class GetMemoryStatsInput(OperationInput):
    """001 §7.2.10: analytics about the memory store."""

    agent_id: AgentId | None = Field(default=None, description=AGENT)


class UpdateMemoryInput(OperationInput):
    """PUT /api/memories/{id}: the fields to change (omitted ones stay)."""

    content: Content | None = Field(default=None, description="New content (re-embedded).")
    memory_type: FragmentType | None = Field(default=None, description="New type.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="New tags.")
    confidence: Unit | None = Field(default=None, description="New confidence.")
    importance: Unit | None = Field(default=None, description="New importance.")
    context: ShortText | None = Field(default=None, description="New context.")
    metadata: dict[str, Any] | None = Field(default=None, description="New metadata (replaces).")
    entity_names: list[EntityName] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Also associate these entities.")

    _content_not_blank = field_validator("content")(non_blank)
    _json_small = field_validator("metadata")(small_json)


class UpdateEntityInput(OperationInput):
    """PUT /api/entities/{id}."""

    name: EntityName | None = Field(default=None, description="New name.")
    entity_type: EntityType | None = Field(default=None, description="New type.")
    description: ShortText | None = Field(default=None, description="New description.")
    metadata: dict[str, Any] | None = Field(default=None, description="New metadata (replaces).")

    _json_small = field_validator("metadata")(small_json)


class CreateRelationInput(RelationInput):
    """POST /api/relations: one relation."""

    metadata: dict[str, Any] | None = Field(default=None, description="Arbitrary metadata.")

    _json_small = field_validator("metadata")(small_json)
