"""The entity graph of seed 001 (§2.2-§2.4) as values: named entities, weighted typed relations
between them, and the entity-memory associations; the search modes of §5.1; effective confidence
(§4.2).

Entities belong to one agent: names are unique within it (`Alice` of agent A and `Alice` of agent
B are two entities, each invisible to the other). A relation joins two entities of the same agent;
an association joins an entity to a memory (a fragment) its agent can see.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import numpy as np

from .errors import InvalidArgument

UNKNOWN_TYPE = "unknown"  # 001 §7.2.4: an entity created because something named it
ENTITY_TYPES = ("person", "organization", "project", "concept", "location", "technology", "event", UNKNOWN_TYPE)
RELATION_TYPES = (
    "works_at",
    "manages",
    "reports_to",
    "collaborates_with",
    "uses",
    "implements",
    "depends_on",
    "related_to",
    "located_in",
    "part_of",
    "created_by",
)
DEFAULT_STRENGTH = 0.5
DEFAULT_RELATION_CONFIDENCE = 1.0


def name_key(name: str) -> str:
    """The stored key of an entity name: names are unique per agent regardless of case. Computed
    here, not by the database, so both backends fold case alike (PostgreSQL's lower() depends on
    its locale: under C it folds ASCII only)."""
    return name.strip().lower()


def unit_value(name: str, value: float) -> float:
    """A strength, confidence or relevance: refused (InvalidArgument) outside 0-1."""
    if not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{name} must be between 0 and 1, got {value}")
    return value


def clean_entity_name(name: str) -> str:
    """An entity name as stored: stripped; an empty one is refused (InvalidArgument)."""
    cleaned = name.strip()
    if not cleaned:
        raise InvalidArgument("an entity name cannot be empty")
    return cleaned


def new_entity_id() -> str:
    return "ent-" + secrets.token_hex(8)


def new_relation_id() -> str:
    return "rel-" + secrets.token_hex(8)


class SearchMode(StrEnum):
    """001 §5.1: how a query finds memories."""

    KEYWORD = "keyword"  # full text (FTS5 / tsvector)
    SEMANTIC = "semantic"  # vector similarity above the floor
    HYBRID = "hybrid"  # both, min-max normalised and weighted (§11.1)
    GRAPH = "graph"  # memories of the entities the query names and their neighbours (§5.5)


@dataclass
class Entity:
    id: str
    agent_id: str
    name: str
    entity_type: str
    created_at: datetime
    updated_at: datetime
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    has_embedding: bool = False


@dataclass
class Relation:
    id: str
    agent_id: str
    source_id: str
    target_id: str
    relation_type: str
    strength: float
    confidence: float
    created_at: datetime
    updated_at: datetime
    context: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    source_name: str = ""  # filled by the store from the entities table
    target_name: str = ""

    def other_end(self, entity_id: str) -> str:
        return self.target_id if self.source_id == entity_id else self.source_id


@dataclass(frozen=True)
class NewEntity:
    """An entity to create, or to merge into the agent's entity of the same name."""

    name: str
    entity_type: str = UNKNOWN_TYPE
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: np.ndarray | None = None  # of `name + " " + description` (001 §3.3)
    id: str = field(default_factory=new_entity_id)


@dataclass(frozen=True)
class EntityChanges:
    """Replacement values for an entity; None leaves a field as it is."""

    name: str | None = None
    entity_type: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    embedding: np.ndarray | None = None


@dataclass(frozen=True)
class NewRelation:
    """A relation between two existing entities (by id); a repeat of (source, target, type) updates
    strength, confidence, context and metadata of the stored one (upsert)."""

    source_id: str
    target_id: str
    relation_type: str
    strength: float = DEFAULT_STRENGTH
    confidence: float = DEFAULT_RELATION_CONFIDENCE
    context: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_relation_id)


@dataclass(frozen=True)
class EntityLink:
    """One entity-memory association (001 §2.4)."""

    entity_id: str
    fragment_id: str
    relevance: float
    created_at: datetime


def effective_confidence(
    confidence: float, created_at: datetime, accessed_at: datetime | None, now: datetime, half_life_days: float
) -> float:
    """001 §4.2 / §11.4: the stored confidence halved every `half_life_days` since the last access
    (or creation); computed at read time, never stored."""
    last = accessed_at if accessed_at is not None and accessed_at > created_at else created_at
    days = max(0.0, (now - last).total_seconds() / 86400.0)
    if half_life_days <= 0:
        return confidence
    return float(confidence * 0.5 ** (days / half_life_days))
