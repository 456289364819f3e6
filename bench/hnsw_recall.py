"""Recall@k of the SQLite store's HNSW vector index against an exact scan, with real-model vectors.

N distractor texts (bench/distractors.py: PyPI summaries by default) are embedded with the local
model (cached on disk by bench/embed_cache.py) and bulk-imported into one agent of a real SQLite
store, so the vectors go where every memory's vector goes (`fragment_embeddings`, the change log).
For each (m, ef_construction) a `VectorIndex` over that store's own vector source builds its
graph (the path a server takes at its first search), then answers Q queries, query-embedded
texts outside the corpus, at each ef_search. Recall@k is the mean share of the exact top k (a
numpy scan of the same float32 vectors) the index returned; latency is `VectorIndex.search`'s
own (the freshness check included). `--sqlite-vec` adds sqlite-vec's vec0 exact KNN for scale.

    python bench/hnsw_recall.py [--count 100000] [--queries 1000] [--k 10] [--m 16,32]
                                [--ef-construction 64,128] [--ef-search 64,128,256,512]
                                [--embedder local|hash] [--embed-cache DIR] [--sqlite-vec]
                                [--distractor-source FILE] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from distractors import DEFAULT_SOURCE, distractor_rows, distractor_texts, embed_cached, import_distractors, query_texts

from memento.embeddings.protocol import Embedder
from memento.factory import FragmentFactory
from memento.storage.sqlite import SQLiteStore
from memento.storage.vectors import VectorIndex

AGENT = "bench"


@dataclass
class Row:
    index: str
    m: int
    ef_construction: int
    ef_search: int
    build_s: float
    recall: float
    p50_ms: float
    p95_ms: float


def exact_top(keys: np.ndarray, matrix: np.ndarray, queries: np.ndarray, k: int) -> list[set[int]]:
    """The keys of each query's k most cosine-similar vectors (exact, float32)."""
    m = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    q = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    out: list[set[int]] = []
    for start in range(0, len(q), 256):
        sims = q[start : start + 256] @ m.T
        top = np.argpartition(-sims, min(k, sims.shape[1] - 1), axis=1)[:, :k]
        out.extend({int(keys[j]) for j in row} for row in top)
    return out


def _measure(search, queries: np.ndarray, truth: list[set[int]], k: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    hits, times = 0, []
    for vector, gold in zip(queries, truth):
        t0 = time.perf_counter()
        found = search(vector, k)
        times.append((time.perf_counter() - t0) * 1000)
        hits += len(gold & {key for key, _ in found})
    times.sort()
    return hits / (k * len(truth)), statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


def fill_store(path: Path, texts: Sequence[str], vectors: np.ndarray, model: str) -> SQLiteStore:
    """A SQLite store holding one memory per text with its vector, in agent AGENT."""
    store = SQLiteStore(path, embedding_model=model, dimensions=int(vectors.shape[1]), synchronous="OFF")
    rows = distractor_rows(
        FragmentFactory(), texts, vectors, agent=AGENT, model=model, created_at=[datetime(2020, 1, 1, tzinfo=UTC)] * len(texts)
    )
    import_distractors(store, rows, before=datetime(2020, 1, 1, tzinfo=UTC))
    return store


def sweep(
    store: SQLiteStore, queries: np.ndarray, k: int, ms: Sequence[int], efcs: Sequence[int], efss: Sequence[int], progress: bool = True
) -> tuple[list[Row], int]:
    """Recall and latency of every (m, ef_construction, ef_search), plus the exact scan; and the
    number of vectors searched."""
    assert store.vectors is not None
    source = store.vectors.source
    parts = list(source.load(AGENT))
    keys = np.concatenate([p[0] for p in parts])
    matrix = np.concatenate([p[1] for p in parts]).astype(np.float32)
    truth = exact_top(keys, matrix, queries, k)
    rows: list[Row] = []
    dims, model = store.vectors.dimensions, store.vectors.model
    whole = len(keys) + 1  # each graph built by the first search itself, as timed here (not in the background)
    exact = VectorIndex(dims, model, None, source, ann_threshold=whole, background_build=whole)
    t0 = time.perf_counter()
    exact.size(AGENT)
    built = time.perf_counter() - t0
    recall, p50, p95 = _measure(lambda v, n: exact.search(AGENT, v, n), queries, truth, k)
    rows.append(Row("usearch exact scan", 0, 0, 0, built, recall, p50, p95))
    for m in ms:
        for efc in efcs:
            index = VectorIndex(
                dims, model, None, source, ann_threshold=0, m=m, ef_construction=efc, ef_search=max(efss), background_build=whole
            )
            t0 = time.perf_counter()
            index.size(AGENT)  # builds the graph from the store, as a server's first search does
            built = time.perf_counter() - t0
            for efs in efss:
                index.set_ef_search(efs)
                recall, p50, p95 = _measure(lambda v, n, index=index: index.search(AGENT, v, n), queries, truth, k)
                rows.append(Row("usearch HNSW", m, efc, efs, built, recall, p50, p95))
                if progress:
                    print(_line(rows[-1]), file=sys.stderr, flush=True)
    return rows, len(keys)


def sqlite_vec_row(matrix: np.ndarray, keys: np.ndarray, queries: np.ndarray, truth: list[set[int]], k: int) -> Row:
    """sqlite-vec's vec0 table (an exact KNN scan in SQLite) over the same vectors."""
    import pysqlite3.dbapi2 as sqlite3
    import sqlite_vec

    conn = sqlite3.connect(":memory:")
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{matrix.shape[1]}] distance_metric=cosine)")
    t0 = time.perf_counter()
    conn.executemany("INSERT INTO v(rowid, embedding) VALUES (?, ?)", ((int(key), vec.tobytes()) for key, vec in zip(keys, matrix)))
    built = time.perf_counter() - t0

    def search(vector: np.ndarray, n: int) -> list[tuple[int, float]]:
        found = conn.execute(
            "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ?", (np.asarray(vector, dtype=np.float32).tobytes(), n)
        ).fetchall()
        return [(int(r[0]), 1 - float(r[1])) for r in found]

    recall, p50, p95 = _measure(search, queries, truth, k)
    conn.close()
    return Row("sqlite-vec vec0 (exact)", 0, 0, 0, built, recall, p50, p95)


