"""Consolidation (000 §8) and embedding failure / backfill (000 §9.3)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import numpy as np
import pysqlite3.dbapi2 as sqlite3
import pytest
from conftest import Clock

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.embeddings.protocol import EmbeddingFailed
from memento.errors import InvalidArgument
from memento.graph_inputs import ConsolidateMemoriesInput, StoreMemoryInput
from memento.models import (
    AgentScope,
    AmendInput,
    CallContext,
    ConsolidateInput,
    LinkInput,
    MemoryStatsInput,
    PinInput,
    RecallInput,
    RecordInput,
    RememberInput,
)
from memento.results import ConsolidateResult, RecallResult, RecallTiers
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter
from memento.vault_models import CommitMemoryInput

pytestmark = pytest.mark.backends("sqlite", "postgres")


def tiers_of(result: RecallResult) -> RecallTiers:
    """The tier report of a verbose recall."""
    assert result.tiers is not None
    return result.tiers


def remember(service: MemoryService, content: str, **kw: object) -> str:
    payload = {"topic": "t", "type": "fact", **kw, "content": content}
    return str(service.remember(RememberInput.model_validate(payload), CallContext()).id)


def tiers(service: MemoryService) -> dict[str, int]:
    by_tier: dict[str, int] = service.memory_stats(MemoryStatsInput(), CallContext()).by_tier
    return by_tier


def consolidate(service: MemoryService) -> ConsolidateResult:
    return service.memory_consolidate(ConsolidateInput(), CallContext())


def test_hot_moves_to_warm_then_cold_then_expires(service: MemoryService, clock: Clock) -> None:
    """000 §5.2's tier life, one step per stay: a tier's days count from when the fragment entered it."""
    remember(service, "a warm fact", importance=0.6)  # warm, fact: 60 stale days
    remember(service, "procedure: restart the worker", type="procedure")  # hot, procedure: 30 stale days
    remember(service, "anchored procedure", type="procedure", isAnchor=True)  # hot, exempt
    clock.now += timedelta(days=8)
    assert consolidate(service).hot_to_warm == 1  # the procedure enters warm on day 8
    clock.now += timedelta(days=25)  # day 33: the fact has been warm (and unused) 33 days ...
    result = consolidate(service)
    assert (result.warm_to_cold, result.expired) == (1, 0)  # ... the procedure only 25: it stays warm
    assert tiers(service) == {"hot": 1, "warm": 1, "cold": 1, "permanent": 0}
    clock.now += timedelta(days=6)  # day 39: the procedure's 31 warm days
    assert consolidate(service).warm_to_cold == 1
    clock.now += timedelta(days=31)  # day 70: 31 cold days, past its 30 stale days
    assert consolidate(service).expired == 1
    clock.now += timedelta(days=24)  # day 94: the fact's 61 cold days, past its 60
    assert consolidate(service).expired == 1
    assert service.memory_stats(MemoryStatsInput(), CallContext()).total == 1  # the anchor stays


def test_permanent_fragments_never_move_or_expire(service: MemoryService, clock: Clock) -> None:
    remember(service, "prefers dark mode", type="preference")
    clock.now += timedelta(days=400)
    result = consolidate(service)
    assert result.hot_to_warm == result.warm_to_cold == result.expired == 0
    assert tiers(service)["permanent"] == 1


def test_stale_thresholds_differ_by_type(service: MemoryService, clock: Clock) -> None:
    remember(service, "a cold fact", importance=0.3)
    remember(service, "a cold decision", type="decision", importance=0.3)
    clock.now += timedelta(days=61)
    assert consolidate(service).expired == 1  # fact after 60 days; decision waits for 90
    clock.now += timedelta(days=30)
    assert consolidate(service).expired == 1


def test_recent_access_protects_from_demotion(service: MemoryService, clock: Clock) -> None:
    remember(service, "warm fact about the billing queue", importance=0.6)
    clock.now += timedelta(days=29)
    service.recall(RecallInput(text="billing queue"), CallContext())
    service.store.flush_access()
    clock.now += timedelta(days=2)
    assert consolidate(service).warm_to_cold == 0


def test_a_recall_just_before_consolidation_keeps_its_fragment(service: MemoryService, clock: Clock) -> None:
    """Issue 13 defect 2: the recall's access is still pending in memory when the run starts (no
    explicit flush here); the run settles it before any stage reads access statistics."""
    fid = remember(service, "cold fact about the ledger export", importance=0.3)  # cold fact: 60 stale days
    clock.now += timedelta(days=59)
    assert service.recall(RecallInput(text="ledger export"), CallContext()).fragments
    clock.now += timedelta(days=2)  # unused for 61 days but for the recall a day ago
    result = consolidate(service)
    assert (result.expired, result.confidence_pruned, result.retention_expired) == (0, 0, 0)
    assert service.store.get_many(service._scope(None, CallContext()), [fid])


def test_decay_lowers_unused_low_utility_importance(service: MemoryService, clock: Clock) -> None:
    fid = remember(service, "rarely used decision", type="decision", importance=0.6)
    clock.now += timedelta(days=40)
    consolidate(service)  # utility recomputed low (old, unused)
    before = service.store.get_many(service._scope(None, CallContext()), [fid])[0].importance
    consolidate(service)
    after = service.store.get_many(service._scope(None, CallContext()), [fid])[0].importance
    assert after < before


def test_contradictions_are_reported_not_resolved(service: MemoryService) -> None:
    a = remember(service, "the office opens at 8")
    b = remember(service, "the office opens at 9")
    service.link(LinkInput(fromId=a, toId=b, relationType="contradicts"), CallContext())
    result = consolidate(service)
    assert result.contradictions == 1 and [p.dump() for p in result.contradiction_pairs or []] == [{"fromId": a, "toId": b}]
    assert service.memory_stats(MemoryStatsInput(), CallContext()).total == 2


def test_consolidation_returns_every_stage(service: MemoryService) -> None:
    result = consolidate(service)
    for stage in (
        "hotToWarm",
        "warmToCold",
        "expired",
        "retentionExpired",
        "decayed",
        "deduplicated",
        "merged",
        "contradictions",
        "orphanLinksPruned",
        "utilityRecomputed",
        "embeddingsBackfilled",
        "workingMemoryExpired",
        "statistics",
    ):
        assert stage in result.dump()


class FlakyEmbedder:
    """Fails while `down` is set; otherwise delegates to the hash embedder."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(64)
        self.name = self.inner.name
        self.dimensions = self.inner.dimensions
        self.down = True

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.down:
            raise EmbeddingFailed("provider unreachable")
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if self.down:
            raise EmbeddingFailed("provider unreachable")
        return self.inner.embed_query(text)


