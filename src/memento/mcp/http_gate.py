"""The gate in front of every MCP HTTP endpoint: Origin/Host checks and bearer credentials.

`HttpGate.guard` refuses a foreign `Origin` or `Host` (DNS rebinding); `authenticate` turns the
`Authorization: Bearer` header into a Principal (401 with the `WWW-Authenticate` challenge when
missing or unknown, 400 for a credential in the query string, 503 when the token's store cannot
be reached); `owns` says whether a principal may use a session; `check_exposure` refuses to
serve a non-loopback address without credentials.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memento.auth.keys import AuthConfigError
from memento.auth.principal import ANONYMOUS, WORKSPACE_HEADER, Principal
from memento.auth.registry import token_verifiers
from memento.errors import Forbidden, MementoError, Unavailable
from memento.mcp import http_extras, jsonrpc
from memento.mcp.jsonrpc import INVALID_REQUEST

if TYPE_CHECKING:
    from memento.app import App
    from memento.mcp.server import Session

log = logging.getLogger(__name__)

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
QUERY_CREDENTIALS = frozenset({"access_token", "accesstoken", "accesskey", "access_key", "token", "key", "api_key", "apikey"})
"""Query parameters that would carry a credential: refused, valid or not (URLs get logged)."""


def rpc_error(status: int, code: int, message: str, request_id: Any = None) -> JSONResponse:
    return JSONResponse(jsonrpc.error_response(request_id, code, message), status_code=status)


def _owner(principal: Principal) -> tuple[str, str, str | None, bool]:
    return (principal.kind, principal.subject, principal.agent_id, principal.read_only)


def owns(session: Session, principal: Principal) -> bool:
    """Whether `principal` is the credential that opened `session` (only it may use it)."""
    return _owner(session.principal) == _owner(principal)


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The host part of a Host header value: `[::1]:8080` -> `::1`, `a:1` -> `a`."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host


def client_host(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def allowed_hosts(settings: Any) -> list[str]:
    """Host names accepted besides localhost: ALLOWED_HOSTS (comma-separated, `*` for any)
    when the settings define it, and the bound address unless it is a wildcard."""
    hosts = [h.strip() for h in str(getattr(settings, "allowed_hosts", "") or "").split(",")]
    bound = str(getattr(settings, "host", "") or "")
    if bound and bound not in ("0.0.0.0", "::"):
        hosts.append(bound)
    return [h for h in hosts if h]


class HttpGate:
    """Origin/Host checks and authentication for one app's HTTP endpoints."""

    def __init__(self, app: App, *, allowed_origins: list[str], allowed_hosts: list[str] | None = None) -> None:
        self.app = app
        self.allowed_origins = frozenset(allowed_origins)
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts or ()) | {
            (urlsplit(origin).hostname or "").lower() for origin in allowed_origins
        }

    def authenticate(self, request: Request) -> Principal | Response:
        """Who sends `request`: the principal of its bearer token, ANONYMOUS when no credential
        is configured; else 401 (no or bad token), 400 (a credential in the query string) or 503
        (the token's store, e.g. Redis for OAuth tokens, cannot be reached)."""
        named = sorted(k for k in request.query_params if k.lower() in QUERY_CREDENTIALS)
        if named:
            return rpc_error(
                400,
                INVALID_REQUEST,
                "Bad Request: credentials are not accepted in the query string ("
                + ", ".join(named)
                + "); send them as Authorization: Bearer <token>",
            )
        app = self.app
        verifiers = token_verifiers(app)
        if not verifiers:
            return self.in_workspace(request, ANONYMOUS)
        header = request.headers.get("authorization", "").strip()
        if not header:
            return self.unauthorized(request, None, "Unauthorized: send Authorization: Bearer <token>")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return self.unauthorized(request, "invalid_request", "Unauthorized: use Authorization: Bearer <token>")
        resource = http_extras.resource_url(app, request)
        for verifier in verifiers:
            try:
                found = verifier.verify(token, resource=resource)
            except Unavailable as exc:  # e.g. the OAuth token store (Redis) is down: not a bad token
                log.info("cannot verify a bearer token from %s: %s", client_host(request), exc)
                return rpc_error(503, INVALID_REQUEST, "Service Unavailable: cannot verify the token now; retry")
            if found is not None:
                return self.in_workspace(request, found)
        log.info("refused a request with an unknown bearer token from %s", client_host(request))
        return self.unauthorized(request, "invalid_token", "Unauthorized: invalid or expired token")

    def in_workspace(self, request: Request, principal: Principal) -> Principal | Response:
        """`principal` in the seed 003 workspace the request names (X-Memento-Workspace), if any:
        400 for a name that is not one, 403 for a name the credential may not use."""
        named = request.headers.get(WORKSPACE_HEADER)
        if named is None:
            return principal
        try:
            return principal.in_workspace(named)
        except Forbidden as exc:
            return self.forbidden(request, f"Forbidden: {exc}")
        except MementoError as exc:
            return rpc_error(400, INVALID_REQUEST, f"Bad Request: {WORKSPACE_HEADER}: {exc}")

    def unauthorized(self, request: Request, error: str | None, message: str) -> Response:
        """401 with the `WWW-Authenticate` challenge (http_extras.www_authenticate)."""
        response = rpc_error(401, INVALID_REQUEST, message)
        response.headers["WWW-Authenticate"] = http_extras.www_authenticate(self.app, request, error)
        return response

    def forbidden(self, request: Request, message: str) -> Response:
        """403 for a valid credential that may not do this (an HTTP-level capability check)."""
        response = rpc_error(403, INVALID_REQUEST, message)
        response.headers["WWW-Authenticate"] = http_extras.www_authenticate(self.app, request, "insufficient_scope")
        return response

    def guard(self, request: Request) -> Response | None:
        """403 for a foreign Origin or Host (DNS rebinding), for every endpoint."""
        if not self._origin_allowed(request.headers.get("origin")):
            return rpc_error(403, INVALID_REQUEST, "Forbidden: origin not allowed")
        if not self._host_allowed(request.headers.get("host")):
            return rpc_error(403, INVALID_REQUEST, "Forbidden: host not allowed")
        return None

    def _origin_allowed(self, origin: str | None) -> bool:
        # Browsers send Origin; refusing foreign ones blocks DNS rebinding against a local server.
        if origin is None:
            return True
        if self.allowed_origins:
            return origin in self.allowed_origins or "*" in self.allowed_origins
        return (urlsplit(origin).hostname or "") in LOCAL_HOSTS

    def _host_allowed(self, host: str | None) -> bool:
        if host is None:
            return True  # HTTP/1.0 without Host cannot be a rebinding browser
        if "*" in self.allowed_hosts or "*" in self.allowed_origins:
            return True
        name = _host_name(host)
        return name in LOCAL_HOSTS or name in self.allowed_hosts


def check_exposure(app: App, host: str, *, allow_unauthenticated: bool = False) -> bool:
    """Fail closed: refuse (AuthConfigError) to serve a non-loopback address with no credential
    configured, unless the operator opted out explicitly. True when authentication is on."""
    authenticated = bool(token_verifiers(app))  # also validates the keys
    if authenticated or is_loopback(host):
        return authenticated
    if allow_unauthenticated or app.settings.allow_unauthenticated:
        log.warning(
            "serving %s WITHOUT authentication (explicit opt-out): anyone who can reach it can read and change every agent's memory", host
        )
        return False
    raise AuthConfigError(
        f"refusing to serve MCP on {host} without authentication: anyone who can reach it "
        "could read and change every agent's memory. Set MEMENTO_ACCESS_KEY or MEMENTO_KEYS "
        "(or configure OAuth), or bind to 127.0.0.1; to run open anyway, set "
        "MEMENTO_ALLOW_UNAUTHENTICATED=1 or pass --insecure-no-auth"
    )
