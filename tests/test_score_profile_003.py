"""The score profile 003 (seed 003 "Memories": relevance decays with a 7-day half-life; frequent
and recent access resist it): the formula on constructed cases with a set clock, then through the
service on both backends with MEMENTO_SCORE_PROFILE=003 (the face's memento_recall and 000's
recall rank with it), and the default profile left as it was."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from conftest import Clock
from pydantic import ValidationError

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import CallContext, RecallInput
from memento.protocol_face.memory_models import RecallMemoriesInput, StoreMemoryInput
from memento.retrieval.profile import DecayTerms, Profile003, Profile004, half_life_decay
from memento.service import MemoryService, score_profile
from memento.settings import MemoryConfig, RankingConfig, Settings
from memento.storage.protocol import RankFeatures

pytestmark = pytest.mark.backends("sqlite", "postgres")  # the service tests; the formula's run once

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PROFILE = Profile003()
WHY = re.compile(r"^relevance \d\.\d\d × recency \d\.\d\d × access \d\.\d\d × touch \d\.\d\d$")
ALICE = CallContext(agent_id="alice")


def features(age_days: float = 0.0, accesses: int = 0, touched_hours_ago: float | None = None) -> RankFeatures:
    touched = None if touched_hours_ago is None else NOW - timedelta(hours=touched_hours_ago)
    return RankFeatures(0.5, NOW - timedelta(days=age_days), touched, accesses)


def test_recency_halves_every_seven_days_so_two_weeks_leave_a_quarter() -> None:
    fresh = PROFILE.terms(1.0, features(), None, NOW)
    assert fresh.recency == 1.0
    assert PROFILE.terms(1.0, features(age_days=7), None, NOW).recency == pytest.approx(0.5)
    two_weeks = PROFILE.terms(1.0, features(age_days=14), None, NOW)
    assert two_weeks.recency == pytest.approx(0.25 * fresh.recency)
    assert two_weeks.total == pytest.approx(0.25 * fresh.total)
    assert PROFILE.terms(1.0, features(age_days=-1), None, NOW).recency == 1.0  # a clock behind the memory: no bonus
    assert half_life_decay(NOW - timedelta(hours=3), NOW, 3) == pytest.approx(0.5)


def test_access_lifts_the_score_on_a_log_scale_up_to_twice() -> None:
    lift = {n: PROFILE.terms(1.0, features(accesses=n), None, NOW).access for n in (0, 1, 3, 7, 100)}
    assert lift[0] == 1.0 and lift[1] == pytest.approx(1.3) and lift[3] == pytest.approx(1.6) and lift[7] == pytest.approx(1.9)
    assert lift[100] == 2.0  # capped
    often = PROFILE.terms(1.0, features(age_days=7, accesses=3), None, NOW).total
    assert often == pytest.approx(0.5 * 1.6)  # a week old but used: above a fresh memory's 0.5 at half relevance
    assert often > PROFILE.terms(0.5, features(), None, NOW).total


def test_a_recent_access_lifts_by_half_and_the_lift_fades_over_two_days() -> None:
    assert PROFILE.terms(1.0, features(), None, NOW).touch == 1.0  # never accessed
    assert PROFILE.terms(1.0, features(touched_hours_ago=0), None, NOW).touch == pytest.approx(1.5)
    assert PROFILE.terms(1.0, features(touched_hours_ago=48), None, NOW).touch == pytest.approx(1.25)
    assert PROFILE.terms(1.0, features(touched_hours_ago=480), None, NOW).touch == pytest.approx(1.0, abs=0.001)


def test_relevance_multiplies_and_a_listing_counts_as_fully_relevant() -> None:
    half = PROFILE.terms(0.5, features(age_days=7), None, NOW)
    assert half.total == pytest.approx(0.25)
    assert PROFILE.terms(None, features(age_days=7), None, NOW).total == pytest.approx(0.5)
    assert PROFILE.terms(0.0, features(), None, NOW).total == 0.0  # no match, no score
    terms = DecayTerms(0.83, 0.71, 1.3, 1.12)
    assert WHY.match(terms.why()) and terms.total == pytest.approx(0.83 * 0.71 * 1.3 * 1.12)
    assert not PROFILE.reads_feedback and PROFILE.duplication == 0.0  # 003 has neither


def test_the_operator_picks_the_profile_and_the_default_stays_000s() -> None:
    assert score_profile(Settings()) is None
    assert isinstance(score_profile(Settings(MEMENTO_SCORE_PROFILE="003")), Profile003)
    assert isinstance(score_profile(Settings(MEMENTO_SCORE_PROFILE="004")), Profile004)
    with pytest.raises(ValidationError):
        Settings(MEMENTO_SCORE_PROFILE="005")


# ---------------------------------------------------------------- through the service, on both backends


@pytest.fixture
def profiled(settings: Settings, clock: Clock) -> Iterator[App]:
    """An app on the test's store with MEMENTO_SCORE_PROFILE=003 and the settable clock."""
    built = build_app(settings.model_copy(update={"score_profile": "003"}), embedder=HashEmbedder(256), clock=clock)
    yield built
    built.close()


