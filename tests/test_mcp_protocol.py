"""The MCP protocol core, driven in-process with raw JSON-RPC dicts against the real app.

The tools/call tests run on SQLite and on PostgreSQL + Redis (the `app` fixture of conftest);
versions, envelopes and framing do not depend on the store and run on SQLite only.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs installed; used to validate schemas only
import pytest
from mcp_helpers import TOOL_NAMES

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.mcp import jsonrpc, versions
from memento.mcp.server import McpServer, Session
from memento.mcp.tools import TOOLS
from memento.settings import Settings

pytestmark = pytest.mark.anyio
both_backends = pytest.mark.backends("sqlite", "postgres+redis")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server(app: App) -> McpServer:
    return McpServer(app)


@pytest.fixture
def structured_server(settings: Settings, clock: Any) -> Iterator[McpServer]:
    """A server with MEMENTO_STRUCTURED_OUTPUT on: outputSchema in tools/list, structuredContent in results."""
    built = build_app(settings.model_copy(update={"structured_output": True}), embedder=HashEmbedder(256), clock=clock)
    if built.keyword_index is not None:
        assert built.keyword_index.wait_ready()
    yield McpServer(built)
    built.close()


class Peer:
    """A scripted client: numbered requests over one session."""

    def __init__(self, server: McpServer, session: Session | None = None) -> None:
        self.server = server
        self.session = session or server.create_session()
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        reply = await self.server.handle(message, self.session)
        assert isinstance(reply, dict) and reply["id"] == self.next_id  # one message, one response
        return reply

    async def initialize(self, version: str = versions.LATEST) -> dict[str, Any]:
        reply = await self.request(
            "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}
        )
        await self.server.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}, self.session)
        return reply

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reply = await self.request("tools/call", {"name": name, "arguments": arguments})
        result: dict[str, Any] = reply["result"]
        return result


def payload(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is False, result
    data: dict[str, Any] = json.loads(result["content"][0]["text"])
    return data


def walk(node: Any) -> Iterator[str]:
    """Every key anywhere in a JSON value."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


# ------------------------------------------------------------------ versions


def test_negotiate_echoes_supported_versions_and_otherwise_offers_the_newest() -> None:
    for version in versions.SUPPORTED:
        assert versions.negotiate(version) == version
    assert versions.negotiate("2099-01-01") == "2025-11-25"
    assert versions.negotiate(None) == "2025-11-25"


@pytest.mark.parametrize("version", versions.SUPPORTED)
async def test_initialize_echoes_a_supported_version(server: McpServer, version: str) -> None:
    peer = Peer(server)
    result = (await peer.initialize(version))["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {"logging": {}, "tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "memento"
    assert result["serverInfo"]["version"] == __import__("memento").__version__
    assert "recall" in result["instructions"]
    assert peer.session.initialized and peer.session.protocol_version == version


async def test_initialize_with_an_unknown_version_answers_the_newest(server: McpServer) -> None:
    result = (await Peer(server).initialize("1999-01-01"))["result"]
    assert result["protocolVersion"] == versions.LATEST


async def test_initialize_without_a_protocol_version_is_invalid_params(server: McpServer) -> None:
    reply = await Peer(server).request("initialize", {"capabilities": {}})
    assert reply["error"]["code"] == jsonrpc.INVALID_PARAMS


async def test_a_second_initialize_is_refused(server: McpServer) -> None:
    peer = Peer(server)
    await peer.initialize()
    assert (await peer.initialize())["error"]["code"] == jsonrpc.INVALID_REQUEST


# ------------------------------------------------------------------ lifecycle and envelopes


async def test_ping_works_before_and_after_initialize(server: McpServer) -> None:
    peer = Peer(server)
    assert (await peer.request("ping"))["result"] == {}
    await peer.initialize()
    assert (await peer.request("ping"))["result"] == {}


async def test_requests_before_initialize_are_refused(server: McpServer) -> None:
    reply = await Peer(server).request("tools/list")
    assert reply["error"]["code"] == jsonrpc.INVALID_REQUEST
    assert "initialize" in reply["error"]["message"]


async def test_unknown_method_is_method_not_found(server: McpServer) -> None:
    peer = Peer(server)
    assert (await peer.request("server/discover"))["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
    await peer.initialize()
    assert (await peer.request("resources/list"))["error"]["code"] == jsonrpc.METHOD_NOT_FOUND


async def test_notifications_and_responses_get_no_reply(server: McpServer) -> None:
    session = server.create_session()
    assert await server.handle({"jsonrpc": "2.0", "method": "notifications/whatever"}, session) is None
    assert await server.handle({"jsonrpc": "2.0", "id": 7, "result": {}}, session) is None


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
        "ping",
    ],
)
async def test_malformed_envelopes_are_invalid_requests(server: McpServer, message: Any) -> None:
    reply = await server.handle(message, server.create_session())
    assert isinstance(reply, dict) and reply["error"]["code"] == jsonrpc.INVALID_REQUEST


