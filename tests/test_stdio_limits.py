"""stdio reads bounded lines (issue 17, defects 4 and 10 on the transport with no HTTP): a line
over MEMENTO_MAX_BODY_BYTES is dropped as it streams in and answered with a JSON-RPC error, the
server's memory does not grow with it, and the session keeps serving."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fuzz_helpers import INITIALIZED, StdioPeer, initialize
from mcp_helpers import server_env

pytestmark = pytest.mark.slow

LIMIT = 64 * 1024


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_an_over_long_line_is_refused_without_being_held_and_the_session_goes_on(tmp_path: Path) -> None:
    env = server_env(tmp_path / "memento.db") | {"MEMENTO_MAX_BODY_BYTES": str(LIMIT)}
    peer = StdioPeer(env, tmp_path / "server.log")
    try:
        peer.send(json.dumps(initialize("2025-06-18")).encode())
        assert peer.incoming.get(timeout=30)["result"]["protocolVersion"] == "2025-06-18"
        peer.send(json.dumps(INITIALIZED).encode())
        before = rss_kib(peer.process.pid)
        content = "x" * (64 * 1024 * 1024)  # 64 MiB in one message, a thousand times the limit
        huge = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": content, "topic": "t", "type": "fact"}},
        }
        peer.send(json.dumps(huge).encode())
        refused = peer.incoming.get(timeout=60)
        assert refused["id"] is None and refused["error"]["code"] == -32600, refused
        assert "larger than" in refused["error"]["message"]
        assert rss_kib(peer.process.pid) - before < 32 * 1024  # far less than the 64 MiB it was sent
        peer.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode())
        assert peer.incoming.get(timeout=30) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    finally:
        assert peer.close() == 0
    assert "Traceback" not in (tmp_path / "server.log").read_text()
