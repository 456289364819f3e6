"""Seed 003 end to end, on one real server over HTTP with the official MCP client and /v1.

- A day in the life: an agent session sets working-memory items and a skip entry, stores
  memories and an identity crystal, and ends; a new session's context call (MCP and REST) returns
  the open items, the identity and a skip warning for a message touching the skipped topic, and
  not the completed item. `include` picks the parts.
- The isolation matrix of the face: agent B's items, skip entries, identity, sections and
  memories never reach agent A through any protocol tool or /v1 route, whatever ids or workspace
  names A sends, and B's records are unchanged afterwards; A's read-only key is refused by every
  writing tool and route; workspaces of one agent do not see each other.
On SQLite and on PostgreSQL + Redis.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_helpers import TIMEOUT_S, HttpServer, assert_backend, data, server_env, start_http_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.backends("sqlite", "postgres+redis")]

KEY_A = "protocol-key-agent-a-0123456789"
KEY_A_RO = "protocol-key-agent-a-readonly-01"
KEY_B = "protocol-key-agent-b-0123456789"
OPERATOR_KEY = "protocol-operator-key-0123456789"
KEYS = [
    {"name": "agent-a", "key": KEY_A, "agent": "agent-a", "access": "read-write"},
    {"name": "agent-a-ro", "key": KEY_A_RO, "agent": "agent-a", "access": "read-only"},
    {"name": "agent-b", "key": KEY_B, "agent": "agent-b", "access": "read-write"},
]
TOMORROW = (datetime.now(UTC) + timedelta(days=2)).date().isoformat()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("protocol")
    env = {
        **server_env(module_store_env(folder)),
        "MEMENTO_KEYS": json.dumps(KEYS),
        "MEMENTO_ACCESS_KEY": OPERATOR_KEY,
        "MEMENTO_TOOLSETS": "memento,protocol",
    }
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


def headers(key: str, workspace: str | None = None) -> dict[str, str]:
    found = {"Authorization": f"Bearer {key}"}
    if workspace is not None:
        found["X-Memento-Workspace"] = workspace
    return found


@asynccontextmanager
async def connect(server: HttpServer, key: str, workspace: str | None = None) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers=headers(key, workspace)) as http:
        transport = streamable_http_client(server.mcp, http_client=http)
        async with Client(transport, read_timeout_seconds=TIMEOUT_S) as client:
            yield client


def v1(server: HttpServer, key: str, workspace: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=server.url + "/v1", headers=headers(key, workspace), timeout=TIMEOUT_S)


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return data(await client.call_tool(name, arguments))


# ------------------------------------------------------------------ a day in the life


async def test_a_day_in_the_life(server: HttpServer) -> None:
    workspace = "atlas"
    async with connect(server, KEY_A, workspace) as first:
        migrate = await call(
            first,
            "memento_item_create",
            {
                "category": "active_work",
                "title": "Migrate the billing service to PostgreSQL",
                "next_action": "run the dry-run migration against the staging copy",
                "priority": 8,
                "tags": ["billing"],
            },
        )
        await call(
            first,
            "memento_item_create",
            {"category": "standing_decision", "title": "Every schema change goes through a reviewed migration", "priority": 5},
        )
        notes = await call(first, "memento_item_create", {"category": "active_work", "title": "Write the quarterly release notes"})
        await call(first, "memento_item_update", {"id": notes["id"], "status": "completed"})
        await call(
            first,
            "memento_skip_add",
            {"item": "aurora borealis alerts", "reason": "Kp index too low to see from this latitude", "expires": TOMORROW},
        )
        await call(
            first,
            "memento_remember",
            {"content": "The billing database runs PostgreSQL 16 on host db-3", "type": "fact", "tags": ["billing"]},
        )
        await call(
            first,
            "memento_identity_update",
            {"crystal": "I am the atlas agent. I move services to PostgreSQL carefully and never skip a migration review."},
        )
        assert migrate["id"]

    async with connect(server, KEY_A, workspace) as second:
        context = await call(
            second,
            "memento_context",
            {"message": "Should I look at the aurora borealis alerts tonight, and which host runs the billing database?"},
        )
    titles = [item["title"] for item in context["working_memory"]["items"]]
    assert "Migrate the billing service to PostgreSQL" in titles
    assert "Every schema change goes through a reviewed migration" in titles
    assert "Write the quarterly release notes" not in titles
    assert titles[0] == "Migrate the billing service to PostgreSQL"  # priority first
    assert context["working_memory"]["items"][0]["next_action"].startswith("run the dry-run")
    assert "atlas agent" in context["identity"]
    assert [s["item"] for s in context["skip_matches"]] == ["aurora borealis alerts"]
    assert any("db-3" in m["content"] for m in context["memories"]["matches"])
    assert context["meta"]["workspace"] == workspace

    with v1(server, KEY_A, workspace) as rest:
        reply = rest.post("/context", json={"message": "aurora borealis alerts tonight?", "include": ["skip_list", "identity"]})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert [s["item"] for s in body["skip_matches"]] == ["aurora borealis alerts"]
        assert "atlas agent" in body["identity"]
        assert body.get("working_memory") is None and body.get("memories") is None
        # another workspace of the same agent starts empty
    with v1(server, KEY_A, "other-project") as rest:
        body = rest.post("/context", json={"message": "aurora borealis alerts and the billing database"}).json()
        assert body["working_memory"]["items"] == [] and body["skip_matches"] == [] and body["identity"] is None
        assert body["memories"]["matches"] == []


# ------------------------------------------------------------------ the isolation matrix of the face

B_SECRETS = ["quokkaprotocol", "marmalade-vault", "wombat agent"]  # A never sends these: no echo can hide a leak


async def populate_b(server: HttpServer) -> dict[str, str]:
    """B's records through every part of the face; returns their ids."""
    async with connect(server, KEY_B) as b:
        memory = await call(
            b,
            "memento_remember",
            {"content": "The quokkaprotocol launch code is marmalade-vault", "type": "fact", "tags": ["quokkaprotocol"]},
        )
        other = await call(
            b,
            "memento_remember",
            {
                "content": "rollout notes of quokkaprotocol live beside marmalade-vault",
                "linkages": [
                    {"type": "memory", "id": memory["id"], "label": "supports"},
                    {"type": "file", "path": "vault/quokkaprotocol.md"},
                ],
            },
        )
        item = await call(
            b, "memento_item_create", {"category": "active_work", "title": "quokkaprotocol migration", "next_action": "marmalade-vault"}
        )
        skip = await call(b, "memento_skip_add", {"item": "quokkaprotocol alerts", "reason": "marmalade-vault noise", "expires": TOMORROW})
        await call(b, "memento_update", {"section": "session_notes", "content": "quokkaprotocol notes: marmalade-vault"})
        await call(b, "memento_identity_update", {"crystal": "B is the wombat agent of quokkaprotocol."})
    return {"memory": memory["id"], "other": other["id"], "item": item["id"], "skip": skip["id"]}


