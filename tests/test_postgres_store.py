"""What is particular to the PostgreSQL backend: configuration, migrations, indexes, vectors.

The behaviour shared with SQLite is tested once, on both backends, by test_service.py and
test_lifecycle.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from pg_harness import APP_ROLE, PostgresServer, connect, postgres_module

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Unavailable
from memento.models import AgentScope, AmendInput, CallContext, ForgetInput, ForgetMode, FragmentType, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage.postgres import PostgresStore
from memento.storage.postgres_maintenance import PostgresMaintenance
from memento.storage.protocol import SearchFilter

psycopg = postgres_module("psycopg")


@pytest.fixture
def pg_settings(postgres_server: PostgresServer) -> Settings:
    postgres_server.reset()
    return Settings(DATABASE_URL=postgres_server.app_dsn, DATABASE_MIGRATION_URL=postgres_server.owner_dsn, EMBEDDING_PROVIDER="hash")


@pytest.fixture
def pg_app(pg_settings: Settings) -> Iterator[App]:
    app = build_app(pg_settings, embedder=HashEmbedder(256))
    yield app
    app.close()


def owner_query(server: PostgresServer, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with connect(server.owner_dsn, autocommit=True) as conn:
        return list(conn.execute(sql, params).fetchall())


def test_postgres_variables_take_precedence_over_db_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    for name, value in {
        "DB_HOST": "db-host",
        "POSTGRES_HOST": "pg-host",
        "DB_PORT": "6000",
        "DB_NAME": "mem",
        "DB_USER": "u",
        "POSTGRES_PASSWORD": "p w",
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.backend == "postgres"
    assert settings.postgres_host == "pg-host" and settings.postgres_port == 6000
    assert "host=pg-host" in settings.postgres_dsn and "password='p w'" in settings.postgres_dsn


def test_database_url_chooses_the_backend() -> None:
    assert Settings(DATABASE_URL="postgresql://u@h/db").backend == "postgres"
    assert Settings(DATABASE_URL="sqlite:///x.db", POSTGRES_HOST="h").backend == "sqlite"
    with pytest.raises(ValueError):
        Settings(DATABASE_URL="mysql://h/db")


def test_pool_settings_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "DB_MAX_CONNECTIONS": "7",
        "DB_IDLE_TIMEOUT_MS": "5000",
        "DB_CONN_TIMEOUT_MS": "2000",
        "DB_QUERY_TIMEOUT": "1500",
    }.items():
        monkeypatch.setenv(name, value)
    s = Settings()
    assert (s.db_max_connections, s.db_idle_timeout_ms, s.db_conn_timeout_ms, s.db_query_timeout) == (7, 5000, 2000, 1500)


def test_an_unreachable_server_is_unavailable(postgres_server: PostgresServer) -> None:
    from memento.storage.postgres import PostgresStore

    dead = postgres_server.app_dsn.replace(f":{postgres_server.port}/", ":1/")
    with pytest.raises(Unavailable):
        PostgresStore(dead, embedding_model=None, dimensions=None, conn_timeout_ms=500)


def test_migrations_are_recorded_and_never_rerun(pg_app: App, pg_settings: Settings) -> None:
    from memento.storage.postgres_schema import migrate

    names = pg_app.store.migrations()
    assert names[0] == "0001_initial.sql" and "vector_dimensions_256" in names
    assert migrate(pg_settings.database_migration_url, app_role=APP_ROLE, dimensions=256) == []


def test_the_index_inventory_of_000_exists(pg_app: App, postgres_server: PostgresServer) -> None:
    rows = owner_query(
        postgres_server, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'agent_memory' AND tablename = 'fragments'"
    )
    defs = dict(rows)
    for column in ("keywords", "linked_to", "search"):
        assert "USING gin" in defs[f"fragments_{column}"]
    hnsw = defs["fragments_embedding_hnsw"]
    assert "USING hnsw (embedding vector_cosine_ops)" in hnsw and "m='16'" in hnsw and "ef_construction='64'" in hnsw
    for name in ("topic", "type", "importance", "created", "agent", "tier_created", "source", "verified", "anchor"):
        assert f"fragments_{name}" in defs


def test_a_new_embedding_size_retypes_the_column(pg_settings: Settings, postgres_server: PostgresServer) -> None:
    first = build_app(pg_settings, embedder=HashEmbedder(256))
    first.service.remember(RememberInput(content="vectors of one size", topic="t", type="fact"), CallContext())
    first.close()
    second = build_app(pg_settings, embedder=HashEmbedder(64))
    try:
        column = owner_query(
            postgres_server,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'agent_memory.fragments'::regclass AND attname = 'embedding'",
        )
        assert column == [("vector(64)",)]
        assert "vector_dimensions_64" in second.store.migrations()
        assert len(second.store.missing_embeddings(AgentScope("system"), 10)) == 1  # re-embedded by the backfill
    finally:
        second.close()
    build_app(pg_settings, embedder=HashEmbedder(256)).close()


def test_filtered_vector_search_fills_its_limit(pg_app: App) -> None:
    service, ctx = pg_app.service, CallContext()
    for i in range(60):
        service.remember(
            RememberInput(content=f"note number {i} about item {i * 7}", topic="even" if i % 2 == 0 else "odd", type="fact"), ctx
        )
    vector = pg_app.embedder.embed_query("note about item") if pg_app.embedder else np.zeros(256)
    hits = pg_app.store.vector_search(AgentScope("default"), vector, SearchFilter(topic="odd"), 20)
    assert len(hits) == 20
    topics = {f.topic for f in pg_app.store.get_many(AgentScope("default"), [h.id for h in hits])}
    assert topics == {"odd"} and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_korean_particles_and_english_stems_match_in_full_text(pg_app: App) -> None:
    ctx = CallContext()
    meeting = pg_app.service.remember(RememberInput(content="회의가 길었다", topic="t", type="fact", keywords=["x"]), ctx).id
    research = pg_app.service.remember(
        RememberInput(content="researching index structures", topic="t", type="fact", keywords=["y"]), ctx
    ).id
    scope, filt = AgentScope("default"), SearchFilter()
    assert [h.id for h in pg_app.store.text_search(scope, ["회의"], filt, 5)] == [meeting]
    assert [h.id for h in pg_app.store.text_search(scope, ["research"], filt, 5)] == [research]
    assert pg_app.service.recall(RecallInput(text='it\'s "회의" (research)?'), ctx).count == 2


def test_the_application_role_cannot_change_the_schema(pg_app: App, postgres_server: PostgresServer) -> None:
    with connect(postgres_server.app_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DROP TABLE agent_memory.fragments")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO agent_memory.schema_migrations (name) VALUES ('forged')")


# ---------------------------------------------------------------- the search lookup tables (migration 0002)

STALE_TERMS = """
    (SELECT seq, term, agent_id, rank FROM agent_memory.fragment_terms
     EXCEPT ALL SELECT f.seq, t.term, f.agent_id, t.rank FROM agent_memory.fragments f, agent_memory.term_ranks(f.search) t)
    UNION ALL
    (SELECT f.seq, t.term, f.agent_id, t.rank FROM agent_memory.fragments f, agent_memory.term_ranks(f.search) t
     EXCEPT ALL SELECT seq, term, agent_id, rank FROM agent_memory.fragment_terms)"""
STALE_KEYWORDS = """
    (SELECT seq, keyword, agent_id, importance, created_at FROM agent_memory.fragment_keywords
     EXCEPT ALL SELECT DISTINCT f.seq, k, f.agent_id, f.importance, f.created_at FROM agent_memory.fragments f, unnest(f.keywords) k)
    UNION ALL
    (SELECT DISTINCT f.seq, k, f.agent_id, f.importance, f.created_at FROM agent_memory.fragments f, unnest(f.keywords) k
     EXCEPT ALL SELECT seq, keyword, agent_id, importance, created_at FROM agent_memory.fragment_keywords)"""

STALE_TAGS = """
    (SELECT seq, tag, agent_id FROM agent_memory.fragment_tags
     EXCEPT ALL SELECT DISTINCT f.seq, t, f.agent_id FROM agent_memory.fragments f, unnest(f.tags) t)
    UNION ALL
    (SELECT DISTINCT f.seq, t, f.agent_id FROM agent_memory.fragments f, unnest(f.tags) t
     EXCEPT ALL SELECT seq, tag, agent_id FROM agent_memory.fragment_tags)"""


def as_system(server: PostgresServer, sql: str) -> list[tuple[object, ...]]:
    with connect(server.owner_dsn) as conn:
        conn.execute("SELECT set_config('app.current_agent_id', 'system', true)")
        return list(conn.execute(sql).fetchall())


def test_the_search_tables_follow_every_write(pg_app: App, postgres_server: PostgresServer) -> None:
    service = pg_app.service
    ids: dict[str, list[str]] = {}
    for agent in ("agent-a", "agent-b", "default"):
        ctx = CallContext(agent_id=None if agent == "default" else agent)  # the operator writes the shared pool
        ids[agent] = [
            service.remember(
                RememberInput(
                    content=f"staging database {agent} note {i} 회의가 길었다",
                    topic="db" if i % 2 else "ops",
                    type="fact",
                    keywords=["port", f"k{i % 3}"] if i % 2 else None,
                    tags=["ops", f"t{i % 3}"] if i % 3 else None,
                ),
                ctx,
            ).id
            for i in range(6)
        ]
    ctx = CallContext(agent_id="agent-a")
    mine = ids["agent-a"]
    service.amend(AmendInput(id=mine[0], content="entirely new words"), ctx)
    service.amend(AmendInput(id=mine[1], keywords=["other"]), ctx)
    service.amend(AmendInput(id=mine[2], importance=0.11), ctx)
    service.amend(AmendInput(id=mine[3], topic="renamed", tags=["renamed", "ops"]), ctx)
    service.amend(AmendInput(id=mine[2], tags=[]), ctx)
    service.amend(AmendInput(id=mine[4], content="superseding text", supersedes=True), ctx)
    service.amend(AmendInput(id=ids["default"][0], content="shared words amended", keywords=["shared"]), CallContext())
    service.forget(ForgetInput(id=mine[5], force=True), ctx)
    service.forget(ForgetInput(topic="ops", force=True), CallContext(agent_id="agent-b"))
    assert isinstance(pg_app.store, PostgresStore)
    PostgresMaintenance(pg_app.store).decay_importance(AgentScope("agent-a"), 0.9, 100, 2.0, datetime.now(UTC) + timedelta(days=1))

    assert as_system(postgres_server, STALE_TERMS) == []
    assert as_system(postgres_server, STALE_KEYWORDS) == []
    assert as_system(postgres_server, STALE_TAGS) == []
    ((count,),) = as_system(postgres_server, "SELECT COUNT(*) FROM agent_memory.fragment_terms")
    assert isinstance(count, int) and count > 0
    ((tagged,),) = as_system(postgres_server, "SELECT COUNT(*) FROM agent_memory.fragment_tags WHERE tag = 'renamed'")
    assert tagged == 1


def test_migrations_0029_0030_index_the_tags_and_references_a_store_holds(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database as the release before 0029 left it, with tagged and linking memories in several
    namespaces: the upgrade fills fragment_tags and fragment_references with every one of them
    (the owner is bound by the fragments' row-level security too), and a tag filter then finds
    them through it."""
    import psycopg

    from memento.storage import postgres_schema

    name = "memento_tags_upgrade"
    with psycopg.connect(postgres_server.superuser_dsn, autocommit=True) as su:
        su.execute(f"DROP DATABASE IF EXISTS {name}")
        su.execute(f"CREATE DATABASE {name} OWNER memento_owner")
    dsn = postgres_server.owner_dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(postgres_server.superuser_dsn.rsplit("/", 1)[0] + f"/{name}", autocommit=True) as su:
        su.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        every = postgres_schema._migration_files
        monkeypatch.setattr(postgres_schema, "_migration_files", lambda: [m for m in every() if m[0] < "0029"])
        postgres_schema.migrate(dsn)
        with psycopg.connect(dsn) as conn:
            conn.execute("SELECT set_config('app.current_agent_id', 'system', true)")
            for i in range(12):
                conn.execute(
                    "INSERT INTO agent_memory.fragments"
                    " (id, content, topic, type, importance, content_hash, ttl_tier, agent_id, tags, linked_to)"
                    " VALUES (%s, %s, 't', 'fact', 0.5, %s, 'warm', %s, %s, %s)",
                    (
                        f"frag-t{i}",
                        f"tagged row {i}",
                        f"h{i}",
                        ("a", "b", "default")[i % 3],
                        ["ops", "rare"] if i == 4 else ["ops"] if i % 2 else [],
                        ["frag-t2"] if i in (5, 7, 8) else [],
                    ),
                )
        monkeypatch.setattr(postgres_schema, "_migration_files", every)
        assert {"0029_tags_and_pins.sql", "0030_reference_index.sql"} <= set(postgres_schema.migrate(dsn))
        with psycopg.connect(dsn) as conn:
            conn.execute("SELECT set_config('app.current_agent_id', 'system', true)")
            assert conn.execute(STALE_TAGS).fetchall() == []
            assert conn.execute("SELECT COUNT(*) FROM agent_memory.fragment_tags").fetchone() == (8,)
            refs = conn.execute("SELECT r.target, f.id FROM agent_memory.fragment_references r JOIN agent_memory.fragments f USING (seq)")
            assert sorted(refs.fetchall()) == [("frag-t2", "frag-t5"), ("frag-t2", "frag-t7"), ("frag-t2", "frag-t8")]
        store = PostgresStore(dsn, embedding_model=None, dimensions=None)
        try:
            assert [f.id for f in store.recent(AgentScope("b"), SearchFilter(tags_all=("rare",)), 10)] == ["frag-t4"]
            assert store.recent(AgentScope("a"), SearchFilter(tags_all=("rare",)), 10) == []
            seen = store.recent(AgentScope("b"), SearchFilter(), 50)
            assert {"frag-t1", "frag-t4", "frag-t7"} <= {f.id for f in seen}
            assert store.count(AgentScope("b"), SearchFilter(tags_any=("ops",))) == sum("ops" in f.tags for f in seen)
            assert store.delete(AgentScope("system"), ["frag-t2"]) == ["frag-t2"]
            assert [f.linked_to for f in store.get_many(AgentScope("system"), ["frag-t5", "frag-t7", "frag-t8"])] == [[], [], []]
        finally:
            store.close()
    finally:
        with psycopg.connect(postgres_server.superuser_dsn, autocommit=True) as su:
            su.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_stored_term_shares_add_up_to_ts_rank(pg_app: App, postgres_server: PostgresServer) -> None:
    ctx = CallContext()
    for text in ("index index index of the staging database", "database", "an index", "research on index structures"):
        pg_app.service.remember(RememberInput(content=text, topic="index", type="fact", keywords=["index"]), ctx)
    worst = as_system(
        postgres_server,
        """
        SELECT MAX(ABS(ts_rank('{0, 0, 0.3, 1}', f.search, q.q, 1)
               - (SELECT COALESCE(SUM(t.rank), 0) FROM agent_memory.fragment_terms t WHERE t.seq = f.seq AND t.term IN ('index', 'databas')) / 2))
        FROM agent_memory.fragments f, (SELECT CAST('''index'' | ''databas''' AS tsquery) AS q) q""",
    )[0][0]
    assert isinstance(worst, float) and worst < 1e-6


