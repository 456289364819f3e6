"""Helpers for the tests/test_ops_*.py modules: a real uvicorn server in the test's loop."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette

from memento.app import App
from memento.web import create_http_app

BOTH = {"Accept": "application/json, text/event-stream"}


@contextlib.asynccontextmanager
async def serving(app: App) -> AsyncIterator[tuple[str, Starlette]]:
    """Serve `create_http_app(app)` on 127.0.0.1 (socket bound first: no readiness poll)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    asgi = create_http_app(app)
    server = uvicorn.Server(uvicorn.Config(asgi, log_config=None, lifespan="on", timeout_graceful_shutdown=3))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield f"http://127.0.0.1:{port}", asgi
        finally:
            asgi.state.mcp._close_streams()
            server.should_exit = True


def initialize(version: str = "2025-11-25") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "ops-test", "version": "0"}},
    }
