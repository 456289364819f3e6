"""`subscriptions/listen` over stdio (MCP 2026-07-28): a real `memento serve --transport stdio`.

Every listen stream shares stdout with the rest; each of its notifications carries its
subscription id, `notifications/cancelled` ends one, and EOF answers those still open.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from mcp_helpers import SERVE, server_env

TIMEOUT_S = 30.0
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "stdio-2026", "version": "0"},
}


class Stdio:
    """The server process; a thread decodes what it writes to stdout."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        with log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*SERVE, "--transport", "stdio"], env={**os.environ, **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink
            )
        self.incoming: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.incoming.put(json.loads(line))
        self.incoming.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, rid: str, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": META}})

    def next(self) -> dict[str, Any]:
        message = self.incoming.get(timeout=TIMEOUT_S)
        assert message is not None, "stdout ended"
        return message

    def until(self, done: Any) -> list[dict[str, Any]]:
        """Messages up to and including the first for which `done(message)` holds."""
        seen: list[dict[str, Any]] = []
        while not seen or not done(seen[-1]):
            seen.append(self.next())
        return seen

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=TIMEOUT_S)


def remember(server: Stdio, rid: str, topic: str) -> list[dict[str, Any]]:
    """Store a fragment on `topic`; the messages seen up to its response."""
    arguments = {"content": f"A note on {topic} ({rid}).", "topic": topic, "type": "fact"}
    server.request(rid, "tools/call", {"name": "remember", "arguments": arguments})
    seen = server.until(lambda m: m.get("id") == rid)
    assert seen[-1]["result"]["isError"] is False, seen[-1]
    return seen[:-1]


def updates(messages: list[dict[str, Any]]) -> list[tuple[Any, str]]:
    return [
        (m["params"]["_meta"][SUBSCRIPTION_ID], m["params"]["uri"])
        for m in messages
        if m.get("method") == "notifications/resources/updated"
    ]


def test_listen_on_stdio_tags_cancels_and_ends_at_eof(tmp_path: Path) -> None:
    server = Stdio(server_env(tmp_path / "m.db"), tmp_path / "server.log")
    try:
        server.request("L1", "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["memory://topics/alpha"]}})
        ack = server.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"] == {"notifications": {"resourceSubscriptions": ["memory://topics/alpha"]}, "_meta": {SUBSCRIPTION_ID: "L1"}}

        seen = remember(server, "w1", "alpha")
        seen += server.until(lambda m: m.get("method") == "notifications/resources/updated") if not updates(seen) else []
        assert updates(seen) == [("L1", "memory://topics/alpha")]

        # Cancelling the listen request ends that subscription (and it gets no response).
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L1"}})
        server.request("L2", "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["memory://topics/omega"]}})
        ack2 = server.until(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
        assert ack2[-1]["params"]["_meta"] == {SUBSCRIPTION_ID: "L2"}
        seen = remember(server, "w2", "alpha") + remember(server, "w3", "omega")
        seen += server.until(lambda m: m.get("method") == "notifications/resources/updated") if not updates(seen) else []
        assert updates(seen) == [("L2", "memory://topics/omega")]  # nothing for the cancelled L1
        assert all(m.get("id") != "L1" for m in seen)

        # EOF: the open listen request is answered before the server exits.
        assert server.process.stdin is not None
        server.process.stdin.close()
        rest: list[dict[str, Any]] = []
        while (message := server.incoming.get(timeout=TIMEOUT_S)) is not None:
            rest.append(message)
        final = [m for m in rest if m.get("id") == "L2"]
        assert len(final) == 1 and final[0]["result"]["_meta"][SUBSCRIPTION_ID] == "L2", rest
        assert server.process.wait(timeout=TIMEOUT_S) == 0
    finally:
        if server.process.poll() is None:
            server.close()
