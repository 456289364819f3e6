"""`GET /health` (000 §2.2, §9.2, §12): database, Redis, embeddings, sessions, version, uptime.

The database check is a real query through the store (`store.ping()`), so an unreachable
database answers 503 with `status: "degraded"` and `database.status: "down"`, and the next
check after it recovers answers 200 again. Redis and the embedding provider are reported but
never make the server unhealthy (Redis down: `status: "degraded"`, `redis.status: "down"`, HTTP 200): recall degrades to the keyword tiers without them (000 §9.1,
§9.3), and a load balancer should keep routing to a replica that can still serve.

`/health` passes the same Origin/Host gate as `/mcp`. Without an admin credential (when
credentials are configured) it answers only `{"status": ...}` with the same HTTP status: what
a load balancer needs, nothing about the deployment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memento import __version__
from memento.endpoint import ServedEndpoint, require_gate

from .logs import redact
from .metrics import OpsState, attach_endpoint, operator

if TYPE_CHECKING:
    from memento.app import App

DATABASE_TIMEOUT_S = 5.0


def _iso(stamp: float | None) -> str | None:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds") if stamp is not None else None


async def check_database(app: App) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        with anyio.fail_after(DATABASE_TIMEOUT_S):
            await anyio.to_thread.run_sync(app.store.ping, abandon_on_cancel=True)
    except TimeoutError:
        return {"status": "down", "backend": app.settings.backend, "error": f"no answer within {DATABASE_TIMEOUT_S:g}s"}
    except Exception as exc:  # noqa: BLE001 - any failure of the query is an outage
        return {"status": "down", "backend": app.settings.backend, "error": redact(f"{type(exc).__name__}: {exc}")[:300]}
    return {"status": "up", "backend": app.settings.backend, "latency_ms": round((time.perf_counter() - started) * 1000, 2)}


async def check_redis(app: App) -> dict[str, Any]:
    """Redis (REDIS_ENABLED): `up`, or `down` with L1 skipped. Down degrades recall's first
    keyword tier only (000 §9.1), so it never turns the answer into a 503."""
    index = app.keyword_index
    if index is None or not app.settings.redis_enabled:
        return {"status": "not_configured"}
    try:
        with anyio.fail_after(DATABASE_TIMEOUT_S):
            up = await anyio.to_thread.run_sync(index.ping, abandon_on_cancel=True)
    except TimeoutError:
        up = False
    if not up:
        return {"status": "down", "l1": "skipped (recall uses the database's keyword tier)"}
    return {"status": "up"}


def check_embeddings(app: App, state: OpsState) -> dict[str, Any]:
    """Which provider runs, and whether its last call failed (PRODUCT: say plainly when
    recall is keyword-only)."""
    embedder = app.embedder
    provider = app.settings.embedding_provider
    if embedder is None:
        return {"provider": "none", "status": "disabled", "searchMode": "keyword-only", "model": None}
    status = state.embedding
    with status.lock:
        failing = status.last_failure is not None and (status.last_success is None or status.last_failure > status.last_success)
        report: dict[str, Any] = {
            "provider": provider,
            "kind": "remote" if provider == "openai" else "local",
            "model": embedder.name,
            "status": "failing" if failing else "ok",
            "searchMode": "hybrid",
            "failures": status.failures,
            "lastSuccess": _iso(status.last_success),
            "lastFailure": None if status.last_failure is None else {"at": _iso(status.last_failure), "error": status.last_error},
        }
    return report


def health_endpoint(app: App, endpoint: ServedEndpoint) -> Callable[[Request], Any]:
    gate = require_gate(endpoint.gate, "GET /health")
    state = attach_endpoint(app, endpoint)

    async def health(request: Request) -> Response:
        refused = gate.guard(request)  # a foreign Origin or Host
        if refused is not None:
            return refused
        details = operator(endpoint, request) is None
        database = await check_database(app)
        redis = await check_redis(app)
        healthy = database["status"] == "up"
        status = "ok" if healthy and redis["status"] != "down" else "degraded"
        code = 200 if healthy else 503
        if not details:  # no (or no admin) credential: the status only
            return JSONResponse({"status": status}, status_code=code, headers={"Cache-Control": "no-store"})
        body = {
            "status": status,
            "version": __version__,
            "uptimeSeconds": round(state.uptime_s(), 3),
            "startedAt": _iso(state.started),
            "database": database,
            "redis": redis,
            "embeddings": check_embeddings(app, state),
            "sessions": state.session_counts(),
        }
        return JSONResponse(body, status_code=code, headers={"Cache-Control": "no-store"})

    return health
