"""Prometheus metrics (`GET /metrics`), one CollectorRegistry per app.

What is measured and where it comes from, without touching the code it measures:
- HTTP requests: an ASGI middleware (method, route template, status; duration).
- MCP tool calls, recall latency, consolidation runs, embedding latency and failures: the
  app's observer hooks (memento.observe), which the server, the service and the consolidator
  call; `MetricsObserver` records them. Only a tool's *name* is ever recorded, never arguments.
  `/health` reads the last embedding failure from the same tracker.
- store size, sessions and pending embeddings: computed on scrape (the store's size_summary;
  each endpoint's session_counts; the embedding worker's queue). The worker's batch latency
  comes through the observer hook `embedding_batch`.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memento import __version__
from memento.endpoint import ServedEndpoint, require_gate
from memento.models import AgentScope
from memento.observe import Observer
from memento.storage.runs import RunQuery

if TYPE_CHECKING:
    from memento.app import App

log = logging.getLogger(__name__)
access_log = logging.getLogger("memento.access")

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
UNMATCHED_ROUTE = "<unmatched>"

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series: half the output, nothing a dashboard uses


@dataclass
class EmbeddingStatus:
    """What the embedder did last: for `/health` (status) and `/metrics` (latency, failures)."""

    last_success: float | None = None  # wall-clock seconds
    last_failure: float | None = None
    last_error: str | None = None  # exception class name only: messages may quote input
    failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def succeeded(self) -> None:
        with self.lock:
            self.last_success = time.time()

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            self.last_failure = time.time()
            self.last_error = type(exc).__name__
            self.failures += 1


class OpsState:
    """Per-app operational state: the metrics registry, start time, embedding status."""

    def __init__(self, app: App) -> None:
        self.app_ref = weakref.ref(app.service)
        self.evaluator_ref = weakref.ref(app.evaluator) if app.evaluator is not None else None
        self.started = time.time()
        self.started_monotonic = time.monotonic()
        self.embedding = EmbeddingStatus()
        self.registry = CollectorRegistry(auto_describe=True)
        self.mcp_endpoints: weakref.WeakSet[ServedEndpoint] = weakref.WeakSet()
        r = self.registry
        self.http_requests = Counter("memento_http_requests", "HTTP requests answered.", ["method", "route", "status"], registry=r)
        self.http_duration = Histogram(
            "memento_http_request_duration_seconds",
            "Time to answer an HTTP request (SSE streams excluded).",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tool_calls = Counter("memento_mcp_tool_calls", "MCP tool calls.", ["tool", "outcome"], registry=r)
        self.tool_duration = Histogram(
            "memento_mcp_tool_call_duration_seconds", "MCP tool call duration.", ["tool"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.recall_duration = Histogram(
            "memento_recall_duration_seconds", "Recall latency (embedding, tiers, ranking).", buckets=LATENCY_BUCKETS, registry=r
        )
        self.embedding_duration = Histogram(
            "memento_embedding_duration_seconds", "Embedding provider latency.", ["kind"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.embedding_failures = Counter("memento_embedding_failures", "Embedding provider failures.", ["kind"], registry=r)
        self.embedding_batch_duration = Histogram(
            "memento_embedding_batch_duration_seconds",
            "The embedding worker's batches (provider call and storing the vectors), by outcome.",
            ["outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.consolidation_runs = Counter("memento_consolidation_runs", "Consolidation pipeline runs.", ["outcome"], registry=r)
        self.consolidation_duration = Histogram(
            "memento_consolidation_duration_seconds",
            "Consolidation pipeline duration.",
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.consolidation_triggered = Counter(
            "memento_consolidation_runs_by_trigger",
            "Recorded consolidation runs by trigger (interval, inserts, startup, manual) and outcome (ok, error, skipped).",
            ["trigger", "outcome"],
            registry=r,
        )
        self.consolidation_run_duration = Histogram(
            "memento_consolidation_run_duration_seconds",
            "Duration of recorded consolidation runs by trigger.",
            ["trigger"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.evaluation_jobs = Counter("memento_evaluator_jobs", "Evaluator jobs handled, by outcome.", ["outcome"], registry=r)
        self.evaluation_tokens = Counter(
            "memento_evaluator_tokens", "Model tokens the evaluator used, by provider.", ["provider"], registry=r
        )
        info = Gauge("memento_build_info", "Version and configuration.", ["version", "backend", "embedding"], registry=r)
        settings = app.settings
        info.labels(__version__, settings.backend, app.embedder.name if app.embedder else "none").set(1)
        Gauge("memento_start_time_seconds", "Start time of the process, Unix seconds.", registry=r).set(self.started)
        r.register(_ScrapeCollector(self))

    def service(self) -> Any:
        return self.app_ref()

    def uptime_s(self) -> float:
        return time.monotonic() - self.started_monotonic

    def session_counts(self) -> dict[str, int]:
        """Live MCP sessions per transport, over every mounted endpoint of this app."""
        streamable = legacy = 0
        for endpoint in list(self.mcp_endpoints):
            counts = endpoint.session_counts()
            streamable += counts.get("streamable_http", 0)
            legacy += counts.get("legacy_sse", 0)
        return {"streamable_http": streamable, "legacy_sse": legacy, "total": streamable + legacy}


class MetricsObserver(Observer):
    """Records the app's observer hooks in its registry (and the embedding status for /health)."""

    def __init__(self, state: OpsState) -> None:
        self.state = state

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        self.state.tool_calls.labels(tool, outcome).inc()
        self.state.tool_duration.labels(tool).observe(seconds)
        # Name and outcome only: arguments and results may carry memory content.
        log.info("tool call %s: %s", tool, outcome, extra={"tool": tool, "outcome": outcome, "duration_ms": round(seconds * 1000, 2)})

    def recall(self, seconds: float) -> None:
        self.state.recall_duration.observe(seconds)

    def embedding_batch(self, rows: int, seconds: float, error: BaseException | None) -> None:
        self.state.embedding_batch_duration.labels("ok" if error is None else "error").observe(seconds)

    def consolidation(self, outcome: str, seconds: float) -> None:
        self.state.consolidation_runs.labels(outcome).inc()
        self.state.consolidation_duration.observe(seconds)

    def consolidation_run(self, trigger: str, outcome: str, seconds: float) -> None:
        self.state.consolidation_triggered.labels(trigger, outcome).inc()
        if outcome != "skipped":
            self.state.consolidation_run_duration.labels(trigger).observe(seconds)

    def embedding(self, kind: str, seconds: float, error: BaseException | None) -> None:
        self.state.embedding_duration.labels(kind).observe(seconds)
        if error is None:
            self.state.embedding.succeeded()
        elif isinstance(error, Exception):
            self.state.embedding_failures.labels(kind).inc()
            self.state.embedding.failed(error)

    def evaluation(self, outcome: str, provider: str, tokens: int) -> None:
        self.state.evaluation_jobs.labels(outcome).inc()
        if tokens:
            self.state.evaluation_tokens.labels(provider).inc(tokens)


