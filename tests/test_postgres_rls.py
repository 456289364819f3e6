"""Row-level security (000 §3.6) checked in SQL, as the application's non-owner role."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pg_harness import APP_ROLE, PostgresServer, connect, postgres_module

psycopg = postgres_module("psycopg")

ROWS = {"frag-a": "agent-a", "frag-b": "agent-b", "frag-d": "default"}


def insert_sql(fid: str, agent: str) -> tuple[str, tuple[str, ...]]:
    return (
        "INSERT INTO agent_memory.fragments (id, content, topic, type, importance, content_hash, ttl_tier, agent_id, privacy_scope)"
        " VALUES (%s, %s, 't', 'fact', 0.5, %s, 'warm', %s, %s)",  # the pool shares its team rows (docs/privacy.md §5)
        (fid, f"content of {fid}", f"hash-{fid}", agent, "team" if agent == "default" else "private"),
    )


def as_agent(conn: Any, agent: str) -> None:
    conn.execute("SELECT set_config('app.current_agent_id', %s, true)", (agent,))


def visible(conn: Any, agent: str | None, where: str = "TRUE") -> set[str]:
    with conn.transaction():
        if agent is not None:
            as_agent(conn, agent)
        return {r[0] for r in conn.execute(f"SELECT id FROM agent_memory.fragments WHERE {where}")}


@pytest.fixture
def app_conn(postgres_server: PostgresServer) -> Iterator[Any]:
    """A connection as the application role, with one fragment each for A, B and default."""
    from memento.storage.postgres_schema import migrate

    migrate(postgres_server.owner_dsn, app_role=APP_ROLE)
    postgres_server.reset()
    with connect(postgres_server.app_dsn, autocommit=True) as conn:
        with conn.transaction():
            as_agent(conn, "system")
            for fid, agent in ROWS.items():
                conn.execute(*insert_sql(fid, agent))
        yield conn


def test_the_application_role_is_subject_to_rls(app_conn: Any) -> None:
    row = app_conn.execute(
        "SELECT r.rolsuper, r.rolbypassrls, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner) = current_user"
        " FROM pg_roles r, pg_class c WHERE r.rolname = current_user AND c.oid = 'agent_memory.fragments'::regclass"
    ).fetchone()
    assert row == (False, False, True, True, False)


def test_an_agent_sees_its_own_rows_and_default_but_not_another_agents(app_conn: Any) -> None:
    assert visible(app_conn, "agent-a") == {"frag-a", "frag-d"}
    assert visible(app_conn, "agent-a", "agent_id = 'agent-b'") == set()
    assert visible(app_conn, "agent-b") == {"frag-b", "frag-d"}


def test_an_agent_cannot_insert_update_or_delete_another_agents_rows(app_conn: Any) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(*insert_sql("frag-x", "agent-b"))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute("UPDATE agent_memory.fragments SET agent_id = 'agent-b' WHERE id = 'frag-a'")
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
        assert app_conn.execute("UPDATE agent_memory.fragments SET topic = 'x' WHERE id = 'frag-b'").rowcount == 0
        assert app_conn.execute("DELETE FROM agent_memory.fragments WHERE id = 'frag-b'").rowcount == 0
    assert visible(app_conn, "system", "id = 'frag-b' AND topic = 't'") == {"frag-b"}


def test_default_rows_are_shared_and_writable_by_every_agent(app_conn: Any) -> None:
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(*insert_sql("frag-d2", "default"))
    assert visible(app_conn, "agent-b", "agent_id = 'default'") == {"frag-d", "frag-d2"}


@pytest.mark.parametrize("maintenance", ["system", "admin"])
def test_maintenance_agents_see_everything(app_conn: Any, maintenance: str) -> None:
    assert visible(app_conn, maintenance) == set(ROWS)


def test_the_agent_setting_lasts_one_transaction(app_conn: Any) -> None:
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
    assert visible(app_conn, None) == {"frag-d"}  # no agent set: the shared namespace only


def test_seed_003_linkage_rows_are_their_agents_alone(app_conn: Any) -> None:
    """memory_linkages (migration 0015) is isolated per agent, as feedback_events is."""
    insert = "INSERT INTO agent_memory.memory_linkages (agent_id, fragment_id, target_type, path) VALUES (%s, %s, 'file', %s)"
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(insert, ("agent-a", "frag-a", "a.md"))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(insert, ("agent-b", "frag-b", "b.md"))

    def paths(agent: str) -> set[str]:
        with app_conn.transaction():
            as_agent(app_conn, agent)
            return {r[0] for r in app_conn.execute("SELECT path FROM agent_memory.memory_linkages")}

    assert (paths("agent-a"), paths("agent-b"), paths("system")) == ({"a.md"}, set(), {"a.md"})
    row = app_conn.execute(
        "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'agent_memory.memory_linkages'::regclass"
    ).fetchone()
    assert row == (True, True)


@pytest.mark.parametrize(
    ("table", "columns", "values"),
    [
        ("skip_list", "id, agent_id, item, reason, expires_at", "%s, %s, 'an item', 'a reason', now() + interval '1 day'"),
        ("identity_snapshots", "id, agent_id, crystal, source", "%s, %s, 'I am.', 'manual'"),
    ],
)
def test_seed_003_rows_are_their_namespaces_alone(app_conn: Any, table: str, columns: str, values: str) -> None:
    insert = f"INSERT INTO agent_memory.{table} ({columns}) VALUES ({values})"
    flags = app_conn.execute(
        "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %s::regclass", (f"agent_memory.{table}",)
    ).fetchone()
    assert flags == (True, True)
    for agent in ("agent-a", "agent-b", "default"):
        with app_conn.transaction():
            as_agent(app_conn, agent)
            app_conn.execute(insert, (f"{table}-{agent}", agent))

    def seen(agent: str | None) -> set[str]:
        with app_conn.transaction():
            if agent is not None:
                as_agent(app_conn, agent)
            return {r[0] for r in app_conn.execute(f"SELECT id FROM agent_memory.{table}")}

    assert seen("agent-a") == {f"{table}-agent-a"}  # not the pool's: these rows are never shared
    assert seen("default") == {f"{table}-default"} and seen(None) == set()
    assert seen("system") == {f"{table}-{a}" for a in ("agent-a", "agent-b", "default")}
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(insert, (f"{table}-forged", "agent-b"))
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
        assert app_conn.execute(f"DELETE FROM agent_memory.{table} WHERE agent_id = 'agent-b'").rowcount == 0


def test_consolidation_runs_are_their_namespaces_and_whole_store_runs_readable_by_all(app_conn: Any) -> None:
    """consolidation_runs (migration 0016): a namespace's own rows; the whole-store runs readable
    (never writable) by every agent."""
    insert = (
        "INSERT INTO agent_memory.consolidation_runs (id, agent_id, trigger, started_at, outcome) VALUES (%s, %s, 'manual', now(), 'ok')"
    )
    for run_id, agent, context in (("run-a", "agent-a", "agent-a"), ("run-sys", "system", "system"), ("run-b", "agent-b", "system")):
        with app_conn.transaction():
            as_agent(app_conn, context)
            app_conn.execute(insert, (run_id, agent))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(insert, ("run-forged", "system"))

    def runs(agent: str) -> set[str]:
        with app_conn.transaction():
            as_agent(app_conn, agent)
            return {r[0] for r in app_conn.execute("SELECT id FROM agent_memory.consolidation_runs")}

    assert (runs("agent-a"), runs("system")) == ({"run-a", "run-sys"}, {"run-a", "run-sys", "run-b"})
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
        assert app_conn.execute("DELETE FROM agent_memory.consolidation_runs WHERE id = 'run-sys'").rowcount == 0
        assert app_conn.execute("UPDATE agent_memory.consolidation_runs SET outcome = 'error' WHERE id = 'run-sys'").rowcount == 0
    assert runs("system") == {"run-a", "run-sys", "run-b"}


def test_seed_004_review_cards_are_their_agents_alone(app_conn: Any) -> None:
    """memory_reviews (migration 0018) is isolated per agent, as memory_linkages is."""
    insert = "INSERT INTO agent_memory.memory_reviews (fragment_id, agent_id, due_at, interval_days) VALUES (%s, %s, now(), 1)"
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(insert, ("frag-a", "agent-a"))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(insert, ("frag-b", "agent-b"))

    def cards(agent: str) -> set[str]:
        with app_conn.transaction():
            as_agent(app_conn, agent)
            return {r[0] for r in app_conn.execute("SELECT fragment_id FROM agent_memory.memory_reviews")}

    assert (cards("agent-a"), cards("agent-b"), cards("system")) == ({"frag-a"}, set(), {"frag-a"})
    row = app_conn.execute(
        "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'agent_memory.memory_reviews'::regclass"
    ).fetchone()
    assert row == (True, True)


@pytest.mark.parametrize(
    ("table", "key", "columns", "values"),
    [
        ("evaluation_jobs", "fragment_id", "fragment_id, agent_id, next_attempt_at, enqueued_at", "%s, %s, now(), now()"),
        ("merge_proposals", "from_id", "from_id, agent_id, to_id, similarity, reason, created_at", "%s, %s, 'frag-d', 0.9, 'r', now()"),
        ("evaluation_tokens", "provider", "provider, agent_id, day, tokens", "%s, %s, current_date, 10"),
    ],
)
def test_the_evaluators_rows_are_their_agents_alone(app_conn: Any, table: str, key: str, columns: str, values: str) -> None:
    """Migration 0017: the evaluator's queue, proposals and token tallies are isolated per agent."""
    flags = app_conn.execute(
        "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %s::regclass", (f"agent_memory.{table}",)
    ).fetchone()
    assert flags == (True, True)
    insert = f"INSERT INTO agent_memory.{table} ({columns}) VALUES ({values})"
    for fid, agent in (("frag-a", "agent-a"), ("frag-b", "agent-b")):
        with app_conn.transaction():
            as_agent(app_conn, agent)
            app_conn.execute(insert, (fid, agent))

    def seen(agent: str) -> set[str]:
        with app_conn.transaction():
            as_agent(app_conn, agent)
            return {r[0] for r in app_conn.execute(f"SELECT {key} FROM agent_memory.{table}")}

    assert (seen("agent-a"), seen("agent-b"), seen("system")) == ({"frag-a"}, {"frag-b"}, {"frag-a", "frag-b"})
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(insert, ("frag-b", "agent-b"))


