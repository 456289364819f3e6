"""OAuth 2.1 for the MCP endpoints: an authorization server and the resource server's token check.

Memento is its own authorization server (MCP authorization 2025-03-26 / 2025-06-18 /
2025-11-25): metadata (RFC 8414, RFC 9728), dynamic client registration (RFC 7591), the
authorization-code grant with PKCE S256 only, resource indicators (RFC 8707) binding every
token to this server's MCP URL, and refresh-token rotation with reuse detection. The operator
approves each client on a consent page with the operator access key (MEMENTO_ACCESS_KEY),
choosing the agent namespace and read-only or read-write access the client's tokens get; without
an operator key nobody can approve, so OAuth is off (`OAuthServer.active`).

This module is the protocol logic, free of HTTP; `oauth_http` puts it on routes and
`oauth_pages` draws the consent page. Tokens are opaque random strings kept as SHA-256
digests in an `OAuthStore`: in this process by default, in Redis (shared by every replica) with
REDIS_ENABLED; see `oauth_store` and `oauth_redis`.

Scopes: `memory:read` (search, recall, context) and `memory:write` (everything else an agent
may do). A grant without `memory:write` is read-only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import math
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from ..models import MAINTENANCE_AGENTS
from .oauth_store import (
    MAX_UNUSED_CLIENTS,
    UNUSED_CLIENT_TTL_S,
    AuthorizationCode,
    Client,
    Grant,
    MemoryOAuthStore,
    OAuthStore,
    PendingAuthorization,
    Token,
    window_of,
)
from .principal import Principal
from .registry import per_app

if TYPE_CHECKING:
    from ..app import App
    from ..settings import Settings

log = logging.getLogger(__name__)

READ = "memory:read"
WRITE = "memory:write"
SCOPES = (READ, WRITE)
IGNORED_SCOPES = frozenset({"offline_access"})  # refresh tokens are always issued
AUTH_METHODS = ("none", "client_secret_post", "client_secret_basic")
CODE_TTL_S = 60.0
CONSENT_TTL_S = 600.0
MAX_KEY_ATTEMPTS = 5
MCP_PATH = "/mcp"
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_AGENT = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")  # models.AgentId
_PKCE = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")  # RFC 7636 §4.1 verifier alphabet and length
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url(SHA-256), unpadded


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
        super().__init__(
            "temporarily_unavailable",
            f"too many client registrations; try again in {self.retry_after_s} s",
            429,
        )


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


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


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


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


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


def _redirect_matches(registered: str, presented: str) -> bool:
    """Exact match, except that a loopback http redirect may use any port (OAuth 2.1 §8.4.2)."""
    if registered == presented:
        return True
    a, b = urlsplit(registered), urlsplit(presented)
    if a.scheme == b.scheme == "http" and (a.hostname or "").lower() in LOOPBACK:
        return ((a.hostname or "").lower(), a.path, a.query) == ((b.hostname or "").lower(), b.path, b.query)
    return False


def suggested_agent(client_name: str) -> str:
    """A namespace proposal for the consent form, from the client's name."""
    slug = re.sub(r"[^A-Za-z0-9_.:@-]+", "-", client_name.strip().lower()).strip("-.")[:64]
    return slug if slug and slug not in MAINTENANCE_AGENTS else "mcp-client"


def agent_error(agent: str) -> str | None:
    if not _AGENT.match(agent):
        return "The agent namespace must be 1-128 letters, digits or _ . : @ -"
    if agent in MAINTENANCE_AGENTS:
        return f"{agent!r} is reserved for maintenance"
    return None


@dataclass(frozen=True)
class Endpoints:
    """The URLs of this server as a client reaches it."""

    base: str  # the issuer: scheme://host[:port] (MEMENTO_PUBLIC_URL, or the request's own)

    @property
    def resource(self) -> str:
        return self.base + MCP_PATH

    def url(self, path: str) -> str:
        return self.base + path


