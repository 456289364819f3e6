"""Export and import in bounded memory: rows per second and peak memory as the store grows.

For each size (10k and 100k memories by default) a fresh store is filled through the lossless
restore path (RecordStore.restore_records, 1,000 records per transaction: synthetic memories of
~200 characters with tags and keywords, a version on every tenth, a link from every fifth, one
entity per hundred memories with its associations). Then each format is exported to a file, and
the NDJSON export imported into an empty store, each in a fresh child process that reports:

  rows/s         records written (memories, versions, links, entities, associations) per second
  peak RSS       the child's peak resident set (VmHWM: the whole process, interpreter, libraries
                 and SQLite's page cache, at most 64 MiB per connection)
  heap peak      tracemalloc's peak of Python allocations during the export itself (a second run,
                 since tracing slows it down)

Memory that does not grow from 10k to 100k is what "streaming" means here. No embeddings are
computed (EMBEDDING_PROVIDER=none: an export never reads vectors; an import would embed each
batch, which bench/latency.py times). On PostgreSQL (`--backend postgres`: a throw-away server,
bench/pg_server.py) each fill is followed by VACUUM (ANALYZE), as autovacuum would.

    python bench/export_memory.py [--sizes 10000,100000] [--backend sqlite|postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memento.app import build_app
from memento.cli import export as exporting
from memento.exchange.restore import check, restore
from memento.models import AgentScope
from memento.settings import Settings

AGENT = "bench-agent"
WORDS = "memory agent database vector index search recall store cache latency meeting project export import stream page".split()
BATCH = 1000


def settings_for(url: dict[str, str]) -> Settings:
    return Settings(**url, EMBEDDING_PROVIDER="none")  # type: ignore[arg-type]


def records(n: int, rng: random.Random) -> Iterator[tuple[str, dict[str, object]]]:
    """The fill: memories (some with versions), links, entities and their associations."""
    base = datetime(2025, 1, 1, tzinfo=UTC)
    for i in range(n):
        at = base + timedelta(minutes=i)
        words = rng.choices(WORDS, k=28)
        content = f"(note {i}) " + " ".join(words)
        versions = [
            {"content": content + " (draft)", "topic": f"topic-{i % 50}", "keywords": words[:3], "type": "fact", "importance": 0.5,
             "amended_at": at, "amended_by": AGENT, "confidence": 1.0, "metadata": {}, "tags": ["draft"], "note": None}
        ] if i % 10 == 0 else []  # fmt: skip
        yield "fragments", {
            "id": f"frag-{i:016x}", "agent_id": AGENT, "session_id": None, "content": content, "detail": None,
            "topic": f"topic-{i % 50}", "type": "fact", "keywords": sorted(set(words[:5])), "importance": 0.5,
            "content_hash": f"{i:016x}", "source": "bench", "linked_to": [f"frag-{i - 1:016x}"] if i % 5 == 0 and i else [],
            "access_count": i % 7, "accessed_at": at if i % 7 else None, "created_at": at, "ttl_tier": "warm", "tier_since": at,
            "estimated_tokens": 50, "utility_score": 1.0, "verified_at": at, "is_anchor": False, "confidence": 1.0,
            "tags": [f"t{i % 20}", "bench"], "context": None, "metadata": {"n": i}, "expires_at": None, "pinned": i % 100 == 0,
            "memory_system": "semantic", "privacy_scope": "private", "origin_trace": None, "deleted_at": None,
            "memory_key": None, "client_embedding": None, "versions": versions,
        }  # fmt: skip
    for i in range(5, n, 5):
        yield "fragment_links", {"from_id": f"frag-{i:016x}", "to_id": f"frag-{i - 1:016x}", "relation_type": "related", "created_at": base}
    for e in range(n // 100):
        yield "entities", {"id": f"ent-{e:016x}", "agent_id": AGENT, "name": f"Entity {e}", "entity_type": "project",
                           "description": None, "metadata": {}, "created_at": base, "updated_at": base}  # fmt: skip
    for i in range(0, n // 100 * 100, 10):
        yield "entity_memories", {"agent_id": AGENT, "entity_id": f"ent-{i // 100:016x}", "fragment_id": f"frag-{i:016x}",
                                  "relevance": 1.0, "created_at": base}  # fmt: skip


def fill(url: dict[str, str], n: int) -> float:
    app = build_app(settings_for(url), embedder=None)
    started = time.perf_counter()
    try:
        batch: list[tuple[str, dict[str, object]]] = []
        for record in records(n, random.Random(n)):
            batch.append(record)
            if len(batch) == BATCH:
                app.store.restore_records(AgentScope(AGENT), batch)
                batch = []
        if batch:
            app.store.restore_records(AgentScope(AGENT), batch)
    finally:
        app.close()
    return n / (time.perf_counter() - started)


# ---------------------------------------------------------------- the child process: one measured run


def child(url: dict[str, str], action: str, path: Path, trace: bool) -> dict[str, Any]:
    app = build_app(settings_for(url), embedder=None)
    try:
        if trace:
            tracemalloc.start()
        started = time.perf_counter()
        if action == "import":
            checked = check(_lines(path), str(path))
            report = restore(app.store, AgentScope("system"), _lines(path), str(path), total=checked.counts.get("fragment", 0))
            rows = sum(report.restored.values())
        else:
            with path.open("w", encoding="utf-8", newline="") as out:
                done = exporting.export(app.store, out, fmt=action, agents=[AGENT])  # type: ignore[arg-type]
            rows = sum(done.counts.values()) if action == "ndjson" else done.fragments  # the readable formats: memories
        seconds = time.perf_counter() - started
        heap = tracemalloc.get_traced_memory()[1] if trace else None
    finally:
        app.close()
    return {
        "rows": rows,
        "seconds": seconds,
        "rss_mb": peak_rss_kb() / 1024,
        "heap_mb": None if heap is None else heap / 2**20,
        "bytes": path.stat().st_size,
    }


def peak_rss_kb() -> int:
    """This process's peak resident set: VmHWM (Linux; ru_maxrss would carry over the parent's
    peak across fork and exec), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        yield from f


