"""Seed 003's linkages on PostgreSQL (migration 0015, row-level security per agent): the same
semantics as SQLite's (sqlite_linkages.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..errors import NotFound
from ..models import AgentScope
from .postgres_db import Cursor, PostgresDatabase, retried
from .postgres_rows import _require, _visible
from .postgres_sql import scope_sql
from .protocol import Linkage, LinkageKind, NewLinkage

COLUMNS = "l.fragment_id, l.target_type, l.memory_id, l.item_id, l.path, l.label, l.created_at"
TARGET_COLUMN: dict[LinkageKind, str] = {"memory": "memory_id", "item": "item_id", "file": "path"}


def _own(scope: AgentScope) -> tuple[str, list[Any]]:
    """The linkage rows a scope reads: its agent's own (every agent's for the maintenance scope).
    The policy allows no more; the predicate keeps the pool's readers to their own rows too."""
    return ("TRUE", []) if scope.is_maintenance else ("l.agent_id = %s", [scope.agent_id])


def _linkage(row: dict[str, Any]) -> Linkage:
    kind: LinkageKind = row["target_type"]
    return Linkage(row["fragment_id"], kind, row[TARGET_COLUMN[kind]], row["label"], row["created_at"])


class PostgresLinkages:
    """Every statement in a transaction whose row-level security context is the scope's agent."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    @retried
    def add_linkages(self, scope: AgentScope, fragment_id: str, linkages: Sequence[NewLinkage], now: datetime) -> list[Linkage]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            memory = _require(cur, scope, fragment_id)
            if not (scope.is_maintenance or memory.agent_id == scope.agent_id):
                raise NotFound(f"fragment {fragment_id!r} not found", missing=(fragment_id,))  # a pool memory is not this namespace's own
            targets = list(dict.fromkeys(n.target for n in linkages if n.kind == "memory"))
            seen = {f.id for f in _visible(cur, scope, targets)}
            missing = [t for t in targets if t not in seen]
            if missing:
                raise NotFound(f"linked memory {missing[0]!r} not found; nothing stored", missing=missing)
            for new in linkages:  # a repeat meets the unique index and is skipped
                cur.execute(
                    f"INSERT INTO agent_memory.memory_linkages (agent_id, fragment_id, target_type, {TARGET_COLUMN[new.kind]}, label, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (memory.agent_id, fragment_id, new.kind, new.target, new.label, now),
                )
            return self._of(cur, scope, [fragment_id]).get(fragment_id, [])

    def linkages_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, list[Linkage]]:
        if not ids:
            return {}
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            return self._of(cur, scope, ids)

    def linkages_to(self, scope: AgentScope, ids: Sequence[str]) -> list[Linkage]:
        if not ids:
            return []
        where, params = scope_sql(scope, "f")
        own, oparams = _own(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT {COLUMNS} FROM agent_memory.memory_linkages l JOIN agent_memory.fragments f ON f.id = l.fragment_id"
                f" WHERE l.memory_id = ANY(%s) AND {own} AND {where} ORDER BY l.id",
                [list(ids), *oparams, *params],
            )
            return [_linkage(r) for r in cur.fetchall()]

    @staticmethod
    def _of(cur: Cursor, scope: AgentScope, ids: Sequence[str]) -> dict[str, list[Linkage]]:
        where, params = scope_sql(scope, "f")
        target, tparams = scope_sql(scope, "lt")  # not "t": scope_sql reads that alias as the term table
        own, oparams = _own(scope)
        cur.execute(
            f"SELECT {COLUMNS} FROM agent_memory.memory_linkages l JOIN agent_memory.fragments f ON f.id = l.fragment_id"
            " LEFT JOIN agent_memory.fragments lt ON lt.id = l.memory_id"
            f" WHERE l.fragment_id = ANY(%s) AND {own} AND {where} AND (l.memory_id IS NULL OR ({target})) ORDER BY l.id",
            [list(ids), *oparams, *params, *tparams],
        )
        out: dict[str, list[Linkage]] = {}
        for row in cur.fetchall():
            out.setdefault(row["fragment_id"], []).append(_linkage(row))
        return out
