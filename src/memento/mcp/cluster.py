"""Streamable HTTP sessions shared by several replicas through Redis (scale-out, PRODUCT E2).

With Redis enabled any replica can serve any MCP session:

- `RedisSessionDirectory` keeps each session's negotiated state (protocol version, client info
  and capabilities, log level, the credential that opened it, feature state such as resource
  subscriptions) under `memento:mcp:session:{id}`, refreshed with every request and expiring
  after SESSION_TTL_MINUTES of silence on every replica. A replica that is sent an id it does
  not know adopts the session from there.
- One replica is a session's *home*: the one holding its notification (GET) stream, or the one
  that created it until a GET stream opens. Unsolicited notifications are delivered by the
  home only; a replica that needs to send one to a session homed elsewhere forwards it over
  the bus, and a client's answer to a server→client request that lands on another replica is
  forwarded the same way.
- `RedisEventStore` (in `cluster_store`, with the task board and the `Guarded` Redis calls)
  keeps SSE events in one Redis stream per session, so a client can resume (`Last-Event-ID`)
  on a replica other than the one that sent the events.

Without Redis `LocalDirectory` keeps everything in-process (one replica). Redis errors never
fail a request: the replica carries on with what it holds locally (new sessions stay local,
events fall back to memory) and shares again once Redis answers.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Protocol

from memento.auth.principal import Principal
from memento.mcp.cluster_store import (  # re-exported: the old home of the shared stores
    EVENTS_KEY,
    SESSION_TASKS_KEY,
    TASK_KEY,
    TASK_SEQ_KEY,
    TASKS_CHANNEL,
    Bus,
    Guarded,
    RedisEventStore,
    RedisTaskBoard,
)
from memento.mcp.context import Session

__all__ = [
    "CHANNEL",
    "EVENTS_KEY",
    "SESSION_KEY",
    "SESSION_TASKS_KEY",
    "TASKS_CHANNEL",
    "TASK_KEY",
    "TASK_SEQ_KEY",
    "Bus",
    "Guarded",
    "LocalDirectory",
    "RedisEventStore",
    "RedisSessionDirectory",
    "RedisTaskBoard",
    "SessionDirectory",
    "apply_snapshot",
    "session_from",
    "snapshot",
]

log = logging.getLogger(__name__)

SESSION_KEY = "memento:mcp:session:"
CHANNEL = "sessions"  # the bus channel of session hand-over messages


# ---------------------------------------------------------------- session state


def snapshot(session: Session) -> dict[str, Any]:
    """The part of a session every replica needs to continue it."""
    p = session.principal
    return {
        "protocol_version": session.protocol_version,
        "client_info": session.client_info,
        "client_capabilities": session.client_capabilities,
        "initialized": session.initialized,
        "log_level": session.log_level,
        "state": session.state,
        "principal": {"subject": p.subject, "agent_id": p.agent_id, "read_only": p.read_only, "scopes": sorted(p.scopes), "kind": p.kind},
    }


def apply_snapshot(session: Session, data: dict[str, Any]) -> None:
    """Bring a local copy up to date with the shared state (the owner never changes)."""
    session.protocol_version = data.get("protocol_version")
    session.client_info = dict(data.get("client_info") or {})
    session.client_capabilities = dict(data.get("client_capabilities") or {})
    session.initialized = bool(data.get("initialized"))
    session.log_level = str(data.get("log_level") or session.log_level)
    session.state = dict(data.get("state") or {})


def session_from(session_id: str, data: dict[str, Any]) -> Session:
    p = data.get("principal") or {}
    principal = Principal(
        subject=str(p.get("subject", "")),
        agent_id=p.get("agent_id"),
        read_only=bool(p.get("read_only")),
        scopes=frozenset(str(s) for s in p.get("scopes") or ()),
        kind=str(p.get("kind", "access_key")),
    )
    session = Session(id=session_id, principal=principal)
    apply_snapshot(session, data)
    return session


class SessionDirectory(Protocol):
    """Where the HTTP transport records its sessions so other replicas can continue them."""

    replica_id: str
    shared: bool  # whether other replicas may serve the same sessions

    def register(self, session: Session) -> None:
        """A session was initialised here (this replica is its home)."""
        ...

    def sync(self, session: Session) -> None:
        """After a request: share the session's state if it changed, and keep it alive."""
        ...

    def load(self, session_id: str) -> Session | None:
        """The shared session `session_id` as a fresh local copy; None when unknown."""
        ...

    def claim(self, session: Session) -> None:
        """This replica now holds the session's notification stream."""
        ...

    def alive(self, session_id: str) -> bool:
        """Whether the session is still in use somewhere (so an idle local copy is only evicted)."""
        ...

    def remove(self, session_id: str) -> None:
        """The session ended (DELETE or expiry): forget it everywhere."""
        ...

    def forward(self, session_id: str, op: str, message: dict[str, Any]) -> bool:
        """Hand a message for the session to the other replicas ("send" to its home, or the
        client's "response" to the replica that asked); False when it could not be sent."""
        ...


