"""Seed 004's `feedback` tool through the official MCP Python client against the real server
process, over Streamable HTTP and stdio, on SQLite and PostgreSQL: its listed schema, a call that
records feedback, the score profile 004 reordering recall by it (with every term's share in
`why`), and clean errors for unknown memories and bad arguments."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.backends("sqlite", "postgres")]

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "Memory id."},
        "event": {"type": "string", "enum": ["used", "edited", "neglected", "helpful", "not_helpful"], "description": "What happened."},
        "score": {"type": "number", "description": "Strength 0-1 (default 1)."},
        "note": {"type": "string", "description": "E.g. the correct answer."},
        "agentId": {"type": "string", "description": "Namespace."},
    },
    "required": ["id", "event"],
}
WHY = re.compile(r"^relevance \d\.\d\d \+ recency \d\.\d\d \+ importance \d\.\d\d \+ usage -?\d\.\d\d - dup \d\.\d\d$")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("feedback-mcp")
    running = start_http_server({**server_env(module_store_env(folder)), "MEMENTO_SCORE_PROFILE": "004"}, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


async def check_listing(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    tool = tools["feedback"]
    assert tool.input_schema == INPUT_SCHEMA
    assert tool.description and "helpful" in tool.description
    assert tool.output_schema is None  # MEMENTO_STRUCTURED_OUTPUT's default, as the other 000 tools


async def test_feedback_over_http_reorders_recall_under_profile_004(server: HttpServer) -> None:
    async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        await check_listing(client)
        first = data(
            await client.call_tool(
                "remember", {"content": "the nightly backup writes to the cobalt bucket", "topic": "ops", "type": "fact"}
            )
        )
        second = data(
            await client.call_tool("remember", {"content": "the weekly backup writes to the amber bucket", "topic": "ops", "type": "fact"})
        )
        query = {"text": "backup writes bucket", "includeLinks": False}
        found = data(await client.call_tool("recall", query))["fragments"]
        assert {f["id"] for f in found} == {first["id"], second["id"]} and all(WHY.match(f["why"]) for f in found)
        top, below = (f["id"] for f in found)
        for _ in range(3):
            data(await client.call_tool("feedback", {"id": top, "event": "not_helpful", "note": "wrong bucket"}))
            got = data(await client.call_tool("feedback", {"id": below, "event": "helpful", "score": 1.0}))
        assert got == {"success": True, "id": got["id"], "memoryId": below, "event": "helpful", "counts": {"helpful": 3}}
        again = data(await client.call_tool("recall", {**query, "verbose": True}))["fragments"]
        assert [f["id"] for f in again] == [below, top]
        assert again[0]["feedback"] == {"helpful": 3} and again[1]["feedback"] == {"not_helpful": 3}
        assert data(await client.call_tool("memory_stats", {}))["feedback"] == {"helpful": 3, "not_helpful": 3}
        # clean errors, nothing recorded
        code, message, _ = error_of(await client.call_tool("feedback", {"id": "frag-0000000000000000", "event": "helpful"}))
        assert code == "not_found" and "frag-0000000000000000" in message
        for bad in ({"id": top, "event": "loved"}, {"id": top, "event": "helpful", "score": 2}, {"id": top}):
            code, message, _ = error_of(await client.call_tool("feedback", bad))
            assert code == "invalid_argument" and message.startswith("invalid arguments for feedback"), message
        assert data(await client.call_tool("memory_stats", {}))["feedback"] == {"helpful": 3, "not_helpful": 3}


def stdio(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)


async def test_feedback_over_stdio(tmp_path: Path, store_env: StoreEnv) -> None:
    env = server_env(store_env(tmp_path))
    async with Client(stdio(env), read_timeout_seconds=TIMEOUT_S) as client:
        await check_listing(client)
        fid = data(
            await client.call_tool("remember", {"content": "the release train leaves on thursdays", "topic": "ops", "type": "fact"})
        )["id"]
        out = data(await client.call_tool("feedback", {"id": fid, "event": "used", "score": 0.5}))
        assert (out["memoryId"], out["event"], out["counts"]) == (fid, "used", {"used": 1})
        found = data(await client.call_tool("recall", {"text": "release train", "verbose": True}))["fragments"]
        assert found[0]["id"] == fid and found[0]["feedback"] == {"used": 1}
        assert not WHY.match(found[0]["recallReason"])  # the default profile keeps 000's reasons
