"""The composition root: build everything once from Settings and hand it to the faces."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .embeddings.factory import build_embedder
from .embeddings.local import LocalE5Embedder
from .embeddings.protocol import Embedder
from .errors import MementoError
from .extras import require
from .lifecycle.evaluator import Evaluator
from .lifecycle.providers import build_gemini, provider_chooser
from .lifecycle.sampling import SamplingSessions
from .llm import build_llm
from .observe import Observers
from .service import MemoryService, utc_now
from .settings import Settings
from .storage.protocol import AppStore, MaintenanceStore
from .storage.sqlite import SQLiteStore
from .storage.sqlite_maintenance import SQLiteMaintenance
from .storage.terms import Scoring

if TYPE_CHECKING:  # psycopg and redis are optional dependencies (the `postgres`, `redis` extras)
    from .lifecycle.scheduler import Scheduler
    from .storage.redis import RedisClients, RedisKeywordIndex
    from .storage.redis_bus import RedisBus

log = logging.getLogger(__name__)


@dataclass
class App:
    """Everything a face needs, built once."""

    settings: Settings
    service: MemoryService
    store: AppStore  # a protocol: faces never depend on the backend
    embedder: Embedder | None
    keyword_index: RedisKeywordIndex | None = None
    bus: RedisBus | None = None  # messages between replicas (Redis pub/sub), when Redis is enabled
    redis: RedisClients | None = None  # the process's Redis connections, when Redis is enabled
    observers: Observers = field(default_factory=Observers)  # metrics and logs listen here
    scheduler: Scheduler | None = None  # servers only (start_scheduler); build_app never starts one
    evaluator: Evaluator | None = None  # 000 §7's worker: queues on every write; its thread runs when started
    sampling: SamplingSessions = field(default_factory=SamplingSessions)  # MCP sessions lending their model
    _closers: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _closed: bool = field(default=False, repr=False)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run `closer` when the app closes (before the store), e.g. to release a connection."""
        self._closers.append(closer)

    def close(self) -> None:
        """Flush buffered statistics, save vector indexes, close the database. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception:
                log.warning("a close hook failed", exc_info=True)
        # Once the other workers stopped writing: the embeddings this process acknowledged, for at
        # most MEMENTO_EMBED_DRAIN_S; the rest stays pending in the store (logged) for the next start.
        self.service.outbox.stop(self.settings.embed_drain_s)
        self.service.beside.close()
        if self.bus is not None:
            self.bus.close()
        if self.keyword_index is not None:
            self.keyword_index.close()
        if self.redis is not None:
            self.redis.close()
        self.store.close()


def build_app(settings: Settings, *, embedder: Embedder | None | str = "auto", clock: Callable[[], datetime] = utc_now) -> App:
    """Build the app; pass `embedder` to override the configured provider (tests, benchmarks)."""
    chosen: Embedder | None = build_embedder(settings) if embedder == "auto" else embedder  # type: ignore[assignment]
    if chosen is None and embedder == "auto":  # configured so; a caller passing None needs no vectors
        log.warning("no embedding provider: recall runs keyword-only (semantic search disabled)")
    if settings.backend == "postgres":
        require("postgres", "A PostgreSQL DATABASE_URL (or POSTGRES_HOST)")
    if settings.redis_enabled:
        require("redis", "REDIS_ENABLED=true")
    store, maintenance = _open_store(settings, chosen)
    keyword_index: RedisKeywordIndex | None = None
    bus: RedisBus | None = None
    redis: RedisClients | None = None
    if settings.redis_enabled:
        from .storage.redis import RedisClients, RedisKeywordIndex
        from .storage.redis_bus import RedisBus

        redis = RedisClients.connect(settings)  # every Redis user below shares these two clients
        keyword_index = RedisKeywordIndex(redis.blocking, store, owns_client=False)
        keyword_index.start()  # Redis down at start-up is no error (000 §9.1): L1 joins when it answers
        bus = RedisBus(redis.blocking)
    observers = Observers()
    service = MemoryService(settings, store, maintenance, chosen, clock=clock, keyword_index=keyword_index, observers=observers)
    if keyword_index is not None:
        service.add_listener(keyword_index.on_change)
        service.erasure.add_participant(keyword_index)  # a hard forget takes its keywords out of L1 at once
    if bus is not None:
        service.add_listener(bus.publish_change)
        bus.start()
    service.consolidator.session_ttl = timedelta(minutes=settings.session_ttl_minutes)
    service.protocol.llm = build_llm(settings)  # MEMENTO_LLM_*: None unless configured (docs/llm.md)
    service.outbox.start()  # embeds in the background; its first round embeds what a crash left pending
    sampling = SamplingSessions()
    stream = None
    if redis is not None and bus is not None:  # the evaluator's delivery path between replicas (docs/lifecycle.md)
        from .storage.redis_queue import RedisJobStream

        stream = RedisJobStream(redis.blocking, consumer=bus.replica_id)
    evaluator = Evaluator(
        store,
        settings,
        provider_chooser(settings, service.protocol.llm, build_gemini(settings), sampling),
        clock=clock,
        baseline=lambda: service.searcher.baseline,
        observers=observers,
        stream=stream,
    )
    service.add_listener(evaluator.on_change)  # a write only queues; the worker judges (docs/lifecycle.md)
    service.queue_in_write = evaluator.queue_in_write  # remember queues in its own transaction
    built = App(
        settings=settings,
        service=service,
        store=store,
        embedder=chosen,
        keyword_index=keyword_index,
        bus=bus,
        redis=redis,
        observers=observers,
        evaluator=evaluator,
        sampling=sampling,
    )
    built.on_close(evaluator.stop)
    return built


def build_scheduler(app: App, clock: Callable[[], datetime] | None = None) -> Scheduler:
    """The scheduler of `app` (docs/lifecycle.md "Scheduling"), listening for inserts, not started:
    its lock is the database's own, with Redis's in front when Redis is enabled."""
    from .lifecycle.scheduler import Schedule, Scheduler
    from .storage.runs import ChainLock, RunLock

    settings = app.settings
    locks: list[RunLock] = []
    if app.redis is not None:
        from .storage.redis_lock import RedisRunLock

        locks.append(RedisRunLock(app.redis.blocking))
    locks.append(app.store.consolidation_lock())
    minutes = settings.consolidate_interval_minutes
    schedule = Schedule(
        interval=timedelta(minutes=minutes) if minutes > 0 else None,
        every_inserts=settings.consolidate_every_inserts,
        on_start=settings.consolidate_on_start,
    )
    scheduler = Scheduler(app.service, ChainLock(*locks), schedule, clock or app.service.clock)
    app.service.add_listener(scheduler.on_change)
    return scheduler


def start_scheduler(app: App) -> Scheduler:
    """Start consolidating by itself (the servers, `memento serve`); `app.close()` stops it."""
    scheduler = build_scheduler(app)
    app.scheduler = scheduler
    scheduler.start()
    app.on_close(scheduler.stop)
    return scheduler


def start_warm_up(app: App, then: Callable[[], object] | None = None) -> threading.Thread:
    """Load the local embedding model, then the token encoding, in a daemon thread: a server
    answers its handshake meanwhile instead of making the first `recall` or `remember` wait.
    A model that cannot load is logged here and fails the first call that needs it, as before.
    `then` runs on that thread afterwards (`memento serve`: ops/heap.settle)."""

    def warm() -> None:
        try:
            if isinstance(app.embedder, LocalE5Embedder):
                app.embedder.warm_up()
        except MementoError as exc:
            log.warning("embedding model warm-up failed: %s", exc.message)
        app.service.factory.tokens.warm_up()
        if then is not None:
            then()

    thread = threading.Thread(target=warm, name="memento-warm-up", daemon=True)
    thread.start()
    return thread


def database_location(settings: Settings) -> str:
    """Where the store lives, fit for a log line: the SQLite file, or the PostgreSQL server and
    database with its user (never a password)."""
    if settings.backend == "sqlite":
        return str(settings.sqlite_path.resolve())
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(settings.postgres_dsn)
    host, port, name, user = (parts.get(k) for k in ("host", "port", "dbname", "user"))
    return f"{user or ''}{'@' if user else ''}{host or 'localhost'}:{port or 5432}/{name or ''}"


def log_startup(app: App, transport: str) -> None:
    """The server's first log line: version, database, embedding model and transport."""
    from . import __version__

    settings = app.settings
    model = f"{app.embedder.name} ({app.embedder.dimensions} dimensions)" if app.embedder else "none (keyword-only recall)"
    where = database_location(settings)
    redis = f"; redis {settings.redis_host}:{settings.redis_port}" if settings.redis_enabled and not settings.redis_sentinel_enabled else ""
    if settings.redis_enabled and settings.redis_sentinel_enabled:
        redis = f"; redis via sentinel master {settings.redis_master_name}"
    llm = app.service.protocol.llm
    shown_llm = f"; language model {getattr(llm, 'name', 'configured')}" if llm is not None else ""  # never its key
    log.info(
        "memento %s starting: %s database %s; embedding model %s; transport %s%s%s",
        __version__,
        settings.backend,
        where,
        model,
        transport,
        redis,
        shown_llm,
        extra={
            "backend": settings.backend,
            "database": where,
            "embedding_model": app.embedder.name if app.embedder else None,
            "transport": transport,
        },
    )


