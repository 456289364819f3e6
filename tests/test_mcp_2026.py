"""MCP 2026-07-28, the stateless revision: the core in-process, and over stdio with real processes.

In-process, `handle_stateless` answers one message with no session: `server/discover`, the
`_meta` checks (-32602, -32022), `resultType` and the server's identity on every result, the
caching hints, the per-request log level, cancellation, and the methods 2026 removed — which the
same server still answers for a session opened with `initialize`. Over stdio, one server process
serves a 2026 client (discover, then `_meta` on every request) and a classic one on the same
connection, and the official `mcp` client in its default mode negotiates 2026-07-28 and drives
the tools, resources and prompts.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE, TIMEOUT_S, TOOL_NAMES, ToolDriver
from mcp_helpers import server_env as helper_env

from memento.app import App
from memento.auth.principal import ANONYMOUS, Principal
from memento.mcp import jsonrpc, versions
from memento.mcp.features import Handler, NotificationHandler, RequestContext, ServerHub
from memento.mcp.registry import default_features
from memento.mcp.server import McpServer, Session
from memento.mcp.stateless import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    UNSUPPORTED_PROTOCOL_VERSION,
    handle_stateless,
    missing_capability,
    stateless_request,
)

pytestmark = pytest.mark.anyio
META: dict[str, Any] = {
    META_PROTOCOL_VERSION: versions.STATELESS,
    META_CLIENT_CAPABILITIES: {},
    META_CLIENT_INFO: {"name": "test-2026", "version": "1.0"},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Waiter:
    """A feature whose one method waits until released (or cancelled)."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()

    def capabilities(self, version: str) -> dict[str, Any]:
        return {}

    def handlers(self) -> Mapping[str, Handler]:
        return {"probe/wait": self.wait}

    def notification_handlers(self) -> Mapping[str, NotificationHandler]:
        return {}

    def attach(self, hub: ServerHub) -> None:
        pass

    async def wait(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self.started.set()
        await self.release.wait()
        return {"waited": True}


class Stateless:
    """A 2026 client talking to the core directly; what the request's sink carried is kept."""

    def __init__(self, server: McpServer, principal: Principal = ANONYMOUS) -> None:
        self.server = server
        self.principal = principal
        self.related: list[dict[str, Any]] = []
        self.next_id = 0

    async def sink(self, message: dict[str, Any]) -> None:
        self.related.append(message)

    async def send(self, message: Any, in_flight: dict[Any, Any] | None = None) -> Any:
        return await handle_stateless(self.server, message, principal=self.principal, sink=self.sink, in_flight=in_flight)

    async def request(self, method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        body = dict(params or {})
        body["_meta"] = META if meta is None else meta
        return await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": body})

    async def result(self, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        reply = await self.request(method, params, {**META, **{_META_KEYS[k]: v for k, v in meta.items()}})
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result


_META_KEYS = {"log_level": META_LOG_LEVEL, "capabilities": META_CLIENT_CAPABILITIES}


def server_of(app: App, *extra: Any) -> McpServer:
    return McpServer(app, features=[*default_features(app.settings), *extra])


# ------------------------------------------------------------------ server/discover


async def test_discover_names_every_revision_the_capabilities_and_the_server(app: App) -> None:
    server = server_of(app)
    result = await Stateless(server).result("server/discover")
    assert result["supportedVersions"] == ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
    caps = result["capabilities"]
    assert caps["tools"] == {"listChanged": False} and "prompts" in caps and "resources" in caps and "completions" in caps
    assert "tasks" not in caps  # tasks are an extension at 2026, never the core capability
    assert result["instructions"] == (await handshake_of(server))["instructions"]
    assert result["resultType"] == "complete"
    assert result["_meta"][META_SERVER_INFO] == {"name": "memento", "version": app_version(), "title": "Memento memory"}
    assert result["cacheScope"] == "public" and isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert "serverInfo" not in result  # the identity goes in _meta since the 2026 schema


async def test_discover_answers_without_client_info(app: App) -> None:
    meta = {k: v for k, v in META.items() if k != META_CLIENT_INFO}
    reply = await Stateless(server_of(app)).request("server/discover", meta=meta)
    assert reply["result"]["supportedVersions"][0] == versions.STATELESS


# ------------------------------------------------------------------ the _meta checks


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {META_CLIENT_CAPABILITIES: {}},
        {META_PROTOCOL_VERSION: versions.STATELESS},
        {META_PROTOCOL_VERSION: versions.STATELESS, META_CLIENT_CAPABILITIES: []},
        {**META, META_CLIENT_INFO: "me"},
        {**META, META_LOG_LEVEL: "loud"},
    ],
    ids=["no-meta", "no-version", "no-capabilities", "capabilities-not-object", "client-info-not-object", "bad-log-level"],
)
async def test_a_malformed_meta_is_invalid_params_with_the_request_id(app: App, meta: dict[str, Any] | None) -> None:
    params: dict[str, Any] = {} if meta is None else {"_meta": meta}
    message = {"jsonrpc": "2.0", "id": "r-7", "method": "tools/list", "params": params}
    reply = await Stateless(server_of(app)).send(message)
    assert reply["id"] == "r-7" and reply["error"]["code"] == jsonrpc.INVALID_PARAMS
    assert "_meta" in reply["error"]["message"]


@pytest.mark.parametrize("requested", ["v999.0.0", "2025-11-25", "2027-01-01"])
async def test_an_unsupported_version_lists_what_is_supported(app: App, requested: str) -> None:
    reply = await Stateless(server_of(app)).request("server/discover", meta={**META, META_PROTOCOL_VERSION: requested})
    error = reply["error"]
    assert error["code"] == UNSUPPORTED_PROTOCOL_VERSION == -32022
    assert error["data"] == {"supported": list(versions.REVISIONS), "requested": requested}


def test_a_2026_request_is_told_from_a_classic_one() -> None:
    def message(method: str, meta: dict[str, Any] | None) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {} if meta is None else {"_meta": meta}}

    assert stateless_request(message("server/discover", None))  # the probe, whatever it carries
    assert stateless_request(message("tools/list", META))
    assert stateless_request(message("tools/list", {**META, META_PROTOCOL_VERSION: "v9"}))  # refused with -32022 there
    assert not stateless_request(message("tools/list", None))
    assert not stateless_request(message("tools/list", {"progressToken": 1}))
    assert not stateless_request(message("tools/list", {**META, META_PROTOCOL_VERSION: "2025-11-25"}))
    assert not stateless_request(message("initialize", None))
    assert not stateless_request([message("server/discover", None)])