def _line(row: Row) -> str:
    params = f"{row.m} | {row.ef_construction} | {row.ef_search}" if row.m else "- | - | -"
    return f"| {row.index} | {params} | {row.build_s:.1f} | {row.recall:.4f} | {row.p50_ms:.2f} | {row.p95_ms:.2f} |"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> int:
    from embed_cache import DEFAULT_DIR, CachedEmbedder

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--m", default="16,32")
    parser.add_argument("--ef-construction", default="64,128")
    parser.add_argument("--ef-search", default="32,64,128,256,512")
    parser.add_argument("--embedder", choices=["local", "hash"], default="local")
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--distractor-source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sqlite-vec", action="store_true", help="also measure sqlite-vec's exact vec0 KNN")
    args = parser.parse_args()
    texts = distractor_texts(args.count, args.distractor_source, args.seed)
    queries_from = query_texts(args.queries, args.distractor_source, args.seed)
    if set(queries_from) & set(texts):
        raise SystemExit("the source is too small for disjoint queries: lower --count or --queries")
    embedder: Embedder
    if args.embedder == "local":
        from memento.embeddings.local import LocalE5Embedder

        embedder = CachedEmbedder(LocalE5Embedder(), args.embed_cache)
        vectors = embed_cached(texts, args.embed_cache)
    else:
        from memento.embeddings.hashing import HashEmbedder

        embedder = HashEmbedder(384)
        vectors = embedder.embed_passages(texts)
    queries = np.stack([np.asarray(embedder.embed_query(t), dtype=np.float32) for t in queries_from])
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        store = fill_store(Path(tmp) / "hnsw.db", texts, vectors, embedder.name)
        print(f"{len(texts)} memories imported in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        rows, size = sweep(store, queries, args.k, _ints(args.m), _ints(args.ef_construction), _ints(args.ef_search))
        if args.sqlite_vec:
            assert store.vectors is not None
            parts = list(store.vectors.source.load(AGENT))
            keys = np.concatenate([p[0] for p in parts])
            matrix = np.concatenate([p[1] for p in parts]).astype(np.float32)
            rows.append(sqlite_vec_row(matrix, keys, queries, exact_top(keys, matrix, queries, args.k), args.k))
        store.close()
    print(
        f"{size} vectors ({embedder.name}, {vectors.shape[1]} dims) from {args.distractor_source.name} seed {args.seed}; {len(queries)} queries"
    )
    print(f"| index | m | ef_construction | ef_search | build s | recall@{args.k} | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(_line(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
