"""The authorization endpoint and the operator's consent (OAuth 2.1 §4.1, PKCE S256 only).

An authorization request is checked in two stages: while its client or redirect URI cannot
be trusted the user sees an error page (`Refused`); after that errors go back to the client's
redirect URI (`RedirectError`). A valid request waits, as a `PendingAuthorization`, for the
operator to approve it on the consent page (choosing the agent namespace and read-only or
read-write access) or deny it; approval issues a one-time authorization code.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable, Mapping

from ..models import MAINTENANCE_AGENTS
from .oauth_protocol import READ, SCOPES, WRITE, RedirectError, Refused, digest, unknown_scopes
from .oauth_store import AuthorizationCode, Client, Grant, OAuthStore, PendingAuthorization
from .oauth_urls import Endpoints, our_resource, redirect_matches, with_query

log = logging.getLogger(__name__)

CODE_TTL_S = 60.0
CONSENT_TTL_S = 600.0
MAX_KEY_ATTEMPTS = 5
_AGENT = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")  # models.AgentId
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url(SHA-256), unpadded


def suggested_agent(client_name: str) -> str:
    """A namespace proposal for the consent form, from the client's name."""
    slug = re.sub(r"[^A-Za-z0-9_.:@-]+", "-", client_name.strip().lower()).strip("-.")[:64]
    return slug if slug and slug not in MAINTENANCE_AGENTS else "mcp-client"


def agent_error(agent: str) -> str | None:
    """Why `agent` cannot be the namespace of a grant, or None."""
    if not _AGENT.match(agent):
        return "The agent namespace must be 1-128 letters, digits or _ . : @ -"
    if agent in MAINTENANCE_AGENTS:
        return f"{agent!r} is reserved for maintenance"
    return None


class Consent:
    """Authorization requests waiting for the operator, and the codes approving them issues."""

    def __init__(self, store: OAuthStore, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock

    def begin(self, params: Mapping[str, str], ends: Endpoints, now: float) -> tuple[PendingAuthorization, Client]:
        """Validate an authorization request; the pending request to show the consent page for.

        Raises `Refused` while the redirect URI cannot be trusted, `RedirectError` after."""
        client, redirect_uri = self._client_and_redirect(params)
        state = params.get("state")

        def fail(error: str, description: str) -> RedirectError:
            return RedirectError(redirect_uri, error, description, state)

        if params.get("response_type") != "code":
            raise fail("unsupported_response_type", "response_type must be code")
        challenge = params.get("code_challenge")
        method = params.get("code_challenge_method")
        if not challenge:
            raise fail("invalid_request", "PKCE is required: code_challenge is missing")
        if method != "S256":
            raise fail("invalid_request", "PKCE code_challenge_method must be S256" + ("" if method else " (it is missing)"))
        if not _CHALLENGE.match(challenge):
            raise fail("invalid_request", "code_challenge must be the unpadded base64url SHA-256 of the verifier")
        resource = params.get("resource")
        if resource is not None and not our_resource(resource, ends):
            raise fail("invalid_target", f"resource must be this server's MCP endpoint, {ends.resource}")
        requested = (params.get("scope") or "").split()
        unknown = unknown_scopes(requested)
        if unknown:
            raise fail("invalid_scope", f"unknown scope(s): {' '.join(unknown)}; supported: {' '.join(SCOPES)}")
        scopes = tuple(s for s in SCOPES if s in requested) or SCOPES
        if scopes == (WRITE,):
            scopes = SCOPES  # writing includes reading
        pending = PendingAuthorization(
            id=secrets.token_urlsafe(24),
            client_id=client.client_id,
            redirect_uri=redirect_uri,
            state=state,
            code_challenge=challenge,
            resource=ends.resource,
            scopes=scopes,
            expires_at=now + CONSENT_TTL_S,
        )
        self.store.put_pending(pending)
        return pending, client

    def _client_and_redirect(self, params: Mapping[str, str]) -> tuple[Client, str]:
        """The registered client and the redirect URI it asked for; `Refused` when either is not."""
        client_id = params.get("client_id") or ""
        client = self.store.get_client(client_id) if client_id else None
        if client is None:
            raise Refused(
                "Unknown client",
                "The client_id is missing or not registered with this server "
                "(registrations are forgotten when the server restarts without Redis, or after long disuse: "
                "the client must register again).",
            )
        presented = params.get("redirect_uri")
        if presented is None:
            if len(client.redirect_uris) != 1:
                raise Refused("Missing redirect_uri", "The client registered several redirect URIs; the request must name one.")
            return client, client.redirect_uris[0]
        if any(redirect_matches(r, presented) for r in client.redirect_uris):
            return client, presented
        raise Refused("Invalid redirect_uri", "The redirect_uri is not one the client registered.")

    def pending(self, pending_id: str) -> tuple[PendingAuthorization, Client] | None:
        """A request still waiting for the operator, and its client; None when gone or expired."""
        pending = self.store.get_pending(pending_id)
        if pending is None or pending.expires_at <= self.clock():
            return None
        client = self.store.get_client(pending.client_id)
        return (pending, client) if client is not None else None

    def deny(self, pending_id: str, description: str = "the operator denied the request") -> str | None:
        """Drop a request; the redirect URL telling its client (None: request gone)."""
        pending = self.store.take_pending(pending_id)
        if pending is None:
            return None
        return with_query(pending.redirect_uri, error="access_denied", error_description=description, state=pending.state)

    def wrong_key(self, pending_id: str) -> int:
        """Count a wrong operator key; attempts left (0: the request must be denied)."""
        failures = self.store.count_failure(pending_id)
        left = MAX_KEY_ATTEMPTS - failures  # at 0 the caller denies (and drops) the request
        log.warning("OAuth consent: wrong operator key (%d attempt(s) left)", max(left, 0))
        return max(left, 0)

    def approve(self, pending_id: str, agent_id: str, read_only: bool) -> str | None:
        """Issue the code for a consented request; the redirect URL (None: request gone)."""
        pending = self.store.take_pending(pending_id)
        if pending is None or pending.expires_at <= self.clock():
            return None
        if not self.store.mark_client_used(pending.client_id):  # dropped unused meanwhile
            return None
        if WRITE not in pending.scopes:
            read_only = True
        scopes = (READ,) if read_only else SCOPES
        grant = Grant(
            family=secrets.token_urlsafe(12),
            client_id=pending.client_id,
            agent_id=agent_id,
            read_only=read_only,
            scopes=scopes,
            resource=pending.resource,
        )
        code = secrets.token_urlsafe(32)
        self.store.put_code(
            digest(code),
            AuthorizationCode(
                grant=grant, redirect_uri=pending.redirect_uri, code_challenge=pending.code_challenge, expires_at=self.clock() + CODE_TTL_S
            ),
        )
        log.info("OAuth consent: client %s may use agent %s (%s)", pending.client_id, agent_id, "read-only" if read_only else "read-write")
        return with_query(pending.redirect_uri, code=code, state=pending.state)
