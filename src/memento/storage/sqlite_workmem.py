"""Seed 003's working memory on SQLite (migration 0013): items, sections and workspace records,
every statement bound to the scope's own namespace (the WorkingMemoryStore protocol)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pysqlite3.dbapi2 as sqlite3

from ..errors import InvalidArgument
from ..models import AgentScope
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import parse_ts, ts
from .workmem import ItemChanges, ItemQuery, Section, WorkItem, WorkMemorySummary, WorkspaceRecord

ITEM_COLUMNS = "id, agent_id, category, title, content, status, priority, tags, next_action, created_at, updated_at"


def _item(row: sqlite3.Row) -> WorkItem:
    return WorkItem(
        id=row["id"],
        agent_id=row["agent_id"],
        category=row["category"],
        title=row["title"],
        content=row["content"],
        status=row["status"],
        priority=int(row["priority"]),
        tags=tuple(json.loads(row["tags"])),
        next_action=row["next_action"],
        created_at=_time(row["created_at"]),
        updated_at=_time(row["updated_at"]),
    )


def _time(value: str) -> datetime:
    parsed = parse_ts(value)
    assert parsed is not None
    return parsed


def _item_where(scope: AgentScope, query: ItemQuery) -> tuple[str, list[Any]]:
    clauses, params = ["agent_id = ?"], [scope.agent_id]
    if query.category is not None:
        clauses.append("category = ?")
        params.append(query.category)
    clauses.append(f"status IN ({','.join('?' * len(query.statuses))})")
    params.extend(query.statuses)
    for term in query.terms:
        clauses.append("instr(folded, ?) > 0")
        params.append(term)
    return " AND ".join(clauses), params


class SQLiteWorkMemory:
    """Writes on the writer (one transaction each), reads on the calling thread's reader."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    # ------------------------------------------------------------ items

    def add_item(self, scope: AgentScope, item: WorkItem) -> None:
        with self.db.tx() as conn:
            conn.execute(
                f"INSERT INTO working_memory_items ({ITEM_COLUMNS}, folded) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    item.id,
                    scope.agent_id,
                    item.category,
                    item.title,
                    item.content,
                    item.status,
                    item.priority,
                    json.dumps(list(item.tags)),
                    item.next_action,
                    ts(item.created_at),
                    ts(item.updated_at),
                    item.folded(),
                ),
            )

    def get_item(self, scope: AgentScope, item_id: str) -> WorkItem | None:
        row = (
            self.db.reader()
            .execute(f"SELECT {ITEM_COLUMNS} FROM working_memory_items WHERE id = ? AND agent_id = ?", (item_id, scope.agent_id))
            .fetchone()
        )
        return None if row is None else _item(row)

    def update_item(self, scope: AgentScope, item_id: str, changes: ItemChanges, now: datetime) -> WorkItem | None:
        with self.db.tx() as conn:
            row = conn.execute(
                f"SELECT {ITEM_COLUMNS} FROM working_memory_items WHERE id = ? AND agent_id = ?", (item_id, scope.agent_id)
            ).fetchone()
            if row is None:
                return None
            item = changes.apply(_item(row), now)
            conn.execute(
                "UPDATE working_memory_items SET category = ?, title = ?, content = ?, status = ?, priority = ?, tags = ?,"
                " next_action = ?, folded = ?, updated_at = ? WHERE id = ? AND agent_id = ?",
                (
                    item.category,
                    item.title,
                    item.content,
                    item.status,
                    item.priority,
                    json.dumps(list(item.tags)),
                    item.next_action,
                    item.folded(),
                    ts(item.updated_at),
                    item_id,
                    scope.agent_id,
                ),
            )
            return item

    def delete_item(self, scope: AgentScope, item_id: str) -> bool:
        with self.db.tx() as conn:
            cursor = conn.execute("DELETE FROM working_memory_items WHERE id = ? AND agent_id = ?", (item_id, scope.agent_id))
            return bool(cursor.rowcount > 0)

    def list_items(self, scope: AgentScope, query: ItemQuery) -> tuple[list[WorkItem], int]:
        where, params = _item_where(scope, query)
        conn = self.db.reader()
        total = int(conn.execute(f"SELECT COUNT(*) FROM working_memory_items WHERE {where}", params).fetchone()[0])
        rows = conn.execute(
            f"SELECT {ITEM_COLUMNS} FROM working_memory_items WHERE {where}"
            " ORDER BY priority DESC, created_at DESC, seq DESC LIMIT ? OFFSET ?",
            [*params, query.limit, query.offset],
        ).fetchall()
        return [_item(r) for r in rows], total

    # ------------------------------------------------------------ sections

    def sections(self, scope: AgentScope) -> list[Section]:
        rows = (
            self.db.reader()
            .execute("SELECT section, content, updated_at FROM working_memory_sections WHERE agent_id = ? ORDER BY seq", (scope.agent_id,))
            .fetchall()
        )
        return [Section(r["section"], r["content"], _time(r["updated_at"])) for r in rows]

    def put_section(self, scope: AgentScope, section: str, content: str, now: datetime, max_sections: int) -> tuple[Section, bool]:
        with self.db.tx() as conn:
            known = conn.execute(
                "SELECT 1 FROM working_memory_sections WHERE agent_id = ? AND section = ?", (scope.agent_id, section)
            ).fetchone()
            if known is None:
                count = conn.execute("SELECT COUNT(*) FROM working_memory_sections WHERE agent_id = ?", (scope.agent_id,)).fetchone()[0]
                if count >= max_sections:
                    raise InvalidArgument(f"working memory holds at most {max_sections} sections; update an existing one (nothing changed)")
                conn.execute(
                    "INSERT INTO working_memory_sections (agent_id, section, content, updated_at) VALUES (?, ?, ?, ?)",
                    (scope.agent_id, section, content, ts(now)),
                )
            else:
                conn.execute(
                    "UPDATE working_memory_sections SET content = ?, updated_at = ? WHERE agent_id = ? AND section = ?",
                    (content, ts(now), scope.agent_id, section),
                )
        return Section(section, content, now), known is None

    def add_sections(self, scope: AgentScope, names: Sequence[str], now: datetime) -> int:
        with self.db.tx() as conn:
            return self._add_sections(conn, scope, names, now)

    @staticmethod
    def _add_sections(conn: sqlite3.Connection, scope: AgentScope, names: Sequence[str], now: datetime) -> int:
        added = 0
        for name in names:
            cursor = conn.execute(
                "INSERT INTO working_memory_sections (agent_id, section, content, updated_at) VALUES (?, ?, '', ?) ON CONFLICT DO NOTHING",
                (scope.agent_id, name, ts(now)),
            )
            added += cursor.rowcount
        return added

    # ------------------------------------------------------------ workspaces

    def open_workspace(self, scope: AgentScope, name: str, sections: Sequence[str], now: datetime) -> bool:
        with self.db.tx() as conn:
            cursor = conn.execute(
                "INSERT INTO workspaces (agent_id, name, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (scope.agent_id, name, ts(now)),
            )
            if cursor.rowcount == 0:
                return False
            self._add_sections(conn, scope, sections, now)
            return True

    def workspace_of(self, scope: AgentScope) -> WorkspaceRecord | None:
        row = self.db.reader().execute("SELECT agent_id, name, created_at FROM workspaces WHERE agent_id = ?", (scope.agent_id,)).fetchone()
        return None if row is None else WorkspaceRecord(row["agent_id"], row["name"], _time(row["created_at"]))

    def list_workspaces(self, scope: AgentScope) -> list[WorkspaceRecord]:
        if scope.is_maintenance:
            where, params = "1 = 1", []
        else:
            prefix = scope.agent_id + ":"
            where, params = "(agent_id = ? OR substr(agent_id, 1, ?) = ?)", [scope.agent_id, len(prefix), prefix]
        rows = self.db.reader().execute(f"SELECT agent_id, name, created_at FROM workspaces WHERE {where} ORDER BY seq", params).fetchall()
        return [WorkspaceRecord(r["agent_id"], r["name"], _time(r["created_at"])) for r in rows]

    # ------------------------------------------------------------ health

    def working_memory_summary(self, scope: AgentScope) -> WorkMemorySummary:
        conn = self.db.reader()
        counts = conn.execute(
            "SELECT status, category, COUNT(*), MAX(updated_at) FROM working_memory_items WHERE agent_id = ? GROUP BY status, category",
            (scope.agent_id,),
        ).fetchall()
        sections = conn.execute(
            "SELECT COUNT(*), MAX(updated_at) FROM working_memory_sections WHERE agent_id = ?", (scope.agent_id,)
        ).fetchone()
        latest = max((r[3] for r in counts), default=None)
        return WorkMemorySummary(
            items={(r[0], r[1]): int(r[2]) for r in counts},
            sections=int(sections[0]),
            items_updated=parse_ts(latest),
            sections_updated=parse_ts(sections[1]),
        )
