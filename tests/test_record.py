"""The one memory record every face shares: the fields of 001 §2.1, 003 and 004 §3 on both backends,
settable and filterable through 000's tools, soft deletion, expiry, and stores upgraded in place."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import InvalidArgument
from memento.models import AgentScope, AmendInput, CallContext, Fragment, RecallInput, RememberInput
from memento.results import RememberResult
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

pytestmark = pytest.mark.backends("sqlite", "postgres")

DATA = Path(__file__).parent / "data"


def remember(service: MemoryService, ctx: CallContext, content: str, **kw: Any) -> RememberResult:
    payload = {"topic": "general", "type": "fact", **kw, "content": content}
    return service.remember(RememberInput.model_validate(payload), ctx)


def recall_ids(service: MemoryService, ctx: CallContext, **kw: Any) -> set[str]:
    return {f.id for f in service.recall(RecallInput.model_validate(kw), ctx).fragments}


def test_every_shared_field_round_trips(service: MemoryService, ctx: CallContext) -> None:
    stored = remember(
        service,
        ctx,
        "The billing service retries three times",
        type="learning",
        tags=["Billing", " project:atlas "],
        record={
            "confidence": 0.7,
            "context": "post-mortem of incident 12",
            "metadata": {"ticket": "OPS-12", "severity": 2},
            "expiresAt": "2099-01-01T00:00:00Z",
            "pinned": True,
            "memorySystem": "procedural",
            "privacyScope": "team",
            "originTrace": {"from": "session-9", "turn": 4},
        },
    )
    assert stored.created is True
    found = service.recall(RecallInput(text="billing retries"), ctx).fragments
    fragment = next(f for f in found if f.id == stored.id)
    assert fragment.type == "learning"
    assert fragment.tags == ["billing", "project:atlas"]
    assert fragment.confidence == 0.7 and fragment.pinned is True
    assert fragment.context == "post-mortem of incident 12"
    assert fragment.metadata == {"ticket": "OPS-12", "severity": 2}
    assert fragment.memory_system == "procedural" and fragment.privacy_scope == "team"
    assert fragment.origin_trace == {"from": "session-9", "turn": 4}
    assert datetime.fromisoformat(fragment.expires_at or "") == datetime(2099, 1, 1, tzinfo=UTC)


def test_defaults_and_the_memory_system_derived_from_type_and_scope(service: MemoryService, ctx: CallContext) -> None:
    systems = {
        kind: remember(service, ctx, f"A memory of kind {kind}", type=kind).fragment.memory_system
        for kind in ("fact", "episode", "error", "procedure", "observation", "pattern")
    }
    assert systems == {
        "fact": "semantic",
        "episode": "episodic",
        "error": "episodic",
        "procedure": "procedural",
        "observation": "semantic",
        "pattern": "semantic",
    }
    working = remember(service, ctx, "scratch note for this session", scope="session").fragment
    assert working.memory_system == "working"
    plain = remember(service, ctx, "a plain fact with defaults").fragment
    # the shared pool (this ctx's namespace) holds what it shares: team unless told otherwise
    assert (plain.confidence, plain.tags, plain.pinned, plain.privacy_scope) == (1.0, [], False, "team")
    assert plain.metadata == {} and plain.expires_at is None and plain.origin_trace is None


def test_recall_filters_tags_all_and_any_and_memory_system(service: MemoryService, ctx: CallContext) -> None:
    both = remember(service, ctx, "deploy uses blue green switching", tags=["ops", "deploy"]).id
    ops = remember(service, ctx, "deploy pages the on-call engineer", tags=["ops"]).id
    none = remember(service, ctx, "deploy dashboards live in grafana").id
    story = remember(service, ctx, "deploy of friday broke checkout", type="episode", tags=["deploy"]).id
    assert recall_ids(service, ctx, text="deploy") == {both, ops, none, story}
    assert recall_ids(service, ctx, text="deploy", tags=["OPS", "deploy"]) == {both}
    assert recall_ids(service, ctx, text="deploy", tagsAny=["ops", "deploy"]) == {both, ops, story}
    assert recall_ids(service, ctx, keywords=["deploy"], tags=["ops"]) == {both, ops}
    assert recall_ids(service, ctx, tags=["deploy"]) == {both, story}  # a listing: no query at all
    assert recall_ids(service, ctx, text="deploy", memorySystem="episodic") == {story}
    assert recall_ids(service, ctx, text="deploy", tags=["missing"]) == set()


def test_amend_changes_the_shared_fields(service: MemoryService, ctx: CallContext) -> None:
    fid = remember(service, ctx, "cache TTL is five minutes", tags=["cache"]).id
    changed = service.amend(
        AmendInput.model_validate(
            {"id": fid, "tags": ["Cache", "perf"], "record": {"pinned": True, "confidence": 0.4, "metadata": {"k": 1}}}
        ),
        ctx,
    )
    assert changed.fragment.tags == ["cache", "perf"] and changed.fragment.pinned is True
    assert changed.fragment.confidence == 0.4 and changed.fragment.metadata == {"k": 1}
    assert changed.fragment.content == "cache TTL is five minutes"
    cleared = service.amend(AmendInput.model_validate({"id": fid, "tags": [], "record": {"memorySystem": "episodic"}}), ctx).fragment
    assert cleared.tags == [] and cleared.memory_system == "episodic" and cleared.pinned is True
    assert recall_ids(service, ctx, text="cache", tags=["perf"]) == set()


def test_an_expired_memory_is_not_recalled(service: MemoryService, ctx: CallContext) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    with pytest.raises(InvalidArgument, match="expiresAt"):
        remember(service, ctx, "already expired when stored", record={"expiresAt": past})
    gone = remember(service, ctx, "the staging password rotates weekly", record={"expiresAt": future}).id
    kept = remember(service, ctx, "the staging cluster restarts nightly", record={"expiresAt": future}).id
    assert recall_ids(service, ctx, text="staging") == {gone, kept}
    expired = service.amend(AmendInput.model_validate({"id": gone, "record": {"expiresAt": past}}), ctx).fragment
    assert datetime.fromisoformat(expired.expires_at or "") < datetime.now(UTC)
    assert recall_ids(service, ctx, text="staging") == {kept}
    assert [f.id for f in service.store.get_many(AgentScope(), [gone, kept])] == [kept]
    again = remember(service, ctx, "the staging password rotates weekly")  # expired content, remembered anew
    assert again.created is True and again.id == gone and again.fragment.expires_at is None
    assert recall_ids(service, ctx, text="staging") == {gone, kept}


def test_soft_deletion_hides_everywhere_and_restores(service: MemoryService, ctx: CallContext) -> None:
    store, scope = service.store, AgentScope()
    fid = remember(service, ctx, "the VPN endpoint moved to vpn2").id
    other = remember(service, ctx, "the VPN client is wireguard").id
    assert store.soft_delete(scope, [fid], datetime.now(UTC)) == [fid]
    assert recall_ids(service, ctx, text="VPN") == {other}
    assert recall_ids(service, ctx, keywords=["vpn"]) == {other}
    assert store.get_many(scope, [fid]) == []
    assert store.count(scope, SearchFilter()) == 1
    private = remember(service, CallContext(agent_id="alice"), "alice keeps her VPN key on a yubikey").id
    assert store.soft_delete(AgentScope("bob"), [private], datetime.now(UTC)) == []  # not visible to bob: untouched
    assert [f.id for f in store.get_many(AgentScope("alice"), [private])] == [private]
    assert store.restore(scope, [fid]) == [fid]
    assert recall_ids(service, ctx, text="VPN") == {fid, other}
    store.soft_delete(scope, [fid], datetime.now(UTC))
    again = remember(service, ctx, "the VPN endpoint moved to vpn2")
    assert again.created is True and again.id == fid  # remembering it again brings it back


def test_bad_shared_fields_are_refused_and_nothing_is_stored(service: MemoryService, ctx: CallContext) -> None:
    for bad in (
        {"record": {"confidence": 1.5}},
        {"record": {"memorySystem": "dreaming"}},
        {"record": {"privacyScope": "everyone"}},
        {"tags": "ops"},
        {"tags": [""]},
        {"record": {"metadata": {"blob": "x" * 9000}}},
        {"record": {"metadata": ["not", "an", "object"]}},
        {"record": {"expiresAt": "next tuesday"}},
        {"type": "rumour"},
    ):
        with pytest.raises(ValidationError):
            RememberInput.model_validate({"content": "never stored", "topic": "t", "type": "fact", **bad})
    assert service.store.count(AgentScope(), SearchFilter()) == 0


def test_pii_in_context_and_tags_is_masked(service: MemoryService, ctx: CallContext) -> None:
    stored = remember(
        service, ctx, "the alert goes to the team", record={"context": "ask jane.doe@example.com"}, tags=["x@example.com", "ok"]
    )
    assert "example.com" not in (stored.fragment.context or "")
    assert stored.fragment.tags == ["ok"]


def test_the_python_filter_matches_the_sql_filter(service: MemoryService, ctx: CallContext) -> None:
    """SearchFilter.matches (used on candidates from the L1 index) agrees with each store's SQL."""
    for i, tags in enumerate((["a"], ["a", "b"], ["b", "c"], [], ["c"])):
        remember(service, ctx, f"filter probe {i}", tags=tags, type=("episode" if i % 2 else "fact"))
    scope = AgentScope()
    everything = service.store.list_fragments(scope, SearchFilter(), 100)
    for filt in (
        SearchFilter(tags_all=("a",)),
        SearchFilter(tags_all=("a", "b")),
        SearchFilter(tags_any=("b", "c")),
        SearchFilter(tags_any=("zzz",)),
        SearchFilter(memory_system=everything[0].memory_system),
        SearchFilter(tags_all=("c",), tags_any=("b",)),
    ):
        in_sql = {f.id for f in service.store.list_fragments(scope, filt, 100)}
        assert in_sql == {f.id for f in everything if filt.matches(f)}, filt


