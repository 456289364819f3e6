"""End to end: fastmcp 4.0.x's `Client`, in its default (`auto`) mode, against the real server.

fastmcp lives in a virtualenv of its own (.tools/fastmcp4, installed by scripts/fastmcp4; never in
the project's environment): tests/fastmcp4_client.py runs there, connects over stdio and over
Streamable HTTP exactly as a fastmcp user would, calls every tool of the default toolset in one
session and reports what it got. Without that toolchain these tests skip, unless
MEMENTO_REQUIRE_CONFORMANCE=1 (CI) makes that a failure, like the conformance toolchain's.

fastmcp 4 probes `server/discover` at 2026-07-28 first and falls back to `initialize` only when
refused, so the revision it settles on is the newest this server speaks to it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import StoreEnv
from mcp_helpers import SERVE, TOOL_NAMES, start_http_server
from mcp_helpers import server_env as helper_env

from memento.mcp import versions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "fastmcp4"
DRIVER = Path(__file__).with_name("fastmcp4_client.py")
RUN_TIMEOUT_S = 240

# The revision fastmcp's auto mode must settle on: 2026-07-28 where the transport speaks it
# without a handshake (stdio: memento.mcp.stateless; Streamable HTTP: its sessionless requests,
# with memento.mcp.subscriptions), else the newest handshake revision.
STDIO_STATELESS = importlib.util.find_spec("memento.mcp.stateless") is not None
HTTP_STATELESS = STDIO_STATELESS and importlib.util.find_spec("memento.mcp.subscriptions") is not None


@pytest.fixture(scope="module")
def fastmcp_python() -> str:
    """fastmcp's virtualenv python; skip (or fail, when required) unless scripts/fastmcp4 installed it."""
    check = subprocess.run(["bash", str(SCRIPT), "--python"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    if check.returncode == 0:
        return check.stdout.strip()
    message = (check.stdout + check.stderr).strip() or f"scripts/fastmcp4 --python exited {check.returncode}"
    if os.environ.get("MEMENTO_REQUIRE_CONFORMANCE") == "1":
        pytest.fail(f"MEMENTO_REQUIRE_CONFORMANCE=1 but fastmcp 4 is not installed: {message}")
    pytest.skip(f"fastmcp 4 not installed (scripts/fastmcp4 --install-only): {message}")


@pytest.fixture
def server_env(tmp_path: Path, store_env: StoreEnv) -> dict[str, str]:
    return helper_env(store_env(tmp_path))


def drive(python: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run the fastmcp driver; its JSON report."""
    done = subprocess.run(
        [python, str(DRIVER), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env={**os.environ, **env}, cwd=ROOT
    )
    assert done.returncode == 0, f"fastmcp driver failed ({done.returncode}):\n{done.stderr[-6000:]}"
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def assert_every_tool_worked(report: dict[str, Any], expected_version: str) -> None:
    assert report["mode"] == "auto"
    assert report["protocolVersion"] == expected_version
    listed = set(report["tools"])
    stateless = report["protocolVersion"] == versions.STATELESS
    assert listed == TOOL_NAMES | ({"session"} if stateless else set())
    calls = report["calls"]
    failed = [(c["tool"], c["text"]) for c in calls if c["isError"]]
    assert failed == []
    assert {c["tool"] for c in calls} == listed  # every tool, called
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for c in calls:
        by_tool.setdefault(c["tool"], []).append(c["payload"])
    error_id = by_tool["remember"][0]["id"]
    assert error_id in {f["id"] for f in by_tool["recall"][0]["fragments"]}
    assert by_tool["graph_explore"][0]["edges"][0]["relation"] == "resolved_by"
    assert by_tool["verify_erasure"][0]["verified"] is True
    assert by_tool["summarize_thread"][0]["itemCount"] == 1  # the one scope=session note, in the client's session
    assert by_tool["memory_stats"][0]["workingMemory"] == 1
    if stateless:
        opened, closed = by_tool["session"]
        assert closed["sessionId"] == opened["sessionId"] == by_tool["summarize_thread"][0]["sessionId"]


def test_fastmcp4_over_stdio(fastmcp_python: str, server_env: dict[str, str]) -> None:
    report = drive(fastmcp_python, ["stdio", SERVE[0], *SERVE[1:], "--transport", "stdio"], server_env)
    assert_every_tool_worked(report, versions.STATELESS if STDIO_STATELESS else versions.LATEST)


def test_fastmcp4_over_streamable_http(fastmcp_python: str, server_env: dict[str, str], tmp_path: Path) -> None:
    server = start_http_server(server_env, tmp_path / "server.log")
    try:
        report = drive(fastmcp_python, ["http", server.mcp], server_env)
    finally:
        server.stop()
    assert_every_tool_worked(report, versions.STATELESS if HTTP_STATELESS else versions.LATEST)
