"""The tasks extension io.modelcontextprotocol/tasks at 2026-07-28 (SEP-2663), through McpServer.

Every request is answered with a fresh session, as the stateless revision does: a task belongs
to the credential that started it, never to a session.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from mcp_fakes import FakeHub
from redis_harness import RedisServer, redis_server  # noqa: F401  (fixture)

from memento.app import App, build_app
from memento.auth.principal import ANONYMOUS, Principal
from memento.embeddings.hashing import HashEmbedder
from memento.mcp import mrtr, versions
from memento.mcp.context import CallContext, Session
from memento.mcp.features import RequestContext
from memento.mcp.jsonrpc import JsonRpcError
from memento.mcp.registry import default_features
from memento.mcp.server import McpServer
from memento.mcp.stateless import handle_stateless
from memento.mcp.task_extension import CLIENT_CAPABILITIES, EXTENSION
from memento.mcp.tasks import TasksFeature
from memento.settings import Settings

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[1] / "src"
OPTED_IN: dict[str, Any] = {"extensions": {EXTENSION: {}}}
ALICE = Principal(subject="alice-key", agent_id="alice")
BOB = Principal(subject="bob-key", agent_id="bob")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fixture_app(tmp_path: Path) -> Iterator[App]:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash", MEMENTO_CONFORMANCE_FIXTURES=True)
    built = build_app(settings, embedder=HashEmbedder(256))
    yield built
    built.close()


class Client:
    """A 2026 client: every request carries its capabilities in `_meta` and gets a new session."""

    def __init__(self, server: McpServer, principal: Principal = ANONYMOUS, capabilities: dict[str, Any] | None = None) -> None:
        self.server, self.principal = server, principal
        self.capabilities = OPTED_IN if capabilities is None else capabilities
        self.ids = 0

    async def send(
        self, method: str, params: dict[str, Any] | None = None, *, capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.ids += 1
        caps = self.capabilities if capabilities is None else capabilities
        session = Session(
            id=f"throwaway-{self.ids}", protocol_version=versions.STATELESS, client_capabilities=caps, principal=self.principal
        )
        message = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": method,
            "params": {**(params or {}), "_meta": {"io.modelcontextprotocol/clientCapabilities": caps}},
        }
        reply = await self.server.handle(message, session)
        assert isinstance(reply, dict)
        return reply

    async def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        reply = await self.send(method, params, **kw)
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    async def error(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        reply = await self.send(method, params, **kw)
        assert "error" in reply, reply
        error: dict[str, Any] = reply["error"]
        return error

    async def call(self, tool: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        return await self.result("tools/call", {"name": tool, "arguments": arguments or {}, **extra})


def serve(app: App) -> McpServer:
    server = McpServer(app, features=default_features(app.settings))
    server.started()
    return server


async def settle(server: McpServer, task_id: str) -> None:
    """Wait (bounded) until the task ends: its record's done event, no sleeping."""
    assert server.tasks is not None
    with anyio.fail_after(10):
        await server.tasks.tasks[task_id].done.wait()


async def until_input(client: Client, task_id: str, keys: int = 1) -> dict[str, Any]:
    """Poll tasks/get until the task waits on `keys` input requests (bounded)."""
    with anyio.fail_after(10):
        while True:
            task = await client.result("tasks/get", {"taskId": task_id})
            if task["status"] == "input_required" and len(task.get("inputRequests", {})) >= keys:
                return task
            await anyio.lowlevel.checkpoint()


