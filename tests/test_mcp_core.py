"""The protocol core's side of the feature contract, versions, batches and utilities, in-process."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from memento.app import App
from memento.mcp import jsonrpc
from memento.mcp.features import Handler, NotificationHandler, RequestContext, ServerHub
from memento.mcp.server import McpServer, Session
from memento.mcp.tools import TOOLS

pytestmark = pytest.mark.anyio
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Probe:
    """A feature exercising every part of the contract."""

    def __init__(self) -> None:
        self.hub: ServerHub | None = None
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.seen_cancel = False
        self.notes: list[tuple[str, dict[str, Any]]] = []

    def capabilities(self, version: str) -> dict[str, Any]:
        return {"completions": {}, "tasks": {"list": {}}, "tools": {"extra": True}}

    def handlers(self) -> Mapping[str, Handler]:
        return {"probe/wait": self.wait, "probe/ask": self.ask, "probe/report": self.report}

    def notification_handlers(self) -> Mapping[str, NotificationHandler]:
        async def on_roots(session: Any, params: dict[str, Any]) -> None:
            self.notes.append((session.id, params))

        return {"notifications/roots/list_changed": on_roots}

    def attach(self, hub: ServerHub) -> None:
        self.hub = hub

    async def wait(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self.started.set()
        try:
            await self.release.wait()
        finally:
            self.seen_cancel = ctx.cancelled.is_set()
        return {"waited": True}

    async def ask(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return await ctx.request("roots/list", {}, timeout_s=5)

    async def report(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        await ctx.progress(1, 2, "half")
        await ctx.log("debug", "quiet")
        await ctx.log("error", "loud")
        await ctx.session.notify("notifications/probe", {"session": ctx.session.id})
        return {}


class Peer:
    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.standalone: list[dict[str, Any]] = []
        self.related: list[dict[str, Any]] = []
        self.session: Session = server.create_session(self._standalone)
        self.next_id = 0

    async def _standalone(self, message: dict[str, Any]) -> None:
        self.standalone.append(message)

    async def sink(self, message: dict[str, Any]) -> None:
        self.related.append(message)

    async def send(self, message: Any) -> Any:
        return await self.server.handle(message, self.session, self.sink)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        return await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})

    async def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        reply = await self.request(
            "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result: dict[str, Any] = reply["result"]
        return result


# ------------------------------------------------------------------ versions and capabilities


@pytest.mark.parametrize("version", VERSIONS)
async def test_capabilities_and_tool_shapes_follow_the_version(app: App, version: str) -> None:
    probe = Probe()
    server = McpServer(app, features=[probe])
    assert probe.hub is server and server.sessions() == []
    peer = Peer(server)
    caps = (await peer.initialize(version))["capabilities"]
    assert caps["logging"] == {} and caps["tools"] == {"listChanged": False, "extra": True}
    assert ("completions" in caps) == (version != "2024-11-05")
    assert ("tasks" in caps) == (version == "2025-11-25")

    tools = (await peer.request("tools/list"))["result"]["tools"]
    assert all("outputSchema" not in tool for tool in tools)  # structured output is opt-in (MEMENTO_STRUCTURED_OUTPUT)
    assert all(("annotations" in tool) == (version != "2024-11-05") for tool in tools)
    if version != "2024-11-05":
        # only the hints that differ from the spec's defaults (readOnly false, destructive true,
        # idempotent false, openWorld true) are sent
        hints = {tool["name"]: tool["annotations"] for tool in tools}
        assert hints["recall"]["readOnlyHint"] is True and hints["recall"]["openWorldHint"] is False
        assert hints["forget"].get("destructiveHint", True) is True and hints["forget"]["idempotentHint"] is True
        assert hints["remember"]["destructiveHint"] is False
        assert all(h["openWorldHint"] is False for h in hints.values())

    bad = (await peer.request("tools/call", {"name": "remember", "arguments": {}}))["result"]
    assert bad["isError"] is True and "content" in bad["content"][0]["text"]
    assert "structuredContent" not in bad


async def test_discover_before_initialize_is_method_not_found(app: App) -> None:
    peer = Peer(McpServer(app))
    reply = await peer.request("server/discover")
    assert reply["error"]["code"] == jsonrpc.METHOD_NOT_FOUND


# ------------------------------------------------------------------ the feature contract


async def test_context_progress_logging_and_standalone_notify(app: App) -> None:
    peer = Peer(McpServer(app, features=[Probe()]))
    await peer.initialize()
    await peer.send({"jsonrpc": "2.0", "id": "r", "method": "probe/report", "params": {"_meta": {"progressToken": "tok"}}})
    methods = [m["method"] for m in peer.related]
    assert methods == ["notifications/progress", "notifications/message"]  # debug filtered at info
    assert peer.related[0]["params"] == {"progressToken": "tok", "progress": 1, "total": 2, "message": "half"}
    assert peer.related[1]["params"] == {"level": "error", "logger": "memento", "data": "loud"}
    assert peer.standalone == [{"jsonrpc": "2.0", "method": "notifications/probe", "params": {"session": peer.session.id}}]

    peer.related.clear()
    assert (await peer.request("logging/setLevel", {"level": "debug"}))["result"] == {}
    await peer.request("probe/report")  # no progressToken: no progress
    assert [m["params"]["level"] for m in peer.related] == ["debug", "error"]
    bad = await peer.request("logging/setLevel", {"level": "loud"})
    assert bad["error"]["code"] == jsonrpc.INVALID_PARAMS


async def test_2024_11_05_progress_has_no_message(app: App) -> None:
    peer = Peer(McpServer(app, features=[Probe()]))
    await peer.initialize("2024-11-05")
    await peer.send({"jsonrpc": "2.0", "id": 9, "method": "probe/report", "params": {"_meta": {"progressToken": 3}}})
    assert peer.related[0]["params"] == {"progressToken": 3, "progress": 1, "total": 2}


async def test_server_to_client_request_is_resolved_by_the_clients_response(app: App) -> None:
    peer = Peer(McpServer(app, features=[Probe()]))
    await peer.initialize()
    replies: list[Any] = []

    async def ask() -> None:
        replies.append(await peer.request("probe/ask"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        with anyio.fail_after(5):
            while not peer.related:
                await anyio.wait_all_tasks_blocked()
        outgoing = peer.related[0]
        assert outgoing["method"] == "roots/list" and "id" in outgoing
        answer = {"jsonrpc": "2.0", "id": outgoing["id"], "result": {"roots": [{"uri": "file:///x"}]}}
        assert await peer.send(answer) is None
    assert replies[0]["result"] == {"roots": [{"uri": "file:///x"}]}


async def test_a_cancelled_request_gets_no_response(app: App) -> None:
    probe = Probe()
    peer = Peer(McpServer(app, features=[probe]))
    await peer.initialize()
    replies: list[Any] = []

    async def wait() -> None:
        replies.append(await peer.send({"jsonrpc": "2.0", "id": 41, "method": "probe/wait"}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        with anyio.fail_after(5):
            await probe.started.wait()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}
        assert await peer.send(cancel) is None
    assert replies == [None] and probe.seen_cancel
    # Cancelling something already answered (or unknown) is ignored.
    assert await peer.send({**cancel, "params": {"requestId": 41}}) is None
    assert (await peer.request("ping"))["result"] == {}


async def test_feature_notification_handlers_receive_the_session(app: App) -> None:
    probe = Probe()
    peer = Peer(McpServer(app, features=[probe]))
    await peer.initialize()
    await peer.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    assert probe.notes == [(peer.session.id, {})]


@pytest.mark.backends("sqlite", "postgres+redis")
async def test_memory_consolidate_reports_progress_when_asked(app: App) -> None:
    peer = Peer(McpServer(app))
    await peer.initialize()
    reply = await peer.send(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "memory_consolidate", "arguments": {}, "_meta": {"progressToken": "c"}},
        }
    )
    assert reply["result"]["isError"] is False
    progress = [m["params"] for m in peer.related if m["method"] == "notifications/progress"]
    assert len(progress) >= 2 and progress[-1]["progress"] == progress[-1]["total"]
    values = [p["progress"] for p in progress]
    assert values == sorted(values) and all(p["progressToken"] == "c" for p in progress)


# ------------------------------------------------------------------ batches


async def test_batches_only_for_2025_03_26(app: App) -> None:
    server = McpServer(app)
    old = Peer(server)
    await old.initialize("2025-03-26")
    replies = await old.send(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        ]
    )
    assert [r["id"] for r in replies] == [1, 2, 3]
    assert replies[0]["result"] == {} and len(replies[1]["result"]["tools"]) == len(TOOLS)
    assert replies[2]["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
    assert await old.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}]) is None
    assert (await old.send([]))["error"]["code"] == jsonrpc.INVALID_REQUEST

    new = Peer(server)
    await new.initialize("2025-06-18")
    refused = await new.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert refused["error"]["code"] == jsonrpc.INVALID_REQUEST and refused["id"] is None


async def test_a_batch_over_stdio(app: App) -> None:
    from memento.mcp.stdio import serve_stdio

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    batch = [
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_stats", "arguments": {}}},
    ]
    # Lines are handled in arrival order, so the batch sees the negotiated 2025-03-26.
    raw = json.dumps(init).encode() + b"\n" + json.dumps(batch).encode() + b"\n"
    out = io.BytesIO()
    await serve_stdio(app, stdin=io.BytesIO(raw), stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["result"]["protocolVersion"] == "2025-03-26"
    assert isinstance(lines[1], list) and [r["id"] for r in lines[1]] == [2, 3]
    assert lines[1][1]["result"]["isError"] is False
