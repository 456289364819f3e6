"""`/api/lifecycle/*` (issue 13): trigger a consolidation run and list the recent runs, scheduled
and manual (docs/lifecycle.md "Scheduling"), behind /api's gate like every other route."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ..models import ConsolidateInput
from ..results import ConsolidateResult, ConsolidationRunsResult
from ..service import MemoryService
from .routing import Ctx, json_response, run


def router(memory: MemoryService) -> APIRouter:
    api = APIRouter(prefix="/lifecycle", tags=["lifecycle"])

    @api.post(
        "/consolidate",
        response_model=ConsolidateResult,
        summary="Run the consolidation pipeline now (recorded as a manual run); per-stage counts",
    )
    async def consolidate(ctx: Ctx, body: ConsolidateInput | None = None) -> object:
        return json_response(await run(memory.memory_consolidate, body or ConsolidateInput(), ctx))

    @api.get("/runs", response_model=ConsolidationRunsResult, summary="Recent consolidation runs, newest first")
    async def runs(ctx: Ctx, limit: Annotated[int, Query(ge=1, le=1000, description="Runs listed (at most 1000).")] = 20) -> object:
        return json_response(await run(memory.consolidation_runs, limit, ctx))

    return api
