"""docs/hosts.md's configurations work: each one's server starts (stdio) or is reached (HTTP) and
the official MCP client lists the tools, remembers and recalls through it.

Each block is read the way its host reads it (tests/hosts_doc.py): its key names and its own
`${...}` expansion. stdio servers run from the runtime-only environment's `memento` (the page's
`/path/to/memento`) in a throwaway home; HTTP blocks reach a server started with an operator key,
so a block that sends no (or a wrong) credential fails. The Claude Desktop bridge runs the pinned
`mcp-remote` that scripts/hosts installs. The host command lines themselves: test_hosts_cli.py.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hosts_doc import HOSTS, MEMENTO, PORT, Block, Http, Placeholders, Stdio, blocks, config_block, parse, server_of
from hosts_tools import HostTools, host_tools_or_skip
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client  # its defining module (__all__)
from mcp_helpers import TIMEOUT_S, TOOL_NAMES, HttpServer, data, server_env, start_http_server
from runtime_env import runtime_memento

pytestmark = pytest.mark.anyio

VARIANTS = {"host": {"stdio", "http"}, "host-cli": {"stdio", "http", "http-open", "verify"}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ------------------------------------------------------------------ the page itself


def test_every_configuration_block_is_tagged_for_a_known_host() -> None:
    found = blocks()
    untagged = [b.line for b in found if b.lang in ("json", "toml") and b.tag != "host"]
    assert untagged == [], f"docs/hosts.md: tag these blocks (<!-- host: NAME stdio|http -->), lines {untagged}"
    for block in found:
        if block.tag:
            assert block.host in HOSTS, f"line {block.line}: unknown host {block.host!r}"
            assert block.variant in VARIANTS[block.tag], f"line {block.line}: unknown variant {block.variant!r}"
            langs = ("sh",) if block.tag == "host-cli" else ("json", "toml")
            assert block.lang in langs, f"line {block.line}: a {block.tag} block is {' or '.join(langs)}"
    configs = sorted((b.host, b.variant) for b in found if b.tag == "host")
    assert configs == sorted((h, v) for h in HOSTS for v in ("stdio", "http")), "one stdio and one http block per host"


@pytest.mark.parametrize("host", HOSTS)
def test_every_stdio_block_runs_memento_serve_over_stdio(host: str) -> None:
    spec = server_of(host, parse(config_block(host, "stdio")), {}, {})
    assert isinstance(spec, Stdio)
    assert (spec.command, spec.args) == (MEMENTO, ["serve", "--transport", "stdio"])
    assert spec.env == {"MEMENTO_TOOLSETS": "memento"}


@pytest.mark.parametrize("host", HOSTS)
def test_every_http_block_names_the_default_endpoint_and_a_credential(host: str) -> None:
    environ = {"MEMENTO_ACCESS_KEY": "k" * 20}
    spec = server_of(host, parse(config_block(host, "http")), environ, {"memento-key": "k" * 20})
    if isinstance(spec, Stdio):  # the Claude Desktop bridge
        assert host == "claude-desktop" and f"http://127.0.0.1:{PORT}/mcp" in spec.args
        return
    assert spec.url == f"http://127.0.0.1:{PORT}/mcp"
    assert spec.headers == {"Authorization": "Bearer " + "k" * 20}


def test_a_host_that_does_not_expand_a_variable_is_not_assumed_to() -> None:
    # The reader of the page fails rather than guess: Cursor spells it ${env:NAME}.
    document = {"mcpServers": {"memento": {"url": "http://127.0.0.1:56332/mcp", "headers": {"Authorization": "Bearer ${KEY}"}}}}
    with pytest.raises(AssertionError, match="cursor does not expand"):
        server_of("cursor", document, {"KEY": "x"}, {})


# ------------------------------------------------------------------ the servers they declare


async def exercise(client: Client, label: str) -> dict[str, Any]:
    """tools/list, then remember and recall; returns the stored fragment."""
    listed = await client.list_tools()
    # the official client's default mode negotiates 2026-07-28 (through mcp-remote too), where the
    # session tool carries what a protocol session kept (docs/mcp.md, "Sessions at 2026-07-28")
    assert client.session.protocol_version == "2026-07-28", label
    assert {t.name for t in listed.tools} == TOOL_NAMES | {"session"}
    content = f"the {label} configuration from docs/hosts.md reaches Memento"
    stored = data(await client.call_tool("remember", {"content": content, "topic": "hosts", "type": "fact"}))
    found = data(await client.call_tool("recall", {"text": f"{label} configuration", "topic": "hosts", "verbose": True}))
    (fragment,) = [f for f in found["fragments"] if f["id"] == stored["id"]]
    assert fragment["content"] == content
    return dict(fragment)


def launch(spec: Stdio, home: Path, tools: HostTools | None) -> StdioServerParameters:
    """The process a host starts for `spec`, in a throwaway home with the hash embedder."""
    env = {"HOME": str(home), "EMBEDDING_PROVIDER": "hash", **spec.env}
    if spec.command != "npx":
        return StdioServerParameters(command=spec.command, args=spec.args, env=env)
    # npx -y mcp-remote@VERSION …: the same pinned package, installed by scripts/hosts (no download).
    assert tools is not None
    flag, package, *rest = spec.args
    version, bridge = tools.get("mcp-remote")
    assert (flag, package) == ("-y", f"mcp-remote@{version}"), "pin the bridge to the version scripts/hosts installs"
    env["PATH"] = f"{tools.node_dir}{os.pathsep}{os.environ['PATH']}"
    return StdioServerParameters(command=bridge, args=rest, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("host", HOSTS)
async def test_the_stdio_configuration_serves(host: str, tmp_path: Path) -> None:
    values = Placeholders(memento=runtime_memento(), port=PORT, key="unused")
    spec = server_of(host, values.apply(parse(config_block(host, "stdio"))), {}, {})
    assert isinstance(spec, Stdio)
    async with Client(launch(spec, tmp_path, None), read_timeout_seconds=TIMEOUT_S) as client:
        fragment = await exercise(client, f"{host} stdio")
    assert fragment["agentId"] == "default"  # the operator: no MEMENTO_STDIO_AGENT in the block
    # The default store, in the (throwaway) user data folder the page names.
    assert (tmp_path / ".local" / "share" / "memento" / "memento.db").is_file()


KEY = "hosts-" + secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """`memento serve --transport http` with an operator key, as the page's HTTP blocks expect."""
    folder = tmp_path_factory.mktemp("hosts-http")
    server = start_http_server({**server_env(folder / "memento.db"), "MEMENTO_ACCESS_KEY": KEY}, folder / "server.log")
    try:
        yield server
    finally:
        server.stop()