def test_malformed_json_is_a_parse_error() -> None:
    with pytest.raises(jsonrpc.JsonRpcError) as caught:
        jsonrpc.decode(b'{"jsonrpc": "2.0", ')
    assert caught.value.to_response()["error"]["code"] == jsonrpc.PARSE_ERROR
    assert caught.value.to_response()["id"] is None


# ------------------------------------------------------------------ tools/list


async def test_tools_list_has_the_eleven_tools_with_self_contained_object_schemas(server: McpServer) -> None:
    peer = Peer(server)
    await peer.initialize()
    result = (await peer.request("tools/list"))["result"]
    assert "nextCursor" not in result
    tools = result["tools"]
    assert {t["name"] for t in tools} == TOOL_NAMES and len(tools) == len(TOOL_NAMES)
    for tool in tools:
        assert tool["description"]
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and "properties" in schema
        assert not {"$ref", "$defs"} & set(walk(schema)), tool["name"]
    remember = next(t for t in tools if t["name"] == "remember")
    assert set(remember["inputSchema"]["required"]) == {"content", "topic", "type"}
    assert "fact" in remember["inputSchema"]["properties"]["type"]["enum"]


async def test_tools_list_pages_with_opaque_cursors(app: App) -> None:
    peer = Peer(McpServer(app, page_size=4))
    await peer.initialize()
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        result = (await peer.request("tools/list", {"cursor": cursor} if cursor else {}))["result"]
        names += [t["name"] for t in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert pages == -(-len(TOOLS) // 4) > 1 and names == [spec.name for spec in TOOLS]


@pytest.mark.parametrize("cursor", ["not-a-cursor", "dG9vbHM6OTk5", 42])
async def test_an_invalid_cursor_is_invalid_params(server: McpServer, cursor: Any) -> None:
    peer = Peer(server)
    await peer.initialize()
    reply = await peer.request("tools/list", {"cursor": cursor})
    assert reply["error"]["code"] == jsonrpc.INVALID_PARAMS


async def test_tool_definitions_follow_the_negotiated_version(server: McpServer) -> None:
    def forget_tool(tools: list[dict[str, Any]]) -> dict[str, Any]:
        return next(t for t in tools if t["name"] == "forget")

    shapes = {}
    for version in versions.SUPPORTED:
        peer = Peer(server)
        await peer.initialize(version)
        shapes[version] = forget_tool((await peer.request("tools/list"))["result"]["tools"])
    assert set(shapes["2024-11-05"]) == {"name", "description", "inputSchema"}
    assert "annotations" in shapes["2025-03-26"] and "outputSchema" not in shapes["2025-03-26"]
    assert shapes["2025-03-26"]["annotations"] == {"title": "Forget", "idempotentHint": True, "openWorldHint": False}
    for version in ("2025-06-18", "2025-11-25"):  # "Forget" says no more than the name: no title; no outputSchema by default
        assert "title" not in shapes[version] and "outputSchema" not in shapes[version]
        assert shapes[version]["annotations"] == {"idempotentHint": True, "openWorldHint": False}


# ------------------------------------------------------------------ tools/call


@both_backends
async def test_every_tool_result_validates_against_its_advertised_output_schema(structured_server: McpServer) -> None:
    """With structured output on: structuredContent of every tool, in every shape it takes
    (optional fields present and absent, compact and verbose), validates against the tool's
    outputSchema; every field name is camelCase."""
    peer = Peer(structured_server)
    await peer.initialize()
    tools = {t["name"]: t for t in (await peer.request("tools/list"))["result"]["tools"]}
    checked: dict[str, int] = {}

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await peer.call(name, arguments)
        data = payload(result)
        assert result["structuredContent"] == data
        schema = tools[name]["outputSchema"]
        assert schema["type"] == "object" and not {"$ref", "$defs"} & set(walk(schema)), name
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.Draft202012Validator(schema).validate(data)
        assert [k for k in walk(data) if "_" in k] == [], name  # data-keyed maps here carry no "_"
        checked[name] = checked.get(name, 0) + 1
        return data

    remember = {
        "content": "OOMKilled in the cart service",
        "topic": "k8s",
        "type": "error",
        "record": {"metadata": {"ticket": "OPS-1"}, "originTrace": {"turn": 3}, "expiresAt": "2099-01-01T00:00:00Z"},
    }
    err = (await call("remember", remember))["id"]
    assert "message" in await call("remember", remember)  # the duplicate
    fix = (await call("remember", {"content": "Raise the cart memory limit to 1Gi", "topic": "k8s", "type": "procedure"}))["id"]
    await call(
        "remember", {"content": "scratch note", "topic": "scratch", "type": "fact", "scope": "session", "sessionId": peer.session.id}
    )
    await call("link", {"fromId": err, "toId": fix, "relationType": "resolved_by"})
    found = await call("recall", {"text": "OOMKilled", "limit": 1})
    assert [f["why"].startswith("linked") for f in found["fragments"]] == [False, True]  # ranked, then its neighbour
    await call("recall", {"keywords": ["nothing-matches-this"]})
    assert "tiers" in await call("recall", {"text": "OOMKilled", "verbose": True})
    assert "truncated" in (await call("remember", {"content": "long " * 100, "topic": "k8s", "type": "fact"}))
    await call("amend", {"id": fix, "importance": 0.9})
    assert "supersededId" in await call("amend", {"id": fix, "content": "Raise it to 2Gi", "supersedes": True})
    await call("graph_explore", {"startId": err})
    await call("graph_explore", {"startId": err, "verbose": True})
    await call("context", {"sessionId": peer.session.id})
    assert "rendered" in await call("context", {"sessionId": peer.session.id, "verbose": True})
    summary = await call("summarize_thread", {"sessionId": peer.session.id})  # the scratch note (004 §5.1)
    assert (summary["itemCount"], summary["method"]) == (1, "extractive") and "fallback" not in summary
    await call("reflect", {"summary": "Fixed the cart OOM", "task_effectiveness": {"overall_success": True}})
    await call("tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": False})
    await call("memory_stats", {})
    await call("memory_consolidate", {})
    await call("pin", {"id": fix})
    await call("unpin", {"id": fix})
    assert await call("feedback", {"id": fix, "event": "helpful"})
    first = await call("export", {"format": "csv", "limit": 1})
    assert first["nextCursor"] and (await call("export", {"format": "csv", "cursor": first["nextCursor"]}))["nextCursor"] is None
    await call("forget", {"topic": "scratch"})
    gone = (await call("remember", {"content": "to be erased", "topic": "erase", "type": "fact"}))["id"]
    assert "restorableUntil" in await call("forget", {"id": gone})
    await call("restore", {"id": gone})
    receipt = (await call("forget", {"id": gone, "mode": "hard"}))["receipt"]
    assert (await call("verify_erasure", {"receipt": receipt}))["verified"] is True
    assert set(checked) == TOOL_NAMES


def test_output_schemas_come_from_the_result_models() -> None:
    for spec in TOOLS:
        schema = spec.output_schema()
        assert schema["type"] == "object" and set(schema["properties"]) == {
            f.serialization_alias or f.alias or name for name, f in spec.result_model.model_fields.items() if not f.exclude
        }, spec.name


@both_backends
@pytest.mark.parametrize("version", versions.SUPPORTED)
async def test_structured_content_only_from_2025_06_18(structured_server: McpServer, server: McpServer, version: str) -> None:
    plain = Peer(server)
    await plain.initialize(version)
    once = await plain.call("remember", {"content": "Redis listens on 6380", "topic": "cache", "type": "fact"})
    assert payload(once)["created"] is True and "structuredContent" not in once  # by default the JSON is sent once
    peer = Peer(structured_server)
    await peer.initialize(version)
    result = await peer.call("remember", {"content": "Redis listens on 6379", "topic": "cache", "type": "fact"})
    data = payload(result)
    assert data["created"] is True
    if versions.at_least(version, "2025-06-18"):
        assert result["structuredContent"] == data
    else:
        assert "structuredContent" not in result


@both_backends
async def test_invalid_arguments_are_a_tool_error_naming_the_field_and_change_nothing(server: McpServer) -> None:
    peer = Peer(server)
    await peer.initialize()
    before = payload(await peer.call("memory_stats", {}))["total"]
    for bad in (
        {"topic": "db", "type": "fact"},  # content missing
        {"content": "x", "topic": "db", "type": "rumour"},
        {"content": "x", "topic": "db", "type": "fact", "importance": "high"},
        {"content": "x", "topic": "db", "type": "fact", "colour": "blue"},
    ):
        result = await peer.call("remember", bad)
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert "invalid_argument" in text
        assert any(field in text for field in ("content", "type", "importance", "colour")), text
        assert text.startswith("Error (invalid_argument): ") and "structuredContent" not in result
    assert payload(await peer.call("memory_stats", {}))["total"] == before


@both_backends
async def test_service_errors_are_tool_errors_with_their_code(server: McpServer) -> None:
    peer = Peer(server)
    await peer.initialize()
    result = await peer.call("graph_explore", {"startId": "frag-missing"})
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Error (not_found): ")
    assert "frag-missing" in result["content"][0]["text"]


async def test_unknown_tool_is_invalid_params(server: McpServer) -> None:
    peer = Peer(server)
    await peer.initialize()
    reply = await peer.request("tools/call", {"name": "drop_database", "arguments": {}})
    assert reply["error"]["code"] == jsonrpc.INVALID_PARAMS
    reply = await peer.request("tools/call", {"name": "recall", "arguments": ["x"]})
    assert reply["error"]["code"] == jsonrpc.INVALID_PARAMS


async def test_an_unexpected_exception_is_an_internal_tool_error(
    server: McpServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_: object) -> dict[str, object]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(server.app.service.store, "stats", explode)
    peer = Peer(server)
    await peer.initialize()
    result = await peer.call("memory_stats", {})
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Error (internal): internal error"
    assert "disk on fire" in caplog.text  # the traceback is logged, not sent
    assert (await peer.request("ping"))["result"] == {}


@both_backends
async def test_session_scoped_memory_carries_the_session_and_ends_with_it(server: McpServer) -> None:
    peer = Peer(server)
    await peer.initialize()
    stored = payload(
        await peer.call(
            "remember",
            {"content": "scratch note: try the blue-green deploy first", "topic": "deploy", "type": "procedure", "scope": "session"},
        )
    )
    found = payload(await peer.call("recall", {"text": "blue-green deploy", "verbose": True}))
    assert [f["scope"] for f in found["fragments"] if f["id"] == stored["id"]] == ["session"]
    found = payload(await peer.call("context", {"types": ["procedure"]}))
    assert [f["id"] for f in found["workingMemory"]] == [stored["id"]]
    assert await server.close_session(peer.session.id) is True
    assert await server.close_session(peer.session.id) is False
    other = Peer(server)
    await other.initialize()
    found = payload(await other.call("context", {"types": ["procedure"], "sessionId": peer.session.id}))
    assert found["workingMemory"] == []


# ------------------------------------------------------------------ stdio framing


async def test_stdio_answers_line_by_line_and_closes_the_app_at_eof(app: App) -> None:
    from memento.mcp.stdio import serve_stdio

    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    raw = b"".join(json.dumps(line).encode() + b"\n" for line in lines) + b"\n{oops\n"
    out = io.BytesIO()
    await serve_stdio(app, stdin=io.BytesIO(raw), stdout=out)
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    by_id = {r["id"]: r for r in replies}
    assert len(replies) == 3  # the notification and the blank line got no reply
    assert by_id[1]["result"]["protocolVersion"] == "2025-03-26"
    assert len(by_id[2]["result"]["tools"]) == len(TOOL_NAMES)
    assert by_id[None]["error"]["code"] == jsonrpc.PARSE_ERROR
    assert app._closed


@both_backends
async def test_parameters_are_camel_case_and_the_seeds_snake_case_spellings_are_accepted(server: McpServer) -> None:
    peer = Peer(server)
    await peer.initialize()
    camel = payload(
        await peer.call(
            "reflect",
            {
                "summary": "Moved the queue",
                "errorsResolved": ["Queue stalled: raised the prefetch"],
                "taskEffectiveness": {"overallSuccess": True},
            },
        )
    )
    snake = payload(
        await peer.call(
            "reflect",
            {
                "summary": "Moved the cache",
                "errors_resolved": ["Cache stampede: added jitter"],
                "new_procedures": ["Warm the cache before a deploy"],
                "task_effectiveness": {"overall_success": False, "tool_pain_points": ["recall missed the runbook"]},
            },
        )
    )
    assert [f["type"] for f in camel["fragments"]] == ["fact", "error"] and camel["taskFeedbackId"] > 0
    assert [f["type"] for f in snake["fragments"]] == ["fact", "error", "procedure"] and snake["taskFeedbackId"] > 0
    assert payload(await peer.call("tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": True}))["success"] is True
    assert payload(await peer.call("recall", {"text": "cache jitter", "token_budget": 300}))["tokenBudget"] == 300
    before = payload(await peer.call("memory_stats", {}))["total"]
    both = await peer.call("recall", {"text": "cache", "tokenBudget": 300, "token_budget": 400})
    assert both["isError"] is True and "tokenBudget and token_budget" in both["content"][0]["text"]
    twice = await peer.call("reflect", {"summary": "x", "errorsResolved": ["a"], "errors_resolved": ["b"]})
    assert twice["isError"] is True and "errorsResolved and errors_resolved" in twice["content"][0]["text"]
    assert payload(await peer.call("memory_stats", {}))["total"] == before  # refused calls stored nothing
