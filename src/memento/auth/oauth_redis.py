"""`OAuthStore` in Redis: clients, consents, codes and tokens shared by every replica.

With REDIS_ENABLED every replica's OAuth server uses this store, so a client registered through
one replica can be approved on a second and redeem its code on a third, and a token issued
anywhere verifies everywhere (and survives a restart of the replicas). Keys, under
`memento:oauth:` (digests as hex, values as JSON):

    client:{client_id}   the registration (string); until it completes an authorization it
                         expires `unused_ttl_s` after registering; from then on idle clients
                         expire after `client_ttl_s`, and every use (`get_client`) starts that
                         period again
    clients              sorted set client_id -> expiry, for `count_clients`
    unused               sorted set client_id -> registered at (ms) of clients not yet used:
                         a registration past `max_unused` of them drops the oldest
    rate:{address}:{n}   registrations from an address (`*`: everyone) in minute n
    pending:{id}         hash {data, failures}: a consent waiting for the operator
    code:{digest}        hash {data, uses}: an authorization code
    token:{digest}       hash {kind, data, uses}: an access or refresh token
    family:{family}      set of the token digests of one grant, for `revoke_family`
    revoked:{family}     marker of a revoked grant (see below)

Every key but `clients` and `unused` expires with the object it holds (the family set with its longest-lived
token), so Redis cleans up by itself and `purge` has nothing to do. The server still checks
every expiry itself; the TTLs only reclaim memory.

What must not happen twice is one Redis command or Lua script, so replicas racing cannot both
succeed: taking a pending consent (MULTI of HMGET and DEL), spending a code or a refresh token
(HINCRBY of its use count: the first caller sees 1, every later one knows it is a replay), and
revoking a grant. A grant revoked while another replica is still issuing tokens from it (a
refresh token replayed on A while B rotates it) leaves a `revoked:` marker for an hour: tokens
of that grant stored after it are dropped, so the race cannot leave a live token behind.

The scripts touch keys they compute (`revoke_family`), which is fine on a single Redis (with or
without Sentinel), not on Redis Cluster. Any Redis error raises `OAuthStoreUnavailable`
(logged once per outage); the next call tries Redis again.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

import redis

from .oauth_store import (
    EVERYONE,
    MAX_UNUSED_CLIENTS,
    REGISTRATION_WINDOW_S,
    UNUSED_CLIENT_TTL_S,
    AuthorizationCode,
    Client,
    Grant,
    OAuthStoreUnavailable,
    PendingAuthorization,
    Token,
    window_of,
)

log = logging.getLogger(__name__)

PREFIX = "memento:oauth:"
CLIENTS = PREFIX + "clients"
UNUSED = PREFIX + "unused"
CLIENT_TTL_S = 90 * 86400.0  # an unused registration is forgotten after this
REVOKED_TTL_MS = 3600 * 1000  # how long a revoked grant refuses new tokens (at least)
T = TypeVar("T")

# KEYS: client, clients, unused. ARGV: ttl ms, expiry score, client id, cutoff ms (unused ones
# registered before it are past their time). The client; a used one has its TTL restarted, an
# unused one keeps its deadline however often it is looked up (the key's TTL is Redis's clock,
# the cutoff the server's: both are checked).
_GET_CLIENT = """
local v = redis.call('GET', KEYS[1])
if not v then return v end
local registered = redis.call('ZSCORE', KEYS[3], ARGV[3])
if not registered then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
elseif tonumber(registered) <= tonumber(ARGV[4]) then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[3])
  redis.call('ZREM', KEYS[3], ARGV[3])
  return false
end
return v
"""

# KEYS: client, clients, unused. ARGV: ttl ms, expiry score, client id. 1, or 0 if it is gone.
_MARK_USED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[3], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
"""

# KEYS: client, clients, unused. ARGV: client id, data, unused ttl ms, now ms, max unused,
# client key prefix. Forgets unused clients past their time, drops the oldest unused ones
# while `max unused` are kept, then stores the new one as unused.
_ADD_CLIENT = """
local cutoff = tonumber(ARGV[4]) - tonumber(ARGV[3])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', cutoff)) do
  redis.call('ZREM', KEYS[2], id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', cutoff)
local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[5]) + 1
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, over - 1)) do
    redis.call('DEL', ARGV[6] .. id)
    redis.call('ZREM', KEYS[2], id)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, over - 1)
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]) + tonumber(ARGV[3]), ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
"""

# KEYS: the address's counter, everyone's counter. ARGV: per-address limit, overall limit
# (0: none), ttl ms. 1 when counted, 0 when a limit is reached.
_TAKE_SLOT = """
local mine = tonumber(redis.call('GET', KEYS[1]) or '0')
local all = tonumber(redis.call('GET', KEYS[2]) or '0')
local per, overall = tonumber(ARGV[1]), tonumber(ARGV[2])
if (per > 0 and mine >= per) or (overall > 0 and all >= overall) then return 0 end
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
"""