def test_a_failing_embedder_never_fails_a_write_and_is_backfilled(settings: Settings) -> None:
    embedder = FlakyEmbedder()
    app = build_app(settings, embedder=embedder)
    try:
        service = app.service
        result = service.remember(RememberInput(content="queue workers scale with CPU", topic="ops", type="fact"), CallContext())
        assert result.created is True and result.embedded is False and "pending" in (result.message or "")
        recalled = service.recall(RecallInput(text="queue workers", verbose=True), CallContext())
        assert [f.id for f in recalled.fragments] == [result.id]
        assert str(tiers_of(recalled).semantic).startswith("unavailable")
        assert service.memory_stats(MemoryStatsInput(), CallContext()).embedding_coverage == 0.0
        embedder.down = False
        assert service.settle()  # the embedding worker tries again (at once: settle skips its back-off)
        assert service.memory_stats(MemoryStatsInput(), CallContext()).embedding_coverage == 1.0
        assert consolidate(service).embeddings_backfilled == 0  # nothing was left for the backfill stage
        semantic = service.recall(RecallInput(text="scale workers CPU"), CallContext())
        assert semantic.fragments[0].similarity is not None
    finally:
        app.close()


def test_keyword_only_mode_says_so(settings: Settings) -> None:
    app = build_app(settings.model_copy(update={"embedding_provider": "none"}))
    try:
        app.service.remember(RememberInput(content="plain keyword memory", topic="t", type="fact"), CallContext())
        result = app.service.recall(RecallInput(text="keyword memory", verbose=True), CallContext())
        assert result.search_mode == "keyword-only" and result.count == 1
        assert str(tiers_of(result).semantic).startswith("disabled")
    finally:
        app.close()


