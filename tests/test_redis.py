"""The Redis L1 keyword index (000 §4.1) and its degradation (000 §9.1), against a real
redis-server (tests/redis_harness.py) on both storage backends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from ops_helpers import serving
from redis_harness import RedisServer, redis_server  # noqa: F401  (fixture)

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, AmendInput, CallContext, ForgetInput, RecallInput, RememberInput
from memento.ops.health import check_redis
from memento.results import RecallResult, RecallTiers
from memento.settings import Settings

pytestmark = pytest.mark.backends("sqlite", "postgres")
CTX = CallContext()


def tiers_of(result: RecallResult) -> RecallTiers:
    """The tier report of a verbose recall."""
    assert result.tiers is not None
    return result.tiers


@pytest.fixture
def redis_app(settings: Settings, redis_server: RedisServer, clock: Any) -> Iterator[App]:
    configured = settings.model_copy(update={"redis_enabled": True, "redis_host": "127.0.0.1", "redis_port": redis_server.port})
    built = build_app(configured, embedder=HashEmbedder(256), clock=clock)
    assert built.keyword_index is not None
    built.keyword_index.retry_after_s = 0.2
    assert built.keyword_index.wait_ready()
    yield built
    built.close()


def remember(app: App, content: str, keywords: list[str], importance: float, agent: str | None = None) -> str:
    out = app.service.remember(
        RememberInput(content=content, topic="t", type="fact", keywords=keywords, importance=importance, agentId=agent), CTX
    )
    return str(out.id)


def recall(app: App, keywords: list[str], agent: str | None = None) -> RecallResult:
    return app.service.recall(RecallInput(keywords=keywords, agentId=agent, verbose=True, tokenBudget=100_000), CTX)


def ids(result: RecallResult) -> list[str]:
    return [f.id for f in result.fragments]


def test_l1_intersects_keywords_per_agent(redis_app: App) -> None:
    index = redis_app.keyword_index
    assert index is not None
    both = remember(redis_app, "alpha and beta for agent a", ["alpha", "beta"], 0.5, "agent-a")
    only = remember(redis_app, "alpha only for agent a", ["alpha"], 0.6, "agent-a")
    shared = remember(redis_app, "alpha and beta shared", ["alpha", "beta"], 0.7)
    other = remember(redis_app, "alpha and beta for agent b", ["alpha", "beta"], 0.8, "agent-b")

    assert sorted(index.lookup(AgentScope("agent-a"), ["alpha", "beta"]) or []) == sorted([both, shared])
    assert sorted(index.lookup(AgentScope("agent-a"), ["alpha"]) or []) == sorted([both, only, shared])
    assert sorted(index.lookup(AgentScope("agent-b"), ["alpha", "beta"]) or []) == sorted([other, shared])
    assert index.lookup(AgentScope("default"), ["alpha", "beta"]) == [shared]

    result = recall(redis_app, ["alpha"], "agent-a")
    assert tiers_of(result).l1 == 3
    assert sorted(ids(result)) == sorted([both, only, shared])
    assert other not in ids(recall(redis_app, ["alpha", "beta"], "agent-a"))


def test_forget_and_amend_update_l1(redis_app: App) -> None:
    index = redis_app.keyword_index
    assert index is not None
    scope = AgentScope("default")
    first = remember(redis_app, "gamma one", ["gamma", "delta"], 0.5)
    second = remember(redis_app, "gamma two", ["gamma"], 0.5)

    redis_app.service.amend(AmendInput(id=first, keywords=["epsilon"]), CTX)
    assert index.lookup(scope, ["gamma"]) == [second]
    assert index.lookup(scope, ["delta"]) == []
    assert index.lookup(scope, ["epsilon"]) == [first]

    redis_app.service.forget(ForgetInput(id=second, force=True), CTX)
    assert index.lookup(scope, ["gamma"]) == []
    assert ids(recall(redis_app, ["epsilon"])) == [first]


def test_results_with_and_without_l1_are_equal(redis_app: App) -> None:
    for i in range(60):
        words = ["common"] + (["rare"] if i % 3 == 0 else []) + (["odd"] if i % 2 else [])
        remember(redis_app, f"fragment number {i} about things", words, round(0.2 + i / 100, 2), "agent-a" if i % 4 else None)
    remember(redis_app, "belongs to agent b", ["common", "rare"], 0.99, "agent-b")
    queries = [["common"], ["rare"], ["common", "rare"], ["common", "odd"], ["rare", "odd"], ["missing"], ["common", "missing"]]
    service = redis_app.service
    index = service.keyword_index
    used = set()
    for agent in ("agent-a", None, "agent-b"):
        for keywords in queries:
            with_l1 = recall(redis_app, keywords, agent)
            used.add(tiers_of(with_l1).l1 if isinstance(tiers_of(with_l1).l1, str) else "used")
            service.keyword_index = None
            try:
                without = recall(redis_app, keywords, agent)
            finally:
                service.keyword_index = index
            assert tiers_of(without).l1 is None and "l1" not in tiers_of(without).dump()
            assert ids(with_l1) == ids(without), (agent, keywords, with_l1.tiers)
    assert {"used", "empty", "insufficient"} <= used


def wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_redis_outage_degrades_and_recovers(redis_app: App, redis_server: RedisServer) -> None:
    index = redis_app.keyword_index
    assert index is not None
    before = remember(redis_app, "zeta before the outage", ["zeta"], 0.5)
    assert tiers_of(recall(redis_app, ["zeta"])).l1 == 1
    assert anyio.run(check_redis, redis_app) == {"status": "up"}

    redis_server.stop()
    during = remember(redis_app, "zeta during the outage", ["zeta"], 0.6)  # the write still works
    result = recall(redis_app, ["zeta"])
    assert tiers_of(result).l1 == "unavailable"
    assert sorted(ids(result)) == sorted([before, during])  # from L2
    assert anyio.run(check_redis, redis_app)["status"] == "down"
    assert not index.available

    redis_server.start()  # same port, empty: the index is rebuilt from the store

    def l1_back() -> bool:
        tiers = tiers_of(recall(redis_app, ["zeta"]))
        return bool(tiers.l1 == 2)

    wait_for(l1_back)
    assert sorted(index.lookup(AgentScope("default"), ["zeta"]) or []) == sorted([before, during])
    assert anyio.run(check_redis, redis_app) == {"status": "up"}
    after = remember(redis_app, "zeta after the outage", ["zeta"], 0.7)
    assert tiers_of(recall(redis_app, ["zeta"])).l1 == 3 and after in ids(recall(redis_app, ["zeta"]))


def test_health_is_200_and_degraded_while_redis_is_down(redis_app: App, redis_server: RedisServer) -> None:
    async def probe() -> list[tuple[int, dict[str, Any]]]:
        replies = []
        async with serving(redis_app) as (url, _), httpx.AsyncClient(timeout=20.0) as http:
            replies.append(await http.get(url + "/health"))
            redis_server.stop()
            replies.append(await http.get(url + "/health"))
        return [(r.status_code, r.json()) for r in replies]

    (code, body), (code_down, body_down) = anyio.run(probe)
    assert code == 200 and body["status"] == "ok" and body["redis"] == {"status": "up"}
    assert code_down == 200 and body_down["status"] == "degraded"
    assert body_down["redis"]["status"] == "down" and body_down["database"]["status"] == "up"