def test_the_extension_is_declared_at_2026_and_the_2025_capability_is_unchanged(app: App) -> None:
    server = McpServer(app, features=default_features(app.settings))
    stateless = server.capabilities(versions.STATELESS)
    assert stateless["extensions"] == {EXTENSION: {}} and "tasks" not in stateless
    assert server.capabilities("2025-11-25")["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert "extensions" not in server.capabilities("2025-11-25")


async def test_a_long_tool_returns_a_task_handle_and_tasks_get_polls_it_to_its_result(app: App) -> None:
    server = serve(app)
    client = Client(server)
    created = await client.call("memory_consolidate", {"dryRun": True})
    assert created["resultType"] == "task" and created["status"] == "working"
    assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
    assert not {"task", "ttl", "pollInterval", "result", "error", "inputRequests", "requestState"} & set(created)
    task_id = created["taskId"]
    await settle(server, task_id)
    done = await client.result("tasks/get", {"taskId": task_id})
    assert done["status"] == "completed" and done["taskId"] == task_id
    assert done["result"]["isError"] is False and "stages" in done["result"]["content"][0]["text"]
    assert "_meta" not in done["result"]  # no related-task key: the taskId is at the root


async def test_an_export_task_reads_only_its_callers_memories(app: App) -> None:
    server = serve(app)
    alice, bob = Client(server, ALICE), Client(server, BOB)
    await alice.call("remember", {"content": "Alice prefers tabs over spaces", "topic": "style", "type": "preference"})
    pages: dict[str, str] = {}
    for who, client in (("alice", alice), ("bob", bob)):
        created = await client.call("export", {"format": "markdown"})
        assert created["resultType"] == "task"
        await settle(server, created["taskId"])
        done = await client.result("tasks/get", {"taskId": created["taskId"]})
        assert done["status"] == "completed" and done["result"]["isError"] is False
        pages[who] = done["result"]["content"][0]["text"]
    assert "tabs over spaces" in pages["alice"] and "tabs over spaces" not in pages["bob"]


async def test_without_the_extension_a_long_tool_runs_synchronously(app: App) -> None:
    client = Client(serve(app), capabilities={})
    result = await client.call("memory_consolidate", {"dryRun": True})
    assert "taskId" not in result and result["content"] and result.get("resultType") != "task"


async def test_the_task_methods_need_the_extension_and_list_and_result_are_gone(app: App) -> None:
    client = Client(serve(app))
    for method, params in (
        ("tasks/get", {"taskId": "x"}),
        ("tasks/update", {"taskId": "x", "inputResponses": {}}),
        ("tasks/cancel", {"taskId": "x"}),
    ):
        error = await client.error(method, params, capabilities={})
        assert error["code"] == -32021 and error["data"]["requiredCapabilities"]["extensions"] == {EXTENSION: {}}
    for method in ("tasks/list", "tasks/result"):
        assert (await client.error(method, {"taskId": "x"}))["code"] == -32601
    assert (await client.error("tasks/get", {"taskId": "nobody-made-this"}))["code"] == -32602


async def test_a_task_belongs_to_its_credential_not_to_a_session(fixture_app: App) -> None:
    server = serve(fixture_app)
    alice, bob = Client(server, ALICE), Client(server, BOB)
    task_id = (await alice.call("slow_compute", {"seconds": 60}))["taskId"]
    assert (await alice.result("tasks/get", {"taskId": task_id}))["status"] == "working"  # another session, same key
    probes: list[tuple[str, dict[str, Any]]] = [("tasks/get", {}), ("tasks/update", {"inputResponses": {}}), ("tasks/cancel", {})]
    for method, params in probes:
        error = await bob.error(method, {"taskId": task_id, **params})
        assert error["code"] == -32602  # as if it did not exist
    assert (await alice.result("tasks/get", {"taskId": task_id}))["status"] == "working"  # bob's cancel did nothing
    assert await alice.result("tasks/cancel", {"taskId": task_id}) == {}
    await settle(server, task_id)
    assert (await alice.result("tasks/get", {"taskId": task_id}))["status"] == "cancelled"
    assert await alice.result("tasks/cancel", {"taskId": task_id}) == {}  # idempotent on a terminal task


async def test_tasks_update_feeds_the_input_a_running_task_waits_for(fixture_app: App) -> None:
    server = serve(fixture_app)
    client = Client(server)
    task_id = (await client.call("confirm_delete", {"filename": "notes.txt"}))["taskId"]
    waiting = await until_input(client, task_id)
    ((key, request),) = waiting["inputRequests"].items()
    assert request["method"] == "elicitation/create" and "notes.txt" in request["params"]["message"]
    assert await client.result("tasks/update", {"taskId": task_id, "inputResponses": {"not-asked": {}}}) == {}  # ignored
    assert (await client.result("tasks/get", {"taskId": task_id}))["status"] == "input_required"
    assert (
        await client.result(
            "tasks/update", {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
        )
        == {}
    )
    await settle(server, task_id)
    done = await client.result("tasks/get", {"taskId": task_id})
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Deleted notes.txt"
    assert "inputRequests" not in done


async def test_a_partial_update_leaves_only_the_unanswered_request(fixture_app: App) -> None:
    server = serve(fixture_app)
    client = Client(server)
    task_id = (await client.call("multi_input"))["taskId"]
    first, second = sorted((await until_input(client, task_id, keys=2))["inputRequests"])
    await client.result("tasks/update", {"taskId": task_id, "inputResponses": {first: {"action": "accept", "content": {"name": "a"}}}})
    still = await client.result("tasks/get", {"taskId": task_id})
    assert still["status"] == "input_required" and list(still["inputRequests"]) == [second]
    await client.result("tasks/update", {"taskId": task_id, "inputResponses": {second: {"action": "accept", "content": {"name": "b"}}}})
    await settle(server, task_id)
    assert (await client.result("tasks/get", {"taskId": task_id}))["result"]["content"][0]["text"] == "Received: a, b"


async def test_malformed_input_responses_are_invalid_params_and_change_nothing(fixture_app: App) -> None:
    server = serve(fixture_app)
    client = Client(server)
    task_id = (await client.call("confirm_delete", {"filename": "x"}))["taskId"]
    before = await until_input(client, task_id)
    assert (await client.error("tasks/update", {"taskId": task_id, "inputResponses": ["yes"]}))["code"] == -32602
    assert (await client.result("tasks/get", {"taskId": task_id}))["inputRequests"] == before["inputRequests"]
    await client.result("tasks/cancel", {"taskId": task_id})


async def test_a_tool_error_completes_the_task_and_a_protocol_error_fails_it(fixture_app: App) -> None:
    server = serve(fixture_app)
    client = Client(server)
    tool_error = (await client.call("failing_job"))["taskId"]
    protocol_error = (await client.call("protocol_error_job"))["taskId"]
    await settle(server, tool_error)
    await settle(server, protocol_error)
    completed = await client.result("tasks/get", {"taskId": tool_error})
    assert completed["status"] == "completed" and completed["result"]["isError"] is True
    failed = await client.result("tasks/get", {"taskId": protocol_error})
    assert failed["status"] == "failed" and failed["error"]["code"] == -32603 and "result" not in failed


async def test_a_task_only_tool_refuses_a_client_without_the_extension(fixture_app: App) -> None:
    error = await Client(serve(fixture_app), capabilities={}).error("tools/call", {"name": "failing_job", "arguments": {}})
    assert error["code"] == -32021 and EXTENSION in error["data"]["requiredCapabilities"]["extensions"]


async def test_the_legacy_task_param_never_makes_a_task_of_a_quick_tool(fixture_app: App) -> None:
    result = await Client(serve(fixture_app)).call("greet", {"name": "you"}, task={"ttl": 60000})
    assert result["content"][0]["text"] == "Hello, you!" and "taskId" not in result


async def test_mrtr_rounds_come_before_the_task_and_their_answer_reaches_its_result(fixture_app: App) -> None:
    server = serve(fixture_app)
    client = Client(server)
    first = await client.call("test_tool_with_task")
    assert first["resultType"] == "input_required" and "taskId" not in first
    (key,) = first["inputRequests"]
    created = await client.call("test_tool_with_task", inputResponses={key: {"action": "accept", "content": {"name": "Alice"}}})
    assert created["resultType"] == "task" and "requestState" not in created and "inputRequests" not in created
    await settle(server, created["taskId"])
    assert "Alice" in (await client.result("tasks/get", {"taskId": created["taskId"]}))["result"]["content"][0]["text"]


async def test_progress_of_a_task_shows_in_its_status_message(fixture_app: App) -> None:
    server = serve(fixture_app)
    client = Client(server)
    task_id = (await client.call("slow_compute", {"seconds": 60, "label": "crunch"}))["taskId"]
    with anyio.fail_after(10):
        while "crunch" not in (await client.result("tasks/get", {"taskId": task_id})).get("statusMessage", ""):
            await anyio.lowlevel.checkpoint()
    assert (await client.result("tasks/get", {"taskId": task_id}))["statusMessage"].startswith("crunch: computing (0/60)")
    await client.result("tasks/cancel", {"taskId": task_id})


async def test_task_fixtures_exist_only_at_2026(fixture_app: App) -> None:
    server = McpServer(fixture_app, features=default_features(fixture_app.settings), page_size=1000)  # one page
    listed = {tool["name"]: tool for tool in (await Client(server).result("tools/list"))["tools"]}
    assert {"greet", "slow_compute", "failing_job", "confirm_delete", "multi_input", "test_tool_with_task"} <= set(listed)
    assert all("execution" not in tool for tool in listed.values())  # 2026's Tool has no execution member
    session = server.create_session()
    await server.handle(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
        },
        session,
    )
    old = await server.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, session)
    assert isinstance(old, dict)
    names = {tool["name"] for tool in old["result"]["tools"]}
    assert "greet" not in names and "slow_compute" not in names


