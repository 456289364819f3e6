"""The service's use of the embedding provider: passage and query vectors, the backfill of
fragments stored without one, and the observer report of every provider call.

A failing provider never fails the operation that asked (000 §9.3): a write is stored without
its vector (the embedding outbox, memento.outbox, embeds it in the background) and a recall runs
on the keyword tiers. The vectorizer also keeps the provider's health (the last call failed, a
call has been running long) so nobody waits on a provider that is known not to answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

import numpy as np

from .embeddings.protocol import Embedder
from .models import AgentScope
from .observe import Observer
from .storage.protocol import Store

log = logging.getLogger(__name__)
T = TypeVar("T")
BACKFILL_BATCH = 64
BOUNDED_CALLS = 2  # provider calls a bounded wait may have running; more: the provider is not answering


class Vectorizer:
    """Embeds for the service; None (or a pending vector) whenever the provider cannot answer."""

    def __init__(self, embedder: Embedder | None, store: Store, observers: Observer) -> None:
        self.embedder = embedder
        self.store = store
        self.observers = observers
        self._lock = threading.Lock()
        self._in_flight: dict[int, float] = {}  # call number -> monotonic start, of running provider calls
        self._calls = 0
        self._failing = False  # the last provider call failed
        self._answered: float | None = None  # monotonic time the provider last answered
        self._bounded: ThreadPoolExecutor | None = None
        self._bounded_running = 0

    def search_mode(self) -> str:
        return "hybrid" if self.embedder is not None else "keyword-only"

    def passage(self, text: str) -> np.ndarray | None:
        """A passage vector, or None when the provider fails (the write goes on; 000 §9.3)."""
        if self.embedder is None:
            return None
        try:
            return np.asarray(self.passages([text])[0])
        except Exception as exc:  # noqa: BLE001 - any provider failure degrades to a pending embedding
            log.warning("embedding failed, fragment stored for backfill: %s", exc)
            return None

    def within(self, text: str, wait_s: float) -> np.ndarray | None:
        """A passage vector if the provider answers within `wait_s`, else None at once (a write-time
        decision goes on without it). Never waits on a provider that is failing or hanging."""
        if self.embedder is None or wait_s <= 0 or self.stalled(wait_s):
            return None
        with self._lock:
            if self._bounded_running >= BOUNDED_CALLS:
                return None  # earlier calls are still out: this one would only queue behind them
            if self._bounded is None:
                self._bounded = ThreadPoolExecutor(BOUNDED_CALLS, thread_name_prefix="memento-embed-wait")
            self._bounded_running += 1
            future = self._bounded.submit(self.passage, text)
        future.add_done_callback(lambda _: self._bounded_done())
        try:
            return future.result(timeout=wait_s)
        except FutureTimeout:
            log.info("embedding took longer than %.0f ms: decided without the vector", wait_s * 1000)
            return None

    def _bounded_done(self) -> None:
        with self._lock:
            self._bounded_running -= 1

    def stalled(self, hanging_s: float) -> bool:
        """Whether the provider is failing (its last call failed) or hanging (a call has been running
        for longer than `hanging_s` and none answered meanwhile: calls queued behind a slow one,
        say behind the local model's first load, are no hang): a caller should not wait for it."""
        with self._lock:
            if self._failing:
                return True
            oldest = min(self._in_flight.values(), default=None)
            answered = self._answered
        now = time.monotonic()
        return oldest is not None and now - oldest > hanging_s and (answered is None or now - answered > hanging_s)

    def close(self) -> None:
        """Stop the bounded-wait threads (a call still running finishes on its own)."""
        with self._lock:
            pool, self._bounded = self._bounded, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def query(self, text: str) -> np.ndarray | None:
        """A query vector, or None when the provider fails (recall goes on without the vector tier)."""
        embedder = self.embedder
        if embedder is None:
            return None
        try:
            return self._observed("query", lambda: embedder.embed_query(text))
        except Exception as exc:  # noqa: BLE001 - recall degrades to the keyword tiers
            log.warning("query embedding failed, recall is keyword-only: %s", exc)
            return None

    def query_first(self) -> bool:
        """Whether a query's embedding takes every core of this machine (the local model, whose
        engine says so): a recall then embeds its query before reading its other tiers instead
        of beside them, and runs only the vector search beside them (retrieval/recall.py). A
        remote provider's call waits on the network and goes beside."""
        fills = getattr(self.embedder, "query_fills_cores", None)
        return bool(fills is not None and fills())

    def passages(self, texts: list[str]) -> np.ndarray:
        """Passage vectors for `texts` (raises when the provider fails)."""
        embedder = self.embedder
        assert embedder is not None
        return self._observed("passage", lambda: embedder.embed_passages(texts))

    def backfill(self, scope: AgentScope, limit: int | None = None) -> int:
        """Embed fragments that have no vector of the current model. Returns how many were done."""
        if self.embedder is None:
            return 0
        done, after = 0, 0
        while limit is None or done < limit:
            batch = self.store.missing_embeddings(scope, BACKFILL_BATCH, after)
            if not batch:
                break
            after = batch[-1][0]
            try:
                vectors = self.passages([content for _, _, content in batch])
            except Exception as exc:  # noqa: BLE001 - provider still down: leave the rest pending
                log.warning("embedding backfill stopped: %s", exc)
                break
            for (_, fid, _), vector in zip(batch, vectors):
                self.store.set_embedding(fid, vector)
            done += len(batch)
        return done

    def pending(self, scope: AgentScope) -> list[str]:
        """The ids `backfill` would embed now (none without a provider); the provider is not called."""
        if self.embedder is None:
            return []
        ids: list[str] = []
        after = 0
        while batch := self.store.missing_embeddings(scope, BACKFILL_BATCH, after):
            ids.extend(fid for _, fid, _ in batch)
            after = batch[-1][0]
        return ids

    def _observed(self, kind: str, call: Callable[[], T]) -> T:
        """An embedding provider call, reported to the observers (duration, failure) and kept
        in the provider's health."""
        started = time.perf_counter()
        with self._lock:
            self._calls += 1
            number = self._calls
            self._in_flight[number] = time.monotonic()
        try:
            result = call()
        except BaseException as exc:
            self._finished(number, failed=isinstance(exc, Exception))
            self.observers.embedding(kind, time.perf_counter() - started, exc)
            raise
        self._finished(number, failed=False)
        self.observers.embedding(kind, time.perf_counter() - started, None)
        return result

    def _finished(self, number: int, *, failed: bool) -> None:
        with self._lock:
            self._in_flight.pop(number, None)
            self._failing = failed
            if not failed:
                self._answered = time.monotonic()
