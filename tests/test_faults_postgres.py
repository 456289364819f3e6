"""Fault test (scale-out): PostgreSQL restarted under a running server.

While PostgreSQL is down a tool call answers, within DB_CONN_TIMEOUT_MS, with a tool error
saying the database is unavailable (not a hang, not a crash) and `/health` is 503; once it is
back, the same server — not restarted — answers `/health` 200 and remember/recall work again.
A restart between two requests fails neither. The session's PostgreSQL (tests/pg_harness.py) is
stopped and started on the same port, and always started again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp_helpers import data, error_of
from mcp_types import CallToolResult
from ops_helpers import serving
from pg_harness import PostgresServer

from memento.app import App
from memento.settings import Settings

pytestmark = [pytest.mark.anyio, pytest.mark.backends("postgres", "postgres+redis")]
TIMEOUT_S = 30.0  # generous bounds on a test run, never an assertion on timings
CONNECT_TIMEOUT_MS = 1000  # DB_CONN_TIMEOUT_MS: how long a call waits for a connection


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"db_conn_timeout_ms": CONNECT_TIMEOUT_MS})


@pytest.fixture
def outage(postgres_server: PostgresServer) -> Iterator[PostgresServer]:
    """The session's PostgreSQL, guaranteed to be running again after the test."""
    try:
        yield postgres_server
    finally:
        postgres_server.start()


def remember(content: str) -> dict[str, Any]:
    return {"content": content, "topic": "faults", "type": "fact", "keywords": ["outage"]}


async def eventually_healthy(http: httpx.AsyncClient, url: str) -> httpx.Response:
    """Poll /health until 200 (bounded: the pool reconnects in the background)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        reply = await http.get(url + "/health")
        if reply.status_code == 200:
            return reply
        assert time.monotonic() < deadline, f"/health did not recover: {reply.text}"
        await anyio.sleep(0.1)  # poll interval: the pool gives no event to await


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    with anyio.fail_after(TIMEOUT_S):  # a hang fails the test instead of stalling the suite
        return await client.call_tool(tool, arguments)


async def test_postgres_restart_is_a_clear_error_then_recovers_without_restarting_memento(app: App, outage: PostgresServer) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        async with Client(url + "/mcp", read_timeout_seconds=TIMEOUT_S) as client:
            before = data(await call(client, "remember", remember("Stored before the PostgreSQL restart")))
            assert (await http.get(url + "/health")).status_code == 200

            outage.stop()
            for tool, arguments in (
                ("remember", remember("Stored while PostgreSQL is down")),
                ("recall", {"keywords": ["outage"]}),
                ("memory_stats", {}),
            ):
                code, message, _ = error_of(await call(client, tool, arguments))
                assert code == "unavailable", (tool, message)
                assert "database" in message and "unavailable" in message, message
            down = await http.get(url + "/health")
            assert down.status_code == 503
            assert down.json()["database"]["status"] == "down"

            outage.start()
            up = await eventually_healthy(http, url)
            assert up.json()["database"]["status"] == "up"
            after = data(await call(client, "remember", remember("Stored after the PostgreSQL restart")))
            found = data(await call(client, "recall", {"keywords": ["outage"]}))
            assert {before["id"], after["id"]} <= {f["id"] for f in found["fragments"]}
            assert data(await call(client, "memory_stats", {}))["total"] == 2


async def test_a_restart_between_requests_fails_no_request(app: App, outage: PostgresServer) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        async with Client(url + "/mcp", read_timeout_seconds=TIMEOUT_S) as client:
            # several calls at once, so the pool holds more than one connection
            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(call, client, "remember", remember(f"Stored concurrently, number {i}"))
            assert data(await call(client, "memory_stats", {}))["total"] == 6

            outage.restart()  # every pooled connection died with the old server process
            assert (await http.get(url + "/health")).status_code == 200
            for i in range(6):
                stored = await call(client, "remember", remember(f"Stored after the restart, number {i}"))
                assert stored.is_error is False, stored.content
            assert data(await call(client, "memory_stats", {}))["total"] == 12
