"""The `export` tool (004 §5.1): one page of the caller's own export at a time, since an MCP result
is not a stream. The first page opens with the format's header, the last one closes with the
NDJSON trailer, so the pages' `text` joined in order is the whole export (`memento import` reads it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, cast

from pydantic import Field, Strict, StringConstraints, field_validator

from ..access import call_scope
from ..errors import InvalidArgument
from ..fields import MAX_LIST_ITEMS, AgentId, OperationInput, Tag, Topic, aware
from ..models import AGENT_ID, CallContext, MemorySystem
from ..results import Result
from ..storage.protocol import RecordStore, SearchFilter
from ..storage.records import RecordQuery
from .export import Exporter, Format, Position

if TYPE_CHECKING:
    from ..service import MemoryService

PAGE_CHARS = 40_000  # a page's text stops growing past this (it holds at least one record)
MAX_PAGE = 500


class ExportFilters(OperationInput):
    """Which memories: all of these that are given."""

    topic: Topic | None = Field(default=None, description="Only this topic.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Has every tag.")
    memorySystem: MemorySystem | None = Field(default=None, description="Only this system.")
    since: datetime | None = Field(default=None, strict=False, description="Created after this time.")

    _since_aware = field_validator("since")(aware)


class ExportInput(OperationInput):
    """Export your memories, a page at a time."""

    format: Format = Field(default="ndjson", description="ndjson (lossless, re-importable), markdown or csv.")
    filters: ExportFilters | None = Field(
        default=None, description="{topic, tags (all), memorySystem, since (ISO time)}.", json_schema_extra={"collapse": True}
    )
    cursor: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2000)] | None = Field(
        default=None, description="nextCursor of the previous page."
    )
    limit: Annotated[int, Strict(), Field(ge=1, le=MAX_PAGE)] = Field(default=100, description="Most records per page.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)


class ExportPage(Result):
    """One page of an export: its text, how many records it holds, and the cursor of the next
    page (null after the last)."""

    format: str
    text: str
    count: int
    next_cursor: str | None


def export_page(service: MemoryService, inp: ExportInput, ctx: CallContext) -> ExportPage:
    """The page of the caller's export that `inp.cursor` points at (the first without one)."""
    scope = call_scope(inp.agentId, ctx)
    if scope.is_maintenance:
        raise InvalidArgument("agentId: name the agent to export (the maintenance scope is every agent, not one)")
    f = inp.filters or ExportFilters()
    filt = SearchFilter(topic=f.topic, tags_all=tuple(f.tags or ()), memory_system=f.memorySystem, created_after=f.since)
    store = cast(RecordStore, service.store)  # every backend is an AppStore (storage/protocol.py)
    job = Exporter(store, scope, RecordQuery(filt), inp.format, page=min(inp.limit + 1, MAX_PAGE))
    parts: list[str] = []
    if inp.cursor is None:
        service.store.flush_access()  # settled access counts
        owners = job.owners()
        parts.append(job.head(job.agents(owners), sum(owners.values()), datetime.now(UTC)))
        start = Position()
    else:
        start = Position.parse(inp.cursor, inp.format)
    size, count, last = sum(map(len, parts)), 0, start
    records = job.body(start)
    for text, position in records:
        if count == inp.limit or (count and size + len(text) > PAGE_CHARS):
            return ExportPage(format=inp.format, text="".join(parts), count=count, next_cursor=last.token(inp.format))
        parts.append(text)
        size, count, last = size + len(text), count + 1, position
    parts.append(job.tail())
    return ExportPage(format=inp.format, text="".join(parts), count=count, next_cursor=None)
