"""The HTTP challenge details the MCP gate shares with OAuth: `WWW-Authenticate` and the
resource URL a token's audience must name. (The routes themselves are composed by memento.web.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memento.auth import oauth

if TYPE_CHECKING:
    from memento.app import App


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
