"""A filtered listing on SQLite walks the namespace's index in the listing's order a bounded way,
and when the walk holds too few rows that pass, sorts the rows that pass instead (from whichever
index the planner takes for the filter: its statistics decide, so only the walk's plan is
asserted here). These tests read SQLite's plans for the statements a listing runs, and the tag
index (migration 0029) a tag filter reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from migration_helpers import sqlite_store_before
from sqlite_helpers import reopened_store

from memento.app import App
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, FragmentType, RecallInput, RecordInput, RememberInput
from memento.storage.protocol import SearchFilter
from memento.storage.sqlite import SQLiteStore

EMBEDDER = HashEmbedder(64)
ALICE = AgentScope("alice")


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    notes = (
        RememberInput(
            content=f"note {i} on the harbour",
            topic=f"topic-{i % 9}",
            type=FragmentType.DECISION if i % 500 == 7 else FragmentType.FACT,
            tags=["harbour", *(["rare"] if i % 500 == 7 else [])],
            record=RecordInput(pinned=True) if i % 500 == 11 else None,
        )
        for i in range(1_500)
    )
    with reopened_store(tmp_path / "l.db", EMBEDDER, notes) as app:
        yield app


def plans(app: App, filt: SearchFilter, limit: int) -> tuple[list[str], dict[str, str]]:
    """The listing's ids and, for each seq-choosing statement it ran, SQLite's plan for it."""
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        ids = [f.id for f in app.store.list_fragments(ALICE, filt, limit)]
    finally:
        conn.set_trace_callback(None)
    chosen = [s for s in statements if "FROM fragments" in s and not s.startswith("SELECT COUNT(*)")]
    return ids, {s: " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {s}")) for s in chosen}


def test_a_filter_most_rows_pass_is_answered_from_the_ordered_walk(app: App) -> None:
    ids, planned = plans(app, SearchFilter(type=FragmentType.FACT), 50)
    assert len(ids) == 50
    walks = [p for s, p in planned.items() if "fragments w " in s]
    assert walks and all("fragments_listing" in p for p in walks), planned
    assert not any("ORDER BY +f." in s for s in planned), planned  # nothing sorted


@pytest.mark.parametrize("filt", [SearchFilter(source="nowhere"), SearchFilter(type=FragmentType.DECISION)])
def test_a_filter_few_rows_pass_is_sorted_after_a_bounded_walk(app: App, filt: SearchFilter) -> None:
    ids, planned = plans(app, filt, 50)
    expected = [f.id for f in app.store.list_fragments(ALICE, SearchFilter(), 2_000) if filt.matches(f)][:50]
    assert ids == expected
    walks = [p for s, p in planned.items() if "fragments w " in s]
    sorts = [p for s, p in planned.items() if "ORDER BY +f." in s]
    assert walks and all("fragments_listing" in p for p in walks), planned
    # the sort is not a walk of the listing index in its order (which reads the whole namespace)
    assert sorts and all("TEMP B-TREE FOR ORDER BY" in p for p in sorts), planned


@pytest.mark.parametrize(
    ("filt", "index"),
    [
        (SearchFilter(tags_all=("rare",)), "SEARCH t USING PRIMARY KEY (tag=?)"),
        (SearchFilter(tags_any=("rare", "absent")), "SEARCH t USING PRIMARY KEY (tag=?)"),
        (SearchFilter(pinned=True), "fragments_pinned"),
    ],
)
def test_a_rare_tag_and_the_pinned_memories_are_found_from_their_own_index(app: App, filt: SearchFilter, index: str) -> None:
    """Few memories carry the tag (3 of 1,500) or are pinned: the bounded walk falls short, and the
    sort and the count start from the tag's entries or the partial index of pinned rows, not from
    a read of the whole namespace."""
    ids, planned = plans(app, filt, 50)
    expected = [f.id for f in app.store.list_fragments(ALICE, SearchFilter(), 2_000) if filt.matches(f)]
    assert ids == expected and len(ids) == 3
    sorts = [p for s, p in planned.items() if "ORDER BY +f." in s]
    assert sorts and all(index in p for p in sorts), planned
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    counted: list[str] = []
    conn.set_trace_callback(counted.append)
    try:
        assert app.store.count(ALICE, filt) == 3
    finally:
        conn.set_trace_callback(None)
    count = next(s for s in counted if "FROM fragments f" in s)
    assert index in " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {count}")), count


def test_a_tag_most_memories_carry_is_tested_row_by_row_in_the_ordered_walk(app: App) -> None:
    ids, planned = plans(app, SearchFilter(tags_all=("harbour",)), 50)
    assert len(ids) == 50
    assert not any("ORDER BY +f." in s for s in planned), planned  # the walk answers: nothing sorted
    assert all("f.seq IN (SELECT t.seq" not in s for s in planned), planned  # no set of 1,500 tagged rows built


def test_migrations_0029_0030_index_the_tags_and_references_a_store_holds_and_triggers_keep_them(tmp_path: Path) -> None:
    """A store as the release before 0029 left it: its memories' tags are in fragment_tags and
    their linked_to in fragment_references after the upgrade; inserts, changes and deletes (by
    any statement) keep them in step."""
    path = tmp_path / "old.db"
    conn = sqlite_store_before(path, "0029")
    for n, tags in enumerate(['["ops","db"]', "[]", '["ops"]', '["ops","ops"]']):
        conn.execute(
            "INSERT INTO fragments (id, content, topic, type, importance, content_hash, created_at, ttl_tier, tags, pinned, linked_to)"
            " VALUES (?, ?, 't', 'fact', 0.5, ?, '2026-01-01T00:00:00.000000+00:00', 'warm', ?, ?, ?)",
            (f"f{n}", f"text {n}", f"h{n}", tags, n == 2, '["f0","f1"]' if n == 3 else '["f0"]' if n == 2 else "[]"),
        )
    conn.close()

    def entries(store: SQLiteStore) -> list[tuple[str, str]]:
        rows = store.db.reader().execute("SELECT t.tag, f.id FROM fragment_tags t JOIN fragments f ON f.seq = t.seq ORDER BY 1, 2")
        return [tuple(r) for r in rows]

    store = SQLiteStore(path, embedding_model=None, dimensions=None)
    try:
        assert entries(store) == [("db", "f0"), ("ops", "f0"), ("ops", "f2"), ("ops", "f3")]
        refs = "SELECT r.target, f.id FROM fragment_references r JOIN fragments f ON f.seq = r.seq ORDER BY 1, 2"
        assert [tuple(r) for r in store.db.reader().execute(refs)] == [("f0", "f2"), ("f0", "f3"), ("f1", "f3")]
        system = AgentScope("system")
        assert {f.id for f in store.recent(system, SearchFilter(tags_all=("ops",)), 10)} == {"f0", "f2", "f3"}
        assert [f.id for f in store.recent(system, SearchFilter(pinned=True), 10)] == ["f2"]
        with store.db.tx() as tx:
            tx.execute("UPDATE fragments SET tags = '[\"web\"]' WHERE id = 'f0'")
            tx.execute("UPDATE fragments SET tags = '[\"db\"]' WHERE id = 'f1'")
            tx.execute("DELETE FROM fragments WHERE id = 'f3'")
            tx.execute("UPDATE fragments SET topic = 'moved' WHERE id = 'f2'")  # tags untouched
        assert entries(store) == [("db", "f1"), ("ops", "f2"), ("web", "f0")]
        assert store.count(system, SearchFilter(tags_any=("db", "web"))) == 2
        assert [tuple(r) for r in store.db.reader().execute(refs)] == [("f0", "f2")]  # f3 deleted
        assert store.delete(system, ["f0"]) == ["f0"]
        assert store.get_many(system, ["f2"])[0].linked_to == [] and list(store.db.reader().execute(refs)) == []
    finally:
        store.close()


def counted(app: App, scope: AgentScope, filt: SearchFilter) -> tuple[int, str]:
    """`store.count` and SQLite's plan for the statement it ran."""
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        n = app.store.count(scope, filt)
    finally:
        conn.set_trace_callback(None)
    (statement,) = [s for s in statements if "FROM fragments f" in s]
    return n, " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {statement}"))


