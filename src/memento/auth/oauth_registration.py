"""Dynamic client registration (RFC 7591): which client metadata is accepted, and how many
registrations a minute one address, and everyone together, may make.

A client gets an id (`mcp_…`) and, unless it registers as public (`none`), a secret; both
are returned once, and the store keeps only the secret's digest.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .oauth_protocol import AUTH_METHODS, SCOPES, OAuthError, RateLimited, digest, unknown_scopes
from .oauth_store import Client, OAuthStore, window_of
from .oauth_urls import redirect_uri_error

log = logging.getLogger(__name__)

ECHOED = frozenset({"client_name", "client_uri", "logo_uri", "scope", "contacts", "software_id", "software_version"})


@dataclass(frozen=True)
class Registration:
    """A valid registration request."""

    redirect_uris: tuple[str, ...]
    method: str  # token_endpoint_auth_method
    name: str
    echoed: dict[str, Any]  # the metadata the reply repeats


def registration_request(meta: Any) -> Registration:
    """The registration request `meta` (a JSON body), checked; OAuthError when it is invalid."""
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
    if scope is not None and (not isinstance(scope, str) or unknown_scopes(scope.split())):
        raise OAuthError("invalid_client_metadata", f"scope must be a subset of: {' '.join(SCOPES)}")
    name = meta.get("client_name", "")
    if not isinstance(name, str) or len(name) > 200:
        raise OAuthError("invalid_client_metadata", "client_name must be a string of at most 200 characters")
    echoed = {k: v for k, v in meta.items() if k in ECHOED}
    return Registration(redirect_uris=tuple(uris), method=method, name=name, echoed=echoed)


class Registrar:
    """Registers clients in the store, `rate` a minute per address and `global_rate` overall
    (0: no limit)."""

    def __init__(self, store: OAuthStore, clock: Callable[[], float], *, rate: int, global_rate: int) -> None:
        self.store = store
        self.clock = clock
        self.rate = rate
        self.global_rate = global_rate
        self._refused_window = -1

    def register(self, request: Registration, address: str) -> dict[str, Any]:
        """Register a client for a request from `address`; the registration response."""
        self._take_slot(address)
        client_id = "mcp_" + secrets.token_urlsafe(18)
        secret = None if request.method == "none" else secrets.token_urlsafe(32)
        issued = int(self.clock())
        client = Client(
            client_id=client_id,
            redirect_uris=request.redirect_uris,
            token_endpoint_auth_method=request.method,
            secret_digest=digest(secret) if secret else None,
            client_name=request.name or client_id,
            issued_at=issued,
            metadata=request.echoed,
        )
        self.store.add_client(client)
        log.info("OAuth client registered: %s (%s, %s)", client_id, request.name or "unnamed", request.method)
        reply: dict[str, Any] = {
            **request.echoed,
            "client_id": client_id,
            "client_id_issued_at": issued,
            "redirect_uris": list(request.redirect_uris),
            "token_endpoint_auth_method": request.method,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }
        if secret:
            reply["client_secret"] = secret
            reply["client_secret_expires_at"] = 0
        return reply

    def _take_slot(self, address: str) -> None:
        """Count a registration; `RateLimited` when `address`, or everyone, had enough this minute."""
        wait_s = self.store.take_registration_slot(address, self.rate, self.global_rate)
        if wait_s <= 0:
            return
        window, _ = window_of(self.clock())
        if window != self._refused_window:  # once a minute, so a flood cannot flood the log
            self._refused_window = window
            log.warning(
                "OAuth registrations refused by the rate limit (%d/min per address, %d/min overall), starting with one from %s",
                self.rate,
                self.global_rate,
                address or "?",
            )
        raise RateLimited(wait_s)
