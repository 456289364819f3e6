"""The export faces against the real server process: the `export` tool through the official MCP
Python client over stdio and Streamable HTTP (its inputSchema as documented, pages joined into a
file that `memento import` restores), and the REST routes (`GET /api/export` streamed in each
format, `POST /api/import` losslessly, scoped to the key's agent); on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, OPERATOR, client, problem_of, rest_env

from memento.exchange import formats

pytestmark = [pytest.mark.slow, pytest.mark.backends("sqlite", "postgres")]

# The tool's inputSchema as docs/export.md documents it.
EXPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "format": {
            "type": "string",
            "enum": ["ndjson", "markdown", "csv"],
            "default": "ndjson",
            "description": "ndjson (lossless, re-importable), markdown or csv.",
        },
        "filters": {"type": "object", "description": "{topic, tags (all), memorySystem, since (ISO time)}."},
        "cursor": {"type": "string", "description": "nextCursor of the previous page."},
        "limit": {"type": "integer", "default": 100, "description": "Most records per page."},
        "agentId": {"type": "string", "description": "Namespace."},
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("export-faces")
    running = start_http_server({**server_env(module_store_env(folder)), **rest_env()}, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


def seed(http: httpx.Client, word: str) -> list[str]:
    """Three memories of the key's agent about one entity, one of them amended (a version)."""
    ids = [
        http.post(
            "/memories",
            json={"content": f"{word} note {i}: the {word} pipeline step {i}", "tags": [word], "entity_names": [f"{word} project"]},
        ).json()["memory"]["id"]
        for i in range(3)
    ]
    http.put(f"/memories/{ids[0]}", json={"content": f"{word} note 0, amended"})
    return ids


async def pages(mcp: Client, **arguments: Any) -> tuple[str, int]:
    """Every page of an export joined, and how many pages it took."""
    text, count, cursor = "", 0, None
    while True:
        page = data(await mcp.call_tool("export", {**arguments, **({"cursor": cursor} if cursor else {})}))
        text, count, cursor = text + page["text"], count + 1, page["nextCursor"]
        if cursor is None:
            return text, count


@pytest.mark.anyio
async def test_the_tool_over_http_pages_the_callers_own_export(server: HttpServer) -> None:
    with client(server.url, KEY_A) as a, client(server.url, KEY_B) as b:
        mine, theirs = seed(a, "heron"), seed(b, "egret")
    headers = {"Authorization": f"Bearer {KEY_A}"}
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http:
        async with Client(streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S) as mcp:
            tool = {t.name: t for t in (await mcp.list_tools()).tools}["export"]
            assert tool.input_schema == EXPORT_SCHEMA and tool.description
            text, count = await pages(mcp, limit=1)
            assert count == 3 + 1 + 3  # one record a page: the memories, their entity, its associations
            lines = [json.loads(x) for x in text.splitlines()]
            assert lines[0]["version"] == 2 and lines[0]["agents"] == ["agent-a"] and lines[-1]["kind"] == "end"
            fragments = [x for x in lines[1:] if x["kind"] == "fragment"]
            assert {f["id"] for f in fragments} == set(mine) and not set(theirs) & set(text.split('"'))
            assert [len(f["versions"]) for f in fragments if f["id"] == mine[0]] == [1]
            assert lines[-1]["counts"]["fragment"] == 3  # the trailer counts every page, not the last one
            csv_text, _ = await pages(mcp, format="csv", filters={"tags": ["heron"]})
            rows = list(csv.DictReader(io.StringIO(csv_text, newline="")))
            assert sorted(r["id"] for r in rows) == sorted(mine) and tuple(rows[0]) == formats.CSV_COLUMNS
            code, _, _ = error_of(await mcp.call_tool("export", {"agentId": "agent-b"}))
            assert code == "forbidden"
            code, message, _ = error_of(await mcp.call_tool("export", {"cursor": "garbage"}))
            assert code == "invalid_argument" and "cursor" in message


