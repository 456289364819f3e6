"""Content negotiation of `/mcp`: how much a request's `Accept` wants JSON and SSE.

`POST /mcp` must accept both `application/json` and `text/event-stream`, `GET /mcp` the
latter; when a POST accepts both, their q-values choose how its answer is sent (see `http`).
"""

from __future__ import annotations

import contextlib

from starlette.requests import Request


def media_ranges(request: Request) -> dict[str, float] | None:
    """Accept's media ranges and their q-values; None when the header is absent."""
    header = request.headers.get("accept")
    if not header:
        return None
    ranges: dict[str, float] = {}
    for part in header.split(","):
        kind, *parameters = (item.strip() for item in part.split(";"))
        q = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                with contextlib.suppress(ValueError):
                    q = float(value)
        if kind:
            ranges[kind.lower()] = max(q, ranges.get(kind.lower(), 0.0))
    return ranges


def quality(ranges: dict[str, float] | None, media_type: str) -> float:
    """The q-value `ranges` give `media_type` (exact, then `type/*`, then `*/*`); 0 when none."""
    if ranges is None:
        return 1.0  # no Accept header accepts anything
    major = media_type.split("/")[0]
    for candidate in (media_type, f"{major}/*", "*/*"):
        if candidate in ranges:
            return ranges[candidate]
    return 0.0


def accepts(request: Request) -> tuple[float, float]:
    """How much the client wants (JSON, SSE), as q-values; 0 means not acceptable."""
    ranges = media_ranges(request)
    return quality(ranges, "application/json"), quality(ranges, "text/event-stream")
