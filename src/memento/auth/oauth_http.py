"""The OAuth endpoints on the HTTP server (mounted by the web app, memento.web).

    GET  /.well-known/oauth-authorization-server[/mcp]   RFC 8414 metadata
    GET  /.well-known/oauth-protected-resource[/mcp]     RFC 9728 metadata of /mcp
    POST /register                                       RFC 7591 dynamic client registration
    GET  /authorize                                      authorization request -> consent page
    POST /authorize                                      the consent form -> redirect with the code
    POST /token                                          authorization_code and refresh_token grants
    POST /revoke                                         RFC 7009 revocation

The endpoints sit at the root, so 2025-03-26 clients' default paths work without metadata.
They share the MCP endpoint's Host check (DNS rebinding); the machine-facing ones answer CORS
preflights so browser-based clients can use them. While the OAuth store (Redis) is unreachable
they answer 503 (`temporarily_unavailable`; a page on /authorize) and work again once it is back.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from memento.endpoint import RequestGate, require_gate

from . import oauth_pages
from .oauth import OAuthServer, endpoints, oauth_server
from .oauth_consent import MAX_KEY_ATTEMPTS, agent_error, suggested_agent
from .oauth_protocol import OAuthError, RateLimited, RedirectError, Refused
from .oauth_store import OAuthStoreUnavailable

if TYPE_CHECKING:
    from ..app import App

log = logging.getLogger(__name__)

MAX_FORM_BYTES = 64 * 1024
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
    "Access-Control-Max-Age": "86400",
}
RETRY_AFTER_S = "5"
Handler = Callable[[Request], Awaitable[Response]]


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers={**CORS, **(headers or {})})


def _oauth_error(exc: OAuthError, *, basic: bool = False) -> JSONResponse:
    headers = dict(NO_STORE)
    if exc.status == 401 and basic:
        headers["WWW-Authenticate"] = 'Basic realm="memento"'
    return _json(exc.body(), exc.status, headers)


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=oauth_pages.SECURITY_HEADERS)


def _redirect(location: str) -> RedirectResponse:
    return RedirectResponse(location, status_code=302, headers=NO_STORE)


async def _form(request: Request) -> dict[str, str] | OAuthError:
    """The url-encoded body as single values; an error for other bodies or repeated parameters."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return OAuthError("invalid_request", "the body must be application/x-www-form-urlencoded")
    raw = await request.body()
    if len(raw) > MAX_FORM_BYTES:
        return OAuthError("invalid_request", "request body too large")
    form = await request.form()
    values: dict[str, str] = {}
    for key in form.keys():  # noqa: SIM118 - a multi-dict: keys() gives each name once
        items = form.getlist(key)
        if len(items) != 1 or not isinstance(items[0], str):
            return OAuthError("invalid_request", f"parameter {key} must appear exactly once")
        values[key] = items[0]
    return values


def _metadata(raw: bytes) -> Any:
    """The registration request's JSON, or the error for a body that is not strict JSON in
    UTF-8 (deep nesting, NaN and lone surrogates included: the reply echoes the metadata)."""

    def no_constant(name: str) -> Any:
        raise ValueError(name)

    try:
        meta = json.loads(raw or b"null", parse_constant=no_constant)
        json.dumps(meta, ensure_ascii=False).encode("utf-8")  # lone surrogates cannot be echoed
    except (ValueError, RecursionError):  # UnicodeError is a ValueError
        return OAuthError("invalid_client_metadata", "the body must be a JSON object in UTF-8")
    return meta


