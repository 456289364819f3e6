"""The Store protocol every backend implements, and the value objects it takes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, Sequence

import numpy as np

from ..models import AgentScope, Draft, Fragment, FragmentType, Link, RelationType, TTLTier


@dataclass(frozen=True)
class SearchFilter:
    """Restrictions applied at every retrieval tier."""

    topic: str | None = None
    type: FragmentType | None = None
    types: tuple[FragmentType, ...] | None = None
    session_id: str | None = None  # working memory of this session is visible too
    only_session: bool = False  # only the session's working memory


@dataclass(frozen=True)
class NewFragment:
    """A draft plus where it goes and its derived vector."""

    draft: Draft
    agent_id: str
    session_id: str | None = None
    embedding: np.ndarray | None = None
    linked_to: tuple[str, ...] = ()


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


class Store(Protocol):
    """Everything the service needs from persistence. Every method enforces `scope`."""

    embedding_model: str | None

    def close(self) -> None: ...

    # fragments
    def insert(self, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]: ...
    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]: ...
    def update(self, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime) -> Fragment: ...
    def supersede(self, scope: AgentScope, old_id: str, new: NewFragment, importance_factor: float, now: datetime) -> tuple[Fragment, bool]: ...
    def find_by_topic(self, scope: AgentScope, topic: str) -> list[Fragment]: ...
    def delete(self, scope: AgentScope, ids: Sequence[str]) -> list[str]: ...
    def list_fragments(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]: ...
    def recent(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]: ...
    def page(self, scope: AgentScope, filt: SearchFilter, before_seq: int | None, limit: int) -> list[Fragment]: ...
    def topics(self, scope: AgentScope, prefix: str, limit: int) -> list[tuple[str, int]]: ...
    def ids_with_prefix(self, scope: AgentScope, prefix: str, limit: int) -> list[str]: ...
    def rank_features(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, RankFeatures]: ...
    def count(self, scope: AgentScope, filt: SearchFilter) -> int: ...
    def expunge_session(self, session_id: str) -> int: ...

    # links
    def add_link(self, scope: AgentScope, from_id: str, to_id: str, relation: RelationType, now: datetime) -> bool: ...
    def neighbours(self, scope: AgentScope, ids: Sequence[str], relations: Sequence[RelationType], limit: int) -> list[tuple[Link, Fragment]]: ...
    def versions(self, scope: AgentScope, fragment_id: str) -> list[dict[str, object]]: ...

    # retrieval tiers
    def keyword_search(self, scope: AgentScope, keywords: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]: ...
    def text_search(self, scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]: ...
    def vector_search(self, scope: AgentScope, vector: np.ndarray, filt: SearchFilter, limit: int) -> list[Hit]: ...
    def record_access(self, ids: Sequence[str], at: datetime) -> None: ...

    # embeddings
    def set_embedding(self, fragment_id: str, vector: np.ndarray) -> None: ...
    def missing_embeddings(self, scope: AgentScope, limit: int, after_seq: int = 0) -> list[tuple[int, str, str]]: ...

    # feedback and statistics
    def add_tool_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int: ...
    def add_task_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int: ...
    def stats(self, scope: AgentScope) -> dict[str, object]: ...


class MaintenanceStore(Protocol):
    """The primitives of the consolidation pipeline (000 §8)."""

    def demote(self, scope: AgentScope, from_tier: TTLTier, to_tier: TTLTier, created_before: datetime, accessed_before: datetime | None) -> int: ...
    def expire_cold(self, scope: AgentScope, type_: str | None, exclude_types: Sequence[str], stale_before: datetime) -> int: ...
    def decay_importance(self, scope: AgentScope, factor: float, max_access: int, max_utility: float, older_than: datetime) -> int: ...
    def deduplicate(self, scope: AgentScope) -> int: ...
    def contradictions(self, scope: AgentScope) -> list[tuple[str, str]]: ...
    def prune_orphan_links(self, scope: AgentScope) -> int: ...
    def recompute_utility(self, scope: AgentScope, now: datetime, half_life_days: float) -> int: ...
    def expire_sessions(self, idle_before: datetime) -> int: ...
