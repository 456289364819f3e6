"""The SSE event store behind Streamable HTTP resumability.

Every message the server puts on an SSE stream (and every priming event) is stored first and
gets an event id unique within its session; a client that lost a stream reconnects with
`Last-Event-ID` and is sent the events after that id on the stream it belonged to. The store
is an interface so a shared (e.g. Redis-backed) one can replace the bounded in-memory one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class StoredEvent:
    id: str
    stream_id: str
    message: dict[str, Any] | None  # None: a priming event (an id and empty data)


class EventStore(Protocol):
    """Where SSE events wait for replay."""

    def append(self, session_id: str, stream_id: str, message: dict[str, Any] | None) -> str:
        """Store one event; returns its id (unique within the session)."""
        ...

    def stream_of(self, session_id: str, event_id: str) -> str | None:
        """The stream an event id belongs to; None when unknown (or already evicted)."""
        ...

    def after(self, session_id: str, stream_id: str, event_id: str | None) -> list[StoredEvent]:
        """The stream's stored events after `event_id` (all of them when None), oldest first."""
        ...

    def drop_stream(self, session_id: str, stream_id: str) -> None: ...

    def drop_session(self, session_id: str) -> None: ...


class MemoryEventStore:
    """Bounded, in-process: the newest `max_events_per_session` events of each session."""

    def __init__(self, max_events_per_session: int = 1000) -> None:
        self.max_events = max_events_per_session
        self._events: dict[str, deque[tuple[int, StoredEvent]]] = {}
        self._counters: dict[str, int] = {}

    def append(self, session_id: str, stream_id: str, message: dict[str, Any] | None) -> str:
        seq = self._counters.get(session_id, 0) + 1
        self._counters[session_id] = seq
        event = StoredEvent(str(seq), stream_id, message)
        events = self._events.setdefault(session_id, deque(maxlen=self.max_events))
        events.append((seq, event))
        return event.id

    def stream_of(self, session_id: str, event_id: str) -> str | None:
        for _, event in self._events.get(session_id, ()):
            if event.id == event_id:
                return event.stream_id
        return None

    def after(self, session_id: str, stream_id: str, event_id: str | None) -> list[StoredEvent]:
        floor = _seq(event_id)
        return [event for seq, event in self._events.get(session_id, ()) if seq > floor and event.stream_id == stream_id]

    def drop_stream(self, session_id: str, stream_id: str) -> None:
        events = self._events.get(session_id)
        if events is None:
            return
        kept = [item for item in events if item[1].stream_id != stream_id]
        events.clear()
        events.extend(kept)

    def drop_session(self, session_id: str) -> None:
        self._events.pop(session_id, None)
        self._counters.pop(session_id, None)


def _seq(event_id: str | None) -> int:
    if event_id is None:
        return 0
    try:
        return int(event_id)
    except ValueError:
        return 0