def test_the_search_tables_answer_under_row_level_security_through_their_indexes(pg_app: App, postgres_server: PostgresServer) -> None:
    pg_app.service.remember(
        RememberInput(content="a note about ports", topic="t", type="fact", keywords=["port"], tags=["port"]),
        CallContext(agent_id="agent-a"),
    )
    with connect(postgres_server.app_dsn) as conn:
        conn.execute("SELECT set_config('app.current_agent_id', 'agent-a', true)")
        conn.execute("SET LOCAL enable_seqscan = off")
        for sql in (
            "SELECT seq FROM agent_memory.fragment_terms WHERE term = 'port'",
            "SELECT seq FROM agent_memory.fragment_keywords WHERE keyword = 'port'",
            "SELECT seq FROM agent_memory.fragment_tags WHERE tag = ANY('{port}')",
        ):
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql).fetchall())
            assert "Index" in plan and "Seq Scan" not in plan
        assert conn.execute("SELECT COUNT(*) FROM agent_memory.fragment_terms WHERE term = 'port'").fetchone()[0] == 1
        conn.execute("SELECT set_config('app.current_agent_id', 'agent-b', true)")
        assert conn.execute("SELECT COUNT(*) FROM agent_memory.fragment_terms WHERE term = 'port'").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM agent_memory.fragment_tags WHERE tag = 'port'").fetchone()[0] == 0


