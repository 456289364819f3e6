"""Consolidation (000 §8) and embedding failure / backfill (000 §9.3)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from conftest import Clock

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.embeddings.protocol import EmbeddingFailed
from memento.models import AgentScope, CallContext, ConsolidateInput, LinkInput, MemoryStatsInput, RecallInput, RememberInput
from memento.results import ConsolidateResult, RecallResult, RecallTiers
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

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
    assert result.contradictions == 1 and [p.dump() for p in result.contradiction_pairs] == [{"fromId": a, "toId": b}]
    assert service.memory_stats(MemoryStatsInput(), CallContext()).total == 2


def test_consolidation_returns_every_stage(service: MemoryService) -> None:
    result = consolidate(service)
    for stage in (
        "hotToWarm",
        "warmToCold",
        "expired",
        "decayed",
        "deduplicated",
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
        assert consolidate(service).embeddings_backfilled == 1
        assert service.memory_stats(MemoryStatsInput(), CallContext()).embedding_coverage == 1.0
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
    assert result.decayed >= 1
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
    fid = service.remember(
        RememberInput(content="the deploy failed on a full disk", topic="ops", type="error", importance=0.6), CallContext()
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
    old_error = service.remember(
        RememberInput(
            content="an imported old error", topic="import", type="error", importance=0.6, createdAt=datetime(2024, 1, 1, tzinfo=UTC)
        ),
        CallContext(),
    ).id
    result = service.memory_consolidate(ConsolidateInput(), CallContext())
    assert result.expired == 0
    assert len(service.store.get_many(AgentScope("system"), ids)) == 5
    assert service.store.get_many(AgentScope("system"), [old_error])[0].ttl_tier.value == "warm"  # one step, not deleted
