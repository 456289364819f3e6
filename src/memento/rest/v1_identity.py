"""Seed 003's identity crystal under /v1: `GET /v1/identity` (the latest, or how to create one),
`PUT` or `POST /v1/identity` (a new snapshot), `GET /v1/identity/history`,
`POST /v1/identity/crystallize`, over the face's identity part (protocol_face/identity.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Query

from ..protocol_face.identity import (
    CrystallizeInput,
    CrystallizeResult,
    IdentityHistory,
    IdentityHistoryInput,
    IdentityInput,
    IdentityResult,
    IdentitySnapshot,
    IdentityUpdateInput,
)
from .routing import Ctx, json_response, run

if TYPE_CHECKING:
    from ..app import App


def router(app: App) -> APIRouter:
    identity = app.service.protocol.identity
    api = APIRouter(prefix="/identity", tags=["identity"])

    @api.get("", response_model=IdentityResult, summary="The latest identity crystal (or how to create one)")
    async def latest(ctx: Ctx) -> object:
        return json_response(await run(identity.get, IdentityInput(), ctx))

    @api.put("", response_model=IdentitySnapshot, summary="Store a new identity crystal (a new snapshot; the history is kept)")
    async def replace(body: IdentityUpdateInput, ctx: Ctx) -> object:
        return json_response(await run(identity.update, body, ctx))

    @api.post("", status_code=201, response_model=IdentitySnapshot, summary="Store a new identity crystal (as PUT)")
    async def create(body: IdentityUpdateInput, ctx: Ctx) -> object:
        return json_response(await run(identity.update, body, ctx), 201)

    @api.get("/history", response_model=IdentityHistory, summary="Past snapshots, newest first")
    async def history(
        ctx: Ctx,
        limit: Annotated[int, Query(ge=1, le=50, description="How many snapshots (at most 50).")] = 10,
        include_text: Annotated[bool, Query(description="Include each snapshot's whole text.")] = False,
    ) -> object:
        return json_response(await run(identity.history, IdentityHistoryInput(limit=limit, include_text=include_text), ctx))

    @api.post(
        "/crystallize",
        response_model=CrystallizeResult,
        summary="Crystallize a new snapshot from working memory, top memories and session summaries",
        responses={201: {"model": CrystallizeResult, "description": "The crystal, stored as a new snapshot."}},
    )
    async def crystallize(ctx: Ctx, body: CrystallizeInput | None = None) -> object:
        made = await run(identity.crystallize, body or CrystallizeInput(), ctx)
        return json_response(made, 201 if made.stored else 200)

    return api
