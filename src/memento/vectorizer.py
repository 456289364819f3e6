"""The service's use of the embedding provider: passage and query vectors, the backfill of
fragments stored without one, and the observer report of every provider call.

A failing provider never fails the operation that asked (000 §9.3): a write is stored without
its vector (backfilled later) and a recall runs on the keyword tiers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from .embeddings.protocol import Embedder
from .models import AgentScope
from .observe import Observer
from .storage.protocol import Store

log = logging.getLogger(__name__)
T = TypeVar("T")
BACKFILL_BATCH = 64


class Vectorizer:
    """Embeds for the service; None (or a pending vector) whenever the provider cannot answer."""

    def __init__(self, embedder: Embedder | None, store: Store, observers: Observer) -> None:
        self.embedder = embedder
        self.store = store
        self.observers = observers

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
        """An embedding provider call, reported to the observers (duration, failure)."""
        started = time.perf_counter()
        try:
            result = call()
        except BaseException as exc:
            self.observers.embedding(kind, time.perf_counter() - started, exc)
            raise
        self.observers.embedding(kind, time.perf_counter() - started, None)
        return result