class _ScrapeCollector(Collector):
    """Gauges computed at scrape time: store size and sessions."""

    def __init__(self, state: OpsState) -> None:
        self.state = state

    def describe(self) -> Iterator[Any]:
        return iter(())  # values are only known at scrape time

    def collect(self) -> Iterator[Any]:
        sessions = GaugeMetricFamily("memento_sessions", "Live MCP sessions.", labels=["transport"])
        for transport, count in self.state.session_counts().items():
            if transport != "total":
                sessions.add_metric([transport], count)
        yield sessions
        uptime = GaugeMetricFamily("memento_uptime_seconds", "Seconds since start.")
        uptime.add_metric([], self.state.uptime_s())
        yield uptime
        service = self.state.service()
        if service is None:
            return
        pending = GaugeMetricFamily(
            "memento_embeddings_pending", "Rows this process stored without a vector, not yet embedded by its worker."
        )
        pending.add_metric([], service.outbox.pending())
        yield pending
        up = GaugeMetricFamily("memento_database_up", "1 when the database answered a query at scrape time.")
        try:
            service.store.ping()
            size = service.store.size_summary()
        except Exception as exc:  # noqa: BLE001 - a scrape must answer even with the database down
            log.warning("database unavailable for metrics: %s", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        fragments = GaugeMetricFamily("memento_fragments", "Stored fragments by TTL tier (working memory excluded).", labels=["tier"])
        for tier, count in sorted(size["by_tier"].items()):
            fragments.add_metric([tier], count)
        yield fragments
        working = GaugeMetricFamily("memento_working_memory_fragments", "Session-scoped working-memory fragments.")
        working.add_metric([], size["working_memory"])
        yield working
        agents = GaugeMetricFamily("memento_agents", "Agents owning at least one fragment.")
        agents.add_metric([], size["agents"])
        yield agents
        yield from _last_consolidation(service)
        yield from _queue_gauges(service)
        yield from _stream_gauges(self.state)


def _last_consolidation(service: Any) -> Iterator[Any]:
    """When the last successful run started (any namespace, any replica: read from the run record)."""
    runs = service.runs.consolidation_runs("system", RunQuery(outcomes=("ok",), limit=1))
    if runs:
        last = GaugeMetricFamily(
            "memento_consolidation_last_success_timestamp_seconds",
            "Start of the last successful consolidation run (any replica), Unix seconds.",
        )
        last.add_metric([], runs[0].started_at.timestamp())
        yield last


def _queue_gauges(service: Any) -> Iterator[Any]:
    """The evaluator's queue by status (every agent's)."""
    now = service.clock()
    counts = service.store.evaluation_counts(AgentScope("system"), now.date())
    queue = GaugeMetricFamily("memento_evaluator_queue", "Evaluator jobs by status.", labels=["status"])
    for status in ("queued", "running", "done", "dead"):
        queue.add_metric([status], getattr(counts, status))
    yield queue
    proposals = GaugeMetricFamily("memento_evaluator_merge_proposals", "Open merge proposals of the evaluator.")
    proposals.add_metric([], counts.proposals)
    yield proposals


def _stream_gauges(state: OpsState) -> Iterator[Any]:
    """The evaluator's Redis stream, when Redis is enabled and answers: entries in it, entries
    delivered and not yet acknowledged (pending), entries not yet delivered (lag)."""
    evaluator = state.evaluator_ref() if state.evaluator_ref is not None else None
    stats = evaluator.stream_stats() if evaluator is not None else None
    if stats is None:
        return
    stream = GaugeMetricFamily("memento_evaluator_stream", "The evaluator's Redis stream: length, pending, lag.", labels=["measure"])
    stream.add_metric(["length"], stats.length)
    stream.add_metric(["pending"], stats.pending)
    if stats.lag is not None:
        stream.add_metric(["lag"], stats.lag)
    yield stream


# ---------------------------------------------------------------- per-app state and hooks

_STATES: weakref.WeakKeyDictionary[Any, OpsState] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def ops_state(app: App) -> OpsState:
    """The app's OpsState, created (and its observer registered) on first use."""
    with _STATES_LOCK:
        state = _STATES.get(app.service)
        if state is None:
            state = OpsState(app)
            _STATES[app.service] = state
            app.observers.add(MetricsObserver(state))
        return state


def attach_endpoint(app: App, endpoint: ServedEndpoint) -> OpsState:
    """Count `endpoint`'s sessions in the app's metrics (idempotent)."""
    state = ops_state(app)
    state.mcp_endpoints.add(endpoint)
    return state


# ---------------------------------------------------------------- HTTP


def operator(endpoint: ServedEndpoint, request: Request) -> Response | None:
    """None when `request` may see the operational details (an admin credential, or any request
    when no credential is configured); else the refusal: 403 for a foreign Origin or Host,
    401/400/503 for a missing or bad credential, 403 for a credential bound to an agent."""
    gate = endpoint.gate
    refused = gate.guard(request)
    if refused is not None:
        return refused
    principal = gate.authenticate(request)
    if isinstance(principal, Response):
        return principal
    if principal.agent_id is not None:
        return gate.forbidden(request, "Forbidden: this needs an admin credential")
    return None


def metrics_endpoint(app: App, endpoint: ServedEndpoint) -> Callable[[Request], Any]:
    """`GET /metrics`: an admin credential, or MEMENTO_METRICS_PUBLIC=1 for a private scraper."""
    require_gate(endpoint.gate, "GET /metrics")
    state = attach_endpoint(app, endpoint)

    async def metrics(request: Request) -> Response:
        refused = endpoint.gate.guard(request)  # public or not, never to a foreign Origin/Host
        if refused is None and not app.settings.metrics_public:
            refused = operator(endpoint, request)
        if refused is not None:
            return refused
        body = await anyio.to_thread.run_sync(generate_latest, state.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return metrics


def _route_of(scope: Scope) -> str:
    router = scope.get("app")
    for route in getattr(router, "routes", ()):
        try:
            match, _ = route.matches(scope)
        except Exception:  # noqa: BLE001 - a label is never worth a failed request
            continue
        if match is Match.FULL:
            return str(getattr(route, "path", UNMATCHED_ROUTE))
    return UNMATCHED_ROUTE


class RequestMetricsMiddleware:
    """Counts every HTTP response by method, route template and status; logs one access line.

    The route is the matched template (`/mcp`, `/health`), never the raw path or query string
    (which may carry `accessKey`)."""

    def __init__(self, app: ASGIApp, state: OpsState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = str(scope.get("method", "GET"))
        route = _route_of(scope)
        status = 500
        streaming = False
        counted = False

        def count() -> None:
            nonlocal counted
            if not counted:
                counted = True
                self.state.http_requests.labels(method, route, str(status)).inc()

        async def wrapped(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for key, value in message.get("headers", ()):
                    if key.lower() == b"content-type" and value.lower().startswith(b"text/event-stream"):
                        streaming = True
                count()  # at the start: a stream may stay open for hours
            await send(message)

        try:
            await self.app(scope, receive, wrapped)
        finally:
            count()
            elapsed = time.perf_counter() - started
            if not streaming:
                self.state.http_duration.labels(method, route).observe(elapsed)
            access_log.info(
                "%s %s %d",
                method,
                route,
                status,
                extra={"method": method, "route": route, "status": status, "duration_ms": round(elapsed * 1000, 2)},
            )
