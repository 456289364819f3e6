"""Seed 002's face through the official MCP Python client against the real server process, over
Streamable HTTP and stdio, on SQLite and PostgreSQL: the three tools' schemas as §3.2 writes
them, structuredContent, the bulk-prune refusal as a JSON-RPC invalid-params error,
list_changed after commits and prunes, the §3.1 resources and their pagination, the session
identity of §4 (MEMORY_MCP_SESSION_ID on stdio, clientInfo.extra.sessionId over HTTP), session
cleanup at the end of a session and MEMORY_MCP_SESSION_PERSIST, isolation and read-only keys."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, error_of, server_env, start_http_server
from mcp_types import CallToolResult, ResourceListChangedNotification, TextContent, TextResourceContents

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.backends("sqlite", "postgres")]

# 002 §3.2, as the seed writes them (descriptions of the tools and of every property included).
SEED_TOOLS: dict[str, dict[str, Any]] = {
    "commit_memory": {
        "description": "Store a memory entry in the session (volatile) or vault (persistent) scope. Upserts on key collision.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "scope": {"type": "string", "enum": ["session", "vault"]},
                "key": {"type": "string", "description": "Unique identifier for this memory within its scope."},
                "content": {"type": "string", "description": "The memory content to store."},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Categorization tags for retrieval."},
                "embedding": {
                    "type": "array",
                    "items": {"type": "number"},
                    "description": "Optional pre-computed embedding vector (float32[D]).",
                },
            },
            "required": ["scope", "key", "content"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {"committed": {"type": "boolean"}, "key": {"type": "string"}, "scope": {"type": "string"}},
            "required": ["committed", "key", "scope"],
        },
    },
    "search_memories": {
        "description": "Search memories by text query, tags, or both. Returns ranked results. Semantic ranking used if embeddings"
        " are present and a query_embedding is provided.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Full-text search query (FTS5 syntax supported)."},
                "scope": {"type": "string", "enum": ["session", "vault", "all"], "description": "Which scope(s) to search."},
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Filter: only return memories with ALL specified tags.",
                },
                "query_embedding": {
                    "type": "array",
                    "items": {"type": "number"},
                    "description": "Optional: embedding of the query for semantic re-ranking.",
                },
                "limit": {"type": "integer", "description": "Max results to return.", "default": 10},
            },
            "required": ["query"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "results": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "key": {"type": "string"},
                            "content": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "scope": {"type": "string"},
                            "relevance": {"type": "number", "description": "Score in [0,1]; 1.0 = exact match."},
                        },
                        "required": ["key", "content", "tags", "scope", "relevance"],
                    },
                },
                "total_searched": {"type": "integer"},
            },
            "required": ["results", "total_searched"],
        },
    },
    "prune_memory": {
        "description": "Delete memory entries. Can target a specific key, or bulk-delete by age or scope.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "scope": {"type": "string", "enum": ["session", "vault", "all"]},
                "key": {"type": "string", "description": "If provided, delete only this key (within scope)."},
                "older_than": {"type": "string", "description": "ISO 8601 datetime. Delete entries created before this timestamp."},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Delete entries matching ALL these tags."},
            },
            "required": ["scope"],
        },
        "outputSchema": {"type": "object", "properties": {"pruned_count": {"type": "integer"}}, "required": ["pruned_count"]},
    },
}


class NamingTransport(httpx.AsyncHTTPTransport):
    """Adds 002 §4's `clientInfo.extra.sessionId` to the client's initialize request: the SDK's
    Implementation type has no `extra`, so the official client cannot send it by itself."""

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and b'"initialize"' in (body := await request.aread()):
            message = json.loads(body)
            if message.get("method") == "initialize":
                message["params"]["clientInfo"]["extra"] = {"sessionId": self.session_id}
                request = httpx.Request(request.method, request.url, headers=_without_length(request.headers), json=message)
        return await super().handle_async_request(request)


def _without_length(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() != "content-length"}


@asynccontextmanager
async def named(server: HttpServer, session_id: str | None, inbox: Inbox | None = None, key: str | None = None) -> AsyncIterator[Client]:
    """A client over Streamable HTTP that names its 002 session (and optionally uses an access key)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    transport = NamingTransport(session_id) if session_id else httpx.AsyncHTTPTransport()
    async with httpx.AsyncClient(transport=transport, headers=headers, timeout=httpx.Timeout(TIMEOUT_S, read=300)) as http:
        async with Client(
            streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S, message_handler=inbox, mode="legacy"
        ) as client:
            yield client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Inbox:
    """Collects server notifications and lets a test await one (bounded, no sleeps)."""

    def __init__(self) -> None:
        self.messages: list[IncomingMessage] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: IncomingMessage) -> None:
        self.messages.append(message)
        self._arrived.set()

    def list_changes(self) -> int:
        return sum(isinstance(m, ResourceListChangedNotification) for m in self.messages)

    async def until(self, done: Any) -> None:
        with anyio.fail_after(TIMEOUT_S):
            while not done():
                self._arrived = anyio.Event()
                await self._arrived.wait()