def test_a_missing_capability_error_names_it_as_a_capabilities_object() -> None:
    error = missing_capability({"sampling": {}}).to_response(4)
    assert error["id"] == 4 and error["error"]["code"] == -32021
    assert error["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


# ------------------------------------------------------------------ results


async def test_every_result_carries_its_type_and_the_server(app: App) -> None:
    client = Stateless(server_of(app))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("tools/list", {}),
        (
            "tools/call",
            {"name": "remember", "arguments": {"content": "pgbouncer needs pool_mode=transaction", "topic": "pg", "type": "fact"}},
        ),
        ("tools/call", {"name": "remember", "arguments": {}}),  # a tool error is a result too
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "nothing"}, "argument": {"name": "x", "value": ""}}),
    ]
    for method, params in calls:
        reply = await client.request(method, params)
        if "error" in reply:
            continue  # completion of an unknown prompt may be refused; errors carry no result fields
        result = reply["result"]
        assert result["resultType"] == "complete", method
        assert result["_meta"][META_SERVER_INFO]["name"] == "memento", method


async def test_lists_and_reads_carry_honest_caching_hints(app: App) -> None:
    client = Stateless(server_of(app))
    await client.result("tools/call", {"name": "remember", "arguments": {"content": "cache me not", "topic": "cache", "type": "fact"}})
    hints = {}
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        result = await client.result(method)
        hints[method] = (result["ttlMs"], result["cacheScope"])
    uri = (await client.result("resources/list"))["resources"][0]["uri"]
    read = await client.result("resources/read", {"uri": uri})
    hints["resources/read"] = (read["ttlMs"], read["cacheScope"])
    # configuration is the same for everyone; memories are the caller's and change on every write
    assert hints["tools/list"][1] == hints["prompts/list"][1] == hints["resources/templates/list"][1] == "public"
    assert hints["resources/list"] == hints["resources/read"] == (0, "private")
    assert all(isinstance(ttl, int) and ttl >= 0 for ttl, _ in hints.values())
    call = await client.result("tools/call", {"name": "recall", "arguments": {"keywords": ["cache"]}})
    assert "ttlMs" not in call and "cacheScope" not in call  # a tool call is not cacheable


