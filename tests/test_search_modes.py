"""Search control of seed 001 (§5, §10.2, §11.1): the keyword, semantic, hybrid and graph modes
through the service, on a real store with the real local embedding model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, StoreEnv

from memento.access import call_scope
from memento.app import App, build_app
from memento.embeddings import LocalE5Embedder
from memento.graph import NewEntity, NewRelation, SearchMode
from memento.models import CallContext, FragmentType, RecallInput, RememberInput
from memento.retrieval.search import SearchPage, SearchRequest, baseline_for, calibrate, name_candidates
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

pytestmark = pytest.mark.backends("sqlite", "postgres")


@pytest.fixture(scope="module")
def e5() -> LocalE5Embedder:
    return LocalE5Embedder()


@pytest.fixture
def app(tmp_path: Path, store_env: StoreEnv, clock: Clock, e5: LocalE5Embedder) -> Iterator[App]:
    settings = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="local")  # type: ignore[arg-type]
    built = build_app(settings, embedder=e5, clock=clock)
    yield built
    built.close()


@pytest.fixture
def service(app: App) -> MemoryService:
    return app.service


def remember(service: MemoryService, ctx: CallContext, content: str, **kw: Any) -> str:
    payload = {"topic": "general", "type": "observation", **kw, "content": content}
    return str(service.remember(RememberInput.model_validate(payload), ctx).id)


def search(service: MemoryService, ctx: CallContext, query: str, mode: SearchMode, **kw: Any) -> SearchPage:
    filt = SearchFilter(**kw.pop("filt", {}), half_life_days=service.settings.confidence_half_life_days, now=service.clock())
    request = SearchRequest(query=query, mode=mode, filt=filt, **kw)
    assert service.settle()  # the engine is called directly: the writes' vectors first (the worker's)
    return service.searcher.run(call_scope(None, ctx), request, service.clock())


def ids(page: SearchPage) -> list[str]:
    return [hit.fragment.id for hit in page.hits]


def test_keyword_search_returns_the_memory_with_the_words_and_not_the_other(service: MemoryService, ctx: CallContext) -> None:
    ml = remember(service, ctx, "Machine learning models learn patterns from training data")
    remember(service, ctx, "Web development uses HTML, CSS and JavaScript")
    page = search(service, ctx, "machine learning", SearchMode.KEYWORD)
    assert ids(page) == [ml] and page.total == 1
    hit = page.hits[0]
    assert hit.keyword_score == 1.0 and hit.semantic_score is None and hit.graph_score is None
    assert hit.why.startswith("keyword 1.00") and "confidence 1.00" in hit.why
    # The similarity floor keeps the unrelated memory out of hybrid results too.
    assert ids(search(service, ctx, "machine learning", SearchMode.HYBRID)) == [ml]


def test_semantic_search_finds_a_memory_by_meaning(service: MemoryService, ctx: CallContext) -> None:
    dogs = remember(service, ctx, "canine behavior training tips")
    remember(service, ctx, "Quarterly revenue grew by 12 percent")
    remember(service, ctx, "The database backup runs every night at 2am")
    page = search(service, ctx, "how to train dogs", SearchMode.SEMANTIC)
    assert ids(page) == [dogs]
    hit = page.hits[0]
    assert hit.semantic_score is not None and 0.5 <= hit.semantic_score <= 1.0 and hit.keyword_score is None
    assert hit.score == pytest.approx(hit.semantic_score * hit.effective_confidence, abs=1e-5)


def test_hybrid_search_combines_words_and_meaning(service: MemoryService, ctx: CallContext) -> None:
    both = remember(service, ctx, "Tips to train your dog to sit and stay")
    meaning = remember(service, ctx, "Canine behavior lessons for puppies")
    words = remember(service, ctx, "The train to Boston leaves at noon")
    for content in (
        "Our train schedule changed this week",
        "Machine learning models learn patterns from training data",
        "Web development uses HTML, CSS and JavaScript",
        "The database backup runs every night at 2am",
        "Grandma's apple pie recipe uses cinnamon",
        "Quarterly revenue grew by 12 percent",
        "The frontend uses TypeScript and React",
    ):
        remember(service, ctx, content)
    page = search(service, ctx, "how to train dogs", SearchMode.HYBRID)
    found = {hit.fragment.id: hit for hit in page.hits}
    assert ids(page)[0] == both
    assert found[both].keyword_score is not None and found[both].semantic_score is not None
    assert found[meaning].keyword_score is None and found[meaning].semantic_score is not None
    assert found[words].keyword_score is not None and found[words].semantic_score is None
    alpha = service.settings.hybrid_keyword_weight
    top = found[both]
    assert top.keyword_score is not None and top.semantic_score is not None
    assert top.score == pytest.approx(alpha * top.keyword_score + (1 - alpha) * top.semantic_score, abs=1e-5)
    assert found[meaning].score == pytest.approx((1 - alpha) * (found[meaning].semantic_score or 0.0), abs=1e-5)
    assert [h.score for h in page.hits] == sorted((h.score for h in page.hits), reverse=True)


def test_memory_types_filter(service: MemoryService, ctx: CallContext) -> None:
    remember(service, ctx, "Users open the settings page many times a day", type="observation")
    decision = remember(service, ctx, "We decided to move the settings page into the sidebar", type="decision")
    remember(service, ctx, "Every settings page change brings support tickets", type="pattern")
    for mode in (SearchMode.KEYWORD, SearchMode.SEMANTIC, SearchMode.HYBRID):
        page = search(service, ctx, "moving the settings page into the sidebar", mode, filt={"types": (FragmentType.DECISION,)})
        assert ids(page) == [decision], mode


def test_tags_filter_needs_every_tag(service: MemoryService, ctx: CallContext) -> None:
    both = remember(service, ctx, "The frontend build uses Vite", tags=["typescript", "frontend"])
    remember(service, ctx, "The frontend API client is generated", tags=["typescript"])
    remember(service, ctx, "The frontend theme uses CSS variables", tags=["frontend", "css"])
    three = remember(service, ctx, "The frontend router is React Router", tags=["typescript", "frontend", "react"])
    page = search(service, ctx, "frontend", SearchMode.HYBRID, filt={"tags_all": ("typescript", "frontend")})
    assert sorted(ids(page)) == sorted([both, three]) and page.total == 2


def test_min_confidence_is_on_effective_confidence(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    fresh = remember(service, ctx, "Deploy checklist reviewed this morning")
    recent = remember(service, ctx, "Deploy checklist reviewed twenty days ago", createdAt=clock.now - timedelta(days=20))
    old = remember(service, ctx, "Deploy checklist reviewed sixty days ago", createdAt=clock.now - timedelta(days=60))
    everything = {h.fragment.id: h for h in search(service, ctx, "deploy checklist", SearchMode.KEYWORD).hits}
    assert everything[old].effective_confidence == pytest.approx(0.25, abs=1e-6)
    assert everything[recent].effective_confidence == pytest.approx(0.5 ** (20 / 30), abs=1e-6)
    assert everything[fresh].effective_confidence == pytest.approx(1.0)
    page = search(service, ctx, "deploy checklist", SearchMode.KEYWORD, filt={"min_confidence": 0.5})
    assert set(ids(page)) == {fresh, recent}
    assert all(hit.score <= (hit.keyword_score or 0) * hit.effective_confidence + 1e-6 for hit in page.hits)


def test_pagination_returns_results_21_to_30_of_the_full_ordering(service: MemoryService, ctx: CallContext) -> None:
    for i in range(50):
        remember(service, ctx, f"Note {i}: project planning for sprint {i} of the roadmap")
    full = search(service, ctx, "project planning", SearchMode.HYBRID, limit=100)
    assert full.total == 50 and len(full.hits) == 50
    page = search(service, ctx, "project planning", SearchMode.HYBRID, limit=10, offset=20)
    assert ids(page) == ids(full)[20:30] and page.total == 50
    ordering = [(-h.score, h.fragment.id) for h in full.hits]
    assert ordering == sorted(ordering)  # score descending, ties by id


def test_an_unrelated_query_finds_nothing_above_the_similarity_floor(service: MemoryService, ctx: CallContext) -> None:
    for content in ("canine behavior training tips", "Quarterly revenue grew by 12 percent", "Grandma's apple pie recipe uses cinnamon"):
        remember(service, ctx, content)
    assert search(service, ctx, "quantum chromodynamics lattice gauge theory", SearchMode.SEMANTIC).hits == []
    assert search(service, ctx, "quantum chromodynamics lattice gauge theory", SearchMode.HYBRID).total == 0


def test_recall_with_a_mode_answers_from_that_mode(service: MemoryService, ctx: CallContext, app: App) -> None:
    ml = remember(service, ctx, "Machine learning models learn patterns from training data")
    web = remember(service, ctx, "Web development uses HTML, CSS and JavaScript")
    moded = service.recall(RecallInput(text="machine learning", mode=SearchMode.KEYWORD, verbose=True), ctx)
    assert [f.id for f in moded.fragments] == [ml]
    assert moded.search_mode == "keyword" and moded.fragments[0].recall_reason.startswith("keyword 1.00")
    assert moded.dump()["fragments"][0]["recallReason"].startswith("keyword")
    app.store.flush_access()
    assert app.store.get_many(call_scope(None, ctx), [ml])[0].access_count == 1  # recorded like any recall
    # Without a mode: the 000 cascade as before (vector hits of every similarity are fused in).
    cascade = service.recall(RecallInput(text="machine learning", verbose=True), ctx)
    assert [f.id for f in cascade.fragments] == [ml, web]
    assert cascade.search_mode == "hybrid" and cascade.fragments[0].recall_reason.startswith("full-text rank 1")


def test_graph_search_follows_relations_from_the_entities_the_query_names(
    service: MemoryService, ctx: CallContext, app: App, e5: LocalE5Embedder
) -> None:
    store = app.store
    scope, now = call_scope(None, ctx), service.clock()
    alice_vec = e5.embed_passages(["Alice Frontend engineer who builds the design system"])[0]
    made = store.upsert_entities(
        scope,
        [
            NewEntity("Alice", "person", "Frontend engineer who builds the design system", embedding=alice_vec),
            NewEntity("Bob", "person"),
            NewEntity("Carol", "person"),
            NewEntity("Dave", "person"),
        ],
        now,
    )
    ent = {e.name: e.id for e, _ in made}
    store.upsert_relations(
        scope,
        [
            NewRelation(ent["Alice"], ent["Bob"], "collaborates_with", strength=0.8),
            NewRelation(ent["Alice"], ent["Carol"], "manages", strength=0.6, confidence=0.5),
            NewRelation(ent["Bob"], ent["Dave"], "reports_to", strength=0.5),
        ],
        now,
    )
    mem = {name: remember(service, ctx, f"{name} wrote the quarterly planning notes") for name in ("Alice", "Bob", "Carol", "Dave")}
    unrelated = remember(service, ctx, "The office plants need water on Fridays")
    store.link_entities(scope, [(ent[name], mem[name], 1.0) for name in mem], now)

    one = search(service, ctx, "What is alice's team doing?", SearchMode.GRAPH, depth=1)
    scores = {hit.fragment.id: hit.graph_score for hit in one.hits}
    assert ids(one)[0] == mem["Alice"] and set(scores) == {mem["Alice"], mem["Bob"], mem["Carol"]}
    assert scores[mem["Bob"]] == pytest.approx(0.8) and scores[mem["Carol"]] == pytest.approx(0.3)
    assert "via Bob" in next(h.why for h in one.hits if h.fragment.id == mem["Bob"])

    two = {hit.fragment.id: hit.graph_score for hit in search(service, ctx, "Alice", SearchMode.GRAPH, depth=2).hits}
    assert two[mem["Dave"]] == pytest.approx(0.4) and unrelated not in two

    # No entity named: the entity nearest in meaning starts the walk (when above the floor).
    by_meaning = search(service, ctx, "the frontend engineer building our design system", SearchMode.GRAPH)
    assert ids(by_meaning)[0] == mem["Alice"]
    assert search(service, ctx, "quantum chromodynamics lattice gauge theory", SearchMode.GRAPH).hits == []


def test_calibration_maps_the_model_baseline_to_zero() -> None:
    e5 = baseline_for("local:multilingual-e5-small-q4")
    assert e5 == 0.7 and baseline_for("hash:v1:256") == 0.0 and baseline_for(None) == 0.0
    assert baseline_for("local:multilingual-e5-small-q4", 0.6) == 0.6  # settings.similarity_baseline wins
    assert calibrate(0.7, e5) == 0.0 and calibrate(0.85, e5) == pytest.approx(0.5) and calibrate(1.0, e5) == 1.0
    assert calibrate(0.2, e5) == 0.0


def test_entity_names_are_matched_as_whole_words() -> None:
    found = name_candidates("Did Alice's team (Frontend Team) ship?")
    assert {"Alice", "Frontend Team", "Did Alice team"} <= set(found)
    assert "Ali" not in found and "Frontend Tea" not in found


@pytest.mark.parametrize(("field", "value"), [("limit", 0), ("limit", 101), ("offset", -1), ("depth", 0)])
def test_the_page_is_checked(field: str, value: int) -> None:
    from memento.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=field):
        SearchRequest(query="x", **{field: value})  # type: ignore[arg-type]
