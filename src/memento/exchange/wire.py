"""The lines of the memento export format, version 2 (docs/export.md): a stored row as a JSON
object and back.

A row's stored columns become camelCase keys (`agent_id` -> `agentId`, `ttl_tier` -> `ttlTier`),
timestamps ISO 8601 in UTC with microseconds, `clientEmbedding` base64 of its float32 bytes; a
fragment's nested tables travel inside it (`versions`). Reading validates each column by its
type (`COLUMN_TYPES`), so a table added to `storage.records.RECORD_TABLES` is read and written
here without more code as long as its columns' types are listed.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from enum import Enum
from functools import cache
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, ValidationError, create_model
from pydantic.alias_generators import to_camel

from ..fields import AgentId
from ..models import FragmentType, MemorySystem, PrivacyScope, RelationType, TTLTier
from ..storage.records import FRAGMENTS, LINKS, NESTED, RECORD_TABLES, RecordTable
from ..storage.workmem import ItemCategory, ItemStatus

FORMAT = "memento-export"
VERSION = 2
KINDS: dict[str, RecordTable] = {t.kind: t for t in RECORD_TABLES if not t.nested}
END = "end"  # the trailer's kind

Id = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Text = Annotated[str, StringConstraints(max_length=1_000_000)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
Count = Annotated[int, Field(ge=0)]
Names = list[Annotated[str, StringConstraints(max_length=1000)]]

# Every exported column's type (its default when it may be omitted); a column missing here is read as any JSON value.
COLUMN_TYPES: dict[str, tuple[Any, Any]] = {
    "id": (Id, ...),
    "agent_id": (AgentId, ...),
    "session_id": (Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None, None),
    "content": (Text, ...),
    "detail": (Text | None, None),
    "topic": (Annotated[str, StringConstraints(min_length=1, max_length=200)], ...),
    "type": (FragmentType, ...),
    "keywords": (Names, []),
    "importance": (Unit, ...),
    "content_hash": (Annotated[str, StringConstraints(min_length=1, max_length=200)], ...),
    "source": (Text | None, None),
    "linked_to": (list[Id], []),
    "access_count": (Count, 0),
    "accessed_at": (AwareDatetime | None, None),
    "created_at": (AwareDatetime, ...),
    "updated_at": (AwareDatetime, ...),
    "ttl_tier": (TTLTier, ...),
    "tier_since": (AwareDatetime | None, None),
    "estimated_tokens": (Count, 0),
    "utility_score": (float, 1.0),
    "verified_at": (AwareDatetime | None, None),
    "is_anchor": (bool, False),
    "confidence": (Unit, 1.0),
    "tags": (Names, []),
    "context": (Text | None, None),
    "metadata": (dict[str, Any], {}),
    "expires_at": (AwareDatetime | None, None),
    "pinned": (bool, False),
    "memory_system": (MemorySystem, ...),
    "privacy_scope": (PrivacyScope, PrivacyScope.PRIVATE),
    "origin_trace": (dict[str, Any] | None, None),
    "deleted_at": (AwareDatetime | None, None),
    "memory_key": (Annotated[str, StringConstraints(min_length=1, max_length=256)] | None, None),
    "client_embedding": (str | None, None),  # base64; decoded by `decode`
    "judged_utility": (Unit | None, None),  # the evaluator's judgement (migration 0020)
    "amended_at": (AwareDatetime, ...),
    "amended_by": (Annotated[str, StringConstraints(max_length=200)], ...),
    "note": (Text | None, None),
    "from_id": (Id, ...),
    "to_id": (Id, ...),
    "relation_type": (Annotated[str, StringConstraints(min_length=1, max_length=200)], ...),
    "name": (Annotated[str, StringConstraints(min_length=1, max_length=200)], ...),
    "entity_type": (Annotated[str, StringConstraints(min_length=1, max_length=100)], ...),
    "description": (Text | None, None),
    "source_id": (Id, ...),
    "target_id": (Id, ...),
    "strength": (Unit, 0.5),
    "entity_id": (Id, ...),
    "fragment_id": (Id, ...),
    "relevance": (Unit, 1.0),
    "target_type": (Annotated[str, StringConstraints(pattern=r"^(memory|item|file)$")], ...),  # a seed 003 linkage's
    "memory_id": (Id | None, None),
    "item_id": (Annotated[str, StringConstraints(min_length=1, max_length=200)] | None, None),
    "path": (Annotated[str, StringConstraints(min_length=1, max_length=1000)] | None, None),
    "label": (Annotated[str, StringConstraints(max_length=100)] | None, None),
    # 003's working memory
    "section": (Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")], ...),
    "category": (ItemCategory, ...),
    "title": (Annotated[str, StringConstraints(min_length=1, max_length=500)], ...),
    "status": (ItemStatus, "active"),
    "priority": (Annotated[int, Field(ge=0, le=10)], 0),
    "next_action": (Annotated[str, StringConstraints(max_length=2000)] | None, None),
}
COLUMN_TYPES.update(
    {  # seed 003's skip list and identity crystal snapshots
        "item": (Annotated[str, StringConstraints(min_length=1, max_length=500)], ...),
        "reason": (Annotated[str, StringConstraints(min_length=1, max_length=2000)], ...),
        "crystal": (Annotated[str, StringConstraints(min_length=1, max_length=8000)], ...),
        "source_count": (Count, 0),
    }
)
# Where one table's column differs from the same name elsewhere.
TABLE_TYPES: dict[str, dict[str, tuple[Any, Any]]] = {
    "skip_list": {"expires_at": (AwareDatetime, ...)},  # a skip always expires
    "identity_snapshots": {"source": (Literal["manual", "crystallized"], ...)},
}
# Where a nested table's column differs from the same name elsewhere (a version may lack what a fragment must have).
NESTED_TYPES: dict[str, tuple[Any, Any]] = {
    "confidence": (Unit | None, None),
    "metadata": (dict[str, Any] | None, None),
    "tags": (Names | None, None),
}


class WireError(ValueError):
    """A line that is not a valid record; the message names the field."""


def timestamp(value: datetime) -> str:
    """A stored time on the wire: UTC, ISO 8601 with microseconds."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _value(value: object) -> object:
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


