"""What other faces add to the HTTP server: routes (OAuth, health, metrics) and middleware.

`create_http_app` mounts everything listed here; each module adds itself with one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.middleware import Middleware
from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from memento.app import App


def routes(app: App, mcp: Any) -> list[BaseRoute]:
    """Extra routes; `mcp` is the McpHttp endpoint (session counts for /health)."""
    found: list[BaseRoute] = []
    return found


def middleware(app: App, mcp: Any) -> list[Middleware]:
    """Extra ASGI middleware, outermost first."""
    found: list[Middleware] = []
    return found
