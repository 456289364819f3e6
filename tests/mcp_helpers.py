"""Helpers for end-to-end tests that drive the real server process with the official MCP client.

Shared by the end-to-end test modules (test_mcp_clients, test_bad_input, test_durability, ...).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from mcp_types import CallToolResult, TextContent
from runtime_env import runtime_python

TIMEOUT_S = 30.0

# The public contract: the tools every server serves by default (conformance fixtures off), seed
# 000's eleven and 004's as they land. Hard-coded on purpose, not derived from memento.mcp.tools,
# so that renaming or dropping a tool fails a test.
TOOL_NAMES = {
    "remember",
    "recall",
    "forget",
    "link",
    "amend",
    "reflect",
    "context",
    "tool_feedback",
    "memory_stats",
    "memory_consolidate",
    "graph_explore",
    "pin",  # 004 §5.1
    "unpin",
    "restore",
    "verify_erasure",
    "export",  # docs/export.md
    "feedback",
    "summarize_thread",  # 004 §5.1
}


class _ServeCommand(Sequence[str]):
    """`python -m memento serve` from the runtime-only environment (tests/runtime_env.py), so
    a dependency missing from pyproject's runtime list fails the end-to-end tests. Resolved on
    first use: collecting the tests never builds the environment."""

    def _argv(self) -> list[str]:
        return [runtime_python(), "-m", "memento", "serve"]

    def __getitem__(self, index: Any) -> Any:
        return self._argv()[index]

    def __len__(self) -> int:
        return 4


SERVE: Sequence[str] = _ServeCommand()
"""The server command; `SERVE[0]` is the runtime environment's python (for `-m memento` CLIs)."""


def server_env(store: Path | Mapping[str, str]) -> dict[str, str]:
    """Environment for a server with the deterministic hash embedder, on the SQLite file `store`
    or on the store settings given (conftest's `store_env(folder)`: SQLite, PostgreSQL, Redis)."""
    database = {"DATABASE_URL": f"sqlite:///{store}"} if isinstance(store, Path) else dict(store)
    # The evaluator's thread is off: its background writes (utility, links) would race the
    # assertions of suites about other things; tests/test_evaluator.py turns it on.
    return {
        "EMBEDDING_PROVIDER": "hash",
        **database,
        "LOG_LEVEL": "INFO",
        "MEMENTO_HOST": "127.0.0.1",
        "MEMENTO_EVALUATOR_ENABLED": "false",
    }


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class HttpServer:
    process: subprocess.Popen[bytes]
    url: str
    log: Path
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def operator_headers(self) -> dict[str, str]:
        """The operator key's Authorization header, when the server has one (full /health)."""
        key = self.env.get("MEMENTO_ACCESS_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    @property
    def mcp(self) -> str:
        return self.url + "/mcp"

    def stop(self) -> int:
        """SIGTERM, then wait (bounded), SIGKILL if it hangs; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            return self.crash()

    def crash(self) -> int:
        """SIGKILL: no shutdown code runs (no index save, no flush, no session cleanup)."""
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait(timeout=15)


def start_http_server(env: dict[str, str], log: Path) -> HttpServer:
    """Start `memento serve --transport http` on 127.0.0.1 and wait (bounded) until healthy."""
    port = free_port()
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [*SERVE, "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    server = HttpServer(process, f"http://127.0.0.1:{port}", log, env)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            assert process.poll() is None, "server exited:\n" + log.read_text()
            try:
                if httpx.get(server.url + "/health", timeout=1).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not become healthy:\n" + log.read_text()
            time.sleep(0.05)  # readiness poll of a separate process; there is no event to await
    except BaseException:
        server.crash()
        raise


def assert_backend(server: HttpServer, backend: str) -> None:
    """The server really runs on `backend` (conftest's names: sqlite, postgres, postgres+redis)."""
    health = httpx.get(server.url + "/health", headers=server.operator_headers, timeout=TIMEOUT_S).json()
    assert health["database"]["backend"] == backend.split("+")[0], health
    assert (health["redis"]["status"] == "up") == backend.endswith("+redis"), health


def data(result: CallToolResult) -> dict[str, Any]:
    """The JSON payload of a successful tool result."""
    assert result.is_error is False, result.content
    assert isinstance(result.content[0], TextContent)
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    # sent once as text by default; with MEMENTO_STRUCTURED_OUTPUT also as structuredContent
    assert result.structured_content in (None, parsed)
    return parsed


class ToolDriver:
    """Calls tools on a connected `mcp` client and keeps the names it drove, so a test can assert
    that every listed tool was exercised; each call must succeed and returns its JSON payload."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.called: set[str] = set()

    async def __call__(self, name: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
        self.called.add(name)
        return data(await self.client.call_tool(name, arguments, **options))


def error_of(result: CallToolResult) -> tuple[str, str, str]:
    """(code, message, text) of a tool error result."""
    assert result.is_error is True, result.content
    assert isinstance(result.content[0], TextContent)
    text = result.content[0].text
    found = re.fullmatch(r"Error \(([a-z_]+)\): (.*)", text, re.DOTALL)
    assert found is not None, text
    code, message = found.group(1), found.group(2)
    structured = result.structured_content
    assert structured is None or structured == {"error": {"code": code, "message": message}}, structured
    return code, message, text
