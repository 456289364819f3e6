"""`POST /v1/distill`: seed 003's distillation (protocol_face/distill.py) over HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter

from ..protocol_face.distill_models import DistillInput, DistillResult
from .routing import Ctx, json_response, run

if TYPE_CHECKING:
    from ..app import App


def router(app: App) -> APIRouter:
    api = APIRouter(prefix="/distill", tags=["distill"])
    distiller = app.service.protocol.distill

    @api.post(
        "",
        status_code=201,
        response_model=DistillResult,
        summary="Distill a transcript into memories (source:distill)",
        responses={200: {"model": DistillResult, "description": "Nothing new stored (a dry run, or nothing novel found)."}},
    )
    async def distill(body: DistillInput, ctx: Ctx) -> object:
        result = await run(distiller.extract, body, ctx)
        return json_response(result, 201 if result.count and not result.dry_run else 200)

    return api
