"""A million memories in one agent (issue 19): the bulk import a user migrating a large store runs,
then recall and remember store time, disk, RSS, the first recall after a restart and HNSW
recall@10 against an exact scan, on SQLite or PostgreSQL.

    python bench/million.py [--count 1000000] [--backend sqlite|postgres] [--samples 200]
                            [--queries 200] [--embed-cache DIR] [--work DIR] [--keep]
    python bench/million.py --stage time --work DIR                     # a kept SQLite store again
    python bench/million.py --stage time --backend postgres --database-url URL [--migration-url URL]

Steps:
1. Writes the memories as a Memento export (NDJSON version 2, docs/export.md) whose fragment lines
   carry their vectors (`embedding`, `embeddingModel`), in one agent.
2. Imports it with the command a user runs, `memento import FILE --defer-embedding` (a child
   process; its progress lines are shown as they come): the vectors in the file are kept, nothing
   is embedded. Prints throughput and the importer's peak RSS.
3. Opens the store in this process and times: the first recall (the vector index is built from
   the database: usearch HNSW on SQLite; PostgreSQL's pgvector HNSW index was kept up during the
   import), recall and remember store time (bench/latency.py's `measure`: the query vector is
   precomputed, so embedding is excluded), HNSW recall@10 against an exact numpy scan (latency.py's
   `ann_recall`), then closes the store (SQLite saves the index), opens it again and times the
   first recall after the restart (the saved index is loaded). Disk: the database file(s) and the
   saved index (SQLite), pg_total_relation_size of every table with its indexes (PostgreSQL).
   RSS: this process after opening the filled store, after the first recall and at the end.

Vectors. Embedding a million texts with the local model takes ~8 hours on 2 cores, so the corpus
is built from the real model's vectors cached by bench/distractors.py (`--embed` over the PyPI
summaries, bench/embed_cache.py): memory i < R (R = the ~100k cached real vectors) is summary i
with its real vector; every later memory is a synthetic mixture of two real memories a and b
(chosen at random, each pair once): text "<summary a> (<summary b>)" cut to 300 characters,
vector normalise(w·v_a + (1-w)·v_b + n) with w uniform in [0.55, 0.95] and n Gaussian noise of
norm ~0.05. The corpus keeps the real vectors' geometry (the mixtures lie on the segments between
real neighbours and around them) but it is NOT a million real embeddings. Queries are real
query embeddings (`query:` prefix) of summaries that are not in the corpus (bench/distractors.py
`query_texts`), read from the same cache.

Reported figures come from runs under the machine's bench lock. Writing the file is CPU-heavy and
times nothing: `--stage export --work DIR` writes it (run it with `nice -n 19`), then
`flock /tmp/bench.lock python bench/million.py --stage measure --work DIR` imports and times
(throughput is a figure too, so the import runs under the lock).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from distractors import DEFAULT_SOURCE, _shuffled, distractor_rows, distractor_texts, query_texts
from embed_cache import DEFAULT_DIR, _key
from latency import AGENT, ann_recall, ann_recall_postgres, fmt, measure

from memento import __version__
from memento.app import build_app
from memento.exchange import wire
from memento.factory import FragmentFactory
from memento.models import CallContext, RecallInput
from memento.settings import Settings
from memento.storage.records import FRAGMENTS

MODEL = "local:multilingual-e5-small-q4"  # the default model; its vectors are in the cache
DIM = 384
REAL_POOL = 110_000  # summaries looked up in the cache (those cached become the real memories)
NOISE = 0.05
ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- vectors


def cached(cache_dir: Path, kind: str, texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The texts of `texts` whose `kind` ('p' passage, 'q' query) vector of MODEL is in the cache, and those vectors."""
    import sqlite3

    path = cache_dir / "local_multilingual-e5-small-q4.sqlite"
    if not path.is_file():
        raise SystemExit(f"no cached vectors at {path}: run bench/distractors.py --embed --count 100000 first")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    found: dict[str, np.ndarray] = {}
    keys = [_key(kind, t) for t in texts]
    for start in range(0, len(keys), 500):
        part = keys[start : start + 500]
        rows = db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)
        found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
    db.close()
    kept = [(t, found[k]) for t, k in zip(texts, keys) if k in found]
    if not kept:
        return [], np.empty((0, DIM), dtype=np.float32)
    return [t for t, _ in kept], np.stack([v for _, v in kept]).astype(np.float32)


