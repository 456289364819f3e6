"""Sleep consolidation, spaced review and the forget queue (004 §4.2-4.3, migration 0018), on both
backends: clusters of recent episodes become one semantic memory linked `derived_from` each
episode; a contradicting cluster gets a `contradicts` link instead; a second run integrates
nothing new; namespaces never mix; review intervals grow with the (injected) clock; `context`
and the 003 context call show due reviews within their budgets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pysqlite3.dbapi2 as sqlite3
import pytest
from conftest import Clock
from migration_helpers import sqlite_store_before

from memento.errors import NotFound
from memento.lifecycle.consolidate import STAGES
from memento.lifecycle.sleep_text import texts_conflict
from memento.models import (
    AgentScope,
    CallContext,
    ConsolidateInput,
    ContextInput,
    ForgetInput,
    Fragment,
    LinkInput,
    MemoryStatsInput,
    MemorySystem,
    RecallInput,
    RelationType,
    RememberInput,
)
from memento.protocol_face.context import ContextCallInput
from memento.results import ConsolidateResult
from memento.service import MemoryService
from memento.storage.protocol import ReviewCard, ReviewStore, SearchFilter
from memento.storage.sqlite import SQLiteStore

pytestmark = pytest.mark.backends("sqlite", "postgres")

A = CallContext(agent_id="agent-a")
B = CallContext(agent_id="agent-b")
OPERATOR = CallContext()
VPN = (
    "Standup: the deploy script needs the VPN to reach the build server. We retried twice.",
    "Friday release: the deploy script needs the VPN to reach the build server. Alice fixed the config.",
    "Hotfix night: the deploy script needs the VPN to reach the build server.",
)
PORTS = ("Checked the API: it listens on port 8080 in staging.", "Checked the API again: it listens on port 9090 in staging.")


def remember(service: MemoryService, content: str, ctx: CallContext = A, **fields: Any) -> str:
    payload = {"topic": "deploys", "type": "episode", **fields, "content": content}
    return str(service.remember(RememberInput.model_validate(payload), ctx).id)


def consolidate(service: MemoryService, ctx: CallContext = OPERATOR) -> ConsolidateResult:
    """Every stage but 001's merge, which would first fold these near-identical episodes into one."""
    stages = [stage for stage in STAGES if stage != "merged"]
    return service.memory_consolidate(ConsolidateInput.model_validate({"stages": stages}), ctx)


def semantic(service: MemoryService, agent: str) -> list[Fragment]:
    filt = SearchFilter(memory_system=MemorySystem.SEMANTIC, source="sleep", owner=agent)
    return service.store.list_fragments(AgentScope(agent), filt, 100)


def linked(service: MemoryService, agent: str, fragment_id: str, relation: RelationType) -> set[str]:
    found = service.store.neighbours(AgentScope(agent), [fragment_id], (relation,), 100)
    return {link.to_id if link.from_id == fragment_id else link.from_id for link, _ in found}


def cards(service: MemoryService, agent: str) -> dict[str, ReviewCard]:
    store: ReviewStore = service.review_store
    return {c.fragment_id: c for c in store.review_cards(AgentScope(agent), None, 1000)}


# ---------------------------------------------------------------- sleep consolidation


def test_a_cluster_of_episodes_becomes_one_semantic_memory_derived_from_each(service: MemoryService) -> None:
    episodes = [remember(service, text) for text in VPN]
    other = remember(service, "Lunch order: pizza for the team on Thursday.")
    result = consolidate(service)
    assert (result.sleep_consolidated, result.sleep_contradictions) == (1, 0)
    [made] = semantic(service, "agent-a")
    assert made.content.startswith("Standup: the deploy script needs the VPN to reach the build server.")
    assert "(from 3 episodes, 2026-01-01)" in made.content and "Alice" not in made.content  # only what all share
    assert made.memory_system is MemorySystem.SEMANTIC and "source:sleep" in made.tags and made.topic == "deploys"
    assert made.origin_trace == {"stage": "sleep_consolidated", "method": "extractive", "derivedFrom": episodes}
    assert linked(service, "agent-a", made.id, RelationType.DERIVED_FROM) == set(episodes)
    kept = service.store.get_many(AgentScope("agent-a"), [*episodes, other])
    assert [f.memory_system for f in kept] == [MemorySystem.EPISODIC] * 4  # the sources stay, as they were


