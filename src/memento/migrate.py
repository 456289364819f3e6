"""`memento migrate --from URL --to URL`: a lossless copy of a whole store between backends.

Every agent's fragments (all columns, with their stored vectors and model names; nothing is
re-embedded), links, fragment versions, tool feedback and task feedback are copied, parents
first, in key order and in batches. Each batch is one transaction at the target, and rows whose
id (or unique key) is already there are skipped, so an interrupted copy is resumed by running the
same command again and a second complete run changes nothing. Ids of links, versions and
feedback rows are kept; a fragment's insertion counter (seq) is the target's own, in the same
order as at the source.

The stores are opened without an embedding model: the target's vector column (PostgreSQL) or
vector index (SQLite) takes the model and dimensions of the source's stored vectors. At a SQLite
target the full-text index, the keyword table and the per-agent vector generations are written
with each batch, so recall works there at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .errors import InvalidArgument, MementoError, Unavailable
from .extras import require
from .storage.protocol import BULK_KEYS, BULK_TABLES, BulkStore
from .storage.sqlite import SQLiteStore

DEFAULT_BATCH = 500

ProgressCallback = Callable[[str, int, int, int], None]  # table, rows seen, rows at source, rows inserted


@dataclass(frozen=True)
class Endpoint:
    """A parsed store URL."""

    url: str
    backend: str  # "sqlite" | "postgres"
    path: Path | None = None
    dsn: str | None = None

    def identity(self) -> tuple[object, ...]:
        """What makes two URLs the same database (credentials and options aside)."""
        if self.path is not None:
            return ("sqlite", self.path.expanduser().resolve())
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(self.dsn or "")
        return (
            "postgres",
            str(info.get("host") or "localhost"),
            str(info.get("port") or "5432"),
            str(info.get("dbname") or info.get("user") or ""),
        )

    def describe(self) -> str:
        if self.path is not None:
            return f"sqlite:///{self.path}"
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(self.dsn or "")
        return f"postgresql://{info.get('host') or 'localhost'}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


@dataclass
class TableReport:
    rows: int = 0  # at the source
    seen: int = 0
    copied: int = 0

    @property
    def skipped(self) -> int:
        return self.seen - self.copied


@dataclass
class MigrationReport:
    source: str
    target: str
    embedding_model: str | None
    dimensions: int | None
    tables: dict[str, TableReport] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.target,
            "embedding_model": self.embedding_model,
            "dimensions": self.dimensions,
            "tables": {t: {"rows": r.rows, "copied": r.copied, "skipped": r.skipped} for t, r in self.tables.items()},
        }


def parse_url(url: str) -> Endpoint:
    """sqlite:///path or postgresql://… (postgres:// too); anything else is refused."""
    if url.startswith("sqlite:///"):
        rest = url.removeprefix("sqlite:///")
        if not rest:
            raise InvalidArgument(f"no file in {url!r}: use sqlite:///path/to/memento.db")
        return Endpoint(url, "sqlite", path=Path(rest).expanduser())
    if url.startswith(("postgresql://", "postgres://")):
        require("postgres", "memento migrate with a PostgreSQL URL")
        return Endpoint(url, "postgres", dsn=url)
    scheme = url.split("://", 1)[0] if "://" in url else url
    raise InvalidArgument(f"unknown scheme in {scheme!r}: use sqlite:///path or postgresql://user@host/db")


