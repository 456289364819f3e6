"""The evaluator's queue on a Redis stream when Redis is enabled (issue 13, docs/lifecycle.md
"Evaluator"): the table keeps every job's state and result, the stream carries job ids between
replicas. Two replicas on one PostgreSQL and one Redis share the jobs and judge each once; a job
survives a worker that crashed between XREADGROUP and XACK; with Redis stopped the table poll
finishes the work, and with Redis back the stream delivers again; a worker blocked on the stream
takes a job queued on another replica before its next table poll. Plus the claim by id on both
backends. Ordering, never elapsed time, is asserted."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock
from pg_harness import PostgresServer
from redis_harness import RedisServer, redis_server  # noqa: F401  (fixture)

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.lifecycle.evaluator import LEASE, Evaluator
from memento.lifecycle.judges import Judgement, Neighbour, heuristic
from memento.models import AgentScope, CallContext, Fragment, RememberInput
from memento.settings import Settings
from memento.storage.redis_queue import GROUP, STREAM

ALICE = CallContext(agent_id="alice")
WAIT_S = 60.0  # a generous bound for background work to finish; never asserted as a duration
IDLE_POLL = "600000"  # ten minutes: in the threaded tests only the stream can deliver in time


class Crash(BaseException):
    """A worker dying in the middle of a job (not an error the evaluator handles)."""


class Judged:
    """A judge that records every memory it judged, across replicas (thread-safe)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.crash_on: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, memory: Fragment, neighbours: Sequence[Neighbour]) -> Judgement:
        with self._lock:
            self.ids.append(memory.id)
            if memory.id in self.crash_on:
                self.crash_on.discard(memory.id)
                raise Crash(memory.id)
        return heuristic(memory, neighbours)

    def install(self, app: App) -> None:
        evaluator(app).choose = lambda agent: ("counted", self)


MakeApp = Callable[..., App]


@pytest.fixture
def make_app(postgres_server: PostgresServer, redis_server: RedisServer, clock: Clock) -> Iterator[MakeApp]:
    """`make(**settings)`: a replica on the emptied PostgreSQL and the test's own redis-server
    (which the test may stop and start again), sharing the test's clock."""
    postgres_server.reset()
    env = {
        "DATABASE_URL": postgres_server.app_dsn,
        "DATABASE_MIGRATION_URL": postgres_server.owner_dsn,
        "REDIS_ENABLED": "true",
        "REDIS_HOST": "127.0.0.1",
        "REDIS_PORT": str(redis_server.port),
        "EMBEDDING_PROVIDER": "hash",
    }
    built: list[App] = []

    def make(**extra: str) -> App:
        app = build_app(Settings(**(env | extra)), embedder=HashEmbedder(256), clock=clock)  # type: ignore[arg-type]
        assert app.redis is not None and evaluator(app).stream is not None
        evaluator(app).stream.retry_after_s = 0  # type: ignore[union-attr]  # tests retry at once
        built.append(app)
        return app

    yield make
    for app in built:
        app.close()


def evaluator(app: App) -> Evaluator:
    assert app.evaluator is not None
    return app.evaluator


def remember(app: App, content: str) -> str:
    return app.service.remember(RememberInput.model_validate({"content": content, "topic": "ops", "type": "fact"}), ALICE).id


def jobs_by_fragment(app: App) -> dict[str, Any]:
    return {j.fragment_id: j for j in app.store.evaluation_jobs(AgentScope("system"), None, 1000)}


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def blocked_readers(redis_server: RedisServer) -> int:
    """Clients blocked in XREADGROUP right now: workers past their table poll, waiting on the stream."""
    import redis

    with redis.Redis(port=redis_server.port) as client:
        return sum(1 for c in client.client_list() if c.get("cmd") == "xreadgroup" and "b" in c.get("flags", ""))


def pending(redis_server: RedisServer) -> int:
    import redis

    with redis.Redis(port=redis_server.port) as client:
        return int(client.xpending(STREAM, GROUP)["pending"])


def all_done(app: App, ids: Sequence[str]) -> bool:
    jobs = jobs_by_fragment(app)
    return all(i in jobs and jobs[i].status == "done" for i in ids)


# ---------------------------------------------------------------- the claim by id (both backends)


