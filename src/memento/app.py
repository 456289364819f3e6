"""The composition root: build everything once from Settings and hand it to the faces."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .embeddings.factory import build_embedder
from .embeddings.protocol import Embedder
from .service import MemoryService, utc_now
from .settings import Settings
from .storage.sqlite import SQLiteStore
from .storage.sqlite_maintenance import SQLiteMaintenance

log = logging.getLogger(__name__)


@dataclass
class App:
    """Everything a face needs, built once."""

    settings: Settings
    service: MemoryService
    store: SQLiteStore
    embedder: Embedder | None
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """Flush buffered statistics, save vector indexes, close the database. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.store.close()


def build_app(settings: Settings, *, embedder: Embedder | None | str = "auto", clock: Callable[[], datetime] = utc_now) -> App:
    """Build the app; pass `embedder` to override the configured provider (tests, benchmarks)."""
    chosen: Embedder | None = build_embedder(settings) if embedder == "auto" else embedder  # type: ignore[assignment]
    if chosen is None:
        log.warning("no embedding provider: recall runs keyword-only (semantic search disabled)")
    store = SQLiteStore(
        settings.sqlite_path,
        embedding_model=chosen.name if chosen else None,
        dimensions=chosen.dimensions if chosen else None,
        synchronous=settings.sqlite_synchronous,
        ann_threshold=settings.ann_threshold,
        ef_search=settings.hnsw_ef_search,
    )
    service = MemoryService(settings, store, SQLiteMaintenance(store), chosen, clock=clock)
    service.consolidator.session_ttl = timedelta(minutes=settings.session_ttl_minutes)
    return App(settings=settings, service=service, store=store, embedder=chosen)
