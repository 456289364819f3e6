"""URLs in OAuth: this server's endpoints, and URLs compared as identifiers.

A client reaches the server at a base URL (the issuer); the MCP endpoint under it is the
resource every token is bound to (RFC 8707). Redirect URIs must be https, or http on a
loopback host, and a loopback one may come back on any port (OAuth 2.1 §8.4.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

MCP_PATH = "/mcp"
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


@dataclass(frozen=True)
class Endpoints:
    """The URLs of this server as a client reaches it."""

    base: str  # the issuer: scheme://host[:port] (MEMENTO_PUBLIC_URL, or the request's own)

    @property
    def resource(self) -> str:
        return self.base + MCP_PATH

    def url(self, path: str) -> str:
        return self.base + path


def with_query(url: str, **params: str | None) -> str:
    """`url` with `params` (None values left out) added to its query."""
    parts = urlsplit(url)
    extra = urlencode({k: v for k, v in params.items() if v is not None})
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def normalize_url(url: str) -> str:
    """A URL compared as an identifier: lower-case scheme and host, no default port, no
    trailing slash, no fragment (RFC 3986 §6.2.2-6.2.3)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return url
    if port is not None and not (scheme == "http" and port == 80 or scheme == "https" and port == 443):
        host = f"{host}:{port}"
    return urlunsplit((scheme, host, parts.path.rstrip("/"), parts.query, ""))


def our_resource(resource: str, ends: Endpoints) -> bool:
    """Whether a resource indicator names this server (its MCP endpoint or its base URL)."""
    if urlsplit(resource).fragment:
        return False
    return normalize_url(resource) in {normalize_url(ends.resource), normalize_url(ends.base)}


def redirect_uri_error(uri: Any) -> str | None:
    """Why `uri` cannot be a redirect URI (https, or http on a loopback host), or None."""
    if not isinstance(uri, str) or not uri or len(uri) > 2000:
        return "must be a non-empty URL string"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        return f"{uri!r} is not a valid URL"
    if parts.fragment or "#" in uri:
        return f"{uri!r} must not have a fragment"
    if not parts.hostname:
        return f"{uri!r} has no host"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http" and parts.hostname.lower() in LOOPBACK:
        return None
    return f"{uri!r} must use https, or http on a loopback address (127.0.0.1, [::1], localhost)"


def redirect_matches(registered: str, presented: str) -> bool:
    """Exact match, except that a loopback http redirect may use any port (OAuth 2.1 §8.4.2)."""
    if registered == presented:
        return True
    a, b = urlsplit(registered), urlsplit(presented)
    if a.scheme == b.scheme == "http" and (a.hostname or "").lower() in LOOPBACK:
        return ((a.hostname or "").lower(), a.path, a.query) == ((b.hostname or "").lower(), b.path, b.query)
    return False
