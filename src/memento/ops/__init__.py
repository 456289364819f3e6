"""Operations: health checks, Prometheus metrics, structured logs, compression (PRODUCT D6).

The web app (`memento.web`) mounts this package: `routes(app, endpoint)` adds `/health` and
`/metrics` for the MCP endpoint beside them; `middleware(app)` adds request metrics and response
compression. `logs.configure_logging` is called once by the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # starlette is imported by the web face only: `logs` is used by stdio too
    from starlette.middleware import Middleware
    from starlette.routing import BaseRoute

    from memento.app import App
    from memento.endpoint import ServedEndpoint


def routes(app: App, endpoint: ServedEndpoint) -> list[BaseRoute]:
    """`GET /health` and `GET /metrics` for this app and its MCP endpoint."""
    from starlette.routing import Route

    from .health import health_endpoint
    from .metrics import metrics_endpoint

    return [
        Route("/health", health_endpoint(app, endpoint), methods=["GET"]),
        Route("/metrics", metrics_endpoint(app, endpoint), methods=["GET"]),
    ]


def middleware(app: App) -> list[Middleware]:
    """Request metrics (outermost, so it sees the final status) and response compression."""
    from starlette.middleware import Middleware

    from .compression import CompressionMiddleware
    from .metrics import RequestMetricsMiddleware, ops_state

    state = ops_state(app)
    return [Middleware(RequestMetricsMiddleware, state=state), Middleware(CompressionMiddleware)]
