"""Seed 003's workspaces: the rule that maps a workspace name to a namespace for a credential
(auth.principal.workspace_namespace), the workspace record and its default sections created by
the first call that names a workspace (once, also when two calls race), memento_init, the
listing, and the whole path over HTTP — the X-Memento-Workspace header on /v1, /api and /mcp, bad
and reserved names, a key bound to A naming B, an MCP session kept to its workspace — and over
stdio with MEMENTO_WORKSPACE. On SQLite and PostgreSQL (row-level security included).

The service-level tests come first: they empty the database per test, which a module's server
(started on first use by the tests after them) must not see."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
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
from pg_harness import APP_ROLE, PostgresServer, connect, postgres_module
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, OPERATOR, problem_of, rest_env

from memento.app import App
from memento.auth.keys import AuthConfigError, stdio_principal
from memento.auth.principal import ANONYMOUS, Principal, workspace_namespace
from memento.errors import Forbidden, InvalidArgument
from memento.models import AgentScope, CallContext
from memento.protocol_face.sections import DEFAULT_SECTIONS
from memento.protocol_face.workmem_models import ItemCreateInput, ItemListInput
from memento.protocol_face.workspaces import owner_of
from memento.service import MemoryService
from memento.settings import Settings

pytestmark = pytest.mark.backends("sqlite", "postgres")

FIVE = list(DEFAULT_SECTIONS)
HEADER = "X-Memento-Workspace"


# ---------------------------------------------------------------- the rule (unit)


@pytest.mark.parametrize(
    ("bound", "name", "namespace"),
    [
        (None, "proj", "proj"),  # an admin credential: the namespace of that name
        (None, "agent-b", "agent-b"),
        ("system", "proj", "proj"),
        ("agent-a", "agent-a", "agent-a"),  # an agent naming itself: its own namespace
        ("agent-a", "proj", "agent-a:proj"),  # any other name: a namespace inside its allowance
        ("agent-a", "agent-b", "agent-a:agent-b"),  # never agent-b's
        ("team:x", "notes", "team:x:notes"),
        ("agent-a", " proj ", "agent-a:proj"),
        ("agent-a", "v1.2_beta@home", "agent-a:v1.2_beta@home"),
        ("default", "default", "default"),
    ],
)
def test_a_workspace_name_opens_a_namespace_inside_the_credentials_allowance(bound: str | None, name: str, namespace: str) -> None:
    assert workspace_namespace(bound, name) == namespace


@pytest.mark.parametrize("name", ["", " ", "a:b", "agent-b:secret", "-x", ".x", "x" * 65, "white space", "café", "a/b", "*"])
@pytest.mark.parametrize("bound", [None, "agent-a"])
def test_a_name_that_is_not_a_workspace_name_is_refused(bound: str | None, name: str) -> None:
    with pytest.raises(InvalidArgument, match="not a workspace name"):
        workspace_namespace(bound, name)


@pytest.mark.parametrize("bound", [None, "agent-a", "default"])
@pytest.mark.parametrize("name", ["admin", "system"])
def test_the_maintenance_names_are_refused_to_everyone(bound: str | None, name: str) -> None:
    with pytest.raises(Forbidden, match="reserved"):
        workspace_namespace(bound, name)


def test_the_shared_pools_credential_opens_no_workspace() -> None:
    with pytest.raises(Forbidden, match="'default' pool"):
        workspace_namespace("default", "proj")


def test_a_principal_in_a_workspace_keeps_its_credential_and_names_it() -> None:
    key = Principal(subject="key:a", agent_id="agent-a", read_only=True)
    inside = key.in_workspace("proj")
    assert (inside.agent_id, inside.workspace, inside.read_only, inside.subject) == ("agent-a:proj", "proj", True, "key:a")
    ctx = inside.call_context("s-1")
    assert (ctx.agent_id, ctx.workspace, ctx.read_only) == ("agent-a:proj", "proj", True)
    assert ANONYMOUS.in_workspace("proj").agent_id == "proj"


def test_stdio_runs_in_memento_workspace() -> None:
    assert stdio_principal(Settings(MEMENTO_WORKSPACE="proj")).agent_id == "proj"
    inside = stdio_principal(Settings(MEMENTO_WORKSPACE="proj", MEMENTO_STDIO_AGENT="agent-a"))
    assert (inside.agent_id, inside.workspace) == ("agent-a:proj", "proj")
    assert stdio_principal(Settings()).workspace is None
    for bad in ("a:b", "admin"):
        with pytest.raises(AuthConfigError, match="MEMENTO_WORKSPACE"):
            stdio_principal(Settings(MEMENTO_WORKSPACE=bad))


@pytest.mark.parametrize(
    ("agent", "workspace", "owner"),
    [
        (None, None, None),
        ("system", None, None),
        ("agent-a", None, "agent-a"),
        ("agent-a:proj", "proj", "agent-a"),
        ("agent-a", "agent-a", "agent-a"),
        ("proj", "proj", "proj"),  # an admin in workspace proj lists proj's
        ("team:x", None, "team:x"),
    ],
)
def test_the_listing_belongs_to_the_credentials_agent(agent: str | None, workspace: str | None, owner: str | None) -> None:
    assert owner_of(CallContext(agent_id=agent, workspace=workspace)) == owner


# ---------------------------------------------------------------- opening, init, listing (service level)


def ws(bound: str | None, name: str, **kw: Any) -> CallContext:
    """The context of a call naming workspace `name` with a credential bound to `bound`."""
    return CallContext(agent_id=workspace_namespace(bound, name), workspace=name, **kw)


def test_the_first_call_naming_a_workspace_creates_it_with_its_sections(service: MemoryService) -> None:
    face = service.protocol
    ctx = ws("agent-a", "proj")
    scope = AgentScope("agent-a:proj")
    assert service.protocol.workspaces.store.workspace_of(scope) is None
    assert face.items.listing(ItemListInput(), ctx).items == []  # any call of the face opens it
    record = service.protocol.workspaces.store.workspace_of(scope)
    assert record is not None and (record.namespace, record.name) == ("agent-a:proj", "proj")
    assert [s.section for s in service.protocol.workspaces.store.sections(scope)] == FIVE
    assert face.workspaces.init(ctx).already_existed is True
    face.sections.update("session_notes", "kept", ctx)
    face.health.report(ctx)
    assert service.protocol.workspaces.store.workspace_of(scope) == record
    assert face.sections.section("session_notes", ctx).content == "kept"  # reopening never resets it


def test_two_first_calls_at_once_create_one_workspace(service: MemoryService) -> None:
    scope = AgentScope("agent-a:race")
    barrier = threading.Barrier(8)
    created: list[bool] = []
    errors: list[BaseException] = []

    def first_call() -> None:
        try:
            barrier.wait(TIMEOUT_S)
            created.append(service.protocol.workspaces.store.open_workspace(scope, "race", FIVE, service.clock()))
            service.protocol.items.listing(ItemListInput(), ws("agent-a", "race"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    assert errors == [] and sorted(created) == [False] * 7 + [True]
    assert [r.namespace for r in service.protocol.workspaces.store.list_workspaces(AgentScope("agent-a"))] == ["agent-a:race"]
    assert [s.section for s in service.protocol.workspaces.store.sections(scope)] == FIVE


def test_a_read_only_credential_opens_no_workspace(service: MemoryService) -> None:
    ctx = ws("agent-a", "quiet", read_only=True)
    assert [s.section for s in service.protocol.sections.read(None, ctx).sections] == FIVE  # shown, not stored
    assert service.protocol.workspaces.store.workspace_of(AgentScope("agent-a:quiet")) is None
    with pytest.raises(Forbidden):
        service.protocol.workspaces.init(ctx)


def test_init_creates_the_callers_workspace_once(service: MemoryService) -> None:
    first = service.protocol.workspaces.init(CallContext(agent_id="agent-a"))
    assert (first.already_existed, first.workspace.name, first.workspace.namespace, first.sections) == (False, "agent-a", "agent-a", FIVE)
    again = service.protocol.workspaces.init(CallContext(agent_id="agent-a"))
    assert again.already_existed is True and again.workspace == first.workspace and "already exists" in again.message
    named = service.protocol.workspaces.init(ws("agent-a", "proj"))
    assert (named.already_existed, named.workspace.name, named.workspace.namespace) == (False, "proj", "agent-a:proj")
    admin = service.protocol.workspaces.init(CallContext())
    assert (admin.workspace.name, admin.workspace.namespace) == ("default", "default")
    with pytest.raises(InvalidArgument):
        service.protocol.workspaces.init(CallContext(agent_id="system"))


def test_create_by_name_follows_the_rule_and_the_listing_shows_only_the_callers(service: MemoryService) -> None:
    workspaces = service.protocol.workspaces
    made = workspaces.create("alpha", CallContext(agent_id="agent-a"))
    assert (made.already_existed, made.workspace.namespace, made.workspace.name) == (False, "agent-a:alpha", "alpha")
    assert workspaces.create("alpha", CallContext(agent_id="agent-a")).already_existed is True
    assert workspaces.create("agent-b", CallContext(agent_id="agent-a")).workspace.namespace == "agent-a:agent-b"
    assert workspaces.create("beta", CallContext(agent_id="agent-b")).workspace.namespace == "agent-b:beta"
    assert workspaces.create("gamma", CallContext()).workspace.namespace == "gamma"  # an admin credential
    assert workspaces.create("alpha", ws("agent-a", "alpha")).already_existed is True  # in that workspace already
    with pytest.raises(InvalidArgument, match="works in workspace"):
        workspaces.create("other", ws("agent-a", "alpha"))
    with pytest.raises(Forbidden):
        workspaces.create("system", CallContext(agent_id="agent-a"))
    with pytest.raises(Forbidden):
        workspaces.create("anything", CallContext(agent_id="default"))
    with pytest.raises(InvalidArgument):
        workspaces.create("no:colons", CallContext(agent_id="agent-a"))
    mine = workspaces.listing(CallContext(agent_id="agent-a"))
    assert [(w.name, w.namespace, w.created_at is None) for w in mine.workspaces] == [
        ("agent-a", "agent-a", True),  # its own namespace, never opened by name
        ("alpha", "agent-a:alpha", False),
        ("agent-b", "agent-a:agent-b", False),
    ]
    assert mine.current == "agent-a"
    inside = workspaces.listing(ws("agent-a", "alpha"))
    assert [w.namespace for w in inside.workspaces] == [w.namespace for w in mine.workspaces] and inside.current == "agent-a:alpha"
    assert [w.namespace for w in workspaces.listing(CallContext(agent_id="agent-b")).workspaces] == ["agent-b", "agent-b:beta"]
    everything = [w.namespace for w in workspaces.listing(CallContext()).workspaces]
    assert everything == ["agent-a:alpha", "agent-a:agent-b", "agent-b:beta", "gamma"]


def test_a_workspace_never_sees_another_workspaces_records(service: MemoryService) -> None:
    items = service.protocol.items
    here, there = ws("agent-a", "here"), ws("agent-a", "there")
    made = items.create(ItemCreateInput(category="active_work", title="only here"), here)
    service.protocol.sections.update("active_work", "here's notes", here)
    assert items.listing(ItemListInput(), there).items == [] and items.listing(ItemListInput(), CallContext(agent_id="agent-a")).items == []
    assert "here's notes" not in service.protocol.sections.read(None, there).markdown
    assert [i.id for i in items.listing(ItemListInput(), here).items] == [made.id]
    assert service.protocol.health.report(there).items.total == 0


# ---------------------------------------------------------------- row-level security (PostgreSQL)

psycopg = postgres_module("psycopg")


def test_row_level_security_keeps_each_namespace_to_its_rows(app: App, backend: str, postgres_server: PostgresServer) -> None:
    if backend != "postgres":
        pytest.skip("row-level security is PostgreSQL's")
    for agent, name in (("agent-a:w", "w"), ("agent-b:w", "w"), ("agent-a", "agent-a")):
        app.store.open_workspace(AgentScope(agent), name, ["active_work"], app.service.clock())
    with connect(postgres_server.app_dsn, autocommit=True) as conn:
        user = conn.execute("SELECT current_user").fetchone()
        assert user is not None and user[0] == APP_ROLE

        def rows(agent: str, table: str) -> set[str]:
            with conn.transaction():
                conn.execute("SELECT set_config('app.current_agent_id', %s, true)", (agent,))
                return {r[0] for r in conn.execute(f"SELECT agent_id FROM agent_memory.{table}")}

        assert rows("agent-a", "workspaces") == {"agent-a", "agent-a:w"}  # an agent reads its workspaces' records
        assert rows("agent-a:w", "workspaces") == {"agent-a:w"}
        assert rows("agent-b", "workspaces") == {"agent-b:w"}
        assert rows("agent-a", "working_memory_sections") == {"agent-a"}  # but only its own namespace's rows
        assert rows("agent-a:w", "working_memory_sections") == {"agent-a:w"}
        assert rows("", "workspaces") == set() and rows("system", "workspaces") == {"agent-a", "agent-a:w", "agent-b:w"}
        for statement, args in (
            ("INSERT INTO agent_memory.workspaces (agent_id, name) VALUES (%s, 'x')", ("agent-a:x",)),
            ("INSERT INTO agent_memory.working_memory_sections (agent_id, section) VALUES (%s, 'x')", ("agent-b",)),
            (
                "INSERT INTO agent_memory.working_memory_items (id, agent_id, category, title) VALUES ('item-x', %s, 'active_work', 't')",
                ("agent-b",),
            ),
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute("SELECT set_config('app.current_agent_id', 'agent-a', true)")
                conn.execute(statement, args)
        with conn.transaction():
            conn.execute("SELECT set_config('app.current_agent_id', 'agent-a', true)")
            assert conn.execute("DELETE FROM agent_memory.workspaces WHERE agent_id = 'agent-a:w'").rowcount == 0  # read, never changed
            assert conn.execute("UPDATE agent_memory.working_memory_sections SET content = 'x' WHERE agent_id = 'agent-b:w'").rowcount == 0
        flags = conn.execute(
            "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class WHERE relnamespace = 'agent_memory'::regnamespace"
            " AND relname IN ('workspaces', 'working_memory_sections', 'working_memory_items') ORDER BY relname"
        ).fetchall()
        assert [tuple(f) for f in flags] == [(t, True, True) for t in ("working_memory_items", "working_memory_sections", "workspaces")]


# ---------------------------------------------------------------- over HTTP: /v1, /api and /mcp


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("protocol-workspaces")
    env = {**server_env(module_store_env(folder)), **rest_env(), "MEMENTO_TOOLSETS": "memento,protocol"}
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


def http(server: HttpServer, key: str, workspace: str | None, base: str = "/v1") -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} | ({HEADER: workspace} if workspace is not None else {})
    return httpx.Client(base_url=server.url + base, headers=headers, timeout=TIMEOUT_S)


@asynccontextmanager
async def mcp(server: HttpServer, key: str, workspace: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} | ({HEADER: workspace} if workspace else {})
    async with create_mcp_http_client(headers=headers) as client:
        async with Client(streamable_http_client(server.mcp, http_client=client), read_timeout_seconds=TIMEOUT_S) as session:
            yield session


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    return message | ({"id": request_id} if request_id is not None else {})


@pytest.mark.slow
def test_the_first_request_naming_a_workspace_creates_it(server: HttpServer) -> None:
    with http(server, KEY_A, "fresh-start") as a:
        health = a.get("/health").json()
        assert (health["namespace"], health["workspace"], health["sections"]["count"]) == ("agent-a:fresh-start", "fresh-start", 5)
        listed = a.get("/workspaces").json()
        assert listed["current"] == "agent-a:fresh-start"
        names = {w["name"]: w for w in listed["workspaces"]}
        assert names["fresh-start"]["namespace"] == "agent-a:fresh-start" and names["fresh-start"]["created_at"]
        assert [s["section"] for s in a.get("/working-memory").json()["sections"]] == FIVE
        again = a.post("/workspaces", json={"name": "fresh-start"})
        assert again.status_code == 200 and again.json()["already_existed"] is True


@pytest.mark.slow
def test_the_workspace_routes(server: HttpServer) -> None:
    with http(server, KEY_A, None) as a:
        made = a.post("/workspaces", json={"name": "route-made"})
        assert made.status_code == 201 and made.json()["workspace"]["namespace"] == "agent-a:route-made"
        assert made.json()["already_existed"] is False and made.json()["sections"] == FIVE
        assert a.post("/workspaces", json={"name": "route-made"}).status_code == 200
        assert problem_of(a.post("/workspaces", json={"name": "bad name"}), 400)["code"] == "invalid_argument"
        assert problem_of(a.post("/workspaces", json={"name": "admin"}), 403)["code"] == "forbidden"
        problem_of(a.post("/workspaces", json={}), 422)
        mine = a.get("/workspaces").json()["workspaces"]
        assert {"agent-a", "agent-a:route-made"} <= {w["namespace"] for w in mine}
        assert all(w["namespace"] == "agent-a" or w["namespace"].startswith("agent-a:") for w in mine)
    with http(server, KEY_A, "route-made") as inside:
        assert problem_of(inside.post("/workspaces", json={"name": "route-other"}), 400)["code"] == "invalid_argument"
    with http(server, KEY_A_READ, None) as ro:
        assert problem_of(ro.post("/workspaces", json={"name": "route-ro"}), 403)["code"] == "forbidden"
        assert "agent-a:route-made" in {w["namespace"] for w in ro.get("/workspaces").json()["workspaces"]}
    with http(server, KEY_B, None) as b:
        assert all(w["namespace"].split(":")[0] == "agent-b" for w in b.get("/workspaces").json()["workspaces"])
    with http(server, OPERATOR, None) as admin:
        assert {"agent-a:route-made"} <= {w["namespace"] for w in admin.get("/workspaces").json()["workspaces"]}
        assert admin.post("/workspaces", json={"name": "ops-made"}).json()["workspace"]["namespace"] == "ops-made"


@pytest.mark.slow
@pytest.mark.parametrize("base", ["/v1/health", "/api/memories"])
def test_bad_and_reserved_names_are_refused_on_every_http_face(server: HttpServer, base: str) -> None:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=TIMEOUT_S) as client:
        for name, status in (("bad name", 400), ("a:b", 400), ("", 400), ("admin", 403), ("system", 403)):
            response = client.get(base, headers={HEADER: name})
            assert problem_of(response, status)["detail"], (name, response.text)
        for name, status in (("bad name", 400), ("admin", 403)):
            response = client.post(server.mcp, headers={HEADER: name, **MCP_HEADERS}, json=rpc("initialize", _init_params()))
            assert response.status_code == status and "error" in response.json(), response.text


def _init_params() -> dict[str, Any]:
    return {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


@pytest.mark.slow
def test_the_header_selects_the_namespace_on_api_and_v1(server: HttpServer) -> None:
    with http(server, KEY_A, "api-ws", "/api") as inside, http(server, KEY_A, None, "/api") as outside:
        stored = inside.post("/memories", json={"content": "The heron nests by the east pier"})
        assert stored.status_code == 201, stored.text
        assert [m["content"] for m in inside.get("/memories").json()["items"]] == ["The heron nests by the east pier"]
        assert "heron" not in outside.get("/memories").text
    with http(server, KEY_A, "api-ws") as v1:
        assert v1.get("/health").json()["memories"]["total"] == 1  # the same namespace through /v1
    with http(server, KEY_A, "api-other", "/api") as other:
        assert "heron" not in other.get("/memories").text


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_key_bound_to_a_naming_b_reaches_a_b_and_never_bs_records(server: HttpServer) -> None:
    async with mcp(server, KEY_B) as b:
        data(await b.call_tool("remember", {"content": "Osprey vault code is tangerine", "topic": "vault", "type": "fact"}))
        secret = data(await b.call_tool("memento_item_create", {"category": "active_work", "title": "tangerine plan"}))
        data(await b.call_tool("memento_update", {"section": "session_notes", "content": "tangerine notes"}))
    async with mcp(server, KEY_A, "agent-b") as a:
        health = data(await a.call_tool("memento_health", {}))
        assert (health["namespace"], health["workspace"]) == ("agent-a:agent-b", "agent-b")
        assert health["memories"]["total"] == 0 and health["items"]["total"] == 0
        assert "tangerine" not in str(await a.call_tool("recall", {"text": "tangerine vault code"}))
        assert data(await a.call_tool("memento_item_list", {"query": "tangerine"}))["items"] == []
        assert "tangerine" not in data(await a.call_tool("memento_read", {}))["markdown"]
        code, _, _ = error_of(await a.call_tool("memento_item_delete", {"id": secret["id"]}))
        assert code == "not_found"
        data(await a.call_tool("memento_item_create", {"category": "active_work", "title": "a's own plan"}))
    with http(server, KEY_A, "agent-b") as a_v1:
        assert problem_of(a_v1.get(f"/working-memory/items/{secret['id']}"), 404)["code"] == "not_found"
    async with mcp(server, KEY_B) as b:
        titles = [i["title"] for i in data(await b.call_tool("memento_item_list", {}))["items"]]
        assert titles == ["tangerine plan"]  # untouched, and a's item went to agent-a:agent-b
        assert "tangerine notes" in data(await b.call_tool("memento_read", {"section": "session_notes"}))["markdown"]


@pytest.mark.slow
def test_an_mcp_session_keeps_the_workspace_it_was_opened_in(server: HttpServer) -> None:
    base = {"Authorization": f"Bearer {KEY_A}", **MCP_HEADERS}
    with httpx.Client(timeout=TIMEOUT_S) as client:
        opened = client.post(server.mcp, headers={**base, HEADER: "session-one"}, json=rpc("initialize", _init_params()))
        assert opened.status_code == 200, opened.text
        session = {**base, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        assert (
            client.post(
                server.mcp, headers={**session, HEADER: "session-one"}, json=rpc("notifications/initialized", request_id=None)
            ).status_code
            == 202
        )
        call = rpc("tools/call", {"name": "memento_health", "arguments": {}}, 2)
        same = client.post(server.mcp, headers={**session, HEADER: "session-one"}, json=call)
        assert same.status_code == 200 and "agent-a:session-one" in same.text
        for other in ({HEADER: "session-two"}, {HEADER: "agent-a"}, {}):  # another workspace, or none: another namespace
            refused = client.post(server.mcp, headers={**session, **other}, json=call)
            assert refused.status_code == 404 and refused.json()["error"]["message"] == "Session not found", other
        client.delete(server.mcp, headers={**session, HEADER: "session-one"})


# ---------------------------------------------------------------- stdio: MEMENTO_WORKSPACE


def stdio(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)


@pytest.mark.slow
@pytest.mark.anyio
async def test_stdio_works_in_memento_workspace(tmp_path: Path, store_env: StoreEnv) -> None:
    env = {**server_env(store_env(tmp_path)), "MEMENTO_TOOLSETS": "protocol"}
    async with Client(stdio({**env, "MEMENTO_WORKSPACE": "stdio-proj"}), read_timeout_seconds=TIMEOUT_S) as client:
        health = data(await client.call_tool("memento_health", {}))
        assert (health["namespace"], health["workspace"], health["sections"]["count"]) == ("stdio-proj", "stdio-proj", 5)  # created
        data(await client.call_tool("memento_item_create", {"category": "active_work", "title": "stdio task"}))
        assert data(await client.call_tool("memento_init", {}))["already_existed"] is True
    async with Client(stdio(env), read_timeout_seconds=TIMEOUT_S) as client:
        assert data(await client.call_tool("memento_health", {}))["namespace"] == "default"
        assert data(await client.call_tool("memento_item_list", {}))["items"] == []
    agent_env = {**env, "MEMENTO_STDIO_AGENT": "agent-a", "MEMENTO_WORKSPACE": "stdio-proj"}
    async with Client(stdio(agent_env), read_timeout_seconds=TIMEOUT_S) as client:
        health = data(await client.call_tool("memento_health", {}))
        assert (health["namespace"], health["items"]["total"]) == ("agent-a:stdio-proj", 0)
