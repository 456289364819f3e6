"""Session handles on PostgreSQL (migration 0025, row-level security per namespace): the same
semantics as SQLite's, every statement filtered by the namespace as well as bound by the policy;
the sweep runs in the maintenance context, which sees every namespace."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..errors import Conflict
from ..models import AgentScope
from .handles import SessionHandle
from .postgres_db import SYSTEM, PostgresDatabase, retried

_COLUMNS = "digest, agent_id, principal, session_id, idle_seconds, created_at, used_at, expires_at"


def _handle(row: dict[str, Any]) -> SessionHandle:
    return SessionHandle(
        digest=row["digest"],
        agent_id=row["agent_id"],
        principal=row["principal"],
        session_id=row["session_id"],
        idle_seconds=int(row["idle_seconds"]),
        created_at=row["created_at"],
        used_at=row["used_at"],
        expires_at=row["expires_at"],
    )


class PostgresHandles:
    """The SessionHandleStore protocol, each call one transaction in the scope's context."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    @retried
    def add_handle(self, scope: AgentScope, handle: SessionHandle, now: datetime, limit: int) -> SessionHandle:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            # One namespace's opens are serialised, so two replicas cannot both pass the cap.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('session_handles:' || %s))", (scope.agent_id,))
            cur.execute(
                "SELECT COUNT(*) AS n FROM agent_memory.session_handles WHERE agent_id = %s AND expires_at > %s", (scope.agent_id, now)
            )
            row = cur.fetchone()
            if row is not None and int(row["n"]) >= limit:
                raise Conflict(f"{limit} sessions are open in this namespace: close one (session action=close) first; nothing opened")
            cur.execute(
                f"INSERT INTO agent_memory.session_handles ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                f" ON CONFLICT DO NOTHING RETURNING {_COLUMNS}",
                (
                    handle.digest,
                    scope.agent_id,
                    handle.principal,
                    handle.session_id,
                    handle.idle_seconds,
                    handle.created_at,
                    handle.used_at,
                    handle.expires_at,
                ),
            )
            inserted = cur.fetchone()
            if inserted is None:
                raise Conflict("that session handle is taken; nothing opened")
            return _handle(inserted)

    @retried
    def use_handle(self, scope: AgentScope, digest: str, principal: str, now: datetime) -> SessionHandle | None:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "UPDATE agent_memory.session_handles SET used_at = %s, expires_at = %s + make_interval(secs => idle_seconds)"
                f" WHERE digest = %s AND agent_id = %s AND principal = %s AND expires_at > %s RETURNING {_COLUMNS}",
                (now, now, digest, scope.agent_id, principal, now),
            )
            row = cur.fetchone()
            return None if row is None else _handle(row)

    @retried
    def drop_handle(self, scope: AgentScope, digest: str, principal: str, *, expired_by: datetime | None = None) -> SessionHandle | None:
        expiry, params = ("", ()) if expired_by is None else (" AND expires_at <= %s", (expired_by,))
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "DELETE FROM agent_memory.session_handles WHERE digest = %s AND agent_id = %s AND principal = %s"
                f"{expiry} RETURNING {_COLUMNS}",
                (digest, scope.agent_id, principal, *params),
            )
            row = cur.fetchone()
            return None if row is None else _handle(row)

    def expired_handles(self, now: datetime, limit: int) -> list[SessionHandle]:
        with self.db.tx(SYSTEM) as cur:
            cur.execute(
                f"SELECT {_COLUMNS} FROM agent_memory.session_handles WHERE expires_at <= %s ORDER BY expires_at, seq LIMIT %s",
                (now, limit),
            )
            return [_handle(r) for r in cur.fetchall()]
