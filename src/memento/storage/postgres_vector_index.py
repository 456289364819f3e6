"""The pgvector HNSW index of the fragments' vectors (`fragments_embedding_hnsw`): put back when
it is missing, and set aside for a large import (`memento import --rebuild-vector-index`).

Kept up row by row, the index costs a large import most of its time (a 20k import: 86 s with it,
19 s without, 7 s to build it afterwards; docs/import.md). `paused` drops it before the load and
builds it again afterwards, always: the rebuild runs in a `finally`, so a failed or interrupted
import leaves the index too; if even that is cut short (the process killed), the next start-up
puts it back (`ensure`, called by the migrations). Meanwhile vector search is an exact scan:
slower, still correct. The rebuild is CREATE INDEX CONCURRENTLY, so other agents' writes are not
held back while it runs (a build cut short leaves an invalid index, which `present` does not
count: the next rebuild or start-up replaces it). The definition is the migration's own (vector_dimensions.sql.in), read
from it, so a rebuilt index is the one the migrations make.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

import psycopg

from ..errors import Forbidden

log = logging.getLogger(__name__)

INDEX = "fragments_embedding_hnsw"
Report = Callable[[str], None]
PROGRESS_EVERY_S = 10.0
GROWN = ("fragments", "fragment_terms", "fragment_keywords", "fragment_tags")  # the tables a memory adds rows to
MIN_MEMORY_MB = 64
MAX_MEMORY_MB = 8192


def definition() -> str:
    """The CREATE INDEX statement of the migration that types the embedding column."""
    folder = resources.files("memento.storage.migrations").joinpath("postgres")
    template = folder.joinpath("vector_dimensions.sql.in").read_text(encoding="utf-8")
    found = re.search(rf"CREATE INDEX {INDEX} .*?;", template, re.DOTALL)
    if found is None:
        raise AssertionError(f"vector_dimensions.sql.in defines no {INDEX}")
    return found.group(0).rstrip(";")


def present(conn: psycopg.Connection[Any]) -> bool:
    """Whether the index exists (and is valid)."""
    row = conn.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", (f"agent_memory.{INDEX}",)).fetchone()
    return bool(row and row[0])


def ensure(conn: psycopg.Connection[Any]) -> bool:
    """Build the index when the embedding column is typed and the index is missing (an import
    that set it aside was killed before its rebuild); whether it was built. A role that may not
    build it logs a warning and changes nothing (vector search stays exact until the owner starts)."""
    typed = conn.execute(
        "SELECT atttypmod > 0 FROM pg_attribute WHERE attrelid = to_regclass('agent_memory.fragments') AND attname = 'embedding'"
    ).fetchone()
    if not (typed and typed[0]) or present(conn):
        return False
    if conn.execute("SELECT 1 FROM pg_stat_progress_create_index WHERE relid = to_regclass('agent_memory.fragments')").fetchone():
        log.warning("the vector index %s is being built (an import's rebuild): vector search scans exactly until it is done", INDEX)
        return False
    log.warning("the vector index %s is missing (an import that set it aside stopped early?): building it", INDEX)
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the caller's transaction usable
            conn.execute(f"DROP INDEX IF EXISTS agent_memory.{INDEX}")  # an invalid leftover
            conn.execute(definition().encode())
    except psycopg.errors.InsufficientPrivilege:
        log.warning("this role may not build %s: vector search scans exactly until the schema owner starts the server", INDEX)
        return False
    return True


def memory_advice(conn: psycopg.Connection[Any]) -> str | None:
    """A warning when the index is larger than `shared_buffers`, else None. Each search walks pages
    all over the graph: pages that do not fit in PostgreSQL's buffer cache are copied in from the
    OS on every search (at 100,000 memories, a 196 MB index with the default 128 MB: recall store
    time 65 ms p50, 44 ms with shared_buffers at 1 GB; docs/benchmarks.md, "PostgreSQL at 100,000 memories")."""
    row = conn.execute(
        "SELECT pg_relation_size(to_regclass(%s)), pg_size_bytes(current_setting('shared_buffers'))", (f"agent_memory.{INDEX}",)
    ).fetchone()
    return advice(int(row[0]), int(row[1])) if row and row[0] is not None else None


def advice(index_bytes: int, buffers_bytes: int) -> str | None:
    """memory_advice's verdict on these sizes."""
    if index_bytes <= buffers_bytes:
        return None
    index_mb, buffers_mb = index_bytes / 2**20, buffers_bytes / 2**20
    return (
        f"the vector index {INDEX} ({index_mb:,.0f} MB) is larger than PostgreSQL's shared_buffers ({buffers_mb:,.0f} MB): every"
        f" vector search copies graph pages in from the OS. Set shared_buffers above {index_mb * 1.5:,.0f} MB (with its tables,"
        " about a quarter of the server's memory is the usual size; it needs a restart) for fast recall"
    )


