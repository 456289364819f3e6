"""The dashboard's own routes under /ui: the single-page app and its static files, and the login
session (`/ui/session`, `/ui/login`, `/ui/logout`). Everything else it shows comes from /api."""

from __future__ import annotations

import json
import logging
from importlib import resources
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..auth import oauth
from ..auth.keys import describe
from ..auth.principal import Principal
from ..auth.registry import token_verifiers
from ..endpoint import RequestGate
from ..errors import Unavailable
from ..models import MAINTENANCE_AGENTS
from ..rest.problems import from_gate, problem
from . import latency
from .gate import COOKIE, CSRF_HEADER, public_origin, same_origin
from .sessions import SessionStore

if TYPE_CHECKING:
    from ..app import App

log = logging.getLogger(__name__)
MAX_KEY_CHARS = 4096
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def static_files() -> dict[str, tuple[bytes, str]]:
    """Every file the app ships (name -> (bytes, media type)), read once from the package."""
    found: dict[str, tuple[bytes, str]] = {}
    root = resources.files("memento.ui") / "static"
    for entry in root.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in TYPES:
            found[entry.name] = (entry.read_bytes(), TYPES[suffix])
    return found


def who(principal: Principal) -> dict[str, Any]:
    """What the page needs to know of its caller (never the secret)."""
    admin = principal.agent_id is None or principal.agent_id in MAINTENANCE_AGENTS
    return {"subject": principal.subject, "agent": principal.agent_id, "readOnly": principal.read_only, "admin": admin}


class Pages:
    """The /ui routes over one session store, behind /mcp's Origin/Host guard."""

    def __init__(self, app: App, gate: RequestGate, sessions: SessionStore) -> None:
        self.app = app
        self.gate = gate
        self.sessions = sessions
        self.files = static_files()
        self.public = public_origin(app.settings.public_url)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/ui", self.redirect, methods=["GET"]),
            Route("/ui/", self.index, methods=["GET", "HEAD"]),
            Route("/ui/static/{name}", self.static, methods=["GET", "HEAD"]),
            Route("/ui/session", self.session, methods=["GET"]),
            Route("/ui/login", self.login, methods=["POST"]),
            Route("/ui/logout", self.logout, methods=["POST"]),
            Route("/ui/latency", self.latency, methods=["GET"]),
        ]

    def auth_on(self) -> bool:
        return bool(token_verifiers(self.app))

    async def redirect(self, request: Request) -> Response:
        return RedirectResponse("/ui/", status_code=308)

    async def index(self, request: Request) -> Response:
        return self._file("index.html", cache="no-store")

    async def static(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        if name not in self.files or name == "index.html":
            return problem(404, f"no dashboard file {name[:80]!r}")
        return self._file(name, cache="no-cache")

    def _file(self, name: str, cache: str) -> Response:
        body, media = self.files[name]
        return Response(body, media_type=media, headers={**SECURITY_HEADERS, "Cache-Control": cache})

    async def session(self, request: Request) -> Response:
        """Who is logged in (with the CSRF token the page sends on every /api call), or 401."""
        refused = self.gate.guard(request)
        if refused is not None:
            return from_gate(refused)
        if not self.auth_on():
            return _json({"auth": False, "csrf": None, **who(_anonymous(self.gate, request))})
        found = self.sessions.get(request.cookies.get(COOKIE))
        if found is None:
            return problem(401, "not logged in", code="unauthenticated")
        return _json({"auth": True, "csrf": found.csrf, **who(found.principal)})

    async def login(self, request: Request) -> Response:
        """Exchange a key (or an OAuth access token) for a session cookie."""
        refused = self.gate.guard(request)
        if refused is not None:
            return from_gate(refused)
        if not same_origin(request, self.public):
            return problem(403, "log in from the dashboard's own page", code="forbidden")
        if not self.auth_on():
            return problem(400, "no credential is configured: the dashboard needs no login", code="invalid_argument")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return problem(400, 'send {"key": "..."} as JSON', code="invalid_argument")
        key = body.get("key") if isinstance(body, dict) else None
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:
            return problem(400, 'send {"key": "..."} as JSON', code="invalid_argument")
        principal = self._verify(key.strip(), request)
        if isinstance(principal, Response):
            return principal
        session_id, session = self.sessions.open(principal)
        log.info("dashboard login: %s", describe(principal))
        response = _json({"auth": True, "csrf": session.csrf, **who(principal)})
        secure = request.url.scheme == "https" or (self.app.settings.public_url or "").startswith("https:")
        response.set_cookie(COOKIE, session_id, httponly=True, samesite="strict", secure=secure, path="/")
        return response

    def _verify(self, key: str, request: Request) -> Principal | Response:
        resource = oauth.public_base(self.app, request) + oauth.MCP_PATH
        for verifier in token_verifiers(self.app):
            try:
                found = verifier.verify(key, resource=resource)
            except Unavailable:
                return problem(503, "cannot verify the key now; retry", code="unavailable")
            if found is not None:
                return found
        log.info("dashboard login refused: unknown key")
        return problem(401, "unknown or expired key", code="unauthenticated")

    async def latency(self, request: Request) -> Response:
        """This process's recall and embedding latency: an admin session (with its CSRF header), or anyone when no credential is configured."""
        refused = self.gate.guard(request)
        if refused is not None:
            return from_gate(refused)
        principal: Principal = _anonymous(self.gate, request)
        if self.auth_on():
            found = self.sessions.check(request.cookies.get(COOKIE), request.headers.get(CSRF_HEADER))
            if found is None:
                return problem(401, "not logged in (or no CSRF header)", code="unauthenticated")
            principal = found.principal
        if not who(principal)["admin"]:
            return problem(403, "latency figures are the whole server's: they need an admin key (as /metrics)", code="forbidden")
        return Response(latency.report(self.app).model_dump_json(), media_type="application/json", headers={"Cache-Control": "no-store"})

    async def logout(self, request: Request) -> Response:
        refused = self.gate.guard(request)
        if refused is not None:
            return from_gate(refused)
        cookie = request.cookies.get(COOKIE)
        if self.sessions.check(cookie, request.headers.get(CSRF_HEADER)) is None or not same_origin(request, self.public):
            return problem(403, "log out from the dashboard's own page", code="forbidden")
        self.sessions.close(cookie)
        response = _json({"auth": True, "loggedOut": True})
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response


def _anonymous(gate: RequestGate, request: Request) -> Principal:
    found = gate.authenticate(request)
    return found if isinstance(found, Principal) else Principal(subject="anonymous", agent_id=None, kind="anonymous")


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers={"Cache-Control": "no-store"})