def run_child(url: dict[str, str], action: str, path: Path, trace: bool) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", json.dumps(url), action, str(path)] + (["--trace"] if trace else [])
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env={**os.environ, "LOG_LEVEL": "WARNING"})
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- the benchmark


def analyze(url: dict[str, str]) -> None:
    """PostgreSQL: what autovacuum would have done by now (statistics, the visibility map), as
    bench/latency.py does after its fill."""
    owner = url.get("DATABASE_MIGRATION_URL")
    if owner:
        import psycopg

        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE)")


def measure(url_of: Any, sizes: list[int], folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in sizes:
        url = url_of(f"store-{n}")
        rate = fill(url, n)
        analyze(url)
        print(f"filled {n:,} memories ({rate:,.0f}/s through restore_records)", file=sys.stderr, flush=True)
        for action in ("ndjson", "markdown", "csv", "import"):
            path = folder / f"export-{n}.{'jsonl' if action in ('ndjson', 'import') else action}"
            target = url if action != "import" else url_of(f"empty-{n}")
            plain = run_child(target, action, path, trace=False)
            traced = run_child(url_of(f"empty2-{n}") if action == "import" else target, action, path, trace=True)
            rows.append({"memories": n, "action": action, **plain, "heap_mb": traced["heap_mb"]})
            print(_line(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['memories']:>7,} {r['action']:<8} {r['rows']:>8,} rows {r['rows'] / r['seconds']:>9,.0f} rows/s"
        f"  peak RSS {r['rss_mb']:6.1f} MB  heap peak {r['heap_mb']:6.1f} MB  file {r['bytes'] / 2**20:7.1f} MB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--child", nargs=3, metavar=("URL", "ACTION", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, action, path = args.child
        print(json.dumps(child(json.loads(url), action, Path(path), args.trace)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="memento-export-bench-") as tmp:
        folder = Path(tmp)
        if args.backend == "sqlite":
            rows = measure(lambda name: {"DATABASE_URL": f"sqlite:///{folder / (name + '.db')}"}, sizes, folder)
        else:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from pg_server import embedded_postgres

            with embedded_postgres() as server:

                def url_of(name: str) -> dict[str, str]:
                    if name.startswith(("store", "empty")):
                        server.reset()  # one database: emptied for each fill and each import
                    return {"DATABASE_URL": server.app_dsn, "DATABASE_MIGRATION_URL": server.owner_dsn}

                rows = measure(url_of, sizes, folder)
    print(f"\n{args.backend}: export and import, each in a fresh process")
    for r in rows:
        print(_line(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