async def test_tools_list_is_the_same_for_every_caller_and_every_time(app: App) -> None:
    server = server_of(app)
    agent = Principal(subject="agent-a-key", agent_id="agent-a")
    first = await Stateless(server).result("tools/list")
    again = await Stateless(server).result("tools/list")
    other = await Stateless(server, agent).result("tools/list", capabilities={"sampling": {}, "elicitation": {}})
    assert first["tools"] == again["tools"] == other["tools"]
    assert [tool["name"] for tool in first["tools"]][:3] == ["remember", "recall", "forget"]


async def test_a_missing_resource_is_invalid_params_at_2026_and_32002_before(app: App) -> None:
    server = server_of(app)
    params = {"uri": "memory://fragments/frag-nowhere"}
    reply = await Stateless(server).request("resources/read", params)
    assert reply["error"]["code"] == jsonrpc.INVALID_PARAMS and reply["error"]["data"] == {"uri": params["uri"]}
    unknown = await Stateless(server).request("resources/read", {"uri": "nothing://here"})
    assert unknown["error"]["code"] == jsonrpc.INVALID_PARAMS
    session = server.create_session()
    await initialize(server, session, "2025-11-25")
    old = await server.handle({"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": params}, session)
    assert isinstance(old, dict) and old["error"]["code"] == -32002


# ------------------------------------------------------------------ logging


async def test_log_messages_only_when_the_request_asks_and_at_its_level(app: App) -> None:
    arguments = {"name": "recall", "arguments": {"keywords": ["anything"]}}
    quiet = Stateless(server_of(app))
    await quiet.result("tools/call", arguments)
    assert [m for m in quiet.related if m.get("method") == "notifications/message"] == []

    above = Stateless(server_of(app))
    await above.result("tools/call", arguments, log_level="info")  # the call is logged at debug
    assert [m for m in above.related if m.get("method") == "notifications/message"] == []

    verbose = Stateless(server_of(app))
    await verbose.result("tools/call", arguments, log_level="debug")
    logged = [m for m in verbose.related if m.get("method") == "notifications/message"]
    assert [m["params"]["level"] for m in logged] == ["debug"]
    assert logged[0]["params"]["data"] == {"event": "tools/call", "tool": "recall"}