def structured(result: CallToolResult) -> dict[str, Any]:
    """The payload of a successful vault tool result: always structuredContent, equal to its text."""
    assert result.is_error is False, result.content
    assert isinstance(result.content[0], TextContent)
    assert result.structured_content == json.loads(result.content[0].text)
    payload: dict[str, Any] = result.structured_content
    return payload


async def read_json(client: Client, uri: str) -> Any:
    (item,) = (await client.read_resource(uri)).contents
    assert isinstance(item, TextResourceContents) and item.mime_type == "application/json"
    return json.loads(item.text)


def start(folder: Path, store: StoreEnv, backend: str, **extra: str) -> HttpServer:
    env = {**server_env(store(folder)), "MEMENTO_TOOLSETS": "memento,vault", **extra}
    running = start_http_server(env, folder / "server.log")
    assert_backend(running, backend)
    return running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    running = start(tmp_path_factory.mktemp("vault-mcp"), module_store_env, backend)
    try:
        yield running
    finally:
        running.stop()


async def test_the_three_tools_are_listed_exactly_as_the_seed_writes_them(server: HttpServer) -> None:
    async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name, seed in SEED_TOOLS.items():
        tool = tools[name]
        assert tool.description == seed["description"]
        assert tool.input_schema == seed["inputSchema"], name
        assert tool.output_schema == seed["outputSchema"], name
    assert tools["recall"].output_schema is None  # 000's tools keep MEMENTO_STRUCTURED_OUTPUT's default
    # MCP 2026-07-28 has no protocol session: the seed's schemas plus the optional `session` handle
    # that names the session scope (docs/mcp.md "Sessions at 2026-07-28")
    async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        assert client.protocol_version == "2026-07-28"
        modern = {t.name: t for t in (await client.list_tools()).tools}
    for name, seed in SEED_TOOLS.items():
        schema = dict(modern[name].input_schema)
        assert schema.pop("properties")["session"]["type"] == "string"
        assert schema == {k: v for k, v in seed["inputSchema"].items() if k != "properties"}
        assert {k: v for k, v in modern[name].input_schema["properties"].items() if k != "session"} == seed["inputSchema"]["properties"]
        assert modern[name].output_schema == seed["outputSchema"], name


async def test_commit_search_prune_with_structured_content_and_list_changed(server: HttpServer) -> None:
    inbox = Inbox()
    async with named(server, "sess-flow", inbox) as client:
        before = inbox.list_changes()
        out = structured(await client.call_tool("commit_memory", {"scope": "vault", "key": "flow_lang", "content": "Prefers Python"}))
        assert out == {"committed": True, "key": "flow_lang", "scope": "vault"}
        await inbox.until(lambda: inbox.list_changes() > before)
        structured(await client.call_tool("commit_memory", {"scope": "vault", "key": "flow_lang", "content": "Prefers Go", "tags": ["t"]}))
        found = structured(await client.call_tool("search_memories", {"query": "prefers", "tags": ["t"]}))
        assert found["total_searched"] == 1
        assert found["results"] == [{"key": "flow_lang", "content": "Prefers Go", "tags": ["t"], "scope": "vault", "relevance": 1.0}]
        # the memory is an ordinary memory: 000's recall finds it, memory_stats counts it
        recalled = await client.call_tool("recall", {"text": "Prefers Go"})
        assert "Prefers Go" in recalled.content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as refused:
            await client.call_tool("prune_memory", {"scope": "vault"})
        assert refused.value.error.code == -32602 and refused.value.error.message == "Bulk vault prune requires at least one filter."
        assert structured(await client.call_tool("search_memories", {"query": "prefers"}))["total_searched"] == 1  # nothing deleted
        before = inbox.list_changes()
        assert structured(await client.call_tool("prune_memory", {"scope": "vault", "key": "flow_lang"})) == {"pruned_count": 1}
        await inbox.until(lambda: inbox.list_changes() > before)
        code, message, _ = error_of(await client.call_tool("search_memories", {"query": '"open'}))
        assert code == "invalid_argument" and "quoted phrase" in message


