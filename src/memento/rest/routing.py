"""What every REST route shares: the caller's CallContext as a dependency, blocking service calls in
worker threads, and results sent as JSON exactly as their models dump them."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from fastapi import Depends, Query, Request
from pydantic import BaseModel
from starlette.responses import Response

from ..fields import AgentId
from ..models import CallContext
from .guard import call_context, principal_of

T = TypeVar("T")


def _context(
    request: Request,
    agent_id: Annotated[
        AgentId | None, Query(description="Act in this agent's namespace (admin credentials; an agent's own id is accepted too).")
    ] = None,
) -> CallContext:
    ctx = call_context(principal_of(request), agent_id)
    request.state.ctx = ctx  # for the error handler (problems.install: a memory merged away is explained)
    return ctx


Ctx = Annotated[CallContext, Depends(_context)]


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (database, embeddings) in a worker thread."""
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))


def json_response(result: BaseModel, status: int = 200) -> Response:
    """`result` as JSON (by alias; optional fields that are None left out where the model says so)."""
    return Response(result.model_dump_json(by_alias=True), status_code=status, media_type="application/json")
