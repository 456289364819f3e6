"""The ranking levers of issue 14: score fusion, conversational context (memories written
beside a candidate lend it relevance; retrieval/neighbours.py over storage/sequence.py) and
the time a query names (retrieval/temporal.py). Behaviour on both backends; figures live in
bench/locomo.py --ablation."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from conftest import Clock

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, ForgetInput, FragmentType, RecallInput, RememberInput
from memento.retrieval.neighbours import CONTEXT_EXPAND, add_context
from memento.retrieval.rank import Candidate, Scale, fuse, fuse_linear
from memento.retrieval.temporal import Span, named_span
from memento.settings import MemoryConfig, RankingConfig, Settings
from memento.storage.protocol import Hit, SearchFilter

both = pytest.mark.backends("sqlite", "postgres")  # the tests that touch a store run on both

NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)  # a Monday


def build(settings: Settings, clock: Clock, vectors: bool = True, **ranking: Any) -> App:
    """An app with these ranking settings; `vectors` False: the keyword tiers only, so what no
    word of the query reaches can only come through context."""
    configured = settings.model_copy(update={"memory": MemoryConfig(ranking=RankingConfig(**ranking))})
    if not vectors:
        configured = configured.model_copy(update={"embedding_provider": "none"})
    return build_app(configured, embedder=HashEmbedder(256) if vectors else None, clock=clock)


@pytest.fixture
def plain(settings: Settings, clock: Clock) -> Iterator[App]:
    clock.now = NOW
    app = build(settings, clock)
    yield app
    app.close()


def remember(app: App, content: str, ctx: CallContext | None = None, **kw: Any) -> str:
    payload = {"topic": "chat", "type": "fact", **kw, "content": content}
    return str(app.service.remember(RememberInput.model_validate(payload), ctx or CallContext()).id)


def recall(app: App, text: str, ctx: CallContext | None = None, **kw: Any) -> list[Any]:
    app.service.settle(30)
    return list(app.service.recall(RecallInput.model_validate({"text": text, "limit": 10, **kw}), ctx or CallContext()).fragments)


def conversation(app: App, at: datetime, ctx: CallContext | None = None, topic: str = "chat") -> dict[str, str]:
    """A question and the answer written right after it that shares none of its words, amid
    unrelated memories."""
    ids = {
        "before": remember(app, "Nina: the weather turned cold this weekend", ctx, topic=topic, createdAt=at.isoformat()),
        "question": remember(app, "Omar: which football club do you support these days?", ctx, topic=topic, createdAt=at.isoformat()),
        "answer": remember(app, "Nina: Manchester City, since I was a kid!", ctx, topic=topic, createdAt=at.isoformat()),
        "after": remember(app, "Omar: I should water the plants tonight", ctx, topic=topic, createdAt=at.isoformat()),
    }
    for i in range(6):
        remember(
            app,
            f"unrelated note {i}: invoices are due on the {i + 3}th",
            ctx,
            topic="admin",
            createdAt=(at - timedelta(days=40)).isoformat(),
        )
    return ids


# --------------------------------------------------------------------- fusion


def test_linear_fusion_keeps_a_clear_winner_ahead_of_a_near_tie() -> None:
    tiers = {"text": [Hit("a", 10.0), Hit("b", 1.0)], "semantic": [Hit("b", 0.81), Hit("a", 0.80), Hit("c", 0.70)]}
    linear, scale = fuse_linear(tiers, {"semantic": 0.75})
    assert max(linear.values(), key=lambda c: c.relevance).id == "a"  # a text score ten times b's outweighs a 0.01 cosine edge
    assert scale == Scale(0.70, 0.81, 0.75)
    assert linear["c"].relevance == pytest.approx(0.0)  # the weakest similarity of the pool counts nothing
    assert linear["a"].matched == {"text": 1, "semantic": 2} and linear["a"].similarity == 0.80
    ranks = fuse(tiers, {"semantic": 1.0})  # rank fusion: first in one list, second in the other, a tie
    assert ranks["a"].relevance == pytest.approx(ranks["b"].relevance)


def test_the_semantic_scale_places_later_vectors_on_the_same_footing() -> None:
    scale = Scale(0.5, 0.9, 1.0)
    assert scale.of(0.9) == pytest.approx(1.0) and scale.of(0.7) == pytest.approx(0.5)
    assert scale.of(0.2) == 0.0  # below the pool: nothing, never negative
    assert Scale(0.8, 0.8, 0.5).of(0.8) == 0.5 and Scale(0.8, 0.8, 0.5).of(0.7) == 0.0


# --------------------------------------------------------------------- time named in a query


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("What did Mia do on 3 June, 2026?", date(2026, 6, 3), date(2026, 6, 3)),
        ("What happened on June 3rd, 2025?", date(2025, 6, 3), date(2025, 6, 3)),
        ("deploys on 2026-02-28", date(2026, 2, 28), date(2026, 2, 28)),
        ("Where did she travel in May 2025?", date(2025, 5, 1), date(2025, 5, 31)),
        ("Where did she travel in May?", date(2026, 5, 1), date(2026, 5, 31)),
        ("what did we decide in September", date(2025, 9, 1), date(2025, 9, 30)),
        ("conferences during 2024", date(2024, 1, 1), date(2024, 12, 31)),
        ("what did I fix yesterday", date(2026, 6, 14), date(2026, 6, 14)),
        ("notes from last week", date(2026, 6, 8), date(2026, 6, 14)),
        ("what broke last month", date(2026, 5, 1), date(2026, 5, 31)),
        ("the outage two weeks ago", date(2026, 5, 29), date(2026, 6, 4)),
        ("2025년 5월에 어디 갔었지?", date(2025, 5, 1), date(2025, 5, 31)),
        ("2026년 6월 3일 회의 내용", date(2026, 6, 3), date(2026, 6, 3)),
        ("어제 고친 버그", date(2026, 6, 14), date(2026, 6, 14)),
        ("지난주에 정한 것", date(2026, 6, 8), date(2026, 6, 14)),
        ("7월에 간 캠핑", date(2025, 7, 1), date(2025, 7, 31)),
    ],
)
def test_the_time_a_query_names(query: str, first: date, last: date) -> None:
    assert named_span(query, NOW) == Span(first, last)


@pytest.mark.parametrize("query", ["may I ask where the keys are", "which port does the api use", "the 31 flavours shop", "version 2.31"])
def test_queries_naming_no_time(query: str) -> None:
    assert named_span(query, NOW) is None


def test_a_span_runs_on_for_the_slack_days() -> None:
    span = Span(date(2026, 5, 1), date(2026, 5, 31))
    assert span.holds(datetime(2026, 6, 5, tzinfo=UTC), 7) and not span.holds(datetime(2026, 6, 9, tzinfo=UTC), 7)
    assert not span.holds(datetime(2026, 4, 30, tzinfo=UTC), 7)


@both
def test_a_recall_naming_a_time_prefers_memories_created_then(settings: Settings, clock: Clock) -> None:
    clock.now = NOW
    app = build(settings, clock)
    try:
        may = remember(app, "went hiking with the team near the lake", createdAt=datetime(2026, 5, 10, tzinfo=UTC).isoformat(), topic="may")
        march = remember(
            app, "went hiking with the team near the lake!", createdAt=datetime(2026, 3, 10, tzinfo=UTC).isoformat(), topic="march"
        )
        found = recall(app, "where did we go hiking in May?", verbose=True)
        assert [f.id for f in found][:2] == [may, march]
        assert "created in the time asked about" in (found[0].recall_reason or "")
        found = recall(app, "where did we go hiking in March?", verbose=True)
        assert [f.id for f in found][:2] == [march, may]
    finally:
        app.close()
    off = build(settings, clock, temporalBoost=0.0)
    try:
        remember(off, "went hiking with the team near the lake", createdAt=datetime(2026, 5, 10, tzinfo=UTC).isoformat(), topic="may")
        remember(off, "went hiking with the team near the lake!", createdAt=datetime(2026, 3, 10, tzinfo=UTC).isoformat(), topic="march")
        assert all(
            "created in the time" not in (f.recall_reason or "") for f in recall(off, "where did we go hiking in May?", verbose=True)
        )
    finally:
        off.close()


# --------------------------------------------------------------------- conversational context


@both
@pytest.mark.parametrize("context", [True, False])
def test_an_answer_is_found_through_the_question_written_before_it(settings: Settings, clock: Clock, context: bool) -> None:
    clock.now = NOW
    weights = {} if context else {"contextBefore": 0.0, "contextAfter": 0.0}
    app = build(settings, clock, vectors=False, **weights)
    try:
        ids = conversation(app, NOW - timedelta(days=3))
        found = recall(app, "Which football club does she support?", verbose=True)
        got = [f.id for f in found]
        if not context:
            assert got == [ids["question"]]
            return
        assert got[:3] == [ids["question"], ids["answer"], ids["after"]]  # right after the question lends most, two after a little less
        assert ids["before"] in got
        answer = next(f for f in found if f.id == ids["answer"])
        assert "conversation context" in (answer.recall_reason or "") and answer.similarity is None
    finally:
        app.close()


@both
@pytest.mark.parametrize("reach", [1, 2])
def test_context_reaches_as_far_as_asked(settings: Settings, clock: Clock, reach: int) -> None:
    """The answer two memories after the question: found with contextReach 2, not with 1."""
    clock.now = NOW
    app = build(settings, clock, vectors=False, contextReach=reach)
    try:
        at = (NOW - timedelta(days=1)).isoformat()
        question = remember(app, "Omar: which football club do you support these days?", createdAt=at)
        remember(app, "Omar: sorry, the line is bad", createdAt=at)
        answer = remember(app, "Nina: Manchester City, since I was a kid!", createdAt=at)
        got = [f.id for f in recall(app, "Which football club does she support?")]
        assert got[0] == question
        assert (answer in got) is (reach == 2)
    finally:
        app.close()


@both
def test_context_stops_at_the_window_the_topic_and_the_session(plain: App) -> None:
    at = NOW - timedelta(days=3)
    question = remember(plain, "Omar: which football club do you support these days?", createdAt=at.isoformat())
    late = remember(plain, "Nina: Manchester City, since I was a kid!", createdAt=(at + timedelta(hours=3)).isoformat())
    other_topic = remember(plain, "Nina: Arsenal, of course!", topic="elsewhere", createdAt=at.isoformat())
    scope = plain.service._scope(None, CallContext())
    found = plain.store.sequence_neighbours(scope, [question, late, other_topic], SearchFilter(), timedelta(minutes=60))
    assert found[question].previous is None and found[question].next is None  # the next one in writing order is 3 h later
    assert found[late].previous is None
    assert found[other_topic].previous is None and found[other_topic].next is None
    wide = plain.store.sequence_neighbours(scope, [question], SearchFilter(), timedelta(hours=4))
    assert wide[question].next == late


@both
def test_neighbours_skip_forgotten_and_filtered_memories(plain: App) -> None:
    at = (NOW - timedelta(days=1)).isoformat()
    first = remember(plain, "first line", createdAt=at)
    gone = remember(plain, "second line", createdAt=at)
    decision = remember(plain, "third line", createdAt=at, type="decision")
    last = remember(plain, "fourth line", createdAt=at)
    plain.service.forget(ForgetInput(id=gone), CallContext())
    scope = plain.service._scope(None, CallContext())
    found = plain.store.sequence_neighbours(scope, [first, decision, last], SearchFilter(), timedelta(minutes=60))
    assert found[first].next == decision and found[decision].previous == first and found[decision].next == last
    facts = SearchFilter(types=(FragmentType.FACT,))
    only_facts = plain.store.sequence_neighbours(scope, [first], facts, timedelta(minutes=60))
    assert only_facts[first].next == last  # the decision does not pass the recall's filter


@both
def test_with_a_narrowing_filter_a_neighbour_is_looked_for_a_few_rows_away_only(plain: App) -> None:
    """A filtered recall's probe takes the first row that passes among the FILTERED_REACH nearest
    of the conversation: a decision written six rows after a fact is its neighbour for a
    decisions-only recall; one written twenty rows later is not (reaching it read every row
    between, ~0.1 s a recall at a million memories). Unfiltered, the nearest row is taken."""
    at = (NOW - timedelta(days=1)).isoformat()
    first = remember(plain, "fact line 0", createdAt=at)
    lines = [remember(plain, f"fact line {i}", createdAt=at) for i in range(1, 30)]
    near = remember(plain, "near decision", createdAt=at, type="decision")  # 6 rows after lines[23], 30 after first
    scope = plain.service._scope(None, CallContext())
    decisions = SearchFilter(types=(FragmentType.DECISION,))
    for steps in (1, 2):  # recall reads two steps a statement
        found = plain.store.sequence_neighbours(scope, [lines[23], first], decisions, timedelta(minutes=60), steps)
        assert found[lines[23]].next == near  # within reach
        assert found[first].next is None  # the decision is 30 rows on
    two = plain.store.sequence_neighbours(scope, [lines[23]], decisions, timedelta(minutes=60), 2)
    assert two[near].previous is None and two[near].next is None  # its own entry: no decision near it either side
    plain_found = plain.store.sequence_neighbours(scope, [first], SearchFilter(), timedelta(minutes=60))
    assert plain_found[first].next == lines[0]


@both
def test_two_steps_in_one_read_give_what_asking_again_gives(plain: App) -> None:
    # Recall reaches two memories each way: one statement gives the entries of the asked memories
    # and of the ones they name, exactly as a second statement for those would.
    at = NOW - timedelta(days=1)
    lines = [
        remember(plain, f"line {i} of the talk", createdAt=(at + timedelta(minutes=i)).isoformat(), type="decision" if i == 4 else "fact")
        for i in range(9)
    ]
    late = remember(plain, "a line much later", createdAt=(at + timedelta(hours=5)).isoformat())
    plain.service.forget(ForgetInput(id=lines[6]), CallContext())
    scope = plain.service._scope(None, CallContext())
    window = timedelta(minutes=60)
    for filt in (SearchFilter(), SearchFilter(types=(FragmentType.FACT,))):
        for asked in ([lines[2]], [lines[4]], [lines[0], lines[5], lines[8]], [lines[1], lines[2], lines[3]], [late, lines[7]]):
            one = plain.store.sequence_neighbours(scope, asked, filt, window)
            named = sorted({n for nb in one.values() for n in (nb.previous, nb.next) if n is not None})
            want = {**plain.store.sequence_neighbours(scope, named, filt, window), **one}
            got = plain.store.sequence_neighbours(scope, asked, filt, window, steps=2)
            assert {k: got[k] for k in want} == want, (filt, asked)
    # The decision (line 4) is left out by the filter: lines 3 and 5 are each other's neighbours.
    facts = plain.store.sequence_neighbours(scope, [lines[4]], SearchFilter(types=(FragmentType.FACT,)), window, steps=2)
    assert facts[lines[3]].next == lines[5] and facts[lines[5]].previous == lines[3]
    assert facts[lines[5]].next == lines[7]  # line 6 was forgotten


@both
def test_another_agents_memories_are_never_neighbours(plain: App) -> None:
    at = NOW - timedelta(days=2)
    a, b = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")
    question = remember(plain, "Omar: which football club do you support these days?", a, createdAt=at.isoformat())
    secret = remember(plain, "Nina: my bank PIN is 4321", b, createdAt=at.isoformat())
    answer = remember(plain, "Nina: Manchester City, since I was a kid!", a, createdAt=at.isoformat())
    scope_a = plain.service._scope(None, a)
    found = plain.store.sequence_neighbours(scope_a, [question, secret], SearchFilter(), timedelta(minutes=60))
    assert secret not in found  # not visible: no neighbours asked for it either
    assert found[question].next == answer
    scope_b = plain.service._scope(None, b)
    assert plain.store.sequence_neighbours(scope_b, [secret], SearchFilter(), timedelta(minutes=60))[secret] == type(found[question])(
        None, None
    )
    for f in recall(plain, "Which football club does Nina support? PIN", a):
        assert f.id != secret
    assert answer in [f.id for f in recall(plain, "Which football club does Nina support?", a)]


@both
def test_keywords_alone_admit_no_neighbour(plain: App) -> None:
    ids = conversation(plain, NOW - timedelta(days=3))
    result = plain.service.recall(RecallInput(keywords=["football"], includeLinks=False), CallContext())
    assert [f.id for f in result.fragments] == [ids["question"]]


@both
def test_the_vector_of_a_context_neighbour_is_its_own(plain: App) -> None:
    """A neighbour found through context carries its own similarity to the query."""
    ids = conversation(plain, NOW - timedelta(days=3))
    found = recall(plain, "Which football club does Nina support?", verbose=True)
    answer = next(f for f in found if f.id == ids["answer"])
    scope = plain.service._scope(None, CallContext())
    vector = plain.store.embeddings_of(scope, [ids["answer"]])[ids["answer"]]
    query = HashEmbedder(256).embed_query("Which football club does Nina support?")
    assert answer.similarity == pytest.approx(round(float(np.dot(vector, query)), 4), abs=1e-3)


class _Recorded:
    """ContextReads that answers nothing and records which ids each neighbour read asked about."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def sequence_neighbours(self, scope: Any, ids: Any, filt: Any, window: Any, steps: int = 1) -> dict[str, Any]:
        self.asked.append(list(ids))
        return {}

    def embeddings_of(self, scope: Any, ids: Any) -> dict[str, np.ndarray]:
        return {}