async def test_resources_show_the_seed_objects_with_pagination(server: HttpServer) -> None:
    async with named(server, "sess-res") as client:
        for key in ("res_a", "res_b", "res_c"):
            structured(await client.call_tool("commit_memory", {"scope": "vault", "key": key, "content": f"note {key}", "tags": ["r"]}))
        structured(await client.call_tool("commit_memory", {"scope": "session", "key": "res_s", "content": "session note"}))
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert {"memory://vault/{key}", "memory://session/{session_id}"} <= templates
        assert "memory://vault" in {str(r.uri) for r in (await client.list_resources()).resources}
        one = await read_json(client, "memory://vault/res_b")
        assert set(one) == {"key", "content", "tags", "scope", "created_at", "updated_at"}
        assert (one["key"], one["content"], one["tags"], one["scope"]) == ("res_b", "note res_b", ["r"], "vault")
        assert one["created_at"].endswith("Z") and one["updated_at"] == one["created_at"]
        everything = [m["key"] for m in await read_json(client, "memory://vault") if m["key"].startswith("res_")]
        assert everything == ["res_a", "res_b", "res_c"]
        all_keys = [m["key"] for m in await read_json(client, "memory://vault")]
        page = await read_json(client, f"memory://vault?offset={all_keys.index('res_b')}&limit=1")
        assert [m["key"] for m in page] == ["res_b"]
        session = await read_json(client, "memory://session/sess-res")
        assert [(m["key"], m["scope"]) for m in session] == [("res_s", "session")]
        with pytest.raises(MCPError) as missing:
            await client.read_resource("memory://vault/no-such-key")
        assert missing.value.error.code == -32002


async def test_the_named_session_is_cleared_when_the_http_session_ends(server: HttpServer) -> None:
    async with named(server, "sess-gone") as client:
        structured(await client.call_tool("commit_memory", {"scope": "session", "key": "tmp", "content": "scratch value"}))
        structured(await client.call_tool("commit_memory", {"scope": "vault", "key": "gone_vault", "content": "kept value"}))
        assert [m["key"] for m in await read_json(client, "memory://session/sess-gone")] == ["tmp"]
    async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:  # the first session ended (DELETE)
        assert await read_json(client, "memory://session/sess-gone") == []
        assert (await read_json(client, "memory://vault/gone_vault"))["content"] == "kept value"


async def test_the_persist_flag_keeps_the_session(tmp_path: Path, store_env: StoreEnv, backend: str) -> None:
    running = start(tmp_path, store_env, backend, MEMORY_MCP_SESSION_PERSIST="true")
    try:
        async with named(running, "sess-kept") as client:
            structured(await client.call_tool("commit_memory", {"scope": "session", "key": "tmp", "content": "debug value"}))
        async with named(running, "sess-kept") as client:
            assert [m["content"] for m in await read_json(client, "memory://session/sess-kept")] == ["debug value"]
            found = structured(await client.call_tool("search_memories", {"query": "debug", "scope": "session"}))
            assert [h["key"] for h in found["results"]] == ["tmp"]
    finally:
        running.stop()


def stdio(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)


