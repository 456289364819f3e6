"""Operations: health checks, Prometheus metrics, structured logs, compression (PRODUCT D6).

The HTTP server mounts this package through `memento.mcp.http_extras`:
`routes(app, mcp)` adds `/health` and `/metrics`; `middleware(app, mcp)` adds request
metrics and response compression. `logs.configure_logging` is called once by the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from memento.app import App


def routes(app: App, mcp: Any) -> list[BaseRoute]:
    """`GET /health` and `GET /metrics` for this app and its MCP endpoint."""
    from .health import health_endpoint
    from .metrics import metrics_endpoint

    return [
        Route("/health", health_endpoint(app, mcp), methods=["GET"]),
        Route("/metrics", metrics_endpoint(app, mcp), methods=["GET"]),
    ]


def middleware(app: App, mcp: Any) -> list[Middleware]:
    """Request metrics (outermost, so it sees the final status) and response compression."""
    from .compression import CompressionMiddleware
    from .metrics import RequestMetricsMiddleware, ops_state

    state = ops_state(app)
    return [
        Middleware(RequestMetricsMiddleware, state=state),
        Middleware(CompressionMiddleware),
    ]
