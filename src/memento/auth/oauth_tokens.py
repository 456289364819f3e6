"""The token endpoint, revocation, and the resource server's check of access tokens.

Tokens are opaque random strings (`mma_…` access, `mmr_…` refresh) kept as digests. An
authorization code is redeemed once, with its PKCE verifier; a refresh token is rotated on
every use. Reusing either revokes every token of the grant (reuse detection), and every token
is bound to the MCP URL it was issued for (RFC 8707).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from .oauth_protocol import IGNORED_SCOPES, OAuthError, digest, unknown_scopes
from .oauth_store import Client, Grant, OAuthStore, Token
from .oauth_urls import Endpoints, normalize_url, our_resource
from .principal import Principal

log = logging.getLogger(__name__)

_PKCE = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")  # RFC 7636 §4.1 verifier alphabet and length


def s256(verifier: str) -> str:
    """The PKCE S256 challenge of a verifier: unpadded base64url of its SHA-256."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


class Tokens:
    """Issues, rotates, revokes and verifies the tokens kept in the store."""

    def __init__(self, store: OAuthStore, clock: Callable[[], float], *, access_ttl_s: float, refresh_ttl_s: float) -> None:
        self.store = store
        self.clock = clock
        self.access_ttl_s = access_ttl_s
        self.refresh_ttl_s = refresh_ttl_s

    def authenticate_client(self, form: Mapping[str, str], basic: tuple[str, str] | None) -> Client:
        """The client of a token/revocation request (RFC 6749 §2.3); OAuthError invalid_client."""
        secret: str | None
        if basic is not None:
            client_id, secret = basic
            if form.get("client_id") not in (None, client_id):
                raise OAuthError("invalid_request", "client_id in the body differs from the Authorization header")
            if "client_secret" in form:
                raise OAuthError("invalid_request", "use one client authentication method, not two")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret")
        client = self.store.get_client(client_id) if client_id else None
        if client is None:
            raise OAuthError("invalid_client", "unknown client (registrations can be forgotten: register again)", 401)
        if client.secret_digest is not None:
            if not secret or not hmac.compare_digest(client.secret_digest, digest(secret)):
                raise OAuthError("invalid_client", "client authentication failed", 401)
        elif secret:
            raise OAuthError("invalid_client", "this client is public: it has no secret", 401)
        return client

    def token(self, form: Mapping[str, str], basic: tuple[str, str] | None, ends: Endpoints) -> dict[str, Any]:
        """The token endpoint: authorization_code and refresh_token grants."""
        grant_type = form.get("grant_type")
        if not grant_type:
            raise OAuthError("invalid_request", "grant_type is required")
        if grant_type not in ("authorization_code", "refresh_token"):
            raise OAuthError("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
        client = self.authenticate_client(form, basic)
        resource = form.get("resource")
        grant = self._redeem_code(form, client) if grant_type == "authorization_code" else self._rotate_refresh(form, client)
        if (
            resource is not None
            and normalize_url(resource) != normalize_url(grant.resource)
            and not (our_resource(resource, ends) and normalize_url(ends.resource) == normalize_url(grant.resource))
        ):
            raise OAuthError("invalid_target", f"resource must be {grant.resource}")
        return self._issue(grant)

    def _redeem_code(self, form: Mapping[str, str], client: Client) -> Grant:
        code_value = form.get("code")
        verifier = form.get("code_verifier")
        if not code_value:
            raise OAuthError("invalid_request", "code is required")
        if not verifier:
            raise OAuthError("invalid_request", "code_verifier is required (PKCE)")
        code = self.store.use_code(digest(code_value))
        if code is None or code.expires_at <= self.clock():
            raise OAuthError("invalid_grant", "the authorization code is invalid or expired")
        if code.used:
            revoked = self.store.revoke_family(code.grant.family)
            log.warning("OAuth: authorization code reused by %s; revoked %d token(s) issued from it", client.client_id, revoked)
            raise OAuthError("invalid_grant", "the authorization code was already used")
        if code.grant.client_id != client.client_id:
            raise OAuthError("invalid_grant", "the authorization code was issued to another client")
        if form.get("redirect_uri") != code.redirect_uri:
            raise OAuthError("invalid_grant", "redirect_uri does not match the authorization request")
        if not _PKCE.match(verifier) or not hmac.compare_digest(s256(verifier), code.code_challenge):
            raise OAuthError("invalid_grant", "PKCE verification failed: code_verifier does not match code_challenge")
        return code.grant

    def _rotate_refresh(self, form: Mapping[str, str], client: Client) -> Grant:
        value = form.get("refresh_token")
        if not value:
            raise OAuthError("invalid_request", "refresh_token is required")
        token = self.store.use_refresh(digest(value))
        if token is None or token.expires_at <= self.clock():
            raise OAuthError("invalid_grant", "the refresh token is invalid, expired or revoked")
        if token.grant.client_id != client.client_id:
            raise OAuthError("invalid_grant", "the refresh token was issued to another client")
        if token.used:
            revoked = self.store.revoke_family(token.grant.family)
            log.warning("OAuth: refresh token reused by %s; revoked its grant (%d token(s))", client.client_id, revoked)
            raise OAuthError("invalid_grant", "the refresh token was already used; the grant is revoked")
        scope = form.get("scope")
        if scope is not None:
            asked = scope.split()
            if unknown_scopes(asked) or not set(asked) - IGNORED_SCOPES <= set(token.grant.scopes):
                raise OAuthError("invalid_scope", "a refresh may not widen the granted scope")
        return token.grant

    def _issue(self, grant: Grant) -> dict[str, Any]:
        now = self.clock()
        access, refresh = "mma_" + secrets.token_urlsafe(32), "mmr_" + secrets.token_urlsafe(32)
        self.store.put_token(digest(access), Token("access", grant, now + self.access_ttl_s))
        self.store.put_token(digest(refresh), Token("refresh", grant, now + self.refresh_ttl_s))
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": int(self.access_ttl_s),
            "refresh_token": refresh,
            "scope": " ".join(grant.scopes),
        }

    def revoke(self, form: Mapping[str, str], basic: tuple[str, str] | None) -> None:
        """RFC 7009: revoke a token of the authenticated client (and, for refresh, its grant)."""
        client = self.authenticate_client(form, basic)
        value = form.get("token")
        if not value:
            raise OAuthError("invalid_request", "token is required")
        token = self.store.get_token(digest(value))
        if token is not None and token.grant.client_id == client.client_id:
            self.store.revoke_family(token.grant.family)

    def verify(self, token: str, *, resource: str | None = None) -> Principal | None:
        """The principal of an access token for `resource`; None when it is unknown, expired,
        revoked, a refresh token, or issued for another audience (RFC 8707)."""
        if not token.startswith("mma_") or resource is None:
            return None
        found = self.store.get_token(digest(token))
        if found is None or found.kind != "access" or found.expires_at <= self.clock():
            return None
        if normalize_url(found.grant.resource) != normalize_url(resource):
            return None
        grant = found.grant
        return Principal(
            subject=grant.client_id, agent_id=grant.agent_id, read_only=grant.read_only, scopes=frozenset(grant.scopes), kind="oauth"
        )
