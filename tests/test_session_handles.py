"""Sessions at MCP 2026-07-28: server-minted handles passed as the `session` tool argument.

The revision has no protocol session; a client opens one with the `session` tool and passes the
handle it gets. These tests drive the MCP core (`McpServer.handle`) with a request of each
revision, on SQLite and PostgreSQL: working memory is seen only through the handle, ends when it
is closed, is refused to any other credential, and an expired handle is refused and its working
memory ended by the lifecycle. Older revisions see neither the tool nor the argument.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from datetime import timedelta
from typing import Any

import pytest
from conftest import Clock

from memento.app import App
from memento.auth.principal import Principal
from memento.mcp import stateless, versions
from memento.mcp.context import Session
from memento.mcp.handles import SESSION_TOOLS
from memento.mcp.namespace import CONNECTION_SESSION
from memento.mcp.server import McpServer
from memento.mcp.toolsets import REGISTRY
from memento.models import AgentScope
from memento.settings import Settings

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

ALICE = Principal(subject="alice-key", agent_id="agent-a")
ALICE_OTHER_KEY = Principal(subject="alice-second-key", agent_id="agent-a")
BOB = Principal(subject="bob-key", agent_id="agent-b")
_ids = itertools.count(1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def session_for(principal: Principal, version: str = versions.STATELESS) -> Session:
    """A request's session as the transports build it: at 2026 a throwaway one per request."""
    return Session(id=f"throwaway-{next(_ids)}", protocol_version=version, principal=principal)


async def rpc(
    server: McpServer,
    principal: Principal,
    method: str,
    params: dict[str, Any],
    version: str = versions.STATELESS,
    state: dict[str, Any] | None = None,
) -> Any:
    message = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    if versions.is_stateless(version):  # the real 2026 path: `_meta` on the request, a throwaway session per request
        meta = {stateless.META_PROTOCOL_VERSION: version, stateless.META_CLIENT_CAPABILITIES: {}}
        reply: Any = await stateless.handle_stateless(
            server, {**message, "params": {**params, "_meta": meta}}, principal=principal, sink=None, state=state
        )
    else:
        reply = await server.handle(message, session_for(principal, version))
    assert isinstance(reply, dict) and "result" in reply, reply
    return reply["result"]


async def call(server: McpServer, principal: Principal, tool: str, version: str = versions.STATELESS, **arguments: Any) -> dict[str, Any]:
    """A tool's JSON payload; a tool error raises ToolError with its text."""
    result = await rpc(server, principal, "tools/call", {"name": tool, "arguments": arguments}, version)
    text = result["content"][0]["text"]
    if result["isError"]:
        raise ToolError(text)
    payload: dict[str, Any] = json.loads(text)
    return payload


class ToolError(Exception):
    pass


async def tool_list(server: McpServer, version: str) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = (await rpc(server, ALICE, "tools/list", {}, version))["tools"]
    return tools


def working(context: dict[str, Any]) -> list[str]:
    return [f["content"] for f in context.get("workingMemory") or context.get("working_memory") or []]


@pytest.fixture
def server(app: App) -> McpServer:
    return McpServer(app)


async def test_open_use_close_a_session(server: McpServer, app: App) -> None:
    opened = await call(server, ALICE, "session", action="open")
    handle = opened["session"]
    assert opened["action"] == "open" and opened["idleMinutes"] == app.settings.session_ttl_minutes
    assert len(handle) >= 40 and handle not in opened["sessionId"]
    stored = await call(
        server, ALICE, "remember", content="scratch note for this task", topic="scratch", type="fact", scope="session", session=handle
    )
    assert stored["created"] is True
    # only with the handle is the working memory there
    assert "scratch note for this task" in working(await call(server, ALICE, "context", session=handle))
    assert working(await call(server, ALICE, "context")) == []
    recalled = await call(server, ALICE, "recall", text="scratch note", session=handle)
    assert [f["content"] for f in recalled["fragments"]] == ["scratch note for this task"]
    assert (await call(server, ALICE, "recall", text="scratch note"))["fragments"] == []
    # the store keeps the digest, never the handle
    now, owner = app.service.clock(), AgentScope("agent-a")
    assert app.store.use_handle(owner, hashlib.sha256(handle.encode()).hexdigest(), "access_key:alice-key", now) is not None
    assert app.store.use_handle(owner, handle, "access_key:alice-key", now) is None
    closed = await call(server, ALICE, "session", action="close", session=handle)
    assert closed == {"success": True, "action": "close", "sessionId": opened["sessionId"], "expunged": 1}
    with pytest.raises(ToolError, match="unknown or expired session handle"):
        await call(server, ALICE, "context", session=handle)
    reopened = (await call(server, ALICE, "session", action="open"))["session"]
    assert working(await call(server, ALICE, "context", session=reopened)) == []