def test_session_handles_are_their_namespaces_alone(app_conn: Any) -> None:
    """session_handles (migration 0025): a namespace reads, uses and ends only its own handles;
    the maintenance context (the lifecycle's sweep) sees every one."""
    insert = (
        "INSERT INTO agent_memory.session_handles (digest, agent_id, principal, session_id, idle_seconds, created_at, used_at, expires_at)"
        " VALUES (%s, %s, 'access_key:k', 'h-s', 60, now(), now(), now() + interval '1 hour')"
    )
    flags = app_conn.execute(
        "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'agent_memory.session_handles'::regclass"
    ).fetchone()
    assert flags == (True, True)
    for agent in ("agent-a", "agent-b", "default"):
        with app_conn.transaction():
            as_agent(app_conn, agent)
            app_conn.execute(insert, (f"digest-{agent}", agent))

    def seen(agent: str | None) -> set[str]:
        with app_conn.transaction():
            if agent is not None:
                as_agent(app_conn, agent)
            return {r[0] for r in app_conn.execute("SELECT digest FROM agent_memory.session_handles")}

    assert seen("agent-a") == {"digest-agent-a"} and seen("default") == {"digest-default"} and seen(None) == set()
    assert seen("system") == {f"digest-{a}" for a in ("agent-a", "agent-b", "default")}
    with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
        as_agent(app_conn, "agent-a")
        app_conn.execute(insert, ("digest-forged", "agent-b"))
    with app_conn.transaction():
        as_agent(app_conn, "agent-a")
        assert app_conn.execute("UPDATE agent_memory.session_handles SET principal = 'x' WHERE agent_id = 'agent-b'").rowcount == 0
        assert app_conn.execute("DELETE FROM agent_memory.session_handles WHERE agent_id = 'agent-b'").rowcount == 0
