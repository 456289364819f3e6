"""The consolidation run lock in Redis, when Redis is enabled (docs/lifecycle.md "Scheduling").

`SET key token NX PX lease`: taken by one replica, with a lease so a replica that dies holding
it frees it by itself; released (and extended) only by its holder, by comparing the token in a
Lua script. While Redis does not answer the lock counts as free and the database's own lock
(PostgreSQL's advisory lock; SQLite's in-process one) and the durable run record decide alone:
Redis being down never stops maintenance (000 §9.1).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

log = logging.getLogger(__name__)

KEY = "memento:lock:consolidation"
LEASE_MS = 15 * 60 * 1000  # extended at every stage of a run (refresh)

_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
_EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"


class RedisRunLock:
    """One replica at a time; the token proves who holds it."""

    def __init__(self, client: Any, key: str = KEY, lease_ms: int = LEASE_MS) -> None:
        self.client = client
        self.key = key
        self.lease_ms = lease_ms
        self._token: str | None = None

    def acquire(self) -> bool:
        import redis

        token = uuid.uuid4().hex
        try:
            taken = self.client.set(self.key, token, nx=True, px=self.lease_ms)
        except redis.RedisError as exc:
            log.warning("Redis did not answer for the consolidation lock (%s); the database's lock decides", type(exc).__name__)
            self._token = None
            return True
        if not taken:
            return False
        self._token = token
        return True

    def refresh(self) -> None:
        import redis

        if self._token is None:
            return
        try:
            self.client.eval(_EXTEND, 1, self.key, self._token, self.lease_ms)
        except redis.RedisError:
            log.warning("could not extend the consolidation lock in Redis", exc_info=True)

    def release(self) -> None:
        import redis

        token, self._token = self._token, None
        if token is None:
            return
        try:
            self.client.eval(_RELEASE, 1, self.key, token)
        except redis.RedisError:
            log.warning("could not release the consolidation lock in Redis (its lease ends it)", exc_info=True)