@pytest.mark.parametrize("sync", ["NORMAL", "FULL"])
def test_reopening_a_store_applies_no_migration_twice(settings: Settings, sync: str) -> None:
    settings = settings.model_copy(update={"embedding_provider": "none", "sqlite_synchronous": sync})
    first = build_app(settings)
    names = first.store.migrations()
    first.service.remember(RememberInput(content="survives reopen", topic="t", type="fact"), CallContext())
    first.close()
    second = build_app(settings)
    try:
        assert second.store.migrations() == names and names[0] == "0001_initial.sql"
        assert second.service.memory_stats(MemoryStatsInput(), CallContext()).total == 1
    finally:
        second.close()


def test_the_first_run_decays_old_unused_fragments(service: MemoryService, clock: Clock) -> None:
    """Regression (issue 13, defect 3): utility is computed before the decay stage reads it, so a
    store's very first consolidation already decays what has long gone unused."""
    clock.now = datetime(2026, 1, 1, tzinfo=UTC)
    fid = service.remember(RememberInput(content="a note nobody recalls", topic="t", type="fact", importance=0.6), CallContext()).id
    clock.now = datetime(2026, 1, 21, tzinfo=UTC)  # three weeks without a recall: still warm, utility below 0.5
    result = service.memory_consolidate(ConsolidateInput(), CallContext())
    assert (result.decayed or 0) >= 1 and fid in result.changed["decayed"].ids
    assert service.store.get_many(AgentScope("system"), [fid])[0].importance < 0.6


def test_consolidation_without_an_agent_covers_every_namespace_for_the_operator(service: MemoryService, clock: Clock) -> None:
    """Regression (issue 13, defect 4): an unbound caller's run maintains every namespace; an
    agent-bound credential's run maintains its own."""
    clock.now = datetime(2026, 1, 1, tzinfo=UTC)
    for agent in ("alpha", "beta"):
        service.remember(RememberInput(content=f"{agent}'s old note", topic="t", type="fact", importance=0.6, agentId=agent), CallContext())
    clock.now = datetime(2026, 1, 21, tzinfo=UTC)
    own = service.memory_consolidate(ConsolidateInput(), CallContext(agent_id="alpha"))
    assert own.statistics.total == 1  # alpha's own namespace (and the empty pool)
    everything = service.memory_consolidate(ConsolidateInput(), CallContext())
    assert everything.statistics.total == 2
    low = service.store.list_fragments(AgentScope("system"), SearchFilter(), 10)
    assert [f.importance < 0.6 for f in low if f.agent_id == "beta"] == [True]


def test_one_run_moves_a_fragment_one_tier_at_most(service: MemoryService, clock: Clock) -> None:
    """Regression (issue 13, defect 1): tier time is measured from when a fragment entered its
    tier, so a long-untouched hot fragment goes hot → warm → cold → expired over several runs."""
    clock.now = datetime(2026, 1, 1, tzinfo=UTC)
    # a hot type whose memory system (procedural) has no retention limit by default: this is about the tiers
    fid = service.remember(
        RememberInput(content="restart the deploy after clearing the full disk", topic="ops", type="procedure", importance=0.6),
        CallContext(),
    ).id
    system = AgentScope("system")

    def tier() -> str | None:
        found = service.store.get_many(system, [fid])
        return found[0].ttl_tier.value if found else None

    assert tier() == "hot"
    clock.now += timedelta(days=400)
    service.memory_consolidate(ConsolidateInput(), CallContext())
    assert tier() == "warm"  # not straight to deleted
    service.memory_consolidate(ConsolidateInput(), CallContext())
    assert tier() == "warm"  # a second run at the same moment: it only just entered warm
    clock.now += timedelta(days=31)
    service.memory_consolidate(ConsolidateInput(), CallContext())
    assert tier() == "cold"
    clock.now += timedelta(days=200)
    service.memory_consolidate(ConsolidateInput(), CallContext())
    assert tier() is None  # expired at last, after a cold stay longer than its stale threshold


