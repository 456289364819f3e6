"""Messages between replicas over Redis pub/sub (scale-out, 000 §2; PRODUCT E2).

Every replica publishes its committed ChangeEvents on `memento:bus:changes` and hears the
others' there, so a write through one replica reaches resource subscribers on every replica.
The MCP layer uses further channels for session hand-over (see mcp/cluster.py). A message
carries the sending replica's id; a replica never hears its own messages.

Pub/sub is fire-and-forget: while Redis is down publishing is skipped (logged once per outage)
and the listening thread reconnects with a back-off. Nothing durable travels this way — the
database stays the source of truth; a missed message only means a missed notification.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from ..models import ChangeEvent

log = logging.getLogger(__name__)

CHANNEL_PREFIX = "memento:bus:"
CHANGES = "changes"

Handler = Callable[[dict[str, Any]], None]


def event_to_wire(event: ChangeEvent) -> dict[str, Any]:
    return {
        "kind": event.kind,
        "agent_id": event.agent_id,
        "fragment_ids": list(event.fragment_ids),
        "topics": list(event.topics),
        "session_id": event.session_id,
    }


def event_from_wire(data: dict[str, Any]) -> ChangeEvent:
    return ChangeEvent(
        kind=str(data["kind"]),
        agent_id=str(data["agent_id"]),
        fragment_ids=tuple(str(i) for i in data.get("fragment_ids") or ()),
        topics=tuple(str(t) for t in data.get("topics") or ()),
        session_id=str(data["session_id"]) if data.get("session_id") else None,
    )


class RedisBus:
    """Publish to and listen on `memento:bus:*` channels; one listening thread per process."""

    def __init__(self, client: Any, *, replica_id: str | None = None, retry_after_s: float = 2.0) -> None:
        self.client = client
        self.replica_id = replica_id or secrets.token_hex(6)
        self.retry_after_s = retry_after_s
        self._handlers: dict[str, list[Handler]] = {}
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._warned = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._subscribed = threading.Event()
        self._pubsub: Any = None

    # ------------------------------------------------------------ publishing

    def publish(self, channel: str, payload: dict[str, Any]) -> bool:
        """Send `payload` to the other replicas; False when Redis did not take it."""
        import redis

        if time.monotonic() < self._down_until:
            return False
        message = json.dumps({"origin": self.replica_id, "payload": payload}, separators=(",", ":"))
        try:
            self.client.publish(CHANNEL_PREFIX + channel, message)
        except (redis.RedisError, OSError) as exc:
            with self._lock:
                self._down_until = time.monotonic() + self.retry_after_s
                if not self._warned:
                    log.warning("redis unavailable: replica messages are not sent until it is back: %s", exc)
                    self._warned = True
            return False
        if self._warned:
            log.info("redis is back: replica messages flow again")
            self._warned = False
        return True

    def publish_change(self, event: ChangeEvent) -> None:
        """A MemoryService listener: tell the other replicas about a committed change."""
        self.publish(CHANGES, event_to_wire(event))

    # ------------------------------------------------------------ listening

    def on(self, channel: str, handler: Handler) -> None:
        """Call `handler(payload)` (from the bus thread) for every message another replica sends."""
        with self._lock:
            self._handlers.setdefault(channel, []).append(handler)

    def on_change(self, listener: Callable[[ChangeEvent], None]) -> None:
        """Call `listener` for every ChangeEvent committed by another replica."""
        self.on(CHANGES, lambda payload: listener(event_from_wire(payload)))

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._listen, name="memento-bus", daemon=True)
            self._thread.start()

    def wait_subscribed(self, timeout_s: float = 5.0) -> bool:
        """Whether the listening thread is subscribed (tests; start-up probes)."""
        return self._subscribed.wait(timeout_s)

    def _listen(self) -> None:
        import redis

        backoff = 0.2
        while not self._stop.is_set():
            try:
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                self._pubsub = pubsub
                pubsub.psubscribe(CHANNEL_PREFIX + "*")
                self._subscribed.set()
                backoff = 0.2
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None:
                        self._dispatch(message)
            except (redis.RedisError, OSError, ValueError, AttributeError) as exc:
                # close() shuts the connection under a blocked read to wake this thread;
                # redis-py then fails inside its parser with AttributeError (its socket is gone).
                if self._stop.is_set():
                    break
                if self._subscribed.is_set():
                    log.warning("replica bus lost its redis connection; reconnecting: %s", exc)
                self._subscribed.clear()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                self._close_pubsub()

    def _dispatch(self, message: dict[str, Any]) -> None:
        channel = str(message.get("channel", ""))
        if not channel.startswith(CHANNEL_PREFIX):
            return
        try:
            envelope = json.loads(message["data"])
        except (TypeError, ValueError):
            log.warning("ignoring an unreadable replica message on %s", channel)
            return
        if not isinstance(envelope, dict) or envelope.get("origin") == self.replica_id:
            return
        payload = envelope.get("payload")
        if not isinstance(payload, dict):
            return
        with self._lock:
            handlers = list(self._handlers.get(channel[len(CHANNEL_PREFIX) :], ()))
        for handler in handlers:
            try:
                handler(payload)
            except Exception:
                log.exception("replica message handler for %s failed", channel)

    def _close_pubsub(self) -> None:
        with self._lock:
            pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                pubsub.close()
            except Exception:  # noqa: BLE001 - closing a dead connection
                pass

    def close(self) -> None:
        self._stop.set()
        self._close_pubsub()  # wakes the listening thread at once
        thread = self._thread
        if thread is not None:
            thread.join(3.0)
