"""The lifecycle in simulated time (issue 13): an injected clock, one consolidation per simulated
day, nothing slept. 001 §10.3's confidence life under daily runs, 000 §5.2's tier life step by
step, 004's retention per memory system, and six months of a busy agent (SQLite; the hashing
embedder, 64 dimensions: the vectors only need to be deterministic and cheap)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from conftest import Clock

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.graph import effective_confidence
from memento.models import AgentScope, CallContext, ConsolidateInput, RecallInput, RememberInput, TTLTier
from memento.results import ConsolidateResult
from memento.service import MemoryService
from memento.settings import Settings

SYSTEM = AgentScope("system")
DAY = timedelta(days=1)


def remember(service: MemoryService, content: str, ctx: CallContext | None = None, **kw: Any) -> str:
    payload = {"topic": "t", "type": "fact", **kw, "content": content}
    return str(service.remember(RememberInput.model_validate(payload), ctx or CallContext()).id)


def consolidate(service: MemoryService) -> ConsolidateResult:
    return service.memory_consolidate(ConsolidateInput(), CallContext())


def recall(service: MemoryService, keyword: str) -> list[str]:
    found = service.recall(RecallInput(keywords=[keyword], includeLinks=False), CallContext())
    return [f.id for f in found.fragments]


def tier(service: MemoryService, fid: str) -> str | None:
    """The memory's tier, or None once it is gone (deleted, or archived: hidden from reads)."""
    found = service.store.get_many(SYSTEM, [fid])
    return found[0].ttl_tier.value if found else None


def live(service: MemoryService, ids: list[str]) -> set[str]:
    return {f.id for f in service.store.get_many(SYSTEM, ids)}


# ---------------------------------------------------------------- 001 §10.3 under daily runs


def test_daily_runs_follow_the_confidence_curve_reinforce_and_prune(service: MemoryService, clock: Clock) -> None:
    """The cases test_entity_service.py does not cover: a consolidation every day leaves the
    stored confidence alone (30 d → 0.5, 60 d → 0.25 of effective confidence still hold), an
    access adds 0.1 (capped at 1.0) and restarts the decay, and a memory is archived by the first
    run that finds it below the floor, not before."""
    half_life = service.settings.confidence_half_life_days
    steady = remember(service, "the staging database listens on port 5433", importance=0.6)
    used = remember(service, "the deploy key rotates monthly", importance=0.6, record={"confidence": 0.95})
    unsure = remember(service, "a rumour about the offsite venue", importance=0.6, record={"confidence": 0.1})
    start = clock.now
    pruned_on: int | None = None
    for day in range(1, 61):
        clock.now = start + day * DAY
        if day == 15:
            assert recall(service, "deploy") == [used]  # reinforced: 0.95 + 0.1, capped at 1.0
        result = consolidate(service)
        if unsure in result.changed["confidencePruned"].ids:
            pruned_on = day
        f = service.store.get_many(SYSTEM, [steady])[0]
        assert f.confidence == 1.0  # the runs never touch the stored confidence
        if day in (30, 60):
            eff = effective_confidence(f.confidence, f.created_at, f.accessed_at, clock.now, half_life)
            assert eff == pytest.approx({30: 0.5, 60: 0.25}[day], abs=0.01)
    reinforced = service.store.get_many(SYSTEM, [used])[0]
    assert reinforced.confidence == 1.0 and reinforced.accessed_at == start + 15 * DAY
    eff = effective_confidence(reinforced.confidence, reinforced.created_at, reinforced.accessed_at, clock.now, half_life)
    assert eff == pytest.approx(0.5**1.5, abs=0.01)  # 45 days since the access, not 60 since creation
    # 0.1 · 0.5^(d/30) < 0.05 from day 31 on (decay counted from creation; it stayed warm until then)
    assert pruned_on == 31
    assert live(service, [unsure]) == set()
    assert service.store.restore(SYSTEM, [unsure]) == [unsure]  # archived, not destroyed


# ---------------------------------------------------------------- 000 §5.2, one run a day


def test_the_tier_life_moves_one_step_per_daily_run_and_access_resets_it(service: MemoryService, clock: Clock) -> None:
    """A procedure (hot, 30 stale days): hot for 7 days, warm until 30 unused days in warm, cold
    until 30 unused days in cold, then expired — each move on the first run past its threshold,
    never two in one run. A second one recalled on day 20 stays warm 30 days from that access."""
    idle = remember(service, "procedure: drain the queue before deploys", type="procedure", importance=0.6)
    touched = remember(service, "procedure: warm the cache after deploys", type="procedure", importance=0.6)
    start = clock.now
    order = [TTLTier.HOT.value, TTLTier.WARM.value, TTLTier.COLD.value, None]
    moves: dict[str, dict[int, str | None]] = {idle: {}, touched: {}}
    last: dict[str, str | None] = {idle: "hot", touched: "hot"}
    for day in range(1, 101):
        clock.now = start + day * DAY
        if day == 20:
            assert recall(service, "cache") == [touched]
        consolidate(service)
        for fid in (idle, touched):
            now = tier(service, fid)
            if now != last[fid]:
                assert order.index(now) == order.index(last[fid]) + 1, (fid, day, last[fid], now)  # one step per run
                moves[fid][day] = now
                last[fid] = now
    assert moves[idle] == {8: "warm", 39: "cold", 70: None}
    assert moves[touched] == {8: "warm", 51: "cold", 82: None}  # warm → cold waits for 30 days after the access


# ---------------------------------------------------------------- 004 retention, one run a day