async def test_2025_11_25_tasks_are_unchanged(app: App) -> None:
    server = serve(app)
    session = server.create_session()
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    await server.handle({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, session)

    async def send(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        reply = await server.handle({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, session)
        assert isinstance(reply, dict)
        return reply

    listed = {t["name"]: t for t in (await send(2, "tools/list", {}))["result"]["tools"]}
    assert listed["memory_consolidate"]["execution"] == {"taskSupport": "optional"}
    assert "resultType" not in (await send(3, "tools/call", {"name": "memory_consolidate", "arguments": {"dryRun": True}}))["result"]
    created = (await send(4, "tools/call", {"name": "memory_consolidate", "arguments": {"dryRun": True}, "task": {"ttl": 60000}}))["result"]
    assert set(created) == {"task", "_meta"} and created["task"]["ttl"] == 60000 and "pollInterval" in created["task"]
    result = (await send(5, "tasks/result", {"taskId": created["task"]["taskId"]}))["result"]
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": created["task"]["taskId"]}
    assert [t["taskId"] for t in (await send(6, "tasks/list", {}))["result"]["tasks"]] == [created["task"]["taskId"]]
    assert (await send(7, "tasks/update", {"taskId": created["task"]["taskId"], "inputResponses": {}}))["error"] == {
        "code": -32601,
        "message": "Method not found: tasks/update",
    }


async def test_a_running_task_asks_through_its_input_requests_not_the_creating_requests_rounds(app: App) -> None:
    feature = TasksFeature()
    feature.attach(FakeHub(app))
    seen: list[object] = []

    async def run(task_ctx: RequestContext) -> dict[str, Any]:
        seen.append(mrtr.current())  # None: a question goes through task_ctx.request (inputRequests)
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}

    exchange = mrtr.Exchange(mrtr.Sealer(b"k" * 32, 60), "bound", {}, None, {})
    with mrtr.bound(exchange):  # the tools/call that creates the task is a round of its own
        created = await feature.maybe_run_as_task(request_of(ALICE), "memory_consolidate", {"name": "memory_consolidate"}, run)
    assert created is not None
    with anyio.fail_after(10):
        await feature.tasks[created["taskId"]].done.wait()
    assert seen == [None]


async def test_a_listen_stream_that_names_a_task_gets_its_status_notifications(fixture_app: App) -> None:
    server = serve(fixture_app)
    alice = Client(server, ALICE)
    task_id = (await alice.call("confirm_delete", {"filename": "n.txt"}))["taskId"]
    (key,) = (await until_input(alice, task_id))["inputRequests"]
    heard: dict[str, list[dict[str, Any]]] = {"alice": [], "bob": []}
    acked = {"alice": anyio.Event(), "bob": anyio.Event()}
    meta = {"io.modelcontextprotocol/protocolVersion": versions.STATELESS, CLIENT_CAPABILITIES: OPTED_IN}

    async def listen(who: str, principal: Principal) -> None:
        async def sink(message: dict[str, Any]) -> None:
            heard[who].append(message)
            if message["method"] == "notifications/subscriptions/acknowledged":
                acked[who].set()

        params = {"notifications": {"taskIds": [task_id]}, "_meta": meta}
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": f"listen-{who}", "method": "subscriptions/listen", "params": params}
        await handle_stateless(server, request, principal=principal, sink=sink)

    async with anyio.create_task_group() as group:
        group.start_soon(listen, "alice", ALICE)
        group.start_soon(listen, "bob", BOB)  # names alice's task id: hears nothing of it
        with anyio.fail_after(10):
            await acked["alice"].wait()
            await acked["bob"].wait()
        await alice.result("tasks/update", {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}})
        with anyio.fail_after(10):
            while not any(m["method"] == "notifications/tasks" and m["params"]["status"] == "completed" for m in heard["alice"]):
                await anyio.lowlevel.checkpoint()
        group.cancel_scope.cancel()
    statuses = [m["params"] for m in heard["alice"] if m["method"] == "notifications/tasks"]
    assert all(p["taskId"] == task_id for p in statuses) and statuses[0]["status"] == "working"
    assert statuses[-1]["result"]["content"][0]["text"] == "Deleted n.txt"
    assert statuses[-1]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-alice"
    assert [m["method"] for m in heard["bob"]] == ["notifications/subscriptions/acknowledged"]
    refused = await handle_stateless(
        server,
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [task_id]}, "_meta": {**meta, CLIENT_CAPABILITIES: {}}},
        },
        principal=ALICE,
        sink=None,
    )
    assert refused is not None and refused["error"]["code"] == -32021


