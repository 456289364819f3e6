"""The web app: the one ASGI application Memento serves over HTTP, composed in one place.

It puts together typed parts built elsewhere: the MCP Streamable HTTP endpoint (`mcp/http.py`)
with its session directory and event store (on the app's Redis connection when replicas share
sessions), the legacy HTTP+SSE endpoints, the OAuth routes (`auth/oauth_http.py`), the
operations routes and middleware (`ops`), and the request limits — with room for the REST API
and the dashboard. Every route that checks Origin/Host or credentials is handed the endpoint's
gate explicitly; composing one without it is a start-up error. `serve_http` serves the app until
SIGTERM/SIGINT and then closes every session and the app.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
from collections.abc import AsyncIterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from memento import ops
from memento.auth import oauth_http
from memento.auth.registry import token_verifiers
from memento.endpoint import require_gate
from memento.errors import Unavailable
from memento.mcp.cluster import SessionDirectory
from memento.mcp.events import EventStore, StoredEventEraser
from memento.mcp.features import Feature
from memento.mcp.http import McpHttp
from memento.mcp.http_gate import HttpGate, allowed_hosts, check_exposure
from memento.mcp.http_json import JSONResponse  # total: always valid JSON
from memento.mcp.http_limits import RequestLimits, header_timeout_protocol
from memento.mcp.registry import default_features
from memento.mcp.server import McpServer
from memento.mcp.sse_legacy import LegacySse
from memento.ops import heap
from memento.rest import RestApi, create_rest_api
from memento.ui import Dashboard, create_dashboard

if TYPE_CHECKING:
    from memento.app import App

log = logging.getLogger(__name__)
LISTEN_BACKLOG = 2048  # uvicorn's default


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def mcp_endpoint(app: App, features: Sequence[Feature] | None = None) -> McpHttp:
    """The Streamable HTTP endpoint with its gate, and its shared session state when Redis is on."""
    ttl_s = app.settings.session_ttl_minutes * 60.0
    store: EventStore | None = None
    directory: SessionDirectory | None = None
    if app.bus is not None and app.redis is not None:  # Redis: any replica can serve any session
        from memento.mcp.cluster import RedisSessionDirectory
        from memento.mcp.cluster_store import Guarded, RedisEventStore

        shared = Guarded(app.redis.loop, "MCP sessions and SSE events")  # the app's event-loop client
        store = RedisEventStore(shared, ttl_s)
        directory = RedisSessionDirectory(shared, app.bus, ttl_s)
    endpoint = McpHttp(
        McpServer(app, features=default_features(app.settings) if features is None else features),
        gate=HttpGate(app, allowed_origins=app.settings.origins, allowed_hosts=allowed_hosts(app.settings)),
        session_ttl_s=ttl_s,
        event_store=store,
        directory=directory,
        max_sessions=app.settings.max_sessions,
        queue_limit=app.settings.stream_queue_limit,
    )
    app.service.erasure.add_participant(StoredEventEraser(endpoint.store))  # a hard forget: no replay of the text
    return endpoint


def rest_api(app: App, mcp: McpHttp, dashboard: Dashboard | None = None) -> RestApi:
    """The REST API (/api) behind /mcp's gate, over the entity face's service; with a dashboard,
    its session cookie counts there too (with the CSRF header: memento.ui.gate)."""
    gate = require_gate(mcp.gate, "the REST API")
    return create_rest_api(app, dashboard.api_gate if dashboard is not None else gate, app.service.entities)


def routes(app: App, mcp: McpHttp, legacy: LegacySse, rest: RestApi | None = None, dashboard: Dashboard | None = None) -> list[BaseRoute]:
    """Every route of the web app. Routes beside /mcp get its gate (never optional)."""
    gate = require_gate(mcp.gate, "the web app")
    dashboard = dashboard or create_dashboard(app, gate)
    rest = rest or rest_api(app, mcp, dashboard)
    return [
        *dashboard.routes(),  # the dashboard (memento.ui) at /ui
        Route("/mcp", mcp.endpoint, methods=["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"]),
        rest.mount("/api"),  # the REST API (memento.rest), same credentials as /mcp
        rest.mount_v1("/v1"),  # seed 003's API (memento.rest.v1), same credentials
        Route("/sse", legacy.connect, methods=["GET"]),
        Route("/message", legacy.message, methods=["POST"]),
        *ops.routes(app, mcp),  # /health, /metrics
        *oauth_http.routes(app, gate),  # OAuth metadata, /register, /authorize, /token, /revoke
        Route("/health", _health, methods=["GET"]),  # shadowed by the fuller one of ops
    ]


def create_http_app(app: App, *, features: Sequence[Feature] | None = None) -> Starlette:
    """The ASGI application: `/mcp`, the legacy `/sse` + `/message`, the REST API under `/api`, the dashboard at `/ui`, OAuth, `/health`, `/metrics`.

    `features` replaces the registry's list (tests plug their own in)."""
    from memento.mcp.cluster import CHANNEL

    token_verifiers(app)  # validates the credential configuration now, not at the first request
    mcp = mcp_endpoint(app, features)
    if app.bus is not None:
        app.bus.on(CHANNEL, mcp.on_replica_message)
    legacy = LegacySse(mcp)
    mcp.legacy = legacy
    dashboard = create_dashboard(app, require_gate(mcp.gate, "the dashboard"))
    rest = rest_api(app, mcp, dashboard)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        mcp.started()
        try:
            yield
        finally:
            mcp._close_streams()
            rest.hub.begin_shutdown()
            await mcp.close_all()
            await anyio.to_thread.run_sync(app.close)
            log.info("HTTP server stopped")

    asgi = Starlette(
        routes=routes(app, mcp, legacy, rest, dashboard),
        middleware=[
            *ops.middleware(app),  # request metrics (outermost, sees the final status), compression
            # Around every route, once: body size and body timeout (http_limits).
            Middleware(RequestLimits, max_body_bytes=app.settings.max_body_bytes, body_timeout_s=app.settings.body_timeout_s),
        ],
        lifespan=lifespan,
    )
    asgi.state.mcp = mcp
    asgi.state.rest = rest
    return asgi


