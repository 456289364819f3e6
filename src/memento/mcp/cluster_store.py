"""The Redis plumbing replicas share besides the session directory (see `cluster`).

- `Guarded` runs Redis calls and, after a failure, answers a default for a while, so an
  unreachable Redis costs one timeout per back-off instead of failing requests.
- `RedisEventStore` keeps SSE events in one Redis stream per session, so a client can resume
  (`Last-Event-ID`) on a replica other than the one that sent the events.
- `RedisTaskBoard` keeps MCP task records every replica can read, list and cancel.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from memento.mcp.events import MemoryEventStore, StoredEvent, mentions, quoted

log = logging.getLogger(__name__)

EVENTS_KEY = "memento:mcp:events:"
MAX_TRACKED_STREAMS = 4096  # streams whose event ids this process remembers (for drop_stream)
T = TypeVar("T")


class Guarded:
    """Run Redis calls; after a failure skip Redis (answering the default) for `retry_after_s`.

    The calls are synchronous and some run on the event loop, so the pieces that share a
    client share one guard: an unreachable Redis costs one connection timeout per back-off,
    not one per piece.
    """

    def __init__(self, client: Any, what: str, retry_after_s: float = 5.0) -> None:
        self.client = client
        self.what = what
        self.retry_after_s = retry_after_s
        self._down_until = 0.0
        self._warned = False
        self._lock = threading.Lock()

    def call(self, fn: Callable[[Any], T], default: T) -> T:
        import redis

        if time.monotonic() < self._down_until:
            return default
        try:
            result = fn(self.client)
        except (redis.RedisError, OSError) as exc:
            with self._lock:
                self._down_until = time.monotonic() + self.retry_after_s
                if not self._warned:
                    log.warning("redis unavailable, %s kept in this process until it is back: %s", self.what, exc)
                    self._warned = True
            return default
        if self._warned:
            self._warned = False
            log.info("redis is back: %s shared again", self.what)
        return result


class Bus(Protocol):
    """The replica bus (storage/redis_bus.py) as the cluster pieces use it."""

    replica_id: str

    def publish(self, channel: str, payload: dict[str, Any]) -> bool: ...
    def on(self, channel: str, handler: Callable[[dict[str, Any]], None]) -> None: ...


# ---------------------------------------------------------------- SSE events


def _redis_id(event_id: str | None) -> bool:
    return event_id is not None and "-" in event_id


class RedisEventStore:
    """SSE events in a capped Redis stream per session (an `EventStore`).

    Event ids are the stream entry ids (`<ms>-<n>`), unique within the session on every
    replica. While Redis is down events go to an in-memory store (plain numeric ids), so a
    stream keeps working on the replica that serves it.
    """

    def __init__(self, client: Any, ttl_s: float, max_events_per_session: int = 1000) -> None:
        self.redis = client if isinstance(client, Guarded) else Guarded(client, "SSE events")
        self.ttl_s = max(1, int(ttl_s))
        self.max_events = max_events_per_session
        self.fallback = MemoryEventStore(max_events_per_session)
        self._mine: dict[tuple[str, str], list[str]] = {}  # ids this process appended, per stream

    def append(self, session_id: str, stream_id: str, message: dict[str, Any] | None) -> str:
        key = EVENTS_KEY + session_id
        fields = {"s": stream_id, "m": "" if message is None else json.dumps(message, separators=(",", ":"))}

        def run(r: Any) -> str:
            pipe = r.pipeline(transaction=False)
            pipe.xadd(key, fields, maxlen=self.max_events, approximate=True)
            pipe.expire(key, self.ttl_s)
            return str(pipe.execute()[0])

        event_id = self.redis.call(run, "")
        if not event_id:
            return self.fallback.append(session_id, stream_id, message)
        self._mine.setdefault((session_id, stream_id), []).append(event_id)
        if len(self._mine) > MAX_TRACKED_STREAMS:  # finished streams are never dropped: forget the oldest
            del self._mine[next(iter(self._mine))]
        return event_id

    def stream_of(self, session_id: str, event_id: str) -> str | None:
        if not _redis_id(event_id):
            return self.fallback.stream_of(session_id, event_id)
        found: list[Any] = self.redis.call(lambda r: r.xrange(EVENTS_KEY + session_id, event_id, event_id, count=1), [])
        return str(found[0][1].get("s")) if found else None

    def after(self, session_id: str, stream_id: str, event_id: str | None) -> list[StoredEvent]:
        if event_id is not None and not _redis_id(event_id):
            return self.fallback.after(session_id, stream_id, event_id)
        start = "-" if event_id is None else "(" + event_id
        entries: list[Any] = self.redis.call(lambda r: r.xrange(EVENTS_KEY + session_id, start, "+"), [])
        events = [
            StoredEvent(str(eid), stream_id, json.loads(fields["m"]) if fields.get("m") else None)
            for eid, fields in entries
            if fields.get("s") == stream_id
        ]
        if event_id is None:
            events += self.fallback.after(session_id, stream_id, None)
        return events

    def drop_stream(self, session_id: str, stream_id: str) -> None:
        ids = self._mine.pop((session_id, stream_id), [])
        if ids:
            self.redis.call(lambda r: r.xdel(EVENTS_KEY + session_id, *ids), 0)
        self.fallback.drop_stream(session_id, stream_id)

    def drop_session(self, session_id: str) -> None:
        for key in [k for k in self._mine if k[0] == session_id]:
            del self._mine[key]
        self.redis.call(lambda r: r.delete(EVENTS_KEY + session_id), 0)
        self.fallback.drop_session(session_id)

    def erase_quoting(self, texts: Sequence[str]) -> int:
        """Drop the events quoting one of `texts`, here and in every session's Redis stream."""
        needles = quoted(texts)
        removed = self.fallback.erase_quoting(texts)

        def run(r: Any) -> int:
            gone = 0
            for key in r.scan_iter(match=EVENTS_KEY + "*", count=500):
                doomed = [eid for eid, fields in r.xrange(key) if fields.get("m") and mentions(json.loads(fields["m"]), needles)]
                if doomed:
                    gone += int(r.xdel(key, *doomed))
            return gone

        found: int = self.redis.call(run, -1)
        if found < 0:
            raise RuntimeError("redis unavailable: the stored SSE events expire with their session")
        return removed + found

    def forget_local(self, session_id: str) -> None:
        """This replica lets go of the session; the shared events stay for the others."""
        for key in [k for k in self._mine if k[0] == session_id]:
            del self._mine[key]
        self.fallback.drop_session(session_id)


