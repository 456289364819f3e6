"""Seed 003's memories with expiry and linkages, on SQLite and PostgreSQL: a 003 memory is a
fragment (000's recall finds it; instruction is a procedure shown as an instruction), expiry,
linkages (a memory target must be visible; a memory linkage is also a `related` link; the rows
go with either memory on every delete path; export and restore keep them), the linkage graph and
graph_explore's linkages, the soft delete, isolation across agents and workspaces, read-only
refusal; then the tools through the official MCP client and the /v1/memories routes over HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client  # its defining module (__all__)
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server
from pydantic import ValidationError
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, OPERATOR, problem_of, rest_env

from memento.app import App
from memento.auth.principal import workspace_namespace
from memento.errors import Forbidden, InvalidArgument, NotFound
from memento.models import (
    AgentScope,
    AmendInput,
    CallContext,
    ForgetInput,
    ForgetMode,
    FragmentType,
    GraphExploreInput,
    LinkInput,
    MemoryStatsInput,
    RecallInput,
    RecordInput,
    RelationType,
    RememberInput,
    RestoreInput,
)
from memento.protocol_face import linkages as linkages_module
from memento.protocol_face.memory_models import MemoryGraphInput, RecallMemoriesInput, StoreMemoryInput, UpdateMemoryInput
from memento.service import MemoryService
from memento.storage.protocol import SearchFilter
from memento.storage.records import RecordQuery

pytestmark = pytest.mark.backends("sqlite", "postgres")

ALICE = CallContext(agent_id="alice")
BOB = CallContext(agent_id="bob")
SYSTEM = AgentScope("system")
LATER = (datetime.now(UTC) + timedelta(days=365)).date().isoformat()


def store(service: MemoryService, content: str, ctx: CallContext = ALICE, **fields: Any) -> str:
    stored = service.protocol.memories.store(StoreMemoryInput.model_validate({"content": content, **fields}), ctx)
    assert stored.created, stored
    return stored.id


def recall(service: MemoryService, query: str, ctx: CallContext = ALICE, **fields: Any) -> list[dict[str, Any]]:
    found = service.protocol.memories.recall(RecallMemoriesInput.model_validate({"query": query, **fields}), ctx)
    return [m.dump() for m in found.memories]


def linkage_rows(app: App) -> list[dict[str, object]]:
    return app.store.export_rows("memory_linkages", 0, 1000)


# ---------------------------------------------------------------- memories are fragments


def test_a_memory_is_a_fragment_of_the_callers_namespace_and_000s_recall_finds_it(service: MemoryService) -> None:
    fid = store(service, "Skip aurora checks until the Kp index exceeds 4", type="instruction", tags=["Aurora", "sky"])
    fragment = service.store.get_many(AgentScope("alice"), [fid])[0]
    assert (fragment.agent_id, fragment.type, fragment.tags, fragment.topic) == (
        "alice",
        FragmentType.PROCEDURE,
        ["aurora", "sky"],
        "aurora",
    )
    plain = store(service, "The observatory dome opens at dusk")  # type defaults to observation
    assert service.store.get_many(AgentScope("alice"), [plain])[0].type is FragmentType.OBSERVATION
    found = service.recall(RecallInput(text="aurora Kp index", includeLinks=False), ALICE).fragments
    assert found[0].id == fid  # the face's memories are 000's
    shown = service.protocol.memories.get(fid, ALICE).dump()
    assert shown["type"] == "instruction" and shown["tags"] == ["aurora", "sky"] and shown["expires_at"] is None
    assert shown["created_at"].endswith("Z") and shown["linkages"] == []


def test_recall_ranks_with_000s_engine_filters_by_type_and_any_tag_and_returns_the_003_shape(service: MemoryService) -> None:
    fact = store(service, "The staging database listens on port 5433", type="fact", tags=["db", "staging"])
    rule = store(service, "Run the staging migrations before every deploy", type="instruction", tags=["deploy"])
    lunch = store(service, "Lunch is at noon on Fridays", type="observation", tags=["office"])
    found = recall(service, "staging")
    assert [m["id"] for m in found][:2] and {m["id"] for m in found} >= {fact, rule}
    assert set(found[0]) == {"id", "content", "type", "tags", "created_at", "expires_at", "linkages", "score"}
    assert all(isinstance(m["score"], float) for m in found) and found == sorted(found, key=lambda m: -m["score"])
    assert [m["id"] for m in recall(service, "staging", type="instruction")] == [rule]
    assert {m["id"] for m in recall(service, "staging", tags=["office", "deploy"])} <= {rule, lunch}  # any of the tags
    assert rule in {m["id"] for m in recall(service, "staging", tags=["office", "deploy"])}
    assert len(recall(service, "staging", limit=1)) == 1
    hits = service.protocol.memories.search("which port does staging use", ALICE, 5)  # the context call's
    assert hits[0].id == fact and hits[0].score is not None


def test_the_face_never_reaches_the_shared_pool_or_another_namespace(service: MemoryService) -> None:
    service.remember(RememberInput(content="pool memory about the staging port", topic="ops", type=FragmentType.FACT), CallContext())
    bobs = store(service, "bob's staging port is 6000", BOB)
    mine = store(service, "alice's staging port is 5433")
    assert [m["id"] for m in recall(service, "staging port")] == [mine]
    for call in (
        lambda: service.protocol.memories.get(bobs, ALICE),
        lambda: service.protocol.memories.delete(bobs, ALICE),
        lambda: service.protocol.memories.graph(MemoryGraphInput(id=bobs), ALICE),
        lambda: service.protocol.memories.update(bobs, UpdateMemoryInput(tags=["x"]), ALICE),
    ):
        with pytest.raises(NotFound):
            call()
    with pytest.raises(NotFound, match="linkages: memory"):  # nor link to it
        store(service, "alice links bob", linkages=[{"type": "memory", "id": bobs}])
    assert service.protocol.memories.get(bobs, BOB).content == "bob's staging port is 6000"


def test_workspaces_of_one_key_are_separate_namespaces(service: MemoryService) -> None:
    one = CallContext(agent_id=workspace_namespace("alice", "alpha"), workspace="alpha")
    two = CallContext(agent_id=workspace_namespace("alice", "beta"), workspace="beta")
    first = store(service, "the alpha workspace deploys on mondays", one)
    assert [m["id"] for m in recall(service, "deploys mondays", one)] == [first]
    assert recall(service, "deploys mondays", two) == [] and recall(service, "deploys mondays", ALICE) == []
    with pytest.raises(NotFound):
        service.protocol.memories.get(first, two)


def test_read_only_credentials_are_refused_and_nothing_changes(service: MemoryService) -> None:
    fid = store(service, "a memory to keep")
    reader = CallContext(agent_id="alice", read_only=True)
    for call in (
        lambda: service.protocol.memories.store(StoreMemoryInput(content="no"), reader),
        lambda: service.protocol.memories.delete(fid, reader),
        lambda: service.protocol.memories.update(fid, UpdateMemoryInput(tags=["x"]), reader),
    ):
        with pytest.raises(Forbidden):
            call()
    assert [m["id"] for m in recall(service, "memory to keep", reader)] == [fid]  # reading is allowed
    assert service.protocol.memories.get(fid, ALICE).tags == []


# ---------------------------------------------------------------- expiry


def test_expires_takes_a_date_or_a_time_and_refuses_the_past(service: MemoryService) -> None:
    dated = store(service, "the comet is visible this season", expires=LATER)
    assert service.protocol.memories.get(dated, ALICE).expires_at == f"{LATER}T00:00:00Z"
    timed = store(service, "the eclipse is at noon", expires="2099-06-01T12:30:00+02:00")
    assert service.protocol.memories.get(timed, ALICE).expires_at == "2099-06-01T10:30:00Z"
    before = service.memory_stats(MemoryStatsInput(), ALICE).total
    for past in ("2020-01-01", "2001-01-01T00:00:00Z"):
        with pytest.raises(InvalidArgument, match="not in the future; nothing stored"):
            store(service, "an old sighting", expires=past)
    with pytest.raises(ValidationError, match="ISO 8601 date or date-time"):
        StoreMemoryInput(content="x", expires="next tuesday")
    assert service.memory_stats(MemoryStatsInput(), ALICE).total == before


def test_an_expired_memory_stops_appearing_in_recall(service: MemoryService) -> None:
    fid = store(service, "the meteor shower peaks tonight", expires=LATER)
    assert [m["id"] for m in recall(service, "meteor shower")] == [fid]
    soon = datetime.now(UTC) + timedelta(milliseconds=1)
    service.amend(AmendInput(id=fid, record=RecordInput(expiresAt=soon)), ALICE)  # expires (a time just past by now)
    assert recall(service, "meteor shower") == []
    assert service.protocol.memories.listing(None, [], None, 10, ALICE).memories == []
    with pytest.raises(NotFound):
        service.protocol.memories.get(fid, ALICE)


# ---------------------------------------------------------------- linkages


def test_linkages_are_stored_shown_and_a_memory_linkage_is_a_related_link(service: MemoryService) -> None:
    source = store(service, "Navier-Stokes smoothness is a millennium problem", type="fact", tags=["math"])
    fid = store(
        service,
        "Read the Clay statement before the seminar",
        type="instruction",
        linkages=[
            {"type": "memory", "id": source, "label": "supports"},
            {"type": "file", "path": "vault/reflections/day-15.md", "label": "source"},
            {"type": "item", "id": "item-abc123", "label": "tracks"},
            {"type": "memory", "id": source, "label": "supports"},  # given twice: kept once
        ],
    )
    shown = service.protocol.memories.get(fid, ALICE).dump()["linkages"]
    assert shown == [
        {"type": "memory", "id": source, "label": "supports"},
        {"type": "file", "path": "vault/reflections/day-15.md", "label": "source"},
        {"type": "item", "id": "item-abc123", "label": "tracks"},
    ]
    links = [
        (link.from_id, link.to_id, link.relation_type)
        for link, _ in service.store.neighbours(AgentScope("alice"), [fid], tuple(RelationType), 10)
    ]
    assert links == [(fid, source, RelationType.RELATED)]
    found = service.recall(RecallInput(text="Clay statement seminar", limit=1), ALICE).fragments  # 000 follows it
    assert [(f.id, bool(f.linked)) for f in found] == [(fid, False), (source, True)]


def test_a_linkage_keeps_an_existing_link_of_another_relation(service: MemoryService) -> None:
    error = store(service, "the build failed with a missing header")
    fix = store(service, "installing libfoo-dev fixed the build")
    service.link(LinkInput(fromId=fix, toId=error, relationType=RelationType.RESOLVED_BY), ALICE)
    service.protocol.memories.update(fix, UpdateMemoryInput.model_validate({"linkages": [{"type": "memory", "id": error}]}), ALICE)
    links = {
        (link.from_id, link.to_id): link.relation_type
        for link, _ in service.store.neighbours(AgentScope("alice"), [fix], tuple(RelationType), 10)
    }
    assert links == {(fix, error): RelationType.RESOLVED_BY}


def test_bad_linkages_are_refused_and_nothing_is_stored(service: MemoryService, app: App) -> None:
    known = store(service, "a memory to link to")
    bad_shapes = [
        {"type": "memory"},
        {"type": "item", "path": "x"},
        {"type": "file", "id": "x"},
        {"type": "file", "path": "a.md", "label": "x" * 101},
        {"type": "website", "id": "x"},
    ]
    for linkage in bad_shapes:
        with pytest.raises(ValidationError):
            StoreMemoryInput.model_validate({"content": "x", "linkages": [linkage]})
    count = len(service.store.list_fragments(AgentScope("alice"), SearchFilter(), 100))
    with pytest.raises(NotFound, match="'frag-unknown'"):
        store(service, "links an unknown memory", linkages=[{"type": "file", "path": "a.md"}, {"type": "memory", "id": "frag-unknown"}])
    service.protocol.memories.delete(known, ALICE)
    with pytest.raises(NotFound):  # a soft-deleted memory is not one the caller sees
        store(service, "links a deleted memory", linkages=[{"type": "memory", "id": known}])
    assert len(service.store.list_fragments(AgentScope("alice"), SearchFilter(), 100)) == count - 1 and linkage_rows(app) == []
    other = store(service, "another memory")
    with pytest.raises(InvalidArgument, match="cannot link to itself"):
        service.protocol.memories.update(other, UpdateMemoryInput.model_validate({"linkages": [{"type": "memory", "id": other}]}), ALICE)


def test_linkage_rows_go_with_either_memory_on_every_delete_path(service: MemoryService, app: App) -> None:
    target = store(service, "the target memory of the linkages")
    holder = store(service, "the holder of the linkages", linkages=[{"type": "memory", "id": target}, {"type": "file", "path": "f.md"}])
    assert len(linkage_rows(app)) == 2
    service.protocol.memories.delete(holder, ALICE)  # soft: hidden, kept for a restore
    assert len(linkage_rows(app)) == 2 and service.graph_explore(GraphExploreInput(startId=target), ALICE).linkages is None
    service.restore(RestoreInput(id=holder), ALICE)
    assert len(service.protocol.memories.get(holder, ALICE).linkages) == 2
    receipt = service.forget(ForgetInput(id=target, mode=ForgetMode.HARD), ALICE).receipt  # erasing the target
    assert receipt is not None and receipt.locations["linkages"] == 1
    assert [r["path"] for r in linkage_rows(app)] == ["f.md"]
    service.forget(ForgetInput(id=holder, mode=ForgetMode.HARD), ALICE)  # erasing the holder
    assert linkage_rows(app) == []
    third = store(service, "a third holder", linkages=[{"type": "item", "id": "item-1"}])
    service.consolidator.maintenance.purge_forgotten(SYSTEM, datetime.now(UTC) + timedelta(days=1))  # nothing forgotten yet
    assert len(linkage_rows(app)) == 1
    service.forget(ForgetInput(id=third), ALICE)
    service.consolidator.maintenance.purge_forgotten(SYSTEM, datetime.now(UTC) + timedelta(days=1))  # the purge deletes it
    assert linkage_rows(app) == []


def test_export_and_restore_keep_the_linkages(service: MemoryService, app: App) -> None:
    target = store(service, "the exported target")
    holder = store(
        service, "the exported holder", linkages=[{"type": "memory", "id": target, "label": "cites"}, {"type": "item", "id": "i-9"}]
    )
    query = RecordQuery(SearchFilter())
    fragments = app.store.record_page(AgentScope("alice"), "fragments", query, 0, 100)
    linkages = app.store.record_page(AgentScope("alice"), "memory_linkages", query, 0, 100)
    assert [(r["fragment_id"], r["memory_id"], r["item_id"], r["label"]) for r in linkages] == [
        (holder, target, None, "cites"),
        (holder, None, "i-9", None),
    ]
    app.store.delete(AgentScope("alice"), [holder, target])
    assert linkage_rows(app) == []
    records = [("fragments", r) for r in fragments] + [("memory_linkages", r) for r in linkages]
    done = app.store.restore_records(AgentScope("alice"), records)
    assert done.restored == {"fragments": 2, "memory_linkages": 2}
    again = app.store.restore_records(AgentScope("alice"), [("memory_linkages", r) for r in linkages])
    assert again.restored == {} and len(again.skipped) == 2  # a repeat is skipped, never doubled
    assert [x.dump() for x in service.protocol.memories.get(holder, ALICE).linkages] == [
        {"type": "memory", "id": target, "label": "cites"},
        {"type": "item", "id": "i-9"},
    ]
    app.store.delete(AgentScope("alice"), [target])
    orphan = app.store.restore_records(AgentScope("alice"), [("memory_linkages", r) for r in linkages if r["memory_id"]])
    assert orphan.restored == {} and "which this namespace does not hold" in orphan.skipped[0].reason


# ---------------------------------------------------------------- the graph


def test_the_graph_walks_linkages_both_ways_to_the_depth_asked(service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    a = store(service, "memory a: the root", type="fact", tags=["g"])
    b = store(service, "memory b links a", linkages=[{"type": "memory", "id": a, "label": "extends"}])
    c = store(service, "memory c links b", linkages=[{"type": "memory", "id": b}, {"type": "file", "path": "notes/c.md"}])
    d = store(service, "memory d links c", linkages=[{"type": "memory", "id": c}, {"type": "item", "id": "item-d"}])
    one = service.protocol.memories.graph(MemoryGraphInput(id=a, depth=1), ALICE).dump()
    assert {n["id"]: n["depth"] for n in one["nodes"]} == {a: 0, b: 1}
    assert one["nodes"][0] == {"id": a, "kind": "memory", "depth": 0, "content": "memory a: the root", "type": "fact", "tags": ["g"]}
    assert one["edges"] == [{"from": b, "to": a, "label": "extends"}] and one["truncated"] is False
    three = service.protocol.memories.graph(MemoryGraphInput(id=a, depth=3), ALICE).dump()
    assert {n["id"]: (n["kind"], n["depth"]) for n in three["nodes"]} == {
        a: ("memory", 0),
        b: ("memory", 1),
        c: ("memory", 2),
        d: ("memory", 3),
        "file:notes/c.md": ("file", 3),
    }
    assert {(e["from"], e["to"], e["label"]) for e in three["edges"]} == {
        (b, a, "extends"),
        (c, b, "related"),
        (c, "file:notes/c.md", "source"),
        (d, c, "related"),
    }
    from_d = service.protocol.memories.graph(MemoryGraphInput(id=d, depth=1), ALICE).dump()
    assert {n["id"] for n in from_d["nodes"]} == {d, c, "item:item-d"}
    monkeypatch.setattr(linkages_module, "MAX_GRAPH_NODES", 3)
    bounded = service.protocol.memories.graph(MemoryGraphInput(id=a, depth=3), ALICE).dump()
    assert len(bounded["nodes"]) == 3 and bounded["truncated"] is True
    with pytest.raises(ValidationError):
        MemoryGraphInput(id=a, depth=4)


def test_graph_explore_lists_the_linkages_of_the_memories_it_visits(service: MemoryService) -> None:
    cause = service.remember(RememberInput(content="the disk filled up", topic="ops", type=FragmentType.ERROR), ALICE).id
    fix = store(service, "rotate the logs daily", type="instruction", linkages=[{"type": "file", "path": "ops/logrotate.conf"}])
    plain = service.graph_explore(GraphExploreInput(startId=cause), ALICE).dump()
    assert "linkages" not in plain  # a walk without linkages is as before
    service.link(LinkInput(fromId=cause, toId=fix, relationType=RelationType.RESOLVED_BY), ALICE)
    walked = service.graph_explore(GraphExploreInput(startId=cause), ALICE).dump()
    assert [n["id"] for n in walked["nodes"]] == [fix]
    assert walked["linkages"] == [{"from": fix, "type": "file", "path": "ops/logrotate.conf"}]


# ---------------------------------------------------------------- update and delete


def test_update_changes_the_fields_given_keeps_a_version_and_adds_linkages(service: MemoryService) -> None:
    target = store(service, "the target of an update")
    fid = store(service, "the first wording", type="observation", tags=["a"])
    inp = UpdateMemoryInput.model_validate(
        {
            "content": "the second wording",
            "type": "decision",
            "tags": ["b"],
            "expires": LATER,
            "linkages": [{"type": "memory", "id": target}],
        }
    )
    out = service.protocol.memories.update(fid, inp, ALICE).dump()
    assert (out["content"], out["type"], out["tags"], out["expires_at"]) == ("the second wording", "decision", ["b"], f"{LATER}T00:00:00Z")
    assert out["linkages"] == [{"type": "memory", "id": target}]
    assert [v["content"] for v in service.store.versions(AgentScope("alice"), fid)] == ["the first wording"]
    with pytest.raises(InvalidArgument, match="nothing to update"):
        service.protocol.memories.update(fid, UpdateMemoryInput(), ALICE)
    with pytest.raises(NotFound):  # a bad target changes nothing, the other fields included
        service.protocol.memories.update(
            fid, UpdateMemoryInput.model_validate({"content": "a third wording", "linkages": [{"type": "memory", "id": "frag-x"}]}), ALICE
        )
    assert service.protocol.memories.get(fid, ALICE).content == "the second wording"


def test_delete_is_a_soft_forget_restorable_and_unknown_ids_are_not_found(service: MemoryService) -> None:
    fid = store(service, "an obsolete instruction", type="instruction")
    out = service.protocol.memories.delete(fid, ALICE)
    assert (out.deleted, out.mode) == (True, "soft") and out.restorable_until is not None
    assert recall(service, "obsolete instruction") == []
    for missing in (fid, "frag-does-not-exist"):
        with pytest.raises(NotFound):
            service.protocol.memories.delete(missing, ALICE)
    service.restore(RestoreInput(id=fid), ALICE)
    assert [m["type"] for m in recall(service, "obsolete instruction")] == ["instruction"]


def test_storing_the_same_content_again_adds_the_linkages_to_the_stored_memory(service: MemoryService) -> None:
    fid = store(service, "the same memory twice")
    again = service.protocol.memories.store(
        StoreMemoryInput.model_validate({"content": "the same memory twice", "linkages": [{"type": "item", "id": "i-1"}]}), ALICE
    )
    assert (again.created, again.id) == (False, fid) and again.message and "linkages were added" in again.message
    assert [x.dump() for x in again.memory.linkages] == [{"type": "item", "id": "i-1"}]


# ---------------------------------------------------------------- the official MCP client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


TOOL_NAMES = {"memento_remember", "memento_store", "memento_recall", "memento_memory_delete", "memento_memory_graph"}


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_tools_over_stdio(tmp_path: Path, store_env: StoreEnv) -> None:
    env = {**server_env(store_env(tmp_path)), "MEMENTO_TOOLSETS": "protocol", "MEMENTO_WORKSPACE": "stars"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) >= TOOL_NAMES
        assert tools["memento_store"].input_schema == tools["memento_remember"].input_schema
        first = data(
            await client.call_tool(
                "memento_store", {"content": "Kp above 4 means aurora is visible here", "type": "fact", "tags": ["aurora"]}
            )
        )
        assert first["created"] is True and first["memory"]["type"] == "fact"
        second = data(
            await client.call_tool(
                "memento_remember",
                {
                    "content": "Check the aurora forecast at 21:00",
                    "type": "instruction",
                    "expires": LATER,
                    "linkages": [{"type": "memory", "id": first["id"], "label": "because"}, {"type": "file", "path": "sky/plan.md"}],
                },
            )
        )
        found = data(await client.call_tool("memento_recall", {"query": "aurora", "type": "instruction"}))
        assert [m["id"] for m in found["memories"]] == [second["id"]]
        assert found["memories"][0]["linkages"][0] == {"type": "memory", "id": first["id"], "label": "because"}
        graph = data(await client.call_tool("memento_memory_graph", {"id": first["id"], "depth": 2}))
        assert {n["id"] for n in graph["nodes"]} == {first["id"], second["id"], "file:sky/plan.md"}
        deleted = data(await client.call_tool("memento_memory_delete", {"id": second["id"]}))
        assert (deleted["deleted"], deleted["mode"]) == (True, "soft")
        code, message, _ = error_of(await client.call_tool("memento_memory_delete", {"id": second["id"]}))
        assert code == "not_found" and second["id"] in message
        for name, bad in (
            ("memento_store", {"content": "x", "type": "rumour"}),
            ("memento_store", {"content": "x", "linkages": [{"type": "file"}]}),
            ("memento_recall", {"query": "x", "limit": 0}),
            ("memento_memory_graph", {"id": first["id"], "depth": 9}),
        ):
            code, message, _ = error_of(await client.call_tool(name, bad))
            assert code == "invalid_argument" and message.startswith(f"invalid arguments for {name}"), message
        code, _, _ = error_of(await client.call_tool("memento_store", {"content": "x", "expires": "2001-01-01"}))
        assert code == "invalid_argument"
        assert [m["id"] for m in data(await client.call_tool("memento_recall", {"query": "aurora"}))["memories"]] == [first["id"]]


# ---------------------------------------------------------------- /v1/memories over HTTP


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("protocol-memories")
    env = {**server_env(module_store_env(folder)), **rest_env(), "MEMENTO_TOOLSETS": "protocol"}
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


def v1(server: HttpServer, key: str, workspace: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}", **({"X-Memento-Workspace": workspace} if workspace else {})}
    return httpx.Client(base_url=server.url + "/v1", headers=headers, timeout=TIMEOUT_S)


@pytest.mark.slow
def test_the_memory_routes_over_http(server: HttpServer) -> None:
    with v1(server, KEY_A, "routes") as http:
        created = http.post("/memories", json={"content": "The staging DB listens on 5433", "type": "fact", "tags": ["db"]})
        assert created.status_code == 201, created.text
        fact = created.json()["id"]
        again = http.post("/memories", json={"content": "The staging DB listens on 5433"})
        assert again.status_code == 200 and again.json()["created"] is False
        rule = http.post(
            "/memories",
            json={"content": "Migrate staging before deploys", "type": "instruction", "linkages": [{"type": "memory", "id": fact}]},
        ).json()["id"]
        ranked = http.get("/memories", params={"query": "staging", "type": "instruction"}).json()
        assert [m["id"] for m in ranked["memories"]] == [rule] and ranked["memories"][0]["score"] > 0
        assert [m["id"] for m in http.get("/memories/recall", params={"query": "staging", "tags": "db,other"}).json()["memories"]] == [fact]
        listed = http.get("/memories").json()
        assert [m["id"] for m in listed["memories"]] == [rule, fact]  # newest first
        assert http.get(f"/memories/{fact}").json()["content"] == "The staging DB listens on 5433"
        updated = http.put(f"/memories/{fact}", json={"tags": ["db", "staging"], "linkages": [{"type": "item", "id": "item-7"}]})
        assert updated.status_code == 200 and updated.json()["linkages"] == [{"type": "item", "id": "item-7"}]
        graph = http.get(f"/memories/{fact}/graph", params={"depth": 1}).json()
        assert {n["id"] for n in graph["nodes"]} == {fact, rule, "item:item-7"}
        problem_of(http.get(f"/memories/{fact}/graph", params={"depth": 4}), 422)
        problem_of(http.post("/memories", json={"content": "x", "linkages": [{"type": "memory", "id": "frag-nope"}]}), 404)
        problem_of(http.post("/memories", json={"content": "x", "expires": "2001-01-01"}), 400)
        problem_of(http.post("/memories", json={"content": "x", "colour": "red"}), 422)
        problem_of(http.put(f"/memories/{fact}", json={}), 400)
        assert http.delete(f"/memories/{rule}").json()["mode"] == "soft"
        problem_of(http.get(f"/memories/{rule}"), 404)
        assert [m["id"] for m in http.get("/memories").json()["memories"]] == [fact]
    with v1(server, KEY_B, "routes") as other:  # another agent's workspace of the same name
        problem_of(other.get(f"/memories/{fact}"), 404)
        problem_of(other.delete(f"/memories/{fact}"), 404)
        assert other.get("/memories", params={"query": "staging"}).json()["memories"] == []
    with v1(server, KEY_A, "elsewhere") as elsewhere:  # another workspace of the same agent
        problem_of(elsewhere.get(f"/memories/{fact}"), 404)
    with v1(server, KEY_A_READ, "routes") as reader:
        assert [m["id"] for m in reader.get("/memories").json()["memories"]] == [fact]
        problem_of(reader.post("/memories", json={"content": "refused"}), 403)
        problem_of(reader.delete(f"/memories/{fact}"), 403)
    with v1(server, OPERATOR) as operator:
        assert operator.get("/openapi.json").json()["paths"].keys() >= {"/memories", "/memories/{memory_id}/graph"}
    assert json.loads(json.dumps(graph))  # plain JSON


@asynccontextmanager
async def mcp_as(server: HttpServer, key: str) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with Client(streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S) as client:
            yield client


@pytest.mark.anyio
@pytest.mark.slow
async def test_over_mcp_an_agent_key_neither_sees_nor_changes_another_agents_memories(server: HttpServer) -> None:
    async with mcp_as(server, KEY_B) as b:
        secret = data(await b.call_tool("memento_store", {"content": "Bob's quokka vault code is 7781", "tags": ["quokka"]}))["id"]
        before = data(await b.call_tool("memento_memory_graph", {"id": secret}))
    async with mcp_as(server, KEY_A) as a:
        assert data(await a.call_tool("memento_recall", {"query": "quokka vault code"}))["memories"] == []
        assert data(await a.call_tool("memento_recall", {"query": "vault", "tags": ["quokka"]}))["memories"] == []
        for name, args in (
            ("memento_memory_delete", {"id": secret}),
            ("memento_memory_graph", {"id": secret}),
            ("memento_store", {"content": "A links B", "linkages": [{"type": "memory", "id": secret}]}),
        ):
            code, message, _ = error_of(await a.call_tool(name, args))
            assert code == "not_found" and "vault code" not in message and "is 7781" not in message
        assert data(await a.call_tool("memento_recall", {"query": "A links B"}))["memories"] == []  # nothing stored
    async with mcp_as(server, KEY_A_READ) as reader:
        for name, args in (("memento_store", {"content": "refused"}), ("memento_memory_delete", {"id": secret})):
            code, _, _ = error_of(await reader.call_tool(name, args))
            assert code == "forbidden"
    async with mcp_as(server, KEY_B) as b:
        assert data(await b.call_tool("memento_memory_graph", {"id": secret})) == before
        assert [m["id"] for m in data(await b.call_tool("memento_recall", {"query": "quokka vault code"}))["memories"]] == [secret]