@pytest.mark.parametrize("limit", [1, 10, CONTEXT_EXPAND, 45])
def test_context_looks_around_the_best_candidates_only(limit: int) -> None:
    """The neighbour reads start from the best CONTEXT_EXPAND candidates, or the recall's limit
    when that is more: what the reads cost does not grow with the tiers' pools."""
    cands = {f"m{i:03d}": Candidate(f"m{i:03d}", relevance=1.0 - i / 200) for i in range(120)}
    reads = _Recorded()
    add_context(reads, AgentScope("a"), cands, SearchFilter(), None, None, RankingConfig(), limit)
    expected = max(CONTEXT_EXPAND, limit)
    assert reads.asked and sorted(reads.asked[0]) == [f"m{i:03d}" for i in range(expected)]


@both
def test_the_store_answers_for_many_ids_at_once(plain: App) -> None:
    at = (NOW - timedelta(days=1)).isoformat()
    ids = [remember(plain, f"line number {i} of a long talk", createdAt=at) for i in range(450)]
    scope = plain.service._scope(None, CallContext())
    found = plain.store.sequence_neighbours(scope, ids, SearchFilter(), timedelta(minutes=60))
    assert len(found) == 450
    assert all(found[ids[i]].next == ids[i + 1] and found[ids[i + 1]].previous == ids[i] for i in range(449))
