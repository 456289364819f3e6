"""Several processes on one SQLite file: every vector index answers with what the database holds.

Each process keeps its own in-memory vector index. Another server, the CLI or `memento reindex`
writing the same file must never leave it behind: an exact-text recall finds its fragment first
and by meaning, deleted fragments never crowd out live ones, a restarted server catches up on
what it never saw, and `memory_stats` reports the index as it is. The servers are real
`memento serve` processes driven by the official MCP client; the CLI is `python -m memento`.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE, TIMEOUT_S, data, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT = "agent-fresh"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return server_env(tmp_path / "shared.db")


@asynccontextmanager
async def server(env: dict[str, str]) -> AsyncIterator[Client]:
    """A stdio server process on the shared file; leaving the block closes it (saving its index)."""
    # The whole environment (PYTHONPATH included), so the server runs the code under test.
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env={**os.environ, **env})
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        yield client


async def cli(env: dict[str, str], *args: str) -> str:
    """`python -m memento ...` in its own process (waited for off the event loop); its output."""
    run = partial(
        subprocess.run,
        [SERVE[0], "-m", "memento", *args],
        env={**os.environ, **env},
        capture_output=True,
        timeout=TIMEOUT_S,
        check=True,
        text=True,
    )
    done = await anyio.to_thread.run_sync(run)
    return str(done.stdout)


async def cli_remember(env: dict[str, str], content: str) -> str:
    result = json.loads(await cli(env, "remember", content, "--agent", AGENT, "--json"))
    fragment_id: str = result["id"]
    return fragment_id


async def remember(client: Client, content: str, topic: str = "notes") -> str:
    result = data(await client.call_tool("remember", {"content": content, "topic": topic, "type": "fact", "agentId": AGENT}))
    fragment_id: str = result["id"]
    return fragment_id


async def recall(client: Client, text: str) -> list[dict[str, Any]]:
    result = data(await client.call_tool("recall", {"verbose": True, "text": text, "agentId": AGENT, "limit": 10, "tokenBudget": 5000}))
    fragments: list[dict[str, Any]] = result["fragments"]
    return fragments


async def stats(client: Client) -> dict[str, Any]:
    return data(await client.call_tool("memory_stats", {"agentId": AGENT}))


def found_by_meaning(fragments: list[dict[str, Any]], fragment_id: str) -> bool:
    """The fragment came first, and the vector tier found it as a near-exact match."""
    top = fragments[0] if fragments else {}
    return top.get("id") == fragment_id and "semantic" in top.get("matched", []) and top.get("similarity", 0) > 0.99


def assert_index_complete(numbers: dict[str, Any], total: int) -> None:
    assert numbers["total"] == total and numbers["embedded"] == total, numbers
    assert numbers["indexed"] == total and numbers["indexCoverage"] == 1.0, numbers
    assert numbers["embeddingCoverage"] == 1.0, numbers


async def test_a_running_server_finds_what_the_cli_remembered(env: dict[str, str]) -> None:
    async with server(env) as client:
        await remember(client, "the deploy key rotates every ninety days")
        assert await recall(client, "deploy key rotation")  # the server's index is loaded now
        written = await cli_remember(env, "grafana dashboards live in the observability folder")
        fragments = await recall(client, "grafana dashboards live in the observability folder")
        assert found_by_meaning(fragments, written), fragments
        assert_index_complete(await stats(client), 2)


async def test_two_servers_see_each_others_writes(env: dict[str, str]) -> None:
    async with server(env) as first, server(env) as second:
        mine = await remember(first, "the staging database listens on port 5433")
        assert await recall(second, "staging database port")  # both indexes are loaded now
        theirs = await remember(second, "kafka consumers lag behind during the nightly batch")
        # A server's recall waits for its own writes' vectors (its embedding worker), not another's:
        # the writer recalls first, as an acknowledged-and-embedded write.
        assert found_by_meaning(await recall(second, "kafka consumers lag behind during the nightly batch"), theirs)
        assert found_by_meaning(await recall(first, "kafka consumers lag behind during the nightly batch"), theirs)
        again = await remember(first, "terraform state is locked in a dynamodb table")
        assert found_by_meaning(await recall(first, "terraform state is locked in a dynamodb table"), again)
        assert found_by_meaning(await recall(second, "terraform state is locked in a dynamodb table"), again)
        assert found_by_meaning(await recall(second, "the staging database listens on port 5433"), mine)
        assert_index_complete(await stats(first), 3)
        assert_index_complete(await stats(second), 3)


async def test_deletions_by_another_server_never_crowd_out_live_fragments(env: dict[str, str]) -> None:
    query = "nightly backup of the billing ledger"
    async with server(env) as first, server(env) as second:
        # More near-copies of the query than the vector tier's candidate list holds.
        for i in range(90):
            await remember(first, f"{query} copy {i}", topic="copies")
        survivor = await remember(first, f"{query} checked by the auditors", topic="kept")
        assert await recall(first, query)
        assert data(await second.call_tool("forget", {"topic": "copies", "agentId": AGENT}))["count"] == 90
        fragments = await recall(first, query)
        assert [f["id"] for f in fragments] == [survivor], fragments
        assert "semantic" in fragments[0]["matched"], fragments
        assert_index_complete(await stats(first), 1)


async def test_a_restarted_server_catches_up_on_writes_it_never_saw(env: dict[str, str]) -> None:
    async with server(env) as first, server(env) as second:
        await remember(first, "the cache warms up after each deploy")
        theirs = await remember(second, "the vpn drops idle connections after an hour")
        await remember(first, "alerts page the on-call engineer at night")
    # Both saved their indexes on the way out; the first one's never held the second's write.
    assert list((Path(env["DATABASE_URL"].removeprefix("sqlite:///")).parent / "shared.db.vectors").iterdir())
    async with server(env) as restarted:
        assert found_by_meaning(await recall(restarted, "the vpn drops idle connections after an hour"), theirs)
        assert_index_complete(await stats(restarted), 3)
    written = await cli_remember(env, "postgres autovacuum runs every minute")
    async with server(env) as restarted:
        assert found_by_meaning(await recall(restarted, "postgres autovacuum runs every minute"), written)
        assert_index_complete(await stats(restarted), 4)


async def test_a_backfill_by_the_cli_is_found_by_a_running_server(env: dict[str, str]) -> None:
    async with server(env) as client, server({**env, "EMBEDDING_PROVIDER": "none"}) as keyword_only:
        await remember(client, "the load balancer drains connections slowly")
        assert await recall(client, "load balancer drains")
        pending = await remember(keyword_only, "certificates renew thirty days before expiry")  # no vector yet
        consolidated = json.loads(await cli(env, "consolidate", "--agent", AGENT))
        # The CLI's embedding worker sweeps for it at start, and the run waits for that sweep:
        # the backfill stage finds nothing left (the stage itself: tests/test_consolidate_pipeline.py).
        assert consolidated["embeddingsBackfilled"] == 0, consolidated
        assert found_by_meaning(await recall(client, "certificates renew thirty days before expiry"), pending)
        assert_index_complete(await stats(client), 2)


async def test_reindex_with_another_model_elsewhere_empties_a_running_servers_index(env: dict[str, str]) -> None:
    async with server(env) as client:
        kept = await remember(client, "the build cache is pruned weekly")
        assert found_by_meaning(await recall(client, "the build cache is pruned weekly"), kept)
        await cli({**env, "EMBEDDING_DIMENSIONS": "64"}, "reindex")
        # Its vectors are gone from the database; the new model's are not comparable with its queries.
        fragments = await recall(client, "the build cache is pruned weekly")
        assert fragments and all("semantic" not in f["matched"] for f in fragments), fragments
        numbers = await stats(client)
        assert numbers["embedded"] == 0 and numbers["indexed"] == 0 and numbers["embeddingCoverage"] == 0.0, numbers
