"""The typed inputs and results of seed 002's three tools (§3.2) and its resources (§3.1), with
the parameter names, enums, requirements and defaults the seed writes (snake_case)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, Strict, StringConstraints, field_validator

from .fields import MAX_LIST_ITEMS, Content, OperationInput, Tag, non_blank
from .results import Result

MemoryKey = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
MAX_DIMENSIONS = 8192  # of an agent's embedding
Vector = Annotated[list[float], Field(min_length=1, max_length=MAX_DIMENSIONS)]
VaultScope = Literal["session", "vault"]
AnyScope = Literal["session", "vault", "all"]


class CommitMemoryInput(OperationInput):
    """002 §3.2 commit_memory."""

    scope: VaultScope
    key: MemoryKey = Field(description="Unique identifier for this memory within its scope.")
    content: Content = Field(description="The memory content to store.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Categorization tags for retrieval.")
    embedding: Vector | None = Field(default=None, description="Optional pre-computed embedding vector (float32[D]).")

    _content_not_blank = field_validator("content")(non_blank)


class SearchMemoriesInput(OperationInput):
    """002 §3.2 search_memories (scope omitted: all)."""

    query: Annotated[str, Strict(), StringConstraints(max_length=2000)] = Field(
        description="Full-text search query (FTS5 syntax supported)."
    )
    scope: AnyScope | None = Field(default=None, description="Which scope(s) to search.")
    tags: list[Tag] | None = Field(
        default=None, max_length=MAX_LIST_ITEMS, description="Filter: only return memories with ALL specified tags."
    )
    query_embedding: Vector | None = Field(default=None, description="Optional: embedding of the query for semantic re-ranking.")
    limit: Annotated[int, Strict(), Field(ge=1, le=100)] = Field(default=10, description="Max results to return.")


class PruneMemoryInput(OperationInput):
    """002 §3.2 prune_memory."""

    scope: AnyScope
    key: MemoryKey | None = Field(default=None, description="If provided, delete only this key (within scope).")
    older_than: Annotated[str, Strict(), StringConstraints(max_length=64)] | None = Field(
        default=None, description="ISO 8601 datetime. Delete entries created before this timestamp."
    )
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Delete entries matching ALL these tags.")

    @field_validator("older_than")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            parse_time(value)
        return value

    def cutoff(self) -> datetime | None:
        return None if self.older_than is None else parse_time(self.older_than)


def parse_time(value: str) -> datetime:
    """An ISO 8601 timestamp; without a zone it is UTC."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError("must be an ISO 8601 datetime, e.g. 2026-04-27T14:00:00Z") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def zulu(value: datetime) -> str:
    """A timestamp as 002 writes it: UTC, ISO 8601, `Z`."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class VaultResult(Result):
    """A 002 result: field names as written (snake_case)."""

    model_config = ConfigDict(alias_generator=None, populate_by_name=True, serialize_by_alias=True, extra="forbid", frozen=True)


class CommitResult(VaultResult):
    committed: bool
    key: str
    scope: str


class SearchHit(VaultResult):
    key: str
    content: str
    tags: list[str]
    scope: str
    relevance: float = Field(description="Score in [0,1]; 1.0 = exact match.")


class SearchResult(VaultResult):
    results: list[SearchHit]
    total_searched: int


class PruneResult(VaultResult):
    pruned_count: int


class KeyedMemory(VaultResult):
    """002 §3.1: one memory as its resources show it."""

    key: str
    content: str
    tags: list[str]
    scope: str
    created_at: str
    updated_at: str