def _available(handler: Handler, *, page: bool = False) -> Handler:
    """`handler`, answering 503 while the OAuth store is unreachable (`page`: for a browser)."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except OAuthStoreUnavailable:
            retry = {"Retry-After": RETRY_AFTER_S}
            if page:
                text = oauth_pages.error_page(
                    "Temporarily unavailable", "The authorization server cannot reach its storage. Try again in a moment."
                )
                return HTMLResponse(text, status_code=503, headers={**oauth_pages.SECURITY_HEADERS, **retry})
            body = {
                "error": "temporarily_unavailable",
                "error_description": "the authorization server cannot reach its storage; try again shortly",
            }
            return _json(body, 503, {**NO_STORE, **retry})

    return run


def _basic(request: Request) -> tuple[str, str] | None | OAuthError:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if not header or scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return OAuthError("invalid_client", "malformed Basic credentials", 401)
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        return OAuthError("invalid_client", "malformed Basic credentials", 401)
    return unquote(client_id.replace("+", " ")), unquote(secret.replace("+", " "))  # RFC 6749 §2.3.1


class OAuthEndpoints:
    """The route handlers of one App's OAuth server."""

    def __init__(self, app: App, gate: RequestGate) -> None:
        self.app = app
        self.gate = require_gate(gate, "the OAuth endpoints")

    @property
    def server(self) -> OAuthServer:
        return oauth_server(self.app)

    def _guard(self, request: Request, *, browser_form: bool = False) -> Response | None:
        """The MCP endpoint's Origin/Host check. A form posted from our own page carries our
        own Origin, which is accepted even where ALLOWED_ORIGINS does not list it."""
        if browser_form and request.headers.get("origin") == endpoints(self.app, request).base:
            scope = dict(request.scope)
            scope["headers"] = [(k, v) for k, v in request.scope["headers"] if k != b"origin"]
            request = Request(scope)
        return self.gate.guard(request)

    # ---------------------------------------------------------------- metadata

    def _no_metadata(self) -> Response | None:
        """404 while OAuth is off (no operator key): the MCP endpoint asks for no credential, so
        advertising an authorization server would send clients (Codex's `mcp add --url`) into a
        login nobody can approve. RFC 8414 §3 and RFC 9728 §3: no metadata is a 404."""
        if self.server.active:
            return None
        return _json({"error": "not_found", "error_description": "OAuth is off: this server has no operator key"}, 404)

    async def authorization_server(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=CORS)
        if (refused := self._guard(request) or self._no_metadata()) is not None:
            return refused
        return _json(self.server.authorization_server_metadata(endpoints(self.app, request)))

    async def protected_resource(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=CORS)
        if (refused := self._guard(request) or self._no_metadata()) is not None:
            return refused
        return _json(self.server.protected_resource_metadata(endpoints(self.app, request)))

    # ---------------------------------------------------------------- registration

    async def register(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=CORS)
        if (refused := self._guard(request)) is not None:
            return refused
        raw = await request.body()
        if len(raw) > MAX_FORM_BYTES:
            return _oauth_error(OAuthError("invalid_client_metadata", "request body too large"))
        meta = _metadata(raw)
        if isinstance(meta, OAuthError):
            return _oauth_error(meta)
        address = request.client.host if request.client is not None else ""
        try:
            reply = self.server.register(meta, address)
        except RateLimited as exc:
            return _json(exc.body(), exc.status, {**NO_STORE, "Retry-After": str(exc.retry_after_s)})
        except OAuthError as exc:
            return _oauth_error(exc)
        return _json(reply, 201, NO_STORE)

    # ---------------------------------------------------------------- authorization and consent

    async def authorize(self, request: Request) -> Response:
        if request.method == "POST":
            return await self._consent(request)
        if (refused := self._guard(request)) is not None:
            return refused
        if not self.server.active:
            return _html(oauth_pages.no_operator_page(), 503)
        params: dict[str, str] = {}
        for key in request.query_params.keys():  # noqa: SIM118 - a multi-dict: each name once
            values = request.query_params.getlist(key)
            if len(values) != 1:
                return _html(oauth_pages.error_page("Invalid request", f"Parameter {key} appears more than once."), 400)
            params[key] = values[0]
        try:
            pending, client = self.server.begin(params, endpoints(self.app, request))
        except Refused as exc:
            return _html(oauth_pages.error_page(exc.title, exc.message), exc.status)
        except RedirectError as exc:
            return _redirect(exc.location)
        page = oauth_pages.consent_page(pending, client, agent=suggested_agent(client.client_name), read_only=False)
        return _html(page)

    async def _consent(self, request: Request) -> Response:
        if (refused := self._guard(request, browser_form=True)) is not None:
            return refused
        if not self.server.active:
            return _html(oauth_pages.no_operator_page(), 503)
        form = await _form(request)
        if isinstance(form, OAuthError):
            return _html(oauth_pages.error_page("Invalid request", form.description), 400)
        request_id = form.get("request_id", "")
        found = self.server.pending(request_id) if request_id else None
        if found is None:
            return _html(
                oauth_pages.error_page(
                    "Request expired", "This authorization request is unknown or has expired. Start again from the application."
                ),
                400,
            )
        pending, client = found
        if form.get("decision") == "deny":
            location = self.server.deny(request_id)
            return _redirect(location) if location else _html(oauth_pages.error_page("Request expired", "Start again."), 400)
        agent = form.get("agent", "").strip()
        read_only = form.get("access", "read-write") == "read-only"

        def again(error: str) -> Response:
            return _html(oauth_pages.consent_page(pending, client, agent=agent, read_only=read_only, error=error), 400)

        if not self.server.check_operator_key(form.get("access_key", "")):
            left = self.server.wrong_key(request_id)
            if left == 0:
                location = self.server.deny(request_id, "too many wrong operator keys")
                return (
                    _html(
                        oauth_pages.error_page(
                            "Access denied", f"The operator key was wrong {MAX_KEY_ATTEMPTS} times; the request is cancelled."
                        ),
                        403,
                    )
                    if location is None
                    else _redirect(location)
                )
            return again(f"Wrong operator access key ({left} attempt(s) left).")
        problem = agent_error(agent)
        if problem:
            return again(problem)
        location = self.server.approve(request_id, agent, read_only)
        if location is None:
            return _html(oauth_pages.error_page("Request expired", "Start again from the application."), 400)
        return _redirect(location)

    # ---------------------------------------------------------------- token and revocation

    async def token(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=CORS)
        if (refused := self._guard(request)) is not None:
            return refused
        basic = _basic(request)
        if isinstance(basic, OAuthError):
            return _oauth_error(basic, basic=True)
        if not self.server.active:
            return _oauth_error(OAuthError("unauthorized_client", "OAuth is off: the server has no operator access key"))
        form = await _form(request)
        if isinstance(form, OAuthError):
            return _oauth_error(form)
        try:
            reply = self.server.token(form, basic, endpoints(self.app, request))
        except OAuthError as exc:
            return _oauth_error(exc, basic=basic is not None)
        return _json(reply, 200, NO_STORE)

    async def revoke(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=CORS)
        if (refused := self._guard(request)) is not None:
            return refused
        basic = _basic(request)
        if isinstance(basic, OAuthError):
            return _oauth_error(basic, basic=True)
        form = await _form(request)
        if isinstance(form, OAuthError):
            return _oauth_error(form)
        try:
            self.server.revoke(form, basic)
        except OAuthError as exc:
            return _oauth_error(exc, basic=basic is not None)
        return Response(status_code=200, headers={**CORS, **NO_STORE})


def routes(app: App, gate: RequestGate) -> list[BaseRoute]:
    """The OAuth routes (none when MEMENTO_OAUTH is off); refuses to compose without `gate`."""
    require_gate(gate, "the OAuth endpoints")
    if not app.settings.oauth:
        return []
    ends = OAuthEndpoints(app, gate)
    meta = ["GET", "OPTIONS"]
    post = ["POST", "OPTIONS"]
    return [
        Route("/.well-known/oauth-authorization-server", ends.authorization_server, methods=meta),
        Route("/.well-known/oauth-authorization-server/mcp", ends.authorization_server, methods=meta),
        Route("/.well-known/oauth-protected-resource", ends.protected_resource, methods=meta),
        Route("/.well-known/oauth-protected-resource/mcp", ends.protected_resource, methods=meta),
        Route("/register", _available(ends.register), methods=post),
        Route("/authorize", _available(ends.authorize, page=True), methods=["GET", "POST"]),
        Route("/token", _available(ends.token), methods=post),
        Route("/revoke", _available(ends.revoke), methods=post),
    ]
