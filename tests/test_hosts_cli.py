"""docs/hosts.md's commands, run with the hosts' real command lines: `claude`, `gemini` and `codex`
(pinned, installed into .tools/ by scripts/hosts) in a throwaway home folder, offline, with no
login. Each test runs a block exactly as the page shows it (placeholders replaced), checks that
the configuration file the host wrote holds the server as the page's configuration block shows
it, then asks the host itself whether it connects: `claude mcp get` and `gemini mcp list`
health-check the server; Codex's `mcp list` does not connect, so its app server (what `/mcp` in
a Codex session shows) is asked for the server's status and tools.
"""

from __future__ import annotations

import json
import queue
import re
import secrets
import subprocess
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hosts_doc import Placeholders, cli_block, config_block, entry, parse
from hosts_tools import HostTools, host_tools_or_skip
from mcp_helpers import TOOL_NAMES, HttpServer, server_env, start_http_server
from runtime_env import runtime_memento

pytestmark = pytest.mark.slow

COMMAND_TIMEOUT_S = 120
KEY = "hosts-cli-" + secrets.token_urlsafe(24)
CONFIG_FILES = {"claude-code": ".claude.json", "gemini": ".gemini/settings.json", "codex": ".codex/config.toml"}
CASES = [
    ("claude-code", "stdio"),
    ("claude-code", "http"),
    ("claude-code", "http-open"),
    ("gemini", "stdio"),
    ("gemini", "http"),
    ("codex", "stdio"),
    ("codex", "http"),
    ("codex", "http-open"),
]


@pytest.fixture(scope="module")
def tools() -> HostTools:
    return host_tools_or_skip()


def _server(tmp_path_factory: pytest.TempPathFactory, name: str, env: dict[str, str]) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp(name)
    server = start_http_server({**server_env(folder / "memento.db"), **env}, folder / "server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    yield from _server(tmp_path_factory, "hosts-cli-keyed", {"MEMENTO_ACCESS_KEY": KEY})


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    yield from _server(tmp_path_factory, "hosts-cli-open", {})


@dataclass
class Host:
    """One host command line in a throwaway home, run from a project folder."""

    name: str
    home: Path
    project: Path
    env: dict[str, str]
    values: Placeholders

    def run(self, commands: str, extra_env: dict[str, str] | None = None) -> str:
        """The page's commands, through bash as a user would type them; returns their output."""
        script = "set -euo pipefail\n" + self.values.command(commands)
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=self.project,
            env={**self.env, **(extra_env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{self.name}: {commands!r} exited {done.returncode}:\n{output}"
        return output

    def written(self) -> dict[str, Any]:
        """The `memento` entry of the configuration file the host wrote."""
        path = self.home / CONFIG_FILES[self.name]
        text = path.read_text(encoding="utf-8")
        document = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        return entry(self.name, document)


MakeHost = Callable[[str, int], Host]


@pytest.fixture
def make_host(tools: HostTools, tmp_path: Path) -> MakeHost:
    """`make_host(name, port)`: the host `name` in a fresh home, with the page's placeholders
    standing for the runtime environment's `memento` and an HTTP server on `port`."""

    def make(name: str, port: int) -> Host:
        home, project = tmp_path / "home", tmp_path / "project"
        home.mkdir()
        project.mkdir()
        env = {
            "PATH": tools.path(tools.bin_dir(tmp_path / "bin")),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "EMBEDDING_PROVIDER": "hash",  # reaches the stdio servers the health checks start
        }
        return Host(name, home, project, env, Placeholders(memento=runtime_memento(), port=port, key=KEY))

    return make


def documented(host: Host, variant: str) -> dict[str, Any]:
    """The page's configuration block for this server, as the host should have written it."""
    expected = entry(host.name, host.values.apply(parse(config_block(host.name, "stdio" if variant == "stdio" else "http"))))
    if variant == "http-open":  # the same server, without the credential
        expected = {k: v for k, v in expected.items() if k not in ("headers", "bearer_token_env_var")}
    return expected


@pytest.mark.parametrize("name, variant", CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_the_documented_commands_add_a_working_server(name: str, variant: str, make_host: MakeHost, request: pytest.FixtureRequest) -> None:
    server: HttpServer | None = None
    if variant != "stdio":
        server = request.getfixturevalue("keyed_server" if variant == "http" else "open_server")
    port = int(server.url.rsplit(":", 1)[1]) if server else 56332
    host = make_host(name, port)
    with_key = {"MEMENTO_ACCESS_KEY": KEY}
    host.run(cli_block(name, variant).text, with_key)
    assert host.written() == documented(host, variant)
    verify = cli_block(name, "verify").text
    if name == "claude-code":
        shown = host.run(verify, with_key)
        assert "Status: ✔ Connected" in shown, shown
    elif name == "gemini":
        shown = host.run(verify, with_key)
        assert re.search(r"memento: .* - Disabled", shown), shown  # an untrusted folder (the pitfall)
        trust = {str(host.project): "TRUST_FOLDER"}  # what the trust dialog records
        (host.home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trust))
        shown = host.run(verify, with_key)
        assert re.search(r"✓ memento: .* - Connected", shown), shown
    else:
        shown = host.run(verify, with_key)
        assert "memento" in shown and (host.values.memento if variant == "stdio" else f"127.0.0.1:{port}/mcp") in shown, shown
        status = codex_status(host, with_key)
        expected_auth = {"stdio": "unsupported", "http": "bearerToken", "http-open": "unsupported"}[variant]
        assert (status["authStatus"], status.get("toolsError")) == (expected_auth, None), status
        assert set(status["tools"]) == TOOL_NAMES


def codex_status(host: Host, extra_env: dict[str, str]) -> dict[str, Any]:
    """`mcpServerStatus/list` of `codex app-server` for `memento`: Codex connects to the server
    and lists its tools, as `/mcp` in a session does (JSON-RPC, one message per line)."""
    process = subprocess.Popen(
        ["codex", "app-server"],
        cwd=host.project,
        env={**host.env, **extra_env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    output = process.stdout

    def read() -> None:  # a thread, so a wait for the next line can time out
        for line in output:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stdin = process.stdin
    deadline = time.monotonic() + COMMAND_TIMEOUT_S

    def call(ident: int, method: str, params: dict[str, Any]) -> Any:
        stdin.write(json.dumps({"id": ident, "method": method, "params": params}) + "\n")
        stdin.flush()
        while True:
            try:
                message = json.loads(lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"codex app-server did not answer {method}") from None
            if message.get("id") == ident:
                assert "error" not in message, message
                return message["result"]

    try:
        call(1, "initialize", {"clientInfo": {"name": "memento-tests", "version": "0"}})
        stdin.write(json.dumps({"method": "initialized"}) + "\n")
        status = call(2, "mcpServerStatus/list", {"serverName": "memento"})
        (found,) = [s for s in status["data"] if s["name"] == "memento"]
        result: dict[str, Any] = found
        return result
    finally:
        process.kill()
        process.wait(timeout=15)
        reader.join(timeout=15)


def test_codex_mcp_add_does_not_wait_for_a_login_on_an_open_server(make_host: MakeHost, open_server: HttpServer) -> None:
    # A server without an operator key serves no OAuth metadata: `codex mcp add --url` used to
    # find Memento's and wait for a browser sign-in that nobody could approve.
    port = int(open_server.url.rsplit(":", 1)[1])
    host: Host = make_host("codex", port)
    shown = host.run(cli_block("codex", "http-open").text)
    assert "OAuth" not in shown, shown
    assert (host.home / ".codex" / "config.toml").is_file()
