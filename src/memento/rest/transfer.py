"""004 §5.1 over HTTP: `GET /api/export` streams the caller's export (NDJSON version 2, Markdown or
CSV) as it is read; `POST /api/import` restores an NDJSON version 2 body losslessly.

Both are scoped as every /api route: an agent's key exports and imports its own memories only (an
import whose records name another agent is refused with 403, nothing written); an admin
credential sees every agent unless `agent_id` narrows it to one. docs/export.md, docs/rest.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response, StreamingResponse

from ..errors import InvalidArgument
from ..exchange.export import Exporter, Format
from ..exchange.restore import check, embedder_of, kind_of, model_of, restore, scope_of
from ..models import AgentScope, MemorySystem
from ..service import MemoryService
from ..storage.protocol import AppStore, SearchFilter
from ..storage.records import RecordQuery
from .memories import Tags
from .routing import Ctx, json_response, run

MEDIA_TYPES: dict[str, str] = {
    "ndjson": "application/x-ndjson",
    "markdown": "text/markdown; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
}
SUFFIX = {"ndjson": "jsonl", "markdown": "md", "csv": "csv"}
CHUNK = 64 * 1024  # bytes sent at a time
MAINTENANCE_SCOPE = "system"


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SkippedRecord(Out):
    kind: str = Field(description="fragment, versions, link, entity, relation or entityLink.")
    key: str = Field(description="Its id, or the ids it joins.")
    reason: str = Field(description="Why it was left out (already present, names something absent, ...).")


class ImportOutcome(Out):
    """What an import read and restored, by kind of record, and what it skipped."""

    read: dict[str, int] = Field(description="Records read, by kind.")
    restored: dict[str, int] = Field(description="Records written, by kind (versions: rows of version trails).")
    skipped: int = Field(description="Records left out in all.")
    already_present: dict[str, int] = Field(description="Of those, the ones already stored (same id), by kind.")
    skipped_records: list[SkippedRecord] = Field(description="The skipped records (the first 1,000).")
    agents: dict[str, int] = Field(description="Memories restored per agent.")


def export_scope(ctx_agent: str | None) -> AgentScope:
    """An agent's own records; every agent's for an admin credential not narrowed to one."""
    if ctx_agent is None or AgentScope(ctx_agent).is_maintenance:
        return AgentScope(MAINTENANCE_SCOPE)
    return AgentScope(ctx_agent)


def _chunks(pieces: Iterable[str]) -> Iterator[bytes]:
    """The export in chunks of about CHUNK bytes (one write per record would be many tiny ones)."""
    buffer: list[bytes] = []
    size = 0
    for piece in pieces:
        data = piece.encode("utf-8")
        buffer.append(data)
        size += len(data)
        if size >= CHUNK:
            yield b"".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield b"".join(buffer)


def router(store: AppStore, service: MemoryService) -> APIRouter:
    api = APIRouter(tags=["export"])

    @api.get(
        "/export",
        summary="Export memories",
        response_class=StreamingResponse,
        responses={
            200: {"description": "The export, streamed.", "content": {t: {"schema": {"type": "string"}} for t in MEDIA_TYPES.values()}}
        },
    )
    async def export(
        ctx: Ctx,
        format: Annotated[Format, Query(description="ndjson (lossless, re-importable: format version 2), markdown or csv.")] = "ndjson",
        include_forgotten: Annotated[bool, Query(description="Also soft-forgotten and expired memories.")] = False,
        include_sessions: Annotated[bool, Query(description="Also working memory (session scope).")] = False,
        topic: Annotated[str | None, Query(min_length=1, max_length=200, description="Only this topic.")] = None,
        tags: Tags = None,
        memory_system: Annotated[MemorySystem | None, Query(description="Only this memory system.")] = None,
        since: Annotated[datetime | None, Query(description="Only memories created after this time (ISO 8601).")] = None,
    ) -> Response:
        """The caller's memories (with their versions, links and entity graph in NDJSON), read a page
        at a time and sent as they are read."""
        scope = export_scope(ctx.agent_id)
        filt = SearchFilter(
            topic=topic, tags_all=tuple(tags or ()), memory_system=memory_system, created_after=since, all_sessions=include_sessions
        )
        job = Exporter(store, scope, RecordQuery(filt, include_forgotten=include_forgotten), format)
        await run(store.flush_access)
        pieces = job.stream()
        head = await run(next, pieces)  # the header's count query: a failure here is still an error status

        def whole() -> Iterator[str]:
            yield head
            yield from pieces

        headers = {"Content-Disposition": f'attachment; filename="memento-export.{SUFFIX[format]}"'}
        return StreamingResponse(_chunks(whole()), media_type=MEDIA_TYPES[format], headers=headers)

    @api.post(
        "/import",
        summary="Import an export (NDJSON, format version 2)",
        response_model=ImportOutcome,
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "A `memento export` in format version 2 (at most MEMENTO_MAX_BODY_BYTES).",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}, "text/plain": {"schema": {"type": "string"}}},
            }
        },
    )
    async def import_(request: Request, ctx: Ctx) -> Response:
        """Restore every record of the body as it was (ids, fields, versions, links, entity graph);
        records already stored are skipped and reported, never overwritten."""
        body = await request.body()
        try:
            lines = body.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise InvalidArgument("the body is not UTF-8 text; nothing imported") from None

        def write() -> ImportOutcome:
            scope, allowed = scope_of(service, ctx)
            checked = check(lines, "body", allowed=allowed)
            total = checked.counts.get("fragment", 0)
            done = restore(
                store,
                scope,
                lines,
                "body",
                embed=embedder_of(service),
                model=model_of(service),
                total=total,
                erased=service.erasure_store.erased_hashes,
            )
            service.outbox.sweep()  # rows the provider did not embed during the import: the worker's now
            return ImportOutcome(
                read=done.read,
                restored=done.restored,
                skipped=done.skipped_total,
                already_present=done.present,
                skipped_records=[SkippedRecord(kind=kind_of(s.table), key=s.key, reason=s.reason) for s in done.skipped],
                agents=done.agents,
            )

        return json_response(await run(write))

    return api
