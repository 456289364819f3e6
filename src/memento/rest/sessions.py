"""`/api/sessions`: 004 §5.1 summarize_thread over REST — a session's working memory into one
episodic memory (summarize.py), as the MCP tool does."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..models import SummarizeThreadInput
from ..results import SummarizeThreadResult
from ..service import MemoryService
from .routing import Ctx, json_response, run

SessionId = Annotated[str, Path(min_length=1, max_length=200, description="The session whose working memory is summarized.")]


class SummarizeBody(BaseModel):
    """How to summarize: the summary's first line, and whether the items stay."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=2000, description="The summary's first line.")
    keep: bool = Field(default=True, description="false: remove the summarized items from working memory.")


def router(memory: MemoryService) -> APIRouter:
    api = APIRouter(prefix="/sessions", tags=["memories"])

    @api.post(
        "/{session_id}/summarize",
        status_code=201,
        response_model=SummarizeThreadResult,
        summary="Summarize a session's working memory into one episodic memory",
    )
    async def summarize(session_id: SessionId, ctx: Ctx, body: SummarizeBody | None = None) -> object:
        given = body or SummarizeBody()
        try:
            inp = SummarizeThreadInput(sessionId=session_id, title=given.title, keep=given.keep)
        except ValidationError as exc:
            raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from exc
        return json_response(await run(memory.summarize_thread, inp, ctx), 201)

    return api
