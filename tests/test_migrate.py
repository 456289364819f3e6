"""`memento migrate`: a lossless, resumable, idempotent copy SQLite → PostgreSQL → SQLite."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Clock
from pg_harness import APP_ROLE, PostgresServer

from memento.app import App, build_app
from memento.cli import main
from memento.embeddings.hashing import HashEmbedder
from memento.errors import InvalidArgument, Unavailable
from memento.graph import NewEntity, NewRelation
from memento.migrate import TextProgress, migrate
from memento.models import (
    AgentScope,
    AmendInput,
    CallContext,
    FeedbackEvent,
    FeedbackInput,
    FragmentType,
    LinkInput,
    MemorySystem,
    PrivacyScope,
    RecallInput,
    RecordInput,
    ReflectInput,
    RememberInput,
    ToolFeedbackInput,
)
from memento.settings import Settings
from memento.storage.protocol import (
    BULK_KEYS,
    BULK_TABLES,
    REINFORCEMENT,
    BulkStore,
    EvaluationOutcome,
    NewLinkage,
    NewSkip,
    SearchFilter,
    StoredIdentity,
    VersionRecord,
)
from memento.storage.sqlite import SQLiteStore
from memento.storage.workmem import WorkItem

QUERIES = ["database connection pool", "deploy rollback", "pgbouncer prepared statements", "coffee preference"]


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def open_app(url: str, clock: Clock) -> App:
    return build_app(Settings(DATABASE_URL=url, EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256), clock=clock)


def build_source(path: Path, clock: Clock) -> Path:
    """A store with several agents, working memory, links, versions, feedback and accessed rows."""
    app = open_app(sqlite_url(path), clock)
    s = app.service
    try:
        ctx = CallContext(session_id="s-1")
        ids: dict[str, str] = {}
        for agent in ("default", "agent-a", "agent-b"):
            actx = CallContext(session_id=f"s-{agent}")
            for i, (content, topic, type_) in enumerate(
                [
                    ("the database connection pool is capped at 20", "database", "fact"),
                    ("deploy rollback uses the blue-green switch", "deployment", "procedure"),
                    ("prepared statements broke under pgbouncer", "database", "error"),
                    ("the user prefers coffee over tea", "people", "preference"),
                    ("비밀번호 정책은 분기마다 바뀐다", "security", "decision"),
                ]
            ):
                clock.now = datetime(2026, 1, 1, 12, i, tzinfo=UTC)
                r = s.remember(
                    RememberInput(
                        content=f"{content} ({agent})",
                        topic=topic,
                        type=type_,
                        agentId=agent,
                        keywords=None if i % 2 else [topic, "shared"],
                    ),
                    actx,
                )
                ids[f"{agent}-{i}"] = r.id
            s.remember(
                RememberInput(
                    content=f"scratch note for {agent}: database pool draft",
                    topic="scratch",
                    type="episode",
                    scope="session",
                    agentId=agent,
                ),
                actx,
            )
            s.link(LinkInput(fromId=ids[f"{agent}-2"], toId=ids[f"{agent}-0"], relationType="caused_by", agentId=agent), actx)
            s.link(LinkInput(fromId=ids[f"{agent}-2"], toId=ids[f"{agent}-1"], relationType="resolved_by", agentId=agent), actx)
        shared = s.remember(
            RememberInput(
                content="the shared record survives a copy",
                topic="record",
                type="learning",
                agentId="agent-a",
                tags=["copy", "record"],
                record=RecordInput(
                    confidence=0.6,
                    context="migration test",
                    metadata={"n": 1, "nested": {"k": [1, 2]}},
                    expiresAt=datetime(2099, 1, 1, tzinfo=UTC),
                    pinned=True,
                    memorySystem=MemorySystem.PROCEDURAL,
                    privacyScope=PrivacyScope.PRIVATE,
                    originTrace={"from": "test"},
                ),
            ),
            ctx,
        ).id
        gone = s.remember(RememberInput(content="a soft-forgotten memory", topic="record", type="observation", agentId="agent-a"), ctx).id
        s.store.soft_delete(AgentScope("agent-a"), [gone], datetime(2026, 1, 1, 13, 0, tzinfo=UTC))
        ids["shared"] = shared
        queued = app.store.claim_evaluations(clock(), clock(), 100)  # the evaluator's judgement of it (migration 0020)
        (job,) = [j for j in queued if j.fragment_id == shared]
        assert app.store.finish_evaluation(job, EvaluationOutcome(0.62, {"utility": 0.62}), clock())
        clock.now = datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
        s.amend(
            AmendInput(id=ids["agent-a-0"], content="the database connection pool is capped at 40", importance=0.9, agentId="agent-a"), ctx
        )
        s.amend(AmendInput(id=ids["agent-a-0"], keywords=["database", "pool"], agentId="agent-a"), ctx)
        s.amend(AmendInput(id=ids["agent-b-1"], content="deploy rollback now uses canaries", supersedes=True, agentId="agent-b"), ctx)
        s.tool_feedback(ToolFeedbackInput(toolName="recall", relevant=True, sufficient=False, suggestion="more", sessionId="s-1"), ctx)
        s.tool_feedback(ToolFeedbackInput(toolName="context", relevant=False, sufficient=True, triggerType="sampled"), ctx)
        s.feedback(FeedbackInput(id=shared, event=FeedbackEvent.HELPFUL, score=0.7, note="the right one", agentId="agent-a"), ctx)
        s.feedback(FeedbackInput(id=ids["default-0"], event=FeedbackEvent.NEGLECTED, agentId="agent-b"), ctx)  # a pool memory
        s.reflect(
            ReflectInput(
                summary="moved billing to Postgres",
                sessionId="s-9",
                agentId="agent-a",
                taskEffectiveness={"overall_success": True, "tool_highlights": ["recall: found it"], "tool_pain_points": ["slow"]},
            ),
            ctx,
        )
        add_graph(app, ids["agent-a-0"], shared, clock.now)
        linkages = [NewLinkage("memory", ids["agent-a-1"], "supports"), NewLinkage("file", "notes/pool.md"), NewLinkage("item", "item-1")]
        app.store.add_linkages(AgentScope("agent-a"), shared, linkages, clock.now)  # seed 003
        add_protocol_records(app, clock.now)
        clock.now = datetime(2026, 1, 3, 9, 0, tzinfo=UTC)
        for agent in ("default", "agent-a", "agent-b"):
            s.recall(RecallInput(text="database connection pool", agentId=agent), CallContext(session_id=f"s-{agent}"))
    finally:
        app.close()
    return path


def add_protocol_records(app: App, now: datetime) -> None:
    """Seed 003's skip entries (one with a vector) and identity snapshots of two agents."""
    a, b = AgentScope("agent-a"), AgentScope("agent-b")
    vector = HashEmbedder(256).embed_query("aurora alerts. too cloudy")
    app.store.add_skip(a, NewSkip("skip-a", "aurora alerts", "too cloudy", datetime(2099, 1, 1, tzinfo=UTC), vector, "hash:v1:256"), now)
    app.store.add_skip(b, NewSkip("skip-b", "tide tables", "not sailing", datetime(2099, 1, 1, tzinfo=UTC)), now)
    app.store.add_identity(a, StoredIdentity("idn-a1", "agent-a", "I am agent A.", "manual", 0, now))
    app.store.add_identity(a, StoredIdentity("idn-a2", "agent-a", "I decided: copy everything.", "crystallized", 3, now))


