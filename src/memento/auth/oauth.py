"""OAuth 2.1 for the MCP endpoints: an authorization server and the resource server's token check.

Memento is its own authorization server (MCP authorization 2025-03-26 / 2025-06-18 /
2025-11-25): metadata (RFC 8414, RFC 9728), dynamic client registration (RFC 7591), the
authorization-code grant with PKCE S256 only, resource indicators (RFC 8707) binding every
token to this server's MCP URL, and refresh-token rotation with reuse detection. The operator
approves each client on a consent page with the operator access key (MEMENTO_ACCESS_KEY),
choosing the agent namespace and read-only or read-write access the client's tokens get; without
an operator key nobody can approve, so OAuth is off (`OAuthServer.active`).

`OAuthServer` composes the parts, each in its own module: `oauth_registration` (RFC 7591),
`oauth_consent` (the authorization endpoint and the operator's consent), `oauth_tokens` (the
token endpoint, revocation and verification), over `oauth_protocol` (scopes, errors, digests)
and `oauth_urls`. This is the protocol logic, free of HTTP; `oauth_http` puts it on routes and
`oauth_pages` draws the consent page. Tokens are opaque random strings kept as SHA-256
digests in an `OAuthStore`: in this process by default, in Redis (shared by every replica) with
REDIS_ENABLED; see `oauth_store` and `oauth_redis`. The scopes are described in `oauth_protocol`.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .oauth_consent import MAX_KEY_ATTEMPTS, Consent, agent_error, suggested_agent
from .oauth_protocol import AUTH_METHODS, READ, SCOPES, WRITE, OAuthError, RateLimited, RedirectError, Refused, digest
from .oauth_registration import Registrar, registration_request
from .oauth_store import Client, MemoryOAuthStore, OAuthStore, PendingAuthorization
from .oauth_tokens import Tokens
from .oauth_urls import MCP_PATH, Endpoints, normalize_url, with_query
from .principal import Principal
from .registry import per_app

if TYPE_CHECKING:
    from ..app import App
    from ..settings import Settings

__all__ = [  # with the names the OAuth modules used to import from here
    "MAX_KEY_ATTEMPTS",
    "MCP_PATH",
    "READ",
    "SCOPES",
    "WRITE",
    "Endpoints",
    "OAuthError",
    "OAuthServer",
    "OAuthVerifier",
    "RateLimited",
    "RedirectError",
    "Refused",
    "agent_error",
    "build_server",
    "challenge_params",
    "endpoints",
    "normalize_url",
    "oauth_server",
    "oauth_verifier",
    "public_base",
    "suggested_agent",
    "with_query",
]


class OAuthServer:
    """The authorization server and token verifier of one App."""

    def __init__(self, settings: Settings, store: OAuthStore | None = None, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock

        def now() -> float:
            return self.clock()  # tests replace the clock after building the server

        self.store: OAuthStore = (
            store
            if store is not None
            else MemoryOAuthStore(
                clock=now, unused_ttl_s=float(settings.oauth_unused_client_ttl_s), max_unused=int(settings.oauth_max_clients)
            )
        )
        self.registrar = Registrar(
            self.store, now, rate=int(settings.oauth_register_rate), global_rate=int(settings.oauth_register_global_rate)
        )
        self.consent = Consent(self.store, now)
        self.tokens = Tokens(
            self.store, now, access_ttl_s=float(settings.oauth_access_token_ttl_s), refresh_ttl_s=float(settings.oauth_refresh_token_ttl_s)
        )
        self._operator = digest(settings.access_key) if settings.access_key else None
        self._next_purge = 0.0

    @property
    def active(self) -> bool:
        """OAuth is on: enabled (MEMENTO_OAUTH) and an operator key exists to approve clients."""
        return self.settings.oauth and self._operator is not None

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
        request = registration_request(meta)
        self._tick()
        return self.registrar.register(request, address)

    # ---------------------------------------------------------------- authorization endpoint

    def begin(self, params: Mapping[str, str], ends: Endpoints) -> tuple[PendingAuthorization, Client]:
        """Validate an authorization request; the pending request to show the consent page for.

        Raises `Refused` while the redirect URI cannot be trusted, `RedirectError` after."""
        return self.consent.begin(params, ends, self._tick())

    def pending(self, pending_id: str) -> tuple[PendingAuthorization, Client] | None:
        return self.consent.pending(pending_id)

    def check_operator_key(self, key: str) -> bool:
        return self._operator is not None and hmac.compare_digest(self._operator, digest(key))

    def deny(self, pending_id: str, description: str = "the operator denied the request") -> str | None:
        return self.consent.deny(pending_id, description)

    def wrong_key(self, pending_id: str) -> int:
        """Count a wrong operator key; attempts left (0: the request must be denied)."""
        return self.consent.wrong_key(pending_id)

    def approve(self, pending_id: str, agent_id: str, read_only: bool) -> str | None:
        """Issue the code for a consented request; the redirect URL (None: request gone)."""
        return self.consent.approve(pending_id, agent_id, read_only)

    # ---------------------------------------------------------------- token endpoint

    def token(self, form: Mapping[str, str], basic: tuple[str, str] | None, ends: Endpoints) -> dict[str, Any]:
        """The token endpoint: authorization_code and refresh_token grants."""
        self._tick()
        return self.tokens.token(form, basic, ends)

    def revoke(self, form: Mapping[str, str], basic: tuple[str, str] | None) -> None:
        """RFC 7009: revoke a token of the authenticated client (and, for refresh, its grant)."""
        self.tokens.revoke(form, basic)

    # ---------------------------------------------------------------- resource server

    def verify(self, token: str, *, resource: str | None = None) -> Principal | None:
        """The principal of an access token for `resource`; None when OAuth is off or the token
        is unknown, expired, revoked, a refresh token, or issued for another audience (RFC 8707)."""
        if not self.active:
            return None
        return self.tokens.verify(token, resource=resource)


class OAuthVerifier:
    """The `TokenVerifier` of OAuth access tokens (a thin face over `OAuthServer.verify`)."""

    def __init__(self, server: OAuthServer) -> None:
        self.server = server

    def verify(self, token: str, *, resource: str | None = None) -> Principal | None:
        return self.server.verify(token, resource=resource)


def oauth_server(app: App) -> OAuthServer:
    """The app's OAuth server (one per App, with its token store)."""

    def build() -> OAuthServer:
        return build_server(app.settings, app.redis.blocking if app.redis is not None else None)

    return per_app(app, "oauth", build)


