"""The scheduler (issue 13, docs/lifecycle.md "Scheduling"): consolidation by interval, every N
inserts, at start-up and by hand; each run recorded (migration 0016), counted in /metrics and
shown by memory_stats; one run per interval across replicas (PostgreSQL's advisory lock, a Redis
lock, the durable run record). Driven by an injected clock and `tick()`: nothing sleeps."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from conftest import Clock, StoreEnv
from mcp_helpers import server_env, start_http_server
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from rest_helpers import KEY_A, KEY_A_READ, WAIT_S, client, problem_of, rest_env
from rest_helpers import OPERATOR as OPERATOR_KEY
from terminal_helpers import memento_command, on_terminal

from memento.app import App, build_app, build_scheduler
from memento.cli import main
from memento.embeddings.hashing import HashEmbedder
from memento.lifecycle.scheduler import Fired, Scheduler
from memento.models import AgentScope, CallContext, ConsolidateInput, MemoryStatsInput, RememberInput
from memento.ops.metrics import ops_state
from memento.results import ConsolidateResult
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.runs import ERROR_TEXT_LIMIT, NewRun, RunQuery

pytestmark = pytest.mark.backends("sqlite", "postgres")

HOUR = timedelta(hours=1)
OPERATOR = CallContext()
MakeApp = Callable[..., App]


SCHEDULE = {
    "EMBEDDING_PROVIDER": "hash",
    "MEMENTO_CONSOLIDATE_INTERVAL_MINUTES": "60",
    "MEMENTO_CONSOLIDATE_EVERY_INSERTS": "0",
    "MEMENTO_CONSOLIDATE_ON_START": "false",
}


def scheduled_settings(env: dict[str, str], **extra: str) -> Settings:
    """Hourly interval runs only, unless `extra` says otherwise."""
    return Settings(**(env | SCHEDULE | extra))  # type: ignore[arg-type]


@pytest.fixture
def make_app(store_env: StoreEnv, tmp_path: Path, clock: Clock) -> Iterator[MakeApp]:
    """`make(**settings)`: an app on the test's store (the same one each call: replicas)."""
    built: list[App] = []
    env = store_env(tmp_path)

    def make(**extra: str) -> App:
        app = build_app(scheduled_settings(env, **extra), embedder=HashEmbedder(256), clock=clock)
        built.append(app)
        return app

    yield make
    for app in built:
        app.close()


def remember(service: MemoryService, content: str, agent: str | None = None) -> str:
    ctx = CallContext(agent_id=agent) if agent else OPERATOR
    return str(service.remember(RememberInput(content=content, topic="t", type="procedure"), ctx).id)


def statuses(fired: list[Fired]) -> list[tuple[str, str | None, str]]:
    return [(f.trigger, f.agent, f.status) for f in fired]


def runs(app: App, **query: object) -> list[tuple[str, str, str]]:
    """(trigger, namespace, outcome) of every recorded run, oldest first."""
    found = app.service.runs.consolidation_runs("system", RunQuery(limit=1000, **query))  # type: ignore[arg-type]
    return [(r.trigger, r.agent_id, r.outcome) for r in reversed(found)]


# ---------------------------------------------------------------- triggers


