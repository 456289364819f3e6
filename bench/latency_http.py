"""The HTTP faces of bench/latency.py (`--rest`): a real server process on the filled store, timed
from an httpx client — REST create (POST /api/memories) and search (GET /api/memories/search,
hybrid), beside MCP remember and recall (tools/call over Streamable HTTP, one session). Each
figure is the whole round trip: HTTP, authentication, validation, embedding (hash embedder),
the store, and the JSON answer."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

KEY = "bench-key-" + "k" * 24
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`python -m memento serve --transport http` on `database_url`, with a key bound to `agent`."""

    def __init__(self, database_url: str, agent: str, dimensions: int) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        keys = [{"name": "bench", "key": KEY, "agent": agent, "access": "read-write"}]
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "EMBEDDING_PROVIDER": "hash",
            "EMBEDDING_DIMENSIONS": str(dimensions),
            "MEMENTO_KEYS": json.dumps(keys),
            "LOG_LEVEL": "WARNING",
        }
        self.log = tempfile.NamedTemporaryFile(prefix="memento-bench-", suffix=".log", delete=False)  # noqa: SIM115 - open until stop()
        command = [sys.executable, "-m", "memento", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(self.port)]
        self.process = subprocess.Popen(command, env=env, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None:
                raise RuntimeError("server exited: " + Path(self.log.name).read_text()[-2000:])
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not start")
            time.sleep(0.1)  # readiness poll of another process

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def _timed(samples: int, call: Callable[[int], httpx.Response]) -> list[float]:
    out = []
    for i in range(samples):
        t0 = time.perf_counter()
        response = call(i)
        out.append((time.perf_counter() - t0) * 1000)
        if response.status_code >= 300:
            raise RuntimeError(f"{response.request.method} {response.request.url}: {response.status_code} {response.text[:500]}")
    return out


def _mcp_session(http: httpx.Client, url: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    }
    reply = http.post(url, headers=MCP_HEADERS, json=init)
    headers = {**MCP_HEADERS, "Mcp-Session-Id": reply.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


def measure_http(
    database_url: str, agent: str, dimensions: int, turns: list[str], questions: list[str], samples: int, rng: random.Random
) -> dict[str, list[float]]:
    """p50/p95 inputs: REST create and search, MCP remember and recall, on a server over the store."""
    server = Server(database_url, agent, dimensions)
    out: dict[str, list[float]] = {}
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as http:

            def create(i: int) -> httpx.Response:
                body = {"content": f"(rest probe {i} {rng.random():.6f}) {rng.choice(turns)}", "memory_type": "fact"}
                return http.post("/api/memories", json=body)

            def search(i: int) -> httpx.Response:
                return http.get("/api/memories/search", params={"q": questions[i % len(questions)], "limit": 10})

            out["rest_create"] = _timed(samples, create)
            out["rest_search"] = _timed(samples, search)
            headers = _mcp_session(http, server.url + "/mcp")

            def tool(name: str, arguments: dict[str, Any], i: int) -> httpx.Response:
                message = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
                return http.post(server.url + "/mcp", headers=headers, json=message)

            def remember(i: int) -> httpx.Response:
                text = f"(mcp probe {i} {rng.random():.6f}) {rng.choice(turns)}"
                return tool("remember", {"content": text, "topic": "probe", "type": "fact"}, i)

            def recall(i: int) -> httpx.Response:
                return tool("recall", {"text": questions[i % len(questions)], "limit": 10, "includeLinks": False}, samples + i)

            out["mcp_remember"] = _timed(samples, remember)
            out["mcp_recall"] = _timed(samples, recall)
    finally:
        server.stop()
    return out


def measure_sizes(
    args: Any,
    sizes: list[int],
    turns: list[str],
    questions: list[str],
    rng: random.Random,
    *,
    fill: Callable[..., None],
    agent: str,
    fmt: Callable[[list[float]], str],
) -> None:
    """Fill a SQLite store to each size (in-process, with latency.py's `fill`) and time the HTTP faces."""
    from memento.app import build_app
    from memento.embeddings.hashing import HashEmbedder
    from memento.models import AgentScope
    from memento.settings import Settings
    from memento.storage.protocol import SearchFilter

    embedder = HashEmbedder(384)
    print(
        f"HTTP faces (sqlite, synchronous={args.synchronous}), one agent, {args.samples} samples per figure, server process + httpx client"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "latency.db"
        url = f"sqlite:///{path}"
        for size in sizes:
            app = build_app(Settings(DATABASE_URL=url, MEMENTO_SQLITE_SYNCHRONOUS=args.synchronous), embedder=embedder)  # type: ignore[call-arg]
            have = app.store.count(AgentScope(agent), SearchFilter())
            if have < size:
                fill(app, embedder, turns, have, size, rng)
            app.close()
            m = measure_http(url, agent, embedder.dimensions, turns, questions, args.samples, rng)
            print(f"\n{size:,} memories:")
            print(f"  REST create  (POST /api/memories)         {fmt(m['rest_create'])}")
            print(f"  REST search  (GET /api/memories/search)   {fmt(m['rest_search'])}")
            print(f"  MCP remember (tools/call)                 {fmt(m['mcp_remember'])}")
            print(f"  MCP recall   (tools/call)                 {fmt(m['mcp_recall'])}")