class TextProgress:
    """A plain-text progress line per table on a stream (stderr by default)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self._current: str | None = None

    def __call__(self, table: str, seen: int, total: int, copied: int) -> None:
        width = 30
        filled = width if total == 0 else min(width, seen * width // max(total, 1))
        bar = "#" * filled + "-" * (width - filled)
        line = f"\r{table:<18} [{bar}] {seen}/{total} copied {copied} skipped {seen - copied}"
        self.stream.write(line)
        if seen >= total:
            self.stream.write("\n")
        self.stream.flush()


def _open_source(end: Endpoint) -> BulkStore:
    if end.backend == "sqlite":
        assert end.path is not None
        if not end.path.is_file():
            raise Unavailable(f"source {end.describe()} does not exist")
        _require_sqlite_store(end)
        return SQLiteStore(end.path, embedding_model=None, dimensions=None)
    from .storage.postgres import PostgresStore

    _check_reachable(end, "source")
    store = PostgresStore(end.dsn or "", embedding_model=None, dimensions=None, max_connections=2)
    try:
        store.migrations()
    except MementoError:
        store.close()
        raise
    except Exception as exc:
        store.close()
        raise Unavailable(f"source {end.describe()} holds no Memento store: {type(exc).__name__}: {exc}") from exc
    return store


def _require_sqlite_store(end: Endpoint) -> None:
    """Refuse a file that is not a Memento database (opening it as a store would add our schema)."""
    import pysqlite3.dbapi2 as sqlite3

    assert end.path is not None
    try:
        conn = sqlite3.connect(end.path.expanduser().resolve().as_uri() + "?mode=ro", uri=True)
        try:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fragments'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise Unavailable(f"source {end.describe()} cannot be read: {exc}") from exc
    if found is None:
        raise Unavailable(f"source {end.describe()} holds no Memento store")


def _open_target(end: Endpoint, model: str | None, dimensions: int | None) -> BulkStore:
    if end.backend == "sqlite":
        assert end.path is not None
        return SQLiteStore(end.path, embedding_model=model, dimensions=dimensions)
    from .storage.postgres import PostgresStore
    from .storage.postgres_schema import migrate as migrate_schema

    _check_reachable(end, "target")
    _refuse_other_dimensions(end.dsn or "", dimensions)
    try:
        migrate_schema(end.dsn or "", dimensions=dimensions)
    except Exception as exc:
        raise Unavailable(f"cannot prepare target {end.describe()}: {type(exc).__name__}: {exc}") from exc
    return PostgresStore(end.dsn or "", embedding_model=model, dimensions=dimensions, max_connections=2)


def _check_reachable(end: Endpoint, role: str) -> None:
    """One plain connection first: a refused or unknown server fails at once and says so."""
    import psycopg

    try:
        psycopg.connect(end.dsn or "", connect_timeout=10).close()
    except psycopg.Error as exc:
        raise Unavailable(f"{role} {end.describe()} is not reachable: {str(exc).strip()}") from exc


def _refuse_other_dimensions(dsn: str, dimensions: int | None) -> None:
    """The vector migration drops vectors of another size; never do that to a target's data."""
    if dimensions is None:
        return
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            conn.execute("SELECT set_config('app.current_agent_id', 'system', false)")
            row = conn.execute("SELECT to_regclass('agent_memory.fragments') IS NOT NULL").fetchone()
            if not row or not row[0]:
                return
            found = conn.execute(
                "SELECT vector_dims(embedding) FROM agent_memory.fragments"
                " WHERE embedding IS NOT NULL AND vector_dims(embedding) <> %s LIMIT 1",
                (dimensions,),
            ).fetchone()
    except psycopg.Error as exc:
        raise Unavailable(f"cannot inspect the target PostgreSQL: {type(exc).__name__}: {exc}") from exc
    if found:
        raise InvalidArgument(
            f"the target holds {found[0]}-dimensional vectors and the source {dimensions}-dimensional ones; migrate into an empty database"
        )


def migrate(
    source_url: str, target_url: str, *, batch_size: int = DEFAULT_BATCH, progress: ProgressCallback | None = None
) -> MigrationReport:
    """Copy everything from `source_url` to `target_url`; safe to repeat and to resume."""
    if batch_size < 1:
        raise InvalidArgument("batch size must be at least 1")
    source_end, target_end = parse_url(source_url), parse_url(target_url)
    if source_end.identity() == target_end.identity():
        raise InvalidArgument(f"source and target are the same database ({source_end.describe()})")
    source = _open_source(source_end)
    target: BulkStore | None = None
    try:
        shapes = source.embedding_shapes()
        dims = sorted({d for _, d in shapes})
        if len(dims) > 1:
            raise InvalidArgument(f"the source holds vectors of several sizes {dims}; run `memento reindex` on it first")
        model = shapes[0][0] if shapes else None
        dimensions = dims[0] if dims else None
        target = _open_target(target_end, model, dimensions)
        report = MigrationReport(source_end.describe(), target_end.describe(), model, dimensions)
        for table in BULK_TABLES:
            report.tables[table] = _copy_table(source, target, table, batch_size, progress)
        target.finish_import()
        short = [t for t in BULK_TABLES if target.count_rows(t) < report.tables[t].rows]
        if short:
            raise Unavailable(
                "the target holds fewer rows than the source in "
                + ", ".join(short)
                + " (rows that clash with different rows already at the target were skipped)"
            )
        return report
    finally:
        if target is not None:
            target.close()
        source.close()


def _copy_table(source: BulkStore, target: BulkStore, table: str, batch_size: int, progress: ProgressCallback | None) -> TableReport:
    key = BULK_KEYS[table]
    report = TableReport(rows=source.count_rows(table))
    after = 0
    if progress is not None:
        progress(table, 0, report.rows, 0)
    while True:
        rows = source.export_rows(table, after, batch_size)
        if not rows:
            break
        report.copied += target.import_rows(table, rows)
        report.seen += len(rows)
        after = int(rows[-1][key])  # type: ignore[call-overload]
        if progress is not None and report.seen < report.rows:
            progress(table, report.seen, report.rows, report.copied)
    if progress is not None and report.rows:
        progress(table, max(report.seen, report.rows), report.rows, report.copied)
    return report
