"""`POST /v1/context` (seed 003): working memory, recalled memories, skip-list warnings and the
identity crystal for one message, within a token budget (protocol_face/context.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter
from starlette.responses import Response

from ..protocol_face.context import ContextCallInput, ContextCallResult
from .routing import Ctx, json_response, run

if TYPE_CHECKING:
    from ..app import App


def router(app: App) -> APIRouter:
    api = APIRouter(tags=["context"])
    face = app.service.protocol

    @api.post("/context", summary="Context for a message", response_model=ContextCallResult)
    async def context(body: ContextCallInput, ctx: Ctx) -> Response:
        """Everything relevant for `message` in one call: open working-memory items (active and
        paused), the memories it recalls, skip-list warnings it touches and the identity crystal;
        `include` picks parts, `token_budget` bounds them together (`meta` says what was left out)."""
        return json_response(await run(face.context, body, ctx))

    return api
