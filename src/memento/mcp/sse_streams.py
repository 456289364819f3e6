"""The SSE streams of Streamable HTTP sessions: store first, then deliver.

A session has one standalone stream (its GET stream, for server-initiated messages) and one
stream per POST answered as SSE. Every event on a stream is first stored in the `EventStore`
(so a client that lost the connection can resume with `Last-Event-ID`), then handed to the
connection attached to the stream, if any: `publish` never awaits, so events never reorder.
A new connection attached to a stream ends the previous one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.responses import StreamingResponse

from memento.mcp import jsonrpc
from memento.mcp.events import EventStore, StoredEvent

STANDALONE = "standalone"  # the stream id of a session's GET stream
KEEPALIVE_S = 15.0
RETRY_MS = 1000
END = object()  # queued to end a connection


class Cut:
    """Queued to end a connection the client should resume (`retry` in ms, when given)."""

    def __init__(self, retry_ms: int | None) -> None:
        self.retry_ms = retry_ms


def sse_event(message: dict[str, Any] | list[dict[str, Any]], event_id: str | None = None) -> bytes:
    head = b"" if event_id is None else b"id: " + event_id.encode() + b"\n"
    return head + b"event: message\ndata: " + jsonrpc.encode(message).encode("utf-8") + b"\n\n"


def priming_event(event_id: str) -> bytes:
    return b"id: " + event_id.encode() + b"\nretry: " + str(RETRY_MS).encode() + b"\ndata: \n\n"


class Stream:
    """One SSE stream of a session: a POST's answer, or the standalone GET stream."""

    def __init__(self, session_id: str, stream_id: str) -> None:
        self.session_id = session_id
        self.id = stream_id
        self.subscriber: asyncio.Queue[Any] | None = None
        self.finished = False
        self.delivered: str | None = None  # last event id written to some connection


class Streams:
    """The live streams of one transport and the event store behind them."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.live: dict[tuple[str, str], Stream] = {}

    def open(self, session_id: str, stream_id: str) -> Stream:
        stream = Stream(session_id, stream_id)
        self.live[(session_id, stream_id)] = stream
        return stream

    def standalone(self, session_id: str) -> Stream:
        stream = self.live.get((session_id, STANDALONE))
        return stream if stream is not None else self.open(session_id, STANDALONE)

    def publish(self, stream: Stream, message: dict[str, Any] | None) -> str:
        """Store one event, then hand it to the attached connection (no await: no reordering)."""
        event_id = self.store.append(stream.session_id, stream.id, message)
        if stream.subscriber is not None:
            stream.subscriber.put_nowait((event_id, message))
        return event_id

    def finish(self, stream: Stream) -> None:
        stream.finished = True
        self.live.pop((stream.session_id, stream.id), None)
        if stream.subscriber is not None:
            stream.subscriber.put_nowait(END)

    def attach(self, stream: Stream) -> asyncio.Queue[Any]:
        """Make a new connection the stream's receiver; a previous one is ended."""
        if stream.subscriber is not None:
            stream.subscriber.put_nowait(END)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stream.subscriber = queue
        return queue

    def end_session(self, session_id: str, *, keep_events: bool = False) -> None:
        """End the session's streams here; its stored events go too unless other replicas may
        still replay them (`keep_events`)."""
        for key in [key for key in self.live if key[0] == session_id]:
            stream = self.live.pop(key)
            stream.finished = True
            if stream.subscriber is not None:
                stream.subscriber.put_nowait(END)
        if not keep_events:
            self.store.drop_session(session_id)

    def end_standby(self) -> None:
        """End every connected GET stream (shutdown: POST streams end with their calls)."""
        for (_, stream_id), stream in self.live.items():
            if stream_id == STANDALONE and stream.subscriber is not None:
                stream.subscriber.put_nowait(END)

    @staticmethod
    def frame(stream: Stream, event_id: str, message: dict[str, Any] | None) -> bytes:
        stream.delivered = event_id
        return priming_event(event_id) if message is None else sse_event(message, event_id)

    def response(
        self,
        stream: Stream,
        queue: asyncio.Queue[Any],
        backlog: list[StoredEvent],
        *,
        keepalive: Callable[[], bool],
        preamble: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> StreamingResponse:
        """The connection: `backlog`, then what arrives on `queue` until END or a Cut. Every
        KEEPALIVE_S of silence `keepalive()` says whether to go on (a comment line is sent,
        which is also how a vanished client is noticed)."""

        async def events() -> AsyncIterator[bytes]:
            try:
                if preamble:
                    yield preamble
                for event in backlog:
                    yield self.frame(stream, event.id, event.message)
                while True:
                    item: Any = None
                    with anyio.move_on_after(KEEPALIVE_S):
                        item = await queue.get()
                    if item is END:
                        return
                    if isinstance(item, Cut):
                        if item.retry_ms is not None:
                            yield b"retry: " + str(item.retry_ms).encode() + b"\n\n"
                        return
                    if item is None:
                        if not keepalive():
                            return
                        yield b": keepalive\n\n"
                        continue
                    event_id, message = item
                    yield self.frame(stream, event_id, message)
            finally:
                if stream.subscriber is queue:
                    stream.subscriber = None

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", **(headers or {})}
        )