def add_graph(app: App, fragment: str, shared: str, now: datetime) -> None:
    """Agent-a's entity graph (an embedded entity, a relation, two associations) and a merge's version row."""
    scope = AgentScope("agent-a")
    (alice, _), (acme, _) = app.store.upsert_entities(
        scope,
        [
            NewEntity("Alice", "person", "an engineer", {"team": "core"}, embedding=HashEmbedder(256).embed_query("Alice")),
            NewEntity("Acme", "organization"),
        ],
        now,
    )
    app.store.upsert_relations(scope, [NewRelation(alice.id, acme.id, "works_at", 0.8, 0.9, "since 2020", {"k": 1})], now)
    app.store.link_entities(scope, [(alice.id, fragment, 0.9), (acme.id, shared, 0.5)], now)
    merged = VersionRecord(
        "an absorbed duplicate", "record", ("copy",), FragmentType.LEARNING, 0.4, "merge", 0.3, {"m": 1}, ("x",), "merged:frag-x"
    )
    app.store.add_version(scope, shared, merged, now)
    # 003's working memory: a workspace record, its sections (one written), an item
    workspace = AgentScope("agent-a:proj")
    app.store.open_workspace(workspace, "proj", ["active_work", "session_notes"], now)
    app.store.put_section(workspace, "session_notes", "- the copy keeps notes", now, 50)
    item = WorkItem("item-0123456789abcdef", "agent-a:proj", "waiting_for", "Vendor reply", "", "paused", 4, ("ops",), "ping", now, now)
    app.store.add_item(workspace, item)


