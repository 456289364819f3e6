"""The REST API's gate with the dashboard's session cookie accepted too — only with its CSRF header.

`CookieGate` wraps /mcp's gate for /api (and /v1): a request that carries no `Authorization`
header but the `X-Memento-CSRF` header is authenticated by its session cookie, when the header is
that session's token; a write (any method but GET/HEAD/OPTIONS) must also come from this very
origin (`Origin` equal to the request's own, `Sec-Fetch-Site` same-origin when sent). Every other
request goes to the wrapped gate unchanged, so a cookie alone is never a credential, and /mcp,
which keeps the unwrapped gate, never looks at it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from ..auth.principal import Principal
from ..endpoint import RequestGate
from .sessions import SessionStore

COOKIE = "memento_ui"
CSRF_HEADER = "x-memento-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def public_origin(public_url: str | None) -> str | None:
    """The origin (scheme://host[:port]) of MEMENTO_PUBLIC_URL, when one is set."""
    parts = urlsplit((public_url or "").strip())
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else None


def same_origin(request: Request, public: str | None = None) -> bool:
    """Whether a browser request says it comes from a page of this server: its Origin is the
    scheme, host and port the request came to, or `public` (MEMENTO_PUBLIC_URL's, behind a proxy)."""
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    if not origin or not host:
        return False
    if request.headers.get("sec-fetch-site", "same-origin") != "same-origin":
        return False
    return origin.lower() in {f"{request.url.scheme}://{host}".lower(), public}


class CookieGate:
    """A RequestGate: the wrapped gate, plus the dashboard session of a cookie with its CSRF token."""

    def __init__(self, inner: RequestGate, sessions: SessionStore, public: str | None = None) -> None:
        self.inner = inner
        self.sessions = sessions
        self.public = public  # MEMENTO_PUBLIC_URL's origin, also accepted as this server's own

    def guard(self, request: Request) -> Response | None:
        return self.inner.guard(request)

    def forbidden(self, request: Request, message: str) -> Response:
        return self.inner.forbidden(request, message)

    def authenticate(self, request: Request) -> Principal | Response:
        csrf = request.headers.get(CSRF_HEADER)
        if csrf is None or "authorization" in request.headers:
            return self.inner.authenticate(request)
        session = self.sessions.check(request.cookies.get(COOKIE), csrf)
        if session is None:  # no session, or the wrong token: as if no credential came (401)
            return self.inner.authenticate(request)
        if request.method not in SAFE_METHODS and not same_origin(request, self.public):
            return self.inner.forbidden(request, "Forbidden: a dashboard write must come from the dashboard's own origin")
        return session.principal
