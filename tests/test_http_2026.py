"""Streamable HTTP at MCP 2026-07-28 against a real uvicorn server: no sessions, request headers
checked against the body (SEP-2243), `subscriptions/listen`, and the handshake revisions
unchanged beside it on the same endpoint.

The listening socket is bound before the server starts, so there is no readiness poll.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from mcp import Client
from mcp_helpers import ToolDriver

from memento.app import App, build_app
from memento.mcp.subscriptions import subscriptions_of
from memento.settings import Settings
from memento.web import create_http_app

pytestmark = pytest.mark.anyio
TIMEOUT_S = 20.0
REVISION = "2026-07-28"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
META = {
    "io.modelcontextprotocol/protocolVersion": REVISION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "0"},
}
KEYS = [
    {"name": "alice", "key": "alice-key-0123456789abcdef", "agent": "alice", "access": "read-write"},
    {"name": "bob", "key": "bob-key-0123456789abcdef01", "agent": "bob", "access": "read-write"},
]
ALICE = {"Authorization": "Bearer alice-key-0123456789abcdef"}
BOB = {"Authorization": "Bearer bob-key-0123456789abcdef01"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> App:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return build_app(Settings())


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    built = _app(tmp_path, monkeypatch, MEMENTO_CONFORMANCE_FIXTURES="1")
    yield built
    built.close()


@pytest.fixture
def plain_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    built = _app(tmp_path, monkeypatch)
    yield built
    built.close()


@pytest.fixture
def keyed_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    built = _app(tmp_path, monkeypatch, MEMENTO_KEYS=json.dumps(KEYS))
    yield built
    built.close()


@contextlib.asynccontextmanager
async def serving_mcp(app: App) -> AsyncIterator[tuple[str, Any]]:
    """The endpoint's URL and the `McpHttp` behind it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    asgi = create_http_app(app)
    server = uvicorn.Server(uvicorn.Config(asgi, log_config=None, lifespan="on", timeout_graceful_shutdown=3))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield f"http://127.0.0.1:{port}/mcp", asgi.state.mcp
        finally:
            asgi.state.mcp._close_streams()
            server.should_exit = True


@contextlib.asynccontextmanager
async def serving(app: App) -> AsyncIterator[str]:
    async with serving_mcp(app) as (url, _):
        yield url


def name_of(method: str, params: dict[str, Any]) -> str | None:
    field = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method)
    value = params.get(field) if field else None
    return value if isinstance(value, str) else None


def headers_for(method: str, params: dict[str, Any], **extra: str) -> dict[str, str]:
    """The headers a conforming 2026 client sends with `method`."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": REVISION,
        "Mcp-Method": method,
    }
    name = name_of(method, params)
    if name is not None:
        headers["Mcp-Name"] = name
    return {**headers, **extra}


def body(method: str, params: dict[str, Any] | None = None, rid: int | str = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {}), "_meta": META}}


async def post(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any] | None = None, *, headers: dict[str, str] | None = None
) -> httpx.Response:
    params = params or {}
    sent = headers if headers is not None else headers_for(method, params)
    return await http.post(url, json=body(method, params), headers=sent)


def answer(reply: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response of a POST answered as JSON or as an SSE stream."""
    if reply.headers.get("content-type", "").startswith("application/json"):
        message: dict[str, Any] = reply.json()
        return message
    for line in reply.text.splitlines():
        if line.startswith("data:"):
            candidate = json.loads(line[5:])
            if "result" in candidate or "error" in candidate:
                return dict(candidate)
    raise AssertionError(f"no response in {reply.text!r}")


async def tool(http: httpx.AsyncClient, url: str, name: str, arguments: dict[str, Any], **headers: str) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    reply = await post(http, url, "tools/call", params, headers=headers_for("tools/call", params, **headers))
    assert reply.status_code == 200, reply.text
    result = answer(reply)["result"]
    assert result["resultType"] == "complete" and not result.get("isError"), result
    payload: dict[str, Any] = json.loads(result["content"][0]["text"])
    return payload


