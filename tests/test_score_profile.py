"""The score profile 004 (seed 004 §4.1, §7): the formula on constructed cases (each term moves S
the documented way), then through the service on both backends with MEMENTO_SCORE_PROFILE=004:
feedback reorders results, a near-identical lower result is penalised, `why` names every
term's share, and the default profile keeps 000's ranking."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from conftest import Clock

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Forbidden, NotFound
from memento.models import CallContext, FeedbackInput, ForgetInput, MemoryStatsInput, RecallInput, RememberInput
from memento.retrieval.profile import Profile004, Terms, penalise_duplicates, recency, usage
from memento.service import MemoryService
from memento.settings import MemoryConfig, RankingConfig, Settings
from memento.storage.protocol import FeedbackTally, RankFeatures

pytestmark = pytest.mark.backends("sqlite", "postgres")  # the service tests; the formula's run once

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PROFILE = Profile004()
WHY = re.compile(r"^relevance \d\.\d\d \+ recency \d\.\d\d \+ importance \d\.\d\d \+ usage -?\d\.\d\d - dup \d\.\d\d$")


def features(importance: float = 0.5, age_days: float = 0.0, accesses: int = 0) -> RankFeatures:
    return RankFeatures(importance, NOW - timedelta(days=age_days), None, accesses)


def tally(**events: float) -> FeedbackTally:
    """Feedback of one memory: each event given once with the given score."""
    return FeedbackTally(dict.fromkeys(events, 1), dict(events))


def score(relevance: float = 0.5, feedback: FeedbackTally | None = None, **kw: float) -> float:
    return PROFILE.terms(relevance, features(**kw), feedback, NOW).total  # type: ignore[arg-type]


# ---------------------------------------------------------------- the formula


def test_the_weights_are_seed_004s_and_a_fresh_neutral_memory_scores_their_sum() -> None:
    assert (PROFILE.relevance, PROFILE.recency, PROFILE.importance, PROFILE.usage) == (0.5, 0.2, 0.2, 0.1)
    terms = PROFILE.terms(1.0, features(importance=1.0), None, NOW)
    assert terms == Terms(relevance=0.5, recency=0.2, importance=0.2, usage=0.0)
    assert terms.total == pytest.approx(0.9)


def test_each_term_moves_the_score_the_documented_way() -> None:
    base = score()
    assert score(relevance=0.9) - base == pytest.approx(0.5 * 0.4)  # relevance: +α per unit
    assert score(importance=0.9) - base == pytest.approx(0.2 * 0.4)  # importance: +γ per unit
    assert score(age_days=30) < base  # older: lower
    assert score(accesses=3) > base  # used: higher
    assert score(accesses=10) - base == pytest.approx(0.1)  # usage saturates at 10 accesses ...
    assert score(accesses=500) == pytest.approx(score(accesses=10))  # ... on a log scale


def test_recency_is_exp_minus_lambda_age() -> None:
    assert recency(NOW, NOW, 0.0231) == 1.0
    assert recency(NOW - timedelta(days=30), NOW, math.log(2) / 30) == pytest.approx(0.5)
    assert recency(NOW + timedelta(days=1), NOW, 0.0231) == 1.0  # a future date is "now"
    assert recency(NOW - timedelta(days=3650), NOW, 0.0) == 1.0  # λ = 0: recency off


def test_usage_is_log_scaled_accesses_moved_by_feedback() -> None:
    assert usage(0, None) == 0.0
    assert usage(1, None) == pytest.approx(math.log(2) / math.log(11))
    one = usage(1, None)
    assert usage(1, tally(helpful=1.0)) > usage(1, tally(used=1.0)) > one  # helpful raises most, used a little
    assert usage(1, tally(not_helpful=1.0)) < usage(1, tally(neglected=1.0)) < one  # not_helpful lowers most
    assert usage(1, tally(edited=1.0)) == one  # a correction says nothing about use
    assert usage(1, tally(helpful=0.2)) < usage(1, tally(helpful=1.0))  # the score is the event's strength
    assert usage(0, tally(not_helpful=1.0)) < 0  # feedback counts even for a memory never recalled
    many = FeedbackTally({"helpful": 100}, {"helpful": 100.0})
    assert usage(10, many) == pytest.approx(1.5) and usage(0, FeedbackTally({"not_helpful": 100}, {"not_helpful": 100.0})) > -0.5001


def test_helpful_and_not_helpful_reorder_two_otherwise_equal_memories() -> None:
    liked = score(accesses=2, feedback=tally(helpful=1.0))
    disliked = score(accesses=2, feedback=tally(not_helpful=1.0))
    assert liked > score(accesses=2) > disliked


def test_a_result_near_identical_to_a_higher_ranked_one_is_penalised() -> None:
    a = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    same = np.array([2.0, 0.0, 0.0], dtype=np.float32)  # the same direction: cosine 1
    close = np.array([0.96, 0.28, 0.0], dtype=np.float32)  # cosine 0.96
    other = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    terms = {k: Terms(0.4, 0.1, 0.1, 0.0) for k in "abcde"}
    out = penalise_duplicates(list("abcde"), terms, {"a": a, "b": same, "c": close, "d": other}, PROFILE)
    assert out["a"].duplication == 0.0  # the first of its kind keeps its score
    assert out["b"].duplication == pytest.approx(0.1)  # ε · cosine 1
    assert out["c"].duplication == pytest.approx(0.1 * 0.96)
    assert out["d"].duplication == 0.0 and out["e"].duplication == 0.0  # unlike anything; no vector
    assert out["b"].total == pytest.approx(terms["b"].total - 0.1)
    loose = Profile004(duplicate_similarity=0.99)
    assert penalise_duplicates(list("ac"), terms, {"a": a, "c": close}, loose)["c"].duplication == 0.0
    assert penalise_duplicates(list("ab"), terms, {"a": a, "b": same}, Profile004(duplication=0.0))["b"].duplication == 0.0


def test_why_names_every_terms_share() -> None:
    terms = Terms(0.41, 0.12, 0.14, 0.03, 0.0)
    assert terms.why() == "relevance 0.41 + recency 0.12 + importance 0.14 + usage 0.03 - dup 0.00"
    assert WHY.match(Terms(0.5, 0.2, 0.2, -0.02, 0.1).why())


# ---------------------------------------------------------------- through the service, on both backends


@pytest.fixture
def profiled(settings: Settings, clock: Clock) -> Iterator[App]:
    """An app on the test's store with MEMENTO_SCORE_PROFILE=004."""
    built = build_app(settings.model_copy(update={"score_profile": "004"}), embedder=HashEmbedder(256), clock=clock)
    yield built
    built.close()


