"""The evaluator worker (000 §7, issue 13): judges each new memory off the write path.

A write only queues a job (`on_change`, a cheap insert after the write committed); this worker
claims due jobs from the durable queue (`EvaluationStore`), judges each memory against its most
similar memories of the same agent, and writes the outcome in one transaction: `utility_score`
and `verified_at`, a `contradicts` link per contradiction (never a deletion), and a merge
proposal per near-duplicate above 001 §6.2's threshold. A failed attempt is retried with
exponential back-off and dead-lettered after MEMENTO_EVALUATOR_MAX_ATTEMPTS; a job of an agent
past its daily token budget waits for the next UTC day. docs/lifecycle.md "Evaluator".

With Redis enabled a `JobStream` (storage/redis_queue.py) is the delivery path between replicas:
a queued job's id is added to a Redis stream, a worker blocked on the stream's consumer group
takes it at once, claims its row by id (`claim_evaluation`), judges and acknowledges it. The table
stays the truth: its poll still runs every MEMENTO_EVALUATOR_POLL_MS and finds what the stream did
not carry (retries whose back-off ended, leases that ran out, jobs queued while Redis was down).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from time import monotonic
from typing import Protocol

from ..errors import MementoError, Unavailable
from ..models import AgentScope, ChangeEvent, Fragment
from ..observe import Observer
from ..settings import Settings
from ..storage.protocol import EvaluationJob, EvaluationOutcome, EvaluationStore, SearchFilter, Store
from ..storage.redis_queue import Delivery, StreamStats
from .judges import Judgement, Neighbour, heuristic, older

log = logging.getLogger(__name__)

BATCH = 16  # jobs claimed at a time
NEIGHBOURS = 5  # similar memories a memory is judged against
LEASE = timedelta(minutes=10)  # a running job's lease: a worker that died gives it up after this
MAX_BACKOFF = timedelta(days=1)
BACKFILL_LIMIT = 1000
SYSTEM = AgentScope("system")
STREAM_BLOCK_MS = 1000  # the longest wait on the stream (below the Redis client's socket timeout)
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


class EvaluationQueueStore(Store, EvaluationStore, Protocol):
    """What the worker needs of the store."""


class JobStream(Protocol):
    """The delivery path between replicas (storage/redis_queue.py): None/False when it is down."""

    def add(self, job_ids: Sequence[int]) -> bool: ...
    def read(self, count: int, block_ms: int | None) -> list[Delivery] | None: ...
    def reclaim(self, count: int) -> list[Delivery] | None: ...
    def ack(self, entries: Sequence[str]) -> bool: ...
    def stats(self) -> StreamStats | None: ...

    @property
    def available(self) -> bool: ...


Judge = Callable[[Fragment, Sequence[Neighbour]], Judgement]
ChooseJudge = Callable[[str], "tuple[str, Judge | None]"]
"""For an agent: the provider's name and its model judge (None: the heuristic, which costs no tokens)."""


@dataclass(frozen=True)
class WorkerReport:
    """What one `run_once` did, by outcome."""

    done: int = 0
    retried: int = 0
    dead: int = 0
    deferred: int = 0

    @property
    def handled(self) -> int:
        return self.done + self.retried + self.dead + self.deferred


def next_day(now: datetime) -> datetime:
    """The next UTC midnight: when a day's token budget starts again."""
    return datetime.combine(now.astimezone(UTC).date() + timedelta(days=1), time(0), tzinfo=UTC)


def backoff(settings: Settings, attempts: int) -> timedelta:
    """The delay before attempt `attempts + 1`: MEMENTO_EVALUATOR_BACKOFF_S, doubled per attempt."""
    return min(MAX_BACKOFF, timedelta(seconds=settings.evaluator_backoff_s * 2 ** max(0, attempts - 1)))


