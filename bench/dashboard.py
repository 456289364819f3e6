"""The dashboard on a large store (issue 18: "fast on a 100k store, first paint within a second"):
the requests each page makes, timed against a real `memento serve` over HTTP.

    python bench/dashboard.py [--count 100000] [--runs 7] [--work DIR]

Writes `--count` memories of one agent as an export (NDJSON version 2, drafted by the service's
own FragmentFactory, created over the last weeks: 12 topics, tags, every 50th pinned, a quarter
cold) and imports it with
`memento import --defer-embedding` (nothing is embedded there; the server's worker embeds them
with the hash embedder afterwards), then starts the server with an operator key (and no scheduled
consolidation, so the store stays as imported and nothing competes), logs in as the
dashboard does (session cookie + CSRF header) and times, over `--runs` runs, what each page asks
for: the first paint of the memories page (the page, its scripts and stylesheet, the session and
the first 25 memories), deeper pages, every filter, the three search modes, a memory's page and
the analytics page's calls. Prints the median and the slowest run of each, in milliseconds. It
asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from distractors import distractor_rows

from memento import __version__
from memento.exchange import wire
from memento.factory import FragmentFactory
from memento.models import FragmentType
from memento.storage.records import FRAGMENTS

AGENT = "bench"
KEY = "bench-operator-key-" + "k" * 20
TOPICS = ["deploys", "billing", "search", "auth", "mobile", "infra", "data", "support", "design", "docs", "hiring", "security"]
WORDS = (
    "cache queue retry index shard replica token session cookie schema migration latency budget rollout canary "
    "backfill webhook invoice refund ledger audit cluster pod node disk quota alert pager runbook incident"
).split()
STATIC = ("/ui/", "/ui/static/app.js", "/ui/static/api.js", "/ui/static/dom.js", "/ui/static/memories.js", "/ui/static/app.css")


def write_export(path: Path, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    factory = FragmentFactory()
    base = datetime.now(UTC) - timedelta(seconds=20 * count + 60)  # recent: no lifecycle stage ages them out
    written = 0
    with path.open("w", encoding="utf-8") as out:
        header = {"format": wire.FORMAT, "version": wire.VERSION, "exportedAt": wire.timestamp(datetime.now(UTC))}
        header |= {"memento": __version__, "agents": [AGENT], "fragments": count, "includesForgotten": False}
        out.write(wire.line(header))
        for i in range(count):
            topic = TOPICS[i % len(TOPICS)]
            text = f"{topic} note {i}: " + " ".join(rng.choice(WORDS) for _ in range(14))
            created = [base + timedelta(seconds=20 * i)]
            for row in distractor_rows(factory, [text], None, agent=AGENT, model=None, created_at=created, topic=topic):
                row["updated_at"] = row["created_at"]
                row["tags"] = [topic, rng.choice(WORDS)]
                row["pinned"] = i % 50 == 0
                row["ttl_tier"] = "cold" if i % 4 == 0 else row["ttl_tier"]
                row["type"] = rng.choice([FragmentType.FACT, FragmentType.DECISION, FragmentType.ERROR]).value
                out.write(wire.line(wire.encode(FRAGMENTS, row)))
                written += 1
        out.write(wire.line({"kind": wire.END, "counts": {"fragment": written}}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def timed(http: httpx.Client, paths: list[str], headers: dict[str, str]) -> float:
    t0 = time.perf_counter()
    for path in paths:
        response = http.get(path, headers=headers)
        assert response.status_code == 200, (path, response.status_code, response.text[:200])
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="memento-dashboard-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{work / 'store.db'}", "EMBEDDING_PROVIDER": "hash", "MEMENTO_ACCESS_KEY": KEY}
    env |= {"MEMENTO_EVALUATOR_ENABLED": "false", "LOG_LEVEL": "WARNING"}
    # No scheduled consolidation while timing: the store stays as imported, and nothing competes.
    env |= {"MEMENTO_CONSOLIDATE_ON_START": "false", "MEMENTO_CONSOLIDATE_INTERVAL_MINUTES": "0", "MEMENTO_CONSOLIDATE_EVERY_INSERTS": "0"}
    if not (work / "store.db").exists():
        export = work / "export.jsonl"
        t0 = time.perf_counter()
        write_export(export, args.count)
        print(f"wrote {args.count:,} memories in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "memento", "import", str(export), "--defer-embedding"], env=env, check=True, stdout=sys.stderr
        )
        print(f"imported in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "memento", "serve", "--transport", "http", "--port", str(port)], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            for _ in range(600):
                try:
                    if http.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)  # readiness poll of a separate process
            login = http.post("/ui/login", json={"key": KEY}, headers={"Origin": base})
            csrf = {"X-Memento-CSRF": login.json()["csrf"]}
            one = http.get("/api/memories?limit=1&agent_id=" + AGENT, headers=csrf).json()
            memory_id = one["items"][0]["id"]
            a = f"agent_id={AGENT}"
            cases = {
                "first paint: page + scripts + session + 25 memories": [*STATIC, "/ui/session", f"/api/memories?limit=25&{a}"],
                "memories, page 2": [f"/api/memories?limit=25&offset=25&{a}"],
                "memories, page 400 (offset 9975, the deepest)": [f"/api/memories?limit=25&offset=9975&{a}"],
                "filter: type": [f"/api/memories?limit=25&types=error&{a}"],
                "filter: topic": [f"/api/memories?limit=25&topic=billing&{a}"],
                "filter: tags": [f"/api/memories?limit=25&tags=auth&{a}"],
                "filter: tier cold": [f"/api/memories?limit=25&tier=cold&{a}"],
                "filter: pinned": [f"/api/memories?limit=25&pinned=true&{a}"],
                "filter: memory system + tier + pinned": [f"/api/memories?limit=25&memory_system=semantic&tier=warm&pinned=false&{a}"],
                "search: full text": [f"/api/memories/search?q=ledger+refund+invoice&mode=keyword&{a}"],
                "search: semantic": [f"/api/memories/search?q=ledger+refund+invoice&mode=semantic&{a}"],
                "search: hybrid + filter": [f"/api/memories/search?q=ledger+refund+invoice&tier=cold&{a}"],
                "a memory's page": [f"/api/memories/{memory_id}/details?{a}"],
                "analytics page (its 6 calls)": [
                    f"/api/analytics/overview?{a}",
                    f"/api/analytics/breakdown?{a}",
                    f"/api/analytics/growth?period=day&limit=30&{a}",
                    f"/api/analytics/confidence?{a}",
                    f"/api/lifecycle/runs?limit=20&{a}",
                    "/ui/latency",
                ],
            }
            print(f"{one['total']:,} memories in agent {AGENT!r}, SQLite, {args.runs} runs each (ms)\n")
            print(f"| {'request(s)':<56} | median | slowest |")
            print(f"|{'-' * 58}|-------:|--------:|")
            for name, paths in cases.items():
                timed(http, paths, csrf)  # warm: the first run fills caches
                runs = [timed(http, paths, csrf) for _ in range(args.runs)]
                print(f"| {name:<56} | {statistics.median(runs):6.0f} | {max(runs):7.0f} |")
    finally:
        server.terminate()
        server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
