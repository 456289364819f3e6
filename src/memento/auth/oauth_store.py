"""Where the OAuth server keeps its clients, pending consents, codes and tokens.

`OAuthStore` is the contract. `MemoryOAuthStore` (the default) keeps everything in this
process: registered clients and issued tokens do NOT survive a restart (clients re-register and
re-authorise, which the MCP clients do on their own after a 401) and are not shared between
server processes. With REDIS_ENABLED the server uses `oauth_redis.RedisOAuthStore` instead,
which every replica shares and which survives restarts; a store that cannot reach its backend
raises `OAuthStoreUnavailable` (the HTTP face answers 503).

Secrets (client secrets, codes, access and refresh tokens) are stored only as SHA-256 digests:
the store never holds a value that could be presented as a credential.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from ..errors import Unavailable


class OAuthStoreUnavailable(Unavailable):
    """The store's backend (Redis) cannot be reached: nothing can be read or written right now."""


@dataclass(frozen=True)
class Client:
    """A registered client (RFC 7591)."""

    client_id: str
    redirect_uris: tuple[str, ...]
    token_endpoint_auth_method: str  # none | client_secret_post | client_secret_basic
    secret_digest: bytes | None  # None for public clients
    client_name: str
    issued_at: int
    metadata: dict[str, object] = field(default_factory=dict, compare=False)  # echoed back

    @property
    def public(self) -> bool:
        return self.secret_digest is None


@dataclass(frozen=True)
class PendingAuthorization:
    """A validated authorization request waiting for the operator's consent."""

    id: str
    client_id: str
    redirect_uri: str
    state: str | None
    code_challenge: str
    resource: str
    scopes: tuple[str, ...]  # what the client asked for (memory scopes only)
    expires_at: float
    failures: int = 0


@dataclass(frozen=True)
class Grant:
    """What the operator consented to: shared by a code and every token issued from it."""

    family: str  # tokens issued from one consent; revoked together
    client_id: str
    agent_id: str
    read_only: bool
    scopes: tuple[str, ...]
    resource: str  # the audience (RFC 8707)


@dataclass(frozen=True)
class AuthorizationCode:
    grant: Grant
    redirect_uri: str
    code_challenge: str
    expires_at: float
    used: bool = False


@dataclass(frozen=True)
class Token:
    """An access or refresh token, kept under the digest of its value."""

    kind: Literal["access", "refresh"]
    grant: Grant
    expires_at: float
    used: bool = False  # refresh tokens: rotated already


class OAuthStore(Protocol):
    """Storage of the OAuth server. Every method is atomic, also between processes sharing the
    store, and raises `OAuthStoreUnavailable` when the store cannot be reached."""

    def add_client(self, client: Client) -> None: ...
    def get_client(self, client_id: str) -> Client | None: ...
    def count_clients(self) -> int: ...

    def put_pending(self, pending: PendingAuthorization) -> None: ...
    def get_pending(self, pending_id: str) -> PendingAuthorization | None: ...
    def take_pending(self, pending_id: str) -> PendingAuthorization | None: ...
    def count_failure(self, pending_id: str) -> int:
        """Record a wrong operator key; the number of failures so far (0: no such request)."""
        ...

    def put_code(self, digest: bytes, code: AuthorizationCode) -> None: ...
    def use_code(self, digest: bytes) -> AuthorizationCode | None:
        """The code as it was before this call, now marked used (None: unknown or expired)."""
        ...

    def put_token(self, digest: bytes, token: Token) -> None: ...
    def get_token(self, digest: bytes) -> Token | None: ...
    def use_refresh(self, digest: bytes) -> Token | None:
        """The refresh token as it was before this call, now marked used (compare-and-set)."""
        ...

    def revoke_family(self, family: str) -> int:
        """Delete every token of a grant; how many were deleted."""
        ...

    def purge(self, now: float) -> None:
        """Drop what has expired."""
        ...


class MemoryOAuthStore:
    """`OAuthStore` in process memory (lost on restart; see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, Client] = {}
        self._pending: dict[str, PendingAuthorization] = {}
        self._codes: dict[bytes, AuthorizationCode] = {}
        self._tokens: dict[bytes, Token] = {}

    # ---------------------------------------------------------------- clients

    def add_client(self, client: Client) -> None:
        with self._lock:
            self._clients[client.client_id] = client

    def get_client(self, client_id: str) -> Client | None:
        with self._lock:
            return self._clients.get(client_id)

    def count_clients(self) -> int:
        with self._lock:
            return len(self._clients)

    # ---------------------------------------------------------------- consent

    def put_pending(self, pending: PendingAuthorization) -> None:
        with self._lock:
            self._pending[pending.id] = pending

    def get_pending(self, pending_id: str) -> PendingAuthorization | None:
        with self._lock:
            return self._pending.get(pending_id)

    def take_pending(self, pending_id: str) -> PendingAuthorization | None:
        with self._lock:
            return self._pending.pop(pending_id, None)

    def count_failure(self, pending_id: str) -> int:
        with self._lock:
            pending = self._pending.get(pending_id)
            if pending is None:
                return 0
            pending = replace(pending, failures=pending.failures + 1)
            self._pending[pending_id] = pending
            return pending.failures

    # ---------------------------------------------------------------- codes and tokens

    def put_code(self, digest: bytes, code: AuthorizationCode) -> None:
        with self._lock:
            self._codes[digest] = code

    def use_code(self, digest: bytes) -> AuthorizationCode | None:
        with self._lock:
            code = self._codes.get(digest)
            if code is not None:
                self._codes[digest] = replace(code, used=True)
            return code

    def put_token(self, digest: bytes, token: Token) -> None:
        with self._lock:
            self._tokens[digest] = token

    def get_token(self, digest: bytes) -> Token | None:
        with self._lock:
            return self._tokens.get(digest)

    def use_refresh(self, digest: bytes) -> Token | None:
        with self._lock:
            token = self._tokens.get(digest)
            if token is not None and token.kind == "refresh":
                self._tokens[digest] = replace(token, used=True)
                return token
            return None

    def revoke_family(self, family: str) -> int:
        with self._lock:
            doomed = [d for d, t in self._tokens.items() if t.grant.family == family]
            for digest in doomed:
                del self._tokens[digest]
            return len(doomed)

    def purge(self, now: float) -> None:
        with self._lock:
            for pending_id in [k for k, p in self._pending.items() if p.expires_at <= now]:
                del self._pending[pending_id]
            for code in [k for k, c in self._codes.items() if c.expires_at <= now]:
                del self._codes[code]
            for token in [k for k, t in self._tokens.items() if t.expires_at <= now]:
                del self._tokens[token]
