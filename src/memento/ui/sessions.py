"""Dashboard login sessions: a random id (the HttpOnly cookie) bound to the principal of the key
entered at the login page, with a per-session CSRF token and an idle expiry.

Kept in this process's memory only: a restart (or another replica) asks for the key again. Only
a SHA-256 digest of a session id is stored, so a memory dump does not hand out live cookies.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from ..auth.principal import Principal

MAX_SESSIONS = 10_000  # beyond it a new login ends the least recently used session


@dataclass
class UiSession:
    """One logged-in browser."""

    principal: Principal
    csrf: str
    last_seen: float


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class SessionStore:
    """Login sessions with an idle expiry (`idle_s`), safe to use from several threads."""

    def __init__(self, idle_s: float, *, clock: Callable[[], float] = time.monotonic, max_sessions: int = MAX_SESSIONS) -> None:
        self.idle_s = idle_s
        self._clock = clock
        self._max = max_sessions
        self._sessions: OrderedDict[str, UiSession] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, principal: Principal) -> tuple[str, UiSession]:
        """A new session for `principal`: (the cookie value, the session)."""
        session_id = secrets.token_urlsafe(32)
        session = UiSession(principal=principal, csrf=secrets.token_urlsafe(32), last_seen=self._clock())
        with self._lock:
            self._sessions[_digest(session_id)] = session
            while len(self._sessions) > self._max:
                self._sessions.popitem(last=False)
        return session_id, session

    def get(self, session_id: str | None) -> UiSession | None:
        """The live session of a cookie value (its idle time restarts), or None."""
        if not session_id:
            return None
        key = _digest(session_id)
        now = self._clock()
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if now - session.last_seen > self.idle_s:
                del self._sessions[key]
                return None
            session.last_seen = now
            self._sessions.move_to_end(key)
            return session

    def check(self, session_id: str | None, csrf: str | None) -> UiSession | None:
        """The session when `csrf` is its token (compared in constant time); else None."""
        session = self.get(session_id)
        if session is None or not csrf or not hmac.compare_digest(session.csrf.encode(), csrf.encode()):
            return None
        return session

    def close(self, session_id: str | None) -> None:
        """End a session (logout); unknown ids are ignored."""
        if session_id:
            with self._lock:
                self._sessions.pop(_digest(session_id), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