def _fragment(app: App, content: str, linked_to: list[str] | None = None) -> str:
    inp = RememberInput(content=content, topic="locks", type="fact", linkedTo=linked_to)
    return str(app.service.remember(inp, CallContext()).id)


def _waiting_for_a_lock(server: PostgresServer, count: int = 1, deadline_s: float = 30.0) -> None:
    """Returns once `count` sessions wait for a row lock (a bounded poll: no fixed sleep)."""
    import time

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        rows = owner_query(server, "SELECT count(*) FROM pg_locks WHERE NOT granted")
        if rows[0][0] >= count:
            return
        time.sleep(0.02)
    raise AssertionError("no session started waiting for the lock")


def _deadlock_timeout(server: PostgresServer, value: str | None) -> None:
    """Set (or reset, None) the server-wide deadlock_timeout; every session takes it at its next command."""
    with connect(server.superuser_dsn, autocommit=True) as admin:
        admin.execute(f"ALTER SYSTEM SET deadlock_timeout = '{value}'" if value else "ALTER SYSTEM RESET deadlock_timeout")
        admin.execute("SELECT pg_reload_conf()")


def test_a_forget_that_deadlocks_with_another_writer_is_run_again_and_succeeds(pg_app: App, postgres_server: PostgresServer) -> None:
    import threading

    target = _fragment(pg_app, "the fragment being forgotten")
    neighbour = _fragment(pg_app, "a neighbour that links to it", [target])
    assert pg_app.service.settle()  # the embedding worker's row updates done: only these sessions lock rows
    outcome: dict[str, Any] = {}
    # PostgreSQL looks for a deadlock once, deadlock_timeout after a backend starts waiting, and
    # aborts the backend that finds it. The forget waits first; give it 3 s (the test's side 60 s)
    # so that it is the forget that finds the cycle however slowly this machine runs the steps.
    _deadlock_timeout(postgres_server, "3s")
    with connect(postgres_server.superuser_dsn) as other, contextlib.ExitStack() as restore:
        restore.callback(_deadlock_timeout, postgres_server, None)
        other.execute("SET deadlock_timeout = '60s'")
        other.execute("SELECT 1 FROM agent_memory.fragments WHERE id = %s FOR UPDATE", (neighbour,))

        def forget() -> None:
            try:
                outcome["result"] = pg_app.service.forget(ForgetInput(id=target, force=True, mode=ForgetMode.HARD), CallContext())
            except Exception as exc:  # noqa: BLE001 - the assertion below shows what it was
                outcome["error"] = exc

        worker = threading.Thread(target=forget)
        worker.start()
        _waiting_for_a_lock(postgres_server)  # forget holds `target`, waits for `neighbour`
        # Now lock `target` the other way round: PostgreSQL breaks the cycle by aborting the
        # transaction that waited first, the forget's.
        other.execute("SELECT 1 FROM agent_memory.fragments WHERE id = %s FOR UPDATE", (target,))
        other.commit()
    worker.join(60)
    assert not worker.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].deleted == [target]
    assert owner_query(postgres_server, "SELECT linked_to FROM agent_memory.fragments WHERE id = %s", (neighbour,)) == [([],)]