def test_the_keyed_server_refuses_a_client_without_the_key(keyed_server: HttpServer) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}
    reply = httpx.post(keyed_server.mcp, json=init, headers={"Accept": "application/json, text/event-stream"}, timeout=TIMEOUT_S)
    assert reply.status_code == 401


@pytest.mark.slow
@pytest.mark.parametrize("host", HOSTS)
async def test_the_http_configuration_reaches_the_server(host: str, keyed_server: HttpServer, tmp_path: Path) -> None:
    port = int(keyed_server.url.rsplit(":", 1)[1])
    values = Placeholders(memento=runtime_memento(), port=port, key=KEY)
    block: Block = config_block(host, "http")
    # The host's environment holds the key (MEMENTO_ACCESS_KEY); VS Code asks for it instead.
    spec = server_of(host, values.apply(parse(block)), {"MEMENTO_ACCESS_KEY": KEY}, {"memento-key": KEY})
    if isinstance(spec, Stdio):
        tools = host_tools_or_skip()
        async with Client(launch(spec, tmp_path, tools), read_timeout_seconds=TIMEOUT_S) as client:
            await exercise(client, f"{host} http")
        return
    assert isinstance(spec, Http)
    async with create_mcp_http_client(headers=spec.headers) as http:
        async with Client(streamable_http_client(spec.url, http_client=http), read_timeout_seconds=TIMEOUT_S) as client:
            await exercise(client, f"{host} http")


def test_vscode_add_mcp_adds_the_documented_server() -> None:
    # `code` does not install here: its argument must at least be the configuration shown above it.
    (command,) = [b for b in blocks() if (b.tag, b.host, b.variant) == ("host-cli", "vscode", "stdio")]
    prefix = "code --add-mcp '"
    assert command.text.startswith(prefix) and command.text.endswith("'")
    added = json.loads(command.text[len(prefix) : -1])
    assert added.pop("name") == "memento"
    assert {"servers": {"memento": added}} == parse(config_block("vscode", "stdio"))