def _hide(app: App) -> None:
    """Of the 1,500 notes: 10 past their expiry (and a pinned one, which stays), 5 deleted, 7 in a
    session's working memory."""
    with app.store.db.tx() as tx:  # type: ignore[attr-defined]
        for i in [*range(0, 1_500, 150), 11]:
            tx.execute(
                "UPDATE fragments SET expires_at = '2000-01-01T00:00:00.000000+00:00' WHERE content = ?", (f"note {i} on the harbour",)
            )
        for i in range(1, 6):
            tx.execute(
                "UPDATE fragments SET deleted_at = '2026-01-01T00:00:00.000000+00:00' WHERE content = ?", (f"note {i} on the harbour",)
            )
        for i in range(20, 27):
            tx.execute("UPDATE fragments SET session_id = 's1' WHERE content = ?", (f"note {i} on the harbour",))


@pytest.mark.parametrize(
    ("filt", "expected"),
    [
        (SearchFilter(), 1_478),
        (SearchFilter(session_id="s1"), 1_485),
        (SearchFilter(session_id="s1", only_session=True), 7),
        (SearchFilter(all_sessions=True), 1_485),
        (SearchFilter(owner="alice"), 1_478),
        (SearchFilter(pinned=False), 1_475),
    ],
)
def test_a_count_with_no_selective_filter_reads_the_index_of_live_rows_alone(app: App, filt: SearchFilter, expected: int) -> None:
    """A listing's total, memory_stats and /health count every live row of a namespace: from the
    index of the columns they test (migration 0031), without reading the rows (~45 ms instead of
    ~220 at a million memories). Expired, deleted and other sessions' rows still do not count."""
    _hide(app)
    n, plan = counted(app, ALICE, filt)
    assert n == expected
    assert "COVERING INDEX fragments_live_count" in plan, plan
    n, plan = counted(app, AgentScope("bob"), filt)  # another namespace: nothing of alice's
    assert n == 0 and "fragments_live_count" in plan, plan