def build_server(settings: Settings, redis_client: Any = None) -> OAuthServer:
    """The OAuth server with its store: in memory, or in Redis (shared by every replica) when
    REDIS_ENABLED, on the app's client (`redis_client`; one of its own when none is given, for
    tools that build a server alone). Building it does no I/O: Redis may be down at start-up."""
    if not settings.redis_enabled:
        return OAuthServer(settings)
    from .oauth_redis import CLIENT_TTL_S, RedisOAuthStore

    if redis_client is None:
        from ..storage.redis import connect

        redis_client = connect(settings)
    # The store's TTLs follow the server's clock (tests replace it); a client stays registered
    # at least as long as a refresh token it was given.
    client_ttl_s = max(CLIENT_TTL_S, float(settings.oauth_refresh_token_ttl_s))
    store = RedisOAuthStore(
        redis_client,
        clock=lambda: server.clock(),
        client_ttl_s=client_ttl_s,
        unused_ttl_s=float(settings.oauth_unused_client_ttl_s),
        max_unused=settings.oauth_max_clients,
    )
    server = OAuthServer(settings, store)
    return server


def oauth_verifier(app: App) -> OAuthVerifier | None:
    """The verifier of OAuth tokens, or None when OAuth is off (no operator key to approve)."""
    server = oauth_server(app)
    return OAuthVerifier(server) if server.active else None


def public_base(app: App, request: Any) -> str:
    """This server's base URL: MEMENTO_PUBLIC_URL, else the scheme and Host the request used."""
    configured = (app.settings.public_url or "").strip().rstrip("/")
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
    return [f'resource_metadata="{ends.url("/.well-known/oauth-protected-resource" + MCP_PATH)}"', f'scope="{scope}"']