async def test_another_credential_is_refused_and_sees_nothing(server: McpServer) -> None:
    handle = (await call(server, ALICE, "session", action="open"))["session"]
    await call(server, ALICE, "remember", content="alice private scratch", topic="scratch", type="fact", scope="session", session=handle)
    for other in (BOB, ALICE_OTHER_KEY):  # another agent, and another key of the same agent
        with pytest.raises(ToolError, match=r"Error \(not_found\): unknown or expired session handle"):
            await call(server, other, "context", session=handle)
        with pytest.raises(ToolError, match="not_found"):
            await call(server, other, "remember", content="planted", topic="scratch", type="fact", scope="session", session=handle)
        with pytest.raises(ToolError, match="not_found"):
            await call(server, other, "session", action="close", session=handle)
    # a refusal neither ended nor changed the session
    assert working(await call(server, ALICE, "context", session=handle)) == ["alice private scratch"]


async def test_scope_session_without_a_handle_is_refused_and_keeps_nothing(server: McpServer, app: App) -> None:
    for tool, arguments in (
        ("remember", {"content": "would leak", "topic": "scratch", "type": "fact", "scope": "session"}),
        ("summarize_thread", {}),
    ):
        with pytest.raises(ToolError, match="open one with the `session` tool"):
            await call(server, ALICE, tool, **arguments)
    assert (await call(server, ALICE, "recall", text="would leak"))["fragments"] == []
    with pytest.raises(ToolError, match="unknown or expired session handle"):
        await call(server, ALICE, "remember", content="x", topic="t", type="fact", scope="session", session="made-up-handle")
    with pytest.raises(ToolError, match="session: the handle"):
        await call(server, ALICE, "recall", text="x", session=7)
    with pytest.raises(ToolError, match="invalid_argument"):  # a tool that keeps no session state takes no handle
        await call(server, ALICE, "memory_stats", session="whatever")


async def test_an_idle_handle_expires_and_the_lifecycle_ends_its_session(server: McpServer, app: App, clock: Clock) -> None:
    handle = (await call(server, ALICE, "session", action="open", idleMinutes=5))["session"]
    await call(server, ALICE, "remember", content="short lived scratch", topic="scratch", type="fact", scope="session", session=handle)
    clock.now += timedelta(minutes=4)
    assert (await call(server, ALICE, "session", action="status", session=handle))["action"] == "status"  # a use keeps it open
    clock.now += timedelta(minutes=4)
    assert working(await call(server, ALICE, "context", session=handle)) == ["short lived scratch"]
    other = (await call(server, ALICE, "session", action="open", idleMinutes=60))["session"]
    clock.now += timedelta(minutes=6)
    await call(server, ALICE, "memory_consolidate")  # the lifecycle ends expired handles' sessions
    assert app.store.expired_handles(clock.now, 10) == []
    with pytest.raises(ToolError, match="unknown or expired session handle"):
        await call(server, ALICE, "context", session=handle)
    # it ended as a closed session does: summarized (MEMENTO_SUMMARIZE_ON_SESSION_END), then expunged
    left = (await call(server, ALICE, "recall", text="short lived scratch"))["fragments"]
    assert [f["type"] for f in left] == ["episode"]
    assert (await call(server, ALICE, "session", action="status", session=other))["action"] == "status"


async def test_an_expired_handle_is_refused_at_once(server: McpServer, clock: Clock) -> None:
    handle = (await call(server, ALICE, "session", action="open", idleMinutes=1))["session"]
    await call(server, ALICE, "remember", content="gone with the handle", topic="scratch", type="fact", scope="session", session=handle)
    clock.now += timedelta(minutes=2)
    with pytest.raises(ToolError, match="unknown or expired session handle"):
        await call(server, ALICE, "recall", text="gone with the handle", session=handle)
    # refusing it ended it: its working memory went with it
    fresh = (await call(server, ALICE, "session", action="open"))["session"]
    left = (await call(server, ALICE, "recall", text="gone with the handle", session=fresh))["fragments"]
    assert [f["type"] for f in left] == ["episode"] and working(await call(server, ALICE, "context", session=fresh)) == []


async def test_bad_session_tool_calls_change_nothing(server: McpServer) -> None:
    with pytest.raises(ToolError, match="leave session out"):
        await call(server, ALICE, "session", action="open", session="x")
    with pytest.raises(ToolError, match="needs the handle"):
        await call(server, ALICE, "session", action="close")
    with pytest.raises(ToolError, match="idleMinutes"):
        await call(server, ALICE, "session", action="open", idleMinutes=0)
    reader = Principal(subject="reader", agent_id="agent-a", read_only=True)
    with pytest.raises(ToolError, match="read-only"):
        await call(server, reader, "session", action="open")


