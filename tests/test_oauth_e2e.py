"""OAuth end to end: the official Python MCP client's `OAuthClientProvider` against a real
server process. 401 -> protected-resource and authorization-server metadata discovery ->
dynamic registration -> PKCE authorization (the test's redirect handler plays the operator:
it opens the consent page and posts the form with the operator key) -> token -> tool calls."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp_helpers import HttpServer, data, server_env, start_http_server

pytestmark = pytest.mark.anyio

OPERATOR_KEY = "operator-key-e2e-0123456789"
REDIRECT = "http://127.0.0.1:47911/callback"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    env = {**server_env(tmp_path / "oauth.db"), "MEMENTO_ACCESS_KEY": OPERATOR_KEY}
    running = start_http_server(env, tmp_path / "server.log")
    yield running
    running.stop()


class MemoryTokens:
    """The client's token storage (TokenStorage protocol)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Operator:
    """Stands in for the browser and the operator: approves the consent page."""

    def __init__(self, agent: str, access: str) -> None:
        self.agent, self.access = agent, access
        self.authorize_urls: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        self.authorize_urls.append(url)
        async with httpx.AsyncClient(timeout=10) as browser:
            page = await browser.get(url)
            assert page.status_code == 200, page.text
            found = re.search(r'name=request_id value="([^"]+)"', page.text)
            assert found, page.text
            reply = await browser.post(
                url.split("?")[0],
                data={
                    "request_id": found.group(1),
                    "access_key": OPERATOR_KEY,
                    "agent": self.agent,
                    "access": self.access,
                    "decision": "approve",
                },
            )
        assert reply.status_code == 302, reply.text
        location = reply.headers["location"]
        assert location.startswith(REDIRECT)
        query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        self.result = AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


async def test_official_client_authorises_and_calls_tools(server: HttpServer) -> None:
    unauthenticated = httpx.post(
        server.mcp, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Accept": "application/json, text/event-stream"}
    )
    assert unauthenticated.status_code == 401
    assert "resource_metadata=" in unauthenticated.headers["www-authenticate"]

    storage = MemoryTokens()
    operator = Operator(agent="e2e-agent", access="read-write")
    provider = OAuthClientProvider(
        server_url=server.mcp,
        client_metadata=OAuthClientMetadata(
            client_name="memento e2e",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=operator.redirect,
        callback_handler=operator.callback,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=30) as client:
            stored = data(
                await client.call_tool(
                    "remember", {"content": "OAuth end-to-end works", "topic": "oauth-e2e", "type": "fact", "keywords": ["oauth"]}
                )
            )
            assert stored["id"]
            recalled = data(await client.call_tool("recall", {"topic": "oauth-e2e"}))
            assert any(f["content"] == "OAuth end-to-end works" for f in recalled["fragments"])

    # The flow went through discovery, registration and PKCE with the resource indicator.
    assert len(operator.authorize_urls) == 1
    query = parse_qs(urlsplit(operator.authorize_urls[0]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    assert query["resource"] == [server.mcp]
    assert storage.client is not None and storage.tokens is not None
    assert storage.tokens.refresh_token and storage.tokens.scope == "memory:read memory:write"

    # The token is bound to the namespace the operator chose.
    log = server.log.read_text()
    assert "may use agent e2e-agent (read-write)" in log

    # Revocation (a form post, like consent and /token) ends the grant.
    credentials = {"client_id": storage.client.client_id}
    if storage.client.client_secret:
        credentials["client_secret"] = storage.client.client_secret
    revoked = httpx.post(
        server.url + "/revoke", data={"token": storage.tokens.refresh_token, "token_type_hint": "refresh_token", **credentials}
    )
    assert revoked.status_code == 200, revoked.text
    refused = httpx.post(
        server.url + "/token", data={"grant_type": "refresh_token", "refresh_token": storage.tokens.refresh_token, **credentials}
    )
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant", refused.text
