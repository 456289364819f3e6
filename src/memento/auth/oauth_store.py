"""Where the OAuth server keeps its clients, pending consents, codes and tokens.

`OAuthStore` is the contract. `MemoryOAuthStore` (the default) keeps everything in this
process: registered clients and issued tokens do NOT survive a restart (clients re-register and
re-authorise, which the MCP clients do on their own after a 401) and are not shared between
server processes. With REDIS_ENABLED the server uses `oauth_redis.RedisOAuthStore` instead,
which every replica shares and which survives restarts; a store that cannot reach its backend
raises `OAuthStoreUnavailable` (the HTTP face answers 503).

Secrets (client secrets, codes, access and refresh tokens) are stored only as SHA-256 digests:
the store never holds a value that could be presented as a credential.

Registration is anonymous, so what it may cost is bounded (issue 17, defect 8): a client that
has not completed an authorization (`mark_client_used`) within `unused_ttl_s` is dropped, and
at most `max_unused` such clients are kept: a new registration evicts the oldest unused one,
never a client the operator approved. `take_registration_slot` rate-limits registration per
client address and overall, in fixed windows of REGISTRATION_WINDOW_S.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from ..errors import Unavailable

UNUSED_CLIENT_TTL_S = 86400.0
MAX_UNUSED_CLIENTS = 10_000
REGISTRATION_WINDOW_S = 60.0
EVERYONE = "*"  # the rate-limit bucket shared by every address


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

    def add_client(self, client: Client) -> None:
        """Store a new, unused client; the oldest unused one goes when `max_unused` are kept."""
        ...

    def get_client(self, client_id: str) -> Client | None:
        """The client; None when unknown, or unused for longer than `unused_ttl_s`."""
        ...

    def mark_client_used(self, client_id: str) -> bool:
        """The client completed an authorization: it is kept from now on (False: it is gone)."""
        ...

    def count_clients(self) -> int: ...

    def take_registration_slot(self, address: str, per_address: int, overall: int) -> float:
        """Count one registration from `address` in the current window; 0.0 when allowed, else
        the seconds until the window that has room (limits of 0 do not apply)."""
        ...

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


def window_of(now: float) -> tuple[int, float]:
    """The rate-limit window `now` falls in, and the seconds until it ends."""
    index = math.floor(now / REGISTRATION_WINDOW_S)
    return index, (index + 1) * REGISTRATION_WINDOW_S - now


class MemoryOAuthStore:
    """`OAuthStore` in process memory (lost on restart; see the module docstring)."""

    def __init__(
        self, *, clock: Callable[[], float] = time.time, unused_ttl_s: float = UNUSED_CLIENT_TTL_S, max_unused: int = MAX_UNUSED_CLIENTS
    ) -> None:
        self._lock = threading.Lock()
        self.clock = clock
        self.unused_ttl_s = unused_ttl_s
        self.max_unused = max_unused
        self._clients: dict[str, Client] = {}
        self._unused: dict[str, float] = {}  # client id -> registered at; oldest first
        self._windows: dict[str, tuple[int, int]] = {}  # address -> (window, registrations)
        self._pending: dict[str, PendingAuthorization] = {}
        self._codes: dict[bytes, AuthorizationCode] = {}
        self._tokens: dict[bytes, Token] = {}

    # ---------------------------------------------------------------- clients

    def add_client(self, client: Client) -> None:
        with self._lock:
            self._expire_unused(self.clock())
            while len(self._unused) >= self.max_unused:
                oldest = next(iter(self._unused))
                del self._unused[oldest]
                self._clients.pop(oldest, None)
            self._clients[client.client_id] = client
            self._unused[client.client_id] = self.clock()

    def get_client(self, client_id: str) -> Client | None:
        with self._lock:
            registered = self._unused.get(client_id)
            if registered is not None and registered + self.unused_ttl_s <= self.clock():
                del self._unused[client_id]
                self._clients.pop(client_id, None)
            return self._clients.get(client_id)

    def mark_client_used(self, client_id: str) -> bool:
        with self._lock:
            self._unused.pop(client_id, None)
            return client_id in self._clients

    def count_clients(self) -> int:
        with self._lock:
            return len(self._clients)

    def take_registration_slot(self, address: str, per_address: int, overall: int) -> float:
        window, left_s = window_of(self.clock())

        def count(bucket: str) -> int:
            seen, registrations = self._windows.get(bucket, (window, 0))
            return registrations if seen == window else 0

        with self._lock:
            mine, everyone = count(address), count(EVERYONE)
            if 0 < per_address <= mine or 0 < overall <= everyone:
                return left_s
            self._windows[address] = (window, mine + 1)
            self._windows[EVERYONE] = (window, everyone + 1)
            return 0.0

    def _expire_unused(self, now: float) -> None:
        # Oldest first: stop at the first one still within its time.
        for client_id, registered in list(self._unused.items()):
            if registered + self.unused_ttl_s > now:
                break
            del self._unused[client_id]
            self._clients.pop(client_id, None)

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
            self._expire_unused(now)
            window, _ = window_of(now)
            for bucket in [b for b, (seen, _) in self._windows.items() if seen != window]:
                del self._windows[bucket]
            for pending_id in [k for k, p in self._pending.items() if p.expires_at <= now]:
                del self._pending[pending_id]
            for code in [k for k, c in self._codes.items() if c.expires_at <= now]:
                del self._codes[code]
            for token in [k for k, t in self._tokens.items() if t.expires_at <= now]:
                del self._tokens[token]
