"""Seed 004 on the memento toolset through the official MCP Python client, against the real
server process over Streamable HTTP and stdio, on SQLite and PostgreSQL: the tools' input
schemas, remember's memory-system types and privacy scopes, recall's `query` and `filters`,
pin/unpin, the memory://memory resources and memory_injection's token_budget; and with access
keys, that no agent reaches another's memories through any of them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, error_of, server_env, start_http_server
from mcp_types import CallToolResult, TextContent, TextResourceContents

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.backends("sqlite", "postgres")]

KEY_A = "agent-a-004-key-0123456789abcdef"
KEY_B = "agent-b-004-key-0123456789abcdef"
OPERATOR_KEY = "operator-004-key-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def payload(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error is False, result.content
    assert isinstance(result.content[0], TextContent)
    value: dict[str, Any] = json.loads(result.content[0].text)
    return value


async def read_json(client: Client, uri: str) -> Any:
    (item,) = (await client.read_resource(uri)).contents
    assert isinstance(item, TextResourceContents) and item.mime_type == "application/json"
    return json.loads(item.text)


@asynccontextmanager
async def over_http(server: HttpServer, key: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(TIMEOUT_S, read=300)) as http:
        async with Client(streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S) as client:
            yield client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("memory-004")
    keys = [
        {"name": "a", "key": KEY_A, "agent": "agent-a", "access": "read-write"},
        {"name": "b", "key": KEY_B, "agent": "agent-b", "access": "read-write"},
    ]
    env = {
        **server_env(module_store_env(folder)),
        "MEMENTO_KEYS": json.dumps(keys),
        "MEMENTO_ACCESS_KEY": OPERATOR_KEY,
        "MEMENTO_SHARED_POOL": "write",
    }
    running = start_http_server(env, folder / "server.log")
    assert_backend(running, backend)
    try:
        yield running
    finally:
        running.stop()


def check_schemas(tools: dict[str, Any]) -> None:
    """004's parameters and tools as the schemas show them: every property described."""
    remember = tools["remember"].input_schema["properties"]
    assert {"working", "episodic", "semantic", "procedural", "fact"} <= set(remember["type"]["enum"])
    assert remember["privacyScope"]["enum"] == ["private", "team", "public"]
    recall = tools["recall"].input_schema["properties"]
    assert recall["query"]["type"] == "string" and recall["filters"]["type"] == "object"
    for name in ("pin", "unpin"):
        schema = tools[name].input_schema
        assert schema["required"] == ["id"] and set(schema["properties"]) == {"id", "agentId"}
        assert all(p.get("description") for p in schema["properties"].values())


async def drive(client: Client, tag: str) -> None:
    """Every 004 addition of this change through one client."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"pin", "unpin"} <= set(tools)
    check_schemas(tools)
    old = payload(
        await client.call_tool(
            "remember", {"content": f"{tag} painted the harbour tower", "topic": "harbour", "type": "episodic", "tags": ["project:harbour"]}
        )
    )["id"]
    fact = payload(
        await client.call_tool(
            "remember", {"content": f"{tag} keeps the harbour logbook", "topic": "harbour", "type": "semantic", "privacy_scope": "team"}
        )
    )["id"]
    found = payload(await client.call_tool("recall", {"query": f"{tag} harbour", "filters": {"type": ["episodic"]}, "verbose": True}))
    assert [f["id"] for f in found["fragments"]] == [old]
    assert found["fragments"][0]["memorySystem"] == "episodic" and found["fragments"][0]["type"] == "episode"
    by_project = payload(await client.call_tool("recall", {"query": f"{tag} harbour", "filters": {"project_id": "harbour"}}))
    assert [f["id"] for f in by_project["fragments"]] == [old]
    pinned = payload(await client.call_tool("pin", {"id": fact}))
    assert (pinned["pinned"], pinned["changed"]) == (True, True)
    assert (await read_json(client, f"memory://memory/{fact}"))["pinned"] is True
    assert payload(await client.call_tool("unpin", {"id": fact}))["pinned"] is False
    preview = await read_json(client, f"memory://memory/search?query={tag}%20logbook&limit=1")
    assert [i["id"] for i in preview["items"]] == [fact] and preview["items"][0]["recallReason"]
    code, message, _ = error_of(await client.call_tool("recall", {"text": "a", "query": "b"}))
    assert code == "invalid_argument" and "same parameter" in message
    prompt = await client.get_prompt("memory_injection", {"query": f"{tag} logbook", "token_budget": "800"})
    assert f"{tag} keeps the harbour logbook" in str(prompt.messages[0].content)


async def test_004_over_http(server: HttpServer) -> None:
    async with over_http(server, OPERATOR_KEY) as client:
        await drive(client, "Hedda")


async def test_004_over_stdio(tmp_path: Path, store_env: StoreEnv) -> None:
    env = server_env(store_env(tmp_path))
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        await drive(client, "Ingrid")


async def test_no_agent_reaches_another_agents_memories(server: HttpServer) -> None:
    async with over_http(server, KEY_A) as a, over_http(server, KEY_B) as b:
        mine = payload(await a.call_tool("remember", {"content": "Agent a's heron nest is by the weir", "topic": "birds", "type": "fact"}))[
            "id"
        ]
        shared = payload(
            await a.call_tool(
                "remember", {"content": "The heron count is twelve", "topic": "birds", "type": "fact", "privacyScope": "team"}
            )
        )["id"]
        for tool in ("pin", "unpin"):
            code, _, _ = error_of(await b.call_tool(tool, {"id": mine}))
            assert code == "not_found"
            code, _, _ = error_of(await b.call_tool(tool, {"id": mine, "agentId": "agent-a"}))
            assert code == "forbidden"
        with pytest.raises(MCPError):
            await b.read_resource(f"memory://memory/{mine}")
        seen = await read_json(b, "memory://memory/search?query=heron&limit=50")
        assert mine not in [i["id"] for i in seen["items"]] and shared in [i["id"] for i in seen["items"]]
        recalled = payload(await b.call_tool("recall", {"query": "heron", "filters": {"type": ["semantic"]}}))
        assert mine not in [f["id"] for f in recalled["fragments"]]
        code, _, _ = error_of(await b.call_tool("recall", {"query": "heron", "filters": {"agent": "agent-a"}}))
        assert code == "forbidden"
        assert (await read_json(a, f"memory://memory/{mine}"))["id"] == mine
        assert payload(await a.call_tool("pin", {"id": mine}))["pinned"] is True