def corpus(texts: Sequence[str], real: np.ndarray, count: int, seed: int, chunk: int = 10_000) -> Iterator[tuple[list[str], np.ndarray]]:
    """`count` (text, vector) pairs in chunks: the real ones first, then the mixtures (module docstring)."""
    rng = np.random.default_rng(seed)
    n = len(texts)
    done = 0
    while done < min(count, n):
        hi = min(count, n, done + chunk)
        yield list(texts[done:hi]), real[done:hi]
        done = hi
    pairs: set[tuple[int, int]] = set()
    while done < count:
        size = min(chunk, count - done)
        a = rng.integers(0, n, size)
        b = rng.integers(0, n, size)
        keep = [i for i in range(size) if a[i] != b[i] and (int(a[i]), int(b[i])) not in pairs]
        for i in keep:
            pairs.add((int(a[i]), int(b[i])))
        a, b = a[keep], b[keep]
        w = rng.uniform(0.55, 0.95, len(keep)).astype(np.float32)[:, None]
        noise = rng.standard_normal((len(keep), real.shape[1])).astype(np.float32) * (NOISE / np.sqrt(real.shape[1]))
        vectors = w * real[a] + (1 - w) * real[b] + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        yield [f"{texts[i]} ({texts[j]})"[:300] for i, j in zip(a, b)], vectors
        done += len(keep)


class CacheEmbedder:
    """MODEL's query vectors from the cache (the questions are all cached); a passage (a probe that
    `measure` remembers) gets a mixture vector as the corpus's, so no model ever runs here."""

    name = MODEL
    dimensions = DIM

    def __init__(self, questions: dict[str, np.ndarray], real: np.ndarray, seed: int = 99) -> None:
        self.questions = questions
        self.real = real
        self.rng = np.random.default_rng(seed)

    def embed_query(self, text: str) -> np.ndarray:
        return self.questions[text]

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        a = self.rng.integers(0, len(self.real), len(texts))
        b = self.rng.integers(0, len(self.real), len(texts))
        v = 0.75 * self.real[a] + 0.25 * self.real[b]
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


# ---------------------------------------------------------------- the export file


def write_export(path: Path, chunks: Iterator[tuple[list[str], np.ndarray]], count: int) -> int:
    """A version 2 export of one agent's memories with their vectors; how many were written."""
    factory = FragmentFactory()
    base = datetime(2024, 1, 1, tzinfo=UTC)
    written = 0
    t0 = time.perf_counter()
    body = path.with_suffix(".body")
    with body.open("w", encoding="utf-8") as out:
        for texts, vectors in chunks:
            created = [base + timedelta(seconds=30 * (written + i)) for i in range(len(texts))]
            for text, vector, when in zip(texts, vectors, created):
                for row in distractor_rows(factory, [text], None, agent=AGENT, model=None, created_at=[when], topic="pypi"):
                    row["updated_at"] = row["created_at"]
                    line = wire.encode(FRAGMENTS, row)
                    line.update(wire.vector_fields(vector, MODEL))
                    out.write(wire.line(line))
                    written += 1
            if written % 100_000 < len(texts):
                print(f"  wrote {written:,}/{count:,} ({written / (time.perf_counter() - t0):,.0f}/s)", file=sys.stderr, flush=True)
    header = {
        "format": wire.FORMAT,
        "version": wire.VERSION,
        "exportedAt": wire.timestamp(datetime.now(UTC)),
        "memento": __version__,
        "agents": [AGENT],
        "fragments": written,
        "includesForgotten": False,
    }
    with path.open("w", encoding="utf-8") as out:
        out.write(wire.line(header))
        with body.open(encoding="utf-8") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        out.write(wire.line({"kind": wire.END, "counts": {"fragment": written}}))
    body.unlink()
    return written


# ---------------------------------------------------------------- measuring


