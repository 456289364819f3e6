"""Resources: listing with cursors, templates, reads, subscriptions and change notifications
(on SQLite and on PostgreSQL + Redis)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp_fakes import FakeContext, FakeHub, FakeSession

from memento.app import App
from memento.mcp.jsonrpc import JsonRpcError
from memento.mcp.resources import ResourcesFeature, fragment_uri, topic_uri, working_memory_uri
from memento.models import CallContext, FragmentType, RememberInput, Scope

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres+redis")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def remember(app: App, content: str, topic: str = "db", session: str | None = None, agent: str | None = None) -> str:
    inp = RememberInput(
        content=content, topic=topic, type=FragmentType.FACT, scope=Scope.SESSION if session else Scope.PERMANENT, agentId=agent
    )
    result = app.service.remember(inp, CallContext(session_id=session))
    return str(result.id)


def setup(app: App, *sessions: FakeSession, page_size: int = 50) -> ResourcesFeature:
    feature = ResourcesFeature(page_size=page_size)
    feature.attach(FakeHub(app, sessions))
    return feature


async def call(feature: ResourcesFeature, ctx: FakeContext, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return await feature.handlers()[method](ctx, params)


def payload(result: dict[str, Any]) -> Any:
    (content,) = result["contents"]
    assert content["mimeType"] == "application/json"
    return json.loads(content["text"])


async def test_capabilities_announce_subscribe_and_list_changed(app: App) -> None:
    assert setup(app).capabilities("2024-11-05") == {"resources": {"subscribe": True, "listChanged": True}}


async def test_list_pages_recent_fragments_after_the_fixed_resources(app: App) -> None:
    ids = [remember(app, f"fact number {i} about databases") for i in range(5)]
    session = FakeSession("s1")
    feature = setup(app, session, page_size=2)
    ctx = FakeContext(session)
    first = await call(feature, ctx, "resources/list", {})
    uris = [r["uri"] for r in first["resources"]]
    assert uris[:3] == ["memory://stats", "memory://topics", working_memory_uri("s1")]
    assert uris[3:] == [fragment_uri(ids[4]), fragment_uri(ids[3])]
    seen = uris[3:]
    cursor = first.get("nextCursor")
    while cursor:
        page = await call(feature, ctx, "resources/list", {"cursor": cursor})
        assert all(r["uri"].startswith("memory://fragments/") for r in page["resources"])
        seen += [r["uri"] for r in page["resources"]]
        cursor = page.get("nextCursor")
    assert seen == [fragment_uri(i) for i in reversed(ids)]
    assert all(r["name"] and r["description"] for r in first["resources"])
    assert "title" in first["resources"][0]


async def test_titles_are_left_out_before_2025_06_18(app: App) -> None:
    session = FakeSession("s1", protocol_version="2025-03-26")
    listed = await call(setup(app, session), FakeContext(session), "resources/list", {})
    assert all("title" not in r for r in listed["resources"])


@pytest.mark.parametrize("cursor", ["garbage", 42, "eyJrIjoicHJvbXB0cyIsInAiOjF9"])
async def test_an_unknown_cursor_is_invalid_params(app: App, cursor: Any) -> None:
    session = FakeSession("s1")
    with pytest.raises(JsonRpcError) as err:
        await call(setup(app, session), FakeContext(session), "resources/list", {"cursor": cursor})
    assert err.value.code == -32602


async def test_templates_list_names_the_three_templates(app: App) -> None:
    session = FakeSession("s1")
    listed = await call(setup(app, session), FakeContext(session), "resources/templates/list", {})
    assert [t["uriTemplate"] for t in listed["resourceTemplates"]] == [
        "memory://fragments/{id}",
        "memory://topics/{topic}",
        "memory://sessions/{sessionId}/working-memory",
    ]


async def test_read_a_fragment_a_topic_the_topics_and_stats(app: App) -> None:
    fid = remember(app, "Postgres connection pool size is 20", topic="data base")
    remember(app, "Deploys run on Fridays", topic="ops")
    session = FakeSession("s1")
    feature, ctx = setup(app, session), FakeContext(session)
    fragment = payload(await call(feature, ctx, "resources/read", {"uri": fragment_uri(fid)}))
    assert fragment["id"] == fid and fragment["content"].startswith("Postgres")
    topics = payload(await call(feature, ctx, "resources/read", {"uri": "memory://topics"}))
    assert [(t["topic"], t["count"], t["uri"]) for t in topics["topics"]] == [
        ("data base", 1, "memory://topics/data%20base"),
        ("ops", 1, "memory://topics/ops"),
    ]
    by_topic = payload(await call(feature, ctx, "resources/read", {"uri": topic_uri("data base")}))
    assert [f["id"] for f in by_topic["fragments"]] == [fid]
    stats = payload(await call(feature, ctx, "resources/read", {"uri": "memory://stats"}))
    assert stats["total"] == 2


async def test_working_memory_is_readable_by_its_own_session_only(app: App) -> None:
    wid = remember(app, "scratch note for this session", session="s1")
    mine, other = FakeSession("s1"), FakeSession("s2")
    feature = setup(app, mine, other)
    read = await call(feature, FakeContext(mine), "resources/read", {"uri": working_memory_uri("s1")})
    assert [f["id"] for f in payload(read)["fragments"]] == [wid]
    with pytest.raises(JsonRpcError) as err:
        await call(feature, FakeContext(other), "resources/read", {"uri": working_memory_uri("s1")})
    assert err.value.code == -32002


@pytest.mark.parametrize("uri", ["memory://fragments/nope", "memory://topics/none", "memory://nothing", "file:///etc/passwd"])
async def test_an_unknown_resource_is_32002_with_the_uri(app: App, uri: str) -> None:
    session = FakeSession("s1")
    with pytest.raises(JsonRpcError) as err:
        await call(setup(app, session), FakeContext(session), "resources/read", {"uri": uri})
    assert (err.value.code, err.value.data) == (-32002, {"uri": uri})


async def test_read_without_a_uri_is_invalid_params(app: App) -> None:
    session = FakeSession("s1")
    with pytest.raises(JsonRpcError) as err:
        await call(setup(app, session), FakeContext(session), "resources/read", {})
    assert err.value.code == -32602


async def test_a_write_notifies_subscribers_of_the_touched_uris_and_everyone_of_the_list(app: App) -> None:
    watcher, bystander = FakeSession("s1"), FakeSession("s2")
    feature = setup(app, watcher, bystander)
    ctx = FakeContext(watcher)
    for uri in ("memory://topics", topic_uri("db"), "memory://stats"):
        await call(feature, ctx, "resources/subscribe", {"uri": uri})
    await call(feature, FakeContext(bystander), "resources/subscribe", {"uri": topic_uri("ops")})
    # The service emits from a worker thread, as under a real transport.
    await anyio.to_thread.run_sync(partial(remember, app, "Index the orders table", "db"))
    updated = await watcher.wait_for("notifications/resources/updated", 3)
    assert sorted(p["uri"] for p in updated) == sorted(["memory://stats", "memory://topics", topic_uri("db")])
    await watcher.wait_for("notifications/resources/list_changed")
    await bystander.wait_for("notifications/resources/list_changed")
    assert bystander.of("notifications/resources/updated") == []


async def test_unsubscribe_stops_updates(app: App) -> None:
    session = FakeSession("s1")
    feature = setup(app, session)
    ctx = FakeContext(session)
    await call(feature, ctx, "resources/subscribe", {"uri": "memory://stats"})
    assert await call(feature, ctx, "resources/unsubscribe", {"uri": "memory://stats"}) == {}
    await anyio.to_thread.run_sync(partial(remember, app, "a new fact"))
    await session.wait_for("notifications/resources/list_changed")
    assert session.of("notifications/resources/updated") == []


async def test_subscribing_to_an_unknown_resource_is_32002(app: App) -> None:
    session = FakeSession("s1")
    with pytest.raises(JsonRpcError) as err:
        await call(setup(app, session), FakeContext(session), "resources/subscribe", {"uri": "memory://bogus"})
    assert err.value.code == -32002


async def test_changes_in_another_namespace_are_not_announced(app: App) -> None:
    session = FakeSession("s1")
    feature = setup(app, session)
    await call(feature, FakeContext(session), "resources/subscribe", {"uri": "memory://stats"})
    await anyio.to_thread.run_sync(partial(remember, app, "private to agent bob", "db", None, "bob"))
    await anyio.to_thread.run_sync(partial(remember, app, "shared default fact"))
    await session.wait_for("notifications/resources/list_changed")
    assert len(session.of("notifications/resources/updated")) == 1
    assert len(session.of("notifications/resources/list_changed")) == 1


async def test_an_amend_updates_the_fragment_uri(app: App) -> None:
    from memento.models import AmendInput

    fid = remember(app, "the cache TTL is 60 seconds")
    session = FakeSession("s1")
    feature = setup(app, session)
    await call(feature, FakeContext(session), "resources/subscribe", {"uri": fragment_uri(fid)})
    await anyio.to_thread.run_sync(app.service.amend, AmendInput(id=fid, content="the cache TTL is 90 seconds"), CallContext())
    (note,) = await session.wait_for("notifications/resources/updated")
    assert note == {"uri": fragment_uri(fid)}


async def test_seed_004_memory_view_and_search_preview(app: App) -> None:
    from memento.mcp.memory_resources import MemoryResources, memory_uri

    target = remember(app, "The harbour lighthouse keeper is called Ansel")
    remember(app, "The bakery opens at seven")
    other = remember(app, "Agent b's lighthouse key is under the mat", agent="agent-b")
    session = FakeSession("s1")
    feature = setup(app, session)
    MemoryResources(feature).install()
    ctx = FakeContext(session)
    templates = await call(feature, ctx, "resources/templates/list", {})
    assert "memory://memory/{id}" in [t["uriTemplate"] for t in templates["resourceTemplates"]]
    listed = await call(feature, ctx, "resources/list", {})
    assert "memory://memory/search" in [r["uri"] for r in listed["resources"]]
    view = payload(await call(feature, ctx, "resources/read", {"uri": memory_uri(target)}))
    assert view == payload(await call(feature, ctx, "resources/read", {"uri": fragment_uri(target)}))
    assert view["content"] == "The harbour lighthouse keeper is called Ansel"
    found = payload(await call(feature, ctx, "resources/read", {"uri": "memory://memory/search?query=lighthouse%20keeper&limit=1"}))
    assert found["query"] == "lighthouse keeper" and found["count"] == 1
    (item,) = found["items"]
    assert item["id"] == target and item["snippet"].startswith("The harbour") and item["recallReason"] and item["score"] is not None
    every = payload(await call(feature, ctx, "resources/read", {"uri": "memory://memory/search?query=lighthouse"}))
    assert other not in [i["id"] for i in every["items"]]  # the operator's namespace is the pool, not agent-b's
    bare = payload(await call(feature, ctx, "resources/read", {"uri": "memory://memory/search"}))
    assert (bare["items"], bare["count"]) == ([], 0) and "query=" in bare["hint"]
    for bad in ("memory://memory/search?query=x&limit=0", "memory://memory/search?query=x&colour=red"):
        with pytest.raises(JsonRpcError) as err:
            await call(feature, ctx, "resources/read", {"uri": bad})
        assert err.value.code == -32602
