"""Seed 003's skip list and identity crystal snapshots on PostgreSQL (migration 0014, row-level
security per agent): the same semantics as SQLite's, every statement filtered by the namespace
as well as bound by the policy."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import Conflict
from ..models import AgentScope
from .postgres_db import Cursor, PostgresDatabase, retried
from .protocol import NewSkip, StoredIdentity, StoredSkip

_SKIP_COLUMNS = "id, agent_id, item, reason, expires_at, created_at, embedding, embedding_model"
_IDENTITY_COLUMNS = "id, agent_id, crystal, source, source_count, created_at"


def _skip(row: dict[str, Any]) -> StoredSkip:
    vector = None if row["embedding"] is None else np.frombuffer(bytes(row["embedding"]), dtype=np.float32).copy()
    return StoredSkip(
        id=row["id"],
        agent_id=row["agent_id"],
        item=row["item"],
        reason=row["reason"],
        expires_at=row["expires_at"],
        created_at=row["created_at"],
        embedding=vector,
        embedding_model=row["embedding_model"],
    )


def _identity(row: dict[str, Any]) -> StoredIdentity:
    return StoredIdentity(
        id=row["id"],
        agent_id=row["agent_id"],
        crystal=row["crystal"],
        source=row["source"],
        source_count=int(row["source_count"]),
        created_at=row["created_at"],
    )


def _purge(cur: Cursor, agent: str, now: datetime) -> None:
    cur.execute("DELETE FROM agent_memory.skip_list WHERE agent_id = %s AND expires_at <= %s", (agent, now))


class PostgresSkips:
    """The SkipStore and IdentityStore protocols, each call one transaction in the scope's context."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    # ------------------------------------------------------------ skip list

    @retried
    def add_skip(self, scope: AgentScope, new: NewSkip, now: datetime) -> StoredSkip:
        vector = None if new.embedding is None else np.ascontiguousarray(new.embedding, dtype=np.float32).tobytes()
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            _purge(cur, scope.agent_id, now)
            cur.execute(
                f"INSERT INTO agent_memory.skip_list ({_SKIP_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                f" ON CONFLICT DO NOTHING RETURNING {_SKIP_COLUMNS}",
                (new.id, scope.agent_id, new.item, new.reason, new.expires_at, now, vector, new.embedding_model),
            )
            row = cur.fetchone()
            if row is None:
                raise Conflict(f"skip entry id {new.id!r} is taken; nothing stored")
            return _skip(row)

    def skip_entries(self, scope: AgentScope, now: datetime) -> list[StoredSkip]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT {_SKIP_COLUMNS} FROM agent_memory.skip_list WHERE agent_id = %s AND expires_at > %s ORDER BY created_at DESC, seq DESC",
                (scope.agent_id, now),
            )
            return [_skip(r) for r in cur.fetchall()]

    @retried
    def remove_skip(self, scope: AgentScope, skip_id: str, now: datetime) -> bool:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            _purge(cur, scope.agent_id, now)
            cur.execute("DELETE FROM agent_memory.skip_list WHERE agent_id = %s AND id = %s", (scope.agent_id, skip_id))
            return cur.rowcount > 0

    # ------------------------------------------------------------ identity crystal

    @retried
    def add_identity(self, scope: AgentScope, snapshot: StoredIdentity) -> StoredIdentity:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"INSERT INTO agent_memory.identity_snapshots ({_IDENTITY_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
                f" ON CONFLICT DO NOTHING RETURNING {_IDENTITY_COLUMNS}",
                (snapshot.id, scope.agent_id, snapshot.crystal, snapshot.source, snapshot.source_count, snapshot.created_at),
            )
            row = cur.fetchone()
            if row is None:
                raise Conflict(f"identity snapshot id {snapshot.id!r} is taken; nothing stored")
            return _identity(row)

    def drop_identities_quoting(self, scope: AgentScope, needles: Sequence[str]) -> int:
        if not needles:
            return 0
        quoted = " OR ".join("strpos(crystal, %s) > 0" for _ in needles)
        owner, params = ("", []) if scope.is_maintenance else ("agent_id = %s AND ", [scope.agent_id])
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"DELETE FROM agent_memory.identity_snapshots WHERE {owner}({quoted})", [*params, *needles])
            return cur.rowcount

    def identities(self, scope: AgentScope, limit: int) -> tuple[list[StoredIdentity], int]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT {_IDENTITY_COLUMNS}, COUNT(*) OVER () AS total FROM agent_memory.identity_snapshots"
                " WHERE agent_id = %s ORDER BY seq DESC LIMIT %s",
                (scope.agent_id, limit),
            )
            rows = cur.fetchall()
        return [_identity(r) for r in rows], int(rows[0]["total"]) if rows else 0  # limit >= 1: no row, no snapshot