@pytest.mark.backends("sqlite", "postgres")
def test_a_job_is_claimed_by_id_once_and_only_when_due(app: App, clock: Clock) -> None:
    a = remember(app, "The staging database listens on port 5432.")
    b = remember(app, "Always run make migrate before deploying billing.")
    store = app.store
    ids = store.queued_evaluation_ids([a, b])
    assert len(ids) == 2 and store.queued_evaluation_ids([]) == []
    job_a, job_b = (jobs_by_fragment(app)[f].id for f in (a, b))
    assert sorted(ids) == sorted([job_a, job_b])
    lease = clock.now + LEASE
    assert store.claim_evaluation(job_a, clock(), lease, ["alice"]) is None  # an agent past its budget
    claimed = store.claim_evaluation(job_a, clock(), lease)
    assert claimed is not None and (claimed.id, claimed.fragment_id, claimed.status, claimed.attempts) == (job_a, a, "running", 1)
    assert store.claim_evaluation(job_a, clock(), lease) is None  # held: a second worker gets nothing
    assert store.queued_evaluation_ids([a, b]) == [job_b]  # only queued jobs are announced
    assert [j.id for j in store.claim_evaluations(clock(), lease, 10)] == [job_b]  # the batch claim skips it too
    assert store.claim_evaluation(987654, clock(), lease) is None  # unknown
    store.fail_evaluation(job_b, "boom", clock(), clock.now + timedelta(minutes=30))
    assert store.claim_evaluation(job_b, clock(), lease) is None  # its back-off is not over
    clock.now += LEASE + timedelta(minutes=1)  # the first claim's lease ended: the worker died
    again = store.claim_evaluation(job_a, clock(), clock.now + LEASE)
    assert again is not None and again.attempts == 2
    clock.now += timedelta(minutes=30)
    retried = store.claim_evaluation(job_b, clock(), clock.now + LEASE)
    assert retried is not None and retried.attempts == 2
    store.fail_evaluation(job_b, "dead", clock(), None)
    clock.now += LEASE * 2
    assert store.claim_evaluation(job_b, clock(), clock.now + LEASE) is None  # a dead letter stays dead


# ---------------------------------------------------------------- two replicas on PostgreSQL + Redis


def test_two_replicas_share_the_stream_and_judge_each_job_once(make_app: MakeApp, redis_server: RedisServer) -> None:
    first, second = make_app(), make_app()
    judged = Judged()
    judged.install(first)
    judged.install(second)
    ids = [remember(first if n % 2 else second, f"Service number {n} listens on port {7000 + n}.") for n in range(6)]
    one = evaluator(first).run_stream(limit=4)
    two = evaluator(second).run_stream(limit=16)
    assert one is not None and two is not None and (one.done, two.done) == (4, 2)
    assert evaluator(first).run_once().handled == 0 and evaluator(second).run_once().handled == 0  # nothing left for the poll
    assert Counter(judged.ids) == Counter(ids)  # each judged once, by one replica or the other
    assert (evaluator(first).via, evaluator(second).via) == (Counter(stream=4), Counter(stream=2))
    assert all_done(first, ids) and pending(redis_server) == 0


def test_running_workers_on_two_replicas_take_each_job_from_the_stream_once(make_app: MakeApp, redis_server: RedisServer) -> None:
    apps = [make_app(MEMENTO_EVALUATOR_POLL_MS=IDLE_POLL), make_app(MEMENTO_EVALUATOR_POLL_MS=IDLE_POLL)]
    judged = Judged()
    for app in apps:
        judged.install(app)
        evaluator(app).start()
    wait_for(lambda: blocked_readers(redis_server) == 2, "both workers to wait on the stream")  # their table polls are over
    ids = [remember(apps[n % 2], f"Queue worker {n} drains partition {n * 3}.") for n in range(20)]
    wait_for(lambda: all_done(apps[0], ids), "every job to be done")
    assert Counter(judged.ids) == Counter(ids)
    vias = [evaluator(app).via for app in apps]
    assert all(v["table"] == 0 for v in vias)  # the next table poll is ten minutes away: the stream carried them all
    assert sum(v["stream"] for v in vias) == 20 and all(v["stream"] > 0 for v in vias)  # shared between the replicas


def test_a_worker_waiting_on_the_stream_takes_another_replicas_job_before_its_next_poll(
    make_app: MakeApp, redis_server: RedisServer
) -> None:
    worker, writer = make_app(MEMENTO_EVALUATOR_POLL_MS=IDLE_POLL), make_app()
    evaluator(worker).start()
    wait_for(lambda: blocked_readers(redis_server) == 1, "the worker to wait on the stream")
    fid = remember(writer, "The nightly backup runs at 02:00 UTC on host vault-3.")
    wait_for(lambda: all_done(writer, [fid]), "the job to be done")
    assert evaluator(worker).via == Counter(stream=1)  # woken by the stream, not by a table poll
    assert evaluator(writer).via == Counter()


# ---------------------------------------------------------------- a crashed worker