class Events:
    """The data messages of one SSE response, in order (comments skipped)."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()

    async def next(self) -> dict[str, Any]:
        with anyio.fail_after(TIMEOUT_S):
            async for line in self.lines:
                if line.startswith("data:") and line[5:].strip():
                    message: dict[str, Any] = json.loads(line[5:])
                    return message
        raise AssertionError("the stream ended")


# ------------------------------------------------------------------ sessionless requests


async def test_a_2026_request_is_answered_without_a_session(app: App) -> None:
    async with serving_mcp(app) as (url, mcp), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        discovered = await post(http, url, "server/discover")
        assert discovered.status_code == 200, discovered.text
        assert "mcp-session-id" not in discovered.headers
        result = discovered.json()["result"]
        assert REVISION in result["supportedVersions"] and result["resultType"] == "complete"

        # Every request stands alone: what one stores, the next finds, with no session between.
        stored = await tool(
            http, url, "remember", {"content": "The staging database lives in eu-west-3.", "topic": "infra", "type": "fact"}
        )
        found = await tool(http, url, "recall", {"text": "where is the staging database", "topic": "infra", "type": "fact"})
        assert [f["id"] for f in found["fragments"]] == [stored["id"]]

        # A 2026 request naming an Mcp-Session-Id is still answered statelessly; nothing is echoed.
        listed = await post(http, url, "tools/list", headers=headers_for("tools/list", {}, **{"Mcp-Session-Id": "made-up"}))
        assert listed.status_code == 200 and "mcp-session-id" not in listed.headers
        assert {"remember", "recall"} <= {t["name"] for t in listed.json()["result"]["tools"]}
        assert mcp.server.session_table == {}  # nothing was kept


async def test_statuses_of_2026_errors(app: App) -> None:
    async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        # Removed methods and unknown ones: 404 with -32601.
        for method in ("ping", "resources/subscribe", "initialize", "unknown/method"):
            reply = await post(http, url, method)
            assert reply.status_code == 404 and reply.json()["error"]["code"] == -32601, (method, reply.text)
        # _meta without the client's capabilities: 400 with -32602, the request's id echoed.
        bare = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "server/discover",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": REVISION}},
        }
        reply = await http.post(url, json=bare, headers=headers_for("server/discover", {}))
        assert reply.status_code == 400 and reply.json()["error"]["code"] == -32602 and reply.json()["id"] == 7
        # A version nobody speaks, in header and body alike: 400 with -32022 and the list.
        odd = {**body("server/discover"), "params": {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "v999"}}}
        reply = await http.post(url, json=odd, headers=headers_for("server/discover", {}, **{"MCP-Protocol-Version": "v999"}))
        assert reply.status_code == 400 and reply.json()["error"]["code"] == -32022
        assert REVISION in reply.json()["error"]["data"]["supported"]


async def test_get_and_delete_are_refused_at_2026(app: App) -> None:
    async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        stream = await http.get(url, headers={"Accept": "text/event-stream", "MCP-Protocol-Version": REVISION})
        assert stream.status_code == 405 and stream.headers["allow"] == "POST"
        ended = await http.delete(url, headers={"MCP-Protocol-Version": REVISION, "Mcp-Session-Id": "x"})
        assert ended.status_code == 405


# ------------------------------------------------------------------ headers (SEP-2243)


@pytest.mark.parametrize(
    "change",
    [
        {"Mcp-Method": None},  # missing
        {"Mcp-Method": "tools/list"},  # another method
        {"Mcp-Method": "TOOLS/CALL"},  # values are case-sensitive
        {"Mcp-Name": None},
        {"Mcp-Name": "recall"},
        {"Mcp-Name": "=?base64?cmVjYWxs?="},  # "recall", encoded: decoded, still not the body's
        {"MCP-Protocol-Version": None},
        {"MCP-Protocol-Version": "2025-11-25"},
    ],
)
async def test_missing_or_mismatched_headers_are_refused_and_nothing_happens(app: App, change: dict[str, str | None]) -> None:
    params = {"name": "remember", "arguments": {"content": "Header test: this must never be stored.", "topic": "headers", "type": "fact"}}
    headers = headers_for("tools/call", params)
    for name, value in change.items():
        if value is None:
            del headers[name]
        else:
            headers[name] = value
    async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        reply = await http.post(url, json=body("tools/call", params, rid=41), headers=headers)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["code"] == -32020 and reply.json()["id"] == 41
        found = await tool(http, url, "recall", {"text": "header test", "topic": "headers", "type": "fact"})
        assert found["fragments"] == []


async def test_header_names_are_case_insensitive_and_mcp_name_base64_decoded(app: App) -> None:
    params = {"name": "remember", "arguments": {"content": "Stored through lower-case headers.", "topic": "headers", "type": "fact"}}
    headers = {k.lower(): v for k, v in headers_for("tools/call", params).items()}
    headers["mcp-name"] = "=?base64?" + base64.b64encode(b"remember").decode() + "?="
    async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        reply = await http.post(url, json=body("tools/call", params), headers=headers)
        assert reply.status_code == 200 and answer(reply)["result"]["isError"] is False, reply.text


@pytest.mark.parametrize(
    ("region", "header", "status"),
    [
        ("us-west1", "us-west1", 200),
        ("Hello, 世界", "=?base64?" + base64.b64encode("Hello, 世界".encode()).decode() + "?=", 200),
        ("SGVsbG8=", "SGVsbG8=", 200),  # no sentinel: a literal
        ("Hello", "=?base64?SGVsbG8?=", 400),  # bad padding
        ("Hello", "=?base64?SGVs!!!bG8=?=", 400),  # not the alphabet
        ("us-west1", "eu-west1", 400),
        ("us-west1", None, 400),  # the argument is there, its header is not
    ],
)
async def test_mcp_param_headers_mirror_x_mcp_header_arguments(app: App, region: str, header: str | None, status: int) -> None:
    params = {"name": "test_mcp_param_header", "arguments": {"region": region}}
    extra = {} if header is None else {"Mcp-Param-Region": header}
    async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        listed = answer(await post(http, url, "tools/list"))["result"]["tools"]
        schema = next(t["inputSchema"] for t in listed if t["name"] == "test_mcp_param_header")
        assert schema["properties"]["region"]["x-mcp-header"] == "Region"
        reply = await http.post(url, json=body("tools/call", params), headers=headers_for("tools/call", params, **extra))
        assert reply.status_code == status, reply.text
        if status == 200:
            assert answer(reply)["result"]["content"][0]["text"] == f"region: {region}"
        else:
            assert reply.json()["error"]["code"] == -32020


# ------------------------------------------------------------------ subscriptions/listen


async def test_listen_stream_receives_the_callers_changes_only(keyed_app: App) -> None:
    topic_uri, sentinel_uri = "memory://topics/deploys", "memory://topics/sentinel"
    wanted = {"resourceSubscriptions": [topic_uri, sentinel_uri], "toolsListChanged": True}
    listen = body("subscriptions/listen", {"notifications": wanted}, rid="L1")
    async with serving(keyed_app) as url, httpx.AsyncClient(timeout=TIMEOUT_S) as http, httpx.AsyncClient(timeout=TIMEOUT_S) as writer:
        headers = {**headers_for("subscriptions/listen", {}), **ALICE}
        async with http.stream("POST", url, json=listen, headers=headers) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            assert "mcp-session-id" not in stream.headers
            events = Events(stream)
            ack = await events.next()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            # tools never change here (tools.listChanged is false): not honoured, so not acknowledged.
            assert ack["params"]["notifications"] == {"resourceSubscriptions": [topic_uri, sentinel_uri]}
            assert ack["params"]["_meta"][SUBSCRIPTION_ID] == "L1"

            # Bob writes to the listed topic: his namespace, not Alice's, so nothing for her.
            await tool(writer, url, "remember", {"content": "Bob's deploy runs at noon.", "topic": "deploys", "type": "fact"}, **BOB)
            await tool(writer, url, "remember", {"content": "Alice's deploy runs at 02:00.", "topic": "deploys", "type": "fact"}, **ALICE)
            # A topic she did not list sends nothing (nor the list change she did not ask for).
            await tool(writer, url, "remember", {"content": "Lunch is at one.", "topic": "food", "type": "fact"}, **ALICE)
            await tool(writer, url, "remember", {"content": "Alice's second deploy note.", "topic": "deploys", "type": "fact"}, **ALICE)
            await tool(writer, url, "remember", {"content": "The last write of this test.", "topic": "sentinel", "type": "fact"}, **ALICE)
            seen: list[dict[str, Any]] = []
            while not seen or seen[-1]["params"].get("uri") != sentinel_uri:
                seen.append(await events.next())
            # Changes are delivered in order: had Bob's (or the food topic's) leaked, it would be here.
            assert [(m["method"], m["params"]["uri"]) for m in seen] == [
                ("notifications/resources/updated", topic_uri),
                ("notifications/resources/updated", topic_uri),
                ("notifications/resources/updated", sentinel_uri),
            ]
            assert all(m["params"]["_meta"] == {SUBSCRIPTION_ID: "L1"} for m in seen)


async def test_listen_stream_ends_with_its_response_on_shutdown(app: App) -> None:
    listen = body("subscriptions/listen", {"notifications": {"resourcesListChanged": True}}, rid=9)
    async with serving_mcp(app) as (url, mcp), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        async with http.stream("POST", url, json=listen, headers=headers_for("subscriptions/listen", {})) as stream:
            events = Events(stream)
            ack = await events.next()
            assert ack["params"]["notifications"] == {"resourcesListChanged": True}
            await tool(http, url, "remember", {"content": "A new fragment changes the list.", "topic": "lists", "type": "fact"})
            changed = await events.next()
            assert changed["method"] == "notifications/resources/list_changed"
            assert changed["params"]["_meta"] == {SUBSCRIPTION_ID: 9}
            mcp._close_streams()  # the server shuts down: the listen request is answered
            final = await events.next()
            assert final["id"] == 9 and final["result"]["_meta"][SUBSCRIPTION_ID] == 9
            assert final["result"]["resultType"] == "complete"


async def test_resources_subscribe_is_gone_at_2026_and_listen_is_absent_before(app: App) -> None:
    async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        reply = await post(http, url, "resources/subscribe", {"uri": "memory://stats"})
        assert reply.status_code == 404 and reply.json()["error"]["code"] == -32601
        bad = await post(http, url, "subscriptions/listen", {"notifications": {"resourceSubscriptions": "memory://stats"}})
        assert bad.status_code == 200 and bad.json()["error"]["code"] == -32602
        headers = await open_session(http, url, "2025-11-25")
        classic = await http.post(
            url, json={"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": {"notifications": {}}}, headers=headers
        )
        assert classic.json()["error"]["code"] == -32601


# ------------------------------------------------------------------ the handshake revisions beside


async def open_session(http: httpx.AsyncClient, url: str, version: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    both = {"Accept": "application/json, text/event-stream"}
    reply = await http.post(url, json=init, headers=both)
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["protocolVersion"] == version and "resultType" not in reply.json()["result"]
    headers = {**both, "Mcp-Session-Id": reply.headers["mcp-session-id"], "MCP-Protocol-Version": version}
    assert (await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)).status_code == 202
    return headers


async def test_a_handshake_session_works_as_before_on_the_same_endpoint(app: App) -> None:
    async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        await post(http, url, "server/discover")  # a 2026 client came first: nothing changes for the others
        headers = await open_session(http, url, "2025-11-25")
        ping = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers)
        assert ping.status_code == 200 and ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert (await http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers)).status_code == 200
        subscribed = await http.post(
            url, json={"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe", "params": {"uri": "memory://stats"}}, headers=headers
        )
        assert subscribed.json() == {"jsonrpc": "2.0", "id": 4, "result": {}}
        async with http.stream("GET", url, headers={**headers, "Accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200  # the GET stream is still there for them
        # Without a session id a non-2026 request is refused as before.
        lost = await http.post(url, json={"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, headers={"Accept": headers["Accept"]})
        assert lost.status_code == 400
        assert (await http.delete(url, headers=headers)).status_code == 204


# ------------------------------------------------------------------ the official client


async def test_the_official_client_negotiates_2026_over_http_and_drives_the_tools(plain_app: App) -> None:
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)

    async with serving_mcp(plain_app) as (url, mcp), Client(url, read_timeout_seconds=TIMEOUT_S) as client:  # mode="auto"
        assert client.session.protocol_version == REVISION
        drive = ToolDriver(client)
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"remember", "recall", "forget", "link", "amend", "context", "reflect", "memory_stats"} <= names
        error = await drive("remember", {"content": "Nightly backup fails when the disk is full", "topic": "ops", "type": "error"})
        fix = await drive("remember", {"content": "Rotate the old backups first", "topic": "ops", "type": "procedure"})
        fact = await drive("remember", {"content": "Backups live in bucket b-7", "topic": "ops", "type": "fact"})
        assert (await drive("link", {"fromId": error["id"], "toId": fix["id"], "relationType": "resolved_by"}))["relationType"]
        recalled = await drive("recall", {"keywords": ["backup"], "topic": "ops"})
        assert {error["id"], fix["id"], fact["id"]} <= {f["id"] for f in recalled["fragments"]}
        assert (await drive("amend", {"id": fix["id"], "importance": 0.9}))["versionArchived"] is True
        assert await drive("context", {})
        assert await drive("memory_consolidate", {}, progress_callback=on_progress)
        assert reported  # progress came on the request's own stream
        total = (await drive("memory_stats", {}))["total"]
        assert (await drive("forget", {"id": fact["id"]}))["deleted"] == [fact["id"]]
        assert (await drive("memory_stats", {}))["total"] == total - 1
        read = await client.read_resource("memory://stats")
        assert json.loads(getattr(read.contents[0], "text", "{}"))["total"] == total - 1
        # the rest of the default toolset, and working memory through a server-minted session handle
        assert [n["id"] for n in (await drive("graph_explore", {"startId": error["id"]}))["nodes"]] == [fix["id"]]
        assert (await drive("pin", {"id": fix["id"]}))["pinned"] is True
        assert (await drive("unpin", {"id": fix["id"]}))["pinned"] is False
        assert await drive("feedback", {"id": fix["id"], "event": "helpful"})
        assert (await drive("tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": True}))["success"] is True
        exported = await drive("export", {"format": "ndjson"})
        assert json.loads(exported["text"].splitlines()[-1])["kind"] == "end"
        assert (await drive("reflect", {"summary": "Fixed the nightly backup", "decisions": ["Rotate weekly"]}))["count"] >= 1
        handle = (await drive("session", {"action": "open"}))["session"]
        note = {"content": "Currently checking bucket b-7 quotas", "topic": "ops", "type": "fact", "scope": "session", "session": handle}
        assert (await drive("remember", note))["created"] is True
        in_session = await drive("recall", {"text": "bucket quotas", "session": handle})
        assert "Currently checking bucket b-7 quotas" in [f["content"] for f in in_session["fragments"]]
        outside = await drive("recall", {"text": "bucket quotas"})
        assert "Currently checking bucket b-7 quotas" not in [f["content"] for f in outside["fragments"]]
        assert await drive("summarize_thread", {"keep": True, "session": handle})
        assert (await drive("restore", {"id": fact["id"]}))["id"] == fact["id"]  # forget above was soft
        erased = await drive("forget", {"id": fact["id"], "mode": "hard", "force": True})
        assert (await drive("verify_erasure", {"receipt": erased["receipt"]}))["verified"] is True
        assert (await drive("session", {"action": "close", "session": handle}))["success"] is True
        assert names == drive.called, f"tools never driven over HTTP: {sorted(names - drive.called)}"
        assert mcp.server.session_table == {}  # no protocol session was made for any of it


async def test_closing_a_listen_stream_ends_the_subscription(app: App) -> None:
    listen = body("subscriptions/listen", {"notifications": {"resourcesListChanged": True}}, rid="gone")
    async with serving_mcp(app) as (url, mcp), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        feature = subscriptions_of(mcp.server.features)
        assert feature is not None
        async with http.stream("POST", url, json=listen, headers=headers_for("subscriptions/listen", {})) as stream:
            assert (await Events(stream).next())["method"] == "notifications/subscriptions/acknowledged"
            assert feature.count() == 1 and len(mcp.server.sessions()) == 1  # the listener, in the fan-out
        # The client went away: closing its stream cancelled the request, which let go of the listener.
        with anyio.fail_after(TIMEOUT_S):
            while feature.count():
                await anyio.sleep(0.01)  # the server notices the closed connection on its own time
        assert mcp.server.sessions() == []
