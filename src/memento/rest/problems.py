"""Every REST error as an RFC 9457 problem document (`application/problem+json`).

`type` is a URN naming the problem (`urn:memento:problem:not_found`), `title` the HTTP reason,
`status` the HTTP status, `detail` what went wrong in this request; `code` repeats the Memento
error code and a validation problem lists its `errors` (where and why). memento.errors map to
statuses once, here: InvalidArgument 400, Forbidden 403, NotFound 404, Conflict 409, Unavailable
503; a request that does not match the API's schema is 422.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..errors import Conflict, Forbidden, InvalidArgument, MementoError, NotFound, Unavailable
from ..models import CallContext

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
STATUS_OF: tuple[tuple[type[MementoError], int], ...] = (
    (InvalidArgument, 400),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (Unavailable, 503),
)
CODE_OF_STATUS = {
    400: "invalid_argument",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "invalid_request",
    500: "internal_error",
    503: "unavailable",
}


class FieldError(BaseModel):
    """One reason a request does not match the schema."""

    loc: list[str | int] = Field(description="Where: body, query or path, then the field names.")
    msg: str = Field(description="Why.")
    type: str = Field(description="The validation error's kind.")


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = Field(description="A URN naming the problem, e.g. urn:memento:problem:not_found.")
    title: str = Field(description="The HTTP reason phrase.")
    status: int = Field(description="The HTTP status code.")
    detail: str = Field(description="What went wrong in this request.")
    code: str = Field(description="Memento's error code (not_found, invalid_argument, forbidden, ...).")
    errors: list[FieldError] | None = Field(default=None, description="The schema violations of a 422.")


def problem(status: int, detail: str, *, code: str | None = None, headers: dict[str, str] | None = None, errors: Any = None) -> Response:
    """A problem+json response."""
    code = code or CODE_OF_STATUS.get(status, "error")
    body: dict[str, Any] = {
        "type": f"urn:memento:problem:{code}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors is not None:
        body["errors"] = errors
    return Response(json.dumps(body, ensure_ascii=False), status_code=status, media_type=MEDIA_TYPE, headers=headers)


def status_of(exc: MementoError) -> int:
    for kind, status in STATUS_OF:
        if isinstance(exc, kind):
            return status
    return 500


def from_gate(refusal: Response) -> Response:
    """The gate's refusal (a JSON-RPC error body, shared with /mcp) as a problem, headers kept."""
    detail = HTTPStatus(refusal.status_code).phrase
    try:
        detail = str(json.loads(bytes(refusal.body))["error"]["message"])
    except (ValueError, KeyError, TypeError):
        pass
    kept = {k: v for k, v in refusal.headers.items() if k.lower() == "www-authenticate"}
    return problem(refusal.status_code, detail, headers=kept)


def _field_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for e in errors:
        loc = [p if isinstance(p, int) else str(p) for p in e.get("loc", ())]
        out.append({"loc": loc, "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))})
    return out


def _summary(errors: list[dict[str, Any]]) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in errors[:5]]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


def install(api: FastAPI, explain: Callable[[MementoError, CallContext], MementoError] | None = None) -> None:
    """Answer every error of `api` with a problem document; `explain` (MemoryService.explain)
    adds to an error what the caller should know (where a memory it named was merged)."""

    async def memento_error(request: Request, raised: Exception) -> Response:
        assert isinstance(raised, MementoError)
        ctx = getattr(request.state, "ctx", None)
        exc = raised if explain is None or not isinstance(ctx, CallContext) else await anyio.to_thread.run_sync(explain, raised, ctx)
        status = status_of(exc)
        if status == 500:
            log.error("unmapped error on %s %s: %s", request.method, request.url.path, exc)
        return problem(status, exc.message, code=exc.code if status != 500 else None)

    async def request_invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = _field_errors(exc.errors())
        return problem(422, _summary(errors), errors=errors)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return problem(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))

    async def unexpected(request: Request, exc: Exception) -> Response:
        # Starlette re-raises the exception after this answer: the server logs it with its traceback.
        return problem(500, "internal error; see the server log")

    api.add_exception_handler(MementoError, memento_error)
    api.add_exception_handler(RequestValidationError, request_invalid)
    api.add_exception_handler(HTTPException, http_error)
    api.add_exception_handler(Exception, unexpected)


ERROR_STATUSES = (400, 401, 403, 404, 409, 422, 503)


def problem_responses(openapi: dict[str, Any]) -> dict[str, Any]:
    """`openapi` with every error response documented as a problem+json Problem."""
    schemas = openapi.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in Problem.model_json_schema(ref_template="#/components/schemas/{model}").get("$defs", {}).items():
        schemas[name] = schema
    schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    schemas["Problem"] = schema
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    ref = {"$ref": "#/components/schemas/Problem"}
    for path in openapi.get("paths", {}).values():
        for operation in path.values():
            responses = operation.setdefault("responses", {})
            for status in ERROR_STATUSES:
                responses[str(status)] = {"description": HTTPStatus(status).phrase, "content": {MEDIA_TYPE: {"schema": ref}}}
    return openapi
