"""Session handles on SQLite (migration 0025): every statement filtered by the namespace (the
sweep aside), writes on the writer."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..errors import Conflict
from ..models import AgentScope
from .handles import SessionHandle
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import parse_ts, ts

_COLUMNS = "digest, agent_id, principal, session_id, idle_seconds, created_at, used_at, expires_at"


def _time(value: str) -> datetime:
    parsed = parse_ts(value)
    assert parsed is not None
    return parsed


def _handle(row: Any) -> SessionHandle:
    return SessionHandle(
        digest=row["digest"],
        agent_id=row["agent_id"],
        principal=row["principal"],
        session_id=row["session_id"],
        idle_seconds=int(row["idle_seconds"]),
        created_at=_time(row["created_at"]),
        used_at=_time(row["used_at"]),
        expires_at=_time(row["expires_at"]),
    )


class SQLiteHandles:
    """The SessionHandleStore protocol."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    def add_handle(self, scope: AgentScope, handle: SessionHandle, now: datetime, limit: int) -> SessionHandle:
        with self.db.tx() as conn:
            (open_now,) = conn.execute(
                "SELECT COUNT(*) FROM session_handles WHERE agent_id = ? AND expires_at > ?", (scope.agent_id, ts(now))
            ).fetchone()
            if open_now >= limit:
                raise Conflict(f"{limit} sessions are open in this namespace: close one (session action=close) first; nothing opened")
            row = conn.execute(
                f"INSERT INTO session_handles ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING {_COLUMNS}",
                (
                    handle.digest,
                    scope.agent_id,
                    handle.principal,
                    handle.session_id,
                    handle.idle_seconds,
                    ts(handle.created_at),
                    ts(handle.used_at),
                    ts(handle.expires_at),
                ),
            ).fetchone()
            if row is None:
                raise Conflict("that session handle is taken; nothing opened")
            return _handle(row)

    def use_handle(self, scope: AgentScope, digest: str, principal: str, now: datetime) -> SessionHandle | None:
        with self.db.tx() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM session_handles WHERE digest = ? AND agent_id = ? AND principal = ? AND expires_at > ?",
                (digest, scope.agent_id, principal, ts(now)),
            ).fetchone()
            if row is None:
                return None
            found = _handle(row)
            expires = now + timedelta(seconds=found.idle_seconds)
            conn.execute("UPDATE session_handles SET used_at = ?, expires_at = ? WHERE digest = ?", (ts(now), ts(expires), digest))
            return replace(found, used_at=now, expires_at=expires)

    def drop_handle(self, scope: AgentScope, digest: str, principal: str, *, expired_by: datetime | None = None) -> SessionHandle | None:
        expiry, params = ("", ()) if expired_by is None else (" AND expires_at <= ?", (ts(expired_by),))
        with self.db.tx() as conn:
            row = conn.execute(
                f"DELETE FROM session_handles WHERE digest = ? AND agent_id = ? AND principal = ?{expiry} RETURNING {_COLUMNS}",
                (digest, scope.agent_id, principal, *params),
            ).fetchone()
            return None if row is None else _handle(row)

    def expired_handles(self, now: datetime, limit: int) -> list[SessionHandle]:
        rows = (
            self.db.reader()
            .execute(f"SELECT {_COLUMNS} FROM session_handles WHERE expires_at <= ? ORDER BY expires_at, seq LIMIT ?", (ts(now), limit))
            .fetchall()
        )
        return [_handle(r) for r in rows]