def test_an_import_with_old_creation_dates_survives_its_first_consolidation(service: MemoryService, clock: Clock) -> None:
    """Regression (issue 13, defect 1): memories remembered with an old createdAt start their tier now."""
    clock.now = datetime(2026, 6, 1, tzinfo=UTC)
    ids = [
        service.remember(
            RememberInput(
                content=f"imported note {i}", topic="import", type="fact", importance=0.3, createdAt=datetime(2024, 1, 1, tzinfo=UTC)
            ),
            CallContext(),
        ).id
        for i in range(5)
    ]
    old_error = service.remember(  # a hot type without a retention limit (episodic retention: its own tests)
        RememberInput(
            content="an imported old procedure",
            topic="import",
            type="procedure",
            importance=0.6,
            createdAt=datetime(2024, 1, 1, tzinfo=UTC),
        ),
        CallContext(),
    ).id
    result = service.memory_consolidate(ConsolidateInput(), CallContext())
    assert result.expired == 0
    assert len(service.store.get_many(AgentScope("system"), ids)) == 5
    assert service.store.get_many(AgentScope("system"), [old_error])[0].ttl_tier.value == "warm"  # one step, not deleted


# ---------------------------------------------------------------- 004: retention per memory system


def visible(service: MemoryService, ids: Sequence[str]) -> set[str]:
    return {f.id for f in service.store.get_many(AgentScope("system"), ids)}


def test_retention_archives_each_memory_system_after_its_own_period(service: MemoryService, clock: Clock) -> None:
    """004 §7's defaults: working 48 h, episodic 90 days, semantic and procedural without limit."""
    working = remember(service, "scratch: the build is on step four", record={"memorySystem": "working"})
    episodic = remember(service, "we shipped the harbour release on a friday", type="episode")
    semantic = remember(service, "the harbour service listens on port 7070")
    procedural = remember(service, "restart the harbour worker before deploying", type="procedure", importance=0.6)
    everything = [working, episodic, semantic, procedural]
    clock.now += timedelta(hours=47)
    assert consolidate(service).retention_expired == 0
    clock.now += timedelta(hours=2)  # 49 hours
    assert consolidate(service).retention_expired == 1
    assert visible(service, everything) == {episodic, semantic, procedural}
    clock.now += timedelta(days=91)
    result = consolidate(service)
    assert result.retention_expired == 1 and result.expired == 0  # the episode, archived; not yet by the tiers
    assert visible(service, everything) == {semantic, procedural}
    assert consolidate(service).retention_expired == 0


def test_retention_counts_from_the_last_access_and_archives_restorably(service: MemoryService, clock: Clock) -> None:
    kept = remember(service, "the harbour outage began with a full disk", type="episode")
    archived = remember(service, "the lighthouse outage began with a power cut", type="episode")
    clock.now += timedelta(days=80)
    service.recall(RecallInput(text="harbour outage full disk", limit=1), CallContext())  # recalls `kept` only
    service.store.flush_access()
    clock.now += timedelta(days=11)  # 91 days after creation, 11 after the recall
    assert consolidate(service).retention_expired == 1
    assert visible(service, [kept, archived]) == {kept}
    assert service.store.restore(AgentScope("system"), [archived]) == [archived]  # soft: restorable
    assert visible(service, [archived]) == {archived}


def test_retention_exempts_pinned_anchored_keyed_and_permanent_memories(service: MemoryService, clock: Clock) -> None:
    exempt = [
        remember(service, "the pinned launch-day story", type="episode", record={"pinned": True}),
        remember(service, "the anchored launch-day story", type="episode", isAnchor=True),
        remember(service, "the important launch-day story", type="episode", importance=0.9),  # permanent tier
    ]
    keyed = service.vault.commit(  # a keyed (002 vault) memory: kept until pruned
        CommitMemoryInput.model_validate({"scope": "vault", "key": "launch_day", "content": "the keyed launch-day story"}), CallContext()
    )
    assert keyed.committed
    plain = remember(service, "the plain launch-day story", type="episode")
    clock.now += timedelta(days=91)
    result = consolidate(service)
    assert result.retention_expired == 1
    assert visible(service, [*exempt, plain]) == set(exempt)
    assert "the keyed launch-day story" in [f.content for f in service.store.list_fragments(AgentScope("system"), SearchFilter(), 20)]


def test_retention_settings_change_or_lift_the_limits(settings: Settings, clock: Clock) -> None:
    app = build_app(
        settings.model_copy(update={"retention_episodic_days": 0, "retention_semantic_days": 10, "retention_working_hours": 0}),
        embedder=HashEmbedder(256),
        clock=clock,
    )
    try:
        service = app.service
        episode = remember(service, "the team offsite was in march", type="episode")
        fact = remember(service, "the offsite budget is fixed")
        working = remember(service, "scratch: offsite step two", record={"memorySystem": "working"})
        clock.now += timedelta(days=11)
        assert consolidate(service).retention_expired == 1
        assert visible(service, [episode, fact, working]) == {episode, working}
    finally:
        app.close()


