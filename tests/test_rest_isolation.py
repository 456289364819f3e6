"""Agent A's key sees none of agent B's memories, entities, relations, analytics or events through
any REST route or the SSE stream, and can change none of them; on SQLite and PostgreSQL + Redis.

Every GET route of the OpenAPI document is called with A's key, with B's ids in the path where it
takes one; no answer may carry B's text, names or ids (a 404 echoes the id A asked for, nothing
more). Every write route is tried against B's ids, and B's data is checked unchanged afterwards.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import StoreEnv
from mcp_helpers import HttpServer, assert_backend, server_env, start_http_server
from rest_helpers import KEY_A, KEY_B, client, listening, rest_env

pytestmark = [pytest.mark.slow, pytest.mark.backends("sqlite", "postgres+redis")]

MARK = "zebra" + secrets.token_hex(3)  # in every text of B's: a leak shows it


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("rest-isolation")
    running = start_http_server({**server_env(module_store_env(folder)), **rest_env()}, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


def seed_b(http: httpx.Client) -> dict[str, Any]:
    """B's memories (tagged, typed, with entities), entities and a relation."""
    memory = http.post(
        "/memories",
        json={"content": f"B's secret {MARK} plan", "memory_type": "decision", "tags": [MARK], "entity_names": [f"{MARK}-person"]},
    ).json()["memory"]
    http.post("/memories", json={"content": f"Another {MARK} note of B", "source": MARK})
    entity = http.post("/entities", json={"name": f"{MARK}-project", "entity_type": "project", "description": MARK}).json()
    relation = http.post("/relations", json={"source": f"{MARK}-person", "target": f"{MARK}-project", "relation_type": "works_at"}).json()
    return {"memory_id": memory["id"], "entity_id": entity["id"], "relation_id": relation["relations"][0]["id"]}


def leaks(text: str, ids: dict[str, Any], asked: str) -> list[str]:
    """B's marks and ids in `text`, apart from an id A put in the request itself."""
    found = [MARK] if MARK in text else []
    found += [v for v in ids.values() if v in text and v not in asked]
    return found


def test_agent_a_sees_nothing_of_agent_b_through_any_route(server: HttpServer) -> None:
    with client(server.url, KEY_B) as b, client(server.url, KEY_A) as a:
        ids = seed_b(b)
        a.post("/memories", json={"content": "A's own harmless note", "tags": ["mine"]})
        schema = httpx.get(server.url + "/api/openapi.json", timeout=10).json()
        queries: dict[str, dict[str, Any]] = {"/memories/search": {"q": f"{MARK} secret plan"}, "/memories": {"tags": MARK}}
        checked = 0
        for path, operations in schema["paths"].items():
            if "get" not in operations or path == "/events":
                continue
            concrete = re.sub(r"\{memory_id\}", ids["memory_id"], path)
            concrete = re.sub(r"\{entity_id\}", ids["entity_id"], concrete)
            concrete = re.sub(r"\{relation_id\}", ids["relation_id"], concrete)
            for params in (queries.get(path, {}), {"entity_id": ids["entity_id"]} if path in ("/memories", "/relations") else None):
                if params is None:
                    continue
                response = a.get(concrete, params=params)
                assert response.status_code in (200, 404), (path, response.status_code, response.text)
                if "{" in path:
                    assert response.status_code == 404, (path, response.text)
                assert leaks(response.text, ids, str(response.request.url)) == [], (path, response.text)
                checked += 1
        assert checked >= 15
        overview = a.get("/analytics/overview").json()
        assert (overview["total_memories"], overview["total_entities"], overview["total_relations"]) == (1, 0, 0)
        assert a.get("/analytics/tags").json()["items"] == [{"tag": "mine", "count": 1}]


def test_agent_a_can_change_nothing_of_agent_b(server: HttpServer) -> None:
    with client(server.url, KEY_B) as b, client(server.url, KEY_A) as a:
        ids = seed_b(b)
        before = {p: b.get(p).json() for p in (f"/memories/{ids['memory_id']}", f"/entities/{ids['entity_id']}", "/relations")}
        attempts = [
            a.put(f"/memories/{ids['memory_id']}", json={"content": "overwritten by A"}),
            a.delete(f"/memories/{ids['memory_id']}"),
            a.put(f"/entities/{ids['entity_id']}", json={"description": "overwritten by A"}),
            a.delete(f"/entities/{ids['entity_id']}", params={"cascade_memories": "true"}),
            a.delete(f"/relations/{ids['relation_id']}"),
        ]
        for response in attempts:
            assert response.status_code == 404, (response.request.method, response.request.url, response.text)
            assert MARK not in response.text
        a.post("/memories/consolidate", json={})
        a.post("/relations", json={"source": f"{MARK}-person", "target": f"{MARK}-project", "relation_type": "works_at"})
        after = {p: b.get(p).json() for p in before}
        for path in before:
            for volatile in ("access_count", "last_accessed_at", "effective_confidence", "confidence"):
                before[path].pop(volatile, None)
                after[path].pop(volatile, None)
        assert after == before
        assert b.get("/relations").json()["total"] == before["/relations"]["total"]


def test_agent_a_hears_none_of_agent_bs_events(server: HttpServer) -> None:
    with listening(server.url, KEY_A) as a_events, client(server.url, KEY_B) as b, client(server.url, KEY_A) as a:
        seed_b(b)
        b.post("/memories/consolidate", json={})
        own = a.post("/memories", json={"content": "A's marker " + secrets.token_hex(4)}).json()["memory"]
        received = []
        while True:  # streams are ordered: B's events, had they come, would precede A's own
            event = a_events.next()
            received.append(event)
            if event.data.get("id") == own["id"]:
                break
        assert [e.type for e in received] == ["memory_created"], received
        assert all(MARK not in str(e.data) for e in a_events.nothing_more())


def test_agent_a_exports_and_imports_only_its_own_memories(server: HttpServer) -> None:
    """GET /api/export holds none of B's records; POST /api/import of B's export is refused whole
    (403), and an export doctored to claim B's ids for A restores nothing over them."""
    with client(server.url, KEY_B) as b, client(server.url, KEY_A) as a:
        ids = seed_b(b)
        b_before = b.get("/export").content
        for fmt in ("ndjson", "markdown", "csv"):
            mine = a.get("/export", params={"format": fmt})
            # (A's own entities may carry the mark: an earlier test has A name them so)
            assert mine.status_code == 200 and [v for v in ids.values() if v in mine.text] == [], mine.text
            assert f"secret {MARK}" not in mine.text and f"Another {MARK}" not in mine.text
        refused = a.post("/import", content=b_before, headers={"Content-Type": "application/x-ndjson"})
        assert refused.status_code == 403 and f"secret {MARK}" not in refused.text
        lines = b_before.decode().splitlines()
        doctored = [lines[0], *(x.replace('"agent-b"', '"agent-a"').replace(MARK, "planted") for x in lines[1:])]
        taken = a.post("/import", content="\n".join(doctored).encode(), headers={"Content-Type": "application/x-ndjson"})
        assert taken.status_code == 200, taken.text
        outcome = taken.json()
        assert outcome["restored"].get("fragment", 0) == 0 and outcome["restored"].get("entity", 0) == 0
        assert {r["reason"] for r in outcome["skipped_records"] if r["kind"] == "fragment"} == {"the id is taken in another namespace"}
        assert f"secret {MARK}" not in taken.text
        assert b.get("/export").content.splitlines()[1:] == b_before.splitlines()[1:]  # B's records unchanged
        assert "planted" not in a.get("/export").text
