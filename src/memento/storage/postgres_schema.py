"""The PostgreSQL schema `agent_memory`: named migrations and the application role's rights.

Migrations. `migrate(owner_dsn, app_role=..., dimensions=...)` applies the named SQL files in
`migrations/postgres` in order as the schema owner, records them in
`agent_memory.schema_migrations` and grants the application role its DML rights. `build_app`
calls it at start-up with DATABASE_MIGRATION_URL, or with the application's own connection when
that is empty (a single-role deployment; FORCE ROW LEVEL SECURITY still binds the owner). With
nothing pending it changes nothing, so a non-owner application role can run it too. The
embedding column's `vector(N)` follows the embedder: the templated `vector_dimensions`
migration runs (and is recorded as `vector_dimensions_<N>`) whenever N differs from the column.
A missing HNSW index (an import that set it aside stopped before rebuilding it) is built again
(postgres_vector_index.py).
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

from ..errors import Unavailable
from . import postgres_vector_index as vector_index

log = logging.getLogger(__name__)

MIGRATION_LOCK = 0x6D656D656E746F  # pg_advisory_xact_lock key: "memento"


def _migration_files() -> list[tuple[str, str]]:
    folder = resources.files("memento.storage.migrations").joinpath("postgres")
    return sorted((e.name, e.read_text(encoding="utf-8")) for e in folder.iterdir() if e.name.endswith(".sql"))


def _vector_template() -> str:
    folder = resources.files("memento.storage.migrations").joinpath("postgres")
    return folder.joinpath("vector_dimensions.sql.in").read_text(encoding="utf-8")


def migrate(dsn: str, *, app_role: str | None = None, dimensions: int | None = None) -> list[str]:
    """Apply pending migrations as the role of `dsn`; grant `app_role` DML. Returns what ran."""
    ran: list[str] = []
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        row = conn.execute(
            "SELECT to_regnamespace('agent_memory') IS NOT NULL, to_regclass('agent_memory.schema_migrations') IS NOT NULL"
        ).fetchone()
        assert row is not None
        if not row[0]:
            conn.execute("CREATE SCHEMA agent_memory")
        if not row[1]:
            conn.execute(
                "CREATE TABLE agent_memory.schema_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT NOW())"
            )
        applied = {r[0] for r in conn.execute("SELECT name FROM agent_memory.schema_migrations")}
        if any(name not in applied for name, _ in _migration_files()):
            _ensure_vector(conn)
        for name, text in _migration_files():
            if name not in applied:
                conn.execute(text.encode())
                conn.execute("INSERT INTO agent_memory.schema_migrations (name) VALUES (%s)", (name,))
                ran.append(name)
        if dimensions is not None and _column_dimensions(conn) != dimensions:
            name = f"vector_dimensions_{int(dimensions)}"
            conn.execute(_vector_template().replace("{dimensions}", str(int(dimensions))).encode())
            conn.execute(
                "INSERT INTO agent_memory.schema_migrations (name) VALUES (%s) ON CONFLICT (name) DO UPDATE SET applied_at = NOW()", (name,)
            )
            ran.append(name)
        vector_index.ensure(conn)  # missing only when an import that set it aside was cut short
        advice = vector_index.memory_advice(conn)
        if advice:
            log.warning(advice)
        current = conn.execute("SELECT current_user").fetchone()
        if app_role and current is not None and app_role != current[0]:
            _grant(conn, app_role)
    if ran:  # one line, not one per migration
        log.info("applied PostgreSQL migrations: %s", ", ".join(ran))
    return ran


def _ensure_vector(conn: psycopg.Connection[Any]) -> None:
    """pgvector's extension, created when this role may; otherwise stop with the one SQL line the
    operator must run (CREATE EXTENSION needs a superuser: pgvector is not a trusted extension)."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    where = conn.execute("SELECT current_database(), current_user").fetchone()
    database, role = (where[0], where[1]) if where else ("?", "?")
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
        raise Unavailable(
            f"the PostgreSQL server has no pgvector extension to install (package postgresql-<version>-pgvector);"
            f" install it on the server, then run in database {database} as a superuser: CREATE EXTENSION vector;"
        )
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the migration's transaction usable
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege as exc:
        raise Unavailable(
            f"the pgvector extension is not enabled in database {database} and role {role} may not create it;"
            f" run once, as a superuser in database {database}: CREATE EXTENSION vector;"
        ) from exc
    log.info("created the vector extension in database %s", database)


def _column_dimensions(conn: psycopg.Connection[Any]) -> int | None:
    row = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'agent_memory.fragments'::regclass AND attname = 'embedding'"
    ).fetchone()
    return int(row[0]) if row and row[0] > 0 else None


def _grant(conn: psycopg.Connection[Any], role: str) -> None:
    who = sql.Identifier(role)
    for statement in (
        "GRANT USAGE ON SCHEMA agent_memory TO {}",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA agent_memory TO {}",
        "REVOKE INSERT, UPDATE, DELETE ON agent_memory.schema_migrations FROM {}",
        "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA agent_memory TO {}",
    ):
        conn.execute(sql.SQL(statement).format(who))
    version = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    if version is not None and version[0] >= 170000:  # VACUUM after an erasure (postgres_erasure.py)
        conn.execute(sql.SQL("GRANT MAINTAIN ON ALL TABLES IN SCHEMA agent_memory TO {}").format(who))
