"""Helpers for the REST tests: a server with keys for two agents, a read-only key and the operator
key; an httpx client per key; an SSE listener that reads /api/events on a thread."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

OPERATOR = "operator-key-" + "o" * 20
KEY_A = "agent-a-key-" + "a" * 20
KEY_B = "agent-b-key-" + "b" * 20
KEY_A_READ = "agent-a-read-" + "r" * 20
WAIT_S = 20.0
PROBLEM = "application/problem+json"


def rest_env(**extra: str) -> dict[str, str]:
    """Server settings: the operator key, read-write keys for agent-a and agent-b, a read-only key for agent-a."""
    keys = [
        {"name": "a", "key": KEY_A, "agent": "agent-a", "access": "read-write"},
        {"name": "b", "key": KEY_B, "agent": "agent-b", "access": "read-write"},
        {"name": "a-read", "key": KEY_A_READ, "agent": "agent-a", "access": "read-only"},
    ]
    return {"MEMENTO_ACCESS_KEY": OPERATOR, "MEMENTO_KEYS": json.dumps(keys), **extra}


def client(base_url: str, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base_url + "/api", headers=headers, timeout=WAIT_S)


def problem_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The problem document of an error response, checked against RFC 9457's members."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["type"].startswith("urn:memento:problem:"), body
    assert isinstance(body["title"], str) and isinstance(body["detail"], str) and body["detail"], body
    return body


@dataclass
class Event:
    id: str | None
    type: str
    data: dict[str, Any]


@dataclass
class Listener:
    """An open /api/events stream read on a thread; `next()` waits (bounded) for the next event."""

    events: queue.Queue[Event] = field(default_factory=queue.Queue)
    comments: queue.Queue[str] = field(default_factory=queue.Queue)
    connected: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)

    def next(self, timeout: float = WAIT_S) -> Event:
        return self.events.get(timeout=timeout)

    def until(self, kind: str, predicate: Any = None, timeout: float = WAIT_S) -> Event:
        """The first event of `kind` (matching `predicate(data)`), skipping others."""
        while True:
            event = self.next(timeout)
            if event.type == kind and (predicate is None or predicate(event.data)):
                return event

    def nothing_more(self, timeout: float = 0.5) -> list[Event]:
        """The events that arrive within `timeout` (a bounded wait to show that none do)."""
        seen: list[Event] = []
        try:
            while True:
                seen.append(self.events.get(timeout=timeout))
        except queue.Empty:
            return seen


def _read(response: httpx.Response, listener: Listener) -> None:
    event_id: str | None = None
    kind, data = "message", ""
    try:
        for line in response.iter_lines():
            if line.startswith(":"):
                comment = line[1:].strip()
                if comment == "connected":
                    listener.connected.set()
                listener.comments.put(comment)
            elif line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif line == "" and data:
                listener.events.put(Event(event_id, kind, json.loads(data)))
                event_id, kind, data = None, "message", ""
    except Exception:  # noqa: BLE001 - the stream was closed under the reader (the test is done with it)
        pass
    finally:
        listener.closed.set()


@contextmanager
def listening(
    base_url: str, key: str | None, *, headers: Mapping[str, str] | None = None, params: Mapping[str, str] | None = None
) -> Iterator[Listener]:
    """An /api/events stream, open (its `: connected` comment received) when the block starts."""
    listener = Listener()
    with client(base_url, key) as http:
        with http.stream(
            "GET", "/events", headers=dict(headers or {}), params=dict(params or {}), timeout=httpx.Timeout(WAIT_S, read=None)
        ) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            thread = threading.Thread(target=_read, args=(response, listener), daemon=True)
            thread.start()
            assert listener.connected.wait(WAIT_S), "the stream did not open"
            try:
                yield listener
            finally:
                response.close()
                thread.join(WAIT_S)
