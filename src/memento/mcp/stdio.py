"""The stdio transport: newline-delimited JSON-RPC on stdin/stdout, one session per process.

The session runs as the operator (every namespace through `agentId`), or in the namespace
MEMENTO_STDIO_AGENT names. stdout carries protocol messages only; while serving, `sys.stdout` is pointed at stderr so a
stray print cannot corrupt the stream. stdin is read by a daemon thread (portable, and it can
never keep the process alive), requests run concurrently, and EOF or SIGTERM/SIGINT ends the
session, waits briefly for running calls, and closes the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from memento.auth.keys import stdio_principal
from memento.mcp import jsonrpc
from memento.mcp.context import CallContext
from memento.mcp.jsonrpc import JsonRpcError, RequestId
from memento.mcp.namespace import CONNECTION_SESSION, MEMORY_SESSION
from memento.mcp.registry import default_features
from memento.mcp.server import McpServer, Session
from memento.mcp.stateless import handle_stateless, stateless_request
from memento.mcp.subscriptions import subscriptions_of

if TYPE_CHECKING:
    from memento.app import App

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 10.0
READ_AHEAD = 64  # lines read but not yet dispatched; beyond it the reader waits (backpressure)
MAX_IN_FLIGHT = 64  # requests handled at once; beyond it reading waits
_EOF = b""
TOO_LONG = b"\x00too long"  # stands for a line over the limit (compared by identity): it is dropped


def _lines(stream: BinaryIO, limit: int) -> Iterator[bytes]:
    """Lines of `stream`, none longer than `limit` bytes: a longer one is dropped as it
    streams in (never held whole) and stands as TOO_LONG. A real file descriptor is read raw:
    a thread blocked inside a buffered reader holds its lock, and interpreter shutdown after a
    signal would abort on it."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        yield from _buffered_lines(stream, limit)
        return
    pending, dropping = bytearray(), False
    while chunk := os.read(fd, 65536):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            pending += chunk[start : end + 1]
            yield TOO_LONG if dropping or len(pending) > limit else bytes(pending)
            pending, dropping, start = bytearray(), False, end + 1
        if not dropping:
            pending += chunk[start:]
            if len(pending) > limit:
                pending, dropping = bytearray(), True
    if dropping:
        yield TOO_LONG
    elif pending:
        yield bytes(pending)


def _buffered_lines(stream: BinaryIO, limit: int) -> Iterator[bytes]:
    while line := stream.readline(limit + 1):
        if len(line) <= limit:
            yield line
            continue
        while line and not line.endswith(b"\n"):  # drop the rest of the over-long line
            line = stream.readline(65536)
        yield TOO_LONG


def _start_reader(stream: BinaryIO, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes], limit: int) -> None:
    def pump() -> None:
        try:
            for line in _lines(stream, limit):
                asyncio.run_coroutine_threadsafe(queue.put(line), loop).result()  # waits while the queue is full
        except (OSError, ValueError, RuntimeError):  # stdin closed, or the loop is gone
            log.debug("stdin reader stopped", exc_info=True)
        with contextlib.suppress(RuntimeError):  # the loop may already be closed
            loop.call_soon_threadsafe(queue.put_nowait, _EOF)

    threading.Thread(target=pump, name="memento-stdin", daemon=True).start()


