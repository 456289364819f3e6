"""Response compression: gzip and deflate for ordinary bodies, never for SSE streams."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ops_helpers import BOTH, initialize, serving

from memento.app import App, build_app
from memento.ops.compression import MINIMUM_SIZE, choose_encoding
from memento.settings import Settings

pytestmark = pytest.mark.anyio
TIMEOUT_S = 20.0
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    built = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash"))
    yield built
    built.close()


async def _session(http: httpx.AsyncClient, url: str, version: str) -> dict[str, str]:
    reply = await http.post(url + "/mcp", json=initialize(version), headers=BOTH)
    headers = {**BOTH, "Mcp-Session-Id": reply.headers["mcp-session-id"], "MCP-Protocol-Version": version}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url + "/mcp", json=note, headers=headers)).status_code == 202
    return headers


async def _raw(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> tuple[httpx.Response, bytes]:
    async with http.stream(method, url, **kwargs) as response:
        return response, b"".join([chunk async for chunk in response.aiter_raw()])


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("gzip", "gzip"),
        ("deflate", "deflate"),
        ("gzip, deflate, br", "gzip"),
        ("gzip;q=0.5, deflate", "deflate"),
        ("identity", None),
        ("", None),
        ("*", "gzip"),
        ("gzip;q=0, *;q=0.1", "deflate"),
        ("br", None),
    ],
)
def test_choose_encoding(accept: str, expected: str | None) -> None:
    assert choose_encoding(accept) == expected


async def test_json_bodies_are_compressed_gzip_and_deflate(app: App) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        headers = await _session(http, url, "2025-06-18")
        plain, plain_body = await _raw(http, "POST", url + "/mcp", json=LIST_TOOLS, headers={**headers, "Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers
        expected = json.loads(plain_body)
        assert len(plain_body) > 2000 and expected["result"]["tools"]

        zipped, body = await _raw(http, "POST", url + "/mcp", json=LIST_TOOLS, headers={**headers, "Accept-Encoding": "gzip"})
        assert zipped.status_code == 200
        assert zipped.headers["content-encoding"] == "gzip"
        assert "accept-encoding" in zipped.headers["vary"].lower()
        assert int(zipped.headers["content-length"]) == len(body) < len(plain_body) / 2
        assert json.loads(gzip.decompress(body)) == expected

        deflated, body = await _raw(http, "POST", url + "/mcp", json=LIST_TOOLS, headers={**headers, "Accept-Encoding": "deflate"})
        assert deflated.headers["content-encoding"] == "deflate"
        assert json.loads(zlib.decompress(body)) == expected

        # httpx decodes both transparently, as any HTTP client does.
        decoded = await http.post(url + "/mcp", json=LIST_TOOLS, headers={**headers, "Accept-Encoding": "deflate"})
        assert decoded.json() == expected

        metrics = await http.get(url + "/metrics", headers={"Accept-Encoding": "gzip"})
        assert metrics.headers["content-encoding"] == "gzip" and "memento_http_requests_total" in metrics.text


async def test_small_bodies_stay_plain(app: App) -> None:
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        reply = await http.post(url + "/mcp", json=initialize("2025-06-18"), headers={**BOTH, "Accept-Encoding": "gzip"})
        assert reply.status_code == 200
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        sid = reply.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = {**BOTH, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18", "Accept-Encoding": "gzip"}
        await http.post(url + "/mcp", json=note, headers=headers)
        pong, body = await _raw(http, "POST", url + "/mcp", json=ping, headers=headers)
        assert len(body) < MINIMUM_SIZE  # the premise: a body below the compression threshold
        assert pong.headers.get("content-encoding") is None  # not gzip, nor anything else
        assert not body.startswith(b"\x1f\x8b")  # the raw bytes are not a gzip stream either
        assert json.loads(body)["result"] == {}


async def _first_lines(response: httpx.Response, count: int) -> list[str]:
    lines: list[str] = []
    async for line in response.aiter_lines():
        lines.append(line)
        if len(lines) >= count:
            break
    return lines


async def test_sse_streams_are_never_compressed(app: App) -> None:
    encodings = {"Accept-Encoding": "gzip, deflate"}
    async with serving(app) as (url, _), httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        headers = {**(await _session(http, url, "2025-11-25")), **encodings}
        # The standalone GET stream: its opening comment arrives while the stream stays open.
        async with http.stream("GET", url + "/mcp", headers={**headers, "Accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert "content-encoding" not in stream.headers
            assert (await _first_lines(stream, 1)) == [": stream open"]

        # A tools/call answered as a (primed) SSE stream.
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "Streams stay uncompressed " * 40, "topic": "sse", "type": "fact"}},
        }
        async with http.stream("POST", url + "/mcp", json=call, headers=headers) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            assert "content-encoding" not in answer.headers
            text = "\n".join([line async for line in answer.aiter_lines()])
        assert '"id":3' in text.replace(" ", "") and "retry:" in text

        # The legacy HTTP+SSE transport: the endpoint event arrives on a live stream.
        async with http.stream("GET", url + "/sse", headers={"Accept": "text/event-stream", **encodings}) as legacy:
            assert legacy.status_code == 200
            assert "content-encoding" not in legacy.headers
            lines = await _first_lines(legacy, 2)
            assert lines[0] == "event: endpoint" and lines[1].startswith("data: /message")