def store(service: MemoryService, content: str) -> str:
    fid = service.protocol.memories.store(StoreMemoryInput(content=content, type="fact"), ALICE).id
    # Its vector stored first: on PostgreSQL an access flush skips a row the embedding worker
    # holds (and writes it with the next batch), which would leave a test's counts behind.
    assert service.settle()
    return fid


def ranked(service: MemoryService, query: str) -> list[tuple[str, float]]:
    found = service.protocol.memories.recall(RecallMemoriesInput(query=query), ALICE).memories
    service.store.flush_access()  # recall counted its accesses: settle them for the next ranking
    return [(m.id, m.score or 0.0) for m in found]


def test_of_two_equally_matching_memories_the_one_used_recently_and_often_ranks_first(profiled: App, clock: Clock) -> None:
    service = profiled.service
    first = store(service, "the blue door code is kept in the red binder")
    second = store(service, "the red door code is kept in the blue binder")  # the same words: an equal match
    clock.now += timedelta(days=3)
    before = [fid for fid, _ in ranked(service, "door code binder")]
    assert set(before) == {first, second}
    top, below = before
    for _ in range(5):  # the lower one is used again and again, lately
        service.store.record_access([below], clock.now)
    service.store.flush_access()
    after = ranked(service, "door code binder")
    assert [fid for fid, _ in after] == [below, top]
    reasons = service.recall(RecallInput(text="door code binder", includeLinks=False, verbose=True), ALICE).fragments
    assert all(WHY.match(f.recall_reason) for f in reasons), [f.recall_reason for f in reasons]


def test_a_memory_unused_for_two_weeks_keeps_a_quarter_of_a_fresh_ones_recency(profiled: App, clock: Clock) -> None:
    service = profiled.service
    old = store(service, "the harbour crane is painted green")
    clock.now += timedelta(days=14)
    new = store(service, "the harbour crane is painted green again")
    found = service.recall(RecallInput(text="harbour crane painted green", includeLinks=False, verbose=True), ALICE).fragments
    recency = {f.id: float(f.recall_reason.split("recency ")[1].split(" ")[0]) for f in found}
    assert recency[new] == 1.0 and recency[old] == 0.25
    assert [f.id for f in found] == [new, old]


def test_profile_003_orders_a_listing_by_decay(settings: Settings, clock: Clock) -> None:
    listing = MemoryConfig(ranking=RankingConfig(activationThreshold=0))  # rank even a small listing
    app = build_app(settings.model_copy(update={"score_profile": "003", "memory": listing}), embedder=HashEmbedder(256), clock=clock)
    try:
        older = store(app.service, "an older note")
        clock.now += timedelta(days=1)
        newer = store(app.service, "a newer note")
        app.store.record_access([older] * 8, clock.now)  # used: 1 + 0.3·log2(9) ≈ 1.95 and a fresh touch
        app.store.flush_access()
        found = app.service.protocol.memories.listing(None, [], None, 10, ALICE).memories
        assert [m.id for m in found] == [older, newer]
        assert found[0].score == pytest.approx(0.5 ** (1 / 7) * min(2.0, 1 + 0.3 * math.log2(9)) * 1.5, abs=0.01)
    finally:
        app.close()
