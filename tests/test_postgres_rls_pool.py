"""Row-level security for working memory and the shared pool's write rule (migration 0003),
checked in SQL as the application's non-owner role: the database refuses what the stores'
own predicates already leave out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pg_harness import APP_ROLE, PostgresServer, connect, postgres_module

psycopg = postgres_module("psycopg")

ROWS = {  # id: (agent, anchored, session)
    "frag-a": ("agent-a", False, None),
    "frag-pool": ("default", False, None),
    "frag-anchor": ("default", True, None),
    "frag-op-scratch": ("default", False, "op-session"),
}


def insert(conn: Any, fid: str, agent: str, anchored: bool = False, session: str | None = None) -> None:
    conn.execute(
        "INSERT INTO agent_memory.fragments (id, content, topic, type, importance, content_hash, ttl_tier, agent_id,"
        " is_anchor, session_id, privacy_scope) VALUES (%s, %s, 't', 'fact', 0.5, %s, 'warm', %s, %s, %s, %s)",
        (
            fid,
            f"content of {fid}",
            f"hash-{fid}",
            agent,
            anchored,
            session,
            "team" if agent == "default" and session is None else "private",
        ),
    )


def as_agent(conn: Any, agent: str, pool: str | None = None) -> None:
    conn.execute("SELECT set_config('app.current_agent_id', %s, true)", (agent,))
    if pool is not None:
        conn.execute("SELECT set_config('app.pool_writes', %s, true)", (pool,))


def changed(conn: Any, agent: str, pool: str | None, sql: str) -> int:
    with conn.transaction():
        as_agent(conn, agent, pool)
        return int(conn.execute(sql).rowcount)


@pytest.fixture
def app_conn(postgres_server: PostgresServer) -> Iterator[Any]:
    from memento.storage.postgres_schema import migrate

    migrate(postgres_server.owner_dsn, app_role=APP_ROLE)
    postgres_server.reset()
    with connect(postgres_server.app_dsn, autocommit=True) as conn:
        with conn.transaction():
            as_agent(conn, "system")
            for fid, (agent, anchored, session) in ROWS.items():
                insert(conn, fid, agent, anchored, session)
        yield conn


def test_the_pools_working_memory_is_not_shared(app_conn: Any) -> None:
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
        seen = {r[0] for r in app_conn.execute("SELECT id FROM agent_memory.fragments")}
    assert seen == {"frag-a", "frag-pool", "frag-anchor"}
    with app_conn.transaction():
        as_agent(app_conn, "default")
        seen = {r[0] for r in app_conn.execute("SELECT id FROM agent_memory.fragments")}
    assert seen == {"frag-pool", "frag-anchor", "frag-op-scratch"}


def test_pool_writes_none_changes_no_pool_row(app_conn: Any) -> None:
    for fid in ("frag-pool", "frag-anchor"):
        assert changed(app_conn, "agent-a", "none", f"UPDATE agent_memory.fragments SET topic = 'x' WHERE id = '{fid}'") == 0
        assert changed(app_conn, "agent-a", "none", f"DELETE FROM agent_memory.fragments WHERE id = '{fid}'") == 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a", "none")
        insert(app_conn, "frag-planted", "default")
    assert changed(app_conn, "agent-a", "none", "UPDATE agent_memory.fragments SET topic = 'x' WHERE id = 'frag-a'") == 1


def test_pool_writes_unanchored_leaves_anchors_alone(app_conn: Any) -> None:
    assert changed(app_conn, "agent-a", "unanchored", "DELETE FROM agent_memory.fragments WHERE id = 'frag-anchor'") == 0
    assert changed(app_conn, "agent-a", "unanchored", "UPDATE agent_memory.fragments SET topic = 'x' WHERE id = 'frag-anchor'") == 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a", "unanchored")
        app_conn.execute("UPDATE agent_memory.fragments SET is_anchor = TRUE WHERE id = 'frag-pool'")
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a", "unanchored")
        insert(app_conn, "frag-planted", "default", anchored=True)
    assert changed(app_conn, "agent-a", "unanchored", "UPDATE agent_memory.fragments SET topic = 'x' WHERE id = 'frag-pool'") == 1
    assert changed(app_conn, "agent-a", "unanchored", "DELETE FROM agent_memory.fragments WHERE id = 'frag-pool'") == 1


def test_admins_and_callers_without_the_setting_write_the_pool(app_conn: Any) -> None:
    assert changed(app_conn, "default", None, "UPDATE agent_memory.fragments SET topic = 'x' WHERE id = 'frag-anchor'") == 1
    assert changed(app_conn, "system", "none", "DELETE FROM agent_memory.fragments WHERE id = 'frag-anchor'") == 1
