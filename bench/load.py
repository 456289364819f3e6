"""Load test: N concurrent MCP clients calling mixed tools for M minutes; errors, latency, memory.

    python bench/load.py --setup sqlite   --clients 8 --minutes 2
    python bench/load.py --setup replicas --clients 8 --minutes 2 [--embedder local] [--json out.json]

Setups: `sqlite` is one server on the embedded SQLite default (a fresh file); `replicas` is two
servers on one PostgreSQL (the tests' embedded PostgreSQL 18 + pgvector, bench/pg_server.py)
and one Redis (tests/redis_harness.py), the clients spread over both (client i talks to replica
i mod 2). Every server is started here, listens on 127.0.0.1 only, and is stopped at the end
(servers also get SIGTERM if this process dies first).

Clients: the official `mcp` Python client (`mcp.Client` over Streamable HTTP), one MCP session
per client, all clients as asyncio tasks in this process — what agents really run, including
the SDK's own cost (so the client side can be the bottleneck; its CPU use is printed). Each
client is its own agent (`agentId` load-<i>) and works on the fragments it created: a first
round calls every tool once, then tools are drawn by weight (remember 30, recall 25, amend 12,
link 10, memory_stats 10, context 8, forget 5); amend supersedes one time in five. Once a client
holds `--live` fragments (default 300) its remember draws become forgets, so the data
stops growing and a memory that keeps growing points at a leak, not at more data. Embeddings
use the deterministic hash embedder, so the figures measure the server, not the model;
`--embedder local` runs the bundled real model instead (what agents run).

It prints total calls, the error rate (and the first errors), p50/p95/p99/max latency per
tool, throughput, the client's and servers' CPU use, and each server's RSS sampled every
second: start, middle, end, with a "memory flat" verdict — flat when the second half of the run
grew RSS by less than FLAT_FRACTION of the middle value. It exits 1 when any call failed.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("remember", "recall", "context", "amend", "link", "forget", "memory_stats")
WEIGHTS = {"remember": 30, "recall": 25, "amend": 12, "link": 10, "memory_stats": 10, "context": 8, "forget": 5}
TYPES = ("fact", "decision", "error", "procedure", "preference", "relation", "episode")
RELATIONS = ("related", "caused_by", "resolved_by", "part_of")
TOPICS = ("database", "deployment", "security", "frontend", "billing", "search", "oncall")
WORDS = (
    "index cache latency replica vacuum migration schema rollback deploy canary token queue worker "
    "timeout retry backoff shard partition vector embedding keyword recall session memory agent "
    "postgres redis sqlite nginx kubernetes helm terraform alert pager budget invoice customer"
).split()
CALL_TIMEOUT_S = 120.0
START_TIMEOUT_S = 60.0
FLAT_FRACTION = 0.05
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- servers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when this bench process goes away (Linux prctl)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Server:
    """One `memento serve --transport http` process on 127.0.0.1."""

    name: str
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def rss(self) -> int:
        """Resident set size in bytes (0 once the process is gone)."""
        try:
            return int(Path(f"/proc/{self.process.pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            return 0

    def cpu_s(self) -> float:
        """User + system CPU seconds used so far."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / TICKS
        except (OSError, IndexError, ValueError):
            return 0.0

    def stop(self) -> None:
        """SIGTERM, a bounded wait, SIGKILL if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_server(name: str, env: dict[str, str], workdir: Path) -> Server:
    """Start a server and wait (bounded) until /health answers 200."""
    port, log = _free_port(), workdir / f"{name}.log"
    command = [sys.executable, "-m", "memento", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("ab") as sink:
        process = subprocess.Popen(
            command, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, preexec_fn=_die_with_parent
        )
    server = Server(name, process, f"http://127.0.0.1:{port}/mcp", log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited while starting:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"{name} not healthy after {START_TIMEOUT_S:g}s:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)  # readiness poll of another process: there is no event to wait on


BASE_ENV = {"EMBEDDING_PROVIDER": "hash", "LOG_LEVEL": "WARNING", "MEMENTO_HOST": "127.0.0.1"}


@contextmanager
def servers_for(setup: str, workdir: Path, embedder: str = "hash") -> Iterator[list[Server]]:
    """The servers of a setup, running; everything (PostgreSQL and Redis included) stopped after."""
    base = {**BASE_ENV, "EMBEDDING_PROVIDER": embedder}
    with ExitStack() as stack:
        if setup == "sqlite":
            env = {**base, "DATABASE_URL": f"sqlite:///{workdir / 'memento.db'}"}
            names = ["sqlite"]
        else:
            sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
            from pg_server import embedded_postgres
            from redis_harness import RedisServer

            binary = shutil.which("redis-server")
            if binary is None:
                raise SystemExit("the replicas setup needs redis-server (apt-get install redis-server)")
            postgres = stack.enter_context(embedded_postgres())
            redis = RedisServer(binary, _free_port())
            redis.start()
            stack.callback(redis.stop)
            env = {
                **base,
                "DATABASE_URL": postgres.app_dsn,
                "DATABASE_MIGRATION_URL": postgres.owner_dsn,
                "REDIS_ENABLED": "true",
                "REDIS_HOST": "127.0.0.1",
                "REDIS_PORT": str(redis.port),
            }
            names = ["replica-a", "replica-b"]
        running: list[Server] = []
        for name in names:
            running.append(start_server(name, env, workdir))
            stack.callback(running[-1].stop)
        yield running


# ---------------------------------------------------------------- clients


@dataclass
class Stats:
    """Latencies (seconds) per tool and the failures, shared by every client task."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in TOOLS})
    errors: list[str] = field(default_factory=list)
    created: int = 0  # fragments written (remember, supersede): the data the servers hold grows with it

    def calls(self) -> int:
        return sum(len(v) for v in self.latencies.values()) + len(self.errors)


