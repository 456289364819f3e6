"""Recall's store-side costs, A/B in one process: each question asked once per variant, in random
order, on the same filled store, so the machine's drift (~25%/hour here) falls on every variant
alike. Separate runs of bench/latency.py cannot show a few milliseconds.

    python bench/recall_ab.py [--backend postgres|sqlite] [--size 10000] [--questions 500]

The variants switch off, one at a time, a saving that changes no result (the script counts the
questions whose results differed between variants; it should print 0):
- `per-call reads`: every store call its own transaction (Store.reading a null context);
- `one step a read`: the conversational context reads one step away per statement
  (retrieval/neighbours.py STEPS_PER_READ = 1), as before two steps came in one;
- `terms recounted`: the full-text plan counts common terms every time (PostgreSQL keeps them
  for minutes; SQLite's FTS5 vocabulary counts are kept either way);
- `texts analysed anew`: rescoring analyses every candidate's text each time (storage/terms.py
  keeps the analysis of the texts seen last, TEXTS).

The store is filled as bench/latency.py fills it (LoCoMo dev sentences, hash vectors at 384
dimensions, one agent, 50 topics); PostgreSQL is a throw-away server (bench/pg_server.py).
Recalls get the query's vector (no model), so the figures are store and ranking time.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import latency as L

import memento.retrieval.neighbours as neighbours
import memento.storage.terms as terms
from memento.app import build_app
from memento.models import CallContext, RecallInput
from memento.settings import Settings

VARIANTS = ("current", "per-call reads", "one step a read", "terms recounted", "texts analysed anew")


@contextlib.contextmanager
def variant(app: Any, name: str) -> Iterator[None]:
    store_type, search = type(app.store), app.store.search
    reading, kept, texts = store_type.reading, search.frequent, terms.TEXTS
    if name == "per-call reads":
        store_type.reading = lambda self, scope: contextlib.nullcontext()
    elif name == "one step a read":
        neighbours.STEPS_PER_READ = 1
    elif name == "terms recounted":
        search.frequent = terms.FrequentCounts(None, ttl_s=0.0)  # nothing stays fresh: every count is asked again
    elif name == "texts analysed anew":
        terms.TEXTS = terms.TextTerms(keep=0, chars=0, longest=-1)  # every text longer than kept ones
    try:
        yield
    finally:
        store_type.reading, search.frequent, terms.TEXTS = reading, kept, texts
        neighbours.STEPS_PER_READ = 2


def run(app: Any, embedder: L.CachedEmbedder, questions: list[str], count: int, warm: int) -> None:
    ctx = CallContext(agent_id=L.AGENT)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    order, rng, differed = list(VARIANTS), random.Random(11), 0
    for i in range(count + warm):
        question = questions[i % len(questions)]
        vector = embedder.embed_query(question)
        rng.shuffle(order)
        answers = set()
        for name in order:
            with variant(app, name):
                start = time.perf_counter()
                result = app.service.recall_with_vector(RecallInput(text=question, limit=10, includeLinks=False), ctx, vector)
                took = (time.perf_counter() - start) * 1000
            answers.add(tuple(f.id for f in result.fragments))
            if i >= warm:
                times[name].append(took)
        differed += len(answers) > 1
    print(f"questions whose results differed between variants: {differed} of {count + warm}")
    base = statistics.median(times["current"])
    for name, values in times.items():
        values.sort()
        p50, p95 = statistics.median(values), values[int(len(values) * 0.95)]
        print(f"  {name:19s} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  ({p50 - base:+.2f} ms against current)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--warm", type=int, default=30)
    args = parser.parse_args()
    turns, questions = L.corpus()
    rng = random.Random(7)
    embedder = L.CachedEmbedder(384)
    print(f"{args.backend}, {args.size:,} memories, {args.questions} questions x {len(VARIANTS)} variants, interleaved")
    if args.backend == "postgres":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import psycopg
        from pg_server import embedded_postgres

        with embedded_postgres() as server:
            app = build_app(Settings(DATABASE_URL=server.app_dsn, DATABASE_MIGRATION_URL=server.owner_dsn), embedder=embedder)
            try:
                L.fill_postgres(app, embedder, turns, 0, args.size, rng)
                with psycopg.connect(server.owner_dsn, autocommit=True) as conn:
                    conn.execute("VACUUM (ANALYZE) agent_memory.fragments, agent_memory.fragment_terms, agent_memory.fragment_keywords")
                run(app, embedder, questions, args.questions, args.warm)
            finally:
                app.close()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            DATABASE_URL=f"sqlite:///{Path(tmp) / 'ab.db'}",
            MEMENTO_CONSOLIDATE_ON_START="false",
            MEMENTO_CONSOLIDATE_INTERVAL_MINUTES="0",
            MEMENTO_CONSOLIDATE_EVERY_INSERTS="0",
        )
        app = build_app(settings, embedder=embedder)
        try:
            L.fill(app, embedder, turns, 0, args.size, rng)
            run(app, embedder, questions, args.questions, args.warm)
        finally:
            app.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