# ---------------------------------------------------------------- across replicas (Redis)


@pytest.fixture
def two_apps(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[App, App]]:
    apps = [
        build_app(
            Settings(
                DATABASE_URL=f"sqlite:///{tmp_path / name}.db",
                EMBEDDING_PROVIDER="hash",
                REDIS_ENABLED=True,
                REDIS_HOST="127.0.0.1",
                REDIS_PORT=redis_server.port,
            )
        )
        for name in ("a", "b")
    ]
    for built in apps:
        assert built.bus is not None and built.bus.wait_subscribed()
    yield apps[0], apps[1]
    for built in apps:
        built.close()


def request_of(principal: Principal) -> CallContext:
    session = Session(id=secrets.token_urlsafe(8), protocol_version=versions.STATELESS, client_capabilities=OPTED_IN, principal=principal)
    return CallContext(session, 1, versions.STATELESS, {CLIENT_CAPABILITIES: OPTED_IN})


async def test_a_2026_task_is_followed_answered_and_cancelled_through_another_replica(two_apps: tuple[App, App]) -> None:
    here, there = TasksFeature(), TasksFeature()
    here.attach(FakeHub(two_apps[0]))
    there.attach(FakeHub(two_apps[1]))
    here.started()
    there.started()

    async def asks(task_ctx: RequestContext) -> dict[str, Any]:
        answer = await task_ctx.request("elicitation/create", {"mode": "form", "message": "name?", "requestedSchema": {"type": "object"}})
        return {"content": [{"type": "text", "text": f"hello {answer['content']['name']}"}], "isError": False}

    async def on(feature: TasksFeature, method: str, principal: Principal = ALICE, **params: Any) -> dict[str, Any]:
        return await feature.handlers()[method](request_of(principal), params)

    created = await here.maybe_run_as_task(request_of(ALICE), "memory_consolidate", {"name": "memory_consolidate"}, asks)
    assert created is not None and created["resultType"] == "task"
    task_id = created["taskId"]
    assert (await on(there, "tasks/get", taskId=task_id))["status"] == "working"  # durable before the handle went out
    with anyio.fail_after(10):
        while here.tasks[task_id].status != "input_required":
            await anyio.lowlevel.checkpoint()
    waiting = await on(there, "tasks/get", taskId=task_id)  # B reads the shared record
    ((key, request),) = waiting["inputRequests"].items()
    assert waiting["status"] == "input_required" and request["method"] == "elicitation/create"
    with pytest.raises(JsonRpcError) as err:
        await on(there, "tasks/get", BOB, taskId=task_id)
    assert err.value.code == -32602
    assert await on(there, "tasks/update", taskId=task_id, inputResponses={key: {"action": "accept", "content": {"name": "Zed"}}}) == {}
    with anyio.fail_after(10):
        await here.tasks[task_id].done.wait()  # the answer crossed the bus to the replica running it
    done = await on(there, "tasks/get", taskId=task_id)
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "hello Zed"

    second = await here.maybe_run_as_task(request_of(ALICE), "memory_consolidate", {"name": "memory_consolidate"}, asks)
    assert second is not None
    assert await on(there, "tasks/cancel", taskId=second["taskId"]) == {}
    with anyio.fail_after(10):
        await here.tasks[second["taskId"]].done.wait()
    assert (await on(here, "tasks/get", taskId=second["taskId"]))["status"] == "cancelled"