class LocalDirectory:
    """One replica: sessions live only in this process."""

    replica_id = "local"
    shared = False

    def register(self, session: Session) -> None:
        pass

    def sync(self, session: Session) -> None:
        pass

    def load(self, session_id: str) -> Session | None:
        return None

    def claim(self, session: Session) -> None:
        pass

    def alive(self, session_id: str) -> bool:
        return False

    def remove(self, session_id: str) -> None:
        pass

    def forward(self, session_id: str, op: str, message: dict[str, Any]) -> bool:
        return False


class RedisSessionDirectory:
    """Session records in Redis; hand-over messages on the replica bus."""

    def __init__(self, client: Any, bus: Bus, ttl_s: float, *, touch_every_s: float = 15.0) -> None:
        self.redis = client if isinstance(client, Guarded) else Guarded(client, "MCP sessions")
        self.bus = bus
        self.replica_id = bus.replica_id
        self.shared = True
        self.ttl_s = max(1, int(ttl_s))
        self.touch_every_s = min(touch_every_s, self.ttl_s / 4)
        self._saved: dict[str, str] = {}  # session id -> the state last written
        self._touched: dict[str, float] = {}

    def _key(self, session_id: str) -> str:
        return SESSION_KEY + session_id

    def _write(self, session: Session, home: str | None = None) -> bool:
        state = json.dumps(snapshot(session), sort_keys=True, separators=(",", ":"))
        key = self._key(session.id)

        def run(r: Any) -> bool:
            pipe = r.pipeline(transaction=True)
            pipe.hset(key, "state", state)
            if home is not None:
                pipe.hset(key, "home", home)
            pipe.expire(key, self.ttl_s)
            pipe.execute()
            return True

        if not self.redis.call(run, False):
            return False
        self._saved[session.id] = state
        self._touched[session.id] = time.monotonic()
        return True

    def register(self, session: Session) -> None:
        self._write(session, home=self.replica_id)

    def sync(self, session: Session) -> None:
        state = json.dumps(snapshot(session), sort_keys=True, separators=(",", ":"))
        if state != self._saved.get(session.id):
            if self._write(session):
                self.bus.publish(CHANNEL, {"op": "changed", "id": session.id})
            return
        if time.monotonic() - self._touched.get(session.id, 0.0) >= self.touch_every_s:
            key = self._key(session.id)
            if self.redis.call(lambda r: r.expire(key, self.ttl_s), False):
                self._touched[session.id] = time.monotonic()

    def record(self, session_id: str) -> tuple[dict[str, Any], str | None] | None:
        """The shared state and home of a session; None when unknown (or Redis is down)."""
        raw: dict[str, str] = self.redis.call(lambda r: r.hgetall(self._key(session_id)), {})
        if not raw or "state" not in raw:
            return None
        try:
            data = json.loads(raw["state"])
        except ValueError:
            log.warning("ignoring an unreadable shared session record %s", session_id)
            return None
        return (data, raw.get("home")) if isinstance(data, dict) else None

    def load(self, session_id: str) -> Session | None:
        found = self.record(session_id)
        if found is None:
            return None
        data, home = found
        session = session_from(session_id, data)
        session.delivers = home == self.replica_id
        self._saved[session_id] = json.dumps(snapshot(session), sort_keys=True, separators=(",", ":"))
        self._touched[session_id] = 0.0
        return session

    def claim(self, session: Session) -> None:
        session.delivers = True
        key = self._key(session.id)

        def run(r: Any) -> bool:
            pipe = r.pipeline(transaction=True)
            pipe.hset(key, "home", self.replica_id)
            pipe.expire(key, self.ttl_s)
            pipe.execute()
            return True

        if self.redis.call(run, False):
            self.bus.publish(CHANNEL, {"op": "claimed", "id": session.id, "home": self.replica_id})

    def alive(self, session_id: str) -> bool:
        return bool(self.redis.call(lambda r: r.exists(self._key(session_id)), 0))

    def forget_local(self, session_id: str) -> None:
        self._saved.pop(session_id, None)
        self._touched.pop(session_id, None)

    def remove(self, session_id: str) -> None:
        self.forget_local(session_id)
        self.redis.call(lambda r: r.delete(self._key(session_id)), 0)
        self.bus.publish(CHANNEL, {"op": "closed", "id": session_id})

    def forward(self, session_id: str, op: str, message: dict[str, Any]) -> bool:
        return self.bus.publish(CHANNEL, {"op": op, "id": session_id, "message": message})
