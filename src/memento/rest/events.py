"""Live events of 001 §8.5: what a write changed, as named events for `GET /api/events`.

`EventHub.on_change` (a MemoryService listener, called on the writing worker thread) turns each
committed ChangeEvent into LiveEvents — memory_created {id, content, type}, memory_updated
{id, changes}, memory_deleted {id}, entity_created {id, name, type}, consolidation_complete
{merged, deleted}, sync_complete {timestamp} — each with an id and the agent it belongs to.

Every event goes into a bounded ring of this process (for `Last-Event-ID` resumption) and to the
open streams; with Redis on it is also pushed onto a bounded Redis list (resumption on a replica
that never saw it) and published on the replica bus, whose other replicas add it to their rings
and streams. Redis is only ever called from worker threads (the writer's, the bus's, or one
started for a resumption), never on the event loop.

Scoping: a stream sees the events of its agent. An event about a memory of the shared pool (agent
`default`, not working memory) that was created or updated is seen by every agent, as recall
would show that memory; everything else only by its own agent. Admin credentials see every event.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..graph import Entity
from ..models import DEFAULT_AGENT, AgentScope, ChangeEvent, Fragment, PrivacyScope

log = logging.getLogger(__name__)

BUS_CHANNEL = "sse"  # memento:bus:sse
REDIS_RING = "memento:sse:events"
EVENT_TYPES = ("memory_created", "memory_updated", "memory_deleted", "entity_created", "consolidation_complete", "sync_complete")
ALL = None  # a subscriber of every agent (admin)
SYSTEM = AgentScope("system")  # reads the changed rows whoever owns them


@dataclass(frozen=True)
class LiveEvent:
    id: str  # `<ms>-<n>-<replica>`: unique across replicas, ordered by time within one
    type: str
    data: dict[str, Any]
    agent_id: str  # whose it is
    shared: bool = False  # about a shared-pool memory every agent sees

    def visible_to(self, agent_id: str | None) -> bool:
        return agent_id is ALL or agent_id == self.agent_id or self.shared

    def wire(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "data": self.data, "agent_id": self.agent_id, "shared": self.shared}

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> LiveEvent:
        return cls(str(raw["id"]), str(raw["type"]), dict(raw["data"]), str(raw["agent_id"]), bool(raw.get("shared")))

    def sort_key(self) -> tuple[int, int, str]:
        return _key(self.id) or (0, 0, self.id)

    def encode(self) -> bytes:
        """The SSE frame."""
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        return f"id: {self.id}\nevent: {self.type}\ndata: {payload}\n\n".encode()


def _key(event_id: str) -> tuple[int, int, str] | None:
    ms, _, rest = event_id.partition("-")
    n, _, replica = rest.partition("-")
    if not (ms.isdigit() and n.isdigit() and replica):
        return None
    return (int(ms), int(n), replica)


class ChangeReader(Protocol):
    """What the hub reads to describe a change (the store): the changed memories and entities."""

    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]: ...
    def get_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[Entity]: ...


class Subscriber:
    """One open stream: a queue fed from any thread through its event loop."""

    def __init__(self, agent_id: str | None, limit: int) -> None:
        self.agent_id = agent_id
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[LiveEvent | None] = asyncio.Queue(limit)
        self.overflowed = False

    def offer(self, event: LiveEvent | None) -> None:
        """Called on the loop: queue `event`; a stream that falls `limit` events behind is ended."""
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(None)


class EventHub:
    """The per-process ring, the open streams and the replica fan-out."""

    def __init__(
        self,
        reader: ChangeReader,
        *,
        ring_size: int = 1000,
        queue_limit: int = 1000,
        redis: Any = None,
        bus: Any = None,
        replica_id: str | None = None,
    ) -> None:
        self.reader = reader
        self.ring: deque[LiveEvent] = deque(maxlen=ring_size)
        self.ring_size = ring_size
        self.queue_limit = queue_limit
        self.redis = redis  # a blocking redis-py client (worker threads only), or None
        self.bus = bus
        self.replica_id = replica_id or (bus.replica_id if bus is not None else secrets.token_hex(6))
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self._subscribers: set[Subscriber] = set()
        self._closing = False
        if bus is not None:
            bus.on(BUS_CHANNEL, self._on_remote)

    # ------------------------------------------------------------ producing

    def new_id(self) -> str:
        return f"{int(time.time() * 1000)}-{next(self._counter)}-{self.replica_id}"

    def on_change(self, change: ChangeEvent) -> None:
        """MemoryService listener (a worker thread): describe the change and deliver it."""
        try:
            events = list(self.describe(change))
        except Exception:
            log.warning("cannot describe a %s change for live events", change.kind, exc_info=True)
            return
        for event in events:
            self.publish(event)

    def describe(self, change: ChangeEvent) -> Iterable[LiveEvent]:
        agent, kind = change.agent_id, change.kind
        if kind == "created" and change.fragment_ids:
            for f in self.reader.get_many(SYSTEM, list(change.fragment_ids)):
                data = {"id": f.id, "content": f.content, "type": f.type.value}
                yield LiveEvent(self.new_id(), "memory_created", data, f.agent_id, _shared(f))
        elif kind == "amended" and change.fragment_ids:
            details = change.details or {}
            for f in self.reader.get_many(SYSTEM, list(change.fragment_ids)):
                changes = details.get("changes", details) if isinstance(details, dict) else {}
                yield LiveEvent(self.new_id(), "memory_updated", {"id": f.id, "changes": _jsonable(changes)}, f.agent_id, _shared(f))
        elif kind == "deleted":
            for fid in change.fragment_ids:
                yield LiveEvent(self.new_id(), "memory_deleted", {"id": fid}, agent)
        elif kind == "entity_created" and change.entity_ids:
            for e in self.reader.get_entities(SYSTEM, list(change.entity_ids)):
                yield LiveEvent(self.new_id(), "entity_created", {"id": e.id, "name": e.name, "type": e.entity_type}, e.agent_id)
        elif kind == "consolidated":
            details = change.details or {}
            merged = int(details.get("merged", details.get("memories_merged", 0)) or 0)
            deleted = int(details.get("deleted", details.get("memories_deleted", 0)) or 0)
            yield LiveEvent(self.new_id(), "consolidation_complete", {"merged": merged, "deleted": deleted}, agent)
        elif kind == "synced":
            stamp = (change.details or {}).get("timestamp") or datetime.now(UTC).isoformat()
            yield LiveEvent(self.new_id(), "sync_complete", {"timestamp": str(stamp)}, agent)

    def publish(self, event: LiveEvent) -> None:
        """Deliver an event made here: ring, streams, then Redis (list and the other replicas)."""
        self._deliver(event)
        if self.redis is not None:
            self._remember_in_redis(event)
        if self.bus is not None:
            self.bus.publish(BUS_CHANNEL, event.wire())

    def _on_remote(self, payload: dict[str, Any]) -> None:
        """Bus thread: an event another replica made."""
        try:
            event = LiveEvent.from_wire(payload)
        except (KeyError, TypeError, ValueError):
            log.warning("ignoring an unreadable live event from another replica")
            return
        self._deliver(event)

    def _remember_in_redis(self, event: LiveEvent) -> None:
        import redis

        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.rpush(REDIS_RING, json.dumps(event.wire(), separators=(",", ":")))
            pipe.ltrim(REDIS_RING, -self.ring_size, -1)
            pipe.execute()
        except (redis.RedisError, OSError) as exc:
            log.info("live event %s not kept in redis: %s", event.id, exc)

    def _deliver(self, event: LiveEvent) -> None:
        with self._lock:
            self.ring.append(event)
            subscribers = [s for s in self._subscribers if event.visible_to(s.agent_id)]
        for s in subscribers:
            try:
                s.loop.call_soon_threadsafe(s.offer, event)
            except RuntimeError:  # its loop is closed: the server is stopping
                pass

    # ------------------------------------------------------------ consuming

    def subscribe(self, agent_id: str | None) -> Subscriber:
        """A new stream (on the event loop). Register before reading the backlog: nothing falls between."""
        sub = Subscriber(agent_id, self.queue_limit)
        with self._lock:
            self._subscribers.add(sub)
            closing = self._closing
        if closing:
            sub.offer(None)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(sub)

    def backlog(self, last_id: str, agent_id: str | None) -> list[LiveEvent] | None:
        """The events after `last_id` this process remembers, for `agent_id`; None when `last_id`
        is not in the ring and is not older than its oldest event (ask Redis)."""
        with self._lock:
            ring = list(self.ring)
        return _after(ring, last_id, agent_id, complete=False)

    def backlog_from_redis(self, last_id: str, agent_id: str | None) -> list[LiveEvent]:
        """The events after `last_id` in the Redis list (blocking: call from a worker thread)."""
        import redis

        if self.redis is None:
            return []
        try:
            raw = self.redis.lrange(REDIS_RING, 0, -1)
        except (redis.RedisError, OSError) as exc:
            log.info("cannot read live events from redis for a resumption: %s", exc)
            return []
        events = []
        for item in raw:
            try:
                events.append(LiveEvent.from_wire(json.loads(item)))
            except (KeyError, TypeError, ValueError):
                continue
        return _after(events, last_id, agent_id, complete=True) or []

    def begin_shutdown(self) -> None:
        """End every open stream (thread-safe), so the server can drain."""
        with self._lock:
            self._closing = True
            subscribers = list(self._subscribers)
        for s in subscribers:
            try:
                s.loop.call_soon_threadsafe(s.offer, None)
            except RuntimeError:
                pass


def _after(events: list[LiveEvent], last_id: str, agent_id: str | None, *, complete: bool) -> list[LiveEvent] | None:
    """Events after `last_id`: after its position when present, else by time when it is older than
    the first one (`complete`: the sequence is all there is, so an unknown id gives everything newer)."""
    for i, event in enumerate(events):
        if event.id == last_id:
            return [e for e in events[i + 1 :] if e.visible_to(agent_id)]
    key = _key(last_id)
    if key is None:
        return [] if complete or not events else None
    if complete or (events and events[0].sort_key() > key):
        return [e for e in events if e.sort_key() > key and e.visible_to(agent_id)]
    return None


def _shared(f: Fragment) -> bool:
    return f.agent_id == DEFAULT_AGENT and f.session_id is None and f.privacy_scope is not PrivacyScope.PRIVATE


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