async def test_handles_work_across_two_replicas(server: McpServer, settings: Settings, clock: Clock) -> None:
    from memento.app import build_app
    from memento.embeddings import HashEmbedder

    replica = build_app(settings, embedder=HashEmbedder(256), clock=clock)
    try:
        other = McpServer(replica)
        handle = (await call(server, ALICE, "session", action="open"))["session"]
        await call(
            other, ALICE, "remember", content="written through replica two", topic="scratch", type="fact", scope="session", session=handle
        )
        assert working(await call(server, ALICE, "context", session=handle)) == ["written through replica two"]
        assert (await call(other, ALICE, "session", action="close", session=handle))["expunged"] == 1
        with pytest.raises(ToolError, match="unknown or expired"):
            await call(server, ALICE, "context", session=handle)
    finally:
        replica.close()


async def test_tools_list_at_2026_adds_the_session_tool_and_argument_the_same_for_everyone(server: McpServer) -> None:
    tools = await tool_list(server, versions.STATELESS)
    by_name = {t["name"]: t for t in tools}
    assert tools[-1]["name"] == "session"
    assert by_name["session"]["inputSchema"]["properties"]["action"]["enum"] == ["open", "status", "close"]
    with_argument = {t["name"] for t in tools if "session" in t["inputSchema"].get("properties", {})} - {"session"}
    assert with_argument == SESSION_TOOLS & set(by_name)
    assert "session" not in by_name["memory_stats"]["inputSchema"]["properties"]
    bob = (await rpc(server, BOB, "tools/list", {}))["tools"]
    assert bob == tools


@pytest.mark.parametrize("version", versions.SUPPORTED)
async def test_older_revisions_are_unchanged(server: McpServer, version: str) -> None:
    listed = await tool_list(server, version)
    specs = REGISTRY.select("memento")
    assert [t["name"] for t in listed] == [s.name for s in specs]
    assert listed == [
        s.definition(version) | ({"execution": t["execution"]} if "execution" in t else {}) for s, t in zip(specs, listed, strict=True)
    ]
    reply = await server.handle(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "session", "arguments": {"action": "open"}}},
        session_for(ALICE, version),
    )
    assert isinstance(reply, dict) and reply["error"]["message"] == "Unknown tool: session"
    with pytest.raises(ToolError, match="invalid_argument"):
        await call(server, ALICE, "remember", version, content="x", topic="t", type="fact", session="h")
    # the protocol session is the session, as ever
    session = session_for(ALICE, version)
    params = {"name": "remember", "arguments": {"content": "old style scratch", "topic": "scratch", "type": "fact", "scope": "session"}}
    stored = await server.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}, session)
    assert isinstance(stored, dict) and stored["result"]["isError"] is False


async def test_resources_at_2026_name_no_protocol_session(app: App) -> None:
    from memento.mcp.registry import default_features

    server = McpServer(app, features=default_features(app.settings))
    first = await rpc(server, ALICE, "resources/list", {})
    assert await rpc(server, ALICE, "resources/list", {}) == first  # no throwaway session in it
    assert not any(r["uri"].startswith("memory://sessions/") for r in first["resources"])
    throwaway = session_for(ALICE)  # even the request's own throwaway session is no session to read
    reply = await server.handle(
        {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": f"memory://sessions/{throwaway.id}/working-memory"}},
        throwaway,
    )
    assert isinstance(reply, dict) and reply["error"]["message"].startswith("Resource not found")
    older = session_for(ALICE, versions.LATEST)
    listed = await server.handle({"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {}}, older)
    assert isinstance(listed, dict) and f"memory://sessions/{older.id}/working-memory" in {r["uri"] for r in listed["result"]["resources"]}


async def test_over_stdio_the_connection_is_the_session_without_a_handle(server: McpServer, app: App) -> None:
    """stdio seeds each 2026 request with its connection's session: a call that names no handle
    works in it, and it ends with the connection, as at the older revisions."""
    connection = server.create_session(principal=ALICE)
    state = {CONNECTION_SESSION: connection.id}

    async def over_stdio(tool: str, **arguments: Any) -> dict[str, Any]:
        result = await rpc(server, ALICE, "tools/call", {"name": tool, "arguments": arguments}, state=state)
        assert result["isError"] is False, result
        payload: dict[str, Any] = json.loads(result["content"][0]["text"])
        return payload

    await over_stdio("remember", content="stdio scratch", topic="scratch", type="fact", scope="session")
    assert working(await over_stdio("context")) == ["stdio scratch"]
    handle = (await over_stdio("session", action="open"))["session"]
    assert working(await over_stdio("context", session=handle)) == []  # a handle names its own session
    assert working(await call(server, ALICE, "context")) == []  # over HTTP there is no connection to fall back on
    assert await server.close_session(connection.id)  # EOF
    assert working(await over_stdio("context")) == []