# ---------------------------------------------------------------- upgrade in place


def _fragments(service: MemoryService, sessions: set[str]) -> dict[str, Fragment]:
    found = {f.id: f for f in service.store.list_fragments(AgentScope("system"), SearchFilter(), 1000)}
    for session in sessions:
        found |= {
            f.id: f for f in service.store.list_fragments(AgentScope("system"), SearchFilter(session_id=session, only_session=True), 1000)
        }
    return found


@pytest.mark.backends("sqlite")
def test_a_store_of_the_previous_release_upgrades_in_place_and_keeps_every_row(tmp_path: Path) -> None:
    """tests/data/store-0484b5b.sqlite was written by release 0484b5b (migrations 0001-0003):
    28 fragments over three agents, a session row, a link, an amended version, tool feedback."""
    import pysqlite3.dbapi2 as sqlite3

    path = tmp_path / "old.sqlite"
    shutil.copy(DATA / "store-0484b5b.sqlite", path)
    with sqlite3.connect(path) as raw:
        before = {r[0]: r[1:] for r in raw.execute("SELECT id, content, topic, type, agent_id, session_id, importance FROM fragments")}
        counts = {
            t: raw.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("fragment_links", "fragment_versions", "tool_feedback")
        }
    assert len(before) == 29
    app = build_app(Settings(DATABASE_URL=f"sqlite:///{path}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256))
    try:
        service = app.service
        after = _fragments(service, {str(v[4]) for v in before.values() if v[4]})
        assert {i: (f.content, f.topic, f.type.value, f.agent_id, f.session_id, f.importance) for i, f in after.items()} == before
        for f in after.values():
            expected = (
                "working"
                if f.session_id
                else {"episode": "episodic", "error": "episodic", "procedure": "procedural"}.get(f.type.value, "semantic")
            )
            assert (f.memory_system.value, f.confidence, f.tags, f.pinned, f.deleted_at) == (expected, 1.0, [], False, None)
        with sqlite3.connect(path) as raw:
            assert {t: raw.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in counts} == counts
            assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ctx = CallContext()
        # old rows are still found by full text, and the new types and fields are accepted
        assert recall_ids(service, ctx, text="Old release memory number 4", agentId="alice")
        new = remember(service, ctx, "an observation after the upgrade", type="observation", tags=["upgrade"])
        assert recall_ids(service, ctx, tags=["upgrade"]) == {new.id}
    finally:
        app.close()


@pytest.mark.backends("postgres")
def test_a_postgres_store_at_the_previous_migrations_upgrades_in_place(postgres_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database migrated to 0001-0003 (the previous release's schema) with rows in it migrates
    to the shared record and keeps every row."""
    import psycopg

    from memento.storage import postgres_schema
    from memento.storage.postgres import PostgresStore

    name = "memento_upgrade"
    with psycopg.connect(postgres_server.superuser_dsn, autocommit=True) as su:
        su.execute(f"DROP DATABASE IF EXISTS {name}")
        su.execute(f"CREATE DATABASE {name} OWNER memento_owner")
    dsn = postgres_server.owner_dsn.rsplit("/", 1)[0] + f"/{name}"
    super_dsn = postgres_server.superuser_dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(super_dsn, autocommit=True) as su:
        su.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        every = postgres_schema._migration_files
        monkeypatch.setattr(postgres_schema, "_migration_files", lambda: [m for m in every() if m[0] < "0004"])
        assert [n for n in postgres_schema.migrate(dsn) if not n.startswith("vector")] == [
            "0001_initial.sql",
            "0002_search_tables.sql",
            "0003_working_memory_and_pool_rls.sql",
        ]
        kinds = ("fact", "episode", "procedure", "error", "preference")
        with psycopg.connect(dsn) as conn:
            conn.execute("SELECT set_config('app.current_agent_id', 'system', true)")
            for i in range(20):
                conn.execute(
                    "INSERT INTO agent_memory.fragments (id, content, topic, type, importance, content_hash, ttl_tier, agent_id, keywords, session_id)"
                    " VALUES (%s, %s, 't', %s, 0.5, %s, 'warm', %s, %s, %s)",
                    (
                        f"frag-old{i}",
                        f"old row {i}",
                        kinds[i % 5],
                        f"h{i}",
                        ("a", "b", "default")[i % 3],
                        ["old"],
                        "s1" if i == 7 else None,
                    ),
                )
        monkeypatch.setattr(postgres_schema, "_migration_files", every)
        assert "0004_shared_record.sql" in postgres_schema.migrate(dsn)
        store = PostgresStore(dsn, embedding_model=None, dimensions=None)
        try:
            rows = {f.id: f for f in store.list_fragments(AgentScope("system"), SearchFilter(session_id="s1"), 100)}
            assert set(rows) == {f"frag-old{i}" for i in range(20)}
            assert rows["frag-old1"].memory_system.value == "episodic" and rows["frag-old2"].memory_system.value == "procedural"
            assert rows["frag-old7"].memory_system.value == "working" and rows["frag-old0"].memory_system.value == "semantic"
            assert all(f.tags == [] and f.confidence == 1.0 and f.metadata == {} for f in rows.values())
            assert {h.id for h in store.keyword_search(AgentScope("a"), ["old"], SearchFilter(), 50)} >= {"frag-old0", "frag-old3"}
        finally:
            store.close()
    finally:
        with psycopg.connect(postgres_server.superuser_dsn, autocommit=True) as su:
            su.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