# KEYS: pending. The failure count after this one; 0 when the request is gone.
_COUNT_FAILURE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HINCRBY', KEYS[1], 'failures', 1)
"""

# KEYS: code or token. ARGV: the kind required ('' for codes). {data, uses including this one}.
_USE = """
local f = redis.call('HMGET', KEYS[1], 'data', 'kind')
if not f[1] then return false end
if ARGV[1] ~= '' and f[2] ~= ARGV[1] then return false end
return {f[1], redis.call('HINCRBY', KEYS[1], 'uses', 1)}
"""

# KEYS: token, family, revoked. ARGV: kind, data, ttl ms, digest, uses. 0: the grant is revoked.
_PUT_TOKEN = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'kind', ARGV[1], 'data', ARGV[2], 'uses', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[4])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return 1
"""

# KEYS: family, revoked. ARGV: token key prefix, marker ttl ms. How many tokens were deleted.
_REVOKE = """
local n = 0
for _, hex in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  n = n + redis.call('DEL', ARGV[1] .. hex)
end
local ttl = math.max(redis.call('PTTL', KEYS[1]), tonumber(ARGV[2]))
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], '1', 'PX', ttl)
return n
"""


def _key(kind: str, name: str) -> str:
    return f"{PREFIX}{kind}:{name}"


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def _grant(data: dict[str, Any]) -> Grant:
    return Grant(**{**data, "scopes": tuple(data["scopes"])})


def _client_json(client: Client) -> str:
    data = asdict(client)
    data["secret_digest"] = client.secret_digest.hex() if client.secret_digest is not None else None
    return _dumps(data)


def _client(raw: str) -> Client:
    data = json.loads(raw)
    secret = data["secret_digest"]
    return Client(
        **{**data, "redirect_uris": tuple(data["redirect_uris"]), "secret_digest": bytes.fromhex(secret) if secret is not None else None}
    )


def _pending(raw: str, failures: str | None) -> PendingAuthorization:
    data = json.loads(raw)
    return PendingAuthorization(**{**data, "scopes": tuple(data["scopes"]), "failures": int(failures or 0)})


def _code(raw: str, uses: int) -> AuthorizationCode:
    data = json.loads(raw)
    return AuthorizationCode(**{**data, "grant": _grant(data["grant"]), "used": uses > 0})


def _token(raw: str, uses: int) -> Token:
    data = json.loads(raw)
    return Token(**{**data, "grant": _grant(data["grant"]), "used": uses > 0})


