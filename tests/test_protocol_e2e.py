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
