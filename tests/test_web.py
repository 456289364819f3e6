"""The web app's composition (memento.web): guards are never optional, shared infrastructure is
built once and handed down, and operations learn what happens through observer hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memento import ops
from memento.app import App, build_app
from memento.auth import oauth_http
from memento.auth.oauth import oauth_server
from memento.embeddings.hashing import HashEmbedder
from memento.endpoint import MissingGuard
from memento.mcp.jsonrpc import JsonRpcError
from memento.mcp.sse_legacy import LegacySse
from memento.models import CallContext, ConsolidateInput, RecallInput, RememberInput
from memento.observe import Observer
from memento.settings import Settings
from memento.web import create_http_app, mcp_endpoint, routes


def make_app(tmp_path: Path, **env: Any) -> App:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash", **env)
    return build_app(settings, embedder=HashEmbedder(64))


class GuardOnly:
    """Has the Origin/Host check but no authenticator: an incomplete gate."""

    def guard(self, request: Any) -> None:
        return None


class NoGate:
    gate = None

    def session_counts(self) -> dict[str, int]:
        return {}


def test_the_app_refuses_to_start_without_its_guard(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    try:
        mcp = mcp_endpoint(app)
        legacy = LegacySse(mcp)
        assert routes(app, mcp, legacy)  # composed with its gate: fine
        mcp.gate = None  # type: ignore[assignment]
        with pytest.raises(MissingGuard, match="refusing to start without an Origin/Host guard"):
            routes(app, mcp, legacy)
        with pytest.raises(MissingGuard):
            oauth_http.routes(app, None)  # type: ignore[arg-type]
        with pytest.raises(MissingGuard):
            oauth_http.routes(app, GuardOnly())  # type: ignore[arg-type]
        with pytest.raises(MissingGuard):
            ops.routes(app, NoGate())  # type: ignore[arg-type]
    finally:
        app.close()


def test_oauth_off_still_needs_the_guard(tmp_path: Path) -> None:
    app = make_app(tmp_path, MEMENTO_OAUTH="false")
    try:
        with pytest.raises(MissingGuard):
            oauth_http.routes(app, None)  # type: ignore[arg-type]
    finally:
        app.close()


def test_redis_connections_are_built_once_and_shared(tmp_path: Path) -> None:
    """Every Redis user gets one of the app's two clients (no I/O needed: clients are lazy)."""
    app = make_app(tmp_path, REDIS_ENABLED="true", REDIS_PORT="1", MEMENTO_ACCESS_KEY="k" * 32)
    try:
        assert app.redis is not None and app.keyword_index is not None and app.bus is not None
        asgi = create_http_app(app)
        mcp = asgi.state.mcp
        assert app.keyword_index.client is app.redis.blocking
        assert app.bus.client is app.redis.blocking
        assert oauth_server(app).store.client is app.redis.blocking  # type: ignore[attr-defined]
        assert mcp.store.redis.client is app.redis.loop
        assert mcp.directory.redis.client is app.redis.loop
        assert mcp.server.tasks is not None and mcp.server.tasks.board.redis.client is app.redis.loop
    finally:
        app.close()


class Recorder(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        self.seen.append(("tool", tool, outcome))

    def recall(self, seconds: float) -> None:
        self.seen.append(("recall",))

    def consolidation(self, outcome: str, seconds: float) -> None:
        self.seen.append(("consolidation", outcome))

    def embedding(self, kind: str, seconds: float, error: BaseException | None) -> None:
        self.seen.append(("embedding", kind, type(error).__name__ if error else "ok"))


class Broken(Observer):
    def recall(self, seconds: float) -> None:
        raise RuntimeError("a broken listener")


def test_the_engine_reports_to_observers_and_a_broken_one_changes_nothing(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    recorder = Recorder()
    app.observers.add(Broken())
    app.observers.add(recorder)
    try:
        service, ctx = app.service, CallContext()
        service.remember(RememberInput(content="observers see this", topic="t", type="fact"), ctx)
        found = service.recall(RecallInput(text="observers"), ctx)
        assert found.count == 1  # the broken listener did not break the recall
        service.memory_consolidate(ConsolidateInput(), ctx)
        assert ("embedding", "passage", "ok") in recorder.seen and ("embedding", "query", "ok") in recorder.seen
        assert ("recall",) in recorder.seen and ("consolidation", "ok") in recorder.seen
    finally:
        app.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_tool_calls_are_observed_by_name_and_outcome(tmp_path: Path) -> None:
    from memento.mcp.context import CallContext as McpContext
    from memento.mcp.server import McpServer

    app = make_app(tmp_path)
    recorder = Recorder()
    app.observers.add(recorder)
    try:
        server = McpServer(app)
        session = server.create_session()
        ctx = McpContext(session, 1, "2025-06-18", {})
        await server._tools_call(ctx, {"name": "memory_stats", "arguments": {}})
        await server._tools_call(ctx, {"name": "remember", "arguments": {"content": 3}})
        with pytest.raises(JsonRpcError):
            await server._tools_call(ctx, {"name": "no_such_tool", "arguments": {}})
        assert [s for s in recorder.seen if s[0] == "tool"] == [
            ("tool", "memory_stats", "ok"),
            ("tool", "remember", "error"),
            ("tool", "unknown", "invalid"),
        ]
    finally:
        app.close()


def test_accepted_connections_send_without_delay() -> None:
    """The listening socket says TCP, so asyncio sets TCP_NODELAY on every accepted connection:
    a keep-alive client's requests are answered at once, not after its delayed ACK (~40 ms each)."""
    import asyncio
    import socket

    from memento.web import listen

    server_sock = listen("127.0.0.1", 0)
    port = server_sock.getsockname()[1]
    seen: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def run() -> None:
        server = await asyncio.get_running_loop().create_server(Probe, sock=server_sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(200):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(run())
    assert seen and seen[0] != 0