def test_running_twice_integrates_nothing_new(service: MemoryService, clock: Clock) -> None:
    for text in VPN:
        remember(service, text)
    assert consolidate(service).sleep_consolidated == 1
    assert consolidate(service).sleep_consolidated == 0
    clock.now += timedelta(hours=1)
    remember(service, "Late deploy: the deploy script needs the VPN to reach the build server.")
    assert consolidate(service).sleep_consolidated == 0  # one new episode is no cluster; the others are integrated
    remember(service, "Night deploy: the deploy script needs the VPN to reach the build server.")
    assert consolidate(service).sleep_consolidated == 1
    assert len(semantic(service, "agent-a")) == 2


def test_a_forgotten_semantic_memory_is_not_made_again(service: MemoryService) -> None:
    for text in VPN:
        remember(service, text)
    consolidate(service)
    [made] = semantic(service, "agent-a")
    service.forget(ForgetInput(id=made.id), A)
    assert consolidate(service).sleep_consolidated == 0 and semantic(service, "agent-a") == []


def test_a_contradicting_cluster_is_not_integrated_and_gets_a_contradicts_link(service: MemoryService) -> None:
    first, second = (remember(service, text) for text in PORTS)
    result = consolidate(service)
    assert (result.sleep_consolidated, result.sleep_contradictions) == (0, 1)
    assert linked(service, "agent-a", second, RelationType.CONTRADICTS) == {first}
    again = consolidate(service)
    assert (again.sleep_consolidated, again.sleep_contradictions) == (0, 0)  # linked once; still not integrated
    assert semantic(service, "agent-a") == []


def test_a_cluster_with_a_contradicts_link_inside_is_not_integrated(service: MemoryService) -> None:
    ids = [remember(service, text) for text in VPN]
    service.link(LinkInput(fromId=ids[2], toId=ids[0], relationType=RelationType.CONTRADICTS), A)
    assert consolidate(service).sleep_consolidated == 0


def test_namespaces_never_mix(service: MemoryService) -> None:
    remember(service, VPN[0], A)
    remember(service, VPN[1], B)  # one episode each: no namespace has a cluster
    assert consolidate(service).sleep_consolidated == 0
    remember(service, VPN[2], A)
    remember(service, VPN[2], B)
    assert consolidate(service, B).sleep_consolidated == 1  # an agent's run covers its own namespace only
    assert semantic(service, "agent-a") == [] and len(semantic(service, "agent-b")) == 1
    assert consolidate(service).sleep_consolidated == 1
    [made_a], [made_b] = semantic(service, "agent-a"), semantic(service, "agent-b")
    own_a = {f.id for f in service.store.list_fragments(AgentScope("agent-a"), SearchFilter(owner="agent-a"), 100)}
    assert linked(service, "agent-a", made_a.id, RelationType.DERIVED_FROM) <= own_a
    assert made_b.id not in {f.id for f in service.recall(RecallInput(text="deploy script VPN"), A).fragments}


def test_pinned_and_anchored_episodes_are_sources_and_stay_unchanged(service: MemoryService) -> None:
    pinned = remember(service, VPN[0], record={"pinned": True})
    anchor = remember(service, VPN[1], isAnchor=True)
    before = service.store.get_many(AgentScope("agent-a"), [pinned, anchor])
    assert consolidate(service).sleep_consolidated == 1
    after = service.store.get_many(AgentScope("agent-a"), [pinned, anchor])
    assert [(f.content, f.pinned, f.is_anchor, f.importance) for f in after] == [
        (f.content, f.pinned, f.is_anchor, f.importance) for f in before
    ]


def test_old_episodes_outside_the_window_stay_episodic(service: MemoryService, clock: Clock) -> None:
    for text in VPN:
        remember(service, text)
    clock.now += timedelta(days=8)  # MEMENTO_SLEEP_WINDOW_DAYS: 7
    assert consolidate(service).sleep_consolidated == 0


