"""The SSE event store behind Streamable HTTP resumability.

Every message the server puts on an SSE stream (and every priming event) is stored first and
gets an event id unique within its session; a client that lost a stream reconnects with
`Last-Event-ID` and is sent the events after that id on the stream it belonged to. The store
is an interface so a shared (e.g. Redis-backed) one can replace the bounded in-memory one.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Sequence
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

    def erase_quoting(self, texts: Sequence[str]) -> int:
        """Drop every stored event whose message quotes one of `texts` (a hard forget, 004 §5.1:
        a recall result kept for resumption must not replay an erased memory); how many."""
        ...


class MemoryEventStore:
    """Bounded, in-process: the newest `max_events_per_session` events of each session."""

    def __init__(self, max_events_per_session: int = 1000) -> None:
        self.max_events = max_events_per_session
        self._events: dict[str, deque[tuple[int, StoredEvent]]] = {}
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()  # the event loop appends; an erasure (a worker thread) filters

    def append(self, session_id: str, stream_id: str, message: dict[str, Any] | None) -> str:
        with self._lock:
            seq = self._counters.get(session_id, 0) + 1
            self._counters[session_id] = seq
            event = StoredEvent(str(seq), stream_id, message)
            events = self._events.setdefault(session_id, deque(maxlen=self.max_events))
            events.append((seq, event))
        return event.id

    def stream_of(self, session_id: str, event_id: str) -> str | None:
        with self._lock:
            for _, event in self._events.get(session_id, ()):
                if event.id == event_id:
                    return event.stream_id
        return None

    def after(self, session_id: str, stream_id: str, event_id: str | None) -> list[StoredEvent]:
        floor = _seq(event_id)
        with self._lock:
            return [event for seq, event in self._events.get(session_id, ()) if seq > floor and event.stream_id == stream_id]

    def drop_stream(self, session_id: str, stream_id: str) -> None:
        self._keep(lambda event: event.stream_id != stream_id, session_id)

    def drop_session(self, session_id: str) -> None:
        with self._lock:
            self._events.pop(session_id, None)
            self._counters.pop(session_id, None)

    def erase_quoting(self, texts: Sequence[str]) -> int:
        needles = quoted(texts)
        return sum(self._keep(lambda event: not mentions(event.message, needles), s) for s in list(self._events))

    def _keep(self, keep: Any, session_id: str) -> int:
        """Keep only the session's events `keep` accepts; how many went."""
        with self._lock:
            events = self._events.get(session_id)
            if events is None:
                return 0
            kept = [item for item in events if keep(item[1])]
            gone = len(events) - len(kept)
            if gone:
                events.clear()
                events.extend(kept)
            return gone


def quoted(texts: Sequence[str]) -> list[str]:
    """The forms a text takes inside a stored message: as it is, and escaped as a JSON string
    (a tool result's text block is JSON inside JSON)."""
    forms = {form for t in texts if t for form in (t, json.dumps(t)[1:-1], json.dumps(t, ensure_ascii=False)[1:-1])}
    return sorted(forms, key=len)


def mentions(message: dict[str, Any] | None, needles: Sequence[str]) -> bool:
    """Whether any string in `message` holds one of `needles`."""
    if message is None or not needles:
        return False
    return _holds(message, needles)


def _holds(value: Any, needles: Sequence[str]) -> bool:
    if isinstance(value, str):
        return any(n in value for n in needles)
    if isinstance(value, dict):
        return any(_holds(v, needles) for v in value.values())
    if isinstance(value, list):
        return any(_holds(v, needles) for v in value)
    return False


class StoredEventEraser:
    """The SSE events Streamable HTTP keeps for resumption, as an erasure participant (an
    `ErasureParticipant` of memento.erasure): a hard forget drops the events quoting the text."""

    name = "mcpEvents"

    def __init__(self, store: EventStore) -> None:
        self.store = store

    def erase(self, ids: Sequence[str], texts: Sequence[str]) -> int:
        return self.store.erase_quoting(texts)

    def residue(self, ids: Sequence[str]) -> int | None:
        return None  # only the text tells, and it is gone: nothing to look for afterwards


def _seq(event_id: str | None) -> int:
    if event_id is None:
        return 0
    try:
        return int(event_id)
    except ValueError:
        return 0
