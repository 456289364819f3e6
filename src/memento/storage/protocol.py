"""The Store protocol every backend implements, and the value objects it takes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from ..graph import Entity, EntityChanges, EntityLink, NewEntity, NewRelation, Relation, effective_confidence
from ..models import (
    AgentScope,
    Draft,
    FeedbackEvent,
    Fragment,
    FragmentType,
    Link,
    MemorySystem,
    PrivacyScope,
    RelationType,
    TTLTier,
    memory_system_for,
    privacy_for,
)
from .handles import SessionHandleStore
from .runs import ConsolidationRunStore
from .sequence import SequenceNeighbours
from .workmem import ItemChanges, ItemQuery, Section, WorkItem, WorkMemorySummary, WorkspaceRecord

if TYPE_CHECKING:  # records.py builds on SearchFilter (through sqlfilter.py)
    from .records import RecordQuery, RestoreOutcome


BreakdownField = Literal["ttl_tier", "memory_system", "pinned"]
"""The columns AnalyticsStore.field_counts may group by (a closed list: it names SQL columns)."""
BREAKDOWN_COLUMNS: dict[str, str] = {"ttl_tier": "f.ttl_tier", "memory_system": "f.memory_system", "pinned": "f.pinned"}


@dataclass(frozen=True)
class SearchFilter:
    """Restrictions applied at every retrieval tier."""

    topic: str | None = None
    type: FragmentType | None = None
    types: tuple[FragmentType, ...] | None = None
    session_id: str | None = None  # working memory of this session is visible too
    only_session: bool = False  # only the session's working memory
    all_sessions: bool = False  # the working memory of every session the scope sees, too (exports)
    tags_all: tuple[str, ...] = ()  # carries every one of these tags
    tags_any: tuple[str, ...] = ()  # carries at least one of these tags
    memory_system: MemorySystem | None = None
    memory_systems: tuple[MemorySystem, ...] | None = None  # 004 §5.1 filters.type: any of these
    # 001 §5.6
    created_after: datetime | None = None  # created strictly after
    created_before: datetime | None = None  # created strictly before
    source: str | None = None  # exactly this source
    entity_id: str | None = None  # associated with this entity (entity_memories)
    min_confidence: float | None = None  # effective confidence (graph.effective_confidence) at least this
    half_life_days: float = 30.0  # of the effective confidence min_confidence is measured on
    now: datetime | None = None  # the time effective confidence is measured at (None: the wall clock)
    # 002: keyed memories
    keyed: bool = False  # only keyed memories (memory_key set)
    memory_key: str | None = None  # only the memory of this key
    owner: str | None = None  # only this agent's own rows (not the shared pool it also sees)
    ttl_tier: TTLTier | None = None  # only this tier (the dashboard's filter)
    pinned: bool | None = None  # only pinned (True) or only unpinned (False) memories

    def matches(self, fragment: Fragment) -> bool:
        """This filter in Python, exactly as the stores apply it in SQL (for candidates found elsewhere)."""
        if self.only_session:
            if fragment.session_id != self.session_id:
                return False
        elif fragment.session_id is not None and fragment.session_id != self.session_id and not self.all_sessions:
            return False
        if self.topic is not None and fragment.topic != self.topic:
            return False
        if self.type is not None and fragment.type is not self.type:
            return False
        if self.types and fragment.type not in self.types:
            return False
        if self.memory_system is not None and fragment.memory_system is not self.memory_system:
            return False
        if self.memory_systems and fragment.memory_system not in self.memory_systems:
            return False
        tags = set(fragment.tags)
        if self.tags_all and not tags.issuperset(self.tags_all):
            return False
        if self.tags_any and tags.isdisjoint(self.tags_any):
            return False
        if self.created_after is not None and not fragment.created_at > self.created_after:
            return False
        if self.created_before is not None and not fragment.created_at < self.created_before:
            return False
        if self.source is not None and fragment.source != self.source:
            return False
        if (self.keyed or self.memory_key is not None) and fragment.memory_key is None:
            return False
        if self.memory_key is not None and fragment.memory_key != self.memory_key:
            return False
        if self.owner is not None and fragment.agent_id != self.owner:
            return False
        if self.ttl_tier is not None and fragment.ttl_tier is not self.ttl_tier:
            return False
        if self.pinned is not None and fragment.pinned is not self.pinned:
            return False
        if self.min_confidence is not None:
            now = self.now or datetime.now(UTC)
            eff = effective_confidence(fragment.confidence, fragment.created_at, fragment.accessed_at, now, self.half_life_days)
            if eff < self.min_confidence:
                return False
        return True  # entity_id is checked by the stores only (it needs the association table)


@dataclass(frozen=True)
class NewFragment:
    """A draft plus where it goes and its derived vector."""

    draft: Draft
    agent_id: str
    session_id: str | None = None
    embedding: np.ndarray | None = None
    linked_to: tuple[str, ...] = ()
    own_session: bool = False  # session_id is the caller's own MCP session, owned by it from the start

    @property
    def memory_system(self) -> MemorySystem:
        """The given memory system, else the one derived from the type and scope."""
        chosen = self.draft.record.memory_system
        return chosen or memory_system_for(self.draft.type, working=self.session_id is not None)


@dataclass(frozen=True)
class FragmentChanges:
    """Replacement values for amend; None leaves a field as it is."""

    content: str | None = None
    content_hash: str | None = None
    estimated_tokens: int | None = None
    topic: str | None = None
    keywords: list[str] | None = None
    type: FragmentType | None = None
    importance: float | None = None
    ttl_tier: TTLTier | None = None
    is_anchor: bool | None = None
    embedding: np.ndarray | None = None
    clear_embedding: bool = False
    tags: tuple[str, ...] | None = None
    confidence: float | None = None
    context: str | None = None
    metadata: dict[str, object] | None = None
    expires_at: datetime | None = None
    pinned: bool | None = None
    memory_system: MemorySystem | None = None
    privacy_scope: PrivacyScope | None = None
    origin_trace: dict[str, object] | None = None
    detail: str | None = None  # the full text of the new content when it was cut (with content only)
    client_embedding: bytes | None = None  # 002: the agent's new vector
    clear_client_embedding: bool = False  # 002: drop the agent's vector (an upsert without one)


@dataclass(frozen=True)
class VersionRecord:
    """A state archived in a fragment's version trail (fragment_versions): its own earlier state
    (amend) or the text of a memory merged into it (`note`: e.g. `merged:frag-…`)."""

    content: str
    topic: str
    keywords: tuple[str, ...]
    type: FragmentType
    importance: float
    amended_by: str
    confidence: float | None = None
    metadata: dict[str, object] | None = None
    tags: tuple[str, ...] | None = None
    note: str | None = None


# 001 §4.3: every access adds this much to a memory's stored confidence (capped at 1.0).
REINFORCEMENT = 0.1


@dataclass(frozen=True)
class Hit:
    """One retrieval result of a tier: a fragment id and that tier's score."""

    id: str
    score: float