@pytest.fixture
def profiled_ties(settings: Settings, clock: Clock) -> Iterator[App]:
    """profiled, with relevance from rank fusion and no conversational context: memories a query
    finds about equally well get about equal relevance, so what the profile adds (usage, the
    duplication penalty) decides their order. (Score fusion and context would part them by the
    hash embedder's noise and by where each was written.)"""
    ranking = RankingConfig(fusion="rrf", semanticWeight=0.3, contextBefore=0.0, contextAfter=0.0)
    configured = settings.model_copy(update={"score_profile": "004", "memory": MemoryConfig(ranking=ranking)})
    built = build_app(configured, embedder=HashEmbedder(256), clock=clock)
    yield built
    built.close()


def remember(service: MemoryService, content: str, ctx: CallContext | None = None, **kw: object) -> str:
    payload = {"topic": "ops", "type": "fact", **kw, "content": content}
    return service.remember(RememberInput.model_validate(payload), ctx or CallContext()).id


def recall(service: MemoryService, text: str, ctx: CallContext | None = None, **kw: object) -> list[tuple[str, str]]:
    found = service.recall(RecallInput.model_validate({"text": text, "includeLinks": False, "verbose": True, **kw}), ctx or CallContext())
    return [(f.id, f.recall_reason) for f in found.fragments]


def feedback(service: MemoryService, fid: str, event: str, ctx: CallContext | None = None, **kw: object) -> dict[str, int]:
    out = service.feedback(FeedbackInput.model_validate({"id": fid, "event": event, **kw}), ctx or CallContext())
    return out.counts


def test_feedback_reorders_results_under_profile_004(profiled_ties: App) -> None:
    service = profiled_ties.service
    first = remember(service, "the nightly backup job writes to the cobalt bucket")
    second = remember(service, "the weekly backup job writes to the amber bucket")
    before = [fid for fid, _ in recall(service, "backup job bucket")]
    assert set(before) == {first, second}
    top, below = before
    for _ in range(3):
        feedback(service, top, "not_helpful")
        feedback(service, below, "helpful")
    service.store.flush_access()
    after = recall(service, "backup job bucket")
    assert [fid for fid, _ in after] == [below, top]
    assert all(WHY.match(why) for _, why in after), after
    usage_of = {fid: float(why.split("usage ")[1].split(" ")[0]) for fid, why in after}
    assert usage_of[below] > usage_of[top]


def test_a_near_identical_lower_result_is_penalised_and_says_so(profiled_ties: App) -> None:
    service = profiled_ties.service
    original = remember(service, "Harbour crane seven is painted red.", importance=0.6)
    copy = remember(service, "harbour crane seven is painted red!", importance=0.5)  # another text, the same words
    distinct = remember(service, "harbour crane eight is painted blue", importance=0.5)
    assert len({original, copy, distinct}) == 3
    found = dict(recall(service, "harbour crane painted"))
    assert found[original].endswith("dup 0.00")
    assert found[copy].endswith("dup 0.10")  # identical words: cosine 1 with the hash embedder
    assert found[distinct].endswith("dup 0.00")