def dump(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every copied table as normalised rows (timestamps in UTC ISO, vectors as tuples, no seq)."""
    if url.startswith("sqlite:///"):
        store: Any = SQLiteStore(Path(url.removeprefix("sqlite:///")), embedding_model=None, dimensions=None)
    else:
        from memento.storage.postgres import PostgresStore

        store = PostgresStore(url, embedding_model=None, dimensions=None)
    try:
        out: dict[str, list[dict[str, Any]]] = {}
        for table in BULK_TABLES:
            key = BULK_KEYS[table]
            rows, after = [], 0
            while batch := store.export_rows(table, after, 1000):
                after = int(batch[-1][key])
                rows.extend(batch)
            out[table] = [_normalise(r) for r in rows]
        return out
    finally:
        store.close()


def _normalise(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in row.items():
        if name == "seq":
            continue
        if isinstance(value, datetime):
            value = value.astimezone(UTC).isoformat()
        elif isinstance(value, np.ndarray):
            value = tuple(float(v) for v in value)
        out[name] = value
    return out


def recall_ids(url: str, clock: Clock) -> dict[str, Any]:
    """Store-level hits (text, keyword, vector; all agents) and service recall per agent."""
    app = open_app(url, clock)
    try:
        system, everything = AgentScope("system"), SearchFilter(session_id="s-agent-a")
        embedder = HashEmbedder(256)
        found: dict[str, Any] = {}
        for q in QUERIES:
            from memento.analysis import index_terms

            found[f"text:{q}"] = [h.id for h in app.store.text_search(system, index_terms(q), everything, 20)]
            found[f"keyword:{q}"] = [h.id for h in app.store.keyword_search(system, q.split(), everything, 20)]
            vector = embedder.embed_query(q)
            # equal similarities may come in another order: compare (similarity, id) pairs
            hits = app.store.vector_search(system, vector, everything, 20)
            found[f"vector:{q}"] = sorted((-round(h.score, 5), h.id) for h in hits)
            for agent in ("default", "agent-a", "agent-b"):
                result = app.service.recall(RecallInput(text=q, agentId=agent, sessionId=f"s-{agent}", limit=10), CallContext())
                found[f"recall:{agent}:{q}"] = [f.id for f in result.fragments]
        return found
    finally:
        app.close()


@pytest.fixture
def pg(postgres_server: PostgresServer) -> Iterator[PostgresServer]:
    postgres_server.reset()
    yield postgres_server
    postgres_server.reset()


def test_sqlite_to_postgres_to_sqlite_is_lossless(tmp_path: Path, pg: PostgresServer) -> None:
    clock = Clock()
    src = sqlite_url(build_source(tmp_path / "src.db", clock))
    dst = sqlite_url(tmp_path / "dst.db")
    before = dump(src)
    assert {len(before[t]) > 0 for t in BULK_TABLES} == {True}
    assert len({r["agent_id"] for r in before["fragments"]}) == 3
    assert any(r["session_id"] for r in before["fragments"]) and any(r["access_count"] for r in before["fragments"])
    assert len(before["fragment_versions"]) >= 3 and all(r["embedding"] is not None for r in before["fragments"] if r["deleted_at"] is None)
    assert {r["relation_type"] for r in before["fragment_links"]} >= {"caused_by", "resolved_by", "superseded_by"}
    shared = next(r for r in before["fragments"] if r["content"] == "the shared record survives a copy")
    assert (shared["tags"], shared["pinned"], shared["memory_system"]) == (["copy", "record"], True, "procedural")
    assert shared["access_count"] and shared["confidence"] == pytest.approx(0.6 + REINFORCEMENT * shared["access_count"])  # recalled
    assert shared["metadata"] == {"n": 1, "nested": {"k": [1, 2]}} and shared["origin_trace"] == {"from": "test"}
    assert shared["judged_utility"] == 0.62 and sum(r["judged_utility"] is not None for r in before["fragments"]) == 1
    assert sum(r["deleted_at"] is not None for r in before["fragments"]) == 1
    # the entity graph: entities without their vectors (the target re-embeds), relations, associations
    assert [(r["name"], r["entity_type"], r["metadata"]) for r in before["entities"]] == [
        ("Alice", "person", {"team": "core"}),
        ("Acme", "organization", {}),
    ]
    assert "embedding" not in before["entities"][0] and "seq" not in before["entities"][0]
    assert [(r["relation_type"], r["strength"], r["confidence"], r["context"], r["metadata"]) for r in before["relations"]] == [
        ("works_at", 0.8, 0.9, "since 2020", {"k": 1})
    ]
    assert sorted(r["relevance"] for r in before["entity_memories"]) == [0.5, 0.9]
    assert [(r["agent_id"], r["tags"], r["priority"]) for r in before["working_memory_items"]] == [("agent-a:proj", ["ops"], 4)]
    assert [r["section"] for r in before["working_memory_sections"]] == ["active_work", "session_notes"]
    merged = [r for r in before["fragment_versions"] if r["note"] is not None]
    assert [(r["note"], r["confidence"], r["metadata"], r["tags"]) for r in merged] == [("merged:frag-x", 0.3, {"m": 1}, ["x"])]
    amended = next(r for r in before["fragment_versions"] if r["content"] == "the database connection pool is capped at 20 (agent-a)")
    assert (amended["confidence"], amended["tags"], amended["metadata"]) == (1.0, [], {})

    stream = io.StringIO()
    first = migrate(src, pg.owner_dsn, batch_size=4, progress=TextProgress(stream))
    assert first.dimensions == 256 and first.embedding_model == "hash:v1:256"
    assert {t: r.copied for t, r in first.tables.items()} == {t: len(before[t]) for t in BULK_TABLES}
    assert "fragments" in stream.getvalue() and f"{len(before['fragments'])}/{len(before['fragments'])}" in stream.getvalue()
    from memento.storage.postgres_schema import migrate as migrate_schema

    migrate_schema(pg.owner_dsn, app_role=APP_ROLE)  # what the application's start-up does: grant its role DML
    assert dump(pg.app_dsn) == before  # the application role, as `system`, sees every agent's rows

    # PostgreSQL → SQLite, read through the application role (row-level security applies)
    migrate(pg.app_dsn, dst, batch_size=5, progress=None)
    assert dump(dst) == before

    expected = recall_ids(src, clock)
    assert any(expected[k] for k in expected if k.startswith("vector:"))
    assert any(expected[k] for k in expected if k.startswith("text:"))
    assert recall_ids(dst, clock) == expected

    # the copied stores keep working: new rows get fresh ids past the copied ones
    app = build_app(
        Settings(DATABASE_URL=pg.app_dsn, DATABASE_MIGRATION_URL=pg.owner_dsn, EMBEDDING_PROVIDER="hash"),
        embedder=HashEmbedder(256),
        clock=clock,
    )
    try:
        fid = app.service.tool_feedback(ToolFeedbackInput(toolName="recall", relevant=True, sufficient=True), CallContext()).id
        assert fid == max(r["id"] for r in before["tool_feedback"]) + 1
        hits = app.service.recall(RecallInput(text="pgbouncer prepared statements", agentId="agent-a"), CallContext())
        assert hits.fragments
        agent_a = AgentScope("agent-a")
        assert app.store.graph_counts(agent_a) == {"entities": 2, "relations": 1, "links": 2}
        assert app.store.entity_vectors(agent_a) == []  # not copied: re-embedded by the target
        ((carol, created),) = app.store.upsert_entities(agent_a, [NewEntity("Carol")], clock.now)  # fresh seq past the copied rows
        assert created and app.store.list_entities(agent_a, entity_type=None, name_contains=None, limit=9, offset=0)[1] == 3
    finally:
        app.close()


def _crash_after(monkeypatch: pytest.MonkeyPatch, cls: type[BulkStore], calls: int) -> None:
    original = cls.import_rows
    seen = {"n": 0}

    def flaky(self: Any, table: str, rows: Any) -> int:
        seen["n"] += 1
        if seen["n"] == calls:
            original(self, table, rows[:1])  # part of the batch lands, then the process "dies"
            raise RuntimeError("simulated crash")
        return original(self, table, rows)

    monkeypatch.setattr(cls, "import_rows", flaky)


@pytest.mark.parametrize("target", ["sqlite", "postgres"])
def test_interrupted_copy_resumes_without_duplicates_and_a_rerun_changes_nothing(
    tmp_path: Path, target: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    src = sqlite_url(build_source(tmp_path / "src.db", clock))
    cls: type[BulkStore]
    if target == "postgres":
        from memento.storage.postgres import PostgresStore

        server: PostgresServer = request.getfixturevalue("pg")
        dst, cls = server.owner_dsn, PostgresStore
    else:
        dst, cls = sqlite_url(tmp_path / "dst.db"), SQLiteStore
    before = dump(src)

    with monkeypatch.context() as m:
        _crash_after(m, cls, 3)
        with pytest.raises(RuntimeError, match="simulated crash"):
            migrate(src, dst, batch_size=4)
    partial = dump(dst)
    assert 0 < len(partial["fragments"]) < len(before["fragments"])
    assert partial["fragments"] == before["fragments"][: len(partial["fragments"])]

    resumed = migrate(src, dst, batch_size=4)
    assert resumed.tables["fragments"].skipped == len(partial["fragments"])
    assert dump(dst) == before

    again = migrate(src, dst, batch_size=7)
    assert {r.copied for r in again.tables.values()} == {0}
    assert dump(dst) == before
    if target == "sqlite":
        assert recall_ids(dst, clock) == recall_ids(src, clock)


def test_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    src = sqlite_url(build_source(tmp_path / "src.db", clock))
    with pytest.raises(InvalidArgument, match="unknown scheme"):
        migrate("mysql://h/db", src)
    with pytest.raises(InvalidArgument, match="same database"):
        migrate(src, sqlite_url(tmp_path / "." / "src.db"))
    with pytest.raises(Unavailable, match="does not exist"):
        migrate(sqlite_url(tmp_path / "missing.db"), sqlite_url(tmp_path / "out.db"))
    assert not (tmp_path / "missing.db").exists()
    (tmp_path / "other.db").write_bytes(b"")
    with pytest.raises(Unavailable, match="no Memento store"):
        migrate(sqlite_url(tmp_path / "other.db"), sqlite_url(tmp_path / "out.db"))
    with pytest.raises(Unavailable, match="not reachable"):
        migrate("postgresql://nobody@127.0.0.1:1/none", sqlite_url(tmp_path / "out.db"))

    assert main(["migrate", "--from", "ftp://x", "--to", src]) == 1
    assert "unknown scheme" in capsys.readouterr().err
    assert main(["migrate", "--from", src, "--to", sqlite_url(tmp_path / "cli.db"), "--batch-size", "3"]) == 0
    captured = capsys.readouterr()
    assert "fragments" in captured.err and "copied" in captured.err
    assert '"fragments"' in captured.out
    assert dump(sqlite_url(tmp_path / "cli.db")) == dump(src)