@pytest.mark.parametrize(
    ("filt", "expected"),
    [(SearchFilter(type=FragmentType.DECISION), 3), (SearchFilter(pinned=True), 3), (SearchFilter(tags_all=("rare",)), 3)],
)
def test_a_selective_filter_counts_from_its_own_index_and_only_counts_take_that_of_live_rows(
    app: App, filt: SearchFilter, expected: int
) -> None:
    """The index of live rows is named by counts alone: a filter on a column it lacks counts as
    before, and no listing, recall or look-up plans with it."""
    n, plan = counted(app, ALICE, filt)
    assert n == expected and "fragments_live_count" not in plan, plan
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        app.store.list_fragments(ALICE, SearchFilter(), 50)
        app.store.list_fragments(ALICE, filt, 50)
        app.store.recent(ALICE, SearchFilter(), 20)
        app.service.recall(RecallInput(query="note on the harbour", limit=10), CallContext(agent_id="alice"))
    finally:
        conn.set_trace_callback(None)
    reads = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH")) and "fragments" in s]
    counts = [s for s in reads if s.startswith("SELECT COUNT(*) FROM fragments f WHERE")]  # the recall's scope size
    assert len(reads) - len(counts) > 5
    for s in reads:
        plan = " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {s}"))
        assert ("fragments_live_count" in plan) == (s in counts), (s, plan)


def test_the_scope_size_a_full_text_recall_weighs_terms_by_is_counted_from_the_index_of_live_rows(app: App) -> None:
    """The full-text tier sizes the namespace (its common-term rule) on a recall's first call and
    again every few seconds while recalls run: from the index of live rows alone, not the rows (at
    a million memories ~45 ms instead of ~180 warm, 0.7 s instead of 4.4 cold), and the same
    number of memories as counting the rows."""
    _hide(app)
    store = app.store
    conn = store.db.reader()  # type: ignore[attr-defined]
    for scope, whole in ((ALICE, False), (ALICE, True), (AgentScope("bob"), False)):
        store.search.sizes.clear()  # type: ignore[attr-defined]
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            size = store.search.scope_size(scope, whole)  # type: ignore[attr-defined]
        finally:
            conn.set_trace_callback(None)
        (count,) = [s for s in statements if s.startswith("SELECT COUNT(*)")]
        plan = " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {count}"))
        assert "COVERING INDEX fragments_live_count" in plan, plan
        rows = conn.execute(count.replace(" AND f.pinned IN (0, 1)", "")).fetchone()[0]  # the rows themselves
        # alice: 1,500 less 10 expired (the pinned one stays) and 5 deleted, sessions' rows included
        assert size == rows == (1_485 if scope is ALICE else 0), (scope, whole)


def test_migration_0031_indexes_the_live_rows_of_a_store_that_holds_memories(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite_store_before(path, "0031")
    for n in range(3):
        conn.execute(
            "INSERT INTO fragments (id, agent_id, content, topic, type, importance, content_hash, created_at, ttl_tier, expires_at)"
            " VALUES (?, 'alice', ?, 't', 'fact', 0.5, ?, '2026-01-01T00:00:00.000000+00:00', 'warm', ?)",
            (f"f{n}", f"text {n}", f"h{n}", "2000-01-01T00:00:00.000000+00:00" if n == 2 else None),
        )
    conn.close()
    store = SQLiteStore(path, embedding_model=None, dimensions=None)
    try:
        assert store.db.reader().execute("SELECT 1 FROM sqlite_master WHERE name = 'fragments_live_count'").fetchone()
        assert store.count(ALICE, SearchFilter()) == 2
    finally:
        store.close()
