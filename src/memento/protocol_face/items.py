"""Seed 003's working-memory items: structured entries of a namespace with a category, a status, a
priority (0-10), tags and a next action. Over the WorkingMemoryStore; every operation in the scope
ProtocolFace decides. docs/protocol.md "Working memory"."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, cast

from ..errors import InvalidArgument, NotFound
from ..models import CallContext
from ..storage.protocol import WorkingMemoryStore
from ..storage.workmem import OPEN_STATUSES, ItemChanges, ItemQuery, WorkItem, fold
from .workmem_models import ItemCreateInput, ItemDeleted, ItemFields, ItemList, ItemListInput, ItemOut

if TYPE_CHECKING:
    from . import ProtocolFace

CONTEXT_ITEMS = 50  # the most items the context call is handed
MAX_TERMS = 20  # words of a list query
EDITABLE = ("title", "content", "category", "status", "priority", "tags", "next_action")


def new_item_id() -> str:
    return "item-" + secrets.token_hex(8)


class Items:
    """Create, change, delete and list the caller's items."""

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face
        self.store = cast(WorkingMemoryStore, face.service.store)  # every backend is an AppStore

    def create(self, inp: ItemCreateInput, ctx: CallContext) -> ItemOut:
        scope = self.face.write_scope(ctx)
        now = self.face.service.clock()
        item = WorkItem(
            id=new_item_id(),
            agent_id=scope.agent_id,
            category=inp.category,
            title=inp.title,
            content=inp.content or "",
            status=inp.status or "active",
            priority=0 if inp.priority is None else inp.priority,
            tags=tuple(dict.fromkeys(inp.tags or ())),
            next_action=inp.next_action or None,
            created_at=now,
            updated_at=now,
        )
        self.store.add_item(scope, item)
        return ItemOut.of(item)

    def get(self, item_id: str, ctx: CallContext) -> ItemOut:
        scope = self.face.read_scope(ctx)
        found = self.store.get_item(scope, item_id)
        if found is None:
            raise NotFound(_missing(item_id))
        return ItemOut.of(found)

    def update(self, item_id: str, inp: ItemFields, ctx: CallContext) -> ItemOut:
        """Change only the fields `inp` gives; `tags` replaces the old ones, a null next_action clears it."""
        given = inp.model_fields_set & set(EDITABLE)
        changes = ItemChanges(
            title=inp.title,
            content=inp.content,
            category=inp.category,
            status=inp.status,
            priority=inp.priority,
            tags=None if inp.tags is None else tuple(dict.fromkeys(inp.tags)),
            next_action=inp.next_action or None,
            set_next_action="next_action" in given,
        )
        if not any(getattr(inp, name) is not None for name in EDITABLE) and not changes.set_next_action:
            raise InvalidArgument("nothing to update: give at least one of " + ", ".join(EDITABLE))
        scope = self.face.write_scope(ctx)
        updated = self.store.update_item(scope, item_id, changes, self.face.service.clock())
        if updated is None:
            raise NotFound(_missing(item_id))
        return ItemOut.of(updated)

    def delete(self, item_id: str, ctx: CallContext) -> ItemDeleted:
        scope = self.face.write_scope(ctx)
        if not self.store.delete_item(scope, item_id):
            raise NotFound(_missing(item_id))
        return ItemDeleted(deleted=True, id=item_id)

    def listing(self, inp: ItemListInput, ctx: CallContext) -> ItemList:
        """Items by priority (highest first), then newest first; without a status filter the open
        ones (active and paused)."""
        terms = tuple(dict.fromkeys(fold(inp.query or "").split()))
        if len(terms) > MAX_TERMS:
            raise InvalidArgument(f"query: at most {MAX_TERMS} words")
        scope = self.face.read_scope(ctx)
        query = ItemQuery(
            category=inp.category,
            statuses=OPEN_STATUSES if inp.status is None else (inp.status,),
            terms=terms,
            limit=inp.limit,
            offset=inp.offset,
        )
        found, total = self.store.list_items(scope, query)
        return ItemList(items=[ItemOut.of(i) for i in found], total=total, limit=inp.limit, offset=inp.offset)

    def for_context(self, ctx: CallContext) -> list[WorkItem]:
        """The caller's open items (active and paused) for the context call: priority first, then
        newest first, at most CONTEXT_ITEMS."""
        scope = self.face.read_scope(ctx)
        found, _ = self.store.list_items(scope, ItemQuery(statuses=OPEN_STATUSES, limit=CONTEXT_ITEMS))
        return found


def _missing(item_id: str) -> str:
    return f"item {item_id[:80]!r} not found"


__all__ = ["CONTEXT_ITEMS", "Items", "new_item_id"]
