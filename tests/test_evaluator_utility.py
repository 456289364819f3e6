"""The evaluator's judgement survives consolidation (000 §7 with 000 §8, issue 13): the judged
utility is kept apart (`judged_utility`, migration 0020) and blended into the utility the
`utilityRecomputed` stage computes, by the one formula the evaluator's write uses too; memories
never judged keep the formula they always had; verified_at stays the time of the last judgement."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3
import pytest
from conftest import Clock
from migration_helpers import sqlite_store_before

from memento.app import App
from memento.lifecycle.evaluator import Evaluator
from memento.lifecycle.judges import Judgement, Neighbour
from memento.models import AgentScope, CallContext, ConsolidateInput, Fragment, RememberInput
from memento.results import ConsolidateResult
from memento.storage.sqlite import SQLiteStore
from memento.storage.utility import utility

pytestmark = pytest.mark.backends("sqlite", "postgres")

LOW = "The lobby vending machine sells sparkling water for two euros."
HIGH = "Run make rotate-keys before the quarterly audit of the payments cluster."
PLAIN = "Grafana dashboards for the ingest pipeline live in folder ops/ingest."
JUDGED = {LOW: 0.1, HIGH: 0.9}  # what the fixed judge says of each text
HALF_LIFE = 30.0  # MEMORY_CONFIG ranking.recencyHalfLifeDays, its default


def fixed_judge(memory: Fragment, neighbours: Sequence[Neighbour]) -> Judgement:
    """A deterministic model stand-in: the utility of JUDGED for the memory's text."""
    score = JUDGED[memory.content]
    return Judgement(score, score, score, score, provider="fixed")


def evaluator_of(app: App, clock: Clock) -> Evaluator:
    """The app's worker, with the fixed judge as its model."""
    return Evaluator(app.store, app.settings, lambda agent: ("fixed", fixed_judge), clock=clock, baseline=lambda: 0.0)


def remember(app: App, content: str) -> str:
    payload = {"content": content, "topic": "ops", "type": "fact", "importance": 0.5}
    return app.service.remember(RememberInput.model_validate(payload), CallContext()).id


def consolidate(app: App, *, dry_run: bool = False) -> ConsolidateResult:
    return app.service.memory_consolidate(ConsolidateInput(dryRun=dry_run), CallContext())


def memory(app: App, fragment_id: str) -> Fragment:
    (found,) = app.store.get_many(AgentScope("system"), [fragment_id])
    return found


def recomputed(result: ConsolidateResult) -> list[str]:
    return list(result.changed["utilityRecomputed"].ids)


def old_formula(m: Fragment, now: datetime) -> float:
    """000 §8's utility as the stage computed it before judgements took part (written out here,
    independently of storage/utility.py)."""
    age_days = (now - (m.accessed_at or m.created_at)).total_seconds() / 86400
    usage = min(1.0, math.log1p(m.access_count) / math.log1p(10))
    return round(0.4 * m.importance + 0.3 * float(0.5 ** (age_days / HALF_LIFE)) + 0.3 * usage, 4)


@pytest.fixture
def judged(app: App, clock: Clock) -> Callable[[], dict[str, str]]:
    """Store LOW, HIGH and PLAIN, judge LOW and HIGH a day later (PLAIN stays unjudged): their ids."""

    def make() -> dict[str, str]:
        assert app.evaluator is not None
        app.service.remove_listener(app.evaluator.on_change)  # nothing is queued by itself: PLAIN stays unjudged
        app.service.queue_in_write = None
        ids = {text: remember(app, text) for text in (LOW, HIGH, PLAIN)}
        clock.now += timedelta(days=1)
        assert app.store.enqueue_evaluations(AgentScope("default"), [ids[LOW], ids[HIGH]], clock()) == 2
        assert evaluator_of(app, clock).drain().done == 2
        return ids

    return make


def test_judged_low_and_high_memories_keep_different_utilities_after_consolidation(
    app: App, clock: Clock, judged: Callable[[], dict[str, str]]
) -> None:
    ids = judged()
    clock.now += timedelta(days=2)
    consolidate(app)
    low, high = memory(app, ids[LOW]), memory(app, ids[HIGH])
    assert (low.judged_utility, high.judged_utility) == (0.1, 0.9)  # the judgement itself is never overwritten
    assert (low.importance, high.importance, low.access_count, high.access_count) == (0.5, 0.5, 0, 0)
    assert high.utility_score - low.utility_score == pytest.approx(0.4 * (0.9 - 0.1) / 2, abs=2e-4)  # it counted
    for m in (low, high):
        assert m.utility_score == utility(
            m.importance, m.access_count, m.accessed_at or m.created_at, clock.now, HALF_LIFE, m.judged_utility
        )
    consolidate(app)  # and again: a judged utility is stable, not pulled back to the unjudged formula
    assert memory(app, ids[HIGH]).utility_score - memory(app, ids[LOW]).utility_score == pytest.approx(0.16, abs=2e-4)