def test_the_access_flush_skips_rows_another_transaction_holds_and_writes_them_later(pg_app: App, postgres_server: PostgresServer) -> None:
    import threading

    free, held, gone = (_fragment(pg_app, f"statistics row {n}") for n in ("one", "two", "three"))
    # The embedding worker writes each row's vector after the write was acknowledged; a row it is
    # updating is locked too, and the flush would (rightly) skip it: only `other` may hold one here.
    assert pg_app.service.settle()
    store = pg_app.store
    now = datetime.now(UTC)
    with connect(postgres_server.owner_dsn) as other:
        other.execute("SELECT 1 FROM agent_memory.fragments WHERE id = %s FOR UPDATE", (held,))
        store.record_access([free, held, gone], now)
        pg_app.service.forget(ForgetInput(id=gone, force=True), CallContext())
        flusher = threading.Thread(target=store.flush_access)
        flusher.start()
        flusher.join(30)  # it must not wait for the lock (waiting is how it deadlocked)
        assert not flusher.is_alive()
        counts = dict(
            owner_query(postgres_server, "SELECT id, access_count FROM agent_memory.fragments WHERE id = ANY(%s)", ([free, held],))
        )
        assert counts == {free: 1, held: 0}
        other.rollback()
    store.flush_access()
    counts = dict(owner_query(postgres_server, "SELECT id, access_count FROM agent_memory.fragments WHERE id = ANY(%s)", ([free, held],)))
    assert counts == {free: 1, held: 1}
    store.flush_access()  # the deleted row is not carried from flush to flush
    assert counts == dict(
        owner_query(postgres_server, "SELECT id, access_count FROM agent_memory.fragments WHERE id = ANY(%s)", ([free, held],))
    )


