"""Coverage (retrieval/coverage.py, docs/search.md): every recall face reports how likely the
answer is among its results, with noGoodMatch below MEMENTO_COVERAGE_THRESHOLD; high for an
exact match (001's keyword test), low for a question about something never stored, in [0, 1],
the same for the same store and query. The faces run on SQLite and PostgreSQL with the real
local model (the one the coefficients were fitted for)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, StoreEnv

from memento.app import App, build_app
from memento.embeddings import LocalE5Embedder
from memento.graph import SearchMode
from memento.graph_inputs import RecallMemoriesInput as SearchInput
from memento.mcp import versions
from memento.mcp.server import McpServer
from memento.models import CallContext, FragmentType, RecallInput, RememberInput
from memento.protocol_face.memory_models import RecallMemoriesInput, StoreMemoryInput
from memento.retrieval import coverage
from memento.retrieval.coverage import DEFAULT_THRESHOLD, Evidence, assess, term_shares
from memento.service import MemoryService
from memento.settings import Settings

pytestmark = pytest.mark.backends("sqlite", "postgres")

CTX = CallContext(agent_id="alice")
MEMORIES = (
    "Machine learning models need a held-out validation set to measure overfitting",
    "Web development with React: components re-render when their state changes",
    "The staging database runs PostgreSQL 16 on port 5433",
    "Deploys to production happen on Tuesdays after the release review",
    "Alice prefers dark roast coffee and drinks it without sugar",
    "The billing service retries failed card payments three times",
    "Our team's standup is at 9:30 every weekday in the small meeting room",
    "The frontend build uses Vite and outputs to the dist folder",
)
EXACT = "Machine learning models need a held-out validation set to measure overfitting"
NEVER = "What is my dentist's phone number?"


@pytest.fixture(scope="module")
def e5() -> LocalE5Embedder:
    return LocalE5Embedder()


@pytest.fixture
def app(tmp_path: Path, store_env: StoreEnv, clock: Clock, e5: LocalE5Embedder) -> Iterator[App]:
    settings = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="local")  # type: ignore[arg-type]
    built = build_app(settings, embedder=e5, clock=clock)
    for text in MEMORIES:
        built.service.remember(RememberInput(content=text, topic="notes", type=FragmentType.FACT), CTX)
    assert built.service.settle()
    yield built
    built.close()


@pytest.fixture
def service(app: App) -> MemoryService:
    return app.service


def recall(service: MemoryService, text: str, **kw: Any) -> dict[str, Any]:
    return service.recall(RecallInput(text=text, **kw), CTX).dump()


# ---------------------------------------------------------------- the model


def test_coverage_is_a_probability_and_nothing_found_is_zero() -> None:
    empty = assess(Evidence("anything", [], [], []))
    assert (empty.coverage, empty.no_good_match) == (0.0, True)
    for sims, tiers in (([], []), ([1.0] * 12, [["a"], ["a"]]), ([0.0], [["b"], []]), ([5.0, -3.0], [["a"]])):
        found = assess(Evidence("the held-out validation set", sims, tiers, [("a", "a held-out validation set"), ("b", "other")]))
        assert 0.0 <= found.coverage <= 1.0
        assert set(found.features) == set(coverage.FEATURES)
        assert all(0.0 <= v <= 1.0 for v in found.features.values()), found.features


def test_more_evidence_never_lowers_coverage() -> None:
    """No weight is negative: both fitted models are monotone in each feature."""
    weak = dict.fromkeys(coverage.FEATURES, 0.2)
    for intercept, weights in ((coverage.INTERCEPT, coverage.WEIGHTS), (coverage.LEXICAL_INTERCEPT, coverage.LEXICAL_WEIGHTS)):
        assert all(w >= 0 for w in weights) and len(weights) == len(coverage.FEATURES)
        for name, w in zip(coverage.FEATURES, weights, strict=True):
            assert coverage.probability({**weak, name: 0.9}, intercept, weights) >= coverage.probability(weak, intercept, weights)
            assert w == 0 or coverage.probability({**weak, name: 0.9}, intercept, weights) > coverage.probability(weak, intercept, weights)


def test_a_rare_query_word_no_result_holds_pulls_the_term_share_down() -> None:
    texts = ["the dentist appointment is on monday", "monday standup moved", "coffee on monday"]
    assert term_shares("dentist monday", texts) == (1.0, 1.0)
    spread, focus = term_shares("dentist coffee", texts)
    assert spread == 1.0 and focus < 1.0  # both words found, never in one result
    missing, _ = term_shares("orthodontist monday", texts)
    assert missing < 0.5  # the rare word matched nothing: it weighs more than the common one
    assert term_shares("", texts) == (0.0, 0.0)


# ---------------------------------------------------------------- every face


def test_000_recall_reports_coverage_high_for_an_exact_match_and_low_for_the_never_stored(service: MemoryService) -> None:
    exact = recall(service, EXACT)
    assert exact["fragments"][0]["content"] == EXACT
    assert exact["coverage"] >= 0.8 and "noGoodMatch" not in exact
    keyword = recall(service, "machine learning")  # 001 §10.2's keyword test
    assert keyword["fragments"][0]["content"].startswith("Machine learning")
    assert keyword["coverage"] > 0.5
    never = recall(service, NEVER)
    assert never["coverage"] < service.settings.coverage_threshold and never["noGoodMatch"] is True
    assert never["coverage"] < keyword["coverage"] < exact["coverage"] + 1e-9
    assert "coverageFeatures" not in never  # the compact view: one number


def test_coverage_is_deterministic_and_verbose_shows_its_features(service: MemoryService) -> None:
    first = recall(service, "which port does the staging database use", verbose=True)
    again = recall(service, "which port does the staging database use", verbose=True)
    assert first["coverage"] == again["coverage"]
    assert first["coverageFeatures"] == again["coverageFeatures"]
    assert set(first["coverageFeatures"]) == set(coverage.FEATURES)
    assert round(first["coverage"], 2) == first["coverage"]


def test_a_listing_without_a_query_has_no_coverage(service: MemoryService) -> None:
    listed = service.recall(RecallInput(topic="notes"), CTX).dump()
    assert listed["fragments"] and "coverage" not in listed and "noGoodMatch" not in listed


def test_recall_with_a_search_mode_and_001s_search_report_coverage(service: MemoryService) -> None:
    for mode in (SearchMode.HYBRID, SearchMode.SEMANTIC):
        moded = service.recall(RecallInput(text=EXACT, mode=mode), CTX).dump()
        assert moded["coverage"] >= 0.8, mode
    found = service.entities.recall_memories(SearchInput(query=EXACT), CTX).dump()
    assert found["results"][0]["memory"]["content"] == EXACT
    assert found["coverage"] >= 0.8 and "no_good_match" not in found
    never = service.entities.recall_memories(SearchInput(query=NEVER), CTX).dump()
    assert never["coverage"] < service.settings.coverage_threshold and never["no_good_match"] is True
    unknown = service.entities.recall_memories(SearchInput(query=EXACT, entity_name="nobody"), CTX).dump()
    assert (unknown["results"], unknown["coverage"], unknown["no_good_match"]) == ([], 0.0, True)


def test_003s_recall_reports_coverage(service: MemoryService) -> None:
    service.protocol.memories.store(StoreMemoryInput(content=EXACT + " (003)"), CTX)
    found = service.protocol.memories.recall(RecallMemoriesInput(query=EXACT), CTX).dump()
    assert found["memories"] and found["coverage"] >= 0.8
    never = service.protocol.memories.recall(RecallMemoriesInput(query=NEVER), CTX).dump()
    assert never["coverage"] < service.settings.coverage_threshold and never["no_good_match"] is True
    listed = service.protocol.memories.listing(None, [], None, 10, CTX).dump()
    assert listed["memories"] and "coverage" not in listed


def test_the_threshold_setting_decides_no_good_match(tmp_path: Path, store_env: StoreEnv, clock: Clock, e5: LocalE5Embedder) -> None:
    """0 turns the flag off; the number stays."""
    settings = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="local", MEMENTO_COVERAGE_THRESHOLD=0)  # type: ignore[arg-type]
    built = build_app(settings, embedder=e5, clock=clock)
    try:
        built.service.remember(RememberInput(content=MEMORIES[2], topic="notes", type=FragmentType.FACT), CTX)
        assert built.service.settle()
        never = recall(built.service, NEVER)
        assert never["coverage"] < DEFAULT_THRESHOLD and "noGoodMatch" not in never
    finally:
        built.close()
    with pytest.raises(ValueError, match="coverage_threshold|MEMENTO_COVERAGE_THRESHOLD"):
        Settings(MEMENTO_COVERAGE_THRESHOLD=1.5)


def test_without_a_vector_tier_the_lexical_constants_apply(tmp_path: Path, store_env: StoreEnv, clock: Clock) -> None:
    settings = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="none")  # type: ignore[arg-type]
    built = build_app(settings, embedder=None, clock=clock)
    try:
        for text in MEMORIES:
            built.service.remember(RememberInput(content=text, topic="notes", type=FragmentType.FACT), CTX)
        exact = recall(built.service, EXACT, verbose=True)
        assert exact["coverageFeatures"]["similarity"] == 0.0
        assert exact["coverage"] >= 0.8 and "noGoodMatch" not in exact
        never = recall(built.service, NEVER)
        assert never["coverage"] < DEFAULT_THRESHOLD and never["noGoodMatch"] is True
    finally:
        built.close()


@pytest.mark.anyio
async def test_the_mcp_recall_tool_sends_coverage(app: App) -> None:
    server = McpServer(app)
    session = server.create_session()
    hello = {"protocolVersion": versions.LATEST, "capabilities": {}, "clientInfo": {"name": "coverage", "version": "1"}}
    await server.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}, session)
    await server.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    reply = await server.handle(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", "arguments": {"text": NEVER}}}, session
    )
    assert isinstance(reply, dict) and reply["result"]["isError"] is False, reply
    body = json.loads(reply["result"]["content"][0]["text"])
    assert body["noGoodMatch"] is True and 0.0 <= body["coverage"] < 0.2


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