def test_an_import_with_old_dates_is_judged_by_them(service: MemoryService, clock: Clock) -> None:
    """Retention is about a memory's own dates: an imported episode older than the episodic
    retention is archived (restorable) by the first run; an old imported fact is not (semantic)."""
    old = datetime(2024, 1, 1, tzinfo=UTC)
    # importance 0.3: born cold, so neither the tiers nor the confidence floor touch them on the first run
    episode = remember(service, "the 2023 offsite in lisbon", type="episode", importance=0.3, createdAt=old.isoformat())
    fact = remember(service, "lisbon is the offsite city", importance=0.3, createdAt=old.isoformat())
    assert consolidate(service).retention_expired == 1
    assert visible(service, [episode, fact]) == {fact}


# ---------------------------------------------------------------- 004: pinned memories never expire, decay or get merged


def test_pinned_memories_are_kept_by_every_consolidation_stage(service: MemoryService, clock: Clock) -> None:
    kinds: dict[str, tuple[dict[str, object], dict[str, object]]] = {  # name: (arguments, record)
        "procedure": ({"type": "procedure", "importance": 0.6}, {}),  # hot: demoted, decayed, expired
        "cold fact": ({"importance": 0.3}, {}),  # cold: expired
        "unsure fact": ({"importance": 0.6}, {"confidence": 0.05}),  # pruned below the confidence floor
        "episode": ({"type": "episode"}, {}),  # retention
        "working note": ({}, {"memorySystem": "working"}),  # retention
    }
    pinned, plain = {}, {}
    for name, (kw, record) in kinds.items():
        pinned[name] = remember(service, f"the pinned {name}", **kw, record={**record, "pinned": True})
        plain[name] = remember(service, f"the plain {name}", **kw, record=record)
    before = {f.id: f for f in service.store.get_many(AgentScope("system"), list(pinned.values()))}
    totals: dict[str, int] = {}
    for _ in range(6):  # a year and a half of monthly-ish runs
        clock.now += timedelta(days=90)
        for stage, count in consolidate(service).dump().items():
            if isinstance(count, int):
                totals[stage] = totals.get(stage, 0) + count
    assert visible(service, list(plain.values())) == set()  # every plain memory went, by one stage or another
    for stage in ("hotToWarm", "warmToCold", "expired", "confidencePruned", "retentionExpired", "decayed"):
        assert totals[stage] >= 1, (stage, totals)
    after = {f.id: f for f in service.store.get_many(AgentScope("system"), list(pinned.values()))}
    assert set(after) == set(pinned.values())
    for fid, old in before.items():
        assert (after[fid].ttl_tier, after[fid].importance, after[fid].deleted_at) == (old.ttl_tier, old.importance, None)


UNIQUE_HASH = (
    "CREATE UNIQUE INDEX fragments_hash_permanent ON {fragments} (agent_id, content_hash) WHERE session_id IS NULL AND memory_key IS NULL"
)


@contextmanager
def duplicates_allowed(settings: Settings, request: pytest.FixtureRequest) -> Iterator[Callable[[str, list[str]], None]]:
    """Without the unique content-hash index (as in a store whose rows were loaded around it),
    run statements on the fragments table (`{fragments}`, `{ids}`); the index comes back after."""
    if settings.backend == "sqlite":
        conn = sqlite3.connect(str(settings.sqlite_path), isolation_level=None)

        def run_sqlite(sql: str, ids: list[str]) -> None:
            conn.execute(sql.format(fragments="fragments", ids=",".join("?" * len(ids))), ids)

        try:
            conn.execute("DROP INDEX fragments_hash_permanent")
            yield run_sqlite
        finally:
            conn.execute(UNIQUE_HASH.format(fragments="fragments"))
            conn.close()
        return
    import psycopg

    owner = psycopg.connect(request.getfixturevalue("postgres_server").owner_dsn, autocommit=True)
    owner.execute("SELECT set_config('app.current_agent_id', 'system', false)")  # the table forces row-level security

    def run_postgres(sql: str, ids: list[str]) -> None:
        owner.execute(sql.format(fragments="agent_memory.fragments", ids=",".join(["%s"] * len(ids))), ids)

    try:
        owner.execute("DROP INDEX agent_memory.fragments_hash_permanent")
        yield run_postgres
    finally:
        owner.execute(UNIQUE_HASH.format(fragments="agent_memory.fragments"))
        owner.close()