class _StdioConnection:
    def __init__(self, server: McpServer, out: BinaryIO, limit: int) -> None:
        self.server = server
        self.out = out
        self.limit = limit
        # No credential on stdio: the operator, or the agent MEMENTO_STDIO_AGENT names.
        self.session: Session = server.create_session(self.send, stdio_principal(server.app.settings))
        if server.app.settings.memory_session_id:  # 002 §4 option A: MEMORY_MCP_SESSION_ID names the session
            self.session.state[MEMORY_SESSION] = server.app.settings.memory_session_id
        # 2026-07-28 requests share the connection but no session: each is answered on its own
        # (stateless.py); this table only lets notifications/cancelled reach one still running.
        self.stateless_in_flight: dict[RequestId, CallContext] = {}

    def stateless_state(self) -> dict[str, object]:
        """What each 2026 request's session carries: the connection's session (and the 002 session
        MEMORY_MCP_SESSION_ID names), the working memory of a call that names no session handle,
        ended with the connection as ever (mcp/handles.py)."""
        return {CONNECTION_SESSION: self.session.id, **{k: v for k, v in self.session.state.items() if k == MEMORY_SESSION}}

    def _cancels_stateless(self, value: object) -> bool:
        """notifications/cancelled naming a 2026 request still running here."""
        if not isinstance(value, dict) or value.get("method") != "notifications/cancelled" or "id" in value:
            return False
        params = value.get("params")
        rid = params.get("requestId") if isinstance(params, dict) else None
        return isinstance(rid, (str, int)) and rid in self.stateless_in_flight

    async def send(self, message: dict[str, object]) -> None:
        """Notifications and server→client requests share stdout with the responses."""
        self.write(message)

    def write(self, message: dict[str, object] | list[dict[str, object]]) -> None:
        # A batch's replies are one JSON array on one line. One write + flush with no await in between, so concurrent replies never interleave.
        line = jsonrpc.dumps(message) + b"\n"  # total: any reply is valid JSON in UTF-8
        try:
            self.out.write(line)
            self.out.flush()
        except (OSError, ValueError):  # the client went away (EPIPE, closed file); EOF follows
            log.debug("stdout closed; reply dropped")

    async def handle_line(self, line: bytes) -> None:
        if line is TOO_LONG:
            self.write(JsonRpcError(jsonrpc.INVALID_REQUEST, f"message larger than {self.limit} bytes; it was dropped").to_response())
            return
        if not line.strip():
            return
        try:
            value = jsonrpc.decode(line)
        except JsonRpcError as exc:  # decode is total: every bad line is answered, id null
            self.write(exc.to_response())
            return
        reply: dict[str, object] | list[dict[str, object]] | None
        if stateless_request(value) or self._cancels_stateless(value):  # a 2026 client: no initialize, _meta on every request
            reply = await handle_stateless(
                self.server,
                value,
                principal=self.session.principal,
                sink=self.send,
                in_flight=self.stateless_in_flight,
                state=self.stateless_state(),
            )
        else:
            reply = await self.server.handle(value, self.session, self.send)  # never raises
        if reply is not None:
            self.write(reply)


async def serve_stdio(app: App, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Serve one MCP session over stdio until EOF or a termination signal, then close `app`."""
    try:
        stdio_principal(app.settings)  # a bad MEMENTO_STDIO_AGENT fails before anything starts
    except Exception:
        app.close()
        raise
    inp = stdin if stdin is not None else sys.stdin.buffer
    out = stdout if stdout is not None else sys.stdout.buffer
    saved_stdout = sys.stdout
    if stdout is None:
        sys.stdout = sys.stderr
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = _install_signal_handlers(loop, stop)
    queue: asyncio.Queue[bytes] = asyncio.Queue(READ_AHEAD)
    limit = app.settings.max_body_bytes  # one line is one message: the HTTP body limit applies
    _start_reader(inp, loop, queue, limit)
    conn = _StdioConnection(McpServer(app, features=default_features(app.settings)), out, limit)
    conn.server.started()
    running: set[asyncio.Task[None]] = set()
    log.info("serving MCP on stdio")
    try:
        await _read_loop(conn, queue, stop, running)
        listening = subscriptions_of(conn.server.features)
        if listening is not None:
            listening.end_all()  # open subscriptions/listen requests are answered, not drained
        if running:
            _, pending = await asyncio.wait(running, timeout=DRAIN_TIMEOUT_S)
            for task in pending:
                task.cancel()
        await conn.server.close_session(conn.session.id)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        app.close()
        sys.stdout = saved_stdout
        log.info("stdio server stopped")


async def _read_loop(conn: _StdioConnection, queue: asyncio.Queue[bytes], stop: asyncio.Event, running: set[asyncio.Task[None]]) -> None:
    stopping = asyncio.ensure_future(stop.wait())
    slots = asyncio.Semaphore(MAX_IN_FLIGHT)
    try:
        while True:
            await slots.acquire()
            getting = asyncio.ensure_future(queue.get())
            await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():
                getting.cancel()
                return
            line = getting.result()
            if line == _EOF:
                return
            task = asyncio.create_task(conn.handle_line(line))
            running.add(task)
            task.add_done_callback(running.discard)
            task.add_done_callback(lambda _: slots.release())
    finally:
        stopping.cancel()


def _install_signal_handlers(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> list[int]:
    installed: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
            continue
        installed.append(sig)
    return installed