class Agent:
    """One client's workload: builds the next call from the fragments it has created."""

    def __init__(self, index: int, rng: random.Random, live: int) -> None:
        self.agent = f"load-{index}"
        self.rng = rng
        self.live = live
        self.mine: list[str] = []
        self.made = 0
        self.first_round = list(TOOLS)

    def next_tool(self) -> str:
        tool = self.first_round.pop(0) if self.first_round else self.rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
        if tool == "remember" and len(self.mine) >= self.live:
            return "forget"  # hold the data steady, so growing memory means a leak, not more data
        needs = {"amend": 1, "forget": 1, "link": 2}.get(tool, 0)
        return "remember" if len(self.mine) < needs else tool

    def sentence(self, k: int = 10) -> str:
        return " ".join(self.rng.choices(WORDS, k=k))

    def arguments(self, tool: str) -> dict[str, Any]:
        rng, base = self.rng, {"agentId": self.agent}
        if tool == "remember":
            self.made += 1
            return {
                **base,
                "content": f"{self.agent} note {self.made}: {self.sentence()}",
                "topic": rng.choice(TOPICS),
                "type": rng.choice(TYPES),
            }
        if tool == "recall":
            if rng.random() < 0.5:
                return {**base, "text": f"what about {self.sentence(4)}?"}
            return {**base, "keywords": rng.sample(WORDS, 2), "topic": rng.choice(TOPICS)}
        if tool == "amend":
            target = rng.choice(self.mine)
            if rng.random() < 0.2:
                return {**base, "id": target, "content": f"{self.agent} revised: {self.sentence()}", "supersedes": True}
            if rng.random() < 0.5:
                return {**base, "id": target, "content": f"{self.agent} amended: {self.sentence()}"}
            return {**base, "id": target, "importance": round(rng.uniform(0.1, 0.9), 2)}
        if tool == "link":
            source, target = rng.sample(self.mine, 2)
            return {**base, "fromId": source, "toId": target, "relationType": rng.choice(RELATIONS)}
        if tool == "forget":
            return {**base, "id": self.mine.pop(rng.randrange(len(self.mine))), "force": True}
        return base  # context, memory_stats

    def learn(self, tool: str, payload: dict[str, Any]) -> int:
        """Keep the id of a fragment this call created; 1 if it created one."""
        if tool == "remember" or (tool == "amend" and "supersededId" in payload):
            self.mine.append(payload["id"])
            return 1
        return 0


