"""The inputs and results of seed 003's working memory, workspaces and health: parameter and field
names as the reference writes them (snake_case: `next_action`, `created_at`), every timestamp ISO
8601 in UTC with `Z`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import ConfigDict, Field, Strict, StringConstraints

from ..fields import MAX_LIST_ITEMS, Content, OperationInput, ShortText, Tag
from ..results import Result
from ..storage.workmem import ItemCategory, ItemStatus, WorkItem, WorkspaceRecord

Title = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
Priority = Annotated[int, Strict(), Field(ge=0, le=10)]
ItemId = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=64)]
SectionName = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
Query = Annotated[str, Strict(), StringConstraints(max_length=500)]
Limit = Annotated[int, Strict(), Field(ge=1, le=100)]
WorkspaceName = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
DEFAULT_LIMIT = 50


def iso(value: datetime | None) -> str | None:
    """A timestamp as this face writes it: UTC, ISO 8601, `Z`."""
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------- inputs


class ItemFields(OperationInput):
    """The fields of an item an update may change (the body of PUT /v1/working-memory/items/{id})."""

    title: Title | None = Field(default=None, description="New title.")
    content: Content | None = Field(default=None, description="New content.")
    category: ItemCategory | None = Field(default=None, description="New category.")
    status: ItemStatus | None = Field(default=None, description="New status.")
    priority: Priority | None = Field(default=None, description="New priority, 0-10.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="New tags (replace the old ones).")
    next_action: ShortText | None = Field(default=None, description="New next action (null clears it).")


class ItemCreateInput(OperationInput):
    """memento_item_create / POST /v1/working-memory/items."""

    category: ItemCategory = Field(description="Item category.")
    title: Title = Field(description="Item title.")
    content: Content | None = Field(default=None, description="Details.")
    status: ItemStatus | None = Field(default=None, description="Default active.")
    priority: Priority | None = Field(default=None, description="0-10, higher is more important (default 0).")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Tags for search.")
    next_action: ShortText | None = Field(default=None, description="What to do next.")


class ItemIdInput(OperationInput):
    """memento_item_delete."""

    id: ItemId = Field(description="Item id.")


class ItemUpdateInput(ItemFields, ItemIdInput):
    """memento_item_update: the item's id, then only the fields given change."""


class ItemListInput(OperationInput):
    """memento_item_list / GET /v1/working-memory/items."""

    category: ItemCategory | None = Field(default=None, description="Only this category.")
    status: ItemStatus | None = Field(default=None, description="Only this status (default: active and paused).")
    query: Query | None = Field(default=None, description="Words that must all appear in title, content or next action.")
    limit: Limit = Field(default=DEFAULT_LIMIT, description="Most items (1-100).")
    offset: Annotated[int, Strict(), Field(ge=0, le=100_000)] = Field(default=0, description="Skip this many.")


class ReadInput(OperationInput):
    """memento_read."""

    section: SectionName | None = Field(default=None, description="One section, e.g. active_work (default: the whole document).")


class UpdateInput(OperationInput):
    """memento_update."""

    section: SectionName = Field(description="Section to replace, e.g. active_work, standing_decisions, session_notes.")
    content: Content = Field(description="Its new markdown.")


class SectionBody(OperationInput):
    """PUT /v1/working-memory/{section}."""

    content: Content = Field(description="The section's new markdown.")


class NoInput(OperationInput):
    """A tool without parameters (memento_init, memento_health)."""


class WorkspaceCreate(OperationInput):
    """POST /v1/workspaces."""

    name: WorkspaceName = Field(description="The workspace name (as X-Memento-Workspace would name it).")


# ---------------------------------------------------------------- results


class ProtocolResult(Result):
    """A 003 result: field names as the reference writes them (snake_case)."""

    model_config = ConfigDict(alias_generator=None, populate_by_name=True, serialize_by_alias=True, extra="forbid", frozen=True)


class ItemOut(ProtocolResult):
    """One working-memory item."""

    id: str
    category: ItemCategory
    title: str
    content: str
    status: ItemStatus
    priority: int
    tags: list[str]
    next_action: str | None
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, item: WorkItem) -> ItemOut:
        return cls(
            id=item.id,
            category=item.category,
            title=item.title,
            content=item.content,
            status=item.status,
            priority=item.priority,
            tags=list(item.tags),
            next_action=item.next_action,
            created_at=iso(item.created_at) or "",
            updated_at=iso(item.updated_at) or "",
        )


class ItemList(ProtocolResult):
    """A page of items (priority first, then newest) and how many match in all."""

    items: list[ItemOut]
    total: int
    limit: int
    offset: int


class ItemDeleted(ProtocolResult):
    deleted: bool
    id: str


class SectionInfo(ProtocolResult):
    section: str
    heading: str
    updated_at: str | None = Field(description="null: never written.")


class SectionOut(SectionInfo):
    content: str


class SectionWritten(SectionInfo):
    created: bool = Field(description="The section did not exist before.")
    chars: int


class WorkingMemoryOut(ProtocolResult):
    """The legacy working-memory document (or one section of it) as markdown, and its sections."""

    markdown: str
    sections: list[SectionInfo]


class WorkspaceOut(ProtocolResult):
    name: str
    namespace: str = Field(description="The agent namespace its records live in.")
    created_at: str | None = Field(description="null: the namespace has no workspace record yet.")

    @classmethod
    def of(cls, record: WorkspaceRecord) -> WorkspaceOut:
        return cls(name=record.name, namespace=record.namespace, created_at=iso(record.created_at))


class InitResult(ProtocolResult):
    workspace: WorkspaceOut
    already_existed: bool
    sections: list[str]
    message: str


class WorkspaceList(ProtocolResult):
    workspaces: list[WorkspaceOut]
    current: str = Field(description="The namespace this request works in.")


class ItemHealth(ProtocolResult):
    active: dict[str, int] = Field(description="Active items by category.")
    paused: int
    completed: int
    archived: int
    total: int


class SectionHealth(ProtocolResult):
    count: int
    last_updated: str | None


class MemoryHealth(ProtocolResult):
    total: int = Field(description="Live long-term memories of the namespace.")
    newest_at: str | None


class HealthReport(ProtocolResult):
    """Counts of the caller's namespace (memento_health, GET /v1/health)."""

    namespace: str
    workspace: str | None
    items: ItemHealth
    sections: SectionHealth
    memories: MemoryHealth
    last_update: str | None = Field(description="The latest change to items, sections or memories.")
    parts: dict[str, dict[str, Any]] = Field(description="What other parts of the face report (e.g. the skip list).")
    warnings: list[str]
