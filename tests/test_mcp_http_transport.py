"""Streamable HTTP and legacy HTTP+SSE against a real uvicorn server running in the test's loop.

The listening socket is bound before the server starts, so there is no readiness poll: a
connection made early waits in the socket's backlog.
"""

from __future__ import annotations

import contextlib
import json
import socket
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from mcp import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPDeprecationWarning

from memento.app import App, build_app
from memento.mcp.features import Handler, NotificationHandler, RequestContext, ServerHub
from memento.settings import Settings
from memento.web import create_http_app

pytestmark = pytest.mark.anyio
TIMEOUT_S = 20.0
BOTH = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    built = build_app(Settings())
    yield built
    built.close()


@pytest.fixture
def fixtures_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    """An app with the conformance fixtures (test_reconnection among them)."""
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.setenv("MEMENTO_CONFORMANCE_FIXTURES", "1")
    built = build_app(Settings())
    yield built
    built.close()


class Pusher:
    """`test/push {start, count}` sends notifications on the session's standalone channel."""

    def capabilities(self, version: str) -> dict[str, Any]:
        return {}

    def handlers(self) -> Mapping[str, Handler]:
        return {"test/push": self.push, "test/cut": self.cut}

    def notification_handlers(self) -> Mapping[str, NotificationHandler]:
        return {}

    def attach(self, hub: ServerHub) -> None:
        pass

    async def push(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        for n in range(params["start"], params["start"] + params["count"]):
            await ctx.session.notify("notifications/test", {"n": n})
        return {}

    async def cut(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        """`test/cut {retry}` closes its own stream mid-request, then answers."""
        closed = await ctx.close_stream(retry_ms=params.get("retry"))
        await anyio.sleep(0.05)
        return {"closed": closed}


@contextlib.asynccontextmanager
async def serving(app: App) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    asgi = create_http_app(app, features=[Pusher()])
    server = uvicorn.Server(uvicorn.Config(asgi, log_config=None, lifespan="on", timeout_graceful_shutdown=3))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            asgi.state.mcp._close_streams()
            server.should_exit = True


async def open_session(http: httpx.AsyncClient, url: str, version: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    reply = await http.post(url, json=init, headers=BOTH)
    assert reply.status_code == 200, reply.text
    headers = {**BOTH, "Mcp-Session-Id": reply.headers["mcp-session-id"], "MCP-Protocol-Version": version}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=headers)).status_code == 202
    return headers


class SseReader:
    """Events of one SSE response: (id, data) pairs; comments are skipped."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()

    async def next(self) -> tuple[str | None, str, str | None]:
        event_id: str | None = None
        retry: str | None = None
        data: list[str] = []
        seen = False
        with anyio.fail_after(TIMEOUT_S):
            async for line in self.lines:
                if line == "":
                    if seen:
                        return event_id, "\n".join(data), retry
                    continue
                if line.startswith(":"):
                    continue
                seen = True
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "id":
                    event_id = value
                elif field == "data":
                    data.append(value)
                elif field == "retry":
                    retry = value
        raise AssertionError("stream ended")

    async def rest(self) -> list[tuple[str | None, str, str | None]]:
        """Every remaining event, until the server ends the stream."""
        events = []
        with anyio.fail_after(TIMEOUT_S):
            while True:
                try:
                    events.append(await self.next())
                except AssertionError:
                    return events

    async def message(self) -> tuple[str, dict[str, Any]]:
        """The next event that carries a message (priming events are skipped)."""
        while True:
            event_id, data, _ = await self.next()
            assert event_id is not None
            if data:
                return event_id, json.loads(data)


def push(start: int, count: int, rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "test/push", "params": {"start": start, "count": count}}


async def test_get_stream_resumes_after_a_drop_without_loss_or_duplicates(app: App) -> None:
    async with serving(app) as base, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        url = base + "/mcp"
        headers = await open_session(http, url, "2025-11-25")
        get_headers = {**headers, "Accept": "text/event-stream"}
        async with http.stream("GET", url, headers=get_headers) as stream:
            assert stream.status_code == 200
            reader = SseReader(stream)
            priming_id, data, retry = await reader.next()
            assert priming_id and data == "" and retry == "1000"  # 2025-11-25 priming event
            assert (await http.post(url, json=push(0, 2, 2), headers=headers)).json()["result"] == {}
            first_id, first = await reader.message()
            assert first["params"] == {"n": 0}
        # Dropped after one event; more is sent while no stream is open.
        assert (await http.post(url, json=push(2, 2, 3), headers=headers)).status_code == 200
        resumed = {**get_headers, "Last-Event-ID": first_id}
        async with http.stream("GET", url, headers=resumed) as stream:
            reader = SseReader(stream)
            ids, got = [first_id], []
            for _ in range(3):
                event_id, message = await reader.message()
                ids.append(event_id)
                got.append(message["params"]["n"])
            assert got == [1, 2, 3]
            assert (await http.post(url, json=push(4, 1, 4), headers=headers)).status_code == 200
            event_id, message = await reader.message()
            assert message["params"] == {"n": 4}
            ids.append(event_id)
        assert len(set(ids)) == len(ids) and [int(i) for i in ids] == sorted(int(i) for i in ids)


async def test_a_dropped_post_stream_resumes_through_get(app: App) -> None:
    async with serving(app) as base, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        url = base + "/mcp"
        headers = await open_session(http, url, "2025-11-25")
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "memory_consolidate", "arguments": {}, "_meta": {"progressToken": "p"}},
        }
        async with http.stream("POST", url, json=call, headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            reader = SseReader(stream)
            priming_id, data, _ = await reader.next()
            assert data == ""
            first_id, first = await reader.message()
            assert first["method"] == "notifications/progress"
        resumed = {**headers, "Accept": "text/event-stream", "Last-Event-ID": first_id}
        async with http.stream("GET", url, headers=resumed) as stream:
            reader = SseReader(stream)
            rest = []
            while True:
                _, message = await reader.message()
                rest.append(message)
                if "id" in message:
                    break
        progress = [first["params"]["progress"]] + [m["params"]["progress"] for m in rest[:-1]]
        assert progress == sorted(set(progress))  # each step exactly once, in order
        assert rest[-1]["id"] == 7 and rest[-1]["result"]["isError"] is False


async def test_session_origin_host_and_version_rules(app: App) -> None:
    async with serving(app) as base, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        url = base + "/mcp"
        headers = await open_session(http, url, "2025-06-18")
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await http.post(url, json=ping, headers=headers)).json()["result"] == {}
        foreign_origin = await http.post(url, json=ping, headers={**headers, "Origin": "http://evil.example"})
        assert foreign_origin.status_code == 403
        foreign_host = await http.post(url, json=ping, headers={**headers, "Host": "evil.example.com"})
        assert foreign_host.status_code == 403
        local_host = await http.post(url, json=ping, headers={**headers, "Host": "localhost:1234"})
        assert local_host.status_code == 200
        assert (await http.get(base + "/sse", headers={"Host": "evil.example.com"})).status_code == 403
        bad_version = await http.post(url, json=ping, headers={**headers, "MCP-Protocol-Version": "2020-01-01"})
        assert bad_version.status_code == 400
        no_version = {k: v for k, v in headers.items() if k != "MCP-Protocol-Version"}
        assert (await http.post(url, json=ping, headers=no_version)).status_code == 200
        json_only = await http.post(url, json=ping, headers={**headers, "Accept": "application/json"})
        assert json_only.status_code == 406
        assert (await http.patch(url, headers=headers)).status_code == 405
        assert (await http.delete(url, headers=headers)).status_code == 204
        assert (await http.post(url, json=ping, headers=headers)).status_code == 404
        get = await http.get(url, headers={**headers, "Accept": "text/event-stream"})
        assert get.status_code == 404
        assert (await http.post(url, json=ping, headers=BOTH)).status_code == 400


async def test_batches_over_http_only_for_2025_03_26(app: App) -> None:
    async with serving(app) as base, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        url = base + "/mcp"
        headers = await open_session(http, url, "2025-03-26")
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ]
        reply = await http.post(url, json=batch, headers=headers)
        assert reply.status_code == 200
        assert [r["id"] for r in reply.json()] == [1, 2]
        notes = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
        assert (await http.post(url, json=notes, headers=headers)).status_code == 202

        newer = await open_session(http, url, "2025-06-18")
        refused = await http.post(url, json=batch, headers=newer)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32600


async def test_official_client_gets_progress_and_logs(app: App) -> None:
    logs: list[Any] = []
    reported: list[tuple[float, float | None, str | None]] = []
    got_log = anyio.Event()

    async def on_log(params: Any) -> None:
        logs.append(params)
        got_log.set()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, total, message))

    async with serving(app) as base:
        # A classic session (logging/setLevel); at 2026-07-28 a request's _meta names its log level.
        async with Client(base + "/mcp", read_timeout_seconds=TIMEOUT_S, logging_callback=on_log, mode="legacy") as client:
            result = await client.call_tool("memory_consolidate", {}, progress_callback=on_progress)
            assert result.is_error is False
            assert len(reported) >= 2 and reported[-1][0] == reported[-1][1]
            assert [p[0] for p in reported] == sorted(p[0] for p in reported)
            assert logs == []  # tool-call logs are debug; the default level is info
            with warnings.catch_warnings():  # deprecated only from 2026-07-28, not for this session
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level("debug")
            await client.call_tool("memory_stats", {})
            with anyio.fail_after(TIMEOUT_S):
                await got_log.wait()
            assert logs[0].level == "debug" and logs[0].data["tool"] == "memory_stats"


async def test_legacy_sse_with_the_official_client(app: App) -> None:
    async with serving(app) as base:
        transport = sse_client(base + "/sse", timeout=TIMEOUT_S)
        async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT_S) as client:
            stored = await client.call_tool(
                "remember", {"content": "legacy transports still deliver over SSE", "topic": "sse", "type": "fact"}
            )
            assert stored.is_error is False
            found = await client.call_tool("recall", {"keywords": ["legacy"], "topic": "sse"})
            assert found.is_error is False
            assert "legacy transports still deliver" in found.content[0].text  # type: ignore[union-attr]


async def test_legacy_message_needs_a_live_session(app: App) -> None:
    async with serving(app) as base, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert (await http.post(base + "/message", json=ping)).status_code == 400
        assert (await http.post(base + "/message?sessionId=nope", json=ping)).status_code == 404
        async with http.stream("GET", base + "/sse") as stream:
            reader = SseReader(stream)
            _, endpoint, _ = await reader.next()
            assert endpoint.startswith("/message?sessionId=")
            assert (await http.post(base + endpoint, json=ping)).status_code == 202
            _, data, _ = await reader.next()
            assert json.loads(data) == {"jsonrpc": "2.0", "id": 1, "result": {}}


RECONNECT_ACCEPT = "text/event-stream, application/json"  # what the conformance suite sends


def reconnection_call(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "test_reconnection", "arguments": {}}}


async def test_sse_polling_closes_the_post_stream_and_resumes_through_get(fixtures_app: App) -> None:
    """SEP-1699: priming event first, stream closed before the result, result after GET resume."""
    async with serving(fixtures_app) as base, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        url = base + "/mcp"
        headers = {**await open_session(http, url, "2025-11-25"), "Accept": RECONNECT_ACCEPT}
        async with http.stream("POST", url, json=reconnection_call(5), headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            reader = SseReader(stream)
            priming_id, data, retry = await reader.next()
            assert priming_id and data == "" and retry == "1000"
            after = await reader.rest()  # the server closes the stream mid-call
        assert all(data == "" for _, data, _ in after), "the result must not come on the POST"

        resumed = {**headers, "Accept": "text/event-stream", "Last-Event-ID": priming_id}
        async with http.stream("GET", url, headers=resumed) as stream:
            assert stream.status_code == 200
            events = await SseReader(stream).rest()  # ends once the request is answered
        messages = [json.loads(data) for _, data, _ in events if data]
        answers = [m for m in messages if m.get("id") == 5]
        assert len(answers) == 1
        result = answers[0]["result"]
        assert result["isError"] is False
        assert "reconnected after stream closure" in result["content"][0]["text"]
        assert all(int(event_id) > int(priming_id) for event_id, _, _ in events if event_id)


async def test_sse_polling_needs_2025_11_25(fixtures_app: App) -> None:
    """Older sessions keep plain JSON for the same POST; 2025-11-25 keeps JSON where it should."""
    async with serving(fixtures_app) as base, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        url = base + "/mcp"
        for version in ("2025-06-18", "2025-03-26"):
            headers = {**await open_session(http, url, version), "Accept": RECONNECT_ACCEPT}
            reply = await http.post(url, json=reconnection_call(5), headers=headers)
            assert reply.status_code == 200
            assert reply.headers["content-type"].startswith("application/json")
            assert reply.json()["result"]["isError"] is False

        headers = await open_session(http, url, "2025-11-25")
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        quiet = await http.post(url, json=ping, headers={**headers, "Accept": RECONNECT_ACCEPT})
        assert quiet.headers["content-type"].startswith("application/json")
        stats = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_stats", "arguments": {}}}
        prefers_json = {**headers, "Accept": "application/json, text/event-stream;q=0.5"}
        reply = await http.post(url, json=stats, headers=prefers_json)
        assert reply.headers["content-type"].startswith("application/json")
        streamed = await http.post(url, json=stats, headers={**headers, "Accept": RECONNECT_ACCEPT})
        assert streamed.headers["content-type"].startswith("text/event-stream")
        assert streamed.text.startswith("id: ") and "\nretry: 1000\ndata: \n\n" in streamed.text


async def test_close_stream_turns_a_quiet_request_into_a_resumable_stream(app: App) -> None:
    async with serving(app) as base, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        url = base + "/mcp"
        cut = {"jsonrpc": "2.0", "id": 9, "method": "test/cut", "params": {"retry": 50}}
        headers = await open_session(http, url, "2025-11-25")
        async with http.stream("POST", url, json=cut, headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = await SseReader(stream).rest()
        priming_id, data, _ = events[0]
        assert priming_id and data == ""
        assert events[-1] == (None, "", "50")  # the closing retry field alone, no message
        resumed = {**headers, "Accept": "text/event-stream", "Last-Event-ID": priming_id}
        async with http.stream("GET", url, headers=resumed) as stream:
            _, answer = await SseReader(stream).message()
        assert answer == {"jsonrpc": "2.0", "id": 9, "result": {"closed": True}}

        older = await open_session(http, url, "2025-06-18")
        reply = await http.post(url, json=cut, headers=older)
        assert reply.json()["result"] == {"closed": False}  # nothing resumable to close


async def test_official_client_reconnects_after_the_server_closes_the_stream(fixtures_app: App) -> None:
    async with serving(fixtures_app) as base:
        async with Client(base + "/mcp", read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:  # resumable streams: before 2026
            result = await client.call_tool("test_reconnection", {})
            assert result.is_error is False
            assert "reconnected" in result.content[0].text  # type: ignore[union-attr]
