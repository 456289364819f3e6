"""The values of seed 003's working memory as the stores keep them (the WorkingMemoryStore protocol,
storage/protocol.py): structured items, the legacy markdown sections and the workspace records.
Both backends share what is decided once: the categories and statuses, how an update applies to
an item, and the folded text an item's `query` filter matches."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

ItemCategory = Literal["active_work", "standing_decision", "skip_list", "waiting_for", "session_note"]
ItemStatus = Literal["active", "paused", "completed", "archived"]
CATEGORIES: tuple[ItemCategory, ...] = ("active_work", "standing_decision", "skip_list", "waiting_for", "session_note")
STATUSES: tuple[ItemStatus, ...] = ("active", "paused", "completed", "archived")
OPEN_STATUSES: tuple[ItemStatus, ...] = ("active", "paused")  # what the context call and an unfiltered list show
MIN_PRIORITY, MAX_PRIORITY = 0, 10


def fold(text: str) -> str:
    """Text as the item filter compares it: case-folded (Unicode, the same on every backend)."""
    return text.casefold()


def folded_text(title: str, content: str, next_action: str | None) -> str:
    """What an item's `folded` column holds: the text `ItemQuery.terms` are looked for in."""
    return fold("\n".join([title, content, next_action or ""]))


@dataclass(frozen=True)
class WorkItem:
    """One working-memory item of a namespace (`agent_id`)."""

    id: str
    agent_id: str
    category: ItemCategory
    title: str
    content: str
    status: ItemStatus
    priority: int
    tags: tuple[str, ...]
    next_action: str | None
    created_at: datetime
    updated_at: datetime

    def folded(self) -> str:
        """The text `ItemQuery.terms` are looked for in: title, content and next action."""
        return folded_text(self.title, self.content, self.next_action)


@dataclass(frozen=True)
class ItemChanges:
    """A partial update: None leaves a field as it is; `next_action` is set (to a text or to None,
    clearing it) only when `set_next_action`."""

    title: str | None = None
    content: str | None = None
    category: ItemCategory | None = None
    status: ItemStatus | None = None
    priority: int | None = None
    tags: tuple[str, ...] | None = None
    next_action: str | None = None
    set_next_action: bool = False

    def apply(self, item: WorkItem, now: datetime) -> WorkItem:
        """`item` with these changes, updated at `now`."""
        return replace(
            item,
            title=item.title if self.title is None else self.title,
            content=item.content if self.content is None else self.content,
            category=self.category or item.category,
            status=self.status or item.status,
            priority=item.priority if self.priority is None else self.priority,
            tags=item.tags if self.tags is None else self.tags,
            next_action=self.next_action if self.set_next_action else item.next_action,
            updated_at=now,
        )


@dataclass(frozen=True)
class ItemQuery:
    """Which items of a namespace to list: of `category` (None: any), with one of `statuses`, whose
    folded text holds every one of `terms` (already folded); ordered by priority (highest first),
    then newest first; a page of `limit` after `offset`."""

    category: ItemCategory | None = None
    statuses: tuple[ItemStatus, ...] = OPEN_STATUSES
    terms: tuple[str, ...] = ()
    limit: int = 50
    offset: int = 0


@dataclass(frozen=True)
class Section:
    """One legacy markdown section of a namespace's working-memory document."""

    section: str
    content: str
    updated_at: datetime


@dataclass(frozen=True)
class WorkspaceRecord:
    """A workspace: its namespace (the agent namespace its records live in) and the name it was opened by."""

    namespace: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class WorkMemorySummary:
    """What the health report says of a namespace's working memory."""

    items: dict[tuple[str, str], int]  # (status, category) -> how many
    sections: int
    items_updated: datetime | None  # the latest item change
    sections_updated: datetime | None  # the latest section change
