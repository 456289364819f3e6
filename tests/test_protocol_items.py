"""Seed 003's working memory on SQLite and PostgreSQL: structured items (create, partial update,
delete, list with its filters and order, the context call's open items), the legacy markdown
sections (the five defaults, replacement, new sections, bad names), the health report; then the
same through the official MCP client (the `protocol` toolset) and over HTTP (/v1), with another
agent's items as unknown as missing ones and read-only keys refused every change.

The service-level tests come first: they empty the database per test, which a module's server
(started on first use by the tests after them) must not see."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Clock, StoreEnv
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client  # its defining module (__all__)
from mcp_helpers import TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server
from pydantic import ValidationError
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, OPERATOR, problem_of, rest_env

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Forbidden, InvalidArgument, NotFound
from memento.exchange.export import Exporter
from memento.exchange.restore import check, restore
from memento.models import AgentScope, CallContext, RememberInput
from memento.protocol_face.items import CONTEXT_ITEMS
from memento.protocol_face.sections import DEFAULT_SECTIONS, MAX_SECTIONS
from memento.protocol_face.workmem_models import ItemCreateInput, ItemFields, ItemListInput
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter
from memento.storage.records import RecordQuery

pytestmark = pytest.mark.backends("sqlite", "postgres")

A = CallContext(agent_id="agent-a")
B = CallContext(agent_id="agent-b")
A_READ = CallContext(agent_id="agent-a", read_only=True)
FIVE = list(DEFAULT_SECTIONS)
PROTOCOL_ITEM_TOOLS = {
    "memento_init",
    "memento_health",
    "memento_read",
    "memento_update",
    "memento_item_create",
    "memento_item_update",
    "memento_item_delete",
    "memento_item_list",
}


def create(service: MemoryService, ctx: CallContext = A, **fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"category": "active_work", "title": "a task"} | fields
    return service.protocol.items.create(ItemCreateInput.model_validate(values), ctx).dump()


def listing(service: MemoryService, ctx: CallContext = A, **filters: Any) -> list[str]:
    return [i.title for i in service.protocol.items.listing(ItemListInput.model_validate(filters), ctx).items]


# ---------------------------------------------------------------- items (service level)


def test_an_item_is_created_changed_partially_and_deleted(service: MemoryService) -> None:
    items = service.protocol.items
    made = create(service, title="Ship v2", content="the release", tags=["Ops", "ops", " Release "], next_action="tag it", priority=4)
    assert made["id"].startswith("item-") and len(made["id"]) == len("item-") + 16
    assert (made["status"], made["priority"], made["tags"], made["next_action"]) == ("active", 4, ["ops", "release"], "tag it")
    assert made["created_at"] == made["updated_at"] and made["created_at"].endswith("Z")
    assert create(service, title="defaults")["priority"] == 0 and create(service, title="defaults 2")["content"] == ""
    changed = items.update(made["id"], ItemFields.model_validate({"status": "paused", "tags": ["later"]}), A).dump()
    assert (changed["status"], changed["tags"], changed["title"], changed["content"], changed["priority"]) == (
        "paused",
        ["later"],
        "Ship v2",
        "the release",
        4,
    )
    assert changed["next_action"] == "tag it"  # not given: kept
    cleared = items.update(made["id"], ItemFields.model_validate({"next_action": None}), A).dump()
    assert cleared["next_action"] is None and cleared["tags"] == ["later"]
    assert items.get(made["id"], A).dump() == cleared
    assert items.delete(made["id"], A).dump() == {"deleted": True, "id": made["id"]}
    with pytest.raises(NotFound):
        items.get(made["id"], A)
    with pytest.raises(NotFound):
        items.delete(made["id"], A)


def test_another_namespaces_item_behaves_exactly_as_an_unknown_one(service: MemoryService) -> None:
    items = service.protocol.items
    secret = create(service, title="agent a's plan")
    messages = []
    for item_id in (secret["id"], "item-0000000000000000"):
        for attempt in (lambda i: items.get(i, B), lambda i: items.update(i, ItemFields(title="taken"), B), lambda i: items.delete(i, B)):
            with pytest.raises(NotFound) as refused:
                attempt(item_id)
            messages.append(refused.value.message.replace(item_id, "<id>"))
    assert len(set(messages)) == 1  # the same answer for a foreign id as for a missing one
    assert listing(service, B) == [] and listing(service, CallContext()) == []  # nor through the shared pool's namespace
    assert items.get(secret["id"], A).dump() == secret  # nothing changed


def test_read_only_credentials_list_items_but_never_change_them(service: MemoryService) -> None:
    items = service.protocol.items
    made = create(service, title="kept")
    assert listing(service, A_READ) == ["kept"] and items.get(made["id"], A_READ).title == "kept"
    for attempt in (
        lambda: create(service, A_READ, title="new"),
        lambda: items.update(made["id"], ItemFields(title="changed"), A_READ),
        lambda: items.delete(made["id"], A_READ),
    ):
        with pytest.raises(Forbidden):
            attempt()
    assert listing(service) == ["kept"] and items.get(made["id"], A).title == "kept"


def test_bad_input_is_refused_and_changes_nothing(service: MemoryService) -> None:
    made = create(service, title="steady", priority=5)
    for bad in ({"priority": 11}, {"priority": -1}, {"priority": 2.5}, {"category": "someday"}, {"title": "  "}, {"extra": 1}):
        with pytest.raises(ValidationError):
            ItemCreateInput.model_validate({"category": "active_work", "title": "x"} | bad)
    with pytest.raises(ValidationError):
        ItemFields.model_validate({"priority": 11})  # out of range is an error, never clamped
    with pytest.raises(ValidationError):
        ItemFields.model_validate({"status": "done"})
    with pytest.raises(InvalidArgument, match="nothing to update"):
        service.protocol.items.update(made["id"], ItemFields(), A)
    with pytest.raises(InvalidArgument, match="at most 20 words"):
        service.protocol.items.listing(ItemListInput(query=" ".join(f"w{i}" for i in range(21))), A)
    assert service.protocol.items.get(made["id"], A).dump() == made


def test_the_list_shows_open_items_by_priority_then_newest_and_filters(service: MemoryService, clock: Clock) -> None:
    create(service, title="low", priority=1)
    clock.now += timedelta(minutes=1)
    create(service, title="newer low", priority=1, category="waiting_for", content="Waiting on the Ärzte team")
    create(service, title="urgent", priority=9, status="paused")
    create(service, title="finished", priority=10, status="completed", next_action="announce the Launch")
    create(service, title="shelved", status="archived")
    assert listing(service) == ["urgent", "newer low", "low"]  # no status: active and paused
    assert listing(service, status="completed") == ["finished"] and listing(service, status="archived") == ["shelved"]
    assert listing(service, category="waiting_for") == ["newer low"]
    assert listing(service, query="ärzte TEAM") == ["newer low"]  # every word, any case, in title, content or next action
    assert listing(service, query="launch", status="completed") == ["finished"]
    assert listing(service, query="team nobody") == []
    page = service.protocol.items.listing(ItemListInput(limit=1, offset=1), A)
    assert [i.title for i in page.items] == ["newer low"] and (page.total, page.limit, page.offset) == (3, 1, 1)


def test_for_context_hands_over_the_open_items_bounded(service: MemoryService, clock: Clock) -> None:
    create(service, title="done", status="completed", priority=10)
    create(service, title="paused", status="paused", priority=2)
    for n in range(CONTEXT_ITEMS + 3):
        clock.now += timedelta(seconds=1)
        create(service, title=f"task {n}", priority=1)
    found = service.protocol.items.for_context(A)
    assert len(found) == CONTEXT_ITEMS
    assert found[0].title == "paused" and found[1].title == f"task {CONTEXT_ITEMS + 2}"  # priority, then newest
    assert all(i.status in ("active", "paused") for i in found) and {i.agent_id for i in found} == {"agent-a"}
    assert service.protocol.items.for_context(B) == []


# ---------------------------------------------------------------- sections (service level)


def test_the_document_has_the_five_default_sections_in_order_then_the_others(service: MemoryService) -> None:
    sections = service.protocol.sections
    first = sections.read(None, A)
    assert [s.section for s in first.sections] == FIVE and all(s.updated_at for s in first.sections)  # created on the first read
    assert first.markdown.startswith("# Working Memory\n\n## Active Work\n\n(empty)\n\n## Standing Decisions")
    assert sections.update("project_notes", "- the api is frozen", A).created is True
    assert sections.update("Session Notes", "met bob", A).section == "session_notes"  # a default's heading names it
    assert sections.update("active_work", "- ship v2", A).created is False
    doc = sections.read(None, A)
    assert [s.section for s in doc.sections] == [*FIVE, "project_notes"]
    assert "## Active Work\n\n- ship v2" in doc.markdown and doc.markdown.endswith("## Project Notes\n\n- the api is frozen")
    one = sections.read("session_notes", A)
    assert one.markdown == "## Session Notes\n\nmet bob" and [s.section for s in one.sections] == ["session_notes"]
    assert sections.section("project_notes", A).content == "- the api is frozen"
    assert sections.update("active_work", "", A).chars == 0 and sections.section("active_work", A).content == ""
    assert [s.section for s in sections.read(None, B).sections] == FIVE  # B's document is its own
    assert "ship v2" not in sections.read(None, B).markdown


def test_a_read_only_first_read_shows_the_defaults_without_writing(service: MemoryService) -> None:
    shown = service.protocol.sections.read(None, A_READ)
    assert [s.section for s in shown.sections] == FIVE and all(s.updated_at is None for s in shown.sections)
    assert service.protocol.workspaces.store.sections(service.protocol.read_scope(A_READ)) == []
    with pytest.raises(Forbidden):
        service.protocol.sections.update("active_work", "x", A_READ)


def test_section_names_are_checked_and_new_ones_bounded(service: MemoryService) -> None:
    sections = service.protocol.sections
    for bad in ("Project Notes", "1st", "notes!", "a" * 65, "items", ""):
        with pytest.raises(InvalidArgument):
            sections.update(bad, "x", A)
    with pytest.raises(NotFound, match="sections: active_work"):
        sections.read("never_written", A)
    with pytest.raises(InvalidArgument):
        sections.read("Not A Name", A)
    for n in range(MAX_SECTIONS - len(FIVE)):
        sections.update(f"extra_{n}", "x", A)
    with pytest.raises(InvalidArgument, match=f"at most {MAX_SECTIONS} sections"):
        sections.update("one_more", "x", A)
    assert sections.update("extra_0", "still writable", A).created is False
    assert len(sections.read(None, A).sections) == MAX_SECTIONS


# ---------------------------------------------------------------- health (service level)


def test_health_counts_the_namespace_and_says_when_it_changed(service: MemoryService, clock: Clock) -> None:
    health = service.protocol.health
    empty = health.report(A)
    assert empty.items.total == 0 and empty.memories.total == 0 and empty.last_update is None
    assert empty.namespace == "agent-a" and "empty" in empty.warnings[0]
    create(service, title="one")
    create(service, title="two", category="skip_list")
    create(service, title="three", status="paused")
    create(service, title="four", status="completed")
    create(service, B, title="bob's")
    service.remember(RememberInput(content="The deploy key rotates monthly", topic="ops", type="fact"), A)
    service.remember(RememberInput(content="A shared note in the pool", topic="ops", type="fact"), CallContext())
    service.protocol.sections.read(None, A)
    service.protocol.sections.update("session_notes", "x", A)
    report = health.report(A)
    assert report.items.active == {"active_work": 1, "standing_decision": 0, "skip_list": 1, "waiting_for": 0, "session_note": 0}
    assert (report.items.paused, report.items.completed, report.items.archived, report.items.total) == (1, 1, 0, 4)
    assert report.sections.count == 5 and report.memories.total == 1  # its own memories, not the pool's
    assert report.last_update == report.sections.last_updated and report.warnings == []
    assert report.parts == {"skip_list": {"active": 0}, "identity": {"snapshots": 0, "latest_at": None}}
    clock.now += timedelta(hours=30)
    assert "30 hours" in health.report(A).warnings[0]
    service.protocol.health_parts.append(lambda scope, ctx: ("skip_list", {"active": 0, "namespace": scope.agent_id}))
    assert health.report(A).parts["skip_list"] == {"active": 0, "namespace": "agent-a"}  # a later part's report wins


# ---------------------------------------------------------------- export and import (docs/export.md)


def test_working_memory_travels_in_a_lossless_export(app: App, tmp_path: Path) -> None:
    service = app.service
    ctx = CallContext(agent_id="agent-a:proj", workspace="proj")
    service.protocol.workspaces.init(ctx)
    made = create(service, ctx, title="Ship the Ärger fix", tags=["ops"], next_action="Tag the release", status="paused", priority=6)
    create(service, ctx, title="Old idea", status="archived")
    service.protocol.sections.update("runbook", "restart the worker", ctx)
    create(service, A, title="agent a's own item")  # another namespace: not in proj's export
    text = "".join(Exporter(app.store, AgentScope("agent-a:proj"), RecordQuery(SearchFilter()), "ndjson").stream())
    kinds = [json.loads(line)["kind"] for line in text.splitlines()[1:-1]]
    assert kinds == ["workspace", *["section"] * 6, "item", "item"]
    assert '"folded"' not in text and "agent a's own item" not in text
    folder = tmp_path / "target"
    target = build_app(Settings(DATABASE_URL=f"sqlite:///{folder / 'm.db'}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(64))
    try:
        lines = text.splitlines()
        check(lines, "export.jsonl")
        report = restore(target.store, AgentScope("system"), lines, "export.jsonl", embed=lambda t: [], total=0)
        assert report.restored == {"workspace": 1, "section": 6, "item": 2} and report.skipped_total == 0
        again = "".join(Exporter(target.store, AgentScope("agent-a:proj"), RecordQuery(SearchFilter()), "ndjson").stream())
        assert again.splitlines()[1:] == text.splitlines()[1:]  # the same records, line for line
        items = target.service.protocol.items
        assert items.get(made["id"], ctx).dump() == made
        assert [i.id for i in items.listing(ItemListInput(query="ärger TAG"), ctx).items] == [made["id"]]  # the search text, derived again
        assert target.service.protocol.sections.section("runbook", ctx).content == "restart the worker"
        assert target.service.protocol.workspaces.init(ctx).already_existed is True
        twice = restore(target.store, AgentScope("system"), lines, "export.jsonl", embed=lambda t: [], total=0)
        assert twice.restored.get("item", 0) == 0 and twice.skipped_total == 9  # merged by id: nothing overwritten
    finally:
        target.close()


# ---------------------------------------------------------------- the tools and /v1 on a real server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("protocol-items")
    env = {**server_env(module_store_env(folder)), **rest_env(), "MEMENTO_TOOLSETS": "protocol"}
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


@asynccontextmanager
async def mcp(server: HttpServer, key: str, workspace: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} | ({"X-Memento-Workspace": workspace} if workspace else {})
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S) as client:
            yield client


def v1(server: HttpServer, key: str, workspace: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} | ({"X-Memento-Workspace": workspace} if workspace else {})
    return httpx.Client(base_url=server.url + "/v1", headers=headers, timeout=TIMEOUT_S)


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_tools_are_listed_with_snake_case_parameters(server: HttpServer) -> None:
    async with mcp(server, OPERATOR) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= PROTOCOL_ITEM_TOOLS and "remember" not in tools  # MEMENTO_TOOLSETS=protocol only
    create_props = tools["memento_item_create"].input_schema
    assert set(create_props["properties"]) == {"category", "title", "content", "status", "priority", "tags", "next_action"}
    assert create_props["required"] == ["category", "title"]
    assert create_props["properties"]["category"]["enum"] == [
        "active_work",
        "standing_decision",
        "skip_list",
        "waiting_for",
        "session_note",
    ]
    assert set(tools["memento_item_update"].input_schema["properties"]) == {*create_props["properties"], "id"}
    assert set(tools["memento_item_list"].input_schema["properties"]) == {"category", "status", "query", "limit", "offset"}
    assert "active and paused" in (tools["memento_item_list"].description or "")
    assert set(tools["memento_update"].input_schema["required"]) == {"section", "content"}
    assert tools["memento_health"].input_schema["properties"] == {} and tools["memento_init"].input_schema["properties"] == {}


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_official_client_drives_every_working_memory_tool(server: HttpServer) -> None:
    async with mcp(server, KEY_A, "tools-flow") as a:
        init = data(await a.call_tool("memento_init", {}))
        assert init["already_existed"] is False and init["workspace"] == {
            "name": "tools-flow",
            "namespace": "agent-a:tools-flow",
            "created_at": init["workspace"]["created_at"],
        }
        assert data(await a.call_tool("memento_init", {}))["already_existed"] is True
        made = data(
            await a.call_tool(
                "memento_item_create",
                {"category": "active_work", "title": "Port the CLI", "tags": ["CLI"], "priority": 7, "next_action": "split main.py"},
            )
        )
        low = data(await a.call_tool("memento_item_create", {"category": "session_note", "title": "Lunch at noon"}))
        assert made["tags"] == ["cli"] and low["priority"] == 0 and low["status"] == "active"
        updated = data(await a.call_tool("memento_item_update", {"id": made["id"], "next_action": "write tests", "status": "paused"}))
        assert (updated["next_action"], updated["status"], updated["priority"]) == ("write tests", "paused", 7)
        listed = data(await a.call_tool("memento_item_list", {}))
        assert [i["id"] for i in listed["items"]] == [made["id"], low["id"]] and listed["total"] == 2
        assert data(await a.call_tool("memento_item_list", {"query": "cli", "status": "paused"}))["total"] == 1
        assert data(await a.call_tool("memento_item_delete", {"id": low["id"]})) == {"deleted": True, "id": low["id"]}
        written = data(await a.call_tool("memento_update", {"section": "standing_decisions", "content": "- tabs, never spaces"}))
        assert (written["section"], written["heading"], written["created"]) == ("standing_decisions", "Standing Decisions", False)
        whole = data(await a.call_tool("memento_read", {}))
        assert [s["section"] for s in whole["sections"]] == FIVE and "## Standing Decisions\n\n- tabs, never spaces" in whole["markdown"]
        assert data(await a.call_tool("memento_read", {"section": "standing_decisions"}))["markdown"].endswith("- tabs, never spaces")
        health = data(await a.call_tool("memento_health", {}))
        assert (health["namespace"], health["workspace"]) == ("agent-a:tools-flow", "tools-flow")
        assert health["items"]["paused"] == 1 and health["items"]["total"] == 1 and health["sections"]["count"] == 5


@pytest.mark.slow
@pytest.mark.anyio
async def test_tool_errors_name_the_problem_and_change_nothing(server: HttpServer) -> None:
    async with mcp(server, KEY_A, "tools-errors") as a, mcp(server, KEY_B, "tools-errors") as b:
        made = data(await a.call_tool("memento_item_create", {"category": "active_work", "title": "kept", "priority": 3}))
        cases: list[tuple[str, dict[str, Any], str, str]] = [
            ("memento_item_create", {"category": "active_work", "title": "x", "priority": 11}, "invalid_argument", "priority"),
            ("memento_item_create", {"category": "someday", "title": "x"}, "invalid_argument", "category"),
            ("memento_item_update", {"id": made["id"], "priority": -1}, "invalid_argument", "priority"),
            ("memento_item_update", {"id": made["id"]}, "invalid_argument", "nothing to update"),
            ("memento_item_update", {"id": "item-missing", "title": "x"}, "not_found", "not found"),
            ("memento_read", {"section": "Not A Name"}, "invalid_argument", "section name"),
            ("memento_update", {"section": "items", "content": "x"}, "invalid_argument", "reserved"),
        ]
        for tool, args, code, words in cases:
            got, message, _ = error_of(await a.call_tool(tool, args))
            assert (got, words in message) == (code, True), (tool, message)
        for tool, args in (("memento_item_update", {"id": made["id"], "title": "taken"}), ("memento_item_delete", {"id": made["id"]})):
            code, _, _ = error_of(await b.call_tool(tool, args))  # b's workspace of the same name is agent-b:tools-errors
            assert code == "not_found"
        assert data(await b.call_tool("memento_item_list", {}))["items"] == []
    async with mcp(server, KEY_A_READ, "tools-errors") as ro:
        assert [i["title"] for i in data(await ro.call_tool("memento_item_list", {}))["items"]] == ["kept"]
        for tool, args in (
            ("memento_item_create", {"category": "active_work", "title": "x"}),
            ("memento_item_update", {"id": made["id"], "title": "x"}),
            ("memento_item_delete", {"id": made["id"]}),
            ("memento_update", {"section": "active_work", "content": "x"}),
            ("memento_init", {}),
        ):
            code, _, _ = error_of(await ro.call_tool(tool, args))
            assert code == "forbidden", tool
    async with mcp(server, KEY_A, "tools-errors") as a:
        assert data(await a.call_tool("memento_item_list", {}))["items"] == [made]


@pytest.mark.slow
def test_rest_items_crud_with_filters(server: HttpServer) -> None:
    with v1(server, KEY_A, "rest-items") as a:
        made = a.post("/working-memory/items", json={"category": "waiting_for", "title": "Vendor reply", "tags": ["Vendor"]})
        assert made.status_code == 201, made.text
        item = made.json()
        assert set(item) == {"id", "category", "title", "content", "status", "priority", "tags", "next_action", "created_at", "updated_at"}
        a.post("/working-memory/items", json={"category": "active_work", "title": "Fix the build", "priority": 5})
        a.post("/working-memory/items", json={"category": "active_work", "title": "Old thing", "status": "archived"})
        assert a.get(f"/working-memory/items/{item['id']}").json() == item
        listed = a.get("/working-memory/items").json()
        assert [i["title"] for i in listed["items"]] == ["Fix the build", "Vendor reply"] and listed["total"] == 2
        assert [i["title"] for i in a.get("/working-memory/items", params={"status": "archived"}).json()["items"]] == ["Old thing"]
        assert [i["title"] for i in a.get("/working-memory/items", params={"q": "vendor"}).json()["items"]] == ["Vendor reply"]
        assert a.get("/working-memory/items", params={"category": "waiting_for", "query": "build"}).json()["total"] == 0
        put = a.put(f"/working-memory/items/{item['id']}", json={"status": "completed", "next_action": "none"})
        assert put.status_code == 200 and (put.json()["status"], put.json()["next_action"], put.json()["tags"]) == (
            "completed",
            "none",
            ["vendor"],
        )
        cleared = a.put(f"/working-memory/items/{item['id']}", json={"next_action": None}).json()
        assert cleared["next_action"] is None and cleared["status"] == "completed"
        problem_of(a.put(f"/working-memory/items/{item['id']}", json={"priority": 42}), 422)
        problem_of(a.put(f"/working-memory/items/{item['id']}", json={}), 400)
        problem_of(a.post("/working-memory/items", json={"category": "active_work"}), 422)
        problem_of(a.get("/working-memory/items", params={"status": "done"}), 422)
        problem_of(a.get("/working-memory/items", params={"limit": 101}), 422)
        assert a.delete(f"/working-memory/items/{item['id']}").json() == {"deleted": True, "id": item["id"]}
        for method in ("GET", "PUT", "DELETE"):
            body = {"title": "x"} if method == "PUT" else None
            assert problem_of(a.request(method, f"/working-memory/items/{item['id']}", json=body), 404)["code"] == "not_found"


@pytest.mark.slow
def test_rest_sections_and_health(server: HttpServer) -> None:
    with v1(server, KEY_A, "rest-sections") as a:
        doc = a.get("/working-memory").json()
        assert [s["section"] for s in doc["sections"]] == FIVE and doc["markdown"].startswith("# Working Memory")
        put = a.put("/working-memory/activity_log", json={"content": "- deployed v2"})
        assert put.status_code == 200 and put.json()["created"] is False and put.json()["chars"] == len("- deployed v2")
        assert a.put("/working-memory/runbook", json={"content": "restart the worker"}).json()["created"] is True
        one = a.get("/working-memory/Activity Log").json()
        assert (one["section"], one["heading"], one["content"]) == ("activity_log", "Activity Log", "- deployed v2")
        assert a.get("/working-memory/runbook").json()["content"] == "restart the worker"
        assert problem_of(a.get("/working-memory/nowhere"), 404)["code"] == "not_found"
        assert problem_of(a.put("/working-memory/Not A Name", json={"content": "x"}), 400)["code"] == "invalid_argument"
        problem_of(a.put("/working-memory/runbook", json={}), 422)
        health = a.get("/health").json()
        assert (health["namespace"], health["workspace"], health["sections"]["count"]) == ("agent-a:rest-sections", "rest-sections", 6)
    documented = httpx.get(server.url + "/v1/openapi.json", timeout=TIMEOUT_S).json()["paths"]
    assert {"/working-memory/items", "/working-memory/items/{item_id}", "/working-memory", "/working-memory/{section}"} <= set(documented)
    assert {"/workspaces", "/health"} <= set(documented)
    with v1(server, KEY_B, "rest-sections") as b:
        assert "deployed" not in b.get("/working-memory").json()["markdown"]
        assert problem_of(b.get("/working-memory/runbook"), 404)["code"] == "not_found"


@pytest.mark.slow
def test_rest_refuses_read_only_keys_and_keeps_agents_apart(server: HttpServer) -> None:
    with v1(server, KEY_A, "rest-iso") as a:
        item = a.post("/working-memory/items", json={"category": "active_work", "title": "secret plan"}).json()
    with v1(server, KEY_A_READ, "rest-iso") as ro:
        assert ro.get(f"/working-memory/items/{item['id']}").json()["title"] == "secret plan"
        for method, path, body in (
            ("POST", "/working-memory/items", {"category": "active_work", "title": "x"}),
            ("PUT", f"/working-memory/items/{item['id']}", {"title": "x"}),
            ("DELETE", f"/working-memory/items/{item['id']}", None),
            ("PUT", "/working-memory/active_work", {"content": "x"}),
        ):
            assert problem_of(ro.request(method, path, json=body), 403)["code"] == "forbidden"
    with v1(server, KEY_B) as b, v1(server, KEY_B, "rest-iso") as b_ws:
        for client in (b, b_ws):
            assert problem_of(client.get(f"/working-memory/items/{item['id']}"), 404)["code"] == "not_found"
            assert problem_of(client.delete(f"/working-memory/items/{item['id']}"), 404)["code"] == "not_found"
            assert client.get("/working-memory/items").json()["items"] == []
    with v1(server, KEY_A, "rest-iso") as a:
        assert a.get(f"/working-memory/items/{item['id']}").json() == item
