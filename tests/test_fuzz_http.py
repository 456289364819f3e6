"""Streamable HTTP (`/mcp`) and legacy SSE (`/sse` + `/message`) answer every body with JSON-RPC.

Against a real `memento serve --transport http`: the hostile bodies of issue 17, defect 9
(once a plain-text 500), then hypothesis-generated bodies, headers, sessions, protocol
versions and methods. Every response is the status the spec requires with a JSON-RPC body
(202/204 empty, an SSE stream of JSON-RPC events), every request gets exactly one answer, the
server still serves a normal call afterwards, and its log holds no traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fuzz_helpers import (
    HOSTILE,
    INITIALIZED,
    VERSIONS,
    Expected,
    LegacySsePeer,
    Tally,
    body_messages,
    expected,
    initialize,
    is_answer,
    sse_messages,
)
from fuzz_strategies import fuzz_settings, raw_bodies
from hypothesis import given
from hypothesis import strategies as st
from mcp_helpers import TIMEOUT_S, HttpServer, server_env, start_http_server

pytestmark = pytest.mark.slow

ACCEPT = "application/json, text/event-stream"
JSON = {"content-type": "application/json", "accept": ACCEPT}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("fuzz-http")
    running = start_http_server(server_env(folder / "memento.db"), folder / "server.log")
    yield running
    running.stop()


@pytest.fixture
def http(server: HttpServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


def no_traceback(server: HttpServer) -> None:
    log = server.log.read_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]


def open_session(http: httpx.Client, version: str) -> dict[str, str]:
    reply = http.post("/mcp", json=initialize(version), headers=JSON)
    assert reply.status_code == 200, reply.text
    headers = {**JSON, "mcp-session-id": reply.headers["mcp-session-id"], "mcp-protocol-version": version}
    assert http.post("/mcp", json=INITIALIZED, headers=headers).status_code == 202
    return headers


def post(http: httpx.Client, body: bytes, headers: dict[str, str], *, batch: bool) -> tuple[httpx.Response, list[Any]]:
    """POST /mcp; the answers its JSON body or SSE stream carries (the stream read to its end)."""
    with http.stream("POST", "/mcp", content=body, headers=headers) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            answers = []
            for message in sse_messages(response.iter_lines()):
                if isinstance(message, list) and batch:
                    answers.extend(message)
                elif not (isinstance(message, dict) and "method" in message):  # skip its notifications
                    answers.append(message)
            return response, answers
        response.read()
    if response.status_code in (202, 204):
        return response, [] if not response.content else [response.content]
    return response, body_messages(response, batch=batch)


def check_post(tally: Tally, raw: bytes, want: Expected, response: httpx.Response, got: list[Any]) -> None:
    """The spec's status for what `raw` is, then exactly the answers owed."""
    status = response.status_code
    if want.parse_error:
        assert status == 400 and got and got[0]["error"]["code"] == -32700, (raw[:200], status, got)
    elif not want.ids:
        assert status == 202 and not got, (raw[:200], status, got)
    else:
        assert status in (200, 400), (raw[:200], status, got)
    tally.check(raw, want, got)


# ------------------------------------------------------------------ regressions (defect 9)


def test_hostile_bodies_get_json_rpc_errors_not_a_plain_text_500(server: HttpServer, http: httpx.Client) -> None:
    headers = open_session(http, "2025-06-18")
    tally = Tally()
    for body in HOSTILE:
        want = expected(body, batches=False)
        response, got = post(http, body, headers, batch=False)
        assert response.headers["content-type"].startswith("application/json"), response.text[:300]
        check_post(tally, body, want, response, got)
    assert tally.failures() == {} and tally.answers == len(HOSTILE), tally.failures()
    _, (echo,) = post(http, b'{"jsonrpc":"2.0","id":"a\\ud800","method":"ping"}', headers, batch=False)
    assert echo == {"jsonrpc": "2.0", "id": "a\ud800", "result": {}}
    no_traceback(server)


def test_lone_surrogates_in_tool_arguments_never_reach_storage_over_http(server: HttpServer, http: httpx.Client) -> None:
    headers = open_session(http, "2025-06-18")
    arguments = {"content": "half a pair \udbff over http", "topic": "surrogates", "type": "fact"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember", "arguments": arguments}}
    _, (stored,) = post(http, json.dumps(call).encode(), headers, batch=False)
    assert stored["result"]["isError"] is False, stored
    find = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": {"topic": "surrogates"}}}
    _, (found,) = post(http, json.dumps(find).encode(), headers, batch=False)
    fragments = json.loads(found["result"]["content"][0]["text"])["fragments"]
    assert [f["content"] for f in fragments] == ["half a pair \ufffd over http"], found
    no_traceback(server)


def test_hostile_bodies_over_legacy_sse_are_answered(server: HttpServer) -> None:
    peer = LegacySsePeer(server.url)
    try:
        peer.send(json.dumps(initialize("2024-11-05")).encode())
        assert peer.incoming.get(timeout=TIMEOUT_S)["result"]["protocolVersion"] == "2024-11-05"
        peer.send(json.dumps(INITIALIZED).encode())
        tally = Tally()
        for body in HOSTILE:
            want = expected(body, batches=False)
            tally.check(body, want, peer.exchange(body, want))
        assert tally.failures() == {} and peer.refused == [], (tally.failures(), peer.refused)
        assert tally.answers == len(HOSTILE)
    finally:
        peer.close()
    no_traceback(server)


# ------------------------------------------------------------------ fuzzing


junk_headers = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)
HEADER_CASES = ["ok"] * 8 + ["no session", "unknown session", "bad version", "no version", "bad accept", "bad type"]