class OAuthServer:
    """The authorization server and token verifier of one App."""

    def __init__(self, settings: Settings, store: OAuthStore | None = None, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self.store: OAuthStore = store if store is not None else MemoryOAuthStore(
            clock=lambda: self.clock(),  # tests replace the clock after building the server
            unused_ttl_s=float(getattr(settings, "oauth_unused_client_ttl_s", UNUSED_CLIENT_TTL_S)),
            max_unused=int(getattr(settings, "oauth_max_clients", MAX_UNUSED_CLIENTS)),
        )
        self.register_rate = int(getattr(settings, "oauth_register_rate", 0))
        self.register_global_rate = int(getattr(settings, "oauth_register_global_rate", 0))
        self._refused_window = -1
        self.access_ttl_s = float(getattr(settings, "oauth_access_token_ttl_s", 3600))
        self.refresh_ttl_s = float(getattr(settings, "oauth_refresh_token_ttl_s", 30 * 86400))
        self._operator = digest(settings.access_key) if settings.access_key else None
        self._next_purge = 0.0

    @property
    def active(self) -> bool:
        """OAuth is on: enabled (MEMENTO_OAUTH) and an operator key exists to approve clients."""
        return bool(getattr(self.settings, "oauth", True)) and self._operator is not None

    def _tick(self) -> float:
        now = self.clock()
        if now >= self._next_purge:
            self.store.purge(now)
            self._next_purge = now + 60.0
        return now

    # ---------------------------------------------------------------- metadata

    def authorization_server_metadata(self, ends: Endpoints) -> dict[str, Any]:
        """RFC 8414 metadata; `issuer` is exactly the base URL."""
        return {
            "issuer": ends.base,
            "authorization_endpoint": ends.url("/authorize"),
            "token_endpoint": ends.url("/token"),
            "registration_endpoint": ends.url("/register"),
            "revocation_endpoint": ends.url("/revoke"),
            "scopes_supported": list(SCOPES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
            "revocation_endpoint_auth_methods_supported": list(AUTH_METHODS),
            "code_challenge_methods_supported": ["S256"],
            "service_documentation": "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization",
        }

    def protected_resource_metadata(self, ends: Endpoints) -> dict[str, Any]:
        """RFC 9728 metadata of the MCP endpoint."""
        return {
            "resource": ends.resource,
            "authorization_servers": [ends.base],
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
            "resource_name": "Memento MCP memory server",
        }

    # ---------------------------------------------------------------- registration (RFC 7591)

    def register(self, meta: Any, address: str = "") -> dict[str, Any]:
        """Register a client (RFC 7591) for a request from `address`; `RateLimited` when that
        address, or everyone together, registered too many in the current minute."""
        if not isinstance(meta, dict):
            raise OAuthError("invalid_client_metadata", "the registration request must be a JSON object")
        uris = meta.get("redirect_uris")
        if not isinstance(uris, list) or not uris:
            raise OAuthError("invalid_redirect_uri", "redirect_uris must be a non-empty list")
        if len(uris) > 20:
            raise OAuthError("invalid_redirect_uri", "at most 20 redirect_uris")
        for uri in uris:
            problem = redirect_uri_error(uri)
            if problem:
                raise OAuthError("invalid_redirect_uri", f"redirect_uris: {problem}")
        method = meta.get("token_endpoint_auth_method", "client_secret_basic")  # RFC 7591 §2 default
        if method not in AUTH_METHODS:
            raise OAuthError("invalid_client_metadata", f"token_endpoint_auth_method must be one of {', '.join(AUTH_METHODS)}")
        grants = meta.get("grant_types", ["authorization_code"])
        if not isinstance(grants, list) or not set(grants) <= {"authorization_code", "refresh_token"} or "authorization_code" not in grants:
            raise OAuthError("invalid_client_metadata", "grant_types must be authorization_code (and optionally refresh_token)")
        responses = meta.get("response_types", ["code"])
        if responses != ["code"]:
            raise OAuthError("invalid_client_metadata", 'response_types must be ["code"]')
        scope = meta.get("scope")
        if scope is not None and (not isinstance(scope, str) or self._unknown_scopes(scope.split())):
            raise OAuthError("invalid_client_metadata", f"scope must be a subset of: {' '.join(SCOPES)}")
        name = meta.get("client_name", "")
        if not isinstance(name, str) or len(name) > 200:
            raise OAuthError("invalid_client_metadata", "client_name must be a string of at most 200 characters")
        self._tick()
        wait_s = self.store.take_registration_slot(address, self.register_rate, self.register_global_rate)
        if wait_s > 0:
            window, _ = window_of(self.clock())
            if window != self._refused_window:  # once a minute, so a flood cannot flood the log
                self._refused_window = window
                log.warning("OAuth registrations refused by the rate limit (%d/min per address, %d/min overall), "
                            "starting with one from %s", self.register_rate, self.register_global_rate, address or "?")
            raise RateLimited(wait_s)
        client_id = "mcp_" + secrets.token_urlsafe(18)
        secret = None if method == "none" else secrets.token_urlsafe(32)
        issued = int(self.clock())
        echoed = {k: v for k, v in meta.items() if k in {"client_name", "client_uri", "logo_uri", "scope", "contacts", "software_id", "software_version"}}
        client = Client(
            client_id=client_id,
            redirect_uris=tuple(uris),
            token_endpoint_auth_method=method,
            secret_digest=digest(secret) if secret else None,
            client_name=name or client_id,
            issued_at=issued,
            metadata=echoed,
        )
        self.store.add_client(client)
        log.info("OAuth client registered: %s (%s, %s)", client_id, name or "unnamed", method)
        reply: dict[str, Any] = {
            **echoed,
            "client_id": client_id,
            "client_id_issued_at": issued,
            "redirect_uris": list(uris),
            "token_endpoint_auth_method": method,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }
        if secret:
            reply["client_secret"] = secret
            reply["client_secret_expires_at"] = 0
        return reply

    # ---------------------------------------------------------------- authorization endpoint

    @staticmethod
    def _unknown_scopes(scopes: list[str]) -> list[str]:
        return [s for s in scopes if s not in SCOPES and s not in IGNORED_SCOPES]

    def begin(self, params: Mapping[str, str], ends: Endpoints) -> tuple[PendingAuthorization, Client]:
        """Validate an authorization request; the pending request to show the consent page for.

        Raises `Refused` while the redirect URI cannot be trusted, `RedirectError` after."""
        now = self._tick()
        client_id = params.get("client_id") or ""
        client = self.store.get_client(client_id) if client_id else None
        if client is None:
            raise Refused("Unknown client", "The client_id is missing or not registered with this server "
                          "(registrations are forgotten when the server restarts without Redis, or after long disuse: "
                          "the client must register again).")
        presented = params.get("redirect_uri")
        if presented is None:
            if len(client.redirect_uris) != 1:
                raise Refused("Missing redirect_uri", "The client registered several redirect URIs; the request must name one.")
            redirect_uri = client.redirect_uris[0]
        elif any(_redirect_matches(r, presented) for r in client.redirect_uris):
            redirect_uri = presented
        else:
            raise Refused("Invalid redirect_uri", "The redirect_uri is not one the client registered.")
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
        if resource is not None and not self._our_resource(resource, ends):
            raise fail("invalid_target", f"resource must be this server's MCP endpoint, {ends.resource}")
        requested = (params.get("scope") or "").split()
        unknown = self._unknown_scopes(requested)
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

    def _our_resource(self, resource: str, ends: Endpoints) -> bool:
        if urlsplit(resource).fragment:
            return False
        return normalize_url(resource) in {normalize_url(ends.resource), normalize_url(ends.base)}

    def pending(self, pending_id: str) -> tuple[PendingAuthorization, Client] | None:
        pending = self.store.get_pending(pending_id)
        if pending is None or pending.expires_at <= self.clock():
            return None
        client = self.store.get_client(pending.client_id)
        return (pending, client) if client is not None else None

    def check_operator_key(self, key: str) -> bool:
        return self._operator is not None and hmac.compare_digest(self._operator, digest(key))

    def deny(self, pending_id: str, description: str = "the operator denied the request") -> str | None:
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
        self.store.put_code(digest(code), AuthorizationCode(
            grant=grant, redirect_uri=pending.redirect_uri, code_challenge=pending.code_challenge,
            expires_at=self.clock() + CODE_TTL_S,
        ))
        log.info("OAuth consent: client %s may use agent %s (%s)", pending.client_id, agent_id,
                 "read-only" if read_only else "read-write")
        return with_query(pending.redirect_uri, code=code, state=pending.state)

    # ---------------------------------------------------------------- token endpoint

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
        self._tick()
        grant_type = form.get("grant_type")
        if not grant_type:
            raise OAuthError("invalid_request", "grant_type is required")
        if grant_type not in ("authorization_code", "refresh_token"):
            raise OAuthError("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
        client = self.authenticate_client(form, basic)
        resource = form.get("resource")
        if grant_type == "authorization_code":
            grant = self._redeem_code(form, client)
        else:
            grant = self._rotate_refresh(form, client)
        if resource is not None and normalize_url(resource) != normalize_url(grant.resource) and not (
            self._our_resource(resource, ends) and normalize_url(ends.resource) == normalize_url(grant.resource)
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
            if self._unknown_scopes(asked) or not set(asked) - IGNORED_SCOPES <= set(token.grant.scopes):
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

    # ---------------------------------------------------------------- resource server

    def verify(self, token: str, *, resource: str | None = None) -> Principal | None:
        """The principal of an access token for `resource`; None when it is unknown, expired,
        revoked, a refresh token, or issued for another audience (RFC 8707)."""
        if not self.active or not token.startswith("mma_") or resource is None:
            return None
        found = self.store.get_token(digest(token))
        if found is None or found.kind != "access" or found.expires_at <= self.clock():
            return None
        if normalize_url(found.grant.resource) != normalize_url(resource):
            return None
        grant = found.grant
        return Principal(
            subject=grant.client_id,
            agent_id=grant.agent_id,
            read_only=grant.read_only,
            scopes=frozenset(grant.scopes),
            kind="oauth",
        )


class OAuthVerifier:
    """The `TokenVerifier` of OAuth access tokens (a thin face over `OAuthServer.verify`)."""

    def __init__(self, server: OAuthServer) -> None:
        self.server = server

    def verify(self, token: str, *, resource: str | None = None) -> Principal | None:
        return self.server.verify(token, resource=resource)


def oauth_server(app: App) -> OAuthServer:
    """The app's OAuth server (one per App, with its token store)."""
    def build() -> OAuthServer:
        server = build_server(app.settings)
        closer = getattr(getattr(server.store, "client", None), "close", None)
        if callable(closer):
            app.on_close(closer)  # the Redis store's connection
        return server

    return per_app(app, "oauth", build)


def build_server(settings: Settings) -> OAuthServer:
    """The OAuth server with its store: in memory, or in Redis (shared by every replica) when
    REDIS_ENABLED. Building it does no I/O: Redis may be down at start-up."""
    if not settings.redis_enabled:
        return OAuthServer(settings)
    from ..storage.redis import connect
    from .oauth_redis import CLIENT_TTL_S, RedisOAuthStore

    # The store's TTLs follow the server's clock (tests replace it); a client stays registered
    # at least as long as a refresh token it was given.
    client_ttl_s = max(CLIENT_TTL_S, float(settings.oauth_refresh_token_ttl_s))
    store = RedisOAuthStore(
        connect(settings), clock=lambda: server.clock(), client_ttl_s=client_ttl_s,
        unused_ttl_s=float(settings.oauth_unused_client_ttl_s), max_unused=settings.oauth_max_clients,
    )
    server = OAuthServer(settings, store)
    return server


def oauth_verifier(app: App) -> OAuthVerifier | None:
    """The verifier of OAuth tokens, or None when OAuth is off (no operator key to approve)."""
    server = oauth_server(app)
    return OAuthVerifier(server) if server.active else None


def public_base(app: App, request: Any) -> str:
    """This server's base URL: MEMENTO_PUBLIC_URL, else the scheme and Host the request used."""
    configured = str(getattr(app.settings, "public_url", "") or "").strip().rstrip("/")
    if configured:
        return configured
    return str(request.base_url).rstrip("/")


def endpoints(app: App, request: Any) -> Endpoints:
    return Endpoints(public_base(app, request))


def challenge_params(app: App, request: Any, error: str | None) -> list[str]:
    """What OAuth adds to a 401/403 `WWW-Authenticate` (RFC 9728 §5.1, MCP scope selection)."""
    if not oauth_server(app).active:
        return []
    ends = endpoints(app, request)
    scope = WRITE if error == "insufficient_scope" else " ".join(SCOPES)
    return [
        f'resource_metadata="{ends.url("/.well-known/oauth-protected-resource" + MCP_PATH)}"',
        f'scope="{scope}"',
    ]
