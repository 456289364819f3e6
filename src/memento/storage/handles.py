"""Server-minted session handles (MCP 2026-07-28, migration 0025): the value the store keeps and
the protocol every backend implements (`sqlite_handles.py`, `postgres_handles.py`).

A handle is a bearer capability for one working-memory session. The store never sees the handle
itself, only its digest; a row belongs to one namespace and one credential, and every method
but the maintenance sweep is confined to the caller's namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ..models import AgentScope


@dataclass(frozen=True)
class SessionHandle:
    """One open handle: who opened it, which session it stands for, and until when it lives."""

    digest: str  # SHA-256 of the handle, hex
    agent_id: str  # the namespace it was opened in
    principal: str  # the credential that opened it (kind:subject)
    session_id: str  # the working-memory session it stands for
    idle_seconds: int  # each use keeps it open this much longer
    created_at: datetime
    used_at: datetime
    expires_at: datetime


class SessionHandleStore(Protocol):
    """Open handles: rows of exactly the scope's namespace (the sweep aside)."""

    def add_handle(self, scope: AgentScope, handle: SessionHandle, now: datetime, limit: int) -> SessionHandle:
        """Store a new handle in the scope's namespace; Conflict when the namespace already holds
        `limit` unexpired handles, or the digest is taken. One transaction."""
        ...

    def use_handle(self, scope: AgentScope, digest: str, principal: str, now: datetime) -> SessionHandle | None:
        """The unexpired handle of that digest opened in the scope's namespace by `principal`,
        its use recorded (`used_at` now, `expires_at` now + idle_seconds); None for any other
        (unknown, expired, another namespace's or another credential's)."""
        ...

    def drop_handle(self, scope: AgentScope, digest: str, principal: str, *, expired_by: datetime | None = None) -> SessionHandle | None:
        """Delete the scope's handle of that digest opened by `principal` and return it; None
        when there is none. With `expired_by`, only a handle expired by then (a live one stays)."""
        ...

    def expired_handles(self, now: datetime, limit: int) -> list[SessionHandle]:
        """Up to `limit` handles of every namespace whose `expires_at` is at or before `now`,
        oldest expiry first (the lifecycle's sweep)."""
        ...
