"""Session hand-over between replicas, as the `/mcp` endpoint takes part in it (see `cluster`).

A replica adopts a session another one started when a request names it; it delivers a
session's unsolicited messages itself only while it is the session's home (else it forwards
them there); it applies what the other replicas announce on the bus about shared sessions
(claimed, changed, closed, a message to send, a client's answer); it lets go of its copy of a
session that lives on elsewhere; and it relays, to a client that resumed here, a POST stream
another replica is still answering.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from memento.mcp import jsonrpc
from memento.mcp.cluster import SessionDirectory, apply_snapshot, snapshot
from memento.mcp.events import EventStore
from memento.mcp.jsonrpc import JsonRpcError
from memento.mcp.server import McpServer, Session
from memento.mcp.sse_streams import END, RETRY_MS, STANDALONE, Cut, Stream, Streams

log = logging.getLogger(__name__)

FOLLOW_S = 30.0  # how long a replica relays a POST stream another replica is still answering
FOLLOW_POLL_S = 0.1


def answers(message: dict[str, Any] | None) -> bool:
    """Whether an event is the response that ends a POST stream."""
    return message is not None and "method" not in message and ("result" in message or "error" in message)


class Replicas:
    """This replica's part in sharing sessions: adoption, delivery, bus messages, relaying."""

    def __init__(
        self, server: McpServer, streams: Streams, store: EventStore, directory: SessionDirectory, *, closing: Callable[[], bool]
    ) -> None:
        self.server = server
        self.streams = streams
        self.store = store
        self.directory = directory
        self.closing = closing  # whether the endpoint is shutting down (relaying stops)

    def sender(self, session: Session) -> Callable[[dict[str, Any]], Awaitable[None]]:
        """How the session sends unsolicited messages: on its GET stream here, or to its home."""

        async def send(message: dict[str, Any]) -> None:
            if self.server.session_table.get(session.id) is not session:
                return
            if session.delivers or not self.directory.forward(session.id, "send", message):
                self.streams.publish(self.streams.standalone(session.id), message)

        return send

    def adopt(self, session_id: str) -> Session | None:
        """A session another replica started, when the shared directory knows it."""
        shared = self.directory.load(session_id)
        if shared is None:
            return None
        session = self.server.adopt_session(shared)
        if session is shared:
            session.send = self.sender(session)
            log.info("continuing session %s started on another replica", session_id)
        return session

    def evict(self, session_id: str) -> None:
        """Drop this replica's copy of a session (it lives on, or ended, elsewhere)."""
        self.streams.end_session(session_id, keep_events=True)
        forget = getattr(self.store, "forget_local", None)
        if forget is not None:
            forget(session_id)
        forget = getattr(self.directory, "forget_local", None)
        if forget is not None:
            forget(session_id)
        self.server.evict_session(session_id)

    def handle(self, payload: dict[str, Any]) -> None:
        """A hand-over message from another replica, on the event loop."""
        session = self.server.session_table.get(str(payload.get("id")))
        if session is None:
            return
        op = payload.get("op")
        message = payload.get("message")
        if op == "claimed":  # the client's notification stream moved to another replica
            session.delivers = payload.get("home") == self.directory.replica_id
            stream = self.streams.live.get((session.id, STANDALONE))
            if not session.delivers and stream is not None and stream.subscriber is not None:
                stream.subscriber.put_nowait(END)
        elif op == "changed":
            fresh = self.directory.load(session.id)
            if fresh is not None:
                apply_snapshot(session, snapshot(fresh))
                session.delivers = fresh.delivers
        elif op == "closed":  # ended through another replica (which expunged working memory)
            self.evict(session.id)
        elif op == "send" and session.delivers and isinstance(message, dict):
            self.streams.publish(self.streams.standalone(session.id), message)
        elif op == "response" and isinstance(message, dict):
            _resolve(session, message)

    async def follow(self, stream: Stream, queue: asyncio.Queue[Any], stream_id: str, after: str) -> None:
        """Relay what another replica adds to a POST stream until its response (or a time limit:
        then the client is told to reconnect, with the id it has, and resumes again)."""
        deadline = asyncio.get_running_loop().time() + FOLLOW_S
        while stream.subscriber is queue and not self.closing():
            for event in self.store.after(stream.session_id, stream_id, after):
                if not self.streams.offer(stream, queue, (event.id, event.message)):
                    return  # a client that does not read was cut off
                after = event.id
                if answers(event.message):
                    queue.put_nowait(END)
                    return
            if asyncio.get_running_loop().time() > deadline:
                queue.put_nowait(Cut(RETRY_MS))
                return
            await asyncio.sleep(FOLLOW_POLL_S)


def _resolve(session: Session, message: dict[str, Any]) -> None:
    """The client's answer to a request this replica sent, forwarded by the one it reached."""
    try:
        parsed = jsonrpc.parse_message(message)
    except JsonRpcError:
        return
    if isinstance(parsed, jsonrpc.Response):
        session.resolve(parsed)