def test_retention_per_memory_system_under_daily_runs(service: MemoryService, clock: Clock) -> None:
    """working: archived on the first run 48 h after its last use; episodic: 90 days; semantic and
    procedural: no retention limit (a recalled fact lives on). An archived memory is restorable
    until the forget retention (30 days) has passed; then the purge deletes it for good."""
    working = remember(service, "scratch: try the second mirror", record={"memorySystem": "working"}, importance=0.6)
    episode = remember(service, "the kickoff meeting ran long", type="episode", importance=0.6)
    recalled_episode = remember(service, "the retro about the flaky harbour tests", type="episode", importance=0.6)
    fact = remember(service, "the canary region is eu-north", importance=0.6)
    start = clock.now
    archived_on: dict[str, int] = {}
    purged_on: dict[str, int] = {}
    for day in range(1, 121):
        clock.now = start + day * DAY
        if day % 20 == 0:
            assert recall(service, "harbour") == [recalled_episode]
            assert recall(service, "canary") == [fact]
        result = consolidate(service)
        archived_on.update((fid, day) for fid in result.changed["retentionExpired"].ids)
        purged_on.update((fid, day) for fid in result.changed["forgottenPurged"].ids)
    assert archived_on == {working: 3, episode: 91}  # created at noon: 48 h and 90 days are reached on days 2 and 90, not passed
    assert live(service, [working, episode, recalled_episode, fact]) == {recalled_episode, fact}
    assert purged_on == {working: 34}  # archived on day 3, restorable for 30 days
    assert service.store.restore(SYSTEM, [working, episode]) == [episode]


# ---------------------------------------------------------------- six months of a busy agent

# 600 made-up words: seven of them share little, as unrelated notes do (the merge stage compares them all)
WORDS = [
    a + b + c
    for a in ("ka", "lo", "mi", "nu", "pe", "ro", "sa", "ti", "vo", "ze")
    for b in "aeiou"
    for c in ("n", "r", "s", "t", "l", "m", "k", "d", "x", "z", "b", "g")
]
PER_DAY = 12  # memories written a day: 2 160 in six months
TYPES = ("fact", "fact", "decision", "observation", "episode", "episode", "error", "procedure")


@pytest.fixture
def sim_app(tmp_path: Any, clock: Clock) -> Iterator[App]:
    settings = Settings(
        DATABASE_URL=f"sqlite:///{tmp_path / 'sim.db'}",
        EMBEDDING_PROVIDER="hash",
        EMBEDDING_DIMENSIONS=64,
        MEMENTO_SQLITE_SYNCHRONOUS="NORMAL",  # 3 600 writes: no fsync each (durability is not what this test is about)
    )
    built = build_app(settings, embedder=HashEmbedder(64), clock=clock)
    if built.keyword_index is not None:
        assert built.keyword_index.wait_ready()
    yield built
    built.close()


def test_six_months_of_a_busy_agent_keep_what_matters_and_stay_bounded(sim_app: App, clock: Clock) -> None:
    service = sim_app.service
    rng = random.Random(13)
    start = clock.now
    pinned: list[str] = []
    anchors: list[str] = []
    working_set: dict[str, str] = {}  # keyword → id, recalled every few days
    written = 0
    live_by_day: dict[int, int] = {}
    totals: dict[str, int] = {}
    for day in range(180):
        clock.now = start + day * DAY + timedelta(hours=9)
        session = CallContext(session_id=f"day-{day}")
        for n in range(PER_DAY):
            clock.now += timedelta(minutes=20)
            text = " ".join(rng.sample(WORDS, 7))
            kw: dict[str, Any] = {"type": TYPES[(day + n) % len(TYPES)], "importance": rng.choice((0.3, 0.4, 0.5, 0.6))}
            if n == 0 and day % 5 == 0:
                pinned.append(remember(service, f"pinned: {text}", record={"pinned": True}, **kw))
            elif n == 1 and day % 10 == 0:
                anchors.append(remember(service, f"anchor: {text}", isAnchor=True, **kw))
            elif n == 2 and day % 6 == 0 and len(working_set) < 30:
                keyword = f"ws{len(working_set):02d}x"
                working_set[keyword] = remember(service, f"{keyword} {text}", keywords=[keyword], **kw)
            elif n == 3:
                remember(service, f"scratch {text}", session, scope="session", sessionId=f"day-{day}")
            else:
                remember(service, text, **kw)
            written += 1
        for i, (keyword, fid) in enumerate(working_set.items()):
            if (day + i) % 7 == 0:  # each of the working set is recalled once a week
                assert fid in recall(service, keyword), (day, keyword)
        clock.now = start + (day + 1) * DAY  # the nightly run
        for stage, count in consolidate(service).dump().items():
            if isinstance(count, int) and not isinstance(count, bool):
                totals[stage] = totals.get(stage, 0) + count
        live_by_day[day] = service.store.stats(SYSTEM)["total"]  # type: ignore[assignment]
    print(f"\nsix months: {written} written; live on days 30/90/150/180: {[live_by_day[d] for d in (29, 89, 149, 179)]}; {totals}")
    assert written == 180 * PER_DAY
    assert live(service, pinned) == set(pinned) and len(pinned) == 36
    assert live(service, anchors) == set(anchors) and len(anchors) == 18
    assert live(service, list(working_set.values())) == set(working_set.values())  # unpinned but used: kept
    for stage in ("hotToWarm", "warmToCold", "expired", "retentionExpired", "workingMemoryExpired", "decayed"):
        assert totals[stage] > 0, (stage, totals)
    final = live_by_day[179]
    assert final < written / 2  # bounded: most of what was written has gone, by one stage or another
    month = [live_by_day[d] for d in range(150, 180)]
    assert max(month) - min(month) < 0.1 * final  # stable over the last month, no longer growing with the writes
    assert live_by_day[179] - live_by_day[89] < 0.25 * PER_DAY * 90  # the second quarter grew far less than it wrote
