"""What other faces add to the HTTP server: routes (OAuth, health, metrics) and middleware.

`create_http_app` mounts everything listed here; each module adds itself with one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from memento import ops
from memento.auth import oauth, oauth_http

if TYPE_CHECKING:
    from memento.app import App


def routes(app: App, mcp: Any) -> list[BaseRoute]:
    """Extra routes; `mcp` is the McpHttp endpoint (session counts for /health)."""
    found: list[BaseRoute] = []
    found += ops.routes(app, mcp)  # /health, /metrics
    found += oauth_http.routes(app, mcp)  # OAuth metadata, /register, /authorize, /token, /revoke
    return found


def middleware(app: App, mcp: Any) -> list[Middleware]:
    """Extra ASGI middleware, outermost first."""
    found: list[Middleware] = []
    found += ops.middleware(app, mcp)  # metrics, gzip/deflate
    return found


def www_authenticate(app: App, request: Any, error: str | None = None, description: str | None = None) -> str:
    """The `WWW-Authenticate` value of a 401/403 from the MCP endpoints (RFC 6750 §3).

    `error` is None when the request carried no credential, else `invalid_request`,
    `invalid_token` or `insufficient_scope`. OAuth extends it (resource_metadata=, scope=).
    """
    params = ['realm="memento"', *oauth.challenge_params(app, request, error)]
    if error:
        params.append(f'error="{error}"')
    if description:
        params.append('error_description="' + description.replace('"', "'") + '"')
    return "Bearer " + ", ".join(params)


def resource_url(app: App, request: Any) -> str:
    """This server's MCP resource URL as a token's audience (RFC 8707), e.g. http://host:port/mcp."""
    return oauth.public_base(app, request) + oauth.MCP_PATH  # MEMENTO_PUBLIC_URL when set