@cache
def _names(spec: RecordTable) -> tuple[tuple[str, str], ...]:
    """(column, wire name) of each column a line carries (a nested row leaves out its parent's id)."""
    return tuple((c, to_camel(c)) for c in spec.columns if not (spec.nested and c == spec.fragments[0]))


def encode(spec: RecordTable, row: dict[str, object]) -> dict[str, Any]:
    """The line of a stored row (as RecordStore.record_page returns it): kind first, then its
    columns by camelCase name; a fragment's nested rows under their table's key. A table owned
    through its fragments (a link) carries its owner's `agentId` too."""
    out: dict[str, Any] = {"kind": spec.kind}
    if spec.owner is None and "agent_id" in row:
        out["agentId"] = row["agent_id"]
    for column, name in _names(spec):
        out[name] = _value(row.get(column))
    for child in NESTED if spec is FRAGMENTS else ():
        out[child.kind] = [encode(child, r) for r in row.get(child.kind) or []]  # type: ignore[attr-defined]
    if spec.nested:
        del out["kind"]
    return out


def line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


@cache
def _model(spec: RecordTable) -> type[BaseModel]:
    """A pydantic model of `spec`'s line: its columns by camelCase name, typed, unknown keys ignored."""
    fields: dict[str, Any] = {}
    for column in spec.columns:
        if spec.nested and column == spec.fragments[0]:
            continue
        kind, default = (
            NESTED_TYPES.get(column, COLUMN_TYPES.get(column, (Any, None))) if spec.nested else COLUMN_TYPES.get(column, (Any, None))
        )
        kind, default = TABLE_TYPES.get(spec.table, {}).get(column, (kind, default))
        fields[column] = (kind, default)
    if spec.owner is None:
        fields["agent_id"] = (AgentId | None, None)
    config = ConfigDict(alias_generator=to_camel, populate_by_name=False, extra="ignore", strict=False)
    return create_model(f"{spec.kind.title()}Line", __config__=config, **fields)


def decode(spec: RecordTable, item: dict[str, Any]) -> dict[str, object]:
    """The stored row of a line (WireError naming the bad field); a fragment with its nested rows."""
    try:
        parsed = _model(spec).model_validate(item)
    except ValidationError as exc:
        raise WireError(describe(exc)) from None
    row: dict[str, object] = {k: v.value if isinstance(v, Enum) else v for k, v in parsed.model_dump().items()}
    if spec is LINKS:
        try:
            RelationType(str(row["relation_type"]))
        except ValueError:
            raise WireError(f"relationType: unknown relation {row['relation_type']!r}") from None
        if row["from_id"] == row["to_id"]:
            raise WireError("toId: a memory cannot link to itself")
    if "client_embedding" in row and row["client_embedding"] is not None:
        try:
            row["client_embedding"] = base64.b64decode(str(row["client_embedding"]), validate=True)
        except ValueError:
            raise WireError("clientEmbedding: not base64") from None
    if spec is FRAGMENTS and item.get("embedding") is not None:
        row["embedding"], row["embedding_model"] = _vector(item)
    for child in NESTED if spec is FRAGMENTS else ():
        nested = item.get(child.kind) or []
        if not isinstance(nested, list):
            raise WireError(f"{child.kind}: must be a list")
        rows = []
        for n, sub in enumerate(nested):
            if not isinstance(sub, dict):
                raise WireError(f"{child.kind}[{n}]: must be an object")
            try:
                rows.append(decode(child, sub))
            except WireError as exc:
                raise WireError(f"{child.kind}[{n}].{exc}") from None
        row[child.kind] = rows
    return row


MAX_DIMENSIONS = 8192


def _vector(item: dict[str, Any]) -> tuple[np.ndarray, str]:
    """A fragment line's stored vector (`embedding`: base64 of its float32 bytes, little-endian;
    `embeddingModel`: the model that computed it), kept by an import into a store of the same
    model and dimensions instead of embedding the content again."""
    model = item.get("embeddingModel")
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise WireError("embeddingModel: the model of `embedding` is required (1-200 characters)")
    try:
        raw = base64.b64decode(str(item["embedding"]), validate=True)
    except ValueError:
        raise WireError("embedding: not base64") from None
    if not raw or len(raw) % 4 or len(raw) // 4 > MAX_DIMENSIONS:
        raise WireError(f"embedding: {len(raw)} bytes is not a float32 vector of 1-{MAX_DIMENSIONS} dimensions")
    vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(vector)):
        raise WireError("embedding: holds a value that is not a finite number")
    return vector, model


def vector_fields(vector: np.ndarray, model: str) -> dict[str, str]:
    """The `embedding` and `embeddingModel` keys of a fragment line carrying its vector."""
    return {"embedding": base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii"), "embeddingModel": model}


def describe(exc: ValidationError) -> str:
    """The first problem of a validation error, named by its wire field."""
    problems = []
    for err in exc.errors(include_url=False, include_context=False, include_input=False):
        where = ".".join(to_camel(str(p)) if isinstance(p, str) else str(p) for p in err["loc"]) or "record"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems[:3])
