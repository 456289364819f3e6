"""Seed 003's skip list under /v1: `GET/POST /v1/skip-list`, `GET /v1/skip-list/check?query=`,
`DELETE /v1/skip-list/{id}`, over the face's skip list (protocol_face/skips.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Path, Query

from ..protocol_face.skips import (
    MAX_QUERY_CHARS,
    SkipAddInput,
    SkipCheckInput,
    SkipCheckResult,
    SkipEntry,
    SkipListInput,
    SkipListResult,
    SkipRemoved,
    SkipRemoveInput,
)
from .routing import Ctx, json_response, run

if TYPE_CHECKING:
    from ..app import App

SkipId = Annotated[str, Path(min_length=1, max_length=64, description="Skip entry id.")]


def router(app: App) -> APIRouter:
    skips = app.service.protocol.skips
    api = APIRouter(prefix="/skip-list", tags=["skip list"])

    @api.get("", response_model=SkipListResult, summary="List the unexpired skip-list entries (newest first)")
    async def listing(ctx: Ctx) -> object:
        return json_response(await run(skips.entries, SkipListInput(), ctx))

    @api.post("", status_code=201, response_model=SkipEntry, summary="Add a skip-list entry (expires is required)")
    async def add(body: SkipAddInput, ctx: Ctx) -> object:
        return json_response(await run(skips.add, body, ctx), 201)

    @api.get("/check", response_model=SkipCheckResult, summary="Check a topic or message against the skip list (words and meaning)")
    async def check(
        ctx: Ctx, query: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="A topic or a whole message.")]
    ) -> object:
        return json_response(await run(skips.check, SkipCheckInput(query=query), ctx))

    @api.delete("/{skip_id}", response_model=SkipRemoved, summary="Remove a skip-list entry")
    async def remove(skip_id: SkipId, ctx: Ctx) -> object:
        return json_response(await run(skips.remove, SkipRemoveInput(id=skip_id), ctx))

    return api
