"""`GET /metrics`: Prometheus text from a per-app registry, driven by real MCP tool calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from ops_helpers import serving
from prometheus_client.parser import text_string_to_metric_families

from memento.app import App, build_app
from memento.settings import Settings

pytestmark = pytest.mark.anyio
TIMEOUT_S = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _app(folder: Path) -> App:
    return build_app(Settings(DATABASE_URL=f"sqlite:///{folder / 'm.db'}", EMBEDDING_PROVIDER="hash"))


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    built = _app(tmp_path)
    yield built
    built.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text exposition, keyed by (name, sorted labels)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_after_tool_calls(app: App) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        async with Client(url + "/mcp", read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:
            for i in range(3):
                result = await client.call_tool(
                    "remember", {"content": f"Metric fact number {i} about gauges", "topic": "m", "type": "fact"}
                )
                assert result.is_error is False
            await client.call_tool(
                "remember", {"content": "An anchored preference", "topic": "m", "type": "preference", "isAnchor": True, "agentId": "other"}
            )
            assert (await client.call_tool("recall", {"text": "gauges"})).is_error is False
            assert (await client.call_tool("recall", {"keywords": ["gauges"]})).is_error is False
            assert (await client.call_tool("remember", {"topic": "missing content"})).is_error is True
            assert (await client.call_tool("memory_consolidate", {})).is_error is False
            sessions_open = samples((await http.get(url + "/metrics")).text)
            assert value(sessions_open, "memento_sessions", transport="streamable_http") == 1
            assert value(sessions_open, "memento_sessions", transport="legacy_sse") == 0

        reply = await http.get(url + "/metrics")
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/plain; version=")
        found = samples(reply.text)

    assert value(found, "memento_mcp_tool_calls_total", tool="remember", outcome="ok") == 4
    assert value(found, "memento_mcp_tool_calls_total", tool="remember", outcome="error") == 1
    assert value(found, "memento_mcp_tool_calls_total", tool="recall", outcome="ok") == 2
    assert value(found, "memento_mcp_tool_calls_total", tool="memory_consolidate", outcome="ok") == 1
    assert value(found, "memento_mcp_tool_call_duration_seconds_count", tool="remember") == 5
    assert value(found, "memento_recall_duration_seconds_count") == 2
    assert value(found, "memento_consolidation_runs_total", outcome="ok") == 1
    assert value(found, "memento_consolidation_duration_seconds_count") == 1
    # Every passage embedded once; the text query once (the keyword-only recall embeds nothing).
    assert value(found, "memento_embedding_duration_seconds_count", kind="passage") >= 4
    assert value(found, "memento_embedding_duration_seconds_count", kind="query") == 1
    assert value(found, "memento_embedding_failures_total", kind="passage") == 0
    # Store size, computed at scrape time.
    assert value(found, "memento_fragments", tier="permanent") == 1
    assert sum(value(found, "memento_fragments", tier=t) for t in ("hot", "warm", "cold", "permanent")) == 4
    assert value(found, "memento_agents") == 2
    assert value(found, "memento_database_up") == 1
    assert value(found, "memento_working_memory_fragments") == 0
    # HTTP requests by route template and status.
    assert value(found, "memento_http_requests_total", method="POST", route="/mcp", status="200") >= 7
    assert value(found, "memento_http_requests_total", method="GET", route="/metrics", status="200") == 1
    assert value(found, "memento_sessions", transport="streamable_http") == 0
    assert value(found, "memento_uptime_seconds") > 0
    assert any(name == "memento_build_info" for name, _ in found)


async def test_unknown_routes_do_not_explode_label_cardinality(app: App) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        for i in range(5):
            assert (await http.get(f"{url}/no/such/page/{i}?accessKey=secret")).status_code == 404
        text = (await http.get(url + "/metrics")).text
    found = samples(text)
    assert value(found, "memento_http_requests_total", method="GET", route="<unmatched>", status="404") == 5
    assert "/no/such" not in text and "secret" not in text


async def test_each_app_has_its_own_registry(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _app(tmp_path / "a"), _app(tmp_path / "b")
    try:
        async with serving(first) as (url_a, _), serving(second) as (url_b, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            async with Client(url_a + "/mcp", read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:
                await client.call_tool("remember", {"content": "Only in the first app", "topic": "a", "type": "fact"})
            a = samples((await http.get(url_a + "/metrics")).text)
            b = samples((await http.get(url_b + "/metrics")).text)
        assert value(a, "memento_mcp_tool_calls_total", tool="remember", outcome="ok") == 1
        assert value(b, "memento_mcp_tool_calls_total", tool="remember", outcome="ok") == 0
        assert sum(value(b, "memento_fragments", tier=t) for t in ("hot", "warm", "cold", "permanent")) == 0
    finally:
        first.close()
        second.close()


async def test_scrape_answers_while_the_database_is_down(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    built = _app(tmp_path / "data")
    try:
        async with serving(built) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            assert value(samples((await http.get(url + "/metrics")).text), "memento_database_up") == 1
            (tmp_path / "data").rename(tmp_path / "gone")
            try:
                reply = await http.get(url + "/metrics")
                assert reply.status_code == 200
                assert value(samples(reply.text), "memento_database_up") == 0
            finally:
                (tmp_path / "gone").rename(tmp_path / "data")
            assert value(samples((await http.get(url + "/metrics")).text), "memento_database_up") == 1
    finally:
        built.close()


OPERATOR_KEY = "metrics-operator-key-0123456789"
AGENT_KEY = "metrics-agent-key-0123456789ab"


def _keyed_app(folder: Path, **settings: Any) -> App:  # environment-style values, parsed by Settings
    keys = json.dumps([{"name": "a", "key": AGENT_KEY, "agent": "agent-a", "access": "read-write"}])
    return build_app(
        Settings(
            DATABASE_URL=f"sqlite:///{folder / 'm.db'}",
            EMBEDDING_PROVIDER="hash",
            MEMENTO_ACCESS_KEY=OPERATOR_KEY,
            MEMENTO_KEYS=keys,
            **settings,
        )
    )


async def test_metrics_need_an_admin_credential_when_credentials_are_configured(tmp_path: Path) -> None:
    built = _keyed_app(tmp_path)
    try:
        async with serving(built) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            anonymous = await http.get(url + "/metrics")
            assert anonymous.status_code == 401 and "memento_" not in anonymous.text
            assert anonymous.headers["www-authenticate"].startswith("Bearer ")
            agent = await http.get(url + "/metrics", headers={"Authorization": f"Bearer {AGENT_KEY}"})
            assert agent.status_code == 403 and "memento_" not in agent.text
            operator = await http.get(url + "/metrics", headers={"Authorization": f"Bearer {OPERATOR_KEY}"})
            assert operator.status_code == 200 and "memento_database_up" in operator.text
            foreign = await http.get(url + "/metrics", headers={"Origin": "http://evil.example", "Authorization": f"Bearer {OPERATOR_KEY}"})
            assert foreign.status_code == 403
    finally:
        built.close()


async def test_metrics_public_opens_them_to_scrapers_but_not_to_foreign_origins(tmp_path: Path) -> None:
    built = _keyed_app(tmp_path, MEMENTO_METRICS_PUBLIC="1")
    try:
        async with serving(built) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            scrape = await http.get(url + "/metrics")
            assert scrape.status_code == 200 and "memento_database_up" in scrape.text
            assert (await http.get(url + "/metrics", headers={"Host": "evil.example"})).status_code == 403
    finally:
        built.close()


async def test_open_loopback_server_keeps_metrics_open_but_checks_origin(app: App) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        assert (await http.get(url + "/metrics")).status_code == 200
        assert (await http.get(url + "/metrics", headers={"Origin": "http://evil.example"})).status_code == 403
