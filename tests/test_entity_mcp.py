"""Seed 001's ten tools through the official MCP Python client, on a real server with the local
embedding model, on SQLite and on PostgreSQL: the tools/list of the `entity` toolset (§7.2 names,
parameters and defaults), the §10 behaviours that need meaning (near duplicates, semantic search,
clusters of variations), the entity graph, decay of a memory stored long ago (imported through
000's `remember` with its createdAt: the server's clock cannot be moved), and bad input refused
with nothing changed. Each test works in its own agent namespace."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client  # its defining module (__all__)
from mcp_helpers import TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.backends("sqlite", "postgres")]

TEN = [
    "store_memory",
    "recall_memories",
    "create_entities",
    "create_relations",
    "delete_memories",
    "delete_entities",
    "delete_relations",
    "get_entity_graph",
    "consolidate_memories",
    "get_memory_stats",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("entity-mcp")
    env = {**server_env(module_store_env(folder)), "EMBEDDING_PROVIDER": "local", "MEMENTO_TOOLSETS": "memento,entity"}
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


class Agent:
    """A client bound (by argument) to one agent namespace."""

    def __init__(self, client: Client, agent: str) -> None:
        self.client = client
        self.agent = agent

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        return data(await self.client.call_tool(tool, {**args, "agent_id" if tool in TEN else "agentId": self.agent}))

    async def error(self, tool: str, **args: Any) -> tuple[str, str]:
        code, message, _ = error_of(await self.client.call_tool(tool, {**args, "agent_id": self.agent}))
        return code, message


@asynccontextmanager
async def agent(server: HttpServer, name: str) -> AsyncIterator[Agent]:
    async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        yield Agent(client, name)


async def test_the_entity_toolset_lists_the_ten_tools_as_the_seed_writes_them(server: HttpServer) -> None:
    async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(TEN) <= set(tools) and "remember" in tools  # memento,entity: both faces, no name clash
    props = {name: set(tools[name].input_schema["properties"]) for name in TEN}
    assert {"content", "memory_type", "tags", "confidence", "source", "context", "metadata", "entity_names"} <= props["store_memory"]
    assert {"query", "search_mode", "memory_types", "tags", "min_confidence", "limit", "entity_name"} <= props["recall_memories"]
    assert {"memory_ids", "before_date", "min_confidence_below", "memory_types"} <= props["delete_memories"]
    assert {"entity_names", "cascade_memories"} <= props["delete_entities"]
    assert {"entity_name", "depth", "min_strength", "include_memories"} <= props["get_entity_graph"]
    assert {"similarity_threshold", "dry_run"} <= props["consolidate_memories"]
    schema = tools["recall_memories"].input_schema["properties"]
    assert schema["search_mode"]["default"] == "hybrid" and schema["limit"]["default"] == 20 and schema["min_confidence"]["default"] == 0.1
    assert tools["store_memory"].input_schema["properties"]["memory_type"]["default"] == "observation"


async def test_store_and_duplicates_exact_and_near(server: HttpServer) -> None:
    async with agent(server, "mcp-dup") as a:
        first = await a.call("store_memory", content="User prefers dark mode", tags=["ui"], confidence=0.8)
        assert first["created"] is True and first["memory"]["confidence"] == 0.8 and first["memory"]["has_embedding"] is True
        exact = await a.call("store_memory", content="User prefers dark mode")
        assert exact["created"] is False and exact["duplicate"] == "exact" and exact["memory"]["id"] == first["memory"]["id"]
        near = await a.call("store_memory", content="The user likes dark mode", tags=["preferences"])
        assert near["created"] is False and near["duplicate"] == "near" and near["memory"]["id"] == first["memory"]["id"]
        assert set(near["memory"]["tags"]) == {"ui", "preferences"} and near["memory"]["confidence"] > 0.8  # combined, boosted
        other = await a.call("store_memory", content="User prefers light mode")  # a different fact, not a duplicate
        assert other["created"] is True
        other = await a.call("store_memory", content="The standup is at 9:30 every day")
        numbered = await a.call("store_memory", content="The standup is at 10:30 every day")
        assert numbered["created"] is True and numbered["memory"]["id"] != other["memory"]["id"]
        stats = await a.call("get_memory_stats")
        assert stats["total_memories"] == 4


async def test_keyword_semantic_and_hybrid_search(server: HttpServer) -> None:
    async with agent(server, "mcp-search") as a:
        ml = await a.call("store_memory", content="Trained a machine learning model to classify support tickets", memory_type="learning")
        web = await a.call("store_memory", content="The web development team ships the new CSS layout on Friday")
        dogs = await a.call("store_memory", content="canine behavior training tips")
        hits = await a.call("recall_memories", query="machine learning", search_mode="keyword")
        ids = [h["memory"]["id"] for h in hits["results"]]
        assert ml["memory"]["id"] in ids and web["memory"]["id"] not in ids
        hits = await a.call("recall_memories", query="how to train dogs", search_mode="semantic")
        assert hits["results"][0]["memory"]["id"] == dogs["memory"]["id"]
        hits = await a.call("recall_memories", query="machine learning")  # hybrid, the default
        assert hits["search_mode"] == "hybrid" and hits["results"][0]["memory"]["id"] == ml["memory"]["id"]
        assert web["memory"]["id"] not in [h["memory"]["id"] for h in hits["results"]]  # the similarity floor
        hits = await a.call("recall_memories", query="machine learning", memory_types=["observation"])
        assert ml["memory"]["id"] not in [h["memory"]["id"] for h in hits["results"]]


async def test_confidence_decays_from_when_a_memory_was_stored(server: HttpServer) -> None:
    async with agent(server, "mcp-decay") as a:
        now = datetime.now(UTC)
        for days, text in ((30, "ibis month-old note"), (60, "ibis two-month-old note")):
            await a.call("remember", content=text, topic="notes", type="observation", createdAt=(now - timedelta(days=days)).isoformat())
        hits = await a.call("recall_memories", query="ibis note", search_mode="keyword", min_confidence=0.0)
        got = {h["memory"]["content"]: h["memory"]["effective_confidence"] for h in hits["results"]}
        assert got["ibis month-old note"] == pytest.approx(0.5, abs=0.02)
        assert got["ibis two-month-old note"] == pytest.approx(0.25, abs=0.02)
        hits = await a.call("recall_memories", query="ibis note", search_mode="keyword", min_confidence=0.4)
        assert [h["memory"]["content"] for h in hits["results"]] == ["ibis month-old note"]


async def test_entities_relations_graph_and_deletion(server: HttpServer) -> None:
    async with agent(server, "mcp-graph") as a:
        made = await a.call("create_entities", entities=[{"name": "Alice", "entity_type": "person", "description": "Software engineer"}])
        assert made["created"] == 1 and made["entities"][0]["has_embedding"] is True
        rels = [
            {"source": "A", "target": "B", "relation_type": "related_to", "strength": 0.8},
            {"source": "A", "target": "C", "relation_type": "related_to"},
            {"source": "B", "target": "D", "relation_type": "related_to"},
        ]
        out = await a.call("create_relations", relations=rels)
        assert out["created"] == 3 and {e["name"] for e in out["entities_created"]} == {"A", "B", "C", "D"}
        assert all(e["entity_type"] == "unknown" for e in out["entities_created"])
        again = await a.call("create_relations", relations=rels[:1])
        assert again["created"] == 0  # upsert
        g1 = await a.call("get_entity_graph", entity_name="A", depth=1)
        assert {n["entity"]["name"] for n in g1["nodes"]} == {"A", "B", "C"}
        g2 = await a.call("get_entity_graph", entity_name="A", depth=2)
        assert {n["entity"]["name"] for n in g2["nodes"]} == {"A", "B", "C", "D"}
        mem = await a.call("store_memory", content="B owns the deploy scripts", entity_names=["B", "NewPerson"])
        assert {e["name"]: e["created"] for e in mem["entities"]} == {"B": False, "NewPerson": True}
        gone = await a.call("delete_entities", entity_names=["B"])
        assert len(gone["deleted"]) == 1 and gone["deleted_memories"] == []
        g1 = await a.call("get_entity_graph", entity_name="A", depth=2)
        assert {n["entity"]["name"] for n in g1["nodes"]} == {"A", "C"}
        found = await a.call("recall_memories", query="deploy scripts", search_mode="keyword")
        assert [h["memory"]["id"] for h in found["results"]] == [mem["memory"]["id"]]  # the memory is kept
        deleted = await a.call("delete_relations", relations=[{"source": "A", "target": "C", "relation_type": "related_to"}])
        assert len(deleted["deleted"]) == 1


async def test_graph_search_mode(server: HttpServer) -> None:
    async with agent(server, "mcp-graphsearch") as a:
        await a.call("create_relations", relations=[{"source": "Nadia", "target": "Atlas", "relation_type": "manages", "strength": 0.9}])
        m1 = await a.call("store_memory", content="Atlas release train leaves every second Tuesday", entity_names=["Atlas"])
        await a.call("store_memory", content="Unrelated grocery list: eggs and flour")
        hits = await a.call("recall_memories", query="What does Nadia work on?", search_mode="graph")
        assert [h["memory"]["id"] for h in hits["results"]] == [m1["memory"]["id"]]
        assert hits["results"][0]["graph_score"] > 0


async def test_consolidation_of_slight_variations(server: HttpServer) -> None:
    variations = [
        "React hooks let function components use state and effects.",
        "React hooks let function components use state and side effects.",
        "React hooks allow function components to use state and effects.",
        "With React hooks, function components can use state and effects.",
        "React hooks let functional components use state and effects.",
    ]
    async with agent(server, "mcp-consolidate") as a:
        ids = []
        for i, text in enumerate(variations):  # through 000's face, which never merges on write
            out = await a.call("remember", content=text, topic="react", type="observation", tags=[f"v{i}"])
            ids.append(out["id"])
        assert len(set(ids)) == 5
        await a.call("store_memory", content="Kubernetes pods restart when their liveness probe fails")
        dry = await a.call("consolidate_memories", similarity_threshold=0.85, dry_run=True)
        assert dry["clusters_found"] == 1 and dry["memories_deleted"] == 0
        cluster = dry["clusters"][0]
        assert sorted([cluster["primary_id"], *cluster["absorbed_ids"]]) == sorted(ids)
        assert (await a.call("get_memory_stats"))["total_memories"] == 6
        done = await a.call("consolidate_memories", similarity_threshold=0.85)
        assert done["memories_merged"] == 4 and done["memories_deleted"] == 4
        stats = await a.call("get_memory_stats")
        assert stats["total_memories"] == 2
        hits = await a.call("recall_memories", query="React hooks", search_mode="keyword")
        assert len(hits["results"]) == 1 and set(hits["results"][0]["memory"]["tags"]) == {f"v{i}" for i in range(5)}
        # An id merged away is not found, and the error says which memory holds its text now.
        survivor, gone = cluster["primary_id"], cluster["absorbed_ids"][0]
        for tool, args in (("amend", {"id": gone, "importance": 0.9}), ("link", {"fromId": gone, "toId": survivor})):
            code, message, _ = error_of(await a.client.call_tool(tool, {**args, "agentId": a.agent}))
            assert code == "not_found" and f"{gone} was merged into {survivor}" in message, (tool, message)
        code, message = await a.error("delete_memories", memory_ids=[gone])
        assert code == "not_found" and f"merged into {survivor}" in message
    async with agent(server, "mcp-consolidate-other") as other:  # another namespace learns nothing of it
        code, message, _ = error_of(await other.client.call_tool("amend", {"id": gone, "importance": 0.9, "agentId": other.agent}))
        assert code == "not_found" and survivor not in message and "merged" not in message


async def test_bad_input_is_refused_and_changes_nothing(server: HttpServer) -> None:
    async with agent(server, "mcp-bad") as a:
        code, message = await a.error("store_memory", content="   ")
        assert code == "invalid_argument"
        code, message = await a.error("store_memory", content="x", confidence=1.5)
        assert code == "invalid_argument" and "confidence" in message
        code, message = await a.error("delete_memories")
        assert code == "invalid_argument" and "at least one" in message
        code, message = await a.error("recall_memories", query="x", limit=101)
        assert code == "invalid_argument" and "limit" in message
        code, message = await a.error("recall_memories", query="x", search_mode="fuzzy")
        assert code == "invalid_argument"
        code, _ = await a.error("get_entity_graph", entity_name="Nobody")
        assert code == "not_found"
        stats = await a.call("get_memory_stats")
        assert (stats["total_memories"], stats["total_entities"]) == (0, 0)


async def _average_confidence_reaches(a: Agent, expected: float) -> float:
    """get_memory_stats records no access: poll it (bounded) until the buffered access of a search
    has been written (the flush runs within ACCESS_FLUSH_SECONDS)."""
    deadline = anyio.current_time() + 20
    while True:
        got = float((await a.call("get_memory_stats"))["average_confidence"])
        if got == pytest.approx(expected, abs=0.005) or anyio.current_time() > deadline:
            return got
        await anyio.sleep(0.2)


async def test_access_reinforces_confidence_with_a_cap(server: HttpServer) -> None:
    async with agent(server, "mcp-reinforce") as a:
        await a.call("store_memory", content="The staging database listens on port 5433", confidence=0.5)
        hits = await a.call("recall_memories", query="staging database port", search_mode="keyword")
        assert len(hits["results"]) == 1
        assert await _average_confidence_reaches(a, 0.6) == pytest.approx(0.6, abs=0.005)
    async with agent(server, "mcp-reinforce-cap") as a:
        await a.call("store_memory", content="The production database listens on port 5432", confidence=0.95)
        await a.call("recall_memories", query="production database port", search_mode="keyword")
        assert await _average_confidence_reaches(a, 1.0) == pytest.approx(1.0, abs=0.005)


async def test_deleting_a_memory_keeps_its_entities(server: HttpServer) -> None:
    async with agent(server, "mcp-delete") as a:
        m = await a.call("store_memory", content="Grace maintains the billing service", entity_names=["Grace"])
        gone = await a.call("delete_memories", memory_ids=[m["memory"]["id"]])
        assert gone["deleted"] == [m["memory"]["id"]]
        graph = await a.call("get_entity_graph", entity_name="Grace")
        assert [n["entity"]["name"] for n in graph["nodes"]] == ["Grace"] and graph["nodes"][0]["memories"] == []
        code, _ = await a.error("delete_memories", memory_ids=[m["memory"]["id"]])
        assert code == "not_found"


async def test_tag_filter_and_pagination(server: HttpServer) -> None:
    async with agent(server, "mcp-pages") as a:
        both = await a.call("store_memory", content="Pelican frontend uses typescript strict mode", tags=["typescript", "frontend"])
        await a.call("store_memory", content="Pelican backend uses typescript too", tags=["typescript", "backend"])
        hits = await a.call("recall_memories", query="pelican typescript", search_mode="keyword", tags=["typescript", "frontend"])
        assert [h["memory"]["id"] for h in hits["results"]] == [both["memory"]["id"]]
        # Entries of different lengths, so their full-text scores differ: between two reads the
        # first read's access refreshes confidence (001 §4), which reorders exact ties.
        for i in range(50):
            await a.call(
                "remember", content=f"heron log entry about the migration{' with more words' * i}", topic="log", type="observation"
            )
        await a.call("recall_memories", query="heron", search_mode="semantic", limit=1)  # waits for the embedding worker's updates
        everything = await a.call("recall_memories", query="heron migration", search_mode="keyword", limit=100)
        assert everything["total"] == 50
        page = await a.call("recall_memories", query="heron migration", search_mode="keyword", limit=10, offset=20)
        assert [h["memory"]["id"] for h in page["results"]] == [h["memory"]["id"] for h in everything["results"][20:30]]


KEY_A = "entity-isolation-key-agent-a-0123"
KEY_B = "entity-isolation-key-agent-b-0123"
KEY_A_RO = "entity-isolation-key-agent-a-ro-01"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("entity-keys")
    keys = [
        {"name": "a", "key": KEY_A, "agent": "agent-a", "access": "read-write"},
        {"name": "a-ro", "key": KEY_A_RO, "agent": "agent-a", "access": "read-only"},
        {"name": "b", "key": KEY_B, "agent": "agent-b", "access": "read-write"},
    ]
    env = {
        **server_env(module_store_env(folder)),
        "MEMENTO_TOOLSETS": "entity",
        "MEMENTO_KEYS": json.dumps(keys),
        "MEMENTO_ACCESS_KEY": "entity-isolation-operator-key-012",
    }
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


@asynccontextmanager
async def keyed(server: HttpServer, key: str) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with Client(streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S) as client:
            yield client


async def test_one_agent_sees_and_changes_nothing_of_another_through_the_entity_tools(keyed_server: HttpServer) -> None:
    async with keyed(keyed_server, KEY_B) as b:
        stored = data(await b.call_tool("store_memory", {"content": "Osprey vault code is tangerine", "entity_names": ["Osprey"]}))
        made = data(
            await b.call_tool("create_relations", {"relations": [{"source": "Osprey", "target": "Vault", "relation_type": "uses"}]})
        )
        secrets = [stored["memory"]["id"], *(e["id"] for e in made["entities_created"]), made["relations"][0]["id"], "tangerine"]
        before = data(await b.call_tool("get_memory_stats", {}))
    async with keyed(keyed_server, KEY_A) as a:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("recall_memories", {"query": "osprey vault tangerine", "search_mode": mode, "min_confidence": 0.0})
            for mode in ("keyword", "semantic", "hybrid", "graph")
        ]
        calls += [
            ("recall_memories", {"query": "vault", "entity_name": "Osprey"}),
            ("get_entity_graph", {"entity_name": "Osprey"}),
            ("get_memory_stats", {}),
            ("delete_entities", {"entity_names": ["Osprey", "Vault"], "cascade_memories": True}),
            ("delete_relations", {"relations": [{"source": "Osprey", "target": "Vault", "relation_type": "uses"}]}),
            ("delete_memories", {"memory_ids": [stored["memory"]["id"]]}),
            ("delete_memories", {"memory_types": ["observation"]}),
            ("consolidate_memories", {"similarity_threshold": 0.0}),
            ("recall_memories", {"query": "osprey", "agent_id": "agent-b"}),
        ]
        for name, args in calls:
            result = await a.call_tool(name, args)
            text = getattr(result.content[0], "text", "") if result.content else ""
            if result.is_error:  # an error may quote A's own arguments, never B's memory
                assert "tangerine" not in text, (name, text)
            else:
                assert not [s for s in secrets if s in text], (name, text)
            if name == "get_memory_stats":
                assert data(result)["total_memories"] == 0 and data(result)["total_entities"] == 0
    async with keyed(keyed_server, KEY_A_RO) as ro:
        code, _, _ = error_of(await ro.call_tool("store_memory", {"content": "a read-only key writes nothing"}))
        assert code == "forbidden"
        code, _, _ = error_of(await ro.call_tool("create_entities", {"entities": [{"name": "X", "entity_type": "person"}]}))
        assert code == "forbidden"
    async with keyed(keyed_server, KEY_B) as b:
        assert data(await b.call_tool("get_memory_stats", {})) == before
        graph = data(await b.call_tool("get_entity_graph", {"entity_name": "Osprey"}))
        assert {n["entity"]["name"] for n in graph["nodes"]} == {"Osprey", "Vault"}
