"""The ways an agent asks a large store, each timed: recall with a query alone and with each kind
of filter, recall with keywords, listings (no question: by topic, by a type every memory has or
none has, by time range, everything), a page of memories as MCP resources/list reads it, the
keyword tier alone, memory_stats.

`bench/latency.py` times recall with a query and nothing else; at a million memories that path
was bounded (issue 19) while the others still read whole topics or the whole store: a topic
filter sent the vector tier to an exact scan that read every stored vector (1.4 s), a keyword
held by most memories had all of them ranked (1.6 s), memory_stats took seconds. This bench
runs each path over a store that `bench/latency.py --db FILE` filled (LoCoMo sentences in 50
topics, one a minute, hash vectors) and prints p50 / p95 / max per path, in process (store
time: the query vectors are precomputed, no MCP).

    python bench/latency.py --sizes 1000000 --db FILE --samples 20 --skip-model   # fill once
    python bench/recall_paths.py --db FILE [--samples 50] [--stats 3]
    python bench/recall_paths.py --backend postgres --size 100000 [--samples 50]

`--backend postgres` starts a throw-away embedded PostgreSQL (bench/pg_server.py), fills it as
`bench/latency.py --backend postgres` does (then VACUUM ANALYZE) and times the same paths.

Each path asks `--samples` different questions (the LoCoMo dev split's, or synthetic ones
without it), after one untimed round that loads the vector index and warms the caches.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from latency import AGENT, corpus, pct
from locomo import split_keywords

from memento.analysis import normalise_keyword
from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, MemoryStatsInput, RecallInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

BASE = datetime(2025, 1, 1, tzinfo=UTC)  # bench/latency.py's fill: memory i was written at BASE + i minutes


def paths(app, questions: list[str], vectors: list, size: int) -> dict[str, Callable[[int], object]]:  # type: ignore[no-untyped-def]
    """Each path as a call on the i-th question (`size`: the memories the fill wrote, a minute apart)."""
    service, store, ctx, scope = app.service, app.store, CallContext(agent_id=AGENT), AgentScope(AGENT)

    def recall(i: int, **kw: object) -> object:
        return service.recall_with_vector(RecallInput(text=questions[i], limit=10, includeLinks=False, **kw), ctx, vectors[i])

    def day(i: int) -> dict[str, str]:  # a four-day window somewhere in the fill's span
        start = BASE + timedelta(days=(i * 37) % max(1, size // 1440 - 4))
        return {"timeFrom": start.isoformat(), "timeTo": (start + timedelta(days=4)).isoformat()}

    def keywords(i: int) -> list[str]:
        return split_keywords(questions[i]) or ["memory"]

    return {
        "recall (query)": lambda i: recall(i),
        "recall + topic": lambda i: recall(i, topic=f"topic-{i % 50}"),
        "recall + type": lambda i: recall(i, type="fact"),
        "recall + time range": lambda i: recall(i, filters=day(i)),
        "recall + keywords": lambda i: recall(i, keywords=keywords(i)),
        "recall, keywords only": lambda i: service.recall(RecallInput(keywords=keywords(i), limit=10, includeLinks=False), ctx),
        "recall, topic only (a listing)": lambda i: service.recall(RecallInput(topic=f"topic-{i % 50}", limit=10, includeLinks=False), ctx),
        "recall, nothing asked (a listing)": lambda i: service.recall(RecallInput(limit=10, includeLinks=False), ctx),
        "recall, type only (a listing)": lambda i: service.recall(RecallInput(type="fact", limit=10, includeLinks=False), ctx),
        "recall, a type no memory has (a listing)": lambda i: service.recall(
            RecallInput(type="decision", limit=10, includeLinks=False), ctx
        ),
        "recall, time range only (a listing)": lambda i: service.recall(RecallInput(filters=day(i), limit=10, includeLinks=False), ctx),
        "a page of memories, newest first (resources/list)": lambda i: service.views.list_fragments_page(ctx, None, 50),
        "keyword tier alone": lambda i: store.keyword_search(scope, [normalise_keyword(k) for k in keywords(i)], SearchFilter(), 30),
    }


def timed(call: Callable[[int], object], samples: int) -> list[float]:
    out = []
    for i in range(samples):
        t0 = time.perf_counter()
        call(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, help="a SQLite store filled by bench/latency.py --db")
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--size", type=int, default=100_000, help="postgres: memories to fill the throw-away server with")
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--stats", type=int, default=3, help="memory_stats calls (each reads the whole scope)")
    args = parser.parse_args()
    if args.backend == "postgres":
        import random

        import psycopg
        from latency import CachedEmbedder, fill_postgres
        from pg_server import embedded_postgres

        with embedded_postgres() as server:
            embedder = CachedEmbedder(384)
            app = build_app(Settings(DATABASE_URL=server.app_dsn, DATABASE_MIGRATION_URL=server.owner_dsn), embedder=embedder)
            fill_postgres(app, embedder, corpus()[0], 0, args.size, random.Random(7))
            with psycopg.connect(server.owner_dsn, autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE) agent_memory.fragments, agent_memory.fragment_terms, agent_memory.fragment_keywords")
            run(app, f"a throw-away PostgreSQL {args.size:,}-memory fill", args)
        return 0
    if args.db is None or not args.db.exists():
        parser.error(f"--db {args.db}: fill it first with bench/latency.py --sizes N --db FILE")
    run(build_app(Settings(DATABASE_URL=f"sqlite:///{args.db}"), embedder=HashEmbedder(384)), str(args.db), args)
    return 0


def run(app, where: str, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    """Every path on `app`'s store, printed as a table; closes the app."""
    try:
        size = app.store.count(AgentScope(AGENT), SearchFilter())
        _, questions = corpus()
        questions = (questions * (args.samples // max(1, len(questions)) + 1))[: args.samples]
        embedder = HashEmbedder(384)
        vectors = [embedder.embed_query(q) for q in questions]
        print(f"{size:,} memories in {where}; {args.samples} questions per path; store time in process (hash vectors)")
        print("\n| path | p50 ms | p95 ms | max ms |\n| --- | --- | --- | --- |")
        for name, call in paths(app, questions, vectors, size).items():
            timed(call, args.samples)  # untimed: loads the index, warms the caches and the kept counts
            values = timed(call, args.samples)
            print(f"| {name} | {statistics.median(values):.1f} | {pct(values, 0.95):.1f} | {max(values):.1f} |", flush=True)
        ctx = CallContext(agent_id=AGENT)
        values = timed(lambda i: app.service.memory_stats(MemoryStatsInput(), ctx), args.stats)
        print(f"| memory_stats ({args.stats} calls) | {statistics.median(values):.1f} | {pct(values, 0.95):.1f} | {max(values):.1f} |")
    finally:
        app.close()


if __name__ == "__main__":
    sys.exit(main())
