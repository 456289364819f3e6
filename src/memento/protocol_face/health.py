"""Seed 003's health report (memento_health, GET /v1/health): what the caller's namespace holds —
items by status and category, sections, memories — and when it last changed. Other parts of the
face add their own counts through `ProtocolFace.health_parts` (e.g. the skip list's entries)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from ..models import AgentScope, CallContext
from ..storage.protocol import SearchFilter, WorkingMemoryStore
from ..storage.workmem import CATEGORIES
from .workmem_models import HealthReport, ItemHealth, MemoryHealth, SectionHealth, iso

if TYPE_CHECKING:
    from . import ProtocolFace

# A part's contribution: (its name in `parts`, a JSON object), for the caller's scope.
HealthPart = Callable[[AgentScope, CallContext], tuple[str, dict[str, object]]]
STALE_AFTER = timedelta(hours=24)


class Health:
    """The health report of the caller's namespace."""

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face

    def report(self, ctx: CallContext) -> HealthReport:
        scope = self.face.read_scope(ctx)
        store, now = self.face.service.store, self.face.service.clock()
        summary = cast(WorkingMemoryStore, store).working_memory_summary(scope)  # every backend is an AppStore
        own = SearchFilter(owner=scope.agent_id)
        newest = store.recent(scope, own, 1)
        by_status: dict[str, int] = {}
        for (status, _), n in summary.items.items():
            by_status[status] = by_status.get(status, 0) + n
        items = ItemHealth(
            active={c: summary.items.get(("active", c), 0) for c in CATEGORIES},
            paused=by_status.get("paused", 0),
            completed=by_status.get("completed", 0),
            archived=by_status.get("archived", 0),
            total=sum(by_status.values()),
        )
        working = max((t for t in (summary.items_updated, summary.sections_updated) if t is not None), default=None)
        latest = max((t for t in (working, newest[0].created_at if newest else None) if t is not None), default=None)
        parts = dict(part(scope, ctx) for part in self.face.health_parts)
        return HealthReport(
            namespace=scope.agent_id,
            workspace=ctx.workspace,
            items=items,
            sections=SectionHealth(count=summary.sections, last_updated=iso(summary.sections_updated)),
            memories=MemoryHealth(total=store.count(scope, own), newest_at=iso(newest[0].created_at) if newest else None),
            last_update=iso(latest),
            parts=parts,
            warnings=_warnings(items, working, now),
        )


def _warnings(items: ItemHealth, working: datetime | None, now: datetime) -> list[str]:
    if items.total == 0 and working is None:
        return ["working memory is empty: create items with memento_item_create (or run memento_init)"]
    if working is not None and now - working > STALE_AFTER:
        hours = int((now - working).total_seconds() // 3600)
        return [f"working memory has not changed for {hours} hours: update the items you worked on"]
    return []