def rss_mb() -> float:
    """This process's resident set now (VmRSS), in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def disk_mb(folder: Path, skip: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and p != skip) / 2**20


# `memento import` run as the CLI runs it, reporting its own peak RSS (VmHWM: this process image
# only; ru_maxrss would count the parent's pages the child held between fork and exec).
IMPORTER = (
    "import atexit, os, runpy, sys\n"
    "def peak():\n"
    "    with open('/proc/self/status') as f, open(os.environ['MILLION_RSS_FILE'], 'w') as out:\n"
    "        out.write(next(l.split()[1] for l in f if l.startswith('VmHWM:')))\n"
    "atexit.register(peak)\n"
    "sys.argv = ['memento', *sys.argv[1:]]\n"
    "runpy.run_module('memento', run_name='__main__', alter_sys=True)\n"
)


def run_import(path: Path, env: dict[str, str], extra: Sequence[str] = ()) -> tuple[float, dict[str, object], float]:
    """`memento import PATH --defer-embedding --json [extra]` as a user runs it: (seconds, its report, its peak RSS MB)."""
    peak_file = path.with_suffix(".rss")
    command = [sys.executable, "-c", IMPORTER, "import", str(path), "--defer-embedding", "--json", *extra]
    child_env = {**os.environ, **env, "PYTHONPATH": str(ROOT / "src"), "MILLION_RSS_FILE": str(peak_file)}
    t0 = time.perf_counter()
    proc = subprocess.run(command, env=child_env, stdout=subprocess.PIPE, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"memento import failed ({proc.returncode}): {proc.stdout[-2000:]}")
    report = json.loads(proc.stdout)
    return seconds, report, int(peak_file.read_text()) / 1024


def first_recall_ms(app, question: str, vector: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    app.service.recall_with_vector(RecallInput(text=question, limit=10, includeLinks=False), CallContext(agent_id=AGENT), vector)
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--samples", type=int, default=200, help="remember and recall calls timed")
    parser.add_argument("--queries", type=int, default=200, help="queries of the recall@10 check")
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--distractor-source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--real", type=int, default=REAL_POOL, help="use at most this many real vectors (the rest are mixtures)")
    parser.add_argument("--work", type=Path, help="a folder for the export and the store (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--stage",
        default="all",
        choices=["all", "export", "measure", "time"],
        help="`export` only writes the file into --work (CPU-heavy: run it niced); `measure` imports the file"
        " an earlier `export` left in --work and times everything (run it under the bench lock); `time` (SQLite)"
        " opens the store an earlier `measure` left in --work and times recall, remember and recall@10 again"
        " (after a code change; each run adds --samples probe memories)",
    )
    parser.add_argument(
        "--rebuild-vector-index",
        action="store_true",
        help="PostgreSQL: import with `--rebuild-vector-index` (the HNSW index dropped for the load, built after; its build is in import_s)",
    )
    parser.add_argument(
        "--shared-buffers",
        help="PostgreSQL: the server's shared_buffers (e.g. 4GB; default PostgreSQL's 128MB). Recall reads the HNSW graph's"
        " pages on every search: a graph larger than the buffer cache is copied in from the OS each time",
    )
    parser.add_argument(
        "--database-url",
        help="--stage time --backend postgres: the URL of a kept PostgreSQL store to time again (its application role;"
        " a `measure` run's server is thrown away, so keep one yourself), with --migration-url for its owner",
    )
    parser.add_argument("--migration-url", help="with --database-url: the schema owner's URL (default: --database-url)")
    args = parser.parse_args()
    if args.database_url and (args.stage != "time" or args.backend != "postgres"):
        parser.error("--database-url goes with --stage time --backend postgres")
    if args.stage == "time" and args.backend == "postgres" and not args.database_url:
        parser.error("--stage time --backend postgres times a kept server: give its --database-url")
    if args.rebuild_vector_index and args.backend != "postgres":
        parser.error("--rebuild-vector-index goes with --backend postgres")
    if args.shared_buffers and args.backend != "postgres":
        parser.error("--shared-buffers goes with --backend postgres")
    if args.stage != "all" and args.work is None and not args.database_url:
        parser.error("--stage export|measure needs a --work folder")
    if args.stage != "all" and args.work is not None:  # the folder is the caller's: keep it (and the export in it)
        args.keep = True
    work = args.work or Path(tempfile.mkdtemp(prefix="memento-million-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return run(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> int:
    texts, real = cached(args.embed_cache, "p", distractor_texts(REAL_POOL, args.distractor_source, args.seed))
    qtexts, qvectors = cached(args.embed_cache, "q", query_texts(max(args.queries, 1000), args.distractor_source, args.seed))
    if len(texts) < 2 or not qtexts:
        raise SystemExit("too few cached vectors: run bench/distractors.py --embed first")
    texts, real = texts[: args.real], real[: args.real]
    qtexts, qvectors = qtexts[: args.queries], qvectors[: args.queries]
    embedder = CacheEmbedder(dict(zip(qtexts, qvectors)), real)
    print(
        f"million: {args.count:,} memories in one agent, backend {args.backend}; {min(len(texts), args.count):,} real"
        f" {MODEL} vectors, the rest mixtures of two (bench/million.py docstring); {len(qtexts)} real queries"
    )
    export = work / "export.jsonl"
    if args.stage == "time" and args.backend == "postgres":
        owner = args.migration_url or args.database_url
        settings = Settings(DATABASE_URL=args.database_url, DATABASE_MIGRATION_URL=owner)
        figures(args, settings, embedder, qtexts, qvectors, {}, disk=lambda: pg_disk(owner))
        return 0
    if args.stage == "time":
        store = work / "store"
        if not (store / "memento.db").exists():
            raise SystemExit(f"no store in {store}: run --stage measure first")
        settings = Settings(DATABASE_URL=f"sqlite:///{store / 'memento.db'}")
        figures(args, settings, embedder, qtexts, qvectors, {}, disk=lambda: f"{disk_mb(store, export):,.0f} MB (database + saved index)")
        return 0
    if args.stage != "measure":
        t0 = time.perf_counter()
        written = write_export(export, corpus(texts, real, args.count, args.seed), args.count)
        print(f"export written: {written:,} memories, {export.stat().st_size / 2**20:,.0f} MB, {time.perf_counter() - t0:.0f} s")
        if args.stage == "export":
            return 0
    else:
        with export.open(encoding="utf-8") as f:
            written = int(json.loads(f.readline())["fragments"])
    if args.backend == "postgres":
        from pg_server import embedded_postgres

        with embedded_postgres(args.shared_buffers) as server:
            env = {"DATABASE_URL": server.app_dsn, "DATABASE_MIGRATION_URL": server.owner_dsn}
            settings = Settings(DATABASE_URL=server.app_dsn, DATABASE_MIGRATION_URL=server.owner_dsn)
            build_app(settings, embedder=embedder).close()  # the schema, before the importer and the clock start
            extra = ["--rebuild-vector-index"] if args.rebuild_vector_index else []
            measured = imported(export, env, written, extra)
            measured.update(first_session(settings, embedder, qtexts[0], qvectors[0]))
            figures(args, settings, embedder, qtexts, qvectors, measured, disk=lambda: pg_disk(server.superuser_dsn))
        return 0
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)  # a fresh store each run
    store.mkdir()
    url = f"sqlite:///{store / 'memento.db'}"
    settings = Settings(DATABASE_URL=url)
    measured = imported(export, {"DATABASE_URL": url}, written)
    measured.update(first_session(settings, embedder, qtexts[0], qvectors[0]))
    figures(args, settings, embedder, qtexts, qvectors, measured, disk=lambda: f"{disk_mb(store, export):,.0f} MB (database + saved index)")
    return 0


def imported(export: Path, env: dict[str, str], written: int, extra: Sequence[str] = ()) -> dict[str, float]:
    print(f"importing: memento import {export.name} --defer-embedding {' '.join(extra)}(progress from the importer follows)", flush=True)
    seconds, report, peak = run_import(export, env, extra)
    stored = int(report["stored"])  # type: ignore[call-overload]
    vectors = report.get("vectors") or {}
    print(
        f"import: {stored:,} stored of {written:,} in {seconds:,.0f} s = {stored / seconds:,.0f} memories/s;"
        f" vectors {vectors}; importer peak RSS {peak:,.0f} MB"
    )
    if vectors.get("kept", 0) < stored:  # type: ignore[union-attr]
        raise SystemExit("the importer did not keep the file's vectors (another embedding model configured?)")
    return {"seconds": seconds, "stored": stored, "peak_rss": peak}


def first_session(settings: Settings, embedder: CacheEmbedder, question: str, vector: np.ndarray) -> dict[str, float]:
    """Open the imported store and time its first recall (the vector index is built from the
    database on SQLite), then close it (SQLite saves the index)."""
    _shuffled.cache_clear()  # the source's ~900k summaries, no longer needed
    gc.collect()
    base = rss_mb()
    app = build_app(settings, embedder=embedder)
    opened = rss_mb()
    t0 = time.perf_counter()
    first = first_recall_ms(app, question, vector)
    vectors = getattr(app.store, "vectors", None)  # SQLite: the graph is built in the background meanwhile
    if vectors is not None:
        vectors.ready(AGENT)
    built = time.perf_counter() - t0
    after = rss_mb()
    second = first_recall_ms(app, question, vector)
    t0 = time.perf_counter()
    app.close()
    closed = (time.perf_counter() - t0) * 1000
    print(
        f"first session: RSS {base:,.0f} MB before opening the store (this process holds the real vectors for its probes),"
        f" {opened:,.0f} MB opened, first recall {first:,.0f} ms (vectors loaded, searched exactly while the graph is built),"
        f" graph ready after {built:,.0f} s, RSS then {after:,.0f} MB, a recall then {second:,.0f} ms; close {closed:,.0f} ms"
    )
    return {"rss_base": base, "rss_open": opened, "first_recall": first, "graph_ready_s": built, "rss_first": after, "close_ms": closed}


def figures(args, settings: Settings, embedder: CacheEmbedder, qtexts, qvectors, measured, disk) -> None:  # type: ignore[no-untyped-def]
    # A fresh store gets the same probes every time; a kept one (--stage time) new ones, or its
    # remembers would find their own earlier copies and store nothing.
    rng = random.Random(7 if measured else time.time_ns())
    _shuffled.cache_clear()
    gc.collect()
    base = rss_mb()
    app = build_app(settings, embedder=embedder)
    again = first_recall_ms(app, qtexts[1 % len(qtexts)], qvectors[1 % len(qtexts)])
    vectors = getattr(app.store, "vectors", None)
    if vectors is not None and not vectors.ready(AGENT, 0):  # no saved graph: built again, timed once it is there
        print("restart: no saved graph to load; waiting for the background build", flush=True)
        vectors.ready(AGENT)
    loaded = rss_mb()
    print(f"restart: first recall {again:,.0f} ms (saved index loaded or caught up); RSS {base:,.0f} MB before, {loaded:,.0f} MB after")
    m = measure(app, embedder, list(qtexts), qtexts, args.samples, rng)
    print(f"  recall    store {fmt(m['recall_store'])}")
    print(f"  remember  store {fmt(m['remember_store'])}")
    if args.backend == "postgres":
        recall = ann_recall_postgres(app, embedder, qtexts, n=len(qtexts))
    else:
        recall = ann_recall(app, embedder, qtexts, n=len(qtexts))
    print(f"  HNSW recall@10 vs exact scan ({len(qtexts)} real queries): {recall:.3f}")
    app.close()
    size = disk()
    print(f"  disk: {size}")
    imported = (
        {
            "count": int(measured["stored"]),
            "import_s": round(measured["seconds"], 1),
            "import_per_s": round(measured["stored"] / measured["seconds"]),
            "importer_peak_rss_mb": round(measured["peak_rss"]),
            "rss_base_mb": round(measured["rss_base"]),
            "rss_open_mb": round(measured["rss_open"]),
            "first_recall_ms": round(measured["first_recall"]),
            "graph_ready_s": round(measured["graph_ready_s"], 1),
            "rss_after_first_recall_mb": round(measured["rss_first"]),
        }
        if measured
        else {"count": args.count, "stage": "time"}  # the kept store again: no import in this run
    )
    print(
        json.dumps(
            {
                **imported,
                "backend": args.backend,
                "rebuild_vector_index": args.rebuild_vector_index,
                "shared_buffers": args.shared_buffers if args.backend == "postgres" else None,
                "first_recall_after_restart_ms": round(again),
                "rss_after_restart_recall_mb": round(loaded),
                "recall_store_p50_ms": round(float(np.median(m["recall_store"])), 2),
                "recall_store_p95_ms": round(float(np.percentile(m["recall_store"], 95)), 2),
                "remember_store_p50_ms": round(float(np.median(m["remember_store"])), 2),
                "recall_at_10": round(recall, 4),
                "disk": size,
            }
        )
    )


def pg_disk(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind = 'r' ORDER BY 2 DESC"
        ).fetchall()
        hnsw = conn.execute("SELECT pg_relation_size('agent_memory.fragments_embedding_hnsw')").fetchone()[0]
    total = sum(int(size) for _, size in rows)
    top = ", ".join(f"{name} {size / 2**20:,.0f}" for name, size in rows[:3])
    return f"{total / 2**20:,.0f} MB all tables with indexes ({top} MB; the HNSW index {hnsw / 2**20:,.0f} MB)"


if __name__ == "__main__":
    sys.exit(main())
