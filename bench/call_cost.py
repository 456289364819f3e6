"""What one MCP call costs the server in CPU: a real server process (Streamable HTTP, the embedded
SQLite default on a fresh file, the hash embedder so the model is not what is measured), one
official `mcp` client session calling one tool N times in a row; the server's user + system CPU
over the calls (from /proc, so its background workers' share of each call is in: the embedding
outbox and the evaluator after a remember) divided by N, and the wall time per call.

Throughput with many clients is bounded by this figure: the server's Python runs on one core at
a time (bench/load.py at 8 clients keeps it at ~120% of a core), so calls/s ≈ 1000 / the mean
CPU ms of the mix.

    python bench/call_cost.py [--tools tools/list,memory_stats,recall,remember] [--calls 1000] [--memories 50]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
from load import BASE_ENV, start_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def arguments(tool: str, i: int) -> dict[str, Any]:
    if tool == "remember":
        return {"content": f"fresh note {i}: the build {i % 13} ran on runner {i * 7}", "topic": f"builds-{i % 5}", "type": "fact"}
    if tool == "recall":
        return {"text": ("deploy the service", "which runner built it", "staging cluster notes")[i % 3]}
    if tool == "context":
        return {}
    if tool == "memory_stats":
        return {}
    raise SystemExit(f"no arguments known for {tool!r}")


async def call(client: Client, tool: str, i: int) -> None:
    if tool == "tools/list":
        await client.list_tools(cache_mode="bypass")
    else:
        await client.call_tool(tool, arguments(tool, i))


async def measure(url: str, tools: list[str], calls: int, memories: int, cpu_s: Any) -> list[tuple[str, float, float]]:
    out = []
    async with httpx2.AsyncClient(timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            for i in range(memories):
                content = f"note {i}: service {i % 7} deploys through the staging cluster on runner {i}"
                await client.call_tool("remember", {"content": content, "topic": f"deploys-{i % 4}", "type": "fact"})
            for tool in tools:
                for i in range(20):  # warm: first uses load what they load
                    await call(client, tool, 10_000 + i)
                await asyncio.sleep(1.0)  # the workers finish the warm-up's writes
                cpu0, t0 = cpu_s(), time.perf_counter()
                for i in range(calls):
                    await call(client, tool, i)
                wall = time.perf_counter() - t0
                if tool == "remember":
                    await asyncio.sleep(1.0)  # the outbox and the evaluator finish what the calls queued
                out.append((tool, 1000 * (cpu_s() - cpu0) / calls, 1000 * wall / calls))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tools", default="tools/list,memory_stats,recall,remember", help="tools to time, in order (a comma list; tools/list lists them)"
    )
    parser.add_argument("--calls", type=int, default=1000, help="calls per tool")
    parser.add_argument("--memories", type=int, default=50, help="memories written before the timing")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memento-call-cost-"))
    try:
        server = start_server("call-cost", {**BASE_ENV, "DATABASE_URL": f"sqlite:///{work / 'memento.db'}"}, work)
        try:
            rows = asyncio.run(measure(server.url, args.tools.split(","), args.calls, args.memories, server.cpu_s))
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"server CPU and wall time per MCP call (Streamable HTTP, one session, {args.memories} memories, hash embedder)")
    print("| tool | calls | server CPU ms / call | wall ms / call |")
    print("| --- | --- | --- | --- |")
    for tool, cpu, wall in rows:
        print(f"| {tool} | {args.calls} | {cpu:.2f} | {wall:.2f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
