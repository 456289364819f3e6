"""A hostile or careless HTTP client cannot exhaust the server: bodies are limited while they
stream (413), slow headers and bodies are timed out, sessions are capped (the least recently
used idle one is ended), and an SSE client that stops reading is cut off. Against a real
server process; memory is read from /proc (peak RSS), never timed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_probes import Upload, closed_within, connect, head, rss_peak_kib
from mcp_helpers import HttpServer, server_env, start_http_server

KEY = "limits-operator-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
BOTH = {"Accept": "application/json, text/event-stream", **AUTH}
LIMIT = 1024 * 1024
FORM_LIMIT = 64 * 1024
UPLOAD = 64 * 1024 * 1024
DEADLINE_S = 30.0


@contextlib.contextmanager
def serving(tmp_path: Path, **settings: str) -> Iterator[HttpServer]:
    env = {**server_env(tmp_path / "m.db"), "MEMENTO_ACCESS_KEY": KEY, "MEMENTO_MAX_BODY_BYTES": str(LIMIT), **settings}
    server = start_http_server(env, tmp_path / "server.log")
    try:
        yield server
    finally:
        server.stop()


def initialize(version: str = "2025-11-25") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "limits", "version": "0"}},
    }


def legacy_session(server: HttpServer) -> tuple[Any, str]:
    """Open `GET /sse` on a raw socket; (the socket, its session id) once `endpoint` arrived."""
    sock = connect(server.url)
    sock.sendall(head("GET", "/sse", {"Accept": "text/event-stream", **AUTH}))
    received = b""
    while b"\n\n" not in received.partition(b"sessionId=")[2]:  # the body is chunked
        data = sock.recv(4096)
        assert data, received
        received += data
    session_id = received.split(b"sessionId=")[1].split(b"\n")[0].decode()
    return sock, session_id


ROUTES = [
    "/mcp",
    "/message?sessionId=x",
    "/sse",
    "/register",
    "/token",
    "/revoke",
    "/authorize",
    "/health",
    "/metrics",
    "/.well-known/oauth-authorization-server",
    "/nowhere",
]


@pytest.mark.slow
def test_a_declared_oversized_body_is_refused_on_every_route_before_it_is_read(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        for route in ROUTES:
            limit = FORM_LIMIT if route in ("/register", "/token", "/revoke", "/authorize") else LIMIT
            sock = connect(server.url)
            sock.sendall(head("POST", route, {"Content-Length": str(limit + 1), "Content-Type": "application/json", **AUTH}))
            answer = closed_within(sock, DEADLINE_S)  # no byte of the body was sent
            sock.close()
            assert answer is not None and answer.startswith(b"HTTP/1.1 413 "), (route, answer)
            headers, _, body = answer.partition(b"\r\n\r\n")
            assert b"connection: close" in headers.lower(), (route, headers)
            error = json.loads(body)
            if route.startswith(("/mcp", "/message", "/sse")):
                assert error["jsonrpc"] == "2.0" and error["error"]["code"] == -32600, (route, error)
            else:
                assert error["error"] == "request_too_large", (route, error)


@pytest.mark.slow
def test_parallel_streamed_uploads_stop_at_the_limit_with_bounded_memory(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        sse, session_id = legacy_session(server)
        httpx.get(server.url + "/health", headers=AUTH)  # warm up the code paths measured below
        before = rss_peak_kib(server.process.pid)
        uploads = [
            Upload(server.url, "/mcp", UPLOAD, chunked=True, headers=AUTH),
            Upload(server.url, f"/message?sessionId={session_id}", UPLOAD, chunked=True, headers=AUTH),
            Upload(server.url, "/token", UPLOAD, chunked=True, content_type="application/x-www-form-urlencoded"),
            Upload(server.url, "/register", UPLOAD, chunked=False),
        ]
        for upload in uploads:
            upload.start()
        statuses = {upload.path: upload.status(DEADLINE_S) for upload in uploads}
        grown_mib = (rss_peak_kib(server.process.pid) - before) / 1024
        sse.close()
        assert set(statuses.values()) == {413}, statuses
        assert all(upload.sent < UPLOAD for upload in uploads), [u.sent for u in uploads]
        # Four uploads of 64 MiB each; each may hold its limit (1 MiB) at most, a few times over.
        assert grown_mib < 4 * LIMIT / 2**20 * 4 + 24, f"peak RSS grew by {grown_mib:.0f} MiB"
        # The server still serves.
        assert httpx.get(server.url + "/health", headers=AUTH).status_code == 200


@pytest.mark.slow
def test_headers_that_never_finish_are_timed_out(tmp_path: Path) -> None:
    with serving(tmp_path, MEMENTO_HEADER_TIMEOUT_S="1") as server:
        silent = connect(server.url)
        partial = connect(server.url)
        partial.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        for sock in (silent, partial):
            assert closed_within(sock, DEADLINE_S) is not None, "the server kept a stalled connection"
            sock.close()
        # A keep-alive connection whose next request stalls halfway is closed too.
        reused = connect(server.url)
        reused.sendall(head("GET", "/health", {}))
        reused.sendall(b"GET /health HTTP/1.1\r\nHo")
        answer = closed_within(reused, DEADLINE_S)
        assert answer is not None and answer.startswith(b"HTTP/1.1 200 "), answer
        assert answer.count(b"HTTP/1.1 ") == 1, answer
        # A body left unsent after an answer that did not need it (401) is not waited for either.
        unread = connect(server.url)
        unread.sendall(head("POST", "/mcp", {"Content-Length": "100", "Content-Type": "application/json"}) + b"{")
        answer = closed_within(unread, DEADLINE_S)
        assert answer is not None and answer.startswith(b"HTTP/1.1 401 "), answer


@pytest.mark.slow
def test_a_body_that_stalls_gets_408_and_the_connection_closed(tmp_path: Path) -> None:
    with serving(tmp_path, MEMENTO_BODY_TIMEOUT_S="1") as server:
        for route in ("/mcp", "/token"):
            sock = connect(server.url)
            kind = "application/json" if route == "/mcp" else "application/x-www-form-urlencoded"
            sock.sendall(head("POST", route, {"Content-Length": "100", "Content-Type": kind, **BOTH}) + b"{")
            answer = closed_within(sock, DEADLINE_S)
            sock.close()
            assert answer is not None and answer.startswith(b"HTTP/1.1 408 "), (route, answer)


def _ping(http: httpx.Client, session: str) -> int:
    reply = http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
        headers={**BOTH, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"},
    )
    return reply.status_code


@pytest.mark.slow
def test_sessions_are_capped_and_the_least_recently_used_idle_one_is_ended(tmp_path: Path) -> None:
    with serving(tmp_path, MEMENTO_MAX_SESSIONS="3") as server, httpx.Client(base_url=server.url, timeout=DEADLINE_S) as http:

        def open_session() -> str:
            reply = http.post("/mcp", json=initialize(), headers=BOTH)
            assert reply.status_code == 200, reply.text
            return reply.headers["mcp-session-id"]

        first, second, third = open_session(), open_session(), open_session()
        assert _ping(http, first) == 200  # now `second` is the least recently used
        fourth = open_session()
        assert _ping(http, second) == 404
        assert [_ping(http, s) for s in (first, third, fourth)] == [200, 200, 200]
        assert f"session {second} closed" in server.log.read_text()  # ended the normal way


@pytest.mark.slow
def test_a_legacy_sse_client_that_never_reads_is_cut_off_with_bounded_memory(tmp_path: Path) -> None:
    with serving(tmp_path, MEMENTO_STREAM_QUEUE_LIMIT="20") as server, httpx.Client(base_url=server.url, timeout=DEADLINE_S) as http:
        sse, session_id = legacy_session(server)  # and never read again
        post = f"/message?sessionId={session_id}"
        assert http.post(post, json=initialize("2024-11-05"), headers=AUTH).status_code == 202
        before = rss_peak_kib(server.process.pid)
        listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        status, sent, grown_mib = 202, 0, 0.0
        while status == 202 and sent < 20_000 and grown_mib < 128:
            status = http.post(post, json=listing, headers=AUTH).status_code
            sent += 1
            if sent % 100 == 0:
                grown_mib = (rss_peak_kib(server.process.pid) - before) / 1024
        assert status == 404, f"still connected after {sent} unread replies (+{grown_mib:.0f} MiB)"
        grown_mib = (rss_peak_kib(server.process.pid) - before) / 1024
        assert grown_mib < 48, f"peak RSS grew by {grown_mib:.0f} MiB"
        assert closed_within(sse, DEADLINE_S) is not None  # the stream ends once drained
        sse.close()
        assert f"cut legacy SSE session {session_id}" in server.log.read_text()


def test_a_streamable_http_connection_that_falls_behind_is_cut_and_its_events_kept() -> None:
    from memento.mcp.events import MemoryEventStore
    from memento.mcp.sse_streams import Streams

    streams = Streams(MemoryEventStore(), queue_limit=3)
    stream = streams.open("s", "standalone")
    queue = streams.attach(stream)
    cut: list[bool] = []
    stream.cut = lambda: cut.append(True)
    for n in range(3):
        streams.publish(stream, {"jsonrpc": "2.0", "method": "note", "params": {"n": n}})
    assert queue.qsize() == 3 and not cut
    streams.publish(stream, {"jsonrpc": "2.0", "method": "note", "params": {"n": 3}})
    assert cut == [True] and stream.subscriber is None and queue.empty()
    assert len(streams.store.after("s", "standalone", None)) == 4  # the client resumes from here
