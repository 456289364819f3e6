"""OAuth 2.1: metadata, registration, PKCE authorization with the consent form, tokens, and
their use on /mcp — driven in-process through the ASGI app (the end-to-end run with the
official Python client lives in test_oauth_e2e.py)."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from memento.app import App, build_app
from memento.auth.oauth import Endpoints, OAuthServer, normalize_url, oauth_server
from memento.auth.registry import token_verifiers
from memento.embeddings.hashing import HashEmbedder
from memento.settings import Settings
from memento.web import create_http_app

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8000"
RESOURCE = BASE + "/mcp"
OPERATOR_KEY = "operator-key-0123456789abcdef"
REDIRECT = "http://127.0.0.1:33418/callback"
BOTH = {"Accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_settings(tmp_path: Path, **env: str) -> Settings:
    return Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'oauth.db'}", EMBEDDING_PROVIDER="hash", **env)  # type: ignore[arg-type]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def keyed_app(tmp_path: Path, clock: FakeClock) -> Iterator[App]:
    app = build_app(make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY), embedder=HashEmbedder(64))
    oauth_server(app).clock = clock
    yield app
    app.close()


@pytest.fixture
async def http(keyed_app: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_http_app(keyed_app))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


async def register(http: httpx.AsyncClient, **extra: Any) -> dict[str, Any]:
    body = {"redirect_uris": [REDIRECT], "client_name": "Test Client", "token_endpoint_auth_method": "none", **extra}
    reply = await http.post("/register", json=body)
    assert reply.status_code == 201, reply.text
    return dict(reply.json())


def auth_params(client_id: str, challenge: str, **extra: str) -> dict[str, str]:
    return {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "st-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": RESOURCE,
        "scope": "memory:read memory:write",
        **extra,
    }


def request_id(page: str) -> str:
    found = re.search(r'name=request_id value="([^"]+)"', page)
    assert found, page
    return found.group(1)


async def consent(
    http: httpx.AsyncClient, params: dict[str, str], *, key: str = OPERATOR_KEY, agent: str = "agent-a", access: str = "read-write"
) -> httpx.Response:
    page = await http.get("/authorize", params=params)
    assert page.status_code == 200, page.text
    assert page.headers["x-frame-options"] == "DENY"
    form = {"request_id": request_id(page.text), "access_key": key, "agent": agent, "access": access, "decision": "approve"}
    return await http.post("/authorize", data=form)


def redirected(reply: httpx.Response) -> dict[str, str]:
    assert reply.status_code == 302, reply.text
    location = reply.headers["location"]
    assert location.startswith(REDIRECT.rsplit(":", 1)[0])
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


async def authorize(http: httpx.AsyncClient, client: dict[str, Any], **kwargs: str) -> tuple[str, str]:
    verifier, challenge = pkce()
    query = redirected(await consent(http, auth_params(client["client_id"], challenge), **kwargs))
    assert query["state"] == "st-1"
    return query["code"], verifier


async def exchange(http: httpx.AsyncClient, client: dict[str, Any], code: str, verifier: str, **extra: str) -> httpx.Response:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        "client_id": client["client_id"],
        "resource": RESOURCE,
        **extra,
    }
    return await http.post("/token", data=form)


async def tokens(http: httpx.AsyncClient, **kwargs: str) -> tuple[dict[str, Any], dict[str, Any]]:
    client = await register(http)
    code, verifier = await authorize(http, client, **kwargs)
    reply = await exchange(http, client, code, verifier)
    assert reply.status_code == 200, reply.text
    return client, dict(reply.json())


def bearer(token: str) -> dict[str, str]:
    return {**BOTH, "Authorization": f"Bearer {token}"}


# ---------------------------------------------------------------- metadata


@pytest.mark.parametrize("path", ["/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp"])
async def test_authorization_server_metadata(http: httpx.AsyncClient, path: str) -> None:
    reply = await http.get(path)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("application/json")
    meta = reply.json()
    assert meta["issuer"] == BASE  # exactly the base URL, no trailing slash
    assert meta["authorization_endpoint"] == BASE + "/authorize"
    assert meta["token_endpoint"] == BASE + "/token"
    assert meta["registration_endpoint"] == BASE + "/register"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["response_types_supported"] == ["code"]
    assert set(meta["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    assert set(meta["token_endpoint_auth_methods_supported"]) == {"none", "client_secret_post", "client_secret_basic"}
    assert meta["scopes_supported"] == ["memory:read", "memory:write"]


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
async def test_protected_resource_metadata(http: httpx.AsyncClient, path: str) -> None:
    meta = (await http.get(path)).json()
    assert meta["resource"] == RESOURCE
    assert meta["authorization_servers"] == [BASE]
    assert meta["bearer_methods_supported"] == ["header"]
    assert meta["scopes_supported"] == ["memory:read", "memory:write"]


async def test_public_url_sets_issuer_and_audience(tmp_path: Path) -> None:
    app = build_app(
        make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY, MEMENTO_PUBLIC_URL="https://memento.example.com/"),
        embedder=HashEmbedder(64),
    )
    try:
        transport = httpx.ASGITransport(app=create_http_app(app))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            meta = (await http.get("/.well-known/oauth-authorization-server")).json()
            assert meta["issuer"] == "https://memento.example.com"
            assert meta["token_endpoint"] == "https://memento.example.com/token"
            prm = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
            assert prm["resource"] == "https://memento.example.com/mcp"
    finally:
        app.close()


async def test_401_challenge_points_at_the_metadata(http: httpx.AsyncClient) -> None:
    reply = await http.post("/mcp", json=INIT, headers=BOTH)
    assert reply.status_code == 401
    challenge = reply.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="memory:read memory:write"' in challenge
    assert "error=" not in challenge
    bad = await http.post("/mcp", json=INIT, headers=bearer("mma_not-a-token"))
    assert bad.status_code == 401 and 'error="invalid_token"' in bad.headers["www-authenticate"]
    assert "resource_metadata=" in bad.headers["www-authenticate"]


async def test_oauth_off_without_an_operator_key(tmp_path: Path) -> None:
    app = build_app(make_settings(tmp_path), embedder=HashEmbedder(64))
    try:
        assert token_verifiers(app) == []  # loopback stays open: OAuth does not switch auth on
        transport = httpx.ASGITransport(app=create_http_app(app))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            # No metadata is advertised, so no client starts a login nobody can approve (Codex's
            # `mcp add --url` would wait for one forever; docs/hosts.md).
            for path in (
                "/.well-known/oauth-authorization-server",
                "/.well-known/oauth-authorization-server/mcp",
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-protected-resource/mcp",
            ):
                assert (await http.get(path)).status_code == 404, path
            client = await register(http)
            page = await http.get("/authorize", params=auth_params(client["client_id"], pkce()[1]))
            assert page.status_code == 503
            assert "MEMENTO_ACCESS_KEY" in page.text and "operator" in page.text
    finally:
        app.close()


# ---------------------------------------------------------------- registration


async def test_registration(http: httpx.AsyncClient) -> None:
    public = await register(http)
    assert public["client_id"] and "client_secret" not in public
    assert public["token_endpoint_auth_method"] == "none" and public["redirect_uris"] == [REDIRECT]
    confidential = await register(http, token_endpoint_auth_method="client_secret_post")
    assert confidential["client_secret"] and confidential["client_secret_expires_at"] == 0
    default = (await http.post("/register", json={"redirect_uris": ["https://app.example.com/cb"]})).json()
    assert default["token_endpoint_auth_method"] == "client_secret_basic" and default["client_secret"]


async def test_oauth_endpoints_refuse_a_foreign_origin_or_host(http: httpx.AsyncClient) -> None:
    # The same DNS-rebinding gate as /mcp: a page on another site cannot drive registration,
    # consent or token requests through the user's browser.
    for method, path in (
        ("GET", "/.well-known/oauth-authorization-server"),
        ("POST", "/register"),
        ("GET", "/authorize"),
        ("POST", "/token"),
        ("POST", "/revoke"),
    ):
        foreign = await http.request(method, path, headers={"Origin": "https://evil.example"})
        assert foreign.status_code == 403, (method, path, foreign.status_code)
        rebound = await http.request(method, path, headers={"Host": "evil.example"})
        assert rebound.status_code == 403, (method, path, rebound.status_code)
    assert (await http.get("/.well-known/oauth-authorization-server")).status_code == 200


@pytest.mark.parametrize(
    "uris, error",
    [
        (["http://example.com/cb"], "invalid_redirect_uri"),
        (["https://example.com/cb#frag"], "invalid_redirect_uri"),
        (["javascript:alert(1)"], "invalid_redirect_uri"),
        ([], "invalid_redirect_uri"),
        (None, "invalid_redirect_uri"),
    ],
)
async def test_registration_refuses_bad_redirect_uris(http: httpx.AsyncClient, uris: Any, error: str) -> None:
    body = {"client_name": "x"} if uris is None else {"redirect_uris": uris}
    reply = await http.post("/register", json=body)
    assert reply.status_code == 400 and reply.json()["error"] == error


async def test_registration_refuses_bad_metadata(http: httpx.AsyncClient) -> None:
    for body in (
        {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"},
        {"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]},
    ):
        reply = await http.post("/register", json=body)
        assert reply.status_code == 400 and reply.json()["error"] == "invalid_client_metadata"
    assert (await http.post("/register", content=b"nope", headers={"Content-Type": "application/json"})).status_code == 400


# ---------------------------------------------------------------- authorization


async def test_pkce_is_required(http: httpx.AsyncClient) -> None:
    client = await register(http)
    verifier, challenge = pkce()
    for extra in ({"code_challenge_method": "plain", "code_challenge": verifier}, {"code_challenge": ""}, {"code_challenge_method": ""}):
        params = {k: v for k, v in {**auth_params(client["client_id"], challenge), **extra}.items() if v}
        query = redirected(await http.get("/authorize", params=params))
        assert query["error"] == "invalid_request" and query["state"] == "st-1", query
        assert "code" not in query


async def test_untrusted_redirects_get_a_page_not_a_redirect(http: httpx.AsyncClient) -> None:
    client = await register(http)
    challenge = pkce()[1]
    for params in (
        auth_params("unknown-client", challenge),
        auth_params(client["client_id"], challenge, redirect_uri="https://evil.example.com/cb"),
    ):
        reply = await http.get("/authorize", params=params)
        assert reply.status_code == 400 and "location" not in reply.headers
        assert reply.headers["content-type"].startswith("text/html")


async def test_loopback_redirect_may_change_port(http: httpx.AsyncClient) -> None:
    client = await register(http)
    page = await http.get("/authorize", params=auth_params(client["client_id"], pkce()[1], redirect_uri="http://127.0.0.1:9/callback"))
    assert page.status_code == 200


async def test_resource_and_scope_are_validated(http: httpx.AsyncClient) -> None:
    client = await register(http)
    challenge = pkce()[1]
    query = redirected(
        await http.get("/authorize", params=auth_params(client["client_id"], challenge, resource="https://other.example.com/mcp"))
    )
    assert query["error"] == "invalid_target"
    query = redirected(await http.get("/authorize", params=auth_params(client["client_id"], challenge, scope="admin")))
    assert query["error"] == "invalid_scope"
    query = redirected(await http.get("/authorize", params=auth_params(client["client_id"], challenge, response_type="token")))
    assert query["error"] == "unsupported_response_type"


async def test_consent_refuses_a_wrong_operator_key_then_gives_up(http: httpx.AsyncClient) -> None:
    client = await register(http)
    page = await http.get("/authorize", params=auth_params(client["client_id"], pkce()[1]))
    rid = request_id(page.text)
    form = {"request_id": rid, "access_key": "wrong", "agent": "agent-a", "access": "read-write", "decision": "approve"}
    for left in (4, 3, 2, 1):
        reply = await http.post("/authorize", data=form)
        assert reply.status_code == 400 and f"{left} attempt(s) left" in reply.text
    query = redirected(await http.post("/authorize", data=form))
    assert query["error"] == "access_denied"
    gone = await http.post("/authorize", data={**form, "access_key": OPERATOR_KEY})
    assert gone.status_code == 400 and "expired" in gone.text


async def test_consent_deny_and_bad_namespace(http: httpx.AsyncClient) -> None:
    client = await register(http)
    page = await http.get("/authorize", params=auth_params(client["client_id"], pkce()[1]))
    rid = request_id(page.text)
    bad = await http.post("/authorize", data={"request_id": rid, "access_key": OPERATOR_KEY, "agent": "system", "access": "read-write"})
    assert bad.status_code == 400 and "reserved" in bad.text
    query = redirected(await http.post("/authorize", data={"request_id": rid, "decision": "deny"}))
    assert query == {"error": "access_denied", "error_description": "the operator denied the request", "state": "st-1"}


# ---------------------------------------------------------------- token endpoint


async def test_code_exchange_and_tool_call(http: httpx.AsyncClient) -> None:
    client = await register(http)
    code, verifier = await authorize(http, client)
    reply = await exchange(http, client, code, verifier)
    assert reply.status_code == 200, reply.text
    assert reply.headers["cache-control"] == "no-store" and reply.headers["pragma"] == "no-cache"
    body = reply.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["scope"] == "memory:read memory:write" and body["refresh_token"]
    session = await http.post("/mcp", json=INIT, headers=bearer(body["access_token"]))
    assert session.status_code == 200, session.text


async def test_wrong_verifier_and_code_reuse(http: httpx.AsyncClient) -> None:
    client = await register(http)
    code, verifier = await authorize(http, client)
    wrong = await exchange(http, client, code, pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    assert wrong.headers["cache-control"] == "no-store"
    # A failed exchange still spends the code (single use).
    assert (await exchange(http, client, code, verifier)).json()["error"] == "invalid_grant"

    code, verifier = await authorize(http, client)
    first = await exchange(http, client, code, verifier)
    assert first.status_code == 200
    again = await exchange(http, client, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    # Reuse revokes what the code produced.
    assert (await http.post("/mcp", json=INIT, headers=bearer(first.json()["access_token"]))).status_code == 401


async def test_code_is_bound_to_client_and_redirect(http: httpx.AsyncClient) -> None:
    client, other = await register(http), await register(http)
    code, verifier = await authorize(http, client)
    reply = await exchange(http, client, code, verifier, redirect_uri="http://127.0.0.1:33418/other")
    assert reply.json()["error"] == "invalid_grant"
    code, verifier = await authorize(http, client)
    reply = await exchange(http, other, code, verifier)
    assert reply.json()["error"] == "invalid_grant"
    unknown = await exchange(http, {"client_id": "nobody"}, code, verifier)
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"


async def test_code_expires(http: httpx.AsyncClient, clock: FakeClock) -> None:
    client = await register(http)
    code, verifier = await authorize(http, client)
    clock.now += 61
    assert (await exchange(http, client, code, verifier)).json()["error"] == "invalid_grant"


async def test_confidential_client_authentication(http: httpx.AsyncClient) -> None:
    for method in ("client_secret_post", "client_secret_basic"):
        client = await register(http, token_endpoint_auth_method=method)
        code, verifier = await authorize(http, client)
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
        wrong = await http.post("/token", data={**form, "client_id": client["client_id"], "client_secret": "nope"})
        assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
        code, verifier = await authorize(http, client)
        form.update(code=code, code_verifier=verifier)
        if method == "client_secret_post":
            reply = await http.post("/token", data={**form, "client_id": client["client_id"], "client_secret": client["client_secret"]})
        else:
            reply = await http.post("/token", data=form, auth=(client["client_id"], client["client_secret"]))
        assert reply.status_code == 200, reply.text


async def test_token_endpoint_errors(http: httpx.AsyncClient) -> None:
    client = await register(http)
    reply = await http.post("/token", data={"grant_type": "password", "client_id": client["client_id"]})
    assert reply.status_code == 400 and reply.json()["error"] == "unsupported_grant_type"
    reply = await http.post("/token", json={"grant_type": "authorization_code"})
    assert reply.status_code == 400 and reply.json()["error"] == "invalid_request"
    assert reply.headers["cache-control"] == "no-store"


async def test_refresh_rotation_and_reuse_detection(http: httpx.AsyncClient) -> None:
    client, first = await tokens(http)
    refresh = {"grant_type": "refresh_token", "client_id": client["client_id"], "resource": RESOURCE}
    second = await http.post("/token", data={**refresh, "refresh_token": first["refresh_token"]})
    assert second.status_code == 200, second.text
    second_body = second.json()
    assert second_body["refresh_token"] != first["refresh_token"]
    assert second.headers["cache-control"] == "no-store"
    assert (await http.post("/mcp", json=INIT, headers=bearer(second_body["access_token"]))).status_code == 200
    # The old refresh token is spent; presenting it again revokes the whole grant.
    reuse = await http.post("/token", data={**refresh, "refresh_token": first["refresh_token"]})
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    assert (await http.post("/mcp", json=INIT, headers=bearer(second_body["access_token"]))).status_code == 401
    after = await http.post("/token", data={**refresh, "refresh_token": second_body["refresh_token"]})
    assert after.json()["error"] == "invalid_grant"


async def test_refresh_is_bound_to_its_client(http: httpx.AsyncClient) -> None:
    _, body = await tokens(http)
    other = await register(http)
    reply = await http.post(
        "/token", data={"grant_type": "refresh_token", "client_id": other["client_id"], "refresh_token": body["refresh_token"]}
    )
    assert reply.json()["error"] == "invalid_grant"


async def test_expired_access_token_is_401(http: httpx.AsyncClient, clock: FakeClock) -> None:
    _, body = await tokens(http)
    clock.now += 3601
    reply = await http.post("/mcp", json=INIT, headers=bearer(body["access_token"]))
    assert reply.status_code == 401 and 'error="invalid_token"' in reply.headers["www-authenticate"]


async def test_refresh_token_is_not_an_access_token(http: httpx.AsyncClient) -> None:
    _, body = await tokens(http)
    assert (await http.post("/mcp", json=INIT, headers=bearer(body["refresh_token"]))).status_code == 401


async def test_wrong_audience_is_401(keyed_app: App, http: httpx.AsyncClient) -> None:
    _, body = await tokens(http)
    # The same token presented to this server under another name (another resource URL).
    transport = httpx.ASGITransport(app=create_http_app(keyed_app))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost:8000") as elsewhere:
        reply = await elsewhere.post("/mcp", json=INIT, headers=bearer(body["access_token"]))
        assert reply.status_code == 401
    server = oauth_server(keyed_app)
    assert server.verify(body["access_token"], resource=RESOURCE) is not None
    assert server.verify(body["access_token"], resource="https://other.example.com/mcp") is None
    assert server.verify(body["access_token"], resource=None) is None


async def test_revocation(http: httpx.AsyncClient) -> None:
    client, body = await tokens(http)
    reply = await http.post("/revoke", data={"token": body["refresh_token"], "client_id": client["client_id"]})
    assert reply.status_code == 200
    assert (await http.post("/mcp", json=INIT, headers=bearer(body["access_token"]))).status_code == 401


# ---------------------------------------------------------------- the principal


async def call_tool(http: httpx.AsyncClient, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    init = await http.post("/mcp", json=INIT, headers=bearer(token))
    assert init.status_code == 200, init.text
    sid = init.headers["mcp-session-id"]
    headers = {**bearer(token), "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    reply = await http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}}, headers=headers
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def test_consent_decides_namespace_and_access(keyed_app: App, http: httpx.AsyncClient) -> None:
    server = oauth_server(keyed_app)
    _, rw = await tokens(http, agent="agent-b", access="read-write")
    principal = server.verify(rw["access_token"], resource=RESOURCE)
    assert principal is not None and principal.kind == "oauth"
    assert (principal.agent_id, principal.read_only) == ("agent-b", False)
    assert principal.scopes == frozenset({"memory:read", "memory:write"})

    _, ro = await tokens(http, agent="agent-b", access="read-only")
    principal = server.verify(ro["access_token"], resource=RESOURCE)
    assert principal is not None and principal.read_only and ro["scope"] == "memory:read"

    stored = await call_tool(http, rw["access_token"], "remember", {"content": "OAuth works", "topic": "auth", "type": "fact"})
    assert stored["result"]["isError"] is False, stored
    with pytest.raises(AssertionError, match="403"):
        await call_tool(http, ro["access_token"], "remember", {"content": "nope", "topic": "auth", "type": "fact"})
    init = await http.post("/mcp", json=INIT, headers=bearer(ro["access_token"]))
    headers = {**bearer(ro["access_token"]), "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    write = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "forget", "arguments": {"topic": "auth"}}}
    refused = await http.post("/mcp", json=write, headers=headers)
    assert refused.status_code == 403  # insufficient capability: the client may ask for memory:write
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
    assert 'scope="memory:write"' in refused.headers["www-authenticate"]
    recalled = await call_tool(http, ro["access_token"], "recall", {"topic": "auth"})
    assert "OAuth works" in str(recalled["result"]), recalled


async def test_read_only_request_cannot_be_widened_at_consent(keyed_app: App, http: httpx.AsyncClient) -> None:
    client = await register(http)
    verifier, challenge = pkce()
    reply = await consent(http, auth_params(client["client_id"], challenge, scope="memory:read"), access="read-write")
    code = redirected(reply)["code"]
    body = (await exchange(http, client, code, verifier)).json()
    assert body["scope"] == "memory:read"
    principal = oauth_server(keyed_app).verify(body["access_token"], resource=RESOURCE)
    assert principal is not None and principal.read_only


def test_normalize_url() -> None:
    assert normalize_url("HTTP://LocalHost:80/mcp/") == "http://localhost/mcp"
    assert normalize_url("https://a.example:443") == "https://a.example"
    assert normalize_url("http://[::1]:8000/mcp") == "http://[::1]:8000/mcp"


def test_server_without_store_argument_uses_memory(tmp_path: Path) -> None:
    server = OAuthServer(make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY))
    assert server.active
    meta = server.authorization_server_metadata(Endpoints("https://m.example"))
    assert meta["issuer"] == "https://m.example"
    assert not OAuthServer(make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY, MEMENTO_OAUTH="0")).active
