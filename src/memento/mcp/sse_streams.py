"""The SSE streams of Streamable HTTP sessions: store first, then deliver.

A session has one standalone stream (its GET stream, for server-initiated messages) and one
stream per POST answered as SSE. Every event on a stream is first stored in the `EventStore`
(so a client that lost the connection can resume with `Last-Event-ID`), then handed to the
connection attached to the stream, if any: `publish` never awaits, so events never reorder.
A new connection attached to a stream ends the previous one. A connection whose client does
not read falls behind; once `queue_limit` events wait for it, it is cut (the events stay in the
store, so the client can resume) instead of buffering without limit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.responses import StreamingResponse

from memento.mcp import jsonrpc
from memento.mcp.events import EventStore, StoredEvent

log = logging.getLogger(__name__)

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


class SseResponse(StreamingResponse):
    """An SSE response that can be cut off: for a client too slow to take what waits for it.
    Cutting cancels the response while it waits to write; uvicorn then closes the connection."""

    def __init__(self, content: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> None:
        super().__init__(content, media_type="text/event-stream", headers={"Cache-Control": "no-cache", **(headers or {})})
        self._scope = anyio.CancelScope()

    def cut(self) -> None:
        self._scope.cancel()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        with self._scope:
            await super().__call__(scope, receive, send)


def overflowing(queue: asyncio.Queue[Any], limit: int) -> bool:
    """Whether a connection's queue is full; if so it is emptied (its events are dropped)."""
    if queue.qsize() < limit:
        return False
    while not queue.empty():
        queue.get_nowait()
    return True


class Stream:
    """One SSE stream of a session: a POST's answer, or the standalone GET stream."""

    def __init__(self, session_id: str, stream_id: str) -> None:
        self.session_id = session_id
        self.id = stream_id
        self.subscriber: asyncio.Queue[Any] | None = None
        self.finished = False
        self.delivered: str | None = None  # last event id written to some connection
        self.cut: Callable[[], None] | None = None  # ends the attached connection at once


class Streams:
    """The live streams of one transport and the event store behind them."""

    def __init__(self, store: EventStore, *, queue_limit: int = 1000) -> None:
        self.store = store
        self.queue_limit = queue_limit
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
            self.offer(stream, stream.subscriber, (event_id, message))
        return event_id

    def offer(self, stream: Stream, queue: asyncio.Queue[Any], item: tuple[str, Any]) -> bool:
        """Queue an event for the connection, or cut a connection that fell `queue_limit`
        events behind (False): its client resumes from the store with Last-Event-ID."""
        if not overflowing(queue, self.queue_limit):
            queue.put_nowait(item)
            return True
        log.warning("cut the SSE stream %s of session %s: the client is not reading", stream.id, stream.session_id)
        if stream.subscriber is queue:
            stream.subscriber = None
            cut, stream.cut = stream.cut, None
            if cut is not None:
                cut()
        return False

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
        stream.cut = None
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
    ) -> SseResponse:
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
                    stream.cut = None

        response = SseResponse(events(), headers)
        if stream.subscriber is queue:
            stream.cut = response.cut
        return response
