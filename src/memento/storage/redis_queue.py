"""The evaluator's delivery path between replicas when Redis is enabled (docs/lifecycle.md
"Evaluator"): a Redis stream of job ids read through one consumer group.

The table (`evaluation_jobs`) stays the durable record of every job's state and result; the
stream only says "job N is waiting" to whichever replica's worker is blocked on it, so a new job
is judged at once instead of at the next poll. A producer XADDs the id after the row committed
(`MAXLEN ~` bounds the stream); a worker XREADGROUPs it, claims the row by id (the table decides
whether it is still due), judges, and XACKs. Entries a crashed worker left pending are taken over
with XAUTOCLAIM once idle for the job lease.

Any Redis error marks the stream down for `retry_after_s` (logged once per outage): every call
then answers None/False without touching the network, and the worker polls the table alone.
Nothing is lost while it is down, because nothing lives only here. A Redis that comes back
empty (no persistence) gets its stream and group created again on first use.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

STREAM = "memento:evaluator:jobs"
GROUP = "memento-evaluator"
MAXLEN = 100_000  # approximate: a backlog beyond it is still found by the table poll
RECLAIM_IDLE_MS = 10 * 60 * 1000  # the evaluator's job lease
CONSUMER_IDLE_MS = 24 * 60 * 60 * 1000  # a consumer idle this long with nothing pending is removed


@dataclass(frozen=True)
class Delivery:
    """One stream entry: its id in the stream and the job id it carries."""

    entry: str
    job_id: int


@dataclass(frozen=True)
class StreamStats:
    """The stream's size, the entries delivered but not yet acknowledged, and the entries not yet
    delivered to the group (None when the server cannot tell: Redis before 7)."""

    length: int
    pending: int
    lag: int | None


class RedisJobStream:
    """XADD / XREADGROUP / XACK / XAUTOCLAIM on one stream, with the down-marking of 000 §9.1."""

    def __init__(
        self,
        client: Any,
        consumer: str,
        *,
        stream: str = STREAM,
        group: str = GROUP,
        maxlen: int = MAXLEN,
        retry_after_s: float = 2.0,
        reclaim_idle_ms: int = RECLAIM_IDLE_MS,
    ) -> None:
        self.client = client
        self.consumer = consumer
        self.stream = stream
        self.group = group
        self.maxlen = maxlen
        self.retry_after_s = retry_after_s
        self.reclaim_idle_ms = reclaim_idle_ms
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._down = False
        self._group_ready = False

    # ------------------------------------------------------------ availability

    @property
    def available(self) -> bool:
        """False while the stream is marked down and not yet due for another try."""
        return not self._skipping()

    def _skipping(self) -> bool:
        with self._lock:
            return self._down and time.monotonic() < self._down_until

    def _failed(self, what: str, exc: Exception) -> None:
        with self._lock:
            self._down_until = time.monotonic() + self.retry_after_s
            self._group_ready = False
            if not self._down:
                log.warning("redis unavailable for the evaluator's stream (%s: %s): the worker polls the table", what, exc)
            self._down = True

    def _succeeded(self) -> None:
        with self._lock:
            if self._down:
                log.info("redis is back: the evaluator's stream delivers jobs again")
            self._down = False

    # ------------------------------------------------------------ producing

    def add(self, job_ids: Sequence[int]) -> bool:
        """Announce jobs whose rows committed; False when Redis did not take them (the table
        poll will find them)."""
        import redis

        if not job_ids:
            return True
        if self._skipping():
            return False
        try:
            with self.client.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    pipe.xadd(self.stream, {"job": str(int(job_id))}, maxlen=self.maxlen, approximate=True)
                pipe.execute()
        except (redis.RedisError, OSError) as exc:
            self._failed("XADD", exc)
            return False
        self._succeeded()
        return True

    # ------------------------------------------------------------ consuming

    def read(self, count: int, block_ms: int | None) -> list[Delivery] | None:
        """Up to `count` entries never delivered to the group, waiting up to `block_ms` for one
        (None or 0: no wait); None when Redis is down."""
        import redis

        if self._skipping():
            return None
        try:
            self._ensure_group()
            answer = self._read_group(count, block_ms)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                self._failed("XREADGROUP", exc)
                return None
            try:  # the group went away (Redis restarted empty, or emptied): create it again
                self._group_ready = False
                self._ensure_group()
                answer = self._read_group(count, None)
            except (redis.RedisError, OSError) as again:
                self._failed("XREADGROUP", again)
                return None
        except (redis.RedisError, OSError) as exc:
            self._failed("XREADGROUP", exc)
            return None
        self._succeeded()
        return [d for _, entries in answer or () for d in _deliveries(entries)]

    def _read_group(self, count: int, block_ms: int | None) -> Any:
        return self.client.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=count, block=block_ms or None)

    def _ensure_group(self) -> None:
        import redis

        if self._group_ready:
            return
        try:  # from the stream's start: entries added before the group existed are delivered too
            self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def reclaim(self, count: int) -> list[Delivery] | None:
        """Take over up to `count` entries another consumer (a crashed worker) left pending
        longer than `reclaim_idle_ms`; None when Redis is down. Also removes consumers idle a day
        with nothing pending (each replica's start names a new one)."""
        import redis

        if self._skipping():
            return None
        try:
            self._ensure_group()
            answer = self.client.xautoclaim(self.stream, self.group, self.consumer, self.reclaim_idle_ms, start_id="0-0", count=count)
            self._forget_idle_consumers()
        except redis.ResponseError as exc:
            if "NOGROUP" in str(exc):
                self._group_ready = False
                return []
            self._failed("XAUTOCLAIM", exc)
            return None
        except (redis.RedisError, OSError) as exc:
            self._failed("XAUTOCLAIM", exc)
            return None
        self._succeeded()
        return _deliveries(answer[1])

    def _forget_idle_consumers(self) -> None:
        for consumer in self.client.xinfo_consumers(self.stream, self.group):
            name = consumer.get("name")
            if name != self.consumer and int(consumer.get("pending", 0)) == 0 and int(consumer.get("idle", 0)) > CONSUMER_IDLE_MS:
                self.client.xgroup_delconsumer(self.stream, self.group, name)

    def ack(self, entries: Sequence[str]) -> bool:
        """Acknowledge handled entries (and delete them: the table keeps the record); False when
        Redis did not answer (the entries stay pending and are reclaimed later)."""
        import redis

        if not entries:
            return True
        if self._skipping():
            return False
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.xack(self.stream, self.group, *entries)
                pipe.xdel(self.stream, *entries)
                pipe.execute()
        except (redis.RedisError, OSError) as exc:
            self._failed("XACK", exc)
            return False
        self._succeeded()
        return True

    # ------------------------------------------------------------ seeing it

    def stats(self) -> StreamStats | None:
        """Length, pending and lag of the stream's group; None when Redis is down or the group
        does not exist yet."""
        import redis

        if self._skipping():
            return None
        try:
            length = int(self.client.xlen(self.stream))
            groups = self.client.xinfo_groups(self.stream) if length or self.client.exists(self.stream) else []
        except (redis.RedisError, OSError):
            return None  # a scrape does not mark the stream down: the worker's next call decides
        for group in groups:
            if group.get("name") == self.group:
                lag = group.get("lag")
                return StreamStats(length=length, pending=int(group.get("pending", 0)), lag=int(lag) if lag is not None else None)
        return None


def _deliveries(entries: Any) -> list[Delivery]:
    """Stream entries as deliveries. An entry without a readable job id gets the id -1, which no
    job has: the worker's claim finds nothing and it is acknowledged like any other."""
    out = []
    for entry, fields in entries or ():
        if not fields:  # deleted after delivery (XAUTOCLAIM reports such ids with no fields)
            continue
        try:
            out.append(Delivery(str(entry), int(fields.get("job", ""))))
        except (TypeError, ValueError):
            log.warning("ignoring an unreadable evaluator stream entry %s", entry)
            out.append(Delivery(str(entry), -1))
    return out