def test_deduplication_never_merges_a_pinned_memory_away(
    service: MemoryService, settings: Settings, request: pytest.FixtureRequest
) -> None:
    older = remember(service, "the harbour gate code is 4417 (old copy)")
    pinned = remember(service, "the harbour gate code is 4417 (pinned copy)", record={"pinned": True})
    second_pin = remember(service, "the harbour gate code is 4417 (second pin)", record={"pinned": True})
    with duplicates_allowed(settings, request) as run:  # rows loaded around the unique index: one content hash
        run("UPDATE {fragments} SET content_hash = 'same-hash' WHERE id IN ({ids})", [older, pinned, second_pin])
        assert consolidate(service).deduplicated == 1
        assert visible(service, [older, pinned, second_pin]) == {pinned, second_pin}  # the old copy merged into the pinned one
        run("DELETE FROM {fragments} WHERE id IN ({ids})", [second_pin])  # so the index can come back


def test_entity_consolidation_never_absorbs_a_pinned_memory(service: MemoryService) -> None:
    ctx = CallContext()
    primary = service.entities.store_memory(StoreMemoryInput(content="The staging database listens on port 5433", confidence=1.0), ctx)
    twin = service.entities.store_memory(StoreMemoryInput(content="Staging database listens on port 5433 now", confidence=0.9), ctx)
    service.amend(AmendInput(id=twin.memory.id, record=RecordInput(pinned=True)), ctx)
    report = service.entities.consolidate_memories(ConsolidateMemoriesInput(similarity_threshold=0.01), ctx)
    assert report.clusters_found == 1 and all(twin.memory.id not in c.absorbed_ids for c in report.clusters)
    kept = service.store.get_many(AgentScope("system"), [primary.memory.id, twin.memory.id])
    assert [(f.id, f.content, f.pinned) for f in kept] == [(twin.memory.id, twin.memory.content, True)]  # it absorbs, keeping its text


def test_a_pinned_memory_is_shown_past_its_expiry_until_unpinned(service: MemoryService) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()  # stores hide rows by the wall clock
    pinned = remember(service, "the pinned visitor badge rule", record={"pinned": True})
    plain = remember(service, "the plain visitor badge rule")
    for fid in (pinned, plain):
        service.amend(AmendInput.model_validate({"id": fid, "record": {"expiresAt": past}}), CallContext())
    found = service.recall(RecallInput(text="visitor badge rule", includeLinks=False), CallContext())
    assert [f.id for f in found.fragments] == [pinned]  # pin wins over expiresAt, in the shared SQL filter
    again = service.remember(RememberInput(content="the pinned visitor badge rule", topic="t", type="fact"), CallContext())
    assert again.id == pinned and again.created is False  # still live: the same memory, not a revival
    service.amend(AmendInput.model_validate({"id": pinned, "record": {"pinned": False}}), CallContext())
    assert visible(service, [pinned, plain]) == set()  # unpinned, its expiry applies


def test_working_memory_cannot_be_pinned(service: MemoryService) -> None:
    """A pinned memory never expires, and working memory ends with its session: refused, nothing changed."""
    ctx = CallContext(session_id="s-pin")
    with pytest.raises(InvalidArgument, match="cannot be pinned"):
        service.remember(
            RememberInput.model_validate(
                {"content": "scratch", "topic": "t", "type": "fact", "scope": "session", "record": {"pinned": True}}
            ),
            ctx,
        )
    assert service.memory_stats(MemoryStatsInput(), ctx).working_memory == 0
    scratch = service.remember(RememberInput(content="scratch two", topic="t", type="fact", scope="session"), ctx).id
    with pytest.raises(InvalidArgument, match="cannot be pinned"):
        service.amend(AmendInput(id=scratch, record=RecordInput(pinned=True)), ctx)
    with pytest.raises(InvalidArgument, match="cannot be pinned"):
        service.pin(PinInput(id=scratch), ctx)
    assert service.store.get_many(AgentScope("default"), [scratch])[0].pinned is False
    assert service.end_session("s-pin", ctx) == 1  # the session's end takes its working memory, as ever