async def run_client(index: int, url: str, deadline: float, stats: Stats, seed: int, live: int) -> None:
    """One MCP session calling tools until the deadline; every failure is recorded."""
    agent = Agent(index, random.Random(seed * 1000 + index), live)
    try:
        async with (
            httpx2.AsyncClient(timeout=CALL_TIMEOUT_S) as http,
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=CALL_TIMEOUT_S) as client,
        ):
            while time.monotonic() < deadline:
                tool = agent.next_tool()
                started = time.perf_counter()
                try:
                    result = await client.call_tool(tool, agent.arguments(tool))
                except Exception as exc:  # noqa: BLE001 - any failure of a call is a counted error
                    stats.errors.append(f"{tool}: {type(exc).__name__}: {exc}")
                    continue
                elapsed = time.perf_counter() - started
                if result.is_error:
                    stats.errors.append(f"{tool}: {result.content[0].text if result.content else result}")
                    continue
                stats.latencies[tool].append(elapsed)
                first = result.content[0] if result.content else None
                payload = json.loads(first.text) if first is not None and first.type == "text" else {}
                stats.created += agent.learn(tool, payload)
    except Exception as exc:  # noqa: BLE001 - a session that cannot open or close is an error too
        stats.errors.append(f"client {index} session: {type(exc).__name__}: {exc}")


async def sample_memory(servers: list[Server], stop: asyncio.Event, every_s: float) -> list[tuple[float, list[int]]]:
    """(seconds since start, RSS per server) every `every_s` until `stop` is set, and once more then."""
    samples: list[tuple[float, list[int]]] = []
    began = time.monotonic()
    while True:
        samples.append((time.monotonic() - began, [s.rss() for s in servers]))
        try:
            await asyncio.wait_for(stop.wait(), timeout=every_s)
        except TimeoutError:
            continue
        samples.append((time.monotonic() - began, [s.rss() for s in servers]))
        return samples


async def drive(
    servers: list[Server], clients: int, seconds: float, seed: int, live: int
) -> tuple[Stats, list[tuple[float, list[int]]], float]:
    """Run the clients against the servers; returns stats, RSS samples and the wall time."""
    stats, stop = Stats(), asyncio.Event()
    sampler = asyncio.create_task(sample_memory(servers, stop, 1.0))
    began = time.monotonic()
    deadline = began + seconds
    tasks = [run_client(i, servers[i % len(servers)].url, deadline, stats, seed, live) for i in range(clients)]
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=seconds + CALL_TIMEOUT_S + 30)
    wall = time.monotonic() - began
    stop.set()
    return stats, await sampler, wall


# ---------------------------------------------------------------- report


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def memory_report(servers: list[Server], samples: list[tuple[float, list[int]]]) -> list[dict[str, Any]]:
    """Per server: RSS at start, middle and end (MiB), the growth of each half, and the verdict."""
    middle = min(samples, key=lambda s: abs(s[0] - samples[-1][0] / 2))
    report = []
    for i, server in enumerate(servers):
        start, mid, end = (samples[0][1][i] / 2**20, middle[1][i] / 2**20, samples[-1][1][i] / 2**20)
        report.append(
            {
                "server": server.name,
                "start_mib": round(start, 1),
                "middle_mib": round(mid, 1),
                "end_mib": round(end, 1),
                "first_half_growth_mib": round(mid - start, 1),
                "second_half_growth_mib": round(end - mid, 1),
                "flat": end - mid < FLAT_FRACTION * mid,
            }
        )
    return report


