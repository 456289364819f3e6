"""Access keys: configuration, verification, and their enforcement on the HTTP endpoints."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_helpers import SERVE

from memento.app import App, build_app
from memento.auth.keys import AuthConfigError, KeyVerifier, load_keys, parse_keys, stdio_principal
from memento.auth.principal import ANONYMOUS
from memento.auth.registry import token_verifiers
from memento.embeddings.hashing import HashEmbedder
from memento.mcp.http_gate import check_exposure, is_loopback
from memento.models import AgentScope
from memento.settings import Settings
from memento.web import create_http_app

pytestmark = pytest.mark.anyio

OPERATOR_KEY = "operator-key-0123456789"
KEY_A = "agent-a-key-0123456789abcdef"
KEY_A_RO = "agent-a-readonly-0123456789"
KEY_B = "agent-b-key-0123456789abcdef"
KEYS = [
    {"name": "a", "key": KEY_A, "agent": "agent-a", "access": "read-write"},
    {"name": "a-ro", "key": KEY_A_RO, "agent": "agent-a", "access": "read-only"},
    {"name": "b", "key": KEY_B, "agent": "agent-b", "access": "read-write"},
]
BOTH = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_settings(tmp_path: Path, **extra: Any) -> Settings:
    return Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash", **extra)


# ---------------------------------------------------------------- configuration


def test_named_keys_parse_into_principals() -> None:
    verifier = KeyVerifier(parse_keys(json.dumps(KEYS), "MEMENTO_KEYS"))
    a = verifier.verify(KEY_A)
    assert a is not None and (a.subject, a.agent_id, a.read_only, a.kind) == ("a", "agent-a", False, "access_key")
    ro = verifier.verify(KEY_A_RO)
    assert ro is not None and (ro.agent_id, ro.read_only) == ("agent-a", True)
    assert verifier.verify(KEY_B + "x") is None
    assert verifier.verify("") is None
    assert verifier.verify(KEY_A.upper()) is None


def test_admin_key_and_operator_key(tmp_path: Path) -> None:
    admin = [{"name": "ops", "key": "admin-key-0123456789ab", "agent": "*", "access": "read-only"}]
    settings = make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY, MEMENTO_KEYS=json.dumps(admin))
    verifier = KeyVerifier(load_keys(settings))
    operator = verifier.verify(OPERATOR_KEY)
    assert operator is not None and (operator.subject, operator.agent_id, operator.read_only) == ("operator", None, False)
    ops = verifier.verify("admin-key-0123456789ab")
    assert ops is not None and (ops.agent_id, ops.read_only) == (None, True)


def test_keys_file_adds_to_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(KEYS[2:]))
    settings = make_settings(tmp_path, MEMENTO_KEYS=json.dumps(KEYS[:2]), MEMENTO_KEYS_FILE=str(path))
    assert [k.name for k in load_keys(settings)] == ["a", "a-ro", "b"]
    assert all(KEY_A not in repr(k) for k in load_keys(settings))  # only digests are kept


def test_no_key_configured_means_no_verifier(tmp_path: Path) -> None:
    assert load_keys(make_settings(tmp_path)) == []
    app = build_app(make_settings(tmp_path), embedder=HashEmbedder(64))
    try:
        assert token_verifiers(app) == []
    finally:
        app.close()


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"name": "a"}', "JSON list"),
        ('["a"]', "must be an object"),
        ([{**KEYS[0], "key": "short"}], "at least 16"),
        ([{**KEYS[0], "key": "has a space in it 0123"}], "without spaces"),
        ([{**KEYS[0], "access": "write"}], "read-write"),
        ([{**KEYS[0], "agent": "bad agent"}], "agent must be"),
        ([{**KEYS[0], "agent": "admin"}], "reserved"),
        ([{**KEYS[0], "agnt": "x"}], "unknown field"),
        ([{k: v for k, v in KEYS[0].items() if k != "access"}], "missing field"),
        ([KEYS[0], {**KEYS[1], "name": "a"}], "used twice"),
        ([KEYS[0], {**KEYS[1], "key": KEY_A}], "unique"),
    ],
)
def test_invalid_configuration_is_refused_clearly(tmp_path: Path, entries: Any, message: str) -> None:
    text = entries if isinstance(entries, str) else json.dumps(entries)
    with pytest.raises(AuthConfigError, match=message) as caught:
        load_keys(make_settings(tmp_path, MEMENTO_KEYS=text))
    assert KEY_A not in str(caught.value)  # errors never echo a secret


def test_short_operator_key_and_missing_keys_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="MEMENTO_ACCESS_KEY"):
        load_keys(make_settings(tmp_path, MEMENTO_ACCESS_KEY="short"))
    with pytest.raises(AuthConfigError, match="cannot read"):
        load_keys(make_settings(tmp_path, MEMENTO_KEYS_FILE=str(tmp_path / "absent.json")))
    with pytest.raises(AuthConfigError, match="used twice"):
        load_keys(make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY, MEMENTO_KEYS=json.dumps([{**KEYS[0], "name": "operator"}])))


def test_stdio_principal(tmp_path: Path) -> None:
    assert stdio_principal(make_settings(tmp_path)) is ANONYMOUS
    agent = stdio_principal(make_settings(tmp_path, MEMENTO_STDIO_AGENT="agent-a"))
    assert (agent.agent_id, agent.read_only) == ("agent-a", False)
    with pytest.raises(AuthConfigError):
        stdio_principal(make_settings(tmp_path, MEMENTO_STDIO_AGENT="no spaces please"))


# ---------------------------------------------------------------- fail closed


def test_loopback_detection() -> None:
    for host in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "", "10.0.0.5", "example.com"):
        assert not is_loopback(host), host


def test_exposed_without_credentials_is_refused(tmp_path: Path) -> None:
    app = build_app(make_settings(tmp_path), embedder=HashEmbedder(64))
    try:
        assert check_exposure(app, "127.0.0.1") is False  # loopback: open, as before
        with pytest.raises(AuthConfigError, match="MEMENTO_ALLOW_UNAUTHENTICATED"):
            check_exposure(app, "0.0.0.0")
        assert check_exposure(app, "0.0.0.0", allow_unauthenticated=True) is False
    finally:
        app.close()
    opted = build_app(make_settings(tmp_path, MEMENTO_ALLOW_UNAUTHENTICATED="1"), embedder=HashEmbedder(64))
    try:
        assert check_exposure(opted, "0.0.0.0") is False
    finally:
        opted.close()
    keyed = build_app(make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY), embedder=HashEmbedder(64))
    try:
        assert check_exposure(keyed, "0.0.0.0") is True
    finally:
        keyed.close()


def _serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "EMBEDDING_PROVIDER": "hash", "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}", **env}
    environ.pop("MEMENTO_ALLOW_UNAUTHENTICATED", None)
    return subprocess.run(
        [*SERVE, "--transport", "http", *args], env=environ, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_cli_refuses_to_start_exposed_without_credentials(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 1
    assert "refusing to serve MCP on 0.0.0.0 without authentication" in done.stderr
    assert "--insecure-no-auth" in done.stderr


def test_cli_refuses_invalid_keys(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--host", "127.0.0.1", "--port", "0", MEMENTO_KEYS='[{"name": "x"}]')
    assert done.returncode == 1
    assert "invalid_configuration" in done.stderr and "missing field" in done.stderr


# ---------------------------------------------------------------- HTTP enforcement


@pytest.fixture
def keyed_app(tmp_path: Path) -> Iterator[App]:
    app = build_app(make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY, MEMENTO_KEYS=json.dumps(KEYS)), embedder=HashEmbedder(64))
    yield app
    app.close()


@pytest.fixture
async def http(keyed_app: App) -> AsyncIterator[httpx.AsyncClient]:
    asgi = create_http_app(keyed_app)
    transport = httpx.ASGITransport(app=asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        client.asgi = asgi  # type: ignore[attr-defined]
        yield client


def bearer(key: str) -> dict[str, str]:
    return {**BOTH, "Authorization": f"Bearer {key}"}


async def open_session(http: httpx.AsyncClient, key: str) -> str:
    reply = await http.post("/mcp", json=INIT, headers=bearer(key))
    assert reply.status_code == 200, reply.text
    session_id = reply.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post("/mcp", json=note, headers={**bearer(key), "Mcp-Session-Id": session_id})).status_code == 202
    return session_id


async def test_missing_or_invalid_token_is_401(http: httpx.AsyncClient) -> None:
    for headers, error in (
        (BOTH, None),
        ({**BOTH, "Authorization": "Bearer not-a-key-0123456789"}, "invalid_token"),
        ({**BOTH, "Authorization": f"Basic {KEY_A}"}, "invalid_request"),
        ({**BOTH, "Authorization": "Bearer "}, "invalid_request"),
    ):
        reply = await http.post("/mcp", json=INIT, headers=headers)
        assert reply.status_code == 401, headers
        challenge = reply.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert (f'error="{error}"' in challenge) if error else ("error=" not in challenge)
        assert "mcp-session-id" not in reply.headers
        assert reply.json()["error"]["message"].startswith("Unauthorized")
    for method, path in (("GET", "/mcp"), ("DELETE", "/mcp"), ("GET", "/sse"), ("POST", "/message?sessionId=x")):
        reply = await http.request(method, path, headers=BOTH)
        assert reply.status_code == 401, (method, path)
        assert reply.headers["www-authenticate"].startswith("Bearer")
    assert http.asgi.state.mcp.server.session_table == {}  # type: ignore[attr-defined]


async def test_valid_keys_open_sessions_bound_to_their_principal(http: httpx.AsyncClient) -> None:
    mcp = http.asgi.state.mcp  # type: ignore[attr-defined]
    for key, agent, read_only in ((OPERATOR_KEY, None, False), (KEY_A, "agent-a", False), (KEY_A_RO, "agent-a", True)):
        session_id = await open_session(http, key)
        principal = mcp.server.session_table[session_id].principal
        assert (principal.agent_id, principal.read_only) == (agent, read_only)


@pytest.mark.parametrize("param", ["access_token", "accessKey", "token", "key", "api_key"])
async def test_token_in_query_string_is_refused(http: httpx.AsyncClient, param: str) -> None:
    reply = await http.post(f"/mcp?{param}={KEY_A}", json=INIT, headers=BOTH)
    assert reply.status_code == 400
    assert "query string" in reply.json()["error"]["message"]
    # even alongside a valid header: the URL already leaked it, nothing is accepted
    reply = await http.post(f"/mcp?{param}={KEY_A}", json=INIT, headers=bearer(KEY_A))
    assert reply.status_code == 400
    reply = await http.get(f"/sse?{param}={KEY_A}", headers={"Accept": "text/event-stream"})
    assert reply.status_code == 400
    assert http.asgi.state.mcp.server.session_table == {}  # type: ignore[attr-defined]


async def test_another_credentials_session_is_404(http: httpx.AsyncClient) -> None:
    session_id = await open_session(http, KEY_B)
    for key in (KEY_A, KEY_A_RO, OPERATOR_KEY):
        with_session = {**bearer(key), "Mcp-Session-Id": session_id}
        reply = await http.post("/mcp", json=PING, headers=with_session)
        assert reply.status_code == 404 and reply.json()["error"]["message"] == "Session not found"
        batch = await http.post("/mcp", json=[PING], headers=with_session)
        assert batch.status_code == 404
        assert (await http.get("/mcp", headers={**with_session, "Accept": "text/event-stream"})).status_code == 404
        assert (await http.delete("/mcp", headers=with_session)).status_code == 404
    mine = {**bearer(KEY_B), "Mcp-Session-Id": session_id}
    assert (await http.post("/mcp", json=PING, headers=mine)).json()["result"] == {}
    assert (await http.delete("/mcp", headers=mine)).status_code == 204


async def test_legacy_message_of_another_credential_is_404(http: httpx.AsyncClient) -> None:
    mcp = http.asgi.state.mcp  # type: ignore[attr-defined]
    owner = KeyVerifier(load_keys(mcp.server.app.settings)).verify(KEY_B)
    session = mcp.server.create_session(principal=owner)
    queue: asyncio.Queue[Any] = asyncio.Queue()
    mcp.legacy._queues[session.id] = queue
    body = json.dumps(PING)
    stranger = await http.post(f"/message?sessionId={session.id}", content=body, headers=bearer(KEY_A))
    assert stranger.status_code == 404
    assert (await http.post(f"/message?sessionId={session.id}", content=body, headers=BOTH)).status_code == 401
    mine = await http.post(f"/message?sessionId={session.id}", content=body, headers=bearer(KEY_B))
    assert mine.status_code == 202
    assert (await asyncio.wait_for(queue.get(), 5))["id"] == 2


async def test_read_only_key_cannot_write_and_agent_cannot_widen(http: httpx.AsyncClient) -> None:
    async def call(key: str, session_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        request = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        reply = await http.post(
            "/mcp",
            json=request,
            headers={**bearer(key), "Mcp-Session-Id": session_id, "Accept": "application/json, text/event-stream;q=0.5"},
        )
        assert reply.status_code == 200, reply.text
        result: dict[str, Any] = reply.json()["result"]
        return result

    ro = await open_session(http, KEY_A_RO)
    refused = await call(KEY_A_RO, ro, "remember", {"content": "read-only keys cannot write", "topic": "t", "type": "fact"})
    assert refused["isError"] is True and refused["content"][0]["text"].startswith("Error (forbidden): ")
    assert (await call(KEY_A_RO, ro, "recall", {"text": "anything"}))["isError"] is False
    a = await open_session(http, KEY_A)
    widened = await call(KEY_A, a, "recall", {"text": "anything", "agentId": "agent-b"})
    assert widened["isError"] is True and widened["content"][0]["text"].startswith("Error (forbidden): ")
    stored = await call(KEY_A, a, "remember", {"content": "agent a knows this", "topic": "t", "type": "fact"})
    assert stored["isError"] is False
    found = await call(KEY_A, a, "recall", {"text": "agent a knows this", "verbose": True})
    assert [f["agentId"] for f in json.loads(found["content"][0]["text"])["fragments"]] == ["agent-a"]


async def test_no_credential_configured_stays_open(tmp_path: Path) -> None:
    app = build_app(make_settings(tmp_path), embedder=HashEmbedder(64))
    try:
        transport = httpx.ASGITransport(app=create_http_app(app))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
            reply = await http.post("/mcp", json=INIT, headers=BOTH)
            assert reply.status_code == 200
            # a stray Authorization header is ignored when no credential is configured
            reply = await http.post("/mcp", json=INIT, headers=bearer("whatever-0123456789"))
            assert reply.status_code == 200
    finally:
        app.close()


async def test_stdio_runs_in_the_configured_agent_namespace(tmp_path: Path) -> None:
    import io

    from memento.mcp.stdio import serve_stdio

    app = build_app(make_settings(tmp_path, MEMENTO_STDIO_AGENT="agent-a"), embedder=HashEmbedder(64))
    lines = [
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "stdio agent fact", "topic": "t", "type": "fact"}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "recall", "arguments": {"text": "x", "agentId": "agent-b"}}},
    ]
    stdin = io.BytesIO(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    stdout = io.BytesIO()
    await serve_stdio(app, stdin, stdout)  # closes the app at EOF
    replies = {r["id"]: r for r in map(json.loads, stdout.getvalue().splitlines()) if "id" in r}
    assert replies[3]["result"]["isError"] is False
    assert replies[4]["result"]["content"][0]["text"].startswith("Error (forbidden): ")
    stored_id = json.loads(replies[3]["result"]["content"][0]["text"])["id"]
    reopened = build_app(make_settings(tmp_path), embedder=HashEmbedder(64))
    try:
        assert [f.agent_id for f in reopened.store.get_many(AgentScope("system"), [stored_id])] == ["agent-a"]
    finally:
        reopened.close()
