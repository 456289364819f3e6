"""The typed inputs and results of seed 003's memories and linkages: the parameters of the
reference's tools (snake_case), the REST bodies under /v1/memories, and the shapes both return."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, Strict, StringConstraints, field_validator, model_validator

from ..fields import MAX_LIST_ITEMS, Content, FragmentId, OperationInput, Tag, non_blank
from ..models import FragmentType
from ..results import COVERAGE, NO_GOOD_MATCH, Omitted, Result

ProtocolType = Literal["fact", "decision", "observation", "instruction"]
LinkageType = Literal["memory", "item", "file"]
MAX_LINKAGES = 50
MAX_LABEL = 100
MAX_PATH = 1000
MAX_GRAPH_DEPTH = 3
Expires = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
Label = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_LABEL)]
TargetId = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
FilePath = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_PATH)]
Query = Annotated[str, Strict(), StringConstraints(max_length=2000)]

# 003's four types over Memento's kinds: three are kinds already; an instruction (to the agent's
# future self) is a procedure. The mapping is one-to-one, so the kind alone says the 003 type.
KIND_OF: dict[str, FragmentType] = {
    "fact": FragmentType.FACT,
    "decision": FragmentType.DECISION,
    "observation": FragmentType.OBSERVATION,
    "instruction": FragmentType.PROCEDURE,
}
TYPE_OF_KIND: dict[FragmentType, str] = {kind: name for name, kind in KIND_OF.items()}


def protocol_type(kind: FragmentType) -> str:
    """The 003 type a memory of `kind` shows (a kind 003 does not name, stored through another face, as itself)."""
    return TYPE_OF_KIND.get(kind, kind.value)


def parse_expires(value: str) -> datetime:
    """003's `expires`: an ISO 8601 date (its start, UTC) or date-time (UTC when no zone is given)."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO 8601 date or date-time, e.g. 2026-06-01 or 2026-06-01T12:00:00Z") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _expires(value: str | None) -> str | None:
    if value is not None:
        parse_expires(value)
    return value


# ---------------------------------------------------------------- inputs


class LinkageInput(OperationInput):
    """A link: to a memory or item by id, to a file by path."""

    type: LinkageType = Field(description="Target kind.")
    id: TargetId | None = Field(default=None, description="Memory or item id.")
    path: FilePath | None = Field(default=None, description="File path.")
    label: Label | None = Field(default=None, description="Relation, e.g. supports, source (max 100 chars).")

    @model_validator(mode="after")
    def _target(self) -> LinkageInput:
        if self.type == "file":
            if self.path is None or self.id is not None:
                raise ValueError("a file linkage takes a path (and no id)")
        elif self.id is None or self.path is not None:
            raise ValueError(f"a {self.type} linkage takes an id (and no path)")
        return self

    @property
    def target(self) -> str:
        return (self.path if self.type == "file" else self.id) or ""


class StoreMemoryInput(OperationInput):
    """003 memento_store (memento_remember): one memory with tags, an optional expiry and linkages."""

    content: Content = Field(description="The memory, as an instruction a future agent can act on.")
    type: ProtocolType = Field(default="observation", description="Kind of memory.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Tags (recall matches them).")
    expires: Expires | None = Field(default=None, description="ISO date or date-time; not recalled after it.")
    linkages: list[LinkageInput] | None = Field(default=None, max_length=MAX_LINKAGES, description="Links to memories, items or files.")

    _content_not_blank = field_validator("content")(non_blank)
    _expires_iso = field_validator("expires")(_expires)


class UpdateMemoryInput(OperationInput):
    """PUT /v1/memories/{id}: the fields given change (the old state is kept as a version); linkages are added."""

    content: Content | None = Field(default=None, description="New content.")
    type: ProtocolType | None = Field(default=None, description="New type.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="New tags (replace the old; [] clears).")
    expires: Expires | None = Field(default=None, description="New expiry (ISO date or date-time, in the future).")
    linkages: list[LinkageInput] | None = Field(
        default=None, max_length=MAX_LINKAGES, description="Linkages to add (one the memory has already is kept once)."
    )

    _content_not_blank = field_validator("content")(non_blank)
    _expires_iso = field_validator("expires")(_expires)


class RecallMemoriesInput(OperationInput):
    """003 memento_recall."""

    query: Query = Field(description="Words or a question.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Any of these tags.")
    type: ProtocolType | None = Field(default=None, description="Only this kind.")
    limit: Annotated[int, Strict(), Field(ge=1, le=100)] = Field(default=10, description="Max results.")

    _query_not_blank = field_validator("query")(non_blank)


class DeleteMemoryInput(OperationInput):
    """003 memento_memory_delete."""

    id: FragmentId = Field(description="Memory id.")


class MemoryGraphInput(OperationInput):
    """GET /v1/memories/{id}/graph and memento_memory_graph."""

    id: FragmentId = Field(description="Start memory id.")
    depth: Annotated[int, Strict(), Field(ge=1, le=MAX_GRAPH_DEPTH)] = Field(default=2, description="Hops (1-3).")


# ---------------------------------------------------------------- results


class ProtocolResult(Result):
    """A 003 result: field names as the reference writes them (snake_case)."""

    model_config = ConfigDict(alias_generator=None, populate_by_name=True, serialize_by_alias=True, extra="forbid", frozen=True)


class LinkageOut(ProtocolResult):
    type: str
    id: str | None = Omitted()
    path: str | None = Omitted()
    label: str | None = Omitted()


class MemoryOut(ProtocolResult):
    """A 003 memory: its full text, 003 type, tags, times and linkages; `score` when recalled."""

    id: str
    content: str
    type: str = Field(description="fact, decision, observation or instruction (a memory of another face: its own kind).")
    tags: list[str]
    created_at: str
    expires_at: str | None
    linkages: list[LinkageOut]
    score: float | None = Omitted()


class StoredMemory(ProtocolResult):
    """What memento_store answers: the memory, and whether it is new (false: the same content was stored)."""

    id: str
    created: bool
    memory: MemoryOut
    message: str | None = Omitted()


class MemoryList(ProtocolResult):
    """Recalled (ranked, with scores) or listed (newest first) memories."""

    memories: list[MemoryOut]
    count: int
    coverage: float | None = Omitted(description=COVERAGE)
    no_good_match: bool | None = Omitted(description=NO_GOOD_MATCH)


class DeletedMemory(ProtocolResult):
    """memento_memory_delete: a soft forget, restorable with 000's `restore` until `restorable_until`."""

    id: str
    deleted: bool
    mode: str
    restorable_until: str | None


class GraphNode(ProtocolResult):
    """A node of a linkage graph: a memory (with its content and type), an item or a file."""

    id: str = Field(description="A memory's id; `item:<id>` or `file:<path>` for the others.")
    kind: str
    depth: int
    content: str | None = Omitted()
    type: str | None = Omitted()
    tags: list[str] | None = Omitted()
    ref: str | None = Omitted(description="The item's id or the file's path.")


class GraphEdge(ProtocolResult):
    from_: str = Field(alias="from")
    to: str
    label: str


class MemoryGraph(ProtocolResult):
    """The linkages around a memory, breadth first; `truncated` when the node bound cut it."""

    root: str
    depth: int
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    truncated: bool
