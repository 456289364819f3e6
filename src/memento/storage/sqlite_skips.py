"""Seed 003's skip list and identity crystal snapshots on SQLite (migration 0014): rows of
exactly the scope's own namespace, every statement filtered by it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pysqlite3.dbapi2 as sqlite3

from ..errors import Conflict
from ..models import AgentScope
from .protocol import NewSkip, StoredIdentity, StoredSkip
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import parse_ts, ts

_SKIP_COLUMNS = "id, agent_id, item, reason, expires_at, created_at, embedding, embedding_model"
_IDENTITY_COLUMNS = "id, agent_id, crystal, source, source_count, created_at"


def _time(value: str) -> datetime:
    parsed = parse_ts(value)
    assert parsed is not None
    return parsed


def _skip(row: Any) -> StoredSkip:
    vector = None if row["embedding"] is None else np.frombuffer(row["embedding"], dtype=np.float32).copy()
    return StoredSkip(
        id=row["id"],
        agent_id=row["agent_id"],
        item=row["item"],
        reason=row["reason"],
        expires_at=_time(row["expires_at"]),
        created_at=_time(row["created_at"]),
        embedding=vector,
        embedding_model=row["embedding_model"],
    )


def _identity(row: Any) -> StoredIdentity:
    return StoredIdentity(
        id=row["id"],
        agent_id=row["agent_id"],
        crystal=row["crystal"],
        source=row["source"],
        source_count=int(row["source_count"]),
        created_at=_time(row["created_at"]),
    )


def _purge(conn: sqlite3.Connection, agent: str, now: datetime) -> None:
    conn.execute("DELETE FROM skip_list WHERE agent_id = ? AND expires_at <= ?", (agent, ts(now)))


class SQLiteSkips:
    """The SkipStore and IdentityStore protocols: writes on the writer, reads on the thread's reader."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    # ------------------------------------------------------------ skip list

    def add_skip(self, scope: AgentScope, new: NewSkip, now: datetime) -> StoredSkip:
        vector = None if new.embedding is None else np.ascontiguousarray(new.embedding, dtype=np.float32).tobytes()
        with self.db.tx() as conn:
            _purge(conn, scope.agent_id, now)
            row = conn.execute(
                f"INSERT INTO skip_list ({_SKIP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING {_SKIP_COLUMNS}",
                (new.id, scope.agent_id, new.item, new.reason, ts(new.expires_at), ts(now), vector, new.embedding_model),
            ).fetchone()
            if row is None:
                raise Conflict(f"skip entry id {new.id!r} is taken; nothing stored")
            return _skip(row)

    def skip_entries(self, scope: AgentScope, now: datetime) -> list[StoredSkip]:
        rows = (
            self.db.reader()
            .execute(
                f"SELECT {_SKIP_COLUMNS} FROM skip_list WHERE agent_id = ? AND expires_at > ? ORDER BY created_at DESC, seq DESC",
                (scope.agent_id, ts(now)),
            )
            .fetchall()
        )
        return [_skip(r) for r in rows]

    def remove_skip(self, scope: AgentScope, skip_id: str, now: datetime) -> bool:
        with self.db.tx() as conn:
            _purge(conn, scope.agent_id, now)
            cursor = conn.execute("DELETE FROM skip_list WHERE agent_id = ? AND id = ?", (scope.agent_id, skip_id))
            return bool(cursor.rowcount > 0)

    # ------------------------------------------------------------ identity crystal

    def add_identity(self, scope: AgentScope, snapshot: StoredIdentity) -> StoredIdentity:
        with self.db.tx() as conn:
            row = conn.execute(
                f"INSERT INTO identity_snapshots ({_IDENTITY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
                f" RETURNING {_IDENTITY_COLUMNS}",
                (snapshot.id, scope.agent_id, snapshot.crystal, snapshot.source, snapshot.source_count, ts(snapshot.created_at)),
            ).fetchone()
            if row is None:
                raise Conflict(f"identity snapshot id {snapshot.id!r} is taken; nothing stored")
            return _identity(row)

    def drop_identities_quoting(self, scope: AgentScope, needles: Sequence[str]) -> int:
        if not needles:
            return 0
        quoted = " OR ".join("instr(crystal, ?) > 0" for _ in needles)
        owner, params = ("", []) if scope.is_maintenance else ("agent_id = ? AND ", [scope.agent_id])
        with self.db.tx() as conn:
            return int(conn.execute(f"DELETE FROM identity_snapshots WHERE {owner}({quoted})", [*params, *needles]).rowcount)

    def identities(self, scope: AgentScope, limit: int) -> tuple[list[StoredIdentity], int]:
        conn = self.db.reader()
        rows = conn.execute(
            f"SELECT {_IDENTITY_COLUMNS}, COUNT(*) OVER () AS total FROM identity_snapshots WHERE agent_id = ? ORDER BY seq DESC LIMIT ?",
            (scope.agent_id, limit),
        ).fetchall()
        return [_identity(r) for r in rows], int(rows[0]["total"]) if rows else 0  # limit >= 1: no row, no snapshot
