"""The JSON response of the HTTP transports, rendered by the total JSON-RPC encoder.

Starlette's own `JSONResponse` raises on a lone surrogate or a NaN in the content, and the
client then gets a plain-text 500; this one always sends valid JSON in UTF-8 (`jsonrpc.dumps`).
"""

from __future__ import annotations

from typing import Any

from starlette import responses

from memento.mcp import jsonrpc


class JSONResponse(responses.JSONResponse):
    """A drop-in `starlette.responses.JSONResponse` whose body is always valid JSON."""

    def render(self, content: Any) -> bytes:
        """The body: compact JSON in UTF-8, repaired rather than refused (see `jsonrpc.dumps`)."""
        return jsonrpc.dumps(content)
