"""The web dashboard (issue 18): a single-page app at /ui over the REST API and its live events.

`Dashboard` holds the login sessions, the /ui routes (pages.py) and the gate /api uses so that a
dashboard session cookie counts there too — only with its CSRF header (gate.py). It adds no
storage path: every page reads and writes through /api.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

from ..endpoint import RequestGate
from .gate import CookieGate, public_origin
from .pages import Pages
from .sessions import SessionStore

if TYPE_CHECKING:
    from ..app import App


@dataclass
class Dashboard:
    sessions: SessionStore
    api_gate: CookieGate  # for /api and /v1 (never /mcp)
    pages: Pages

    def routes(self) -> list[BaseRoute]:
        return self.pages.routes()


def create_dashboard(app: App, gate: RequestGate) -> Dashboard:
    """The dashboard of `app`, behind /mcp's `gate`."""
    sessions = SessionStore(app.settings.ui_session_idle_minutes * 60.0)
    api_gate = CookieGate(gate, sessions, public_origin(app.settings.public_url))
    return Dashboard(sessions=sessions, api_gate=api_gate, pages=Pages(app, gate, sessions))


__all__ = ["Dashboard", "create_dashboard"]