def test_a_language_model_drafts_the_statement_and_an_invented_number_falls_back(service: MemoryService) -> None:
    answers = iter(
        [
            json.dumps({"statement": "Deploys need the VPN to reach build server 42"}),  # 42 is in no episode
            json.dumps({"statement": "Deploys need the VPN to reach the build server"}),
        ]
    )

    def model(prompt: str, system: str | None, max_tokens: int) -> str:
        assert "EPISODES:" in prompt and system is not None
        return next(answers)

    service.protocol.llm = model
    for text in VPN:
        remember(service, text)
    assert consolidate(service).sleep_consolidated == 1
    [first] = semantic(service, "agent-a")
    assert first.origin_trace is not None and first.origin_trace["method"] == "extractive"  # the invented number: not used
    for text in (
        "Monday: the deploy script needs the VPN to reach the build server.",
        "Tuesday: the deploy script needs the VPN to reach the build server.",
    ):
        remember(service, text)
    assert consolidate(service).sleep_consolidated == 1
    drafted = [f for f in semantic(service, "agent-a") if f.id != first.id]
    assert drafted[0].content == "Deploys need the VPN to reach the build server. (from 2 episodes, 2026-01-01)"
    assert drafted[0].origin_trace is not None and drafted[0].origin_trace["method"] == "llm"


# ---------------------------------------------------------------- the new link types


def test_the_new_relation_types_are_links_like_any_other(service: MemoryService) -> None:
    a, b = remember(service, "Fact one about caching."), remember(service, "Fact two about caching.")
    service.link(LinkInput(fromId=a, toId=b, relationType=RelationType.DERIVED_FROM), A)
    assert linked(service, "agent-a", a, RelationType.DERIVED_FROM) == {b}
    service.link(LinkInput(fromId=a, toId=b, relationType=RelationType.DUPLICATES), A)
    assert linked(service, "agent-a", a, RelationType.DUPLICATES) == {b}
    with pytest.raises(ValueError):
        LinkInput.model_validate({"fromId": a, "toId": b, "relationType": "cause_of_everything"})


@pytest.mark.backends("sqlite")
def test_migration_0018_rebuilds_the_links_table_keeping_every_link(tmp_path: Path) -> None:
    """A store as the release before 0018 left it: its links, ids and counter survive the rebuild."""
    path = tmp_path / "old.db"
    conn = sqlite_store_before(path, "0018", foreign_keys=True)
    for n in range(4):
        conn.execute(
            "INSERT INTO fragments (id, content, topic, type, importance, content_hash, created_at, ttl_tier)"
            " VALUES (?, ?, 't', 'fact', 0.5, ?, '2026-01-01T00:00:00.000000+00:00', 'warm')",
            (f"f{n}", f"text {n}", f"h{n}"),
        )
    links = [("f0", "f1", "caused_by"), ("f1", "f2", "contradicts"), ("f2", "f3", "superseded_by"), ("f3", "f0", "related")]
    for from_id, to_id, relation in links:
        conn.execute(
            "INSERT INTO fragment_links (from_id, to_id, relation_type, created_at) VALUES (?, ?, ?, 'x')", (from_id, to_id, relation)
        )
    conn.execute("DELETE FROM fragment_links WHERE from_id = 'f3'")  # the counter stays at 4
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO fragment_links (from_id, to_id, relation_type, created_at) VALUES ('f0', 'f2', 'derived_from', 'x')")
    conn.close()

    store = SQLiteStore(path, embedding_model=None, dimensions=None)
    try:
        db = store.db.reader()
        assert [tuple(r) for r in db.execute("SELECT id, from_id, to_id, relation_type FROM fragment_links ORDER BY id")] == [
            (1, "f0", "f1", "caused_by"),
            (2, "f1", "f2", "contradicts"),
            (3, "f2", "f3", "superseded_by"),
        ]
        assert "0018_sleep_review.sql" in store.migrations()
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'fragment_links'")}
        assert "fragment_links_to" in indexes
        assert store.add_link(AgentScope("default"), "f0", "f2", RelationType.DERIVED_FROM, datetime.now(UTC))
        assert db.execute("SELECT id FROM fragment_links WHERE relation_type = 'derived_from'").fetchone()[0] == 5  # never reuses 4
        assert db.execute("SELECT COUNT(*) FROM pragma_foreign_key_list('fragment_links')").fetchone()[0] == 2
        store.delete(AgentScope("default"), ["f2"])  # the cascade still holds
        assert db.execute("SELECT COUNT(*) FROM fragment_links").fetchone()[0] == 1
    finally:
        store.close()