async def test_memory_mcp_session_id_names_the_stdio_session(tmp_path: Path, store_env: StoreEnv) -> None:
    env = {**server_env(store_env(tmp_path)), "MEMENTO_TOOLSETS": "vault", "MEMORY_MCP_SESSION_ID": "stdio-sess"}
    inbox = Inbox()  # MEMORY_MCP_SESSION_ID names the classic stdio session (initialize)
    async with Client(stdio(env), read_timeout_seconds=TIMEOUT_S, message_handler=inbox, mode="legacy") as client:
        before = inbox.list_changes()
        out = structured(await client.call_tool("commit_memory", {"scope": "session", "key": "k", "content": "stdio scratch"}))
        assert out["scope"] == "session"
        await inbox.until(lambda: inbox.list_changes() > before)
        assert [m["key"] for m in await read_json(client, "memory://session/stdio-sess")] == ["k"]
        structured(await client.call_tool("commit_memory", {"scope": "vault", "key": "v", "content": "stdio vault"}))
    async with Client(stdio(env), read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:  # EOF ended the first session
        assert await read_json(client, "memory://session/stdio-sess") == []
        assert (await read_json(client, "memory://vault/v"))["content"] == "stdio vault"
    kept = {**env, "MEMORY_MCP_SESSION_PERSIST": "true"}
    async with Client(stdio(kept), read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:
        structured(await client.call_tool("commit_memory", {"scope": "session", "key": "k", "content": "kept scratch"}))
    async with Client(stdio(kept), read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:
        assert [m["content"] for m in await read_json(client, "memory://session/stdio-sess")] == ["kept scratch"]


# ---------------------------------------------------------------- isolation and read-only keys

KEY_A = "vault-isolation-key-agent-a-01234"
KEY_B = "vault-isolation-key-agent-b-01234"
KEY_A_RO = "vault-isolation-key-agent-a-ro-012"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    keys = [
        {"name": "a", "key": KEY_A, "agent": "agent-a", "access": "read-write"},
        {"name": "a-ro", "key": KEY_A_RO, "agent": "agent-a", "access": "read-only"},
        {"name": "b", "key": KEY_B, "agent": "agent-b", "access": "read-write"},
    ]
    running = start(
        tmp_path_factory.mktemp("vault-keys"),
        module_store_env,
        backend,
        MEMENTO_KEYS=json.dumps(keys),
        MEMENTO_ACCESS_KEY="vault-isolation-operator-key-0123",
    )
    try:
        yield running
    finally:
        running.stop()


def keyed(server: HttpServer, key: str, session: str | None = None) -> Any:
    return named(server, session, key=key)


async def test_agents_keep_their_keys_apart_and_read_only_keys_only_search(keyed_server: HttpServer) -> None:
    async with keyed(keyed_server, KEY_A, "iso-a") as a, keyed(keyed_server, KEY_B, "iso-b") as b:
        structured(await a.call_tool("commit_memory", {"scope": "vault", "key": "plan", "content": "agent a heron plan"}))
        structured(await a.call_tool("commit_memory", {"scope": "session", "key": "s", "content": "agent a heron scratch"}))
        structured(await b.call_tool("commit_memory", {"scope": "vault", "key": "plan", "content": "agent b egret plan"}))
        found = structured(await b.call_tool("search_memories", {"query": "heron OR egret OR plan"}))
        assert [h["content"] for h in found["results"]] == ["agent b egret plan"]
        assert (await read_json(b, "memory://vault/plan"))["content"] == "agent b egret plan"
        assert [m["content"] for m in await read_json(b, "memory://vault")] == ["agent b egret plan"]
        with pytest.raises(MCPError):
            await read_json(b, "memory://session/iso-a")  # a's session id is not b's to read
        assert structured(await b.call_tool("prune_memory", {"scope": "all", "key": "plan"})) == {"pruned_count": 1}
        assert (await read_json(a, "memory://vault/plan"))["content"] == "agent a heron plan"
        recalled = await b.call_tool("recall", {"text": "heron"})
        assert "heron" not in recalled.content[0].text
        async with keyed(keyed_server, KEY_B, "iso-a") as intruder:  # naming another namespace's live session is refused
            code, _, _ = error_of(await intruder.call_tool("commit_memory", {"scope": "session", "key": "x", "content": "intrusion"}))
            assert code == "forbidden"
            code, _, _ = error_of(await intruder.call_tool("search_memories", {"query": "heron", "scope": "session"}))
            assert code == "forbidden"
    async with keyed(keyed_server, KEY_A_RO) as ro:
        found = structured(await ro.call_tool("search_memories", {"query": "heron", "scope": "vault"}))
        assert [h["key"] for h in found["results"]] == ["plan"]
        code, _, _ = error_of(await ro.call_tool("commit_memory", {"scope": "vault", "key": "plan", "content": "overwritten"}))
        assert code == "forbidden"
        code, _, _ = error_of(await ro.call_tool("prune_memory", {"scope": "vault", "key": "plan"}))
        assert code == "forbidden"
    async with keyed(keyed_server, KEY_A) as a:
        assert (await read_json(a, "memory://vault/plan"))["content"] == "agent a heron plan"
