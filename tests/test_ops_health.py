"""`GET /health`: a real database query, 503 while the database is unreachable, 200 again after
it comes back (no restart); Redis, embeddings, session counts, version, uptime; idle sessions
expire after SESSION_TTL_MINUTES."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from mcp import Client
from ops_helpers import BOTH, initialize, serving

from memento import __version__
from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.embeddings.protocol import EmbeddingFailed
from memento.settings import Settings

pytestmark = pytest.mark.anyio
TIMEOUT_S = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    folder = tmp_path / "data"
    built = build_app(Settings(DATABASE_URL=f"sqlite:///{folder / 'm.db'}", EMBEDDING_PROVIDER="hash"))
    yield built
    built.close()


async def test_health_reports_every_check(app: App) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        reply = await http.get(url + "/health")
        assert reply.status_code == 200
        body = reply.json()
        assert body["status"] == "ok"
        assert body["version"] == __version__
        assert body["uptimeSeconds"] >= 0 and body["startedAt"]
        assert body["database"]["status"] == "up" and body["database"]["backend"] == "sqlite"
        assert body["database"]["latency_ms"] >= 0
        assert body["redis"] == {"status": "not_configured"}
        assert body["embeddings"]["provider"] == "hash"
        assert body["embeddings"]["status"] == "ok" and body["embeddings"]["searchMode"] == "hybrid"
        assert body["sessions"] == {"streamable_http": 0, "legacy_sse": 0, "total": 0}
        assert reply.headers["cache-control"] == "no-store"


async def test_session_counts_per_transport(app: App) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        first = await http.post(url + "/mcp", json=initialize(), headers=BOTH)
        second = await http.post(url + "/mcp", json=initialize("2025-06-18"), headers=BOTH)
        assert first.status_code == second.status_code == 200
        async with http.stream("GET", url + "/sse", headers={"Accept": "text/event-stream"}) as legacy:
            assert legacy.status_code == 200
            lines = legacy.aiter_lines()
            while "endpoint" not in await anext(lines):
                pass
            sessions = (await http.get(url + "/health")).json()["sessions"]
            assert sessions == {"streamable_http": 2, "legacy_sse": 1, "total": 3}
        reply = await http.delete(url + "/mcp", headers={**BOTH, "Mcp-Session-Id": first.headers["mcp-session-id"]})
        assert reply.status_code == 204
        assert (await http.get(url + "/health")).json()["sessions"]["streamable_http"] == 1


async def test_unreachable_database_is_503_then_recovers_without_restart(app: App, tmp_path: Path) -> None:
    folder = tmp_path / "data"
    away = tmp_path / "data-unmounted"
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        async with Client(url + "/mcp", read_timeout_seconds=TIMEOUT_S) as client:
            stored = await client.call_tool("remember", {"content": "The health check probes the database", "topic": "ops", "type": "fact"})
            assert stored.is_error is False
        assert (await http.get(url + "/health")).status_code == 200

        folder.rename(away)  # the volume holding the database is gone
        try:
            down = await http.get(url + "/health")
            assert down.status_code == 503
            body = down.json()
            assert body["status"] == "degraded"
            assert body["database"]["status"] == "down"
            assert "OperationalError" in body["database"]["error"]
            assert body["version"] == __version__  # the rest of the report is still there
        finally:
            away.rename(folder)

        up = await http.get(url + "/health")
        assert up.status_code == 200, up.text
        assert up.json()["status"] == "ok" and up.json()["database"]["status"] == "up"


async def test_replaced_database_file_is_down_until_restored(app: App, tmp_path: Path) -> None:
    database = tmp_path / "data" / "m.db"
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        moved = database.with_name("m.db.moved")
        database.rename(moved)
        try:
            assert (await http.get(url + "/health")).status_code == 503
        finally:
            moved.rename(database)
        assert (await http.get(url + "/health")).status_code == 200


class FlakyEmbedder(HashEmbedder):
    """The hash embedder, failing while `broken` is set (a provider outage)."""

    broken = False

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.broken:
            raise EmbeddingFailed("provider unreachable")
        return super().embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if self.broken:
            raise EmbeddingFailed("provider unreachable")
        return super().embed_query(text)


async def test_embedding_failure_is_reported_not_fatal(tmp_path: Path) -> None:
    embedder = FlakyEmbedder(64)
    built = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash"), embedder=embedder)
    try:
        async with serving(built) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            async with Client(url + "/mcp", read_timeout_seconds=TIMEOUT_S) as client:
                assert (
                    await client.call_tool("remember", {"content": "Embeddings work at first", "topic": "t", "type": "fact"})
                ).is_error is False
                healthy = (await http.get(url + "/health")).json()["embeddings"]
                assert healthy["status"] == "ok" and healthy["lastSuccess"] and healthy["lastFailure"] is None

                embedder.broken = True
                stored = await client.call_tool("remember", {"content": "Stored without a vector", "topic": "t", "type": "fact"})
                assert stored.is_error is False  # 000 §9.3: the write still succeeds
                reply = await http.get(url + "/health")
                assert reply.status_code == 200  # recall degrades to keywords; not an outage
                failing = reply.json()["embeddings"]
                assert failing["status"] == "failing" and failing["failures"] == 1
                assert failing["lastFailure"]["error"] == "EmbeddingFailed"

                embedder.broken = False
                assert (await client.call_tool("recall", {"text": "vector"})).is_error is False
                assert (await http.get(url + "/health")).json()["embeddings"]["status"] == "ok"
    finally:
        built.close()


async def test_keyword_only_server_says_so(tmp_path: Path) -> None:
    built = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="none"))
    try:
        async with serving(built) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            embeddings = (await http.get(url + "/health")).json()["embeddings"]
            assert embeddings == {"provider": "none", "status": "disabled", "searchMode": "keyword-only", "model": None}
    finally:
        built.close()


async def test_idle_sessions_expire_after_session_ttl(app: App) -> None:
    """SESSION_TTL_MINUTES: a session unseen for longer is closed on the next request."""
    async with serving(app) as (url, asgi), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        opened = await http.post(url + "/mcp", json=initialize(), headers=BOTH)
        sid = opened.headers["mcp-session-id"]
        headers: dict[str, Any] = {**BOTH, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url + "/mcp", json=note, headers=headers)).status_code == 202
        mcp = asgi.state.mcp
        assert mcp.session_ttl_s == app.settings.session_ttl_minutes * 60
        session = mcp.server.session_table[sid]
        session.last_seen = time.monotonic() - mcp.session_ttl_s + 30  # idle, but not for long enough
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await http.post(url + "/mcp", json=ping, headers=headers)).status_code == 200

        session.last_seen = time.monotonic() - mcp.session_ttl_s - 1  # idle past the TTL
        assert (await http.get(url + "/health")).json()["sessions"]["total"] == 1
        gone = await http.post(url + "/mcp", json=ping, headers=headers)
        assert gone.status_code == 404
        assert (await http.get(url + "/health")).json()["sessions"]["total"] == 0


OPERATOR_KEY = "health-operator-key-0123456789"
AGENT_KEY = "health-agent-key-0123456789ab"
KEYED: dict[str, Any] = {  # environment-style values, parsed by Settings
    "MEMENTO_ACCESS_KEY": OPERATOR_KEY,
    "MEMENTO_KEYS": json.dumps([{"name": "a", "key": AGENT_KEY, "agent": "agent-a", "access": "read-write"}]),
}


async def test_health_without_an_admin_credential_is_only_the_status(tmp_path: Path) -> None:
    """With credentials configured, /health tells a load balancer ok/degraded and nothing else;
    the operator's key gets the full document. Foreign Origin/Host are refused like /mcp."""
    built = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash", **KEYED))
    try:
        async with serving(built) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            for headers in ({}, {"Authorization": f"Bearer {AGENT_KEY}"}, {"Authorization": "Bearer not-a-key"}):
                reply = await http.get(url + "/health", headers=headers)
                assert (reply.status_code, reply.json()) == (200, {"status": "ok"}), headers
            full = await http.get(url + "/health", headers={"Authorization": f"Bearer {OPERATOR_KEY}"})
            assert full.status_code == 200 and full.json()["database"]["status"] == "up"
            for foreign in ({"Origin": "http://evil.example"}, {"Host": "evil.example"}):
                refused = await http.get(url + "/health", headers={**foreign, "Authorization": f"Bearer {OPERATOR_KEY}"})
                assert refused.status_code == 403, foreign
    finally:
        built.close()


async def test_open_loopback_server_keeps_the_full_health_but_checks_origin(app: App) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        assert "database" in (await http.get(url + "/health")).json()
        assert (await http.get(url + "/health", headers={"Origin": "http://evil.example"})).status_code == 403