def spoil(headers: dict[str, str], case: str, junk: str) -> dict[str, str]:
    """The session's headers, with one thing wrong (or none, for "ok")."""
    spoilt = dict(headers)
    if case == "no session":
        del spoilt["mcp-session-id"]
    elif case == "unknown session":
        spoilt["mcp-session-id"] = "no-such-session"
    elif case == "bad version":
        spoilt["mcp-protocol-version"] = junk.strip() or "1999-01-01"
    elif case == "no version":
        del spoilt["mcp-protocol-version"]
    elif case == "bad accept":
        spoilt["accept"] = "text/html"
    elif case == "bad type":
        spoilt["content-type"] = "text/plain"
    return spoilt


def test_fuzzed_posts_get_the_spec_status_and_one_answer_per_request(server: HttpServer, http: httpx.Client) -> None:
    sessions = {version: open_session(http, version) for version in VERSIONS}
    tally = Tally()
    oddities: list[str] = []

    @given(raw=raw_bodies(), version=st.sampled_from(VERSIONS), case=st.sampled_from(HEADER_CASES), junk=junk_headers)
    @fuzz_settings(factor=4)
    def one(raw: bytes, version: str, case: str, junk: str) -> None:
        headers = spoil(sessions[version], case, junk)
        want = expected(raw, batches=version == "2025-03-26")
        response, got = post(http, raw, headers, batch=want.batch)
        if case == "ok" or (case == "no version" and version == "2025-03-26"):
            check_post(tally, raw, want, response, got)
            return
        # Refused before or after parsing (or, for initialize, a new session): never a 5xx,
        # never anything but JSON-RPC.
        tally.sent += 1
        if not (response.status_code < 500 and all(is_answer(answer) for answer in got)):
            oddities.append(f"{case}: {raw[:200]!r} -> {response.status_code} {got!r}"[:600])

    one()
    assert (tally.failures(), oddities) == ({}, []), (tally.failures(), oddities[:5])
    for headers in sessions.values():
        _, (pong,) = post(http, b'{"jsonrpc":"2.0","id":"after","method":"ping"}', headers, batch=False)
        assert pong == {"jsonrpc": "2.0", "id": "after", "result": {}}
    no_traceback(server)
    print(f"Streamable HTTP: {tally.sent} POSTs, {tally.answers} answers {dict(tally.kinds)}")


def test_fuzzed_get_and_delete_answer_with_the_spec_status(server: HttpServer, http: httpx.Client) -> None:
    sessions = {version: open_session(http, version) for version in VERSIONS}
    seen: list[int] = []

    @given(
        method=st.sampled_from(["GET", "DELETE", "PUT"]),
        version=st.sampled_from(VERSIONS),
        case=st.sampled_from(HEADER_CASES),
        junk=junk_headers,
    )
    @fuzz_settings(factor=1)
    def one(method: str, version: str, case: str, junk: str) -> None:
        headers = spoil(sessions[version], case, junk)
        if method == "GET":
            headers["accept"] = "text/event-stream" if case != "bad accept" else "application/json"
        with http.stream(method, "/mcp", headers=headers) as response:
            status, kind = response.status_code, response.headers.get("content-type", "")
            if status == 200:  # the standalone stream opens; this client closes it again
                assert kind.startswith("text/event-stream") and method == "GET", (method, case)
                return
            body = response.read()
        seen.append(status)
        if status == 204:
            assert method == "DELETE" and case in ("ok", "no version", "bad accept", "bad type") and not body
            sessions[version] = open_session(http, version)
        elif status == 405:
            assert method == "PUT"
        else:
            assert status in (400, 404, 406, 409), (method, case, status, body[:300])
            assert is_answer(json.loads(body)), body[:300]

    one()
    no_traceback(server)


def test_fuzzed_legacy_sse_messages_are_all_answered(server: HttpServer) -> None:
    peer = LegacySsePeer(server.url)
    tally = Tally()
    try:
        peer.send(json.dumps(initialize("2024-11-05")).encode())
        assert peer.incoming.get(timeout=TIMEOUT_S)["result"]["protocolVersion"] == "2024-11-05"
        peer.send(json.dumps(INITIALIZED).encode())

        @given(raw=raw_bodies())
        @fuzz_settings(factor=3)
        def one(raw: bytes) -> None:
            want = expected(raw, batches=False)
            tally.check(raw, want, peer.exchange(raw, want))

        one()
        assert (tally.failures(), peer.refused) == ({}, []), (tally.failures(), peer.refused[:5])
        pong = peer.exchange(b'{"jsonrpc":"2.0","id":"after","method":"ping"}', Expected())
        assert pong in ([], [{"jsonrpc": "2.0", "id": "after", "result": {}}])
    finally:
        peer.close()
    no_traceback(server)
    print(f"legacy SSE: {tally.sent} messages, {tally.answers} answers {dict(tally.kinds)}, statuses {dict(peer.statuses)}")
