"""End to end: the official `mcp` Python client talks to the real server in a subprocess.

The server is started exactly as a user would (`python -m memento serve ...`), over stdio and
over Streamable HTTP on 127.0.0.1, and every one of the eleven tools is called, on SQLite and on
PostgreSQL + Redis. The HTTP session rules and the signal handling run on SQLite only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE, TIMEOUT_S, TOOL_NAMES, HttpServer, assert_backend, start_http_server
from mcp_helpers import server_env as helper_env
from mcp_types import CallToolResult, TextContent

from memento.app import build_app
from memento.models import CallContext, MemoryStatsInput
from memento.settings import Settings

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server_env(tmp_path: Path, store_env: StoreEnv) -> dict[str, str]:
    return helper_env(store_env(tmp_path))


def stored_stats(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Open the database the server used (after it exited) and read its statistics."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app = build_app(Settings())
    try:
        return app.service.memory_stats(MemoryStatsInput(), CallContext()).dump()
    finally:
        app.close()


def data(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error is False, result.content
    assert isinstance(result.content[0], TextContent)
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    assert result.structured_content is None  # sent once, as text (MEMENTO_STRUCTURED_OUTPUT is off)
    return parsed


def error_text(result: CallToolResult) -> str:
    assert result.is_error is True
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


async def exercise_every_tool(client: Client) -> None:
    """A realistic session touching every tool, asserting each result."""
    assert client.protocol_version == "2025-11-25"
    assert client.server_info is not None and client.server_info.name == "memento"
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOL_NAMES
    assert all(t.input_schema["type"] == "object" for t in listed.tools)

    start = data(await client.call_tool("context", {"tokenBudget": 1500}))
    assert start["coreMemory"] == [] and start["workingMemory"] == []

    error = data(
        await client.call_tool(
            "remember",
            {
                "content": "API pods get ECONNREFUSED from postgres on 5432 after a node restart",
                "topic": "database",
                "type": "error",
                "keywords": ["postgres", "econnrefused", "restart"],
                "importance": 0.8,
            },
        )
    )
    fix = data(
        await client.call_tool(
            "remember",
            {
                "content": "Restart pgbouncer, then roll the API deployment to reconnect postgres",
                "topic": "database",
                "type": "procedure",
                "keywords": ["postgres", "pgbouncer"],
            },
        )
    )
    fact = data(await client.call_tool("remember", {"content": "Staging uses the eu-west-1 region", "topic": "infra", "type": "fact"}))
    note = data(
        await client.call_tool(
            "remember", {"content": "Currently bisecting the flaky login test", "topic": "work", "type": "episode", "scope": "session"}
        )
    )
    assert error["created"] and fix["created"] and fact["created"]
    assert note["created"] is True
    again = data(await client.call_tool("remember", {"content": "Staging uses the eu-west-1 region", "topic": "infra", "type": "fact"}))
    assert again["created"] is False and again["id"] == fact["id"]

    linked = data(await client.call_tool("link", {"fromId": error["id"], "toId": fix["id"], "relationType": "resolved_by"}))
    assert linked["relationType"] == "resolved_by"

    recalled = data(await client.call_tool("recall", {"keywords": ["postgres"], "topic": "database"}))
    assert {error["id"], fix["id"]} <= {f["id"] for f in recalled["fragments"]}
    by_text = data(await client.call_tool("recall", {"text": "which region does staging run in?"}))
    assert fact["id"] in {f["id"] for f in by_text["fragments"]}

    amended = data(await client.call_tool("amend", {"id": fix["id"], "importance": 0.9}))
    assert amended["id"] == fix["id"] and amended["versionArchived"] is True

    graph = data(await client.call_tool("graph_explore", {"startId": error["id"]}))
    assert graph["start"]["id"] == error["id"]
    assert [n["id"] for n in graph["nodes"]] == [fix["id"]]
    assert graph["edges"] == [{"from": error["id"], "to": fix["id"], "relation": "resolved_by"}]

    exported = data(await client.call_tool("export", {"format": "ndjson"}))
    lines = [json.loads(line) for line in exported["text"].splitlines()]
    assert exported["nextCursor"] is None and lines[-1]["kind"] == "end"
    by_id = {x["id"]: x for x in lines[1:-1] if x["kind"] == "fragment"}
    assert {error["id"], fix["id"]} <= set(by_id) and len(by_id[fix["id"]]["versions"]) == 1  # the amend's archived state

    reflected = data(
        await client.call_tool(
            "reflect",
            {
                "summary": "Diagnosed the postgres outage after node restarts",
                "decisions": ["Run pgbouncer as a DaemonSet"],
                "open_questions": ["Why does the node restart drop pooled connections?"],
                "task_effectiveness": {"overall_success": True, "tool_highlights": ["graph_explore"]},
            },
        )
    )
    assert reflected["count"] == 3 and "taskFeedbackId" in reflected

    feedback = data(
        await client.call_tool(
            "tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": False, "suggestion": "rank fixes higher"}
        )
    )
    assert feedback["success"] is True

    stats = data(await client.call_tool("memory_stats", {}))
    assert stats["total"] == 6 and stats["workingMemory"] == 1 and stats["links"] >= 1

    consolidated = data(await client.call_tool("memory_consolidate", {}))
    assert isinstance(consolidated, dict) and consolidated

    forgotten = data(await client.call_tool("forget", {"id": fact["id"]}))
    assert forgotten["deleted"] == [fact["id"]]
    assert data(await client.call_tool("memory_stats", {}))["total"] == 5

    # Bad input is a readable tool error and leaves the store untouched.
    text = error_text(await client.call_tool("remember", {"content": "x", "topic": "t", "type": "rumour"}))
    assert "type" in text and "invalid_argument" in text
    text = error_text(await client.call_tool("amend", {"id": fix["id"], "importance": 7}))
    assert "importance" in text
    text = error_text(await client.call_tool("graph_explore", {"startId": "frag-missing"}))
    assert "not_found" in text
    after = data(await client.call_tool("memory_stats", {}))
    assert after["total"] == 5 and after["workingMemory"] == 1
    unchanged = data(await client.call_tool("recall", {"keywords": ["pgbouncer"], "verbose": True}))
    assert next(f for f in unchanged["fragments"] if f["id"] == fix["id"])["importance"] == 0.9


# ------------------------------------------------------------------ stdio


@pytest.mark.backends("sqlite", "postgres+redis")
async def test_every_tool_over_stdio(server_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=server_env)
    # The classic session (initialize); the default mode speaks 2026-07-28: tests/test_mcp_2026.py.
    async with Client(params, read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:
        await exercise_every_tool(client)
    # Closing stdin ended the session cleanly: its working memory was summarized into one episodic
    # memory (docs/lifecycle.md "Working memory's end") and expunged on the way out.
    stats = stored_stats(server_env, monkeypatch)
    assert stats["total"] == 6 and stats["workingMemory"] == 0 and stats["byType"]["episode"] == 1


# ------------------------------------------------------------------ Streamable HTTP


@pytest.fixture
def http_server(server_env: dict[str, str], tmp_path: Path, backend: str) -> Iterator[HttpServer]:
    server = start_http_server(server_env, tmp_path / "server.log")
    try:
        assert_backend(server, backend)
        yield server
    finally:
        server.stop()


@pytest.mark.backends("sqlite", "postgres+redis")
async def test_every_tool_over_streamable_http(
    http_server: HttpServer, server_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The classic session (initialize, Mcp-Session-Id); the default mode speaks 2026-07-28: tests/test_http_2026.py.
    async with Client(http_server.mcp, read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:
        await exercise_every_tool(client)
    # Leaving the client DELETEd the session, which summarized and expunged its working memory.
    status = http_server.stop()
    assert status in (0, -signal.SIGTERM), http_server.log.read_text()
    assert "HTTP server stopped" in http_server.log.read_text()
    stats = stored_stats(server_env, monkeypatch)
    assert stats["total"] == 6 and stats["workingMemory"] == 0 and stats["byType"]["episode"] == 1


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
BOTH = {"Accept": "application/json, text/event-stream"}


def open_session(http: httpx.Client, url: str) -> str:
    reply = http.post(url, json=INIT, headers=BOTH)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("application/json")
    assert reply.json()["result"]["protocolVersion"] == "2025-06-18"
    session_id = reply.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post(url, json=note, headers={**BOTH, "Mcp-Session-Id": session_id}).status_code == 202
    return session_id


def test_http_session_rules(http_server: HttpServer) -> None:
    url = http_server.mcp
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    with httpx.Client(timeout=TIMEOUT_S) as http:
        assert http.get(http_server.url + "/health").json()["status"] == "ok"
        session_id = open_session(http, url)
        with_session = {**BOTH, "Mcp-Session-Id": session_id}

        assert http.post(url, json=ping, headers=BOTH).status_code == 400  # no session
        missing = http.post(url, json=ping, headers={**BOTH, "Mcp-Session-Id": "nope"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == -32600
        assert http.post(url, json=ping, headers=with_session).json()["result"] == {}

        sse_only = http.post(url, json=ping, headers={"Accept": "text/event-stream", "Mcp-Session-Id": session_id})
        assert sse_only.status_code == 406  # a POST must accept both JSON and SSE
        prefers_sse = http.post(
            url, json=ping, headers={"Accept": "application/json;q=0.5, text/event-stream", "Mcp-Session-Id": session_id}
        )
        assert prefers_sse.headers["content-type"].startswith("text/event-stream")
        assert "event: message\n" in prefers_sse.text
        assert json.loads(prefers_sse.text.split("data: ", 1)[1])["result"] == {}

        no_json = http.post(url, json=ping, headers={"Accept": "text/html", "Mcp-Session-Id": session_id})
        assert no_json.status_code == 406
        garbage = http.post(url, content=b"{not json", headers={**with_session, "Content-Type": "application/json"})
        assert garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700
        bad_version = http.post(url, json=ping, headers={**with_session, "MCP-Protocol-Version": "1999-01-01"})
        assert bad_version.status_code == 400
        foreign = http.post(url, json=ping, headers={**with_session, "Origin": "https://evil.example"})
        assert foreign.status_code == 403
        assert http.put(url, json=ping, headers=with_session).status_code == 405

        assert http.delete(url, headers=with_session).status_code == 204
        assert http.post(url, json=ping, headers=with_session).status_code == 404
        assert http.delete(url, headers=with_session).status_code == 404


def test_sigterm_closes_open_event_streams_and_the_app(http_server: HttpServer) -> None:
    with httpx.Client(timeout=TIMEOUT_S) as http:
        session_id = open_session(http, http_server.mcp)
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": session_id}
        with http.stream("GET", http_server.mcp, headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            chunks = stream.iter_bytes()
            assert next(chunks).startswith(b": stream open")
            http_server.process.send_signal(signal.SIGTERM)
            assert b"".join(chunks) == b""  # the server ended the stream instead of hanging
        status = http_server.process.wait(timeout=15)
    assert status in (0, -signal.SIGTERM)
    assert "HTTP server stopped" in http_server.log.read_text()


def test_sigterm_stops_the_stdio_server_cleanly(server_env: dict[str, str]) -> None:
    process = subprocess.Popen(
        [*SERVE, "--transport", "stdio"],
        env={**os.environ, **server_env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        process.stdin.flush()
        assert json.loads(process.stdout.readline()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        process.send_signal(signal.SIGTERM)  # stdin stays open: only the signal can end it
        assert process.wait(timeout=15) == 0
        _, err = process.communicate(timeout=5)
        assert b"stdio server stopped" in err and b"Fatal Python error" not in err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
