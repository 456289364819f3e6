"""Recall end to end through MCP stdio at 10k memories, the query's embedding included.

What an agent host sees: `memento serve --transport stdio` started as a child process by the
official `mcp` client, one `recall` call after another, timed from the client's call to its
answer. The store holds `--size` memories of one agent: LoCoMo dev's turns (written as
conversations, so the context lever has neighbours to read) and unrelated distractors
(bench/distractors.py) for the rest, each embedded by the real local model (vectors from the
benchmark cache, bench/embed_cache.py, when present). The server embeds every query itself with
the local model (nothing cached on its side): the questions are LoCoMo's.

    python bench/recall_stdio.py [--size 10000] [--samples 200] [--variants default,no-levers]

Variants set MEMORY_CONFIG for the server: `default`; `no-context`; `no-time`; `no-levers`
(rank fusion, no context, no time: the ranking before issue 14). Each variant is one server on
the same store. Prints p50/p95/p99 and the mean per variant, and the server's query-embedding
p50 measured in-process for reference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from distractors import distractor_texts
from embed_cache import DEFAULT_DIR, CachedEmbedder
from locomo import DEFAULT_DATA, sessions, turn_text
from locomo_data import missing
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memento.app import build_app
from memento.embeddings.factory import build_embedder
from memento.embeddings.local import LocalE5Embedder
from memento.models import CallContext, FragmentType, RememberInput
from memento.settings import Settings

AGENT = "bench"
VARIANTS = {
    "default": {},
    "no-context": {"contextBefore": 0.0, "contextAfter": 0.0},
    "no-time": {"temporalBoost": 0.0},
    "no-levers": {"fusion": "rrf", "semanticWeight": 0.3, "contextBefore": 0.0, "contextAfter": 0.0, "temporalBoost": 0.0},
}


def fill(path: Path, size: int, cache: Path) -> list[str]:
    """Write `size` memories into a new SQLite store at `path`; the questions to ask."""
    if not DEFAULT_DATA.exists():
        raise SystemExit(f"recall_stdio: {missing(DEFAULT_DATA)}")
    data = json.loads(DEFAULT_DATA.read_bytes())
    settings = Settings(DATABASE_URL=f"sqlite:///{path}", MEMENTO_SQLITE_SYNCHRONOUS="NORMAL")
    inner = build_embedder(settings)
    assert inner is not None
    app = build_app(settings, embedder=CachedEmbedder(inner, cache))
    ctx = CallContext(agent_id=AGENT)
    questions: list[str] = []
    written = 0
    try:
        for sample in data:
            for date, turns in sessions(sample["conversation"]):
                for turn in turns:
                    if written >= size:
                        break
                    inp = RememberInput(content=turn_text(turn), topic=sample["sample_id"], type=FragmentType.FACT, createdAt=date)
                    app.service.remember(inp, ctx)
                    written += 1
            questions += [qa["question"] for qa in sample["qa"]]
        oldest = min(d for s in data for d, _ in sessions(s["conversation"])) - timedelta(days=400)
        for i, text in enumerate(distractor_texts(max(0, size - written))):
            at = oldest + timedelta(minutes=7 * i)
            app.service.remember(RememberInput(content=text, topic="notes", type=FragmentType.FACT, createdAt=at), ctx)
            if i % 2000 == 1999:
                print(f"  {written + i + 1} memories written", file=sys.stderr)
        app.service.settle(3600)
    finally:
        app.close()
    return questions


async def measure(path: Path, variant: dict[str, object], questions: list[str], samples: int) -> list[float]:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{path}",
        "EMBEDDING_PROVIDER": "local",
        "MEMORY_CONFIG": json.dumps({"ranking": variant}),
        "MEMENTO_EVALUATOR_ENABLED": "false",
        "MEMENTO_CONSOLIDATE_ON_START": "false",
        "MEMENTO_CONSOLIDATE_INTERVAL_MINUTES": "0",
        "MEMENTO_CONSOLIDATE_EVERY_INSERTS": "0",
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "memento", "serve", "--transport", "stdio"], env=env)
    times: list[float] = []
    async with Client(params, read_timeout_seconds=120) as client:
        for q in questions[:10]:  # warm: the model loads, the vector index is read
            await client.call_tool("recall", {"text": q, "agentId": AGENT, "limit": 10})
        for q in questions[10 : 10 + samples]:
            t = time.perf_counter()
            result = await client.call_tool("recall", {"text": q, "agentId": AGENT, "limit": 10})
            times.append((time.perf_counter() - t) * 1000)
            if result.is_error:
                raise RuntimeError(f"recall failed: {result.content}")
    return times


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--variants", default="default,no-context,no-time,no-levers")
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = set(names) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {sorted(VARIANTS)}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recall.db"
        t0 = time.perf_counter()
        questions = fill(path, args.size, args.embed_cache)
        print(f"store: {args.size} memories of one agent in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        model = LocalE5Embedder()
        model.warm_up()
        embed = []
        for q in questions[10 : 10 + args.samples]:
            t = time.perf_counter()
            model.embed_query(q)
            embed.append((time.perf_counter() - t) * 1000)
        print(f"recall through MCP stdio, {args.size} memories, limit 10, {args.samples} LoCoMo questions (query embedding included)")
        print(f"query embedding alone (in-process, multilingual-e5-small): p50 {statistics.median(embed):.1f} ms")
        print("| variant | p50 ms | p95 ms | p99 ms | mean ms |")
        print("|---|---|---|---|---|")
        for name in names:
            times = asyncio.run(measure(path, VARIANTS[name], questions, args.samples))
            print(
                f"| {name} | {pct(times, 50):.1f} | {pct(times, 95):.1f} | {pct(times, 99):.1f} | {statistics.mean(times):.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