async def b_state(server: HttpServer) -> list[Any]:
    """Everything of B's the face shows B (without touching access statistics where it can)."""
    async with connect(server, KEY_B) as b:
        return [
            await call(b, "memento_item_list", {"status": "active"}),
            await call(b, "memento_skip_list", {}),
            await call(b, "memento_identity_history", {"include_text": True}),
            await call(b, "memento_read", {}),
        ]


def a_calls(ids: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Every protocol tool, aimed at B's records wherever a tool takes an id."""
    return [
        ("memento_context", {"message": "launch code, rollout notes, migration and alerts"}),
        ("memento_recall", {"query": "launch code rollout notes"}),
        ("memento_recall", {"query": "launch code", "tags": ["launch"]}),
        ("memento_memory_graph", {"id": ids["other"], "depth": 3}),
        ("memento_memory_delete", {"id": ids["memory"]}),
        ("memento_remember", {"content": "A links to B", "linkages": [{"type": "memory", "id": ids["memory"]}]}),
        ("memento_item_list", {"query": "migration"}),
        ("memento_item_list", {"status": "completed"}),
        ("memento_item_update", {"id": ids["item"], "status": "archived"}),
        ("memento_item_delete", {"id": ids["item"]}),
        ("memento_skip_check", {"query": "alerts noise"}),
        ("memento_skip_list", {}),
        ("memento_skip_remove", {"id": ids["skip"]}),
        ("memento_read", {}),
        ("memento_read", {"section": "session_notes"}),
        ("memento_identity", {}),
        ("memento_identity_history", {"include_text": True}),
        ("memento_identity_crystallize", {"dry_run": True}),
        ("memento_health", {}),
        ("memento_init", {}),
        (
            "memento_extract",
            {"transcript": "User: We decided to ship the launch code rollout notes on Monday. Always run the migration first."},
        ),
    ]


def assert_clean(label: str, reply: str) -> None:
    leaked = [secret for secret in B_SECRETS if secret in reply]
    assert not leaked, f"{label} leaked {leaked}: {reply[:1500]}"


async def test_no_protocol_tool_or_route_lets_one_agent_reach_anothers_records(server: HttpServer) -> None:
    ids = await populate_b(server)
    before = await b_state(server)
    for workspace in (None, "agent-b", "side-project"):  # A naming B's agent id reaches agent-a:agent-b
        async with connect(server, KEY_A, workspace) as a:
            for name, arguments in a_calls(ids):
                try:
                    result = await a.call_tool(name, arguments)
                except MCPError as exc:
                    assert_clean(f"{workspace} {name}", str(exc))
                    continue
                assert_clean(f"{workspace} {name}", result.model_dump_json().replace(ids["memory"], "<arg>"))
        with v1(server, KEY_A, workspace) as rest:
            for method, path, body in [
                ("POST", "/context", {"message": "launch code rollout notes migration alerts"}),
                ("GET", "/memories?query=launch%20code", None),
                ("GET", f"/memories/{ids['memory']}", None),
                ("GET", f"/memories/{ids['other']}/graph", None),
                ("DELETE", f"/memories/{ids['memory']}", None),
                ("GET", "/working-memory/items?query=migration", None),
                ("GET", f"/working-memory/items/{ids['item']}", None),
                ("PUT", f"/working-memory/items/{ids['item']}", {"status": "archived"}),
                ("DELETE", f"/working-memory/items/{ids['item']}", None),
                ("GET", "/working-memory", None),
                ("GET", "/skip-list", None),
                ("GET", "/skip-list/check?query=alerts", None),
                ("DELETE", f"/skip-list/{ids['skip']}", None),
                ("GET", "/identity", None),
                ("GET", "/identity/history", None),
                ("GET", "/health", None),
                ("GET", "/workspaces", None),
                ("POST", "/distill", {"transcript": "User: We decided to ship the launch code rollout notes on Monday.", "dry_run": True}),
            ]:
                reply = rest.request(method, path, json=body)
                assert reply.status_code < 500, (method, path, reply.text)
                assert_clean(f"{workspace} {method} {path}", reply.text.replace(ids["memory"], "<arg>"))
    assert await b_state(server) == before


async def test_a_read_only_key_is_refused_by_every_writing_tool_and_route(server: HttpServer) -> None:
    async with connect(server, KEY_A) as a:
        item = await call(a, "memento_item_create", {"category": "session_note", "title": "read-only probe target"})
        memory = await call(a, "memento_remember", {"content": "read-only probe target memory"})
        skip = await call(a, "memento_skip_add", {"item": "read-only probe", "reason": "probe", "expires": TOMORROW})
    writes = {
        "memento_remember": {"content": "written by a read-only key"},
        "memento_store": {"content": "written by a read-only key"},
        "memento_memory_delete": {"id": memory["id"]},
        "memento_update": {"section": "session_notes", "content": "written by a read-only key"},
        "memento_item_create": {"category": "session_note", "title": "written by a read-only key"},
        "memento_item_update": {"id": item["id"], "status": "archived"},
        "memento_item_delete": {"id": item["id"]},
        "memento_skip_add": {"item": "read-only", "reason": "probe", "expires": TOMORROW},
        "memento_skip_remove": {"id": skip["id"]},
        "memento_identity_update": {"crystal": "written by a read-only key"},
        "memento_identity_crystallize": {},
        "memento_init": {},
        "memento_extract": {"transcript": "User: We decided to use Redis 7 for the session cache."},
    }
    async with connect(server, KEY_A_RO) as ro:
        listed = {tool.name: tool for tool in (await ro.list_tools()).tools if tool.name.startswith("memento_")}
        writing = {name for name, tool in listed.items() if not (tool.annotations and tool.annotations.read_only_hint)}
        assert writing == set(writes), "every writing protocol tool is probed"
        for name, arguments in writes.items():
            result = await ro.call_tool(name, arguments)
            assert result.is_error, (name, result.content)
            assert "read-only" in result.model_dump_json(), (name, result.content)
    async with connect(server, KEY_A) as a:
        assert (await call(a, "memento_item_list", {"query": "probe"}))["items"][0]["status"] == "active"
        assert (await call(a, "memento_skip_list", {}))["total"] >= 1
        assert (await call(a, "memento_recall", {"query": "probe target memory"}))["count"] >= 1
    with v1(server, KEY_A_RO) as rest:
        for method, path, body in [
            ("POST", "/memories", {"content": "x"}),
            ("DELETE", f"/memories/{memory['id']}", None),
            ("POST", "/working-memory/items", {"category": "session_note", "title": "x"}),
            ("PUT", f"/working-memory/items/{item['id']}", {"status": "archived"}),
            ("DELETE", f"/working-memory/items/{item['id']}", None),
            ("PUT", "/working-memory/session_notes", {"content": "x"}),
            ("POST", "/skip-list", {"item": "x", "reason": "y", "expires": TOMORROW}),
            ("DELETE", f"/skip-list/{skip['id']}", None),
            ("POST", "/identity", {"crystal": "x"}),
            ("POST", "/identity/crystallize", {}),
            ("POST", "/distill", {"transcript": "We decided to use PostgreSQL."}),
        ]:
            reply = rest.request(method, path, json=body)
            assert reply.status_code == 403, (method, path, reply.status_code, reply.text)