# ---------------------------------------------------------------- over stdio, a real server process


class StdioPeer:
    """A 2026 client driving `memento serve --transport stdio` line by line."""

    def __init__(self, tmp_path: Path) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}",
            "EMBEDDING_PROVIDER": "hash",
            "MEMENTO_CONFORMANCE_FIXTURES": "1",
            "PYTHONPATH": str(SRC),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memento", "serve", "--transport", "stdio"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.ids = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            self.lines.put(line)

    def send(self, method: str, params: dict[str, Any], capabilities: dict[str, Any] = OPTED_IN) -> dict[str, Any]:
        self.ids += 1
        meta = {"io.modelcontextprotocol/protocolVersion": versions.STATELESS, CLIENT_CAPABILITIES: capabilities}
        message = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": {**params, "_meta": meta}}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            reply: dict[str, Any] = json.loads(self.lines.get(timeout=60))
            if reply.get("id") == self.ids:
                return reply

    def poll(self, task_id: str, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        for _ in range(2000):  # bounded: the server answers each poll; the task ends within it
            task: dict[str, Any] = self.send("tasks/get", {"taskId": task_id})["result"]
            if until(task):
                return task
        raise AssertionError(f"task {task_id} never got there: {task}")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.mark.backends("sqlite")
def test_tasks_over_stdio(tmp_path: Path) -> None:
    peer = StdioPeer(tmp_path)
    try:
        discovered = peer.send("server/discover", {})["result"]
        assert discovered["capabilities"]["extensions"] == {EXTENSION: {}} and "tasks" not in discovered["capabilities"]
        created = peer.send("tools/call", {"name": "memory_consolidate", "arguments": {"dryRun": True}})["result"]
        assert created["resultType"] == "task" and created["status"] == "working"
        done = peer.poll(created["taskId"], lambda task: task["status"] == "completed")
        assert done["resultType"] == "complete" and done["result"]["isError"] is False
        asked = peer.send("tools/call", {"name": "confirm_delete", "arguments": {"filename": "f.txt"}})["result"]
        waiting = peer.poll(asked["taskId"], lambda task: task["status"] == "input_required")
        (key,) = waiting["inputRequests"]
        ack = peer.send(
            "tasks/update", {"taskId": asked["taskId"], "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
        )
        assert ack["result"]["resultType"] == "complete" and "taskId" not in ack["result"]
        finished = peer.poll(asked["taskId"], lambda task: task["status"] == "completed")
        assert finished["result"]["content"][0]["text"] == "Deleted f.txt"
        assert peer.send("tasks/get", {"taskId": asked["taskId"]}, capabilities={})["error"]["code"] == -32021
        assert peer.send("tasks/list", {})["error"]["code"] == -32601
    finally:
        peer.close()