def test_profile_004_orders_a_listing_and_the_default_profile_keeps_000s_reasons(
    settings: Settings, clock: Clock, service: MemoryService
) -> None:
    listing = MemoryConfig(ranking=RankingConfig(activationThreshold=0))  # rank even a small listing
    app = build_app(settings.model_copy(update={"score_profile": "004", "memory": listing}), embedder=HashEmbedder(256), clock=clock)
    try:
        minor = remember(app.service, "the kettle is in the second kitchen", importance=0.1)
        important = remember(app.service, "rotate the signing keys every quarter", importance=0.9)
        listed = app.service.recall(RecallInput(topic="ops", verbose=True), CallContext())
        assert [f.id for f in listed.fragments] == [important, minor]
        assert all(WHY.match(f.recall_reason) and f.recall_reason.startswith("relevance 0.00") for f in listed.fragments)
    finally:
        app.close()
    # the default profile (another store): 000's reasons
    remember(service, "rotate the signing keys every quarter")
    assert recall(service, "signing keys")[0][1].startswith(("keyword match", "full-text rank", "semantic similarity"))


def test_search_modes_keep_001s_score_under_profile_004(profiled: App) -> None:
    remember(profiled.service, "the harbour crane is painted red")
    found = profiled.service.recall(RecallInput(text="harbour crane", mode="keyword", verbose=True), CallContext())
    assert found.fragments and "confidence" in found.fragments[0].recall_reason and "usage" not in found.fragments[0].recall_reason


# ---------------------------------------------------------------- the feedback operation


def test_feedback_is_recorded_counted_and_shown(service: MemoryService) -> None:
    fid = remember(service, "deploys freeze on fridays")
    assert feedback(service, fid, "helpful") == {"helpful": 1}
    assert feedback(service, fid, "helpful", score=0.4, note="the freeze starts at noon") == {"helpful": 2}
    assert feedback(service, fid, "not_helpful") == {"helpful": 2, "not_helpful": 1}
    verbose = service.recall(RecallInput(text="deploys freeze fridays", verbose=True), CallContext()).dump()
    assert verbose["fragments"][0]["feedback"] == {"helpful": 2, "not_helpful": 1}
    compact = service.recall(RecallInput(text="deploys freeze fridays"), CallContext()).dump()
    assert "feedback" not in compact["fragments"][0]  # compact results stay small
    stats = service.memory_stats(MemoryStatsInput(), CallContext())
    assert stats.feedback == {"helpful": 2, "not_helpful": 1}


def test_feedback_needs_a_memory_the_caller_sees_and_is_the_callers_own(service: MemoryService) -> None:
    alice, bob = CallContext(agent_id="alice"), CallContext(agent_id="bob")
    bobs = remember(service, "bob's lunch is at one", bob)
    shared = remember(service, "the office closes at six")  # the shared pool: every agent sees it
    with pytest.raises(NotFound):
        feedback(service, bobs, "helpful", alice)
    with pytest.raises(NotFound):
        feedback(service, "frag-doesnotexist", "helpful", alice)
    assert feedback(service, shared, "helpful", alice) == {"helpful": 1}
    assert feedback(service, shared, "not_helpful", bob) == {"not_helpful": 1}  # bob's rows are bob's
    assert service.memory_stats(MemoryStatsInput(), alice).feedback == {"helpful": 1}
    with pytest.raises(Forbidden):
        feedback(service, shared, "helpful", CallContext(agent_id="alice", read_only=True))
    with pytest.raises(Forbidden):
        feedback(service, bobs, "helpful", alice, agentId="bob")
    assert service.memory_stats(MemoryStatsInput(), bob).feedback == {"not_helpful": 1}


def test_bad_feedback_is_refused_and_changes_nothing(service: MemoryService) -> None:
    fid = remember(service, "the build cache lives on the second disk")
    for bad in ({"event": "loved"}, {"event": "helpful", "score": 1.5}, {"event": "helpful", "score": -0.1}, {"event": "helpful", "x": 1}):
        with pytest.raises(ValueError):
            FeedbackInput.model_validate({"id": fid, **bad})
    assert service.memory_stats(MemoryStatsInput(), CallContext()).feedback is None


def test_a_note_is_masked_like_content_and_goes_with_its_memory(service: MemoryService, app: App) -> None:
    fid = remember(service, "the on-call phone rotates weekly")
    feedback(service, fid, "edited", note="call alice@example.com instead")
    (row,) = app.store.export_rows("feedback_events", 0, 10)
    assert row["fragment_id"] == fid and row["event"] == "edited" and row["score"] == 1.0 and row["agent_id"] == "default"
    assert "alice@example.com" not in str(row["note"]) and "instead" in str(row["note"])
    service.forget(ForgetInput(id=fid), CallContext())  # soft: restorable, so its feedback stays
    assert len(app.store.export_rows("feedback_events", 0, 10)) == 1
    service.forget(ForgetInput(id=fid, mode="hard"), CallContext())
    assert app.store.export_rows("feedback_events", 0, 10) == []  # erased with the memory