def summarise(
    setup: str, embedder: str, clients: int, stats: Stats, wall: float, memory: list[dict[str, Any]], cpu: dict[str, float]
) -> dict[str, Any]:
    """Everything printed, as one JSON-ready dict."""
    calls = stats.calls()
    tools = {
        tool: {
            "calls": len(v),
            "p50_ms": round(percentile(v, 0.50) * 1000, 1),
            "p95_ms": round(percentile(v, 0.95) * 1000, 1),
            "p99_ms": round(percentile(v, 0.99) * 1000, 1),
            "max_ms": round(max(v, default=0.0) * 1000, 1),
        }
        for tool, v in stats.latencies.items()
    }
    return {
        "setup": setup,
        "embedder": embedder,
        "clients": clients,
        "seconds": round(wall, 1),
        "calls": calls,
        "errors": len(stats.errors),
        "error_rate": len(stats.errors) / calls if calls else 0.0,
        "first_errors": stats.errors[:10],
        "throughput_per_s": round(calls / wall, 1) if wall else 0.0,
        "tools": tools,
        "memory": memory,
        "memory_flat": all(m["flat"] for m in memory),
        "cpu_percent_of_one_core": cpu,
        "fragments_created": stats.created,
        "fragments_forgotten": len(stats.latencies["forget"]),
    }


def print_summary(s: dict[str, Any]) -> None:
    print(f"setup {s['setup']} ({s['embedder']} embedder): {s['clients']} clients for {s['seconds']} s")
    print(f"calls {s['calls']}  errors {s['errors']}  error rate {s['error_rate']:.4%}  throughput {s['throughput_per_s']} calls/s")
    for line in s["first_errors"]:
        print(f"  error: {line[:300]}")
    print(f"{'tool':14s} {'calls':>7s} {'p50 ms':>8s} {'p95 ms':>8s} {'p99 ms':>8s} {'max ms':>8s}")
    for tool, t in s["tools"].items():
        print(f"{tool:14s} {t['calls']:7d} {t['p50_ms']:8.1f} {t['p95_ms']:8.1f} {t['p99_ms']:8.1f} {t['max_ms']:8.1f}")
    for m in s["memory"]:
        verdict = "flat" if m["flat"] else "GROWING"
        print(
            f"RSS {m['server']}: start {m['start_mib']} MiB, middle {m['middle_mib']} MiB, end {m['end_mib']} MiB "
            f"(first half {m['first_half_growth_mib']:+} MiB, second half {m['second_half_growth_mib']:+} MiB) -> {verdict}"
        )
    print(f"memory {'flat' if s['memory_flat'] else 'NOT flat'} (second-half growth < {FLAT_FRACTION:.0%} of the middle RSS)")
    print("CPU, % of one core: " + ", ".join(f"{k} {v}" for k, v in s["cpu_percent_of_one_core"].items()))
    print(f"fragments created {s['fragments_created']}, forgotten {s['fragments_forgotten']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", choices=("sqlite", "replicas"), default="sqlite")
    parser.add_argument("--clients", type=int, default=8)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float)
    length.add_argument("--seconds", type=float)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--live", type=int, default=300, help="fragments each client keeps; past it, writes become forgets")
    parser.add_argument("--embedder", choices=("hash", "local"), default="hash", help="the servers' embedder (local: the real model)")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else 60 * (args.minutes if args.minutes is not None else 1)
    if args.clients < 1 or seconds <= 0:
        parser.error("--clients and the duration must be positive")
    with tempfile.TemporaryDirectory(prefix="memento-load-") as tmp, servers_for(args.setup, Path(tmp), args.embedder) as servers:
        cpu_before = [s.cpu_s() for s in servers], os.times()
        stats, samples, wall = asyncio.run(drive(servers, args.clients, seconds, args.seed, args.live))
        after = os.times()
        cpu: dict[str, float] = {s.name: round(100 * (s.cpu_s() - c) / wall) for s, c in zip(servers, cpu_before[0])}
        cpu["clients"] = round(100 * (after.user + after.system - cpu_before[1].user - cpu_before[1].system) / wall)
        summary = summarise(args.setup, args.embedder, args.clients, stats, wall, memory_report(servers, samples), cpu)
        for server in servers if stats.errors else []:
            tail = server.log.read_text(errors="replace")[-3000:].strip()
            if tail:
                print(f"--- {server.name} log (tail) ---\n{tail}")
    print_summary(summary)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