def test_a_run_right_after_a_judgement_lists_no_change_for_the_judged_memories(
    app: App, clock: Clock, judged: Callable[[], dict[str, str]]
) -> None:
    ids = judged()
    before = {i: memory(app, i).utility_score for i in ids.values()}
    rehearsal = consolidate(app, dry_run=True)
    run = consolidate(app)
    assert recomputed(rehearsal) == recomputed(run)  # dry-run parity
    assert ids[LOW] not in recomputed(run) and ids[HIGH] not in recomputed(run)
    assert ids[PLAIN] in recomputed(run)  # the stage did run: the unjudged memory aged a day since it was stored
    assert {i: memory(app, i).utility_score for i in (ids[LOW], ids[HIGH])} == {i: before[i] for i in (ids[LOW], ids[HIGH])}


def test_unjudged_memories_keep_the_formula_they_always_had(app: App, clock: Clock, judged: Callable[[], dict[str, str]]) -> None:
    ids = judged()
    clock.now += timedelta(days=3)
    consolidate(app)
    plain = memory(app, ids[PLAIN])
    assert plain.judged_utility is None and plain.utility_score == old_formula(plain, clock.now)
    assert memory(app, ids[HIGH]).utility_score > plain.utility_score > memory(app, ids[LOW]).utility_score


def test_verified_at_is_the_last_judgement_not_the_last_consolidation(app: App, clock: Clock, judged: Callable[[], dict[str, str]]) -> None:
    stored_at = clock.now
    ids = judged()
    judged_at = clock.now
    clock.now += timedelta(days=4)
    result = consolidate(app)
    assert {ids[LOW], ids[HIGH], ids[PLAIN]} <= set(recomputed(result))  # every utility moved with time ...
    assert memory(app, ids[LOW]).verified_at == memory(app, ids[HIGH]).verified_at == judged_at  # ... verified_at did not
    assert memory(app, ids[PLAIN]).verified_at == stored_at  # never judged: as it was stored


def test_a_judgement_travels_with_its_memory_through_a_whole_store_copy(
    app: App, clock: Clock, judged: Callable[[], dict[str, str]]
) -> None:
    ids = judged()
    rows = {str(r["id"]): r for r in app.store.export_rows("fragments", -1, 100)}
    assert (rows[ids[LOW]]["judged_utility"], rows[ids[HIGH]]["judged_utility"], rows[ids[PLAIN]]["judged_utility"]) == (0.1, 0.9, None)


@pytest.mark.backends("sqlite")
def test_migration_0020_takes_each_judgement_from_its_latest_done_job(tmp_path: Path) -> None:
    """A store the evaluator used before 0020 (the judgement lived only in its job's result):
    the upgrade fills judged_utility from each memory's latest done job, and nothing else."""
    path = tmp_path / "old.db"
    conn = sqlite_store_before(path, "0020")
    for n in range(3):
        conn.execute(
            "INSERT INTO fragments (id, content, topic, type, importance, content_hash, created_at, ttl_tier)"
            " VALUES (?, ?, 't', 'fact', 0.5, ?, '2026-01-01T00:00:00.000000+00:00', 'warm')",
            (f"f{n}", f"text {n}", f"h{n}"),
        )
    jobs = [  # (fragment, status, finished_at, result)
        ("f0", "done", "2026-01-02T00:00:00.000000+00:00", '{"utility": 0.2}'),
        ("f0", "done", "2026-01-05T00:00:00.000000+00:00", '{"utility": 0.7}'),  # the latest judgement
        ("f0", "dead", "2026-01-06T00:00:00.000000+00:00", None),
        ("f1", "dead", "2026-01-02T00:00:00.000000+00:00", None),  # never judged
    ]
    for fid, status, finished, result in jobs:
        conn.execute(
            "INSERT INTO evaluation_jobs (fragment_id, agent_id, status, next_attempt_at, enqueued_at, finished_at, result)"
            " VALUES (?, 'default', ?, ?, ?, ?, ?)",
            (fid, status, finished, finished, finished, result),
        )
    conn.close()

    store = SQLiteStore(path, embedding_model=None, dimensions=None)
    try:
        judged = {f.id: f.judged_utility for f in store.get_many(AgentScope("system"), ["f0", "f1", "f2"])}
        assert judged == {"f0": 0.7, "f1": None, "f2": None}
        assert "0020_judged_utility.sql" in store.migrations()
    finally:
        store.close()


def test_a_judged_memory_without_a_job_is_not_queued_again(
    app: App, clock: Clock, judged: Callable[[], dict[str, str]], request: pytest.FixtureRequest
) -> None:
    """A store copied by `memento migrate` carries judged_utility but no jobs: the consolidation's
    backfill queues only what was never judged (PLAIN), not the judged memories again."""
    ids = judged()
    if app.settings.backend == "sqlite":
        conn = sqlite3.connect(str(app.settings.sqlite_path), isolation_level=None)
        conn.execute("DELETE FROM evaluation_jobs")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(request.getfixturevalue("postgres_server").owner_dsn, autocommit=True) as owner:
            owner.execute("DELETE FROM agent_memory.evaluation_jobs")
    assert app.store.enqueue_unevaluated(AgentScope("system"), clock(), 100) == 1
    assert app.store.queued_evaluation_ids([ids[LOW], ids[HIGH]]) == []  # judged: not again
    assert len(app.store.queued_evaluation_ids([ids[PLAIN]])) == 1
