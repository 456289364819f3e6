"""Live events (001 §8.5) on `GET /api/events` against real server processes: the §10.6 event on
creation, the other event types, heartbeats, Last-Event-ID resumption, agent isolation, and two
replicas sharing PostgreSQL and Redis — a write through replica A reaches a listener on replica B,
and a stream resumes on B after an event id A gave."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_helpers import HttpServer, server_env, start_http_server
from pg_harness import PostgresServer, postgres_server  # noqa: F401  (fixture)
from redis_harness import RedisServer, redis_server  # noqa: F401  (fixture)
from rest_helpers import KEY_A, KEY_B, OPERATOR, client, listening, rest_env
from test_replicas import replica_env, two_replicas

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("rest-events")
    env = {**server_env(folder / "memento.db"), **rest_env(MEMENTO_SSE_HEARTBEAT_S="0.2")}
    running = start_http_server(env, folder / "server.log")
    try:
        yield running
    finally:
        running.stop()


def unique(text: str) -> str:
    return f"{text} {secrets.token_hex(4)}"


def test_a_memory_created_through_the_api_is_an_event(server: HttpServer) -> None:
    with listening(server.url, KEY_A) as events, client(server.url, KEY_A) as http:
        content = unique("Connected listeners hear about new memories")
        memory = http.post("/memories", json={"content": content, "memory_type": "learning"}).json()["memory"]
        event = events.until("memory_created", lambda d: d["id"] == memory["id"])
        assert event.data == {"id": memory["id"], "content": content, "type": "learning"}
        assert event.id


def test_updates_deletions_entities_and_consolidation_are_events(server: HttpServer) -> None:
    with listening(server.url, KEY_A) as events, client(server.url, KEY_A) as http:
        memory = http.post("/memories", json={"content": unique("A memory that changes")}).json()["memory"]
        http.put(f"/memories/{memory['id']}", json={"tags": ["changed"]})
        updated = events.until("memory_updated", lambda d: d["id"] == memory["id"])
        assert "tags" in str(updated.data["changes"])
        entity = http.post("/entities", json={"name": unique("Eve"), "entity_type": "person"}).json()
        assert events.until("entity_created", lambda d: d["id"] == entity["id"]).data == {
            "id": entity["id"],
            "name": entity["name"],
            "type": "person",
        }
        http.delete(f"/memories/{memory['id']}")
        assert events.until("memory_deleted", lambda d: d["id"] == memory["id"]).data == {"id": memory["id"]}
        report = http.post("/memories/consolidate", json={}).json()
        done = events.until("consolidation_complete")
        assert done.data == {"merged": report["memories_merged"], "deleted": report["memories_deleted"]}


def test_an_idle_stream_gets_heartbeats(server: HttpServer) -> None:
    with listening(server.url, KEY_A) as events:
        assert events.comments.get(timeout=10) == "connected"
        assert events.comments.get(timeout=10) == "heartbeat"


def test_last_event_id_resumes_after_the_event_given(server: HttpServer) -> None:
    with client(server.url, KEY_A) as http:
        with listening(server.url, KEY_A) as events:
            first = http.post("/memories", json={"content": unique("first of three")}).json()["memory"]
            seen = events.until("memory_created", lambda d: d["id"] == first["id"])
        missed = [http.post("/memories", json={"content": unique(f"missed {i}")}).json()["memory"]["id"] for i in range(2)]
        assert seen.id is not None
        with listening(server.url, KEY_A, headers={"Last-Event-ID": seen.id}) as resumed:
            replayed = [resumed.until("memory_created").data["id"] for _ in missed]
            assert replayed == missed


def test_an_agent_never_sees_another_agents_events(server: HttpServer) -> None:
    with listening(server.url, KEY_A) as a_events, listening(server.url, KEY_B) as b_events, listening(server.url, OPERATOR) as admin:
        with client(server.url, KEY_B) as b:
            secret = b.post("/memories", json={"content": unique("B's private note")}).json()["memory"]
            b.post("/entities", json={"name": unique("B-entity"), "entity_type": "concept"})
        assert b_events.until("memory_created").data["id"] == secret["id"]
        assert admin.until("memory_created", lambda d: d["id"] == secret["id"])  # an admin key sees every agent
        with client(server.url, KEY_A) as a:
            mine = a.post("/memories", json={"content": unique("A's own note")}).json()["memory"]
        # Events reach each stream in order: once A's own event is there, B's would have been before it.
        received = []
        while True:
            event = a_events.next()
            received.append(event)
            if event.data.get("id") == mine["id"]:
                break
        assert [e.data.get("id") for e in received] == [mine["id"]], received
        assert all(e.data.get("id") != mine["id"] for e in b_events.nothing_more())


@pytest.fixture
def replicas(tmp_path: Path, postgres_server: PostgresServer, redis_server: RedisServer) -> Iterator[tuple[HttpServer, HttpServer]]:
    with two_replicas({**replica_env(postgres_server, redis_server), **rest_env()}, tmp_path) as pair:
        yield pair


def test_a_write_on_replica_a_reaches_a_listener_on_replica_b(replicas: tuple[HttpServer, HttpServer]) -> None:
    a, b = replicas
    with listening(b.url, KEY_A) as on_b, client(a.url, KEY_A) as through_a:
        content = unique("written through replica A")
        memory = through_a.post("/memories", json={"content": content}).json()["memory"]
        event = on_b.until("memory_created", lambda d: d["id"] == memory["id"])
        assert event.data == {"id": memory["id"], "content": content, "type": "observation"}
    with listening(b.url, KEY_B) as other_agent_on_b, client(a.url, KEY_A) as through_a:
        hidden = through_a.post("/memories", json={"content": unique("not for agent B")}).json()["memory"]
        with client(b.url, KEY_B) as b_writes:
            own = b_writes.post("/memories", json={"content": unique("B's own")}).json()["memory"]
        assert other_agent_on_b.until("memory_created").data["id"] == own["id"]
        assert hidden["id"] not in {e.data.get("id") for e in other_agent_on_b.nothing_more()}
    # Resumption on B after an id replica A gave, for events B's process never streamed (Redis list).
    with client(a.url, KEY_A) as through_a:
        with listening(a.url, KEY_A) as on_a:
            first = through_a.post("/memories", json={"content": unique("resume mark")}).json()["memory"]
            mark = on_a.until("memory_created", lambda d: d["id"] == first["id"])
        later = through_a.post("/memories", json={"content": unique("after the mark")}).json()["memory"]
    assert mark.id is not None
    with listening(b.url, KEY_A, headers={"Last-Event-ID": mark.id}) as resumed_on_b:
        assert resumed_on_b.until("memory_created").data["id"] == later["id"]