def test_the_interval_run_fires_once_per_interval_of_the_clock(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()
    scheduler = build_scheduler(app)
    assert statuses(scheduler.tick()) == [("interval", None, "ok")]  # none recorded yet: due at once
    clock.now += timedelta(minutes=59)
    assert statuses(scheduler.tick()) == [("interval", None, "not_due")]
    clock.now += timedelta(minutes=1)
    assert statuses(scheduler.tick()) == [("interval", None, "ok")]
    assert runs(app) == [("interval", "system", "ok")] * 2


def test_the_fiftieth_insert_runs_that_namespace(make_app: MakeApp) -> None:
    app = make_app(MEMENTO_CONSOLIDATE_INTERVAL_MINUTES="0", MEMENTO_CONSOLIDATE_EVERY_INSERTS="50")
    scheduler = build_scheduler(app)
    for i in range(49):
        remember(app.service, f"alice's note number {i}", "alice")
    remember(app.service, "bob's only note", "bob")
    assert scheduler.pending() == [] and scheduler.tick() == []
    remember(app.service, "alice's fiftieth note", "alice")
    assert scheduler.pending() == ["alice"]
    assert statuses(scheduler.tick()) == [("inserts", "alice", "ok")]
    assert runs(app) == [("inserts", "alice", "ok")]
    assert scheduler.tick() == []  # the count starts again


def test_the_start_up_run_happens_once_after_the_delay_and_counts_for_its_interval(make_app: MakeApp, clock: Clock) -> None:
    app = make_app(MEMENTO_CONSOLIDATE_ON_START="true")
    scheduler = build_scheduler(app)
    assert scheduler.tick() == []  # shortly after start, not at once (and no interval run before it)
    clock.now += timedelta(seconds=5)
    assert statuses(scheduler.tick()) == [("startup", None, "ok"), ("interval", None, "not_due")]
    assert statuses(scheduler.tick()) == [("interval", None, "not_due")]
    clock.now += HOUR
    assert statuses(scheduler.tick()) == [("interval", None, "ok")]
    assert runs(app) == [("startup", "system", "ok"), ("interval", "system", "ok")]


def test_a_start_up_run_finding_the_lock_taken_is_recorded_as_skipped(make_app: MakeApp, clock: Clock) -> None:
    first, second = make_app(), make_app(MEMENTO_CONSOLIDATE_INTERVAL_MINUTES="0", MEMENTO_CONSOLIDATE_ON_START="true")
    scheduler = build_scheduler(second)
    holder = first.store.consolidation_lock()
    assert holder.acquire()
    try:
        clock.now += timedelta(seconds=5)
        assert statuses(scheduler.tick()) == [("startup", None, "skipped")]
    finally:
        holder.release()
    recorded = second.service.runs.consolidation_runs("system", RunQuery())
    assert [(r.trigger, r.outcome, r.error) for r in recorded] == [("startup", "skipped", "another consolidation run held the lock")]


def test_manual_runs_are_recorded_with_their_stage_counts(make_app: MakeApp) -> None:
    app = make_app()
    remember(app.service, "procedure: rotate the keys", "alice")
    result = app.service.memory_consolidate(ConsolidateInput(), OPERATOR)
    app.service.memory_consolidate(ConsolidateInput(), CallContext(agent_id="alice"))
    recorded = app.service.runs.consolidation_runs("system", RunQuery())
    assert [(r.trigger, r.agent_id, r.outcome) for r in recorded] == [("manual", "alice", "ok"), ("manual", "system", "ok")]
    whole = recorded[1]
    assert whole.stages is not None and whole.finished_at is not None and whole.replica
    assert whole.stages["hotToWarm"] == result.hot_to_warm and whole.stages["embeddingsBackfilled"] == result.embeddings_backfilled
    assert "contradictionPairs" not in whole.stages and "statistics" not in whole.stages
    app.service.memory_consolidate(ConsolidateInput(dryRun=True), OPERATOR)  # a rehearsal is not a run
    app.service.memory_consolidate(ConsolidateInput(stages=["hotToWarm"]), OPERATOR)
    latest = app.service.runs.consolidation_runs("system", RunQuery())
    assert len(latest) == 3 and latest[0].stages is not None
    assert latest[0].stages.keys() == {"hotToWarm", "elapsedMs"}  # a limited run records the stages it ran


def test_the_scheduled_run_maintains_every_namespace(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()
    for agent in ("alice", "bob", "carol"):
        remember(app.service, f"procedure: {agent}'s deploy steps", agent)
    clock.now += timedelta(days=8)  # past the hot stay of every one
    assert statuses(build_scheduler(app).tick()) == [("interval", None, "ok")]
    for agent in ("alice", "bob", "carol"):
        stats = app.service.memory_stats(MemoryStatsInput(), CallContext(agent_id=agent))
        assert stats.by_tier["warm"] == 1 and stats.by_tier["hot"] == 0, agent


class DuringDeduplication:
    """The real maintenance store; `hook` runs when the deduplication stage starts (to fail it,
    or to stop the scheduler in the middle of a run)."""

    def __init__(self, inner: object, hook: Callable[[], None]) -> None:
        self.inner = inner
        self.hook = hook

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def deduplicate(self, scope: AgentScope) -> object:
        self.hook()
        return self.inner.deduplicate(scope)  # type: ignore[attr-defined]


def test_a_failing_run_is_recorded_and_the_next_one_happens(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()
    consolidator = app.service.consolidator
    working = consolidator.maintenance

    def fail() -> None:
        raise RuntimeError("the disk is full")

    consolidator.maintenance = DuringDeduplication(working, fail)  # type: ignore[assignment]
    scheduler = build_scheduler(app)
    assert statuses(scheduler.tick()) == [("interval", None, "error")]
    consolidator.maintenance = working
    clock.now += HOUR
    assert statuses(scheduler.tick()) == [("interval", None, "ok")]
    recorded = app.service.runs.consolidation_runs("system", RunQuery())
    assert [(r.outcome, r.error) for r in recorded] == [("ok", None), ("error", "RuntimeError: the disk is full")]
    assert recorded[1].finished_at is not None and recorded[1].stages is None


# ---------------------------------------------------------------- visible


def test_memory_stats_shows_the_last_run_for_the_callers_scope(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()
    assert app.service.memory_stats(MemoryStatsInput(), OPERATOR).last_consolidation is None
    build_scheduler(app).tick()  # every namespace
    alice = CallContext(agent_id="alice")
    seen = app.service.memory_stats(MemoryStatsInput(), alice).last_consolidation
    assert seen is not None and (seen.trigger, seen.outcome, seen.whole_store) == ("interval", "ok", True)
    assert seen.stages is None and seen.replica is None  # the store-wide counts are not an agent's to read
    operator = app.service.memory_stats(MemoryStatsInput(), OPERATOR).last_consolidation
    assert operator is not None and operator.stages is not None and "hotToWarm" in operator.stages
    clock.now += timedelta(minutes=1)
    app.service.memory_consolidate(ConsolidateInput(), CallContext(agent_id="bob"))
    shown = app.service.memory_stats(MemoryStatsInput(), alice).last_consolidation
    assert shown is not None and shown.trigger == "interval"  # bob's own run is not alice's
    own = app.service.memory_stats(MemoryStatsInput(), CallContext(agent_id="bob")).dump()["lastConsolidation"]
    assert (own["trigger"], own["agentId"], own["wholeStore"]) == ("manual", "bob", False) and "hotToWarm" in own["stages"]
    listed = app.service.consolidation_runs(10, alice)
    assert [(r.trigger, r.agent_id) for r in listed.runs] == [("interval", "system")]


def test_metrics_count_runs_by_trigger_and_outcome(make_app: MakeApp, clock: Clock) -> None:
    app = make_app(MEMENTO_CONSOLIDATE_EVERY_INSERTS="2")
    state = ops_state(app)
    scheduler = build_scheduler(app)
    scheduler.tick()
    remember(app.service, "one", "alice")
    remember(app.service, "two", "alice")
    scheduler.tick()
    app.service.memory_consolidate(ConsolidateInput(), OPERATOR)
    found = {}
    for family in text_string_to_metric_families(generate_latest(state.registry).decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    for trigger in ("interval", "inserts", "manual"):
        assert found[("memento_consolidation_runs_by_trigger_total", (("outcome", "ok"), ("trigger", trigger)))] == 1
        assert found[("memento_consolidation_run_duration_seconds_count", (("trigger", trigger),))] == 1
    last = app.service.runs.consolidation_runs("system", RunQuery(limit=1))[0]
    assert found[("memento_consolidation_last_success_timestamp_seconds", ())] == last.started_at.timestamp()


def test_every_run_announces_consolidation_complete(make_app: MakeApp) -> None:
    app = make_app()
    seen: list[tuple[str, str]] = []
    app.service.add_listener(lambda event: seen.append((event.kind, event.agent_id)))
    build_scheduler(app).tick()
    assert ("consolidated", "default") in seen  # a whole-store run is the shared pool's change (→ the SSE stream)


def test_stopping_ends_a_run_at_its_next_stage_recorded_as_an_error(make_app: MakeApp, caplog: pytest.LogCaptureFixture) -> None:
    app = make_app()
    scheduler = build_scheduler(app)
    consolidator = app.service.consolidator
    consolidator.maintenance = DuringDeduplication(consolidator.maintenance, scheduler.stop)  # type: ignore[assignment]
    with caplog.at_level(logging.INFO, logger="memento.lifecycle.scheduler"):
        assert statuses(scheduler.tick()) == [("interval", None, "error")]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []  # a stop, not a failure
    assert any(r.name == "memento.lifecycle.scheduler" and "ended: the server stopped" in r.getMessage() for r in caplog.records)
    recorded = app.service.runs.consolidation_runs("system", RunQuery())
    assert [r.outcome for r in recorded] == ["error"]
    assert str(recorded[0].error).startswith("Interrupted: the server stopped before stage ")  # the one after deduplication
    assert scheduler.tick() == []  # a stopped scheduler starts nothing


# ---------------------------------------------------------------- replicas


def replica_ticks(schedulers: list[Scheduler], clocks: list[Clock], start: Clock, steps: int, step: timedelta) -> None:
    """Every replica ticks at every step at the same moment (a barrier), each by its own clock."""
    barrier = threading.Barrier(len(schedulers))
    errors: list[BaseException] = []

    def replica(index: int) -> None:
        try:
            for n in range(steps):
                clocks[index].now = start.now + n * step + index * timedelta(seconds=7)  # timers fire apart
                barrier.wait(timeout=60)
                schedulers[index].tick()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(len(schedulers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []


@pytest.mark.backends("sqlite", "postgres", "postgres+redis")
def test_replicas_ticking_together_record_one_run_per_interval(store_env: StoreEnv, tmp_path: Path, clock: Clock) -> None:
    settings = scheduled_settings(store_env(tmp_path))
    clocks = [Clock(), Clock(), Clock()]
    apps = [build_app(settings, embedder=HashEmbedder(64), clock=c) for c in clocks]
    try:
        if settings.redis_enabled:
            assert all(app.redis is not None for app in apps)
        schedulers = [build_scheduler(app, c) for app, c in zip(apps, clocks)]
        intervals = 12
        replica_ticks(schedulers, clocks, clock, steps=intervals * 4, step=HOUR / 4)
        recorded = apps[0].service.runs.consolidation_runs("system", RunQuery(limit=1000))
        starts = sorted(r.started_at for r in recorded)
        assert [r.outcome for r in recorded] == ["ok"] * intervals
        for n in range(intervals):  # exactly one run in each interval of the simulated half-day
            window = (clock.now + n * HOUR, clock.now + (n + 1) * HOUR)
            assert sum(window[0] <= s < window[1] for s in starts) == 1, n
    finally:
        for app in apps:
            app.close()


@pytest.mark.backends("postgres+redis")
def test_the_redis_lock_keeps_a_replica_from_running(make_app: MakeApp) -> None:
    app = make_app()
    assert app.redis is not None
    app.redis.blocking.set("memento:lock:consolidation", "another replica's token", px=60_000)
    scheduler = build_scheduler(app)
    assert statuses(scheduler.tick()) == [("interval", None, "busy")]
    assert app.redis.blocking.get("memento:lock:consolidation") == "another replica's token"  # not released by a stranger
    app.redis.blocking.delete("memento:lock:consolidation")
    assert statuses(scheduler.tick()) == [("interval", None, "ok")]
    assert app.redis.blocking.get("memento:lock:consolidation") is None  # released after the run


# ---------------------------------------------------------------- the run record (both backends)


def test_the_run_record_keeps_namespaces_apart(make_app: MakeApp, clock: Clock) -> None:
    store = make_app().store
    now = clock.now
    ids = {agent: store.start_consolidation_run(agent, NewRun("manual", now, "host:1")) for agent in ("alice", "bob", "system")}
    assert all(ids.values())
    store.finish_consolidation_run("alice", str(ids["alice"]), now + HOUR, "ok", {"hotToWarm": 2, "elapsedMs": 1.5}, None)
    store.finish_consolidation_run("system", str(ids["system"]), now + HOUR, "error", None, "x" * 5000)
    alice = store.consolidation_runs("alice", RunQuery())
    assert sorted(r.agent_id for r in alice) == ["alice", "system"]  # bob's run is bob's
    mine = next(r for r in alice if r.agent_id == "alice")
    assert (mine.outcome, mine.stages, mine.finished_at, mine.replica) == ("ok", {"hotToWarm": 2, "elapsedMs": 1.5}, now + HOUR, "host:1")
    failed = next(r for r in alice if r.agent_id == "system")
    assert failed.outcome == "error" and failed.error == "x" * ERROR_TEXT_LIMIT
    assert sorted(r.agent_id for r in store.consolidation_runs("system", RunQuery())) == ["alice", "bob", "system"]
    assert [r.agent_id for r in store.consolidation_runs("system", RunQuery(outcomes=("ok",)))] == ["alice"]
    # Another namespace's run cannot be finished from here: nothing changes.
    store.finish_consolidation_run("alice", str(ids["bob"]), now, "ok", None, None)
    assert [r.outcome for r in store.consolidation_runs("bob", RunQuery()) if r.agent_id == "bob"] == ["running"]


def test_a_claim_with_due_since_is_refused_once_a_run_started_since(make_app: MakeApp, clock: Clock) -> None:
    store = make_app().store
    slot = clock.now
    assert store.start_consolidation_run("system", NewRun("interval", slot + timedelta(seconds=3), due_since=slot))
    assert store.start_consolidation_run("system", NewRun("interval", slot + timedelta(seconds=9), due_since=slot)) is None
    assert store.start_consolidation_run("alice", NewRun("inserts", slot, due_since=slot))  # another namespace's record
    skipped = store.start_consolidation_run("system", NewRun("startup", slot + HOUR))
    store.finish_consolidation_run("system", str(skipped), slot + HOUR, "skipped", None, "busy")
    assert store.start_consolidation_run("system", NewRun("interval", slot + HOUR, due_since=slot + HOUR))  # skipped runs count for nothing


def test_the_run_history_is_bounded_per_namespace(make_app: MakeApp, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    from memento.storage import postgres_runs, sqlite_runs

    monkeypatch.setattr(sqlite_runs, "RUN_HISTORY", 5)
    monkeypatch.setattr(postgres_runs, "RUN_HISTORY", 5)
    store = make_app().store
    store.start_consolidation_run("bob", NewRun("manual", clock.now))
    for n in range(8):
        store.start_consolidation_run("system", NewRun("manual", clock.now + n * HOUR))
    kept = store.consolidation_runs("system", RunQuery(limit=100))
    assert [r.started_at for r in kept if r.agent_id == "system"] == [clock.now + n * HOUR for n in range(7, 2, -1)]
    assert [r.agent_id for r in kept].count("bob") == 1


def test_the_backend_lock_is_held_by_one_at_a_time(make_app: MakeApp) -> None:
    first, second = make_app().store.consolidation_lock(), make_app().store.consolidation_lock()
    assert first.acquire()
    assert not second.acquire()
    first.release()
    assert second.acquire()
    second.release()
    first.release()  # releasing a lock not held changes nothing
    assert first.acquire()
    first.release()


def test_a_plain_app_starts_no_scheduler(make_app: MakeApp) -> None:
    app = make_app()
    assert app.scheduler is None
    remember(app.service, "procedure: nothing runs by itself here")
    assert runs(app) == []


def test_manual_runs_return_the_pipeline_result(make_app: MakeApp) -> None:
    app = make_app()
    assert isinstance(app.service.memory_consolidate(ConsolidateInput(), OPERATOR), ConsolidateResult)


# ---------------------------------------------------------------- the served face (a real server process)


@pytest.mark.slow
def test_a_served_store_consolidates_at_start_up_and_answers_the_lifecycle_routes(tmp_path: Path) -> None:
    env = {
        **server_env(tmp_path / "served.db"),
        **rest_env(),
        "MEMENTO_CONSOLIDATE_INTERVAL_MINUTES": "0",
        "MEMENTO_CONSOLIDATE_ON_START": "true",
    }
    server = start_http_server(env, tmp_path / "server.log")
    try:
        operator, agent_a, reader = client(server.url, OPERATOR_KEY), client(server.url, KEY_A), client(server.url, KEY_A_READ)
        with operator, agent_a, reader, client(server.url, None) as anonymous:
            ran = agent_a.post("/lifecycle/consolidate", json={})
            assert ran.status_code == 200, ran.text
            assert "hotToWarm" in ran.json()
            assert problem_of(anonymous.post("/lifecycle/consolidate", json={}), 401)
            assert problem_of(reader.post("/lifecycle/consolidate", json={}), 403)
            assert problem_of(agent_a.post("/lifecycle/consolidate", json={"agentId": "agent-b"}), 403)
            deadline = time.monotonic() + WAIT_S
            while True:  # the start-up run comes a few seconds after start: wait for it (bounded)
                listed = operator.get("/lifecycle/runs").json()["runs"]
                if any(r["trigger"] == "startup" and r["outcome"] == "ok" for r in listed):
                    break
                assert time.monotonic() < deadline, listed
                time.sleep(0.2)  # polling another process's record; there is no event to await
            mine = agent_a.get("/lifecycle/runs").json()["runs"]
            assert {(r["trigger"], r["agentId"]) for r in mine} == {("manual", "agent-a"), ("startup", "system")}
            startup = next(r for r in mine if r["trigger"] == "startup")
            assert startup["stages"] is None and "replica" not in startup  # the store-wide run, as an agent sees it
            assert problem_of(agent_a.get("/lifecycle/runs", params={"limit": 0}), 422)
            metrics = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {OPERATOR_KEY}"}, timeout=WAIT_S).text
            assert 'memento_consolidation_runs_by_trigger_total{outcome="ok",trigger="startup"} 1.0' in metrics
            assert 'memento_consolidation_runs_by_trigger_total{outcome="ok",trigger="manual"} 1.0' in metrics
    finally:
        assert server.stop() in (0, -signal.SIGTERM)  # a graceful shutdown: the scheduler stops with the app


# ---------------------------------------------------------------- the command line


def test_memento_consolidate_runs_lists_the_recorded_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    assert main(["consolidate", "--runs"]) == 0
    assert capsys.readouterr().out.strip() == "No consolidation runs recorded."
    assert main(["consolidate"]) == 0
    ran, shown = capsys.readouterr()
    assert "hotToWarm" in ran and "consolidating" not in shown  # no progress drawn when stderr is no terminal
    assert main(["consolidate", "--agent", "alice"]) == 0
    capsys.readouterr()
    assert main(["consolidate", "--runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1:4] for line in lines] == [["manual", "ok", "alice"], ["manual", "ok", "every"]]
    assert main(["consolidate", "--runs", "--json", "--limit", "1"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["count"] == 1 and listed["runs"][0]["agentId"] == "alice"


@pytest.mark.slow
def test_memento_consolidate_shows_its_stages_on_a_terminal(tmp_path: Path) -> None:
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'tty.db'}", "EMBEDDING_PROVIDER": "hash"}
    shown = on_terminal([*memento_command(), "consolidate"], env, stderr=True)
    assert shown.code == 0 and "hotToWarm" in shown.stdout
    assert "consolidating [0/" in shown.terminal and "] confidence_pruned" in shown.terminal and "] done" in shown.terminal