# ---------------------------------------------------------------- spaced review


def important(service: MemoryService, ctx: CallContext = A) -> list[str]:
    return [
        remember(service, text, ctx, type="preference", importance=0.9)
        for text in (
            "Prefers tabs over spaces in every repository, including the old ones that still use two-space indentation.",
            "Always runs the linters and the type checker before a commit, and never pushes a red build to the main branch.",
            "Likes short commit messages that say what changed and why, with the ticket number at the very end of the line.",
        )
    ]


def show(service: MemoryService, ctx: CallContext = A, budget: int = 2000) -> list[str]:
    reviews = service.context(ContextInput(tokenBudget=budget), ctx).reviews
    return [r.id for r in reviews or []]


def test_review_intervals_grow_with_the_clock(service: MemoryService, clock: Clock) -> None:
    ids = important(service)
    assert consolidate(service).reviews_scheduled == 3
    assert {c.interval_days for c in cards(service, "agent-a").values()} == {1}
    assert show(service) == []  # not due yet
    seen: list[int] = []
    for step in (1, 3, 7, 14):
        clock.now += timedelta(days=step, minutes=1)
        assert sorted(show(service)) == sorted(ids)
        assert show(service) == []  # shown is reviewed: not due again at once
        seen.append(cards(service, "agent-a")[ids[0]].interval_days)
    assert seen == [3, 7, 14, 30]
    assert {c.reviews for c in cards(service, "agent-a").values()} == {4}


def test_a_recall_since_the_last_review_counts_as_reviewed(service: MemoryService, clock: Clock) -> None:
    ids = important(service)
    consolidate(service)
    clock.now += timedelta(hours=5)
    service.recall(RecallInput(text="tabs over spaces in every repository"), A)
    assert (consolidate(service).reviews_scheduled or 0) >= 1
    card = cards(service, "agent-a")[ids[0]]
    assert (card.reviews, card.interval_days, card.due_at) == (1, 3, clock.now + timedelta(days=3))
    clock.now += timedelta(days=1, minutes=1)
    assert ids[0] not in show(service)


def test_the_most_important_get_cards_pinned_first(service: MemoryService) -> None:
    service.reviews.top = 2
    ids = important(service)
    pinned = remember(service, "Keeps the staging password in the vault.", type="fact", importance=0.1, record={"pinned": True})
    consolidate(service)
    assert pinned in cards(service, "agent-a") and len(cards(service, "agent-a")) == 2
    service.reviews.top = 4
    consolidate(service)
    assert set(cards(service, "agent-a")) == {pinned, *ids}
    service.reviews.top = 1
    consolidate(service)
    assert set(cards(service, "agent-a")) == {pinned}  # the others left the top: their cards go


def test_reviews_are_each_namespaces_own(service: MemoryService, clock: Clock) -> None:
    important(service, A)
    consolidate(service)
    clock.now += timedelta(days=2)
    assert show(service, B) == [] and cards(service, "agent-b") == {}
    assert len(show(service, A)) == 3


def test_context_shows_due_reviews_within_its_budget(service: MemoryService, clock: Clock) -> None:
    important(service)
    consolidate(service)
    clock.now += timedelta(days=2)
    tight = service.context(ContextInput(tokenBudget=120), A)
    assert tight.total_tokens <= 120 and tight.reviews is not None and len(tight.reviews) < 3
    left = {c.fragment_id for c in cards(service, "agent-a").values() if c.interval_days == 1}
    assert len(left) == 3 - len(tight.reviews)  # only what was shown is reviewed
    roomy = service.context(ContextInput(tokenBudget=4000, verbose=True), A)
    assert roomy.reviews is not None and {r.id for r in roomy.reviews} == left
    assert roomy.rendered is not None and "## Due for review" in roomy.rendered and roomy.total_tokens <= 4000


