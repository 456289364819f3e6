"""Drive Memento with fastmcp 4's `Client` in its default mode; run by tests/test_fastmcp4.py.

This script runs in fastmcp's own virtualenv (.tools/fastmcp4, scripts/fastmcp4), never in the
project's: it imports nothing of Memento. It connects the way a fastmcp user would (`auto` mode:
`server/discover` first, the initialize handshake only when refused), calls every tool the server
lists for the default toolset in one realistic session, and prints one JSON report on stdout:
the negotiated protocol version, the tools listed, and each call's outcome.

Usage: fastmcp4_client.py http URL
       fastmcp4_client.py stdio COMMAND [ARG ...]   (the server's environment is this process's)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

# fastmcp is installed only in .tools/fastmcp4, where this script runs, never in the project's environment.
from fastmcp import Client  # type: ignore[import-not-found]
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport  # type: ignore[import-not-found]

TIMEOUT_S = 60


class Session:
    """One client's calls, recorded by tool name (a tool called twice keeps both)."""

    def __init__(self, client: Client[Any]) -> None:
        self.client = client
        self.calls: list[dict[str, Any]] = []
        self.handle: str | None = None  # the 2026-07-28 session handle, when the server has the session tool

    async def call(self, name: str, arguments: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        args = dict(arguments or {})
        if session and self.handle is not None:
            args["session"] = self.handle
        result = await self.client.call_tool(name, args, raise_on_error=False, timeout=TIMEOUT_S)
        text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
        record: dict[str, Any] = {"tool": name, "isError": bool(result.is_error), "text": text}
        try:
            record["payload"] = json.loads(text)
        except ValueError:
            record["payload"] = None
        self.calls.append(record)
        payload: dict[str, Any] = record["payload"] if isinstance(record["payload"], dict) else {}
        return payload


async def exercise(client: Client[Any]) -> dict[str, Any]:
    listed = await client.list_tools()
    names = [tool.name for tool in listed]
    s = Session(client)
    if "session" in names:  # 2026-07-28: working memory lives in a session the server mints
        s.handle = (await s.call("session", {"action": "open"})).get("session")
    await s.call("context", {"tokenBudget": 1500}, session=True)
    error = await s.call(
        "remember",
        {"content": "API pods get ECONNREFUSED from postgres after a node restart", "topic": "database", "type": "error"},
        session=True,
    )
    fix = await s.call(
        "remember", {"content": "Restart pgbouncer, then roll the API deployment", "topic": "database", "type": "procedure"}, session=True
    )
    fact = await s.call("remember", {"content": "Staging uses the eu-west-1 region", "topic": "infra", "type": "fact"}, session=True)
    await s.call(
        "remember",
        {"content": "Currently bisecting the flaky login test", "topic": "work", "type": "episode", "scope": "session"},
        session=True,
    )
    await s.call("link", {"fromId": error.get("id"), "toId": fix.get("id"), "relationType": "resolved_by"})
    await s.call("recall", {"text": "postgres connection refused", "topic": "database"}, session=True)
    await s.call("amend", {"id": fix.get("id"), "importance": 0.9})
    await s.call("pin", {"id": fix.get("id")})
    await s.call("unpin", {"id": fix.get("id")})
    await s.call("graph_explore", {"startId": error.get("id")})
    await s.call("feedback", {"id": fix.get("id"), "event": "helpful"})
    await s.call("tool_feedback", {"toolName": "recall", "relevant": True, "sufficient": True})
    await s.call("export", {"format": "ndjson"})
    await s.call("forget", {"id": fact.get("id")})  # soft: restorable
    await s.call("restore", {"id": fact.get("id")})
    erased = await s.call("forget", {"id": fact.get("id"), "mode": "hard", "force": True})
    await s.call("verify_erasure", {"receipt": erased.get("receipt")})
    await s.call("reflect", {"summary": "Diagnosed the postgres outage after node restarts", "decisions": ["Run pgbouncer as a DaemonSet"]})
    await s.call("summarize_thread", {"keep": True}, session=True)
    await s.call("memory_stats")
    await s.call("memory_consolidate", {"dryRun": True})
    if s.handle is not None:
        await s.call("session", {"action": "close", "session": s.handle})
    return {"tools": names, "calls": s.calls}


async def main(argv: list[str]) -> None:
    kind, rest = argv[0], argv[1:]
    if kind == "http":
        transport: Any = StreamableHttpTransport(rest[0])
    elif kind == "stdio":
        transport = StdioTransport(rest[0], rest[1:], env=dict(os.environ), keep_alive=False)
    else:
        raise SystemExit(f"unknown transport {kind!r}: http URL | stdio COMMAND ARG...")
    client: Client[Any] = Client(transport, timeout=TIMEOUT_S, init_timeout=TIMEOUT_S)  # the default mode: auto
    async with client:
        report = {"protocolVersion": client.protocol_version, "mode": client.mode, **await exercise(client)}
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
