"""Seed 003's linkages on SQLite (migration 0015): a memory's references to memories, items and
files, read only by the agent whose memory holds them, deleted with either memory by cascade."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pysqlite3.dbapi2 as sqlite3

from ..errors import NotFound
from ..models import AgentScope
from .protocol import Linkage, LinkageKind, NewLinkage
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import _require, _scope_sql, _visible, parse_ts, ts

COLUMNS = "l.fragment_id, l.target_type, l.memory_id, l.item_id, l.path, l.label, l.created_at"
TARGET_COLUMN: dict[LinkageKind, str] = {"memory": "memory_id", "item": "item_id", "file": "path"}


def _own(scope: AgentScope) -> tuple[str, list[Any]]:
    """The linkage rows a scope reads: its agent's own (every agent's for the maintenance scope)."""
    return ("1 = 1", []) if scope.is_maintenance else ("l.agent_id = ?", [scope.agent_id])


def _linkage(row: sqlite3.Row) -> Linkage:
    kind: LinkageKind = row["target_type"]
    return Linkage(row["fragment_id"], kind, row[TARGET_COLUMN[kind]], row["label"], parse_ts(row["created_at"]) or datetime.min)


def _marks(items: Sequence[object]) -> str:
    return ",".join("?" * len(items))


class SQLiteLinkages:
    """Writes in one transaction on the writer (joining the caller's); reads on this thread's reader."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    def add_linkages(self, scope: AgentScope, fragment_id: str, linkages: Sequence[NewLinkage], now: datetime) -> list[Linkage]:
        with self.db.tx() as conn:
            memory = _require(conn, scope, fragment_id)
            if not (scope.is_maintenance or memory.agent_id == scope.agent_id):
                raise NotFound(f"fragment {fragment_id!r} not found", missing=(fragment_id,))  # a pool memory is not this namespace's own
            targets = list(dict.fromkeys(n.target for n in linkages if n.kind == "memory"))
            seen = {f.id for f in _visible(conn, scope, targets)}
            missing = [t for t in targets if t not in seen]
            if missing:
                raise NotFound(f"linked memory {missing[0]!r} not found; nothing stored", missing=missing)
            for new in linkages:  # a repeat meets the unique index and is skipped
                conn.execute(
                    f"INSERT INTO memory_linkages (agent_id, fragment_id, target_type, {TARGET_COLUMN[new.kind]}, label, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (memory.agent_id, fragment_id, new.kind, new.target, new.label, ts(now)),
                )
            return self._of(conn, scope, [fragment_id]).get(fragment_id, [])

    def linkages_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, list[Linkage]]:
        return self._of(self.db.reader(), scope, ids)

    def linkages_to(self, scope: AgentScope, ids: Sequence[str]) -> list[Linkage]:
        if not ids:
            return []
        where, params = _scope_sql(scope, "f")
        own, oparams = _own(scope)
        rows = (
            self.db.reader()
            .execute(
                f"SELECT {COLUMNS} FROM memory_linkages l JOIN fragments f ON f.id = l.fragment_id"
                f" WHERE l.memory_id IN ({_marks(ids)}) AND {own} AND {where} ORDER BY l.id",
                [*ids, *oparams, *params],
            )
            .fetchall()
        )
        return [_linkage(r) for r in rows]

    @staticmethod
    def _of(conn: sqlite3.Connection, scope: AgentScope, ids: Sequence[str]) -> dict[str, list[Linkage]]:
        if not ids:
            return {}
        where, params = _scope_sql(scope, "f")
        target, tparams = _scope_sql(scope, "lt")
        own, oparams = _own(scope)
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM memory_linkages l JOIN fragments f ON f.id = l.fragment_id"
            " LEFT JOIN fragments lt ON lt.id = l.memory_id"
            f" WHERE l.fragment_id IN ({_marks(ids)}) AND {own} AND {where} AND (l.memory_id IS NULL OR ({target})) ORDER BY l.id",
            [*ids, *oparams, *params, *tparams],
        ).fetchall()
        out: dict[str, list[Linkage]] = {}
        for row in rows:
            out.setdefault(row["fragment_id"], []).append(_linkage(row))
        return out