class _Server(uvicorn.Server):
    """uvicorn, plus: the first exit signal also ends the idle SSE streams it would wait for."""

    def __init__(self, config: uvicorn.Config, mcp: McpHttp, rest: RestApi) -> None:
        super().__init__(config)
        self._mcp = mcp
        self._rest = rest

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._mcp.begin_shutdown()
        self._rest.hub.begin_shutdown()
        super().handle_exit(sig, frame)


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything announces the server: a port in use is
    reported as such (Unavailable), and nothing has claimed to serve on it first."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named explicitly: accepted connections inherit it, and asyncio sets TCP_NODELAY
    # only on sockets that say TCP. Without it a keep-alive client waited ~40 ms for every response
    # (Nagle's algorithm against the client's delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart during TIME_WAIT, as uvicorn does
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise Unavailable(
                f"cannot serve on {host}:{port}: address already in use (is another server running there? choose --port or PORT)"
            ) from exc
        raise Unavailable(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def serve_http(app: App, host: str, port: int, *, allow_unauthenticated: bool = False) -> None:
    """Serve MCP over Streamable HTTP until SIGTERM/SIGINT, then close every session and `app`."""
    try:
        authenticated = check_exposure(app, host, allow_unauthenticated=allow_unauthenticated)
        asgi = create_http_app(app)
        sock = listen(host, port)
        config = uvicorn.Config(
            asgi,
            host=host,
            port=port,
            log_config=None,
            lifespan="on",
            timeout_graceful_shutdown=5,
            http=header_timeout_protocol(app.settings.header_timeout_s),
            limit_concurrency=app.settings.max_connections,
            backlog=LISTEN_BACKLOG,
        )
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        log.info(
            "serving MCP on http://%s:%d/mcp (authentication %s)",
            shown,
            bound,
            "required" if authenticated else "off",
            extra={"transport": "http", "port": bound},
        )
        heap.settle()  # the web stack's objects too, before the first request (ops/heap.py)
        with sock:
            _Server(config, asgi.state.mcp, asgi.state.rest).run(sockets=[sock])
    finally:
        app.close()  # idempotent; covers a start-up failure before the lifespan ran