class Evaluator:
    """The queue's producer (`on_change`, `backfill`) and its worker (`run_once`, `drain`, and a
    polling thread started by `start`, stopped by `stop`)."""

    def __init__(
        self,
        store: EvaluationQueueStore,
        settings: Settings,
        choose: ChooseJudge,
        *,
        clock: Callable[[], datetime],
        baseline: Callable[[], float],
        observers: Observer | None = None,
        stream: JobStream | None = None,
    ) -> None:
        self.store = store
        self.stream = stream  # Redis enabled: the stream delivers, the table keeps the record
        self.via: Counter[str] = Counter()  # jobs handled here, by how they came: stream | reclaimed | table
        self.settings = settings
        self.choose = choose
        self.clock = clock
        self.baseline = baseline  # the embedding model's cosine of unrelated texts (calibration)
        self.observers = observers or Observer()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one run_once at a time in this process

    # ------------------------------------------------------------ producing

    def on_change(self, event: ChangeEvent) -> None:
        """The service's change listener: queue every created memory (a cheap insert; the
        judging happens on the worker), and after a consolidation run the memories that never
        had a job (an import around the service, a write whose queueing failed)."""
        if event.kind == "consolidated":
            self.backfill()
            return
        if event.kind != "created" or not event.fragment_ids:
            return
        queued = (event.details or {}).get("evaluationsQueued")  # by queue_in_write, committed with the memory
        if queued is None:
            queued = self.store.enqueue_evaluations(AgentScope(event.agent_id), event.fragment_ids, self.clock())
        if queued:
            self._announce(event.fragment_ids)
            self._wake.set()

    def queue_in_write(self, agent_id: str, fragment_ids: Sequence[str]) -> int:
        """Queue the jobs of `agent_id`'s memories being stored, inside the transaction that stores
        them (MemoryService.queue_in_write): how many were queued (a working memory gets none)."""
        return self.store.enqueue_evaluations(AgentScope(agent_id), fragment_ids, self.clock())

    def _announce(self, fragment_ids: Sequence[str]) -> None:
        """Put the new jobs on the stream (after their rows committed). Redis not answering loses
        nothing: the table poll finds them."""
        if self.stream is None or not self.stream.available:
            return
        self.stream.add(self.store.queued_evaluation_ids(fragment_ids))

    def backfill(self, scope: AgentScope = SYSTEM, limit: int = BACKFILL_LIMIT) -> int:
        """Queue the memories never evaluated (consolidation time, start-up); how many."""
        queued = self.store.enqueue_unevaluated(scope, self.clock(), limit)
        if queued:
            self._wake.set()
        return queued

    # ------------------------------------------------------------ working

    def run_once(self, limit: int = BATCH) -> WorkerReport:
        """Claim and handle up to `limit` due jobs."""
        with self._lock:
            now = self.clock()
            jobs = self.store.claim_evaluations(now, now + LEASE, limit, self._over_budget(now))
            report = WorkerReport()
            for job in jobs:
                report = _add(report, self._handle(job))
                self.via["table"] += 1
            return report

    def run_stream(self, limit: int = BATCH, block_ms: int | None = None) -> WorkerReport | None:
        """Handle up to `limit` jobs delivered by the stream, waiting up to `block_ms` for the
        first; None when there is no stream or Redis is down (the table poll then works alone)."""
        if self.stream is None:
            return None
        deliveries = self.stream.read(limit, block_ms)
        return None if deliveries is None else self._deliver(deliveries, "stream")

    def reclaim(self, limit: int = BATCH) -> WorkerReport | None:
        """Take over the stream entries a crashed worker left unacknowledged for a job lease, and
        handle their jobs where the table still says they are due; None as `run_stream`."""
        if self.stream is None:
            return None
        deliveries = self.stream.reclaim(limit)
        return None if deliveries is None else self._deliver(deliveries, "reclaimed")

    def _deliver(self, deliveries: Sequence[Delivery], path: str) -> WorkerReport:
        """Claim each delivered job by id (the table decides: done, dead, not due yet, held by
        another worker, or of an agent past its budget: nothing to do here), handle it, then
        acknowledge the entry — after the outcome is written, so a crash in between leaves it
        pending for `reclaim`."""
        assert self.stream is not None
        report = WorkerReport()
        with self._lock:
            excluded = self._over_budget(self.clock()) if deliveries else []
            for delivery in deliveries:
                now = self.clock()
                job = self.store.claim_evaluation(delivery.job_id, now, now + LEASE, excluded)
                if job is not None:
                    report = _add(report, self._handle(job))
                    self.via[path] += 1
                self.stream.ack([delivery.entry])
        return report

    def drain(self, max_rounds: int = 100) -> WorkerReport:
        """Run until no job is due (tests, the CLI): the sum of every round."""
        total = WorkerReport()
        for _ in range(max_rounds):
            step = self.run_once()
            if not step.handled:
                break
            total = WorkerReport(*(a + b for a, b in zip(total.__dict__.values(), step.__dict__.values(), strict=True)))
        return total

    def stream_stats(self) -> StreamStats | None:
        """The stream's length, pending and lag (metrics); None without Redis or while it is down."""
        return self.stream.stats() if self.stream is not None else None

    def _over_budget(self, now: datetime) -> list[str]:
        budget = self.settings.evaluator_daily_tokens
        if budget <= 0:
            return []
        return sorted(agent for agent, used in self.store.evaluation_tokens(now.astimezone(UTC).date()).items() if used >= budget)

    def _handle(self, job: EvaluationJob) -> str:
        """Judge one job's memory and record the outcome: done | retried | dead | deferred."""
        scope = AgentScope(job.agent_id)
        found = [f for f in self.store.get_many(scope, [job.fragment_id]) if f.agent_id == job.agent_id]
        now = self.clock()
        if not found:  # forgotten or archived meanwhile: nothing left to judge
            self.store.fail_evaluation(job.id, "the memory is no longer live", now, None)
            return self._report("dead", "none", 0)
        memory = found[0]
        provider, judge = self.choose(job.agent_id)
        if judge is not None and self._spent(job.agent_id, now) >= self.settings.evaluator_daily_tokens > 0:
            self.store.defer_evaluation(job.id, next_day(now))
            return self._report("deferred", provider, 0)
        try:
            neighbours = self._neighbours(scope, memory)
            judgement = judge(memory, neighbours) if judge is not None else heuristic(memory, neighbours)
        except MementoError as exc:
            return self._failed(job, provider, exc)
        if judgement.tokens:
            self.store.add_evaluation_tokens(job.agent_id, now.astimezone(UTC).date(), provider, judgement.tokens)
        self.store.finish_evaluation(job, self._outcome(memory, neighbours, judgement), self.clock())
        return self._report("done", provider, judgement.tokens)

    def _failed(self, job: EvaluationJob, provider: str, exc: MementoError) -> str:
        now = self.clock()
        error = f"{type(exc).__name__}: {exc}"
        if job.attempts >= self.settings.evaluator_max_attempts:
            log.warning("evaluation job %s dead after %s attempts: %s", job.id, job.attempts, error)
            self.store.fail_evaluation(job.id, error, now, None)
            return self._report("dead", provider, 0)
        log.info("evaluation job %s failed (attempt %s): %s", job.id, job.attempts, error)
        self.store.fail_evaluation(job.id, error, now, now + backoff(self.settings, job.attempts))
        return self._report("retried", provider, 0)

    def _spent(self, agent_id: str, now: datetime) -> int:
        return self.store.evaluation_tokens(now.astimezone(UTC).date()).get(agent_id, 0)

    def _report(self, outcome: str, provider: str, tokens: int) -> str:
        self.observers.evaluation(outcome, provider, tokens)
        return outcome

    def _neighbours(self, scope: AgentScope, memory: Fragment) -> list[Neighbour]:
        """The memory's closest memories of the same agent (never another's, nor the pool's
        unless the memory is the pool's), by calibrated vector similarity."""
        vector = self.store.embeddings_of(scope, [memory.id]).get(memory.id)
        if vector is None:
            return []
        hits = [h for h in self.store.vector_search(scope, vector, SearchFilter(), NEIGHBOURS + 1) if h.id != memory.id]
        by_id = {f.id: f for f in self.store.get_many(scope, [h.id for h in hits])}
        base = self.baseline()
        out = []
        for hit in hits:
            other = by_id.get(hit.id)
            if other is None or other.agent_id != memory.agent_id or other.session_id is not None:
                continue
            out.append(Neighbour(other, min(1.0, max(0.0, (hit.score - base) / (1.0 - base)))))
        return out[:NEIGHBOURS]

    def _outcome(self, memory: Fragment, neighbours: Sequence[Neighbour], judgement: Judgement) -> EvaluationOutcome:
        """Contradictions as judged; a merge proposal (this memory into the older neighbour) for
        each neighbour of its type above the consolidation threshold with the same numbers — 001's
        merge never absorbs a pinned, anchored or keyed memory, so neither does a proposal."""
        threshold = self.settings.consolidation_similarity
        contradicted = set(judgement.contradicts)
        merges: list[tuple[str, float, str]] = []
        absorbable = not (memory.pinned or memory.is_anchor or memory.memory_key is not None)
        for n in neighbours:
            other = n.fragment
            if not absorbable or other.id in contradicted or other.type is not memory.type or n.similarity <= threshold:
                continue
            if not older(other, memory):
                continue  # the newer memory is absorbed into the older: one proposal per pair
            if set(_NUMBER.findall(memory.detail or memory.content)) != set(_NUMBER.findall(other.detail or other.content)):
                continue
            merges.append((other.id, round(n.similarity, 4), f"near-duplicate: similarity {n.similarity:.3f} > {threshold:g}"))
        result: dict[str, object] = {
            "provider": judgement.provider,
            "utility": judgement.utility,
            "informational": judgement.informational,
            "specificity": judgement.specificity,
            "actionability": judgement.actionability,
            "contradicts": list(judgement.contradicts),
            "proposedMerges": [m[0] for m in merges],
            "tokens": judgement.tokens,
        }
        if judgement.fallback:
            result["fallback"] = judgement.fallback
        # the store writes utility_score by storage/utility.py with the consolidation's half-life,
        # so the next run's utility_recomputed finds nothing to change (docs/lifecycle.md)
        half_life = self.settings.memory.ranking.recencyHalfLifeDays
        return EvaluationOutcome(judgement.utility, result, tuple(judgement.contradicts), tuple(merges), half_life)

    # ------------------------------------------------------------ the thread

    def start(self) -> None:
        """Poll every MEMENTO_EVALUATOR_POLL_MS (sooner when a memory was queued here); with a
        stream, wait on it between the polls."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="memento-evaluator", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread after its current job (App.close calls it)."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        """Without a stream: poll the table, wait. With one: poll the table (and reclaim) every
        poll interval, and in between block on the stream, which hands over a job queued on any
        replica at once. While Redis is down the stream answers None and the loop is the plain
        poll; the stream is tried again at every round and used as soon as it answers."""
        poll_ms = self.settings.evaluator_poll_ms
        poll = poll_ms / 1000
        try:
            self.backfill()
        except Exception:  # boundary: the worker must outlive a database hiccup at start-up
            log.exception("evaluator backfill failed")
        next_poll = 0.0
        while not self._stop.is_set():
            self._wake.clear()
            busy = polled = False
            try:
                if self.stream is None or monotonic() >= next_poll:
                    polled = True
                    busy = self.run_once().handled > 0
                    reclaimed = self.reclaim()
                    busy = busy or (reclaimed is not None and reclaimed.handled > 0)
                    next_poll = monotonic() + (0 if busy else poll)
                if self.stream is not None and not self._stop.is_set():
                    streamed = self.run_stream(block_ms=None if busy else min(poll_ms, STREAM_BLOCK_MS))
                    if streamed is not None:
                        continue  # the stream's wait was this round's wait
                    next_poll = 0.0  # Redis down: the table poll alone, as without Redis
                    if not polled:
                        continue  # it just went down: poll now, a wake-up may have come meanwhile
            except Exception:  # boundary: a database outage is retried on the next poll (000 §9.1)
                log.exception("evaluator round failed")
                busy = False
                next_poll = 0.0
            if not busy:
                self._wake.wait(poll)


def _add(report: WorkerReport, outcome: str) -> WorkerReport:
    return WorkerReport(**{**report.__dict__, outcome: getattr(report, outcome) + 1})


def today(now: datetime) -> date:
    return now.astimezone(UTC).date()


__all__ = ["Evaluator", "JobStream", "Unavailable", "WorkerReport", "backoff", "next_day", "today"]
