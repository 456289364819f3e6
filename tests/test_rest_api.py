"""The REST API (001 §8) against the real server process, through httpx, on SQLite and on
PostgreSQL + Redis: the §10.6 tests, CRUD of memories, entities and relations, pagination with
totals, the analytics, credentials (401, 400, 403 for a foreign Origin, read-only keys refused on
every write) and RFC 9457 problem documents for every error.

Each test works in its own agent namespace (the operator key narrowed with `agent_id`), so tests
sharing the module's server never see each other's memories.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from conftest import StoreEnv
from mcp_helpers import HttpServer, assert_backend, server_env, start_http_server
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, OPERATOR, client, problem_of, rest_env

pytestmark = [pytest.mark.slow, pytest.mark.backends("sqlite", "postgres+redis")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("rest-api")
    running = start_http_server({**server_env(module_store_env(folder)), **rest_env()}, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


class Agent:
    """The operator key narrowed to a fresh agent namespace: every call carries `agent_id`."""

    def __init__(self, server: HttpServer) -> None:
        self.id = "t-" + secrets.token_hex(4)
        self.http = client(server.url, OPERATOR)

    def _params(self, params: dict[str, Any] | None) -> dict[str, Any]:
        return {"agent_id": self.id, **(params or {})}

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=self._params(params))

    def post(self, path: str, body: Any = None, **params: Any) -> httpx.Response:
        return self.http.post(path, json=body, params=self._params(params))

    def put(self, path: str, body: Any, **params: Any) -> httpx.Response:
        return self.http.put(path, json=body, params=self._params(params))

    def delete(self, path: str, **params: Any) -> httpx.Response:
        return self.http.delete(path, params=self._params(params))

    def store(self, content: str, **fields: Any) -> dict[str, Any]:
        response = self.post("/memories", {"content": content, **fields})
        assert response.status_code == 201, response.text
        memory: dict[str, Any] = response.json()["memory"]
        return memory


@pytest.fixture
def agent(server: HttpServer) -> Iterator[Agent]:
    made = Agent(server)
    yield made
    made.http.close()


# ---------------------------------------------------------------- 001 §10.6


def test_post_memories_answers_201_with_the_memory(agent: Agent) -> None:
    response = agent.post("/memories", {"content": "User prefers TypeScript", "memory_type": "preference", "tags": ["lang"]})
    assert response.status_code == 201, response.text
    body = response.json()
    memory = body["memory"]
    assert body["created"] is True
    assert memory["id"].startswith("frag-") and memory["content"] == "User prefers TypeScript"
    assert (memory["memory_type"], memory["tags"], memory["confidence"]) == ("preference", ["lang"], 1.0)
    assert memory["has_embedding"] is True


def test_get_search_answers_200_with_the_matching_memories(agent: Agent) -> None:
    wanted = agent.store("Run the test suite before every release")
    agent.store("The office plant needs water on Mondays")
    response = agent.get("/memories/search", q="test")
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body["results"], list)
    ids = [hit["memory"]["id"] for hit in body["results"]]
    assert ids and ids[0] == wanted["id"]
    assert body["search_mode"] == "hybrid" and body["total"] >= 1


def test_get_analytics_overview_answers_counts_and_averages(agent: Agent) -> None:
    agent.store("Deploy failed due to a missing env var", memory_type="error")
    agent.store("Chose React over Vue for the frontend", memory_type="decision", confidence=0.5)
    agent.post("/entities", {"name": "React", "entity_type": "technology"})
    response = agent.get("/analytics/overview")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["total_memories"], body["total_entities"], body["total_relations"]) == (2, 1, 0)
    assert body["memories_by_type"]["error"] == 1 and body["memories_by_type"]["decision"] == 1
    assert body["average_confidence"] == pytest.approx(0.75)
    assert body["average_effective_confidence"] == pytest.approx(0.75, abs=0.01)
    assert body["oldest_memory"] <= body["newest_memory"]


# ---------------------------------------------------------------- memories


def test_an_exact_duplicate_answers_200_with_the_existing_memory(agent: Agent) -> None:
    first = agent.store("User prefers dark mode")
    again = agent.post("/memories", {"content": "User prefers dark mode"})
    assert again.status_code == 200, again.text
    assert again.json()["memory"]["id"] == first["id"] and again.json()["duplicate"] == "exact"
    assert agent.get("/memories").json()["total"] == 1


def test_memory_read_update_delete(agent: Agent) -> None:
    memory = agent.store("Alice manages the frontend team", entity_names=["Alice", "Frontend Team"])
    got = agent.get(f"/memories/{memory['id']}")
    assert got.status_code == 200 and sorted(got.json()["entities"]) == ["Alice", "Frontend Team"]
    updated = agent.put(f"/memories/{memory['id']}", {"content": "Alice manages the platform team", "tags": ["org"]})
    assert updated.status_code == 200, updated.text
    assert (updated.json()["content"], updated.json()["tags"]) == ("Alice manages the platform team", ["org"])
    assert agent.get(f"/memories/{memory['id']}").json()["content"] == "Alice manages the platform team"
    deleted = agent.delete(f"/memories/{memory['id']}")
    assert deleted.status_code == 200 and deleted.json()["deleted"] == [memory["id"]]
    problem_of(agent.get(f"/memories/{memory['id']}"), 404)
    problem_of(agent.delete(f"/memories/{memory['id']}"), 404)
    entities = agent.get("/entities").json()  # deleting a memory keeps its entities (001 §10.1)
    assert sorted(e["name"] for e in entities["items"]) == ["Alice", "Frontend Team"]


def test_delete_is_soft_by_default_restorable_and_hard_on_request_with_a_receipt(agent: Agent) -> None:
    memory = agent.store("Bob's phone number is 555-0199 " + secrets.token_hex(4))
    soft = agent.delete(f"/memories/{memory['id']}")
    assert soft.status_code == 200 and soft.json()["mode"] == "soft" and "restorableUntil" in soft.json()
    problem_of(agent.get(f"/memories/{memory['id']}"), 404)
    assert memory["id"] not in [m["id"] for m in agent.get("/memories").json()["items"]]
    restored = agent.post(f"/memories/{memory['id']}/restore")
    assert restored.status_code == 200 and restored.json()["id"] == memory["id"]
    assert agent.get(f"/memories/{memory['id']}").status_code == 200
    problem_of(agent.post(f"/memories/{memory['id']}/restore"), 404)  # not soft-forgotten (any more)
    hard = agent.delete(f"/memories/{memory['id']}", mode="hard")
    assert hard.status_code == 200, hard.text
    receipt = hard.json()["receipt"]
    assert hard.json()["mode"] == "hard" and receipt["memoryIds"] == [memory["id"]] and receipt["locations"]["row"] == 1
    problem_of(agent.post(f"/memories/{memory['id']}/restore"), 404)  # erased: nothing to bring back
    verified = agent.post("/erasures/verify", {"receipt": receipt})
    assert verified.status_code == 200 and verified.json()["verified"] is True, verified.text
    assert agent.post("/erasures/verify", {"receiptId": receipt["receiptId"]}).json()["verified"] is True
    altered = agent.post("/erasures/verify", {"receipt": {**receipt, "memoryIds": []}}).json()
    assert altered["verified"] is False and {c["name"]: c["ok"] for c in altered["checks"]} == {"digest": False, "onFile": False}
    problem_of(agent.post("/erasures/verify", {"receiptId": "erasure-0000000000000000"}), 404)
    problem_of(agent.post("/erasures/verify", {}), 400)
    problem_of(agent.delete(f"/memories/{memory['id']}", mode="sometimes"), 422)


def test_another_agent_can_neither_restore_nor_erase_nor_verify(server: HttpServer) -> None:
    with client(server.url, KEY_A) as a, client(server.url, KEY_B) as b:
        mine = b.post("/memories", json={"content": "B's soft secret " + secrets.token_hex(4)}).json()["memory"]
        assert b.delete(f"/memories/{mine['id']}").status_code == 200
        other = b.post("/memories", json={"content": "B's erased secret " + secrets.token_hex(4)}).json()["memory"]
        receipt = b.delete(f"/memories/{other['id']}", params={"mode": "hard"}).json()["receipt"]
        problem_of(a.post(f"/memories/{mine['id']}/restore"), 404)
        problem_of(a.delete(f"/memories/{mine['id']}", params={"mode": "hard"}), 404)
        problem_of(a.post("/erasures/verify", json={"receiptId": receipt["receiptId"]}), 404)
        assert a.post("/erasures/verify", json={"receipt": receipt}).json()["verified"] is False
        assert b.post("/erasures/verify", json={"receipt": receipt}).json()["verified"] is True
        assert b.post(f"/memories/{mine['id']}/restore").status_code == 200


def test_listing_pages_with_a_total(agent: Agent) -> None:
    for i in range(25):
        agent.store(f"Numbered fact {i:02d} for paging")
    page = agent.get("/memories", limit=10, offset=20).json()
    assert (page["total"], page["limit"], page["offset"], len(page["items"])) == (25, 10, 20, 5)
    first = agent.get("/memories", limit=10, offset=0).json()
    assert len(first["items"]) == 10 and not {m["id"] for m in first["items"]} & {m["id"] for m in page["items"]}
    problem_of(agent.get("/memories", limit=101), 422)


def test_search_filters_and_pagination(agent: Agent) -> None:
    for i in range(12):
        agent.store(
            f"Kubernetes rollout note number {i}",
            memory_type="decision" if i % 2 else "observation",
            tags=["k8s", "ops"] if i < 4 else ["k8s"],
        )
    decisions = agent.get("/memories/search", q="kubernetes rollout", mode="keyword", types="decision", limit=100).json()
    assert decisions["total"] == 6 and {h["memory"]["memory_type"] for h in decisions["results"]} == {"decision"}
    tagged = agent.get("/memories/search", q="kubernetes rollout", mode="keyword", tags=["k8s", "ops"]).json()
    assert tagged["total"] == 4 and all({"k8s", "ops"} <= set(h["memory"]["tags"]) for h in tagged["results"])
    everything = agent.get("/memories/search", q="kubernetes rollout", mode="keyword", limit=100).json()
    page = agent.get("/memories/search", q="kubernetes rollout", mode="keyword", limit=5, offset=5).json()
    assert [h["memory"]["id"] for h in page["results"]] == [h["memory"]["id"] for h in everything["results"]][5:10]
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert agent.get("/memories", after_date=future).json()["total"] == 0
    assert agent.get("/memories", before_date=future).json()["total"] == 12
    problem_of(agent.get("/memories/search", q="x", mode="telepathy"), 422)
    problem_of(agent.get("/memories/search"), 422)


def test_consolidate_dry_run_reports_and_changes_nothing(agent: Agent) -> None:
    agent.store("React hooks let function components hold state")
    agent.store("React hooks let function components keep state")
    response = agent.post("/memories/consolidate", {"dry_run": True})
    assert response.status_code == 200, response.text
    assert response.json()["dry_run"] is True and response.json()["memories_deleted"] == 0
    assert agent.get("/memories").json()["total"] == 2


def test_a_memory_merged_away_answers_404_naming_where_its_text_went(agent: Agent, server: HttpServer) -> None:
    kept = agent.store("The staging database restarts every night at two")
    gone = agent.store("The staging database restarts every night at two sharp")  # close, not a write-time duplicate
    done = agent.post("/memories/consolidate", {"similarity_threshold": 0.85})
    assert done.status_code == 200 and done.json()["memories_merged"] == 1, done.text
    for response in (agent.get(f"/memories/{gone['id']}"), agent.put(f"/memories/{gone['id']}", {"tags": ["x"]})):
        body = problem_of(response, 404)
        assert f"{gone['id']} was merged into {kept['id']}" in body["detail"], body
    with client(server.url, KEY_B) as other:  # another agent is told nothing of it
        body = problem_of(other.get(f"/memories/{gone['id']}"), 404)
        assert kept["id"] not in body["detail"] and "merged" not in body["detail"]


# ---------------------------------------------------------------- entities and relations


def test_entities_relations_graph_and_cascade(agent: Agent) -> None:
    made = agent.post("/entities", {"name": "Alice", "entity_type": "person", "description": "Software engineer"})
    assert made.status_code == 201, made.text
    alice = made.json()
    assert alice["id"].startswith("ent-") and alice["has_embedding"] is True
    again = agent.post("/entities", {"name": "alice", "entity_type": "person"})
    assert again.status_code == 200 and again.json()["id"] == alice["id"]
    for source, target in (("Alice", "Bob"), ("Alice", "Carol"), ("Bob", "Dan")):
        created = agent.post("/relations", {"source": source, "target": target, "relation_type": "collaborates_with", "strength": 0.8})
        assert created.status_code == 201, created.text
    repeat = agent.post("/relations", {"source": "Alice", "target": "Bob", "relation_type": "collaborates_with", "strength": 0.9})
    assert repeat.status_code == 200 and repeat.json()["relations"][0]["strength"] == 0.9
    relations = agent.get("/relations", entity_id=alice["id"]).json()
    assert relations["total"] == 2
    detail = agent.get(f"/entities/{alice['id']}").json()
    assert detail["entity"]["name"] == "Alice" and len(detail["relations"]) == 2
    one = agent.get(f"/entities/{alice['id']}/graph", depth=1).json()
    assert sorted(n["entity"]["name"] for n in one["nodes"]) == ["Alice", "Bob", "Carol"]
    two = agent.get(f"/entities/{alice['id']}/graph", depth=2).json()
    assert sorted(n["entity"]["name"] for n in two["nodes"]) == ["Alice", "Bob", "Carol", "Dan"]
    memory = agent.store("Alice pairs with Bob on Fridays", entity_names=["Alice"])
    linked = agent.get(f"/entities/{alice['id']}/memories").json()
    assert linked["total"] == 1 and linked["items"][0]["id"] == memory["id"]
    renamed = agent.put(f"/entities/{alice['id']}", {"description": "Staff engineer"})
    assert renamed.status_code == 200 and renamed.json()["description"] == "Staff engineer"
    listed = agent.get("/entities", entity_type="unknown").json()
    assert sorted(e["name"] for e in listed["items"]) == ["Bob", "Carol", "Dan"] and listed["total"] == 3
    gone = agent.delete(f"/entities/{alice['id']}")
    assert gone.status_code == 200 and gone.json()["deleted"] == [alice["id"]]
    assert agent.get("/relations").json()["total"] == 1  # Alice's two relations went with her
    assert agent.get(f"/memories/{memory['id']}").status_code == 200  # her memory stays
    problem_of(agent.get(f"/entities/{alice['id']}"), 404)
    rest = agent.get("/relations").json()["items"][0]
    assert agent.delete(f"/relations/{rest['id']}").status_code == 200
    problem_of(agent.delete(f"/relations/{rest['id']}"), 404)


# ---------------------------------------------------------------- analytics


def test_analytics_growth_types_tags_and_confidence(agent: Agent) -> None:
    agent.store("Prefers concise answers", memory_type="preference", tags=["style", "answers"])
    agent.store("Prefers examples in TypeScript", memory_type="preference", tags=["style"])
    agent.store("Deploy sequence: build, test, push", memory_type="procedure", confidence=0.35)
    today = datetime.now(UTC).date()
    for period, start in (("day", today), ("week", today - timedelta(days=today.weekday())), ("month", today.replace(day=1))):
        growth = agent.get("/analytics/growth", period=period).json()
        assert growth["points"] == [{"period_start": start.isoformat(), "count": 3}] and growth["total"] == 3, (period, growth)
    problem_of(agent.get("/analytics/growth", period="year"), 422)
    types = agent.get("/analytics/types").json()
    assert types["total"] == 3 and types["types"][0] == {"memory_type": "preference", "count": 2, "share": pytest.approx(0.6667)}
    tags = agent.get("/analytics/tags").json()
    assert tags["items"] == [{"tag": "style", "count": 2}, {"tag": "answers", "count": 1}] and tags["total"] == 2
    assert agent.get("/analytics/tags", limit=1, offset=1).json()["items"] == [{"tag": "answers", "count": 1}]
    histogram = agent.get("/analytics/confidence").json()
    counts = [b["count"] for b in histogram["buckets"]]
    assert len(counts) == 10 and counts[9] == 2 and counts[3] == 1 and histogram["total"] == 3


# ---------------------------------------------------------------- credentials and errors


def test_no_credential_is_401_with_the_challenge(server: HttpServer) -> None:
    with client(server.url, None) as anonymous:
        body = problem_of(anonymous.get("/memories"), 401)
        assert anonymous.get("/memories").headers["www-authenticate"].startswith("Bearer")
        assert body["code"] == "unauthorized"
    with client(server.url, "not-a-key-" + "x" * 20) as wrong:
        assert 'error="invalid_token"' in wrong.get("/analytics/overview").headers["www-authenticate"]
        problem_of(wrong.post("/memories", json={"content": "x"}), 401)


def test_credentials_in_the_query_string_and_foreign_origins_are_refused(server: HttpServer) -> None:
    with client(server.url, KEY_A) as http:
        problem_of(http.get("/memories", params={"api_key": KEY_A}), 400)
        problem_of(http.get("/memories", headers={"Origin": "https://evil.example"}), 403)
        problem_of(http.get("/memories", headers={"Host": "evil.example"}), 403)


def test_a_read_only_key_reads_and_is_refused_every_write(server: HttpServer) -> None:
    with client(server.url, KEY_A) as writer, client(server.url, KEY_A_READ) as reader:
        memory = writer.post("/memories", json={"content": "Read-only keys only read " + secrets.token_hex(4)}).json()["memory"]
        entity = writer.post("/entities", json={"name": "Ro-" + secrets.token_hex(4), "entity_type": "concept"}).json()
        before = writer.get("/memories").json()["total"]
        assert reader.get(f"/memories/{memory['id']}").status_code == 200
        assert reader.get("/memories/search", params={"q": "read-only"}).status_code == 200
        writes = [
            reader.post("/memories", json={"content": "refused"}),
            reader.post("/memories", content=b"{not json"),  # refused before the body is read
            reader.put(f"/memories/{memory['id']}", json={"content": "changed"}),
            reader.delete(f"/memories/{memory['id']}"),
            reader.delete(f"/memories/{memory['id']}", params={"mode": "hard"}),
            reader.post(f"/memories/{memory['id']}/restore"),
            reader.post("/memories/consolidate", json={}),
            reader.post("/entities", json={"name": "X", "entity_type": "person"}),
            reader.put(f"/entities/{entity['id']}", json={"description": "changed"}),
            reader.delete(f"/entities/{entity['id']}"),
            reader.post("/relations", json={"source": "A", "target": "B", "relation_type": "uses"}),
            reader.delete("/relations/rel-0000000000000000"),
        ]
        for response in writes:
            assert problem_of(response, 403)["code"] == "forbidden", response.request.url
        assert writer.get("/memories").json()["total"] == before
        assert writer.get(f"/memories/{memory['id']}").json()["content"] == memory["content"]
        assert writer.get(f"/entities/{entity['id']}").status_code == 200


def test_an_agent_key_may_not_act_for_another_agent(server: HttpServer) -> None:
    with client(server.url, KEY_A) as http:
        problem_of(http.get("/memories", params={"agent_id": "agent-b"}), 403)
        problem_of(http.post("/memories", json={"content": "into b", "agent_id": "agent-b"}), 403)


def test_every_error_is_a_problem_document(agent: Agent) -> None:
    invalid = problem_of(agent.post("/memories", {"content": "x", "confidence": 7}), 422)
    assert invalid["errors"][0]["loc"][:2] == ["body", "confidence"]
    problem_of(agent.post("/memories", {"content": "x", "surprise": True}), 422)
    problem_of(agent.http.post("/memories", content=b"{not json", headers={"Content-Type": "application/json"}), 422)
    problem_of(agent.get("/memories/frag-0000000000000000"), 404)
    problem_of(agent.put("/memories/frag-0000000000000000", {"content": "x"}), 404)
    problem_of(agent.get("/entities/ent-0000000000000000"), 404)
    problem_of(agent.get("/no-such-route"), 404)
    problem_of(agent.http.patch("/memories"), 405)
    problem_of(agent.put("/entities/ent-0000000000000000", {}), 400)


def test_the_openapi_document_is_served_and_describes_every_route(server: HttpServer) -> None:
    schema = httpx.get(server.url + "/api/openapi.json", timeout=10).json()
    assert schema["openapi"].startswith("3.1")
    paths = set(schema["paths"])
    assert {
        "/memories",
        "/memories/search",
        "/memories/{memory_id}",
        "/memories/consolidate",
        "/memories/{memory_id}/restore",
        "/erasures/verify",
        "/sessions/{session_id}/summarize",
        "/entities",
        "/entities/{entity_id}",
        "/entities/{entity_id}/graph",
        "/entities/{entity_id}/memories",
        "/relations",
        "/relations/{relation_id}",
        "/analytics/overview",
        "/analytics/growth",
        "/analytics/types",
        "/analytics/tags",
        "/analytics/confidence",
        "/events",
    } <= paths
    post = schema["paths"]["/memories"]["post"]
    assert "201" in post["responses"] and "application/problem+json" in post["responses"]["422"]["content"]