class RedisOAuthStore:
    """`OAuthStore` in Redis, shared by every replica (see the module docstring)."""

    def __init__(
        self,
        client: Any,
        *,
        clock: Callable[[], float] = time.time,
        client_ttl_s: float = CLIENT_TTL_S,
        unused_ttl_s: float = UNUSED_CLIENT_TTL_S,
        max_unused: int = MAX_UNUSED_CLIENTS,
    ) -> None:
        """`client`: a redis-py client with decode_responses=True (`storage.redis.connect`);
        `clock`: the OAuth server's clock, which the objects' expiry times are on."""
        self.client = client
        self.clock = clock
        self.client_ttl_ms = int(client_ttl_s * 1000)
        self.unused_ttl_ms = int(unused_ttl_s * 1000)
        self.max_unused = max_unused
        self._get_client = client.register_script(_GET_CLIENT)
        self._mark_used = client.register_script(_MARK_USED)
        self._add_client = client.register_script(_ADD_CLIENT)
        self._take_slot = client.register_script(_TAKE_SLOT)
        self._count_failure = client.register_script(_COUNT_FAILURE)
        self._use = client.register_script(_USE)
        self._put_token = client.register_script(_PUT_TOKEN)
        self._revoke = client.register_script(_REVOKE)
        self._lock = threading.Lock()
        self._down = False

    def _run(self, fn: Callable[[Any], T]) -> T:
        """`fn(client)`; any Redis error becomes `OAuthStoreUnavailable` (logged once per outage)."""
        try:
            result = fn(self.client)
        except (redis.RedisError, OSError) as exc:
            with self._lock:
                was_down, self._down = self._down, True
            if not was_down:
                log.warning("redis unavailable: OAuth answers 503 until it is back: %s", exc)
            raise OAuthStoreUnavailable(f"the OAuth store (Redis) is unavailable: {exc}") from exc
        if self._down:
            with self._lock:
                was_down, self._down = self._down, False
            if was_down:
                log.info("redis is back: OAuth works again")
        return result

    def _ttl_ms(self, expires_at: float) -> int:
        return max(1, math.ceil((expires_at - self.clock()) * 1000))

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ---------------------------------------------------------------- clients

    def add_client(self, client: Client) -> None:
        keys = [_key("client", client.client_id), CLIENTS, UNUSED]
        args = [client.client_id, _client_json(client), self.unused_ttl_ms, self._now_ms(), self.max_unused, PREFIX + "client:"]
        self._run(lambda r: self._add_client(keys=keys, args=args, client=r))

    def get_client(self, client_id: str) -> Client | None:
        keys = [_key("client", client_id), CLIENTS, UNUSED]
        now_ms = self._now_ms()
        args = [self.client_ttl_ms, now_ms + self.client_ttl_ms, client_id, now_ms - self.unused_ttl_ms]
        raw = self._run(lambda r: self._get_client(keys=keys, args=args, client=r))
        return _client(raw) if raw is not None else None

    def mark_client_used(self, client_id: str) -> bool:
        keys = [_key("client", client_id), CLIENTS, UNUSED]
        args = [self.client_ttl_ms, self._now_ms() + self.client_ttl_ms, client_id]
        return bool(self._run(lambda r: self._mark_used(keys=keys, args=args, client=r)))

    def take_registration_slot(self, address: str, per_address: int, overall: int) -> float:
        window, left_s = window_of(self.clock())
        keys = [_key("rate", f"{address}:{window}"), _key("rate", f"{EVERYONE}:{window}")]
        args = [per_address, overall, int(REGISTRATION_WINDOW_S * 1000) * 2]
        counted = self._run(lambda r: self._take_slot(keys=keys, args=args, client=r))
        return 0.0 if counted else left_s

    def count_clients(self) -> int:
        def run(r: Any) -> int:
            pipe = r.pipeline(transaction=True)
            pipe.zremrangebyscore(CLIENTS, "-inf", self._now_ms())
            pipe.zcard(CLIENTS)
            return int(pipe.execute()[1])

        return self._run(run)

    # ---------------------------------------------------------------- consent

    def put_pending(self, pending: PendingAuthorization) -> None:
        data = asdict(pending)
        del data["failures"]

        def run(r: Any) -> None:
            key = _key("pending", pending.id)
            pipe = r.pipeline(transaction=True)
            pipe.delete(key)
            pipe.hset(key, mapping={"data": _dumps(data), "failures": pending.failures})
            pipe.pexpire(key, self._ttl_ms(pending.expires_at))
            pipe.execute()

        self._run(run)

    def get_pending(self, pending_id: str) -> PendingAuthorization | None:
        raw, failures = self._run(lambda r: r.hmget(_key("pending", pending_id), "data", "failures"))
        return _pending(raw, failures) if raw is not None else None

    def take_pending(self, pending_id: str) -> PendingAuthorization | None:
        def run(r: Any) -> list[Any]:
            key = _key("pending", pending_id)
            pipe = r.pipeline(transaction=True)
            pipe.hmget(key, "data", "failures")
            pipe.delete(key)
            found: list[Any] = pipe.execute()[0]
            return found

        raw, failures = self._run(run)
        return _pending(raw, failures) if raw is not None else None

    def count_failure(self, pending_id: str) -> int:
        return int(self._run(lambda r: self._count_failure(keys=[_key("pending", pending_id)], client=r)))

    # ---------------------------------------------------------------- codes and tokens

    def put_code(self, digest: bytes, code: AuthorizationCode) -> None:
        data = asdict(code)
        del data["used"]

        def run(r: Any) -> None:
            key = _key("code", digest.hex())
            pipe = r.pipeline(transaction=True)
            pipe.delete(key)
            pipe.hset(key, mapping={"data": _dumps(data), "uses": 1 if code.used else 0})
            pipe.pexpire(key, self._ttl_ms(code.expires_at))
            pipe.execute()

        self._run(run)

    def use_code(self, digest: bytes) -> AuthorizationCode | None:
        found = self._run(lambda r: self._use(keys=[_key("code", digest.hex())], args=[""], client=r))
        if not found:
            return None
        raw, uses = found
        return _code(raw, int(uses) - 1)  # as it was before this use

    def put_token(self, digest: bytes, token: Token) -> None:
        data = asdict(token)
        del data["used"]
        hex_digest = digest.hex()
        family = token.grant.family
        keys = [_key("token", hex_digest), _key("family", family), _key("revoked", family)]
        args = [token.kind, _dumps(data), self._ttl_ms(token.expires_at), hex_digest, 1 if token.used else 0]
        if not self._run(lambda r: self._put_token(keys=keys, args=args, client=r)):
            log.warning("OAuth: a %s token of revoked grant %s was not stored", token.kind, family)

    def get_token(self, digest: bytes) -> Token | None:
        raw, uses = self._run(lambda r: r.hmget(_key("token", digest.hex()), "data", "uses"))
        return _token(raw, int(uses or 0)) if raw is not None else None

    def use_refresh(self, digest: bytes) -> Token | None:
        found = self._run(lambda r: self._use(keys=[_key("token", digest.hex())], args=["refresh"], client=r))
        if not found:
            return None
        raw, uses = found
        return _token(raw, int(uses) - 1)  # as it was before this use

    def revoke_family(self, family: str) -> int:
        keys = [_key("family", family), _key("revoked", family)]
        args = [PREFIX + "token:", REVOKED_TTL_MS]
        return int(self._run(lambda r: self._revoke(keys=keys, args=args, client=r)))

    def purge(self, now: float) -> None:
        """Nothing to do: every key expires with what it holds (`count_clients` trims `clients`)."""
