"""End to end: the official `mcp` client reads resources, gets prompts, completes arguments and
receives resource notifications from the real server process (stdio and Streamable HTTP), on
SQLite and on PostgreSQL + Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, data, server_env, start_http_server
from mcp_types import (
    PromptReference,
    ResourceListChangedNotification,
    ResourceTemplateReference,
    ResourceUpdatedNotification,
    TextContent,
    TextResourceContents,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.backends("sqlite", "postgres+redis")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env(tmp_path: Path, store_env: StoreEnv) -> dict[str, str]:
    return server_env(store_env(tmp_path))


@pytest.fixture
def http_server(env: dict[str, str], tmp_path: Path, backend: str) -> Iterator[HttpServer]:
    server = start_http_server(env, tmp_path / "server.log")
    try:
        assert_backend(server, backend)
        yield server
    finally:
        server.stop()


class Inbox:
    """Collects server notifications and lets a test await one (bounded, no sleeps)."""

    def __init__(self) -> None:
        self.messages: list[IncomingMessage] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: IncomingMessage) -> None:
        self.messages.append(message)
        self._arrived.set()

    def updated(self) -> list[str]:
        return [str(m.params.uri) for m in self.messages if isinstance(m, ResourceUpdatedNotification)]

    def list_changes(self) -> int:
        return sum(isinstance(m, ResourceListChangedNotification) for m in self.messages)

    async def until(self, done: Any) -> None:
        with anyio.fail_after(TIMEOUT_S):
            while not done():
                self._arrived = anyio.Event()
                await self._arrived.wait()


def json_of(contents: Any) -> Any:
    (item,) = contents
    assert isinstance(item, TextResourceContents) and item.mime_type == "application/json"
    return json.loads(item.text)


async def exercise(client: Client, inbox: Inbox) -> None:
    caps = client.server_capabilities
    assert caps is not None and caps.resources is not None
    assert caps.resources.subscribe is True and caps.resources.list_changed is True
    assert caps.prompts is not None and caps.completions is not None

    fid = data(
        await client.call_tool(
            "remember", {"content": "The billing service retries webhooks three times", "topic": "billing", "type": "fact"}
        )
    )["id"]
    listed = await client.list_resources()
    uris = [str(r.uri) for r in listed.resources]
    assert uris[:2] == ["memory://stats", "memory://topics"]
    assert f"memory://fragments/{fid}" in uris
    templates = await client.list_resource_templates()
    assert "memory://fragments/{id}" in {t.uri_template for t in templates.resource_templates}

    fragment = json_of((await client.read_resource(f"memory://fragments/{fid}")).contents)
    assert fragment["content"].startswith("The billing service")
    topics = json_of((await client.read_resource("memory://topics")).contents)
    assert {"topic": "billing", "count": 1, "uri": "memory://topics/billing"} in topics["topics"]

    with pytest.warns(MCPDeprecationWarning):  # deprecated by the client for 2026-07-28 only
        await client.subscribe_resource("memory://topics/billing")
    before = inbox.list_changes()
    data(
        await client.call_tool(
            "remember", {"content": "Billing invoices are generated on the first of the month", "topic": "billing", "type": "fact"}
        )
    )
    await inbox.until(lambda: "memory://topics/billing" in inbox.updated() and inbox.list_changes() > before)

    prompts = await client.list_prompts()
    assert {"memory_injection", "session_start"} <= {p.name for p in prompts.prompts}
    prompt = await client.get_prompt("memory_injection", {"query": "how often are billing webhooks retried"})
    (message,) = prompt.messages
    assert isinstance(message.content, TextContent)
    assert "> The billing service retries webhooks three times" in message.content.text

    topic_done = await client.complete(PromptReference(type="ref/prompt", name="memory_injection"), {"name": "topic", "value": "bil"})
    assert topic_done.completion.values == ["billing"]
    ids = await client.complete(
        ResourceTemplateReference(type="ref/resource", uri="memory://fragments/{id}"), {"name": "id", "value": fid[:6]}
    )
    assert fid in ids.completion.values


async def test_resources_prompts_and_completion_over_streamable_http(http_server: HttpServer) -> None:
    inbox = Inbox()
    # A classic session: its list_changed notifications come unasked on the GET stream (2026 has subscriptions/listen).
    async with Client(http_server.mcp, read_timeout_seconds=TIMEOUT_S, message_handler=inbox, mode="legacy") as client:
        await exercise(client, inbox)


async def test_resources_prompts_and_completion_over_stdio(env: dict[str, str]) -> None:
    inbox = Inbox()
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    # A classic session: its list_changed notifications come unasked on stdout (2026 has subscriptions/listen).
    async with Client(params, read_timeout_seconds=TIMEOUT_S, message_handler=inbox, mode="legacy") as client:
        await exercise(client, inbox)


async def test_unknown_resources_and_prompts_are_protocol_errors(http_server: HttpServer) -> None:
    async with Client(http_server.mcp, read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:  # -32002 before 2026-07-28
        with pytest.raises(MCPError) as err:
            await client.read_resource("memory://fragments/does-not-exist")
        assert err.value.error.code == -32002
        with pytest.raises(MCPError) as err:
            await client.get_prompt("memory_injection", {})
        assert err.value.error.code == -32602