def test_a_job_survives_a_worker_crash_between_read_and_ack(make_app: MakeApp, redis_server: RedisServer, clock: Clock) -> None:
    crashing, survivor = make_app(), make_app()
    judged = Judged()
    judged.install(crashing)
    judged.install(survivor)
    fid = remember(crashing, "Rotate the signing key of the payments API every 90 days.")
    judged.crash_on.add(fid)
    with pytest.raises(Crash):
        evaluator(crashing).run_stream()  # read from the stream and claimed the row, then died
    crashing.close()
    assert jobs_by_fragment(survivor)[fid].status == "running" and pending(redis_server) == 1
    assert evaluator(survivor).run_stream() is not None and evaluator(survivor).via == Counter()  # not delivered twice
    stream = evaluator(survivor).stream
    assert stream is not None
    stream.reclaim_idle_ms = 0  # type: ignore[attr-defined]  # the entry has been idle for a lease
    clock.now += LEASE + timedelta(seconds=1)  # and in the table the lease ran out
    report = evaluator(survivor).reclaim()
    assert report is not None and report.done == 1
    job = jobs_by_fragment(survivor)[fid]
    assert (job.status, job.attempts) == ("done", 2)
    assert judged.ids == [fid, fid] and evaluator(survivor).via == Counter(reclaimed=1)  # judged to the end once
    assert pending(redis_server) == 0


# ---------------------------------------------------------------- Redis down and back


def test_with_redis_stopped_the_table_poll_finishes_and_the_stream_returns(make_app: MakeApp, redis_server: RedisServer) -> None:
    first, second = make_app(), make_app()
    before = [remember(first, "The cache warms up in 40 seconds."), remember(first, "Set ulimit -n 65536 on the workers.")]
    assert evaluator(second).run_stream() is not None
    assert evaluator(second).via == Counter(stream=2)
    redis_server.stop()
    during = [remember(second, f"Redis outage note {n}: the table keeps job {n}.") for n in range(3)]  # queued, not announced
    assert evaluator(first).run_stream() is None and evaluator(first).reclaim() is None  # down: no stream
    report = evaluator(first).run_once()  # the table poll finds them
    assert report.done == 3 and evaluator(first).via == Counter(table=3)
    assert all_done(first, before + during)
    redis_server.start()  # back, and empty: the stream and its group are created again
    after = [remember(second, "Ship the release notes with every tag."), remember(first, "Page the on-call after 3 failed deploys.")]
    streamed = evaluator(first).run_stream()
    assert streamed is not None and streamed.done == 2
    assert evaluator(first).via == Counter(table=3, stream=2) and evaluator(first).run_once().handled == 0
    assert all_done(second, before + during + after) and pending(redis_server) == 0


def test_a_running_worker_falls_back_to_the_table_and_back_to_the_stream(make_app: MakeApp, redis_server: RedisServer) -> None:
    worker, writer = make_app(MEMENTO_EVALUATOR_POLL_MS=IDLE_POLL), make_app()
    via = evaluator(worker).via
    evaluator(worker).start()
    wait_for(lambda: blocked_readers(redis_server) == 1, "the worker to wait on the stream")
    first = remember(writer, "Deploys freeze on Fridays after 15:00.")
    wait_for(lambda: all_done(writer, [first]), "the streamed job")
    assert via == Counter(stream=1)
    redis_server.stop()
    down = remember(worker, "Disk alerts fire at 85 percent on db-7.")  # this replica's write wakes its worker
    wait_for(lambda: all_done(writer, [down]), "the job queued while Redis was down")
    assert via == Counter(stream=1, table=1)
    redis_server.start()
    back = remember(worker, "The VPN gateway restarts every Sunday.")  # by a poll or the stream: both work again
    wait_for(lambda: all_done(writer, [back]) and blocked_readers(redis_server) == 1, "the worker back on the stream")
    assert via["stream"] + via["table"] == 3
    streamed = via["stream"]
    last = remember(writer, "Ticket queues close at 18:00 local time.")  # the worker waits on the stream, its poll far off
    wait_for(lambda: all_done(writer, [last]), "the job after Redis returned")
    assert via["stream"] == streamed + 1 and sum(via.values()) == 4


def test_metrics_show_the_stream(make_app: MakeApp, tmp_path: Path) -> None:
    from prometheus_client.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from memento.ops.metrics import ops_state

    app = make_app()
    remember(app, "The audit log keeps 400 days of entries.")
    assert evaluator(app).run_stream() is not None
    remember(app, "Queue depth alarms at 10000 messages.")  # announced, not yet read

    def samples() -> dict[str, float]:
        text = generate_latest(ops_state(app).registry).decode()
        return {
            s.labels["measure"]: s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "memento_evaluator_stream"
        }

    assert samples() == {"length": 1, "pending": 0, "lag": 1}
    assert evaluator(app).run_stream() is not None
    assert samples() == {"length": 0, "pending": 0, "lag": 0}