@pytest.mark.anyio
async def test_the_tool_over_stdio_gives_pages_memento_import_restores(tmp_path: Path, store_env: StoreEnv) -> None:
    env = server_env(store_env(tmp_path))
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as mcp:
        tool = {t.name: t for t in (await mcp.list_tools()).tools}["export"]
        assert tool.input_schema == EXPORT_SCHEMA
        for i in range(5):
            data(await mcp.call_tool("remember", {"content": f"stdio fact number {i} about ospreys", "topic": "birds", "type": "fact"}))
        text, count = await pages(mcp, limit=2)
        markdown, _ = await pages(mcp, format="markdown")
    assert count == 3 and text.count('"kind":"fragment"') == 5
    assert markdown.count("\n## birds: stdio fact number") == 5
    exported = tmp_path / "birds.jsonl"
    exported.write_text(text, encoding="utf-8")
    target = {**os.environ, **env, "DATABASE_URL": f"sqlite:///{tmp_path / 'copy.db'}", "DATABASE_MIGRATION_URL": ""}
    done = subprocess.run([*SERVE[:-1], "import", str(exported), "--json"], env=target, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stored"] == 5


def test_rest_export_streams_each_format_of_the_keys_agent(server: HttpServer) -> None:
    with client(server.url, KEY_A) as a, client(server.url, KEY_B) as b:
        mine, theirs = seed(a, "plover"), seed(b, "godwit")
        response = a.get("/export")
        assert response.status_code == 200 and response.headers["content-type"] == "application/x-ndjson"
        assert 'filename="memento-export.jsonl"' in response.headers["content-disposition"]
        lines = [json.loads(x) for x in response.text.splitlines()]
        assert lines[0]["agents"] == ["agent-a"] and lines[-1]["kind"] == "end"
        ids = {x["id"] for x in lines[1:] if x["kind"] == "fragment"}
        assert set(mine) <= ids and not set(theirs) & ids and "godwit" not in response.text
        md = a.get("/export", params={"format": "markdown", "tags": "plover"})
        assert md.headers["content-type"].startswith("text/markdown") and md.text.count("\n## ") == 3
        table = a.get("/export", params={"format": "csv", "tags": "plover"})
        assert table.headers["content-type"].startswith("text/csv")
        assert sorted(r["id"] for r in csv.DictReader(io.StringIO(table.text, newline=""))) == sorted(mine)
        everything = httpx.get(server.url + "/api/export", headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=TIMEOUT_S)
        assert set(mine) | set(theirs) <= {json.loads(x).get("id") for x in everything.text.splitlines()}  # admin: every agent
        problem_of(a.get("/export", params={"format": "xml"}), 422)


def test_rest_import_restores_the_keys_own_export_and_refuses_anothers(server: HttpServer) -> None:
    with client(server.url, KEY_A) as a, client(server.url, KEY_B) as b, client(server.url, KEY_A_READ) as ro:
        seed(a, "stint")
        seed(b, "knot")
        own, foreign = a.get("/export").content, b.get("/export").content
        again = a.post("/import", content=own, headers={"Content-Type": "application/x-ndjson"})
        assert again.status_code == 200, again.text
        outcome = again.json()
        assert outcome["restored"] == {} and outcome["already_present"]["fragment"] == outcome["read"]["fragment"]  # merged: nothing new
        refused = problem_of(a.post("/import", content=foreign, headers={"Content-Type": "application/x-ndjson"}), 403)
        assert "agent-b" in refused["detail"]
        assert a.get("/export").content.splitlines()[1:] == own.splitlines()[1:]  # nothing written
        problem_of(ro.post("/import", content=own, headers={"Content-Type": "application/x-ndjson"}), 403)
        problem_of(a.post("/import", content=own.splitlines()[0] + b"\n", headers={"Content-Type": "application/x-ndjson"}), 400)