def _open_store(settings: Settings, embedder: Embedder | None) -> tuple[AppStore, MaintenanceStore]:
    """SQLite by default; PostgreSQL when DATABASE_URL is postgresql:// or POSTGRES_HOST is set."""
    model = embedder.name if embedder else None
    dimensions = embedder.dimensions if embedder else None
    if settings.backend == "postgres":
        from psycopg.conninfo import conninfo_to_dict

        from .storage.postgres import PostgresStore
        from .storage.postgres_maintenance import PostgresMaintenance
        from .storage.postgres_schema import migrate

        dsn = settings.postgres_dsn
        app_role = conninfo_to_dict(dsn).get("user")
        migrate(settings.database_migration_url or dsn, app_role=str(app_role) if app_role else None, dimensions=dimensions)
        pg = PostgresStore(
            dsn,
            embedding_model=model,
            dimensions=dimensions,
            max_connections=settings.db_max_connections,
            idle_timeout_ms=settings.db_idle_timeout_ms,
            conn_timeout_ms=settings.db_conn_timeout_ms,
            query_timeout_ms=settings.db_query_timeout,
            ef_search=settings.hnsw_ef_search,
            text_scoring=text_scoring(settings),
        )
        return pg, PostgresMaintenance(pg)
    store = SQLiteStore(
        settings.sqlite_path,
        embedding_model=model,
        dimensions=dimensions,
        synchronous=settings.sqlite_synchronous,
        ann_threshold=settings.ann_threshold,
        ef_search=settings.hnsw_ef_search,
        hnsw_m=settings.hnsw_m,
        hnsw_ef_construction=settings.hnsw_ef_construction,
        text_scoring=text_scoring(settings),
    )
    return store, SQLiteMaintenance(store)


def text_scoring(settings: Settings) -> Scoring:
    """The full-text tier's rescoring parameters (MEMENTO_TEXT_*)."""
    return Scoring(
        b=settings.text_length_norm,
        delta=settings.text_match_bonus,
        pool=settings.text_rescore_pool,
        common_terms=settings.text_common_terms,
        postings=settings.text_postings_budget,
        idf_window=settings.text_idf_window,
    )
