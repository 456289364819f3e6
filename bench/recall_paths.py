"""The ways an agent asks a large store, each timed: recall with a query alone and with each kind
of filter (a tag few memories have and one many have among them), recall with keywords, listings
(no question: by topic, by a type every memory has or none has, by time range, by a rare tag,
everything), an entity's memories, the REST listing of pinned memories and of all with their
totals, a page of
memories as MCP resources/list reads it, the keyword tier alone, memory_stats, and deleting a
memory (the one write: it removes the memory's id from every other memory's links).

`bench/latency.py` times recall with a query and nothing else; at a million memories that path
was bounded (issue 19) while the others still read whole topics or the whole store: a topic
filter sent the vector tier to an exact scan that read every stored vector (1.4 s), a keyword
held by most memories had all of them ranked (1.6 s), memory_stats took seconds. This bench
runs each path over a store that `bench/latency.py --db FILE` filled (LoCoMo sentences in 50
topics, one a minute, tagged and pinned as `latency.fill_record` says, hash vectors) and prints
p50 / p95 / max per path, in process (store time: the query vectors are precomputed, no MCP).

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
from memento.graph import NewEntity
from memento.graph_inputs import SearchFilters
from memento.models import AgentScope, CallContext, MemoryStatsInput, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

BASE = datetime(2025, 1, 1, tzinfo=UTC)  # bench/latency.py's fill: memory i was written at BASE + i minutes


def paths(app, questions: list[str], vectors: list, size: int) -> dict[str, Callable[[int], object]]:  # type: ignore[no-untyped-def]
    """Each path as a call on the i-th question (`size`: the memories the fill wrote, a minute apart)."""
    service, store, ctx, scope = app.service, app.store, CallContext(agent_id=AGENT), AgentScope(AGENT)
    few = SearchFilter(entity_id=entity_of_few(app))

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
        "recall + a tag 1 memory in 5,000 has": lambda i: recall(i, tags=["milestone"]),
        "recall + a tag a quarter of the memories have": lambda i: recall(i, tags=[f"project-{i % 4}"]),
        "recall, a rare tag only (a listing)": lambda i: service.recall(RecallInput(tags=["milestone"], limit=10, includeLinks=False), ctx),
        "recall + an entity 20 memories belong to (vector tier)": lambda i: store.vector_search(scope, vectors[i], few, 10),
        "REST listing of an entity's memories, with their total": lambda i: (store.recent(scope, few, 20), store.count(scope, few)),
        "REST listing of the pinned memories, with their total": lambda i: service.entities.list_memories(
            SearchFilters(pinned=True), 20, 0, ctx
        ),
        "REST listing of every memory, with its total": lambda i: service.entities.list_memories(SearchFilters(), 20, 0, ctx),
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


def entity_of_few(app) -> str:  # type: ignore[no-untyped-def]
    """The bench's own entity, associated with (up to) 20 memories spread over the fill (made once)."""
    scope, now = AgentScope(AGENT), datetime.now(UTC)
    ((found, created),) = app.store.upsert_entities(scope, [NewEntity("Recall Paths Bench", "project")], now)
    if created:  # the newest memory before each twentieth of the fill's span
        size = app.store.count(scope, SearchFilter())
        before = [SearchFilter(created_before=BASE + timedelta(minutes=max(1, k * size // 20))) for k in range(1, 21)]
        picked = {f.id for filt in before for f in app.store.recent(scope, filt, 1)}
        app.store.link_entities(scope, [(found.id, memory, 1.0) for memory in sorted(picked)], now)
    return str(found.id)


def deletes(app, samples: int) -> list[float]:  # type: ignore[no-untyped-def]
    """`store.delete` of a memory just remembered, timed alone (what deleting a vault key, a REST
    DELETE or a lifecycle purge runs: the row, its entries, and its id in other rows' links)."""
    ctx, scope, out = CallContext(agent_id=AGENT), AgentScope(AGENT), []
    for i in range(samples + 1):
        memory = app.service.remember(RememberInput(content=f"a note to delete, {i} at {time.time()}", topic="deleted", type="fact"), ctx)
        t0 = time.perf_counter()
        app.store.delete(scope, [memory.id])
        if i:  # the first loads the vector index
            out.append((time.perf_counter() - t0) * 1000)
    return out


def run(app, where: str, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    """Every path on `app`'s store, printed as a table; closes the app."""
    try:
        size = app.store.count(AgentScope(AGENT), SearchFilter())
        vectors = getattr(app.store, "vectors", None)
        if vectors is not None:
            vectors.ready(AGENT)  # a store without a saved graph builds it in the background: timed once it is there
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
        values = deletes(app, args.samples)
        print(f"| delete a memory ({args.samples} calls) | {statistics.median(values):.1f} | {pct(values, 0.95):.1f} | {max(values):.1f} |")
    finally:
        app.close()


if __name__ == "__main__":
    sys.exit(main())
