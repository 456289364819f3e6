"""The terms every part of the OAuth server shares: scopes, client authentication methods,
the error responses, and how secrets are kept (SHA-256 digests, never the secrets).

Scopes: `memory:read` (search, recall, context) and `memory:write` (everything else an agent
may do). A grant without `memory:write` is read-only.
"""

from __future__ import annotations

import hashlib
import math

from .oauth_urls import with_query

READ = "memory:read"
WRITE = "memory:write"
SCOPES = (READ, WRITE)
IGNORED_SCOPES = frozenset({"offline_access"})  # refresh tokens are always issued
AUTH_METHODS = ("none", "client_secret_post", "client_secret_basic")


def digest(secret: str) -> bytes:
    """How a secret (client secret, code, token, operator key) is stored and compared."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def unknown_scopes(scopes: list[str]) -> list[str]:
    """The scopes this server neither grants nor ignores."""
    return [s for s in scopes if s not in SCOPES and s not in IGNORED_SCOPES]


class OAuthError(Exception):
    """An error response of the token or registration endpoint (RFC 6749 §5.2, RFC 7591 §3.2.2)."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.status = status

    def body(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}


class RateLimited(OAuthError):
    """Too many registrations from one address, or overall: 429 with Retry-After."""

    def __init__(self, retry_after_s: float) -> None:
        self.retry_after_s = max(1, math.ceil(retry_after_s))
        super().__init__("temporarily_unavailable", f"too many client registrations; try again in {self.retry_after_s} s", 429)


class Refused(Exception):
    """An authorization request that cannot be answered by redirecting to the client: the
    client or redirect URI is unknown or invalid, so the user sees an error page instead."""

    def __init__(self, title: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.title = title
        self.message = message
        self.status = status


class RedirectError(Exception):
    """An authorization error sent back to the client's (verified) redirect URI (RFC 6749 §4.1.2.1)."""

    def __init__(self, redirect_uri: str, error: str, description: str, state: str | None) -> None:
        super().__init__(f"{error}: {description}")
        self.location = with_query(redirect_uri, error=error, error_description=description, state=state)
