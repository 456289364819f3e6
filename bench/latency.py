"""Latency of remember and recall as one agent's store grows (10k, 100k memories).

Store time (SQLite + full-text + vector index) is reported apart from embedding time. Bulk
vectors come from the deterministic hash embedder at the default model's 384 dimensions (the
real model embeds ~36 passages/s here; 100k would take most of an hour); the default model's
own query and passage embedding times are measured separately.

    python bench/latency.py [--sizes 10000,100000] [--samples 200] [--synchronous FULL]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, FragmentType, RecallInput
from memento.settings import Settings
from memento.storage.protocol import NewFragment, SearchFilter

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "data" / "locomo-dev.json"
AGENT = "bench-agent"


def corpus() -> tuple[list[str], list[str]]:
    """Sentences and questions from the LoCoMo dev split (synthetic ones if it is absent)."""
    if DATA.exists():
        data = json.loads(DATA.read_text())
        turns = [t["text"] for s in data for k, v in s["conversation"].items() if k.startswith("session_") and isinstance(v, list) for t in v]
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


def fill(app, embedder, turns, start: int, stop: int, rng: random.Random) -> None:
    factory = app.service.factory
    scope = AgentScope(AGENT)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    batch_texts: list[str] = []
    t0 = time.perf_counter()
    for i in range(start, stop):
        batch_texts.append(f"{rng.choice(turns)} (note {i})")
        if len(batch_texts) == 256 or i == stop - 1:
            vectors = embedder.embed_passages(batch_texts)
            for j, (text, vec) in enumerate(zip(batch_texts, vectors)):
                draft = factory.draft(content=text, topic=f"topic-{(i + j) % 50}", type_=FragmentType.FACT,
                                      created_at=base + timedelta(minutes=i - len(batch_texts) + j))
                app.store.insert(scope, NewFragment(draft, AGENT, None, vec))
            batch_texts = []
            done = i + 1
            if done % 10_000 == 0 or done == stop:
                rate = (done - start) / (time.perf_counter() - t0)
                print(f"  filled {done:,} ({rate:,.0f}/s)", file=sys.stderr, flush=True)


def measure(app, embedder, turns, questions, samples: int, rng: random.Random) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ("remember_store", "remember_embed", "recall_store", "recall_embed")}
    factory = app.service.factory
    scope = AgentScope(AGENT)
    ctx = CallContext(agent_id=AGENT)
    for i in range(samples):
        text = f"{rng.choice(turns)} (probe {i} {rng.random():.6f})"
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


def ann_recall(app, embedder, questions, k: int = 10, n: int = 50) -> float:
    """Share of HNSW top-k results as close as the exact top-k (numpy over every stored vector)."""
    import numpy as np

    keys, blocks = [], []
    for batch_keys, batch in app.store._load_vectors(AGENT):
        keys.append(batch_keys)
        blocks.append(batch)
    all_keys, matrix = np.concatenate(keys), np.concatenate(blocks)
    found = 0
    for q in questions[:n]:
        vec = embedder.embed_query(q)
        kth = float(np.sort(matrix @ vec)[-k])
        # near-identical copies tie in similarity, so a hit counts when it is at least as close
        # as the exact k-th neighbour (f16 storage rounds, hence the small tolerance)
        found += sum(1 for _, sim in app.store.vectors.search(AGENT, vec, k) if sim >= kth - 2e-3)
    return found / (k * n)


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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--synchronous", default="FULL", choices=["NORMAL", "FULL"])
    parser.add_argument("--skip-model", action="store_true", help="do not time the default embedding model")
    parser.add_argument("--db", type=Path, help="keep the store in this file and reuse what it already holds")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    turns, questions = corpus()
    rng = random.Random(7)
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
            m = measure(app, embedder, turns, questions, args.samples, rng)
            have += args.samples
            print(f"\n{size:,} memories:")
            print(f"  remember  store {fmt(m['remember_store'])}   (hash embedding {fmt(m['remember_embed'])})")
            print(f"  recall    store {fmt(m['recall_store'])}   (hash embedding {fmt(m['recall_embed'])})")
            mode = "HNSW" if size > settings.ann_threshold else "exact"
            print(f"  vector search: {mode}, recall@10 vs exact scan {ann_recall(app, embedder, questions):.3f}")
        app.close()
    if not args.skip_model:
        t = default_model_times(turns, questions, min(args.samples, 100))
        print("\ndefault model (local multilingual-e5-small, 4-bit), one text per call:")
        print(f"  query embedding   {fmt(t['query'])}")
        print(f"  passage embedding {fmt(t['passage'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