def test_the_003_context_call_shows_due_reviews(service: MemoryService, clock: Clock) -> None:
    ids = important(service)
    consolidate(service)
    clock.now += timedelta(days=2)
    only = service.protocol.context(ContextCallInput(include=["reviews"], token_budget=100), A)
    assert only.reviews is not None and 0 < len(only.reviews) < 3 and only.meta.tokens <= 100 and only.meta.omitted["reviews"] >= 1
    rest = service.protocol.context(ContextCallInput(include=["reviews"]), A)
    assert rest.reviews is not None and {r.id for r in only.reviews + rest.reviews} == set(ids)
    assert service.protocol.context(ContextCallInput(include=["reviews"]), A).reviews == []
    assert service.protocol.context(ContextCallInput(include=["identity"]), A).reviews is None


# ---------------------------------------------------------------- the soft-delete candidate queue


def test_memory_stats_lists_the_forget_candidates(service: MemoryService, clock: Clock) -> None:
    faint = remember(service, "Someone mentioned a cafe once.", type="fact", importance=0.05)
    kept = remember(service, "A pinned faint note.", type="fact", importance=0.05, record={"pinned": True})
    remember(service, "The build uses Python 3.12.", type="fact", importance=0.9)
    assert service.memory_stats(MemoryStatsInput(), A).forget_candidates is None
    clock.now += timedelta(days=31)
    consolidate(service)  # utility recomputed
    stats = service.memory_stats(MemoryStatsInput(), A)
    listed = {c.id for c in stats.forget_candidates or []}
    assert faint in listed and kept not in listed
    assert all(c.utility_score < 0.2 for c in stats.forget_candidates or [])
    assert service.memory_stats(MemoryStatsInput(), B).forget_candidates is None


def test_put_reviews_refuses_another_namespaces_memory(service: MemoryService, clock: Clock) -> None:
    [theirs, *_] = important(service, B)
    card = ReviewCard(theirs, "agent-b", clock.now, 1, 0, None, clock.now)
    with pytest.raises(NotFound):
        service.review_store.put_reviews(AgentScope("agent-a"), [card], ())
    assert cards(service, "agent-b") == {}


@pytest.mark.parametrize(
    ("first", "second", "conflict"),
    [
        (PORTS[0], PORTS[1], True),
        ("The staging database listens on port 5432.", "The staging database now listens on port 6543 after the migration.", True),
        ("The staging database listens on port 5432.", "The staging database does not listen on port 5432.", True),
        ("The cache is enabled in production.", "The cache is disabled in production.", True),
        ("The cache is not disabled in production.", "The cache is enabled in production.", False),
        ("The integration tests passed on main.", "The integration tests failed on main.", True),
        ("Meeting with Bob at 3pm on Friday.", "Meeting with Bob at 4pm on Friday.", True),
        ("캐시가 켜져 있다.", "캐시가 켜져 있지 않다.", True),
        (
            "Build 101 finished: uploaded package alpha to the registry.",
            "Build 102 finished: uploaded package beta to the registry.",
            False,
        ),
        ("fresh note 3: the build 3 ran on runner 21", "fresh note 5: the build 5 ran on runner 35", False),
        ("Deploy the API at 09:30 with 3 replicas.", "Deploy the API at 11:00 with 3 replicas.", True),
        ("(load note 12) Fast JSON parser for Python", "(load note 13) Asynchronous HTTP client for Python", False),
        ("I went to the store yesterday.", "I did not go to the gym yesterday.", False),
        ("The tests pass on Linux.", "The tests don't pass on Windows.", False),
        ("Alice owns the billing service since 2021.", "Bob owns the billing service since 2023.", False),
        ("Deploys go out at 10:00. Rollbacks need approval.", "Rollbacks do not need approval.", True),
    ],
)
def test_two_texts_conflict_when_nearly_the_same_words_are_negated_or_give_other_numbers(first: str, second: str, conflict: bool) -> None:
    assert texts_conflict(first, second) is conflict
    assert texts_conflict(second, first) is conflict