# ------------------------------------------------------------------ removed methods, both eras


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "no/such"])
async def test_methods_2026_removed_are_not_found(app: App, method: str) -> None:
    params = {"level": "info", "uri": "memory://stats", "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
    reply = await Stateless(server_of(app)).request(method, params)
    assert reply["id"] == 1 and reply["error"]["code"] == jsonrpc.METHOD_NOT_FOUND


async def test_the_same_server_keeps_serving_a_classic_session(app: App) -> None:
    server = server_of(app)
    client = Stateless(server)
    assert (await client.request("ping"))["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
    session = server.create_session()
    init = await initialize(server, session, "2025-11-25")
    assert init["protocolVersion"] == "2025-11-25" and "tasks" in init["capabilities"]
    for method, params in (("ping", {}), ("logging/setLevel", {"level": "warning"})):
        reply = await server.handle({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}, session)
        assert reply == {"jsonrpc": "2.0", "id": 2, "result": {}}  # no resultType, no _meta: byte for byte as before
    listed = await server.handle({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, session)
    assert isinstance(listed, dict)
    assert "resultType" not in listed["result"] and "ttlMs" not in listed["result"] and "_meta" not in listed["result"]
    assert session.log_level == "warning"
    assert (await client.request("ping"))["error"]["code"] == jsonrpc.METHOD_NOT_FOUND  # a session does not leak into 2026
    assert server.sessions() == [session]  # stateless requests leave no session behind


# ------------------------------------------------------------------ cancellation


async def test_a_cancelled_2026_request_gets_no_response(app: App) -> None:
    waiter = Waiter()
    client = Stateless(server_of(app, waiter))
    in_flight: dict[Any, Any] = {}
    replies: list[Any] = []

    async def call() -> None:
        message = {"jsonrpc": "2.0", "id": "w", "method": "probe/wait", "params": {"_meta": META}}
        replies.append(await client.send(message, in_flight))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(5):
            await waiter.started.wait()
        assert list(in_flight) == ["w"]
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w"}}
        assert await client.send(note, in_flight) is None
    assert replies == [None] and in_flight == {}


# ------------------------------------------------------------------ stdio, real processes


@pytest.fixture
def server_env(tmp_path: Path, store_env: StoreEnv) -> dict[str, str]:
    return helper_env(store_env(tmp_path))


class StdioPeer:
    """A raw newline-delimited JSON-RPC peer on a real `memento serve --transport stdio`."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [*SERVE, "--transport", "stdio"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def reply_to(self, rid: Any) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:  # notifications may come first
            line = self.process.stdout.readline()
            assert line, "the server closed stdout"
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == rid and "method" not in message:
                return message

    def call(self, rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return self.reply_to(rid)

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=TIMEOUT_S)


@pytest.fixture
def stdio_peer(server_env: dict[str, str]) -> Iterator[StdioPeer]:
    peer = StdioPeer(server_env)
    try:
        yield peer
    finally:
        if peer.process.poll() is None:
            peer.process.kill()
            peer.process.wait(timeout=TIMEOUT_S)


@pytest.mark.backends("sqlite")
def test_stdio_serves_a_2026_client_and_a_classic_one_on_one_connection(stdio_peer: StdioPeer) -> None:
    discover = stdio_peer.call(1, "server/discover", {"_meta": META})  # the probe, on a connection never initialised
    assert discover["result"]["supportedVersions"][0] == "2026-07-28" and discover["result"]["resultType"] == "complete"
    remembered = stdio_peer.call(
        2, "tools/call", {"name": "remember", "arguments": {"content": "stdio speaks 2026", "topic": "wire", "type": "fact"}, "_meta": META}
    )
    assert remembered["result"]["isError"] is False and remembered["result"]["_meta"][META_SERVER_INFO]["name"] == "memento"
    assert stdio_peer.call(3, "ping", {"_meta": META})["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
    bad = stdio_peer.call(4, "tools/list", {"_meta": {**META, META_PROTOCOL_VERSION: "1900-01-01"}})
    assert bad["error"]["code"] == -32022 and bad["error"]["data"]["requested"] == "1900-01-01"
    assert stdio_peer.call(5, "tools/list")["error"]["code"] == jsonrpc.INVALID_REQUEST  # classic, not initialised yet

    init = stdio_peer.call(
        6, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    )
    assert init["result"]["protocolVersion"] == "2025-11-25"
    stdio_peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert stdio_peer.call(7, "ping") == {"jsonrpc": "2.0", "id": 7, "result": {}}
    recalled = stdio_peer.call(8, "tools/call", {"name": "recall", "arguments": {"keywords": ["stdio"]}})
    assert "resultType" not in recalled["result"] and "stdio speaks 2026" in recalled["result"]["content"][0]["text"]
    again = stdio_peer.call(9, "tools/list", {"_meta": META})  # 2026 requests still go stateless after initialize
    assert again["result"]["resultType"] == "complete" and again["result"]["cacheScope"] == "public"
    assert stdio_peer.close() == 0


@pytest.mark.backends("sqlite", "postgres+redis")
async def test_the_official_client_negotiates_2026_over_stdio_and_drives_the_tools(server_env: dict[str, str]) -> None:
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=server_env)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:  # mode="auto": discover first
        drive = ToolDriver(client)
        assert client.session.protocol_version == "2026-07-28"
        assert client.session.server_info is not None and client.session.server_info.name == "memento"
        tools = await client.list_tools()
        assert {tool.name for tool in tools.tools} == TOOL_NAMES | {"session"}  # 2026: the session tool (mcp/handles.py)
        start = await drive("context", {"tokenBudget": 1500})
        assert start["coreMemory"] == []
        error = await drive(
            "remember", {"content": "API pods get ECONNREFUSED from postgres after a node restart", "topic": "db", "type": "error"}
        )
        fix = await drive("remember", {"content": "Restart pgbouncer, then roll the API deployment", "topic": "db", "type": "procedure"})
        fact = await drive("remember", {"content": "Staging runs in eu-west-1", "topic": "infra", "type": "fact"})
        linked = await drive("link", {"fromId": error["id"], "toId": fix["id"], "relationType": "resolved_by"})
        assert linked["relationType"] == "resolved_by"
        recalled = await drive("recall", {"keywords": ["postgres"], "topic": "db"})
        assert error["id"] in {f["id"] for f in recalled["fragments"]}
        assert (await drive("amend", {"id": fix["id"], "importance": 0.9}))["versionArchived"] is True
        graph = await drive("graph_explore", {"startId": error["id"]})
        assert [n["id"] for n in graph["nodes"]] == [fix["id"]]
        assert (await drive("pin", {"id": fact["id"]}))["pinned"] is True
        assert (await drive("unpin", {"id": fact["id"]}))["pinned"] is False
        assert await drive("feedback", {"id": fix["id"], "event": "helpful"})
        exported = await drive("export", {"format": "ndjson"})
        assert json.loads(exported["text"].splitlines()[-1])["kind"] == "end"
        reflected = await drive("reflect", {"summary": "Diagnosed the postgres outage", "decisions": ["Run pgbouncer as a DaemonSet"]})
        assert reflected["count"] >= 1
        assert (await drive("tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": True}))["success"] is True
        assert await drive("memory_consolidate", {})
        total = (await drive("memory_stats", {}))["total"]
        assert (await drive("forget", {"id": fact["id"]}))["deleted"] == [fact["id"]]  # no elicitation declared: no question
        assert (await drive("memory_stats", {}))["total"] == total - 1
        bad = await client.call_tool("remember", {"content": "x", "topic": "t", "type": "rumour"})
        assert bad.is_error is True

        resources = await client.list_resources()
        uris = [str(resource.uri) for resource in resources.resources]
        assert "memory://stats" in uris
        read = await client.read_resource("memory://stats")
        assert json.loads(getattr(read.contents[0], "text", "{}"))["total"] == total - 1
        prompts = await client.list_prompts()
        assert prompts.prompts, "Memento serves prompts"
        assert (await drive("restore", {"id": fact["id"]}))["id"] == fact["id"]  # the forget above was soft
        erased = await drive("forget", {"id": fact["id"], "mode": "hard", "force": True})
        assert (await drive("verify_erasure", {"receipt": erased["receipt"]}))["verified"] is True
        # working memory through a server-minted handle (mcp/handles.py)
        handle = (await drive("session", {"action": "open"}))["session"]
        note = {"content": "Currently bisecting the flaky login test", "topic": "work", "type": "fact", "scope": "session"}
        assert (await drive("remember", {**note, "session": handle}))["created"] is True
        in_session = await drive("recall", {"text": "bisecting flaky login", "session": handle})
        assert note["content"] in [f["content"] for f in in_session["fragments"]]
        assert await drive("summarize_thread", {"keep": True, "session": handle})
        assert (await drive("session", {"action": "close", "session": handle}))["success"] is True
        assert {tool.name for tool in tools.tools} == drive.called, "every listed tool is driven"


# ------------------------------------------------------------------ helpers


async def initialize(server: McpServer, session: Session, version: str) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "classic", "version": "1"}}
    reply = await server.handle({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, session)
    await server.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert isinstance(reply, dict)
    result: dict[str, Any] = reply["result"]
    return result


async def handshake_of(server: McpServer) -> dict[str, Any]:
    session = server.create_session()
    try:
        return await initialize(server, session, "2025-11-25")
    finally:
        await server.close_session(session.id)


def app_version() -> str:
    import memento

    return memento.__version__