def memory_mb(vectors: int, dimensions: int) -> int:
    """maintenance_work_mem for building the graph of `vectors` in memory (pgvector writes to disk,
    much slower, when it does not fit): each vector's floats and its neighbour lists, plus a
    quarter, between 64 MB and 8 GB."""
    need = vectors * (4 * dimensions + 1024) * 1.25 / 2**20
    return int(min(max(need, MIN_MEMORY_MB), MAX_MEMORY_MB))


@contextmanager
def paused(owner_dsn: str, report: Report, *, memory: int | None = None) -> Iterator[None]:
    """Drop the index for the block and build it again after, whatever happens in the block.
    `owner_dsn`: a connection that owns the table (DATABASE_MIGRATION_URL); `memory`: the
    build's maintenance_work_mem in MB (default: `memory_mb` of the vectors stored then)."""
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        try:
            conn.execute(f"DROP INDEX IF EXISTS agent_memory.{INDEX}")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise Forbidden(
                f"dropping the vector index {INDEX} needs the table's owner: set DATABASE_MIGRATION_URL to the schema owner's"
                " connection; nothing imported"
            ) from exc
    report(f"vector index {INDEX} dropped for the import; vector search scans exactly until it is rebuilt")
    try:
        yield
    finally:
        rebuild(owner_dsn, report, memory=memory)
        analyze(owner_dsn, report)


def analyze(owner_dsn: str, report: Report) -> None:
    """ANALYZE the tables a large import grew, so recall's plans see their new sizes at once
    instead of after autovacuum's next round (a sample of each table: seconds at a million)."""
    started = time.perf_counter()
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(f"ANALYZE {', '.join(f'agent_memory.{t}' for t in GROWN)}")
    report(f"analyzed {', '.join(GROWN)} in {time.perf_counter() - started:,.1f} s")


def rebuild(owner_dsn: str, report: Report, *, memory: int | None = None) -> None:
    """Build the index (the migration's definition) unless it exists, printing its progress."""
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        if present(conn):
            report(f"vector index {INDEX} already present")
            return
        conn.execute("SELECT set_config('app.current_agent_id', 'system', false)")  # row-level security binds the owner too
        row = conn.execute(
            "SELECT count(*), COALESCE(max(vector_dims(embedding)), 0) FROM agent_memory.fragments WHERE embedding IS NOT NULL"
        ).fetchone()
        vectors, dimensions = (int(row[0]), int(row[1])) if row else (0, 0)
        mb = memory or memory_mb(vectors, dimensions)
        conn.execute(f"SET maintenance_work_mem = '{int(mb)}MB'")
        conn.execute(f"DROP INDEX IF EXISTS agent_memory.{INDEX}")  # an invalid leftover of a cut-short build
        report(f"rebuilding vector index {INDEX} over {vectors:,} vectors (maintenance_work_mem {mb:,} MB)")
        conn.add_notice_handler(lambda notice: report(f"  postgres: {notice.message_primary}"))  # "graph no longer fits ..."
        done = threading.Event()
        watcher = threading.Thread(target=_watch, args=(owner_dsn, conn.info.backend_pid, report, done), daemon=True)
        watcher.start()
        started = time.perf_counter()
        try:  # CONCURRENTLY: other agents' writes go on during the build (a plain build would hold them back)
            conn.execute(definition().replace("CREATE INDEX ", "CREATE INDEX CONCURRENTLY ", 1).encode())
        finally:
            done.set()
            watcher.join()
    report(f"vector index {INDEX} rebuilt in {time.perf_counter() - started:,.1f} s")


def _watch(dsn: str, pid: int, report: Report, done: threading.Event) -> None:
    """Every few seconds, the build's phase and how far it is (pg_stat_progress_create_index)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not done.wait(PROGRESS_EVERY_S):
                row = conn.execute(
                    "SELECT phase, tuples_done, tuples_total FROM pg_stat_progress_create_index WHERE pid = %s", (pid,)
                ).fetchone()
                if row is not None:  # pgvector counts the tuples it loaded, not always their total
                    of = f"/{row[2]:,} vectors ({100 * row[1] / row[2]:.0f}%)" if row[2] else " vectors"
                    report(f"  vector index: {row[0]}, {row[1]:,}{of}")
    except psycopg.Error as exc:  # progress is a courtesy: the build goes on without it
        log.info("vector index progress unavailable: %s", exc)