def test_a_recall_reads_in_a_few_transactions_not_one_per_store_call(pg_app: App) -> None:
    # Each store call alone is a transaction of its own: a pooled connection, BEGIN, the security
    # context, COMMIT. Recall's reads on its calling thread share a read-only session per phase
    # (Store.reading), and the vector tier's reads on its helper one more.
    service, ctx = pg_app.service, CallContext(agent_id="alice")
    for i in range(30):
        turn = f"turn {i} of a long talk about the harbour, the ferries and the weather at sea"
        service.remember(RememberInput(content=turn, topic="harbour", type="fact"), ctx)
    assert service.settle(30)
    store = pg_app.store
    assert isinstance(store, PostgresStore)
    db = store.db
    opened: list[int] = []
    checkout = db._checkout

    def counted() -> Any:
        opened.append(1)
        return checkout()

    db._checkout = counted  # type: ignore[method-assign]
    try:
        result = service.recall(RecallInput(text="which ferries leave the harbour", limit=5), ctx)
    finally:
        db._checkout = checkout  # type: ignore[method-assign]
    assert result.fragments and all("harbour" in f.content for f in result.fragments)
    assert len(opened) <= 4, f"{len(opened)} transactions for one recall"


def test_a_common_terms_count_is_kept_for_minutes_and_a_rare_one_is_counted_every_time(
    pg_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counting a term common in the scope reads up to a cap of its term rows each time (twice a
    # plan: once to find it common, once further for its IDF); its count is kept, as SQLite keeps
    # FTS5's vocabulary counts. A rare term is counted every time: a write can make it present.
    from test_store_contract import import_fragments

    import memento.storage.postgres_search as search_module
    import memento.storage.postgres_sql as sql_module
    from memento.analysis import query_terms
    from memento.storage.terms import COMMON_TERM_MIN_DOCS

    service, scope = pg_app.service, AgentScope("alice")
    names = ["Alice", "Bob", "Carol", "Dave", "Erin"]
    import_fragments(service, "alice", [f"{names[i % 5]}: the weather on day {i} was mild" for i in range(COMMON_TERM_MIN_DOCS + 100)])
    asked: list[list[str]] = []
    counted = sql_module.df_sql

    def recording(scope_: AgentScope, terms: Any, common: int) -> Any:
        asked.append(list(terms))
        return counted(scope_, terms, common)

    monkeypatch.setattr(search_module, "df_sql", recording)
    terms = query_terms("Where does Alice's mother live in Lisbon?")
    first = pg_app.store.text_search(scope, terms, SearchFilter(), 5)
    assert any("alic" in words for words in asked)
    asked.clear()
    assert pg_app.store.text_search(scope, terms, SearchFilter(), 5) == first
    assert asked and all("alic" not in words for words in asked)  # the common name: from the count kept
    assert all("lisbon" in words for words in asked[:1])  # the rare terms: counted again
    answer = service.remember(
        RememberInput(content="Alice: my mother lives in Lisbon now", topic="family", type="fact"), CallContext(agent_id="alice")
    )
    assert pg_app.store.text_search(scope, terms, SearchFilter(), 5)[0].id == answer.id  # found at once


def test_sequence_probes_walk_the_sequence_index_even_when_costs_favour_a_sort(
    pg_app: App, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Conversational context asks, for each candidate, for the rows written just before and
    after it. Each probe must walk an index in `seq` order and stop at the first visible row; a plan that gathers every row on one side of `seq` and sorts them took ~1.5 s a recall
    at 100k. Here costs are set so that plan looks cheapest, and the probes must still walk; the
    session's own planner settings are unchanged afterwards."""
    ctx = CallContext(agent_id="seq-agent")
    ids = [
        str(pg_app.service.remember(RememberInput(content=f"turn {i} of the talk about boats", topic="talk", type="fact"), ctx).id)
        for i in range(40)
    ]
    with connect(postgres_server.owner_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE agent_memory.fragments")
    plans: list[str] = []
    real_execute = psycopg.Cursor.execute

    def explained(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        if isinstance(query, str) and "JOIN LATERAL" in query and "n.seq" in query:
            real_execute(self, "EXPLAIN " + query, params, **kw)
            plans.append("\n".join(str(next(iter(r.values()))) for r in self.fetchall()))
        return real_execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", explained)
    store = pg_app.store
    scope = AgentScope(agent_id="seq-agent")
    with store.db.tx("seq-agent") as cur:  # type: ignore[attr-defined]
        # An ordered index walk priced as dear as possible, a sort of what a scan gathers cheap.
        cur.execute("SET LOCAL random_page_cost = 1000")
        cur.execute("SET LOCAL cpu_operator_cost = 0.000001")
        cur.execute("SET LOCAL enable_seqscan = off")
        for steps in (1, 2):
            found = store.sequence_neighbours(scope, [ids[10], ids[20]], SearchFilter(), timedelta(hours=1), steps)
            assert found[ids[10]].previous == ids[9] and found[ids[10]].next == ids[11]
            assert found[ids[20]].previous == ids[19] and found[ids[20]].next == ids[21]
        cur.execute("SELECT current_setting('enable_sort') AS sort")
        assert cur.fetchone()["sort"] == "on"
    assert len(plans) == 2
    for probes, plan in zip((2, 4), plans, strict=True):
        # Each probe an ordered index walk (which index is the planner's choice by selectivity).
        assert "Sort" not in plan and "Bitmap Heap Scan on fragments n" not in plan, plan
        assert sum(line.strip().startswith("->  Index Scan") for line in plan.splitlines()) == probes, plan


def test_a_vector_search_leaves_the_planner_settings_of_its_transaction_as_they_were(pg_app: App) -> None:
    """An unfiltered vector search rules sorting out for its own statement only: the statements
    a read session runs after it (text scores, the ranking's reads) plan as configured."""
    ctx = CallContext(agent_id="vec-agent")
    pg_app.service.remember(RememberInput(content="the harbour opens at dawn", topic="t", type="fact"), ctx)
    store = pg_app.store
    query = np.ones(256, dtype=np.float32) / 16.0
    with store.db.tx("vec-agent") as cur:  # type: ignore[attr-defined]
        store.vector_search(AgentScope(agent_id="vec-agent"), query, SearchFilter(), 10)
        cur.execute("SELECT current_setting('enable_sort') AS sort")
        assert cur.fetchone()["sort"] == "on"
        cur.execute("SET LOCAL enable_sort = off")
        store.vector_search(AgentScope(agent_id="vec-agent"), query, SearchFilter(topic="t"), 10)
        cur.execute("SELECT current_setting('enable_sort') AS sort")
        assert cur.fetchone()["sort"] == "off"


def test_a_count_with_no_selective_filter_is_an_index_only_scan_under_row_level_security(
    pg_app: App, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing's total, memory_stats and /health count every live row of a namespace. The index
    of the columns they and the isolation policy test (migration 0031) lets PostgreSQL count
    without reading the rows; expired, deleted and other sessions' rows still do not count, and a
    filter on another column counts as before."""
    ctx = CallContext(agent_id="count-agent")
    for i in range(8):
        pg_app.service.remember(RememberInput(content=f"counted note {i} about the quay", topic="t", type="fact"), ctx)
    pg_app.service.remember(RememberInput(content="someone else's note", topic="t", type="fact"), CallContext(agent_id="other"))
    with connect(postgres_server.owner_dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('app.current_agent_id', 'system', false)")
        conn.execute("UPDATE agent_memory.fragments SET expires_at = now() - interval '1 day' WHERE content LIKE 'counted note 1 %'")
        conn.execute(
            "UPDATE agent_memory.fragments SET expires_at = now() - interval '1 day', pinned = true WHERE content LIKE 'counted note 2 %'"
        )
        conn.execute("UPDATE agent_memory.fragments SET deleted_at = now() WHERE content LIKE 'counted note 3 %'")
        conn.execute("UPDATE agent_memory.fragments SET session_id = 's1' WHERE content LIKE 'counted note 4 %'")
        conn.execute("UPDATE agent_memory.fragments SET type = 'decision' WHERE content LIKE 'counted note 5 %'")
        conn.execute("VACUUM (ANALYZE) agent_memory.fragments")  # the visibility map an index-only scan needs
    plans: list[str] = []
    real_execute = psycopg.Cursor.execute

    def explained(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        if isinstance(query, str) and query.startswith("SELECT COUNT(*) AS n") and "agent_memory.fragments f WHERE" in query:
            real_execute(self, "EXPLAIN " + query, params, **kw)
            plans.append("\n".join(str(next(iter(r.values()))) for r in self.fetchall()))
        return real_execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", explained)
    store, scope = pg_app.store, AgentScope(agent_id="count-agent")
    with store.db.tx("count-agent") as cur:  # type: ignore[attr-defined]
        cur.execute("SET LOCAL enable_seqscan = off")  # a store this small would be read whole: show what else is possible
        cur.execute("SET LOCAL enable_bitmapscan = off")
        assert store.count(scope, SearchFilter()) == 5  # 8, less the expired, deleted and session rows (pinned 2 stays)
        assert store.count(scope, SearchFilter(session_id="s1")) == 6
        assert store.count(scope, SearchFilter(pinned=False)) == 4
        assert store.count(scope, SearchFilter(type=FragmentType.DECISION)) == 1
    assert len(plans) == 4
    for plan in plans[:3]:
        assert "Index Only Scan using fragments_live_count" in plan, plan
    assert "fragments_live_count" not in plans[3], plans[3]
    assert store.count(AgentScope(agent_id="stranger"), SearchFilter()) == 0


def test_the_scope_size_a_full_text_recall_weighs_terms_by_is_an_index_only_scan(
    pg_app: App, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full-text tier sizes the namespace (its common-term rule) on a recall's first call and
    again every few seconds while recalls run: from the index of live rows (migration 0031), not a
    scan of the table (at a million memories ~125 ms instead of ~480 on three processes), with the
    shared pool's visible rows counted as before and expired, deleted and private ones not."""
    ctx = CallContext(agent_id="size-agent")
    for i in range(6):
        pg_app.service.remember(RememberInput(content=f"sized note {i} about the quay", topic="t", type="fact"), ctx)
    pg_app.service.remember(RememberInput(content="a note for everyone", topic="t", type="fact"), CallContext())  # the shared pool
    pg_app.service.remember(RememberInput(content="someone else's note", topic="t", type="fact"), CallContext(agent_id="other"))
    with connect(postgres_server.owner_dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('app.current_agent_id', 'system', false)")
        conn.execute("UPDATE agent_memory.fragments SET expires_at = now() - interval '1 day' WHERE content LIKE 'sized note 1 %'")
        conn.execute("UPDATE agent_memory.fragments SET deleted_at = now() WHERE content LIKE 'sized note 2 %'")
        conn.execute("VACUUM (ANALYZE) agent_memory.fragments")  # the visibility map an index-only scan needs
    store, scope = pg_app.store, AgentScope(agent_id="size-agent")
    search = store.search  # type: ignore[attr-defined]
    with store.db.tx("size-agent") as cur:  # type: ignore[attr-defined]
        cur.execute("SET LOCAL enable_seqscan = off")  # a store this small would be read whole: show what else is possible
        cur.execute("SET LOCAL enable_bitmapscan = off")
        seen: list[tuple[str, Any]] = []
        real_execute = psycopg.Cursor.execute

        def recorded(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            if isinstance(query, str) and query.startswith("SELECT COUNT(*) AS n FROM agent_memory.fragments f"):
                seen.append((query, params))
            return real_execute(self, query, params, **kw)

        monkeypatch.setattr(psycopg.Cursor, "execute", recorded)
        search.sizes.clear()
        size = search.scope_size(cur, scope)
        monkeypatch.undo()
        ((query, params),) = seen
        cur.execute("EXPLAIN " + query, params)
        plan = "\n".join(str(next(iter(r.values()))) for r in cur.fetchall())
        assert "Index Only Scan using fragments_live_count" in plan, plan
        cur.execute(query.replace(" AND f.pinned IN (true, false)", ""), params)  # the rows themselves
        assert size == cur.fetchone()["n"] == 5  # 6 of its own less the expired and the deleted, and the pool's one