# ---------------------------------------------------------------- tasks

TASK_KEY = "memento:mcp:task:"
SESSION_TASKS_KEY = "memento:mcp:session-tasks:"
TASK_SEQ_KEY = "memento:mcp:task-seq"
TASKS_CHANNEL = "tasks"

# Move a task to a terminal status unless it already is in one (two replicas may race: a
# cancel through one, the end of the run on the other). KEYS[1] the task; ARGV[1] the new
# record (JSON); ARGV[2] its TTL in ms. Returns 1 when written, 0 when it was already over.
_FINISH = """
local current = redis.call('GET', KEYS[1])
if current then
  local status = cjson.decode(current)['status']
  if status == 'completed' or status == 'failed' or status == 'cancelled' then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""


class RedisTaskBoard:
    """Task records (MCP tasks, 2025-11-25) every replica can read, list and cancel.

    The replica that created a task runs it and writes its record here when it starts and when
    it ends; the others read it (`tasks/get`, `tasks/list`), wait for it (`tasks/result`) and
    cancel it (`tasks/cancel`: the record is marked and the running replica is told over the
    bus). Records expire with the task's ttl. Redis down: answers None, callers stay local.
    """

    def __init__(self, client: Any, bus: Bus) -> None:
        self.redis = client if isinstance(client, Guarded) else Guarded(client, "MCP tasks")
        self.bus = bus
        self._finish_script: Any = None

    def next_seq(self) -> int | None:
        seq: int | None = self.redis.call(lambda r: int(r.incr(TASK_SEQ_KEY)), None)
        return seq

    def publish(self, record: dict[str, Any], ttl_ms: int) -> bool:
        task_id, session_id = record["taskId"], record["sessionId"]
        payload = json.dumps(record, separators=(",", ":"))

        def run(r: Any) -> bool:
            pipe = r.pipeline(transaction=True)
            pipe.set(TASK_KEY + task_id, payload, px=ttl_ms)
            pipe.zadd(SESSION_TASKS_KEY + session_id, {task_id: record["seq"]})
            pipe.pexpire(SESSION_TASKS_KEY + session_id, max(ttl_ms, 1))
            pipe.execute()
            return True

        return self.redis.call(run, False)

    def finish(self, record: dict[str, Any], ttl_ms: int) -> bool | None:
        """Write a terminal record; False when the task had already ended; None: Redis down."""
        payload = json.dumps(record, separators=(",", ":"))

        def run(r: Any) -> bool:
            if self._finish_script is None:
                self._finish_script = r.register_script(_FINISH)
            return bool(self._finish_script(keys=[TASK_KEY + record["taskId"]], args=[payload, max(ttl_ms, 1)]))

        result: bool | None = self.redis.call(run, None)
        return result

    def load(self, task_id: str) -> dict[str, Any] | None:
        raw: str | None = self.redis.call(lambda r: r.get(TASK_KEY + task_id), None)
        if not raw:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def session_tasks(self, session_id: str) -> list[dict[str, Any]]:
        def run(r: Any) -> list[Any]:
            ids = r.zrange(SESSION_TASKS_KEY + session_id, 0, -1)
            return list(r.mget([TASK_KEY + i for i in ids])) if ids else []

        found: list[dict[str, Any]] = []
        raws: list[Any] = self.redis.call(run, [])
        for raw in raws:
            if raw:
                try:
                    found.append(json.loads(raw))
                except ValueError:
                    continue
        return found

    def request_cancel(self, task_id: str) -> None:
        """Tell the replica running the task to stop it."""
        self.bus.publish(TASKS_CHANNEL, {"op": "cancel", "taskId": task_id})