@dataclass(frozen=True)
class RankFeatures:
    """What ranking needs of a candidate, without loading the whole fragment."""

    importance: float
    created_at: datetime
    accessed_at: datetime | None
    access_count: int = 0  # the score profile 004's usage


@dataclass(frozen=True)
class NewFeedback:
    """A feedback event on a fragment (004 §3 feedback_event), recorded as the caller's."""

    fragment_id: str
    event: FeedbackEvent
    score: float = 1.0
    note: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class FeedbackTally:
    """One fragment's feedback from the caller: how many events of each kind, and their summed scores."""

    counts: dict[str, int]
    scores: dict[str, float]


class ReadOnlySession(RuntimeError):
    """A write attempted inside Store.reading() (a programming error: the session is for reads)."""


class Store(Protocol):
    """Everything the service needs from persistence. Every method enforces `scope`."""

    embedding_model: str | None

    def close(self) -> None: ...
    def atomic(self) -> AbstractContextManager[None]:
        """One transaction around the store calls made inside it (on this thread): all or nothing."""
        ...

    def rehearsal(self) -> AbstractContextManager[None]:
        """One transaction around the store calls made inside it (on this thread), always rolled
        back: they run for real and read their own writes, and nothing is kept (a dry run)."""
        ...

    def reading(self, scope: AgentScope) -> AbstractContextManager[None]:
        """The store calls made inside it on this thread are `scope`'s reads, and may share one
        read-only transaction (PostgreSQL: one connection and no BEGIN/COMMIT per call). Each
        still sees the last commit, as it would alone. Not a unit of work (unit_of_work_open()
        stays False); a write inside fails and changes nothing. Inside atomic() or rehearsal(),
        it is that unit."""
        ...

    def unit_of_work_open(self) -> bool:
        """Whether this thread is inside atomic() or rehearsal(): then what it reads must be read
        on this thread (another thread's reads would not see the unit's own writes)."""
        ...

    # fragments
    def insert(self, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]: ...
    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]: ...
    def update(self, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime) -> Fragment: ...
    def supersede(
        self, scope: AgentScope, old_id: str, new: NewFragment, importance_factor: float, now: datetime
    ) -> tuple[Fragment, bool]: ...
    def find_by_topic(self, scope: AgentScope, topic: str) -> list[Fragment]: ...
    def delete(self, scope: AgentScope, ids: Sequence[str]) -> list[str]: ...
    def soft_delete(self, scope: AgentScope, ids: Sequence[str], now: datetime) -> list[str]:
        """Mark visible fragments deleted (004 soft forget): hidden from every read, restorable;
        their vectors go (a hidden memory must not crowd the nearest neighbours; restore re-embeds)."""
        ...

    def restore(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        """Undo a soft deletion; the ids that were restored."""
        ...

    def list_fragments(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]: ...
    def recent(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]: ...
    def page(self, scope: AgentScope, filt: SearchFilter, before_seq: int | None, limit: int) -> list[Fragment]: ...
    def topics(self, scope: AgentScope, prefix: str, limit: int) -> list[tuple[str, int]]: ...
    def ids_with_prefix(self, scope: AgentScope, prefix: str, limit: int) -> list[str]: ...
    def sequence_neighbours(
        self, scope: AgentScope, ids: Sequence[str], filt: SearchFilter, window: timedelta, steps: int = 1
    ) -> dict[str, SequenceNeighbours]:
        """For each of `ids` the caller sees, the nearest visible memory passing `filt` written
        before and after it in the same conversation: same namespace, topic and session, created
        within `window` of it (storage/sequence.py); recall's conversational context. With
        `steps=2`, in the same statement, also the entry of each memory those entries name, as
        asking for it would give it (two memories each way in one read)."""
        ...

    def rank_features(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, RankFeatures]: ...
    def count(self, scope: AgentScope, filt: SearchFilter, at_most: int | None = None) -> int:
        """Live memories of `scope` that pass `filt`; with `at_most`, counting stops there (a
        check against a threshold reads no more rows than the threshold)."""
        ...

    def expunge_session(self, session_id: str, agent_id: str) -> int: ...
    def session_owners(self, session_id: str) -> list[str]: ...
    def session_tokens(self, agent_id: str, session_id: str) -> int:
        """The estimated tokens of the working memory `agent_id` keeps under `session_id` (live,
        unkeyed rows: 004's wm_buffer budget); one aggregate over the session index."""
        ...

    def flush_access(self) -> None: ...

    # links
    def add_link(self, scope: AgentScope, from_id: str, to_id: str, relation: RelationType, now: datetime) -> bool: ...
    def neighbours(
        self, scope: AgentScope, ids: Sequence[str], relations: Sequence[RelationType], limit: int
    ) -> list[tuple[Link, Fragment]]: ...
    def versions(self, scope: AgentScope, fragment_id: str) -> list[dict[str, object]]: ...
    def merged_into(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, str]:
        """{id: the visible memory that absorbed it} for those of `ids` a merge took away (their
        text is in that memory's version trail; storage/merged.py); the others are left out."""
        ...

    def hidden_states(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, tuple[datetime | None, datetime | None]]:
        """{id: (forgotten at, expires at)} for those of `ids` that are rows the scope's agents own in
        any state, live, soft-forgotten or expired (a pinned row has no expiry); the others, never
        stored or deleted for good, are left out. At most ten ids are looked at."""
        ...

    def add_version(self, scope: AgentScope, fragment_id: str, version: VersionRecord, now: datetime) -> int:
        """Archive `version` in the trail of a fragment the scope may change (001 §2.5: what a merge
        absorbed); the new version row's id."""
        ...

    # retrieval tiers
    def keyword_search(self, scope: AgentScope, keywords: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]: ...
    def text_search(self, scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]: ...
    def text_scores(self, scope: AgentScope, terms: Sequence[str], ids: Sequence[str]) -> dict[str, float]:
        """The full-text tier's scores of these visible fragments for `terms`, weighed as
        `text_search` weighs them; fragments holding none of the terms are left out."""
        ...

    def vector_search(self, scope: AgentScope, vector: np.ndarray, filt: SearchFilter, limit: int) -> list[Hit]: ...
    def record_access(self, ids: Sequence[str], at: datetime) -> None: ...

    # embeddings
    def set_embedding(self, fragment_id: str, vector: np.ndarray) -> None: ...
    def missing_embeddings(self, scope: AgentScope, limit: int, after_seq: int = 0) -> list[tuple[int, str, str]]: ...

    # feedback and statistics
    def add_tool_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int: ...
    def add_task_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int: ...
    def stats(self, scope: AgentScope) -> dict[str, object]: ...

    # 004: feedback on memories, and what the score profile 004 reads
    def add_feedback(self, scope: AgentScope, new: NewFeedback, now: datetime) -> int:
        """Record feedback on a fragment the scope sees (NotFound otherwise) as a row of the scope's
        agent, in one transaction; the row's id."""
        ...

    def feedback_tallies(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, FeedbackTally]:
        """The scope's own feedback on these visible fragments (those that have any); the
        maintenance scope's is every agent's."""
        ...

    def feedback_counts(self, scope: AgentScope) -> dict[str, int]:
        """The scope's own feedback events on the fragments it sees, by kind."""
        ...

    def embeddings_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors (the current embedding model's) of these visible fragments."""
        ...

    def recent_embeddings(self, scope: AgentScope, limit: int) -> list[tuple[str, np.ndarray]]:
        """(id, stored vector) of the `limit` newest visible fragments that have one of the current
        model, working memory and keyed memories apart; newest first (001 §6.2 merging)."""
        ...


class EntityStore(Protocol):
    """The entity graph of 001 §2.2-§2.4. Entities, relations and associations belong to one
    agent: every method sees and changes only rows of `scope.agent_id` (all agents for the
    maintenance scope), and an association needs a fragment the scope can see."""

    def upsert_entities(self, scope: AgentScope, entities: Sequence[NewEntity], now: datetime) -> list[tuple[Entity, bool]]:
        """Create each entity, or return the agent's entity of that name (True: created). An
        existing entity of type `unknown` takes the given type; a given description, metadata (merged
        shallowly) and embedding replace the stored ones."""
        ...

    def get_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[Entity]: ...
    def entities_named(self, scope: AgentScope, names: Sequence[str]) -> list[Entity]:
        """The agent's entities with these names (compared case-insensitively)."""
        ...

    def list_entities(
        self, scope: AgentScope, *, entity_type: str | None, name_contains: str | None, limit: int, offset: int
    ) -> tuple[list[Entity], int]:
        """A page of entities by name, and how many match in all."""
        ...

    def update_entity(self, scope: AgentScope, entity_id: str, changes: EntityChanges, now: datetime) -> Entity:
        """NotFound when the scope has no such entity; Conflict when the new name is taken."""
        ...

    def delete_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        """Delete entities, their relations and associations (never the memories); the ids deleted."""
        ...

    def entity_vectors(self, scope: AgentScope) -> list[tuple[str, np.ndarray]]:
        """Every entity of the scope that has an embedding, with it (entity lookup by meaning)."""
        ...

    def upsert_relations(self, scope: AgentScope, relations: Sequence[NewRelation], now: datetime) -> list[tuple[Relation, bool]]:
        """Create relations between the scope's entities, or update the stored one with the same
        (source, target, type) (True: created). NotFound for an entity the scope does not have."""
        ...

    def get_relations(self, scope: AgentScope, ids: Sequence[str]) -> list[Relation]: ...
    def list_relations(
        self, scope: AgentScope, *, entity_id: str | None, relation_type: str | None, limit: int, offset: int
    ) -> tuple[list[Relation], int]:
        """A page of relations (touching `entity_id` at either end when given), and the total."""
        ...

    def relations_of(self, scope: AgentScope, entity_ids: Sequence[str], min_strength: float) -> list[Relation]:
        """Outgoing and incoming relations of these entities with strength >= min_strength."""
        ...

    def delete_relations(self, scope: AgentScope, ids: Sequence[str]) -> list[str]: ...
    def link_entities(self, scope: AgentScope, links: Sequence[tuple[str, str, float]], now: datetime) -> int:
        """Associate (entity_id, fragment_id, relevance) triples; a repeated pair keeps the higher
        relevance. NotFound for an entity or fragment the scope cannot see. How many were new."""
        ...

    def entity_links(self, scope: AgentScope, *, entity_ids: Sequence[str] = (), fragment_ids: Sequence[str] = ()) -> list[EntityLink]:
        """The associations of these entities or of these fragments (live fragments only)."""
        ...

    def move_entity_links(self, scope: AgentScope, from_fragment: str, to_fragment: str, now: datetime) -> int:
        """Reassign the associations of one fragment to another (a merge, 001 §6.2 e)."""
        ...

    def graph_counts(self, scope: AgentScope) -> dict[str, int]:
        """{"entities": n, "relations": n, "links": n} of the scope."""
        ...


class MaintenanceStore(Protocol):
    """The primitives of the consolidation pipeline (000 §8). Each stage returns the ids of the
    fragments it changed (removed links as `from_id>to_id`), so a run can say what it did."""

    def demote(
        self,
        scope: AgentScope,
        from_tier: TTLTier,
        to_tier: TTLTier,
        created_before: datetime,
        accessed_before: datetime | None,
        now: datetime | None = None,
    ) -> list[str]:
        """Move fragments in `from_tier` since before `created_before` (and unused since
        `accessed_before`) to `to_tier`; they enter it at `now`. One step per run."""
        ...

    def expire_cold(self, scope: AgentScope, type_: str | None, exclude_types: Sequence[str], stale_before: datetime) -> list[str]: ...
    def decay_importance(
        self, scope: AgentScope, factor: float, max_access: int, max_utility: float, older_than: datetime
    ) -> list[str]: ...
    def prune_low_confidence(
        self, scope: AgentScope, threshold: float, half_life_days: float, now: datetime, *, archive: bool
    ) -> list[str]:
        """001 §4.5: memories below `threshold` effective confidence, the decay counted from the latest of
        creation, last access and tier entry (hot, permanent, pinned, anchored and working memory
        apart), soft-deleted (`archive`) or deleted; their ids."""
        ...

    def deduplicate(self, scope: AgentScope) -> list[str]: ...
    def contradictions(self, scope: AgentScope) -> list[tuple[str, str]]: ...
    def prune_orphan_links(self, scope: AgentScope) -> list[str]: ...
    def recompute_utility(self, scope: AgentScope, now: datetime, half_life_days: float) -> list[str]: ...
    def expire_sessions(self, idle_before: datetime) -> list[str]: ...
    def idle_sessions(self, idle_before: datetime) -> list[tuple[str, str]]:
        """(agent_id, session_id) of every session whose newest working-memory row is older than
        `idle_before`: the sessions `expire_sessions` would expunge, grouped the same way."""
        ...

    def purge_forgotten(self, scope: AgentScope, deleted_before: datetime) -> list[str]:
        """004 §4.2: delete for good the soft-deleted memories (forget mode=soft, archived by the
        confidence prune) whose deletion is older than `deleted_before`; their ids."""
        ...

    def expire_retention(self, scope: AgentScope, unused_since: Mapping[MemorySystem, datetime], now: datetime) -> list[str]:
        """004 §4.2: soft-delete (at `now`, restorable) the memories of each system in `unused_since`
        whose latest of creation and last access is before its cutoff; pinned, anchored, keyed and
        permanent-tier memories are kept. One statement; their ids."""
        ...


# The tables a whole-store copy (`memento migrate`) moves, parents first, and the column each is
# paged by: fragments by their insertion counter, the others by their own id (which is kept).
BULK_TABLES: tuple[str, ...] = (
    "fragments",
    "fragment_links",
    "fragment_versions",
    "tool_feedback",
    "task_feedback",
    "entities",
    "relations",
    "entity_memories",
    "feedback_events",
    "memory_linkages",
    "skip_list",
    "identity_snapshots",
    "workspaces",
    "working_memory_sections",
    "working_memory_items",
)
BULK_KEYS: dict[str, str] = {
    "fragments": "seq",
    "fragment_links": "id",
    "fragment_versions": "id",
    "tool_feedback": "id",
    "task_feedback": "id",
    "entities": "seq",
    "relations": "seq",
    "entity_memories": "seq",
    "feedback_events": "id",
    "memory_linkages": "id",
    "skip_list": "seq",
    "identity_snapshots": "seq",
    "workspaces": "seq",
    "working_memory_sections": "seq",
    "working_memory_items": "seq",
}
# The columns copied, the same on every backend (fragments add seq, embedding, embedding_model).
BULK_COLUMNS: dict[str, tuple[str, ...]] = {
    "fragments": (
        "id",
        "content",
        "topic",
        "keywords",
        "type",
        "importance",
        "content_hash",
        "source",
        "linked_to",
        "agent_id",
        "access_count",
        "accessed_at",
        "created_at",
        "ttl_tier",
        "estimated_tokens",
        "utility_score",
        "verified_at",
        "is_anchor",
        "session_id",
        "confidence",
        "tags",
        "context",
        "metadata",
        "expires_at",
        "pinned",
        "memory_system",
        "privacy_scope",
        "origin_trace",
        "deleted_at",
        "tier_since",
        "detail",
        "memory_key",
        "client_embedding",
        "judged_utility",
    ),
    "fragment_links": ("id", "from_id", "to_id", "relation_type", "created_at"),
    "fragment_versions": (
        "id",
        "fragment_id",
        "content",
        "topic",
        "keywords",
        "type",
        "importance",
        "amended_at",
        "amended_by",
        "confidence",
        "metadata",
        "tags",
        "note",
    ),
    "tool_feedback": (
        "id",
        "agent_id",
        "tool_name",
        "relevant",
        "sufficient",
        "suggestion",
        "context",
        "session_id",
        "trigger_type",
        "created_at",
    ),
    "task_feedback": ("id", "agent_id", "session_id", "overall_success", "tool_highlights", "tool_pain_points", "created_at"),
    # entity embeddings are not copied: the target re-embeds (embedding_model may differ)
    "entities": ("id", "agent_id", "name", "entity_type", "description", "metadata", "created_at", "updated_at"),
    "relations": (
        "id",
        "agent_id",
        "source_id",
        "target_id",
        "relation_type",
        "strength",
        "confidence",
        "context",
        "metadata",
        "created_at",
        "updated_at",
    ),
    "entity_memories": ("agent_id", "entity_id", "fragment_id", "relevance", "created_at"),
    "feedback_events": ("id", "agent_id", "fragment_id", "event", "score", "note", "session_id", "created_at"),
    "memory_linkages": ("id", "agent_id", "fragment_id", "target_type", "memory_id", "item_id", "path", "label", "created_at"),
    # a skip entry's vector is not copied: it is embedded again when checked
    "skip_list": ("id", "agent_id", "item", "reason", "expires_at", "created_at"),
    "identity_snapshots": ("id", "agent_id", "crystal", "source", "source_count", "created_at"),
    "workspaces": ("agent_id", "name", "created_at"),
    "working_memory_sections": ("agent_id", "section", "content", "updated_at"),
    "working_memory_items": (
        "id",
        "agent_id",
        "category",
        "title",
        "content",
        "status",
        "priority",
        "tags",
        "next_action",
        "folded",
        "created_at",
        "updated_at",
    ),
}


# What an imported fragment row gets for a shared-record column it does not carry (a copy made by
# an older exporter); memory_system None is derived from the type by the importing store.
FRAGMENT_DEFAULTS: dict[str, object] = {"confidence": 1.0, "tags": [], "metadata": {}, "pinned": False, "privacy_scope": "private"}


# The shared-record columns a store writes on insert (deleted_at is set by soft_delete only), and
# tier_since: when the fragment entered its TTL tier (the lifecycle measures from it).
RECORD_COLUMNS: tuple[str, ...] = (
    "confidence",
    "tags",
    "context",
    "metadata",
    "expires_at",
    "pinned",
    "memory_system",
    "privacy_scope",
    "origin_trace",
    "tier_since",
    "detail",
    "memory_key",
    "client_embedding",
)


def new_record(new: NewFragment) -> dict[str, object]:
    """The RECORD_COLUMNS values of an insert, as plain Python values (each backend adapts them)."""
    r = new.draft.record
    return {
        "confidence": r.confidence,
        "tags": list(r.tags),
        "context": r.context,
        "metadata": dict(r.metadata),
        "expires_at": r.expires_at,
        "pinned": r.pinned,
        "memory_system": new.memory_system.value,
        "privacy_scope": privacy_for(new.agent_id, new.session_id, r.privacy_scope).value,
        "origin_trace": r.origin_trace,
        "tier_since": new.draft.entered_at or new.draft.created_at,
        "detail": r.detail,
        "memory_key": r.memory_key,
        "client_embedding": r.client_embedding,
    }


def changed_record(old: Fragment, c: FragmentChanges) -> dict[str, object]:
    """The record columns an amend may change: the change where given, else the old value."""
    return {
        "confidence": c.confidence if c.confidence is not None else old.confidence,
        "tags": list(c.tags if c.tags is not None else old.tags),
        "context": c.context if c.context is not None else old.context,
        "metadata": dict(c.metadata if c.metadata is not None else old.metadata),
        "expires_at": c.expires_at if c.expires_at is not None else old.expires_at,
        "pinned": c.pinned if c.pinned is not None else old.pinned,
        "memory_system": (c.memory_system or old.memory_system).value,
        "privacy_scope": (c.privacy_scope or old.privacy_scope).value,
        "origin_trace": c.origin_trace if c.origin_trace is not None else old.origin_trace,
        "detail": c.detail if c.content is not None else old.detail,  # new content brings its own (or none)
        "client_embedding": None if c.clear_client_embedding else (c.client_embedding or old.client_embedding),
    }


def archived(old: Fragment, amended_by: str) -> VersionRecord:
    """The version row an amend archives: the fragment's state before it."""
    return VersionRecord(
        content=old.content,
        topic=old.topic,
        keywords=tuple(old.keywords),
        type=old.type,
        importance=old.importance,
        amended_by=amended_by,
        confidence=old.confidence,
        metadata=dict(old.metadata),
        tags=tuple(old.tags),
    )


class BulkStore(Protocol):
    """Backend-neutral export and import of whole tables, for all agents (`memento migrate`).

    Rows are dicts of plain Python values: lists for arrays, bools, aware UTC datetimes, and for
    fragments `embedding` (a float32 vector or None) with `embedding_model`. A fragment row also
    carries the source's `seq` (the paging key), which import ignores. Import skips rows whose
    id (or unique key) is already present, so a copy can be resumed and repeated.
    """

    def close(self) -> None: ...
    def embedding_shapes(self) -> list[tuple[str, int]]: ...
    def count_rows(self, table: str) -> int: ...
    def export_rows(self, table: str, after: int, limit: int) -> list[dict[str, object]]: ...
    def import_rows(self, table: str, rows: Sequence[dict[str, object]]) -> int: ...
    def finish_import(self) -> None: ...


class RecordStore(Protocol):
    """An agent's whole records, read and restored losslessly (export format version 2; the
    tables and their owners: storage/records.py). Every method enforces `scope`: its own rows
    (every agent's for the maintenance scope)."""

    def record_owners(self, scope: AgentScope, query: RecordQuery) -> dict[str, int]:
        """Each agent with fragments the query exports, and how many."""
        ...

    def record_page(self, scope: AgentScope, table: str, query: RecordQuery, after: int, limit: int) -> list[dict[str, object]]:
        """Up to `limit` exported rows of `table` whose paging key (`_key` in each row) is above
        `after`, in key order; a fragment row carries its nested tables' rows (its `versions`)."""
        ...

    def restore_records(self, scope: AgentScope, records: Sequence[tuple[str, dict[str, object]]]) -> RestoreOutcome:
        """Write (table, row) records as they are, in one transaction: ids and fields kept, rows
        whose id (or unique key) is already stored skipped and reported, never overwritten.
        Forbidden, restoring nothing, for a row of an agent the scope may not write."""
        ...


class KeywordIndex(Protocol):
    """The L1 keyword index of 000 §4.1 (Redis): candidate ids by keyword intersection.

    It only proposes candidates; the service checks every id against the store. `lookup`
    answers None when the index cannot be used now (down, rebuilding, maintenance scope).
    """

    def lookup(self, scope: AgentScope, keywords: Sequence[str]) -> list[str] | None: ...
    def discard(self, ids: Sequence[str]) -> None: ...


# ---------------------------------------------------------------- capabilities beyond the service's needs


class Pingable(Protocol):
    def ping(self) -> None:
        """One real round trip to the database (health checks); raises when it cannot answer."""
        ...


class SizeReporter(Protocol):
    def size_summary(self) -> dict[str, Any]:
        """Fragments per TTL tier (working memory apart), working memory and agent count (metrics)."""
        ...


class Reindexable(Protocol):
    def clear_embeddings(self) -> int:
        """Drop every stored vector (`memento reindex`); returns how many."""
        ...

    def reanalyse_text(self, after_seq: int, limit: int) -> tuple[int, int]:
        """Write the full-text index entries of up to `limit` indexed fragments after `after_seq`
        (in seq order) again from their content, keywords and topic as the analyser reads them
        now, in one transaction (`memento reindex`: an index written by an older or faulty
        analyser is repaired). (How many were written, the last seq: 0 when none were left.)"""
        ...


class FeedbackReader(Protocol):
    def task_feedback(self, session_id: str) -> list[dict[str, object]]: ...
    def tool_feedback(self, feedback_id: int) -> dict[str, object] | None: ...


class MigrationLog(Protocol):
    def migrations(self) -> list[str]:
        """The names of the applied schema migrations, in order."""
        ...


GrowthPeriod = Literal["day", "week", "month"]


@dataclass(frozen=True)
class MemoryOverview:
    """001 §8.4 overview: counts and confidence of the memories a scope sees."""

    total_memories: int
    total_entities: int
    total_relations: int
    average_confidence: float | None  # stored confidence
    average_effective_confidence: float | None
    low_confidence_count: int  # effective confidence below the prune threshold
    oldest_memory: datetime | None
    newest_memory: datetime | None


class AnalyticsStore(Protocol):
    """001 §8.4: aggregates over the memories the scope sees (working memory apart) and its entity
    graph, computed in SQL. Effective confidence is measured at `now` (graph.effective_confidence)."""

    def memory_overview(self, scope: AgentScope, now: datetime, half_life_days: float, low_below: float) -> MemoryOverview: ...
    def memory_growth(self, scope: AgentScope, period: GrowthPeriod, limit: int) -> list[tuple[str, int]]:
        """New memories per period (`day`, `week` from Monday, `month`), as (first day ISO, count):
        the newest `limit` periods that have any, oldest first."""
        ...

    def type_counts(self, scope: AgentScope) -> dict[str, int]: ...
    def field_counts(self, scope: AgentScope, name: BreakdownField) -> dict[str, int]:
        """Memories (working memory apart) per value of `name`: `ttl_tier`, `memory_system` or
        `pinned` (its values "true" and "false"); values no memory has are left out."""
        ...

    def tag_counts(self, scope: AgentScope, limit: int, offset: int) -> tuple[list[tuple[str, int]], int]:
        """Tags by how many memories carry them (most first, then by name), and how many tags in all."""
        ...

    def confidence_histogram(self, scope: AgentScope, now: datetime, half_life_days: float, buckets: int) -> list[int]:
        """How many memories fall in each of `buckets` equal bins of effective confidence over [0, 1]
        (the last bin includes 1.0)."""
        ...


# ---------------------------------------------------------------- erasure (004 §5.1 forget mode=hard)


@dataclass(frozen=True)
class ErasedVersion:
    """A version row that holds text of an erased memory: its own trail, or text merged from it
    into another memory's trail (`fragment_id` is then that other memory)."""

    id: int
    fragment_id: str
    content: str
    merged_from: str | None = None  # the erased id whose text a merge archived here


@dataclass(frozen=True)
class ErasureTargets:
    """What one hard erasure removes, read inside its transaction."""

    fragments: tuple[Fragment, ...]
    versions: tuple[ErasedVersion, ...]
    derived: tuple[Fragment, ...]  # memories that name an erased one as their origin (the reference goes)

    @property
    def ids(self) -> list[str]:
        return [f.id for f in self.fragments]


@dataclass(frozen=True)
class StoredReceipt:
    """An erasure receipt as kept in `erasure_receipts` (migration 0009): the canonical JSON the
    caller got, its digest, and the tombstones verify_erasure and imports check against."""

    id: str
    agent_id: str
    erased_at: datetime
    receipt: str  # canonical JSON
    digest: str
    content_hashes: tuple[str, ...]
    memory_seqs: tuple[int, ...]


def strip_reference(value: Any, ids: Sequence[str]) -> Any:
    """`value` (JSON: metadata, an origin trace) without the strings that name any of `ids`,
    and without object entries or list items that held them."""
    if isinstance(value, str):
        return None if any(i in value for i in ids) else value
    if isinstance(value, list):
        kept = [strip_reference(v, ids) for v in value]
        return [v for v, old in zip(kept, value) if v is not None or old is None]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if any(i in k for i in ids):
                continue
            stripped = strip_reference(v, ids)
            if stripped is None and v is not None:
                continue
            out[k] = stripped
        return out
    return value


def names_any(fragment: Fragment, ids: Sequence[str]) -> bool:
    """Whether `fragment` names one of `ids` as its origin (source, origin trace or metadata)."""
    text = " ".join(
        [
            fragment.source or "",
            json.dumps(fragment.origin_trace or {}, ensure_ascii=False),
            json.dumps(fragment.metadata, ensure_ascii=False),
        ]
    )
    return any(i in text for i in ids)


class ErasureStore(Protocol):
    """004 §5.1 forget mode=hard: the text of memories gone from every place the store keeps it.

    `erasure_targets`, `erase` and `save_receipt` run inside one `atomic()` block (the service's);
    `scrub` runs after it committed and cleans what a transaction cannot (SQLite: FTS segments,
    free pages, the WAL, the saved vector index files; PostgreSQL: a VACUUM of the tables)."""

    def erasure_targets(self, scope: AgentScope, ids: Sequence[str], topic: str | None = None) -> ErasureTargets:
        """The fragments among `ids` (or of `topic`, when given) the scope sees, in any state
        (soft-deleted and expired ones too), the version rows holding their text (their
        trails, and text a merge archived from them into other memories, also for ids no longer
        stored), and the memories naming them as their origin."""
        ...

    def erase(self, scope: AgentScope, targets: ErasureTargets) -> dict[str, int]:
        """Delete the targets' rows, full-text entries, vectors, versions, links and entity links,
        and strip the references of the derived memories; counts per location."""
        ...

    def scrub(self, agents: Sequence[str]) -> dict[str, int]:
        """After commit: the physical clean-up of this backend; counts per step (0: not done)."""
        ...

    def save_receipt(self, receipt: StoredReceipt) -> None:
        """Store a receipt, or replace the one with its id (the final counts after `scrub`)."""
        ...

    def get_receipt(self, scope: AgentScope, receipt_id: str) -> StoredReceipt | None:
        """The scope's own receipt of that id (maintenance: anyone's)."""
        ...

    def erased_hashes(self, agent_id: str) -> set[str]:
        """The content hashes of everything erased in the agent's name (the tombstones)."""
        ...

    def erasure_residue(self, scope: AgentScope, receipt: StoredReceipt, ids: Sequence[str]) -> dict[str, int]:
        """What is left of an erasure, per place (rows, versions, fullText, vectors, contentHashes;
        every count 0 when nothing is): rows and index entries are looked for in every namespace,
        texts with an erased hash among the memories and versions the scope sees."""
        ...


# ---------------------------------------------------------------- 003 linkages (migration 0015)

LinkageKind = Literal["memory", "item", "file"]
LINKAGE_KINDS: tuple[LinkageKind, ...] = ("memory", "item", "file")


@dataclass(frozen=True)
class NewLinkage:
    """A linkage to store on a memory (003 "Linkages"): `target` is the memory's or the item's id,
    or the file's path."""

    kind: LinkageKind
    target: str
    label: str | None = None


@dataclass(frozen=True)
class Linkage:
    """A stored linkage of memory `fragment_id`."""

    fragment_id: str
    kind: LinkageKind
    target: str
    label: str | None
    created_at: datetime


class LinkageStore(Protocol):
    """Seed 003's linkages (`memory_linkages`, row-level security on PostgreSQL). A linkage belongs
    to the agent whose memory holds it: only that agent reads it (every agent's for the
    maintenance scope). Deleting either memory deletes it; soft-deleting hides it with its memory."""

    def add_linkages(self, scope: AgentScope, fragment_id: str, linkages: Sequence[NewLinkage], now: datetime) -> list[Linkage]:
        """Store linkages on a memory of the scope's own namespace (NotFound otherwise), in one
        transaction (joining the caller's): a memory target must be one the scope sees (NotFound
        naming it; nothing stored); a linkage the memory already has is not stored twice. The
        memory's linkages afterwards, in the order they were stored."""
        ...

    def linkages_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, list[Linkage]]:
        """The linkages of these visible memories that have any, in the order stored; one naming a
        memory the scope does not see (soft-deleted, expired, another namespace's) is left out."""
        ...

    def linkages_to(self, scope: AgentScope, ids: Sequence[str]) -> list[Linkage]:
        """The memory linkages that name any of these memories, held by visible memories whose
        linkages the scope reads."""


# ---------------------------------------------------------------- seed 003: the skip list and the identity crystal


@dataclass(frozen=True)
class NewSkip:
    """A skip-list entry to store in the scope's own namespace (never the shared pool's)."""

    id: str
    item: str
    reason: str
    expires_at: datetime
    embedding: np.ndarray | None = None  # the vector of "item. reason" by `embedding_model`
    embedding_model: str | None = None


@dataclass(frozen=True)
class StoredSkip:
    """A stored skip-list entry (its vector and that vector's model, when it has one)."""

    id: str
    agent_id: str
    item: str
    reason: str
    expires_at: datetime
    created_at: datetime
    embedding: np.ndarray | None = None
    embedding_model: str | None = None


@dataclass(frozen=True)
class StoredIdentity:
    """An identity crystal snapshot (`source`: manual or crystallized)."""

    id: str
    agent_id: str
    crystal: str
    source: str
    source_count: int
    created_at: datetime


class SkipStore(Protocol):
    """Seed 003's skip list: rows of exactly the scope's own namespace (`scope.agent_id`, the
    maintenance scope included), never another's nor the pool's. Expired entries (expires_at
    at or before `now`) are never returned; every write purges the namespace's expired rows in
    its own transaction."""

    def add_skip(self, scope: AgentScope, new: NewSkip, now: datetime) -> StoredSkip:
        """Store an entry (Conflict if its id is taken), purging the namespace's expired ones first."""
        ...

    def skip_entries(self, scope: AgentScope, now: datetime) -> list[StoredSkip]:
        """The namespace's unexpired entries, newest first."""
        ...

    def remove_skip(self, scope: AgentScope, skip_id: str, now: datetime) -> bool:
        """Delete the namespace's unexpired entry of that id (False: none), purging its expired ones."""
        ...


class IdentityStore(Protocol):
    """Seed 003's identity crystal: snapshots of exactly the scope's own namespace, every one kept."""

    def add_identity(self, scope: AgentScope, snapshot: StoredIdentity) -> StoredIdentity:
        """Store a snapshot as the scope's (its agent_id is the scope's); Conflict if its id is taken."""
        ...

    def identities(self, scope: AgentScope, limit: int) -> tuple[list[StoredIdentity], int]:
        """The namespace's newest `limit` snapshots, newest first, and how many it holds in all."""
        ...

    def drop_identities_quoting(self, scope: AgentScope, needles: Sequence[str]) -> int:
        """Delete the snapshots of the scope (every namespace's for the maintenance scope) whose
        crystal contains one of `needles` (a hard forget's erased text); how many."""
        ...


# ---------------------------------------------------------------- 004 §4.2 spaced review and the forget queue (migration 0018)


@dataclass(frozen=True)
class ReviewCard:
    """A memory's spaced-review card: due at `due_at`, `interval_days` after its last review."""

    fragment_id: str
    agent_id: str
    due_at: datetime
    interval_days: int
    reviews: int
    last_reviewed_at: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class ReviewTarget:
    """One of a namespace's most important live memories, and when it was last created or used."""

    agent_id: str
    fragment_id: str
    last_used: datetime


class ReviewStore(Protocol):
    """Seed 004 §4.2's spaced review (`memory_reviews`, row-level security on PostgreSQL) and the
    lifecycle's reads beside it. A card belongs to the agent whose memory it is: a scope reads and
    changes its own namespace's cards (every namespace's for the maintenance scope), never the
    shared pool's from another namespace."""

    def review_targets(self, scope: AgentScope, top: int) -> list[ReviewTarget]:
        """Each namespace's `top` most important live memories of its own (pinned first, then by
        importance × utility; working memory apart), per namespace in that order."""
        ...

    def review_cards(self, scope: AgentScope, due_before: datetime | None, limit: int) -> list[ReviewCard]:
        """The scope's own cards of live memories, due before `due_before` when given (all when
        None), the longest overdue first."""
        ...

    def put_reviews(self, scope: AgentScope, cards: Sequence[ReviewCard], drop: Sequence[str]) -> None:
        """Insert or replace these cards and delete the cards of the `drop` memories, in one
        transaction (joining the caller's); a card of a memory outside the scope's own namespaces
        is refused (NotFound, nothing changed)."""
        ...

    def derived_sources(self, scope: AgentScope, ids: Sequence[str]) -> set[str]:
        """Those of `ids` that some memory (live or soft-deleted) was derived from (a
        `derived_from` link to them): sleep consolidation has integrated them already."""
        ...

    def forget_candidates(self, scope: AgentScope, unused_before: datetime, below_utility: float, limit: int) -> list[Fragment]:
        """004 §4.2's soft-delete candidate queue: live memories of the scope's own namespaces with
        a utility below `below_utility`, unused (neither created nor accessed) since
        `unused_before`, neither pinned, anchored, keyed, permanent-tier nor working memory; the
        lowest utility, then the longest unused, first."""
        ...


# ---------------------------------------------------------------- 003 working memory (storage/workmem.py)


class WorkingMemoryStore(Protocol):
    """Seed 003's working memory: items, the legacy markdown sections and the workspace records.
    Every row belongs to exactly one namespace: each method reads and changes only rows of
    `scope.agent_id` (never the shared pool's, nor every agent's for the maintenance scope),
    except `list_workspaces`."""

    def add_item(self, scope: AgentScope, item: WorkItem) -> None:
        """Store a new item as the scope's (its `agent_id` is the scope's)."""
        ...

    def get_item(self, scope: AgentScope, item_id: str) -> WorkItem | None: ...
    def update_item(self, scope: AgentScope, item_id: str, changes: ItemChanges, now: datetime) -> WorkItem | None:
        """Apply `changes` to the scope's item in one transaction; the item as stored, None when the
        scope has no such item."""
        ...

    def delete_item(self, scope: AgentScope, item_id: str) -> bool:
        """Delete the scope's item; whether there was one."""
        ...

    def list_items(self, scope: AgentScope, query: ItemQuery) -> tuple[list[WorkItem], int]:
        """A page of the scope's items the query selects, in its order, and how many it selects in all."""
        ...

    def sections(self, scope: AgentScope) -> list[Section]:
        """The scope's sections in the order they were created."""
        ...

    def put_section(self, scope: AgentScope, section: str, content: str, now: datetime, max_sections: int) -> tuple[Section, bool]:
        """Replace a section's content, creating the section when missing (True: created); a new
        section beyond `max_sections` is refused (InvalidArgument), changing nothing."""
        ...

    def add_sections(self, scope: AgentScope, names: Sequence[str], now: datetime) -> int:
        """Create the named sections the scope lacks, empty; how many were new."""
        ...

    def open_workspace(self, scope: AgentScope, name: str, sections: Sequence[str], now: datetime) -> bool:
        """Create the scope's workspace record (named `name`) and its sections, in one transaction,
        unless the record exists (then nothing changes); whether this call created it. Two callers
        at once create one record."""
        ...

    def workspace_of(self, scope: AgentScope) -> WorkspaceRecord | None:
        """The scope's own workspace record."""
        ...

    def list_workspaces(self, scope: AgentScope) -> list[WorkspaceRecord]:
        """The workspace records of the scope's namespace and of the namespaces `<agent>:<name>`
        inside it; every record for the maintenance scope. By namespace."""
        ...

    def working_memory_summary(self, scope: AgentScope) -> WorkMemorySummary:
        """Counts and latest changes of the scope's items and sections (the health report)."""
        ...


# ---------------------------------------------------------------- the evaluator's queue (000 §7, issue 13)

JobStatus = Literal["queued", "running", "done", "dead"]
ProposalStatus = Literal["open", "applied", "dismissed"]
JOB_STATUSES: tuple[JobStatus, ...] = ("queued", "running", "done", "dead")
PROPOSAL_STATUSES: tuple[ProposalStatus, ...] = ("open", "applied", "dismissed")


@dataclass(frozen=True)
class EvaluationJob:
    """One evaluation of one memory (`evaluation_jobs`); `result` holds scores and ids, never text."""

    id: int
    fragment_id: str
    agent_id: str
    kind: str
    status: JobStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    enqueued_at: datetime
    finished_at: datetime | None
    result: dict[str, Any] | None


@dataclass(frozen=True)
class MergeProposal:
    """A near-duplicate the evaluator found: `from_id` would be absorbed into `to_id` (001 §6.2)."""

    id: int
    agent_id: str
    from_id: str
    to_id: str
    similarity: float
    reason: str
    status: ProposalStatus
    created_at: datetime


@dataclass(frozen=True)
class EvaluationOutcome:
    """What finishing a job writes, in one transaction: the judged utility (and verified_at), the
    memory's utility_score by storage/utility.py with it, `contradicts` links from it to these
    memories, merge proposals (to_id, similarity, reason)."""

    utility: float
    result: dict[str, Any]
    contradicts: tuple[str, ...] = ()
    merges: tuple[tuple[str, float, str], ...] = ()
    half_life_days: float = 30.0  # the utility formula's recency half-life (MEMORY_CONFIG ranking.recencyHalfLifeDays)


@dataclass(frozen=True)
class EvaluationCounts:
    """The queue as `memory_stats` shows it: jobs by status, open proposals, tokens used today."""

    queued: int = 0
    running: int = 0
    done: int = 0
    dead: int = 0
    proposals: int = 0
    tokens_today: int = 0


class EvaluationStore(Protocol):
    """The evaluator's durable queue (`evaluation_jobs`, `merge_proposals`, `evaluation_tokens`;
    row-level security per agent on PostgreSQL). An agent's scope reads and changes its own rows
    only; the maintenance scope every row. The worker claims across agents (as the maintenance
    scope): SQLite inside one write transaction, PostgreSQL with FOR UPDATE SKIP LOCKED so that
    replicas share the work without taking a job twice."""

    def enqueue_evaluations(self, scope: AgentScope, fragment_ids: Sequence[str], now: datetime) -> int:
        """Queue an evaluation of each of these memories of the scope's own namespace (any, for the
        maintenance scope) that has no open (queued or running) one; how many were queued."""
        ...

    def enqueue_unevaluated(self, scope: AgentScope, now: datetime, limit: int) -> int:
        """The backfill: queue the live memories (working memory apart) that never had a job and carry no judgement (a migrated store keeps its judgements), oldest first."""
        ...

    def claim_evaluations(
        self, now: datetime, lease_until: datetime, limit: int, exclude_agents: Sequence[str] = ()
    ) -> list[EvaluationJob]:
        """Take up to `limit` due jobs (queued ones whose next attempt is due, and running ones
        whose lease ended), oldest first, skipping `exclude_agents`: each becomes running with one
        more attempt and `lease_until` as its next attempt. Two workers never take the same job."""
        ...

    def claim_evaluation(
        self, job_id: int, now: datetime, lease_until: datetime, exclude_agents: Sequence[str] = ()
    ) -> EvaluationJob | None:
        """Take the one job `job_id` (delivered by the Redis stream) under the same rule as
        `claim_evaluations`: only when it is due (queued and due, or running with its lease
        ended) and its agent is not in `exclude_agents`; None otherwise (done, dead, held by
        another worker, not due yet, unknown). Atomic: of two workers claiming it, one gets it."""
        ...

    def queued_evaluation_ids(self, fragment_ids: Sequence[str]) -> list[int]:
        """The ids of the queued jobs of these memories (any agent's: the producer publishes them)."""
        ...

    def finish_evaluation(self, job: EvaluationJob, outcome: EvaluationOutcome, now: datetime) -> bool:
        """In one transaction: the memory's judged_utility (`outcome.utility`), its utility_score by
        storage/utility.py from its row and that judgement (what the next consolidation computes
        too), verified_at, the `contradicts` links
        and merge proposals of `outcome` towards memories of the job's own agent (others are left
        out), the job done with its result. False (nothing changed) when the job is no longer
        running (requeued, finished elsewhere) or its memory is gone."""
        ...

    def fail_evaluation(self, job_id: int, error: str, now: datetime, retry_at: datetime | None) -> None:
        """Record a failed attempt: queued again for `retry_at`, or dead (retry_at None)."""
        ...

    def defer_evaluation(self, job_id: int, until: datetime) -> None:
        """Put a claimed job back in the queue until `until`, its attempt not counted (the budget)."""
        ...

    def evaluation_jobs(self, scope: AgentScope, status: JobStatus | None, limit: int) -> list[EvaluationJob]:
        """The scope's jobs (of one status), newest first."""
        ...

    def requeue_evaluations(self, scope: AgentScope, ids: Sequence[int], now: datetime) -> int:
        """Dead jobs of the scope back to queued, attempts reset; how many (every dead one when `ids` is empty)."""
        ...

    def evaluation_counts(self, scope: AgentScope, day: date) -> EvaluationCounts:
        """The scope's jobs by status, open proposals and tokens used on `day`."""
        ...

    def add_evaluation_tokens(self, agent_id: str, day: date, provider: str, tokens: int) -> None:
        """Count one model call of `tokens` tokens for the agent on `day`."""
        ...

    def evaluation_tokens(self, day: date) -> dict[str, int]:
        """Tokens used on `day`, by agent (every agent: the worker's budget check)."""
        ...

    def merge_proposals(self, scope: AgentScope, status: ProposalStatus | None, limit: int) -> list[MergeProposal]:
        """The scope's merge proposals (of one status), newest first."""
        ...

    def set_proposal_status(self, scope: AgentScope, proposal_id: int, status: ProposalStatus) -> MergeProposal:
        """Mark one of the scope's proposals applied or dismissed (NotFound for another's)."""
        ...


class SecretStore(Protocol):
    """Server-wide secrets, shared by every replica of one database (migration 0024); no
    agent's data, read and written only by the server itself."""

    def server_secret(self, name: str, candidate: bytes, now: datetime) -> bytes:
        """The secret stored under `name`; when there is none yet, `candidate` is stored and
        returned (in one transaction: concurrent first callers all get the winner's value)."""
        ...


class AppStore(
    Store,
    EntityStore,
    BulkStore,
    Pingable,
    SizeReporter,
    Reindexable,
    FeedbackReader,
    MigrationLog,
    AnalyticsStore,
    ErasureStore,
    RecordStore,
    LinkageStore,
    SkipStore,
    IdentityStore,
    WorkingMemoryStore,
    ConsolidationRunStore,
    ReviewStore,
    EvaluationStore,
    SecretStore,
    SessionHandleStore,
    Protocol,
):
    """What the composition root holds and hands to the faces: every backend provides all of it."""
