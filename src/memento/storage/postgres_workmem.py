"""Seed 003's working memory on PostgreSQL (migration 0013, row-level security per namespace):
items, sections and workspace records with the same semantics as SQLite's. Every statement also
names the scope's namespace, so results stay right where the policy does not bind (a superuser)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidArgument
from ..models import AgentScope
from .postgres_db import Cursor, PostgresDatabase, retried
from .workmem import ItemChanges, ItemQuery, Section, WorkItem, WorkMemorySummary, WorkspaceRecord

ITEM_COLUMNS = "id, agent_id, category, title, content, status, priority, tags, next_action, created_at, updated_at"
ITEMS = "agent_memory.working_memory_items"
SECTIONS = "agent_memory.working_memory_sections"
WORKSPACES = "agent_memory.workspaces"


def _item(r: dict[str, Any]) -> WorkItem:
    return WorkItem(
        id=r["id"],
        agent_id=r["agent_id"],
        category=r["category"],
        title=r["title"],
        content=r["content"],
        status=r["status"],
        priority=int(r["priority"]),
        tags=tuple(r["tags"]),
        next_action=r["next_action"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def _item_where(scope: AgentScope, query: ItemQuery) -> tuple[str, list[Any]]:
    clauses, params = ["agent_id = %s", "status = ANY(%s)"], [scope.agent_id, list(query.statuses)]
    if query.category is not None:
        clauses.append("category = %s")
        params.append(query.category)
    for term in query.terms:
        clauses.append("strpos(folded, %s) > 0")
        params.append(term)
    return " AND ".join(clauses), params


def _workspace(r: dict[str, Any]) -> WorkspaceRecord:
    return WorkspaceRecord(r["agent_id"], r["name"], r["created_at"])


class PostgresWorkMemory:
    """WorkingMemoryStore on PostgreSQL; writes are retried when PostgreSQL rolled them back."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    # ------------------------------------------------------------ items

    @retried
    def add_item(self, scope: AgentScope, item: WorkItem) -> None:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"INSERT INTO {ITEMS} ({ITEM_COLUMNS}, folded) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    item.id,
                    scope.agent_id,
                    item.category,
                    item.title,
                    item.content,
                    item.status,
                    item.priority,
                    list(item.tags),
                    item.next_action,
                    item.created_at,
                    item.updated_at,
                    item.folded(),
                ),
            )

    def get_item(self, scope: AgentScope, item_id: str) -> WorkItem | None:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE id = %s AND agent_id = %s", (item_id, scope.agent_id))
            row = cur.fetchone()
        return None if row is None else _item(row)

    @retried
    def update_item(self, scope: AgentScope, item_id: str, changes: ItemChanges, now: datetime) -> WorkItem | None:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE id = %s AND agent_id = %s FOR UPDATE", (item_id, scope.agent_id))
            row = cur.fetchone()
            if row is None:
                return None
            item = changes.apply(_item(row), now)
            cur.execute(
                f"UPDATE {ITEMS} SET category = %s, title = %s, content = %s, status = %s, priority = %s, tags = %s,"
                " next_action = %s, folded = %s, updated_at = %s WHERE id = %s AND agent_id = %s",
                (
                    item.category,
                    item.title,
                    item.content,
                    item.status,
                    item.priority,
                    list(item.tags),
                    item.next_action,
                    item.folded(),
                    item.updated_at,
                    item_id,
                    scope.agent_id,
                ),
            )
            return item

    @retried
    def delete_item(self, scope: AgentScope, item_id: str) -> bool:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"DELETE FROM {ITEMS} WHERE id = %s AND agent_id = %s", (item_id, scope.agent_id))
            return cur.rowcount > 0

    def list_items(self, scope: AgentScope, query: ItemQuery) -> tuple[list[WorkItem], int]:
        where, params = _item_where(scope, query)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT COUNT(*) AS n FROM {ITEMS} WHERE {where}", params)
            counted = cur.fetchone()
            cur.execute(
                f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE {where} ORDER BY priority DESC, created_at DESC, seq DESC LIMIT %s OFFSET %s",
                [*params, query.limit, query.offset],
            )
            rows = cur.fetchall()
        return [_item(r) for r in rows], int(counted["n"]) if counted else 0

    # ------------------------------------------------------------ sections

    def sections(self, scope: AgentScope) -> list[Section]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT section, content, updated_at FROM {SECTIONS} WHERE agent_id = %s ORDER BY seq", (scope.agent_id,))
            rows = cur.fetchall()
        return [Section(r["section"], r["content"], r["updated_at"]) for r in rows]

    @retried
    def put_section(self, scope: AgentScope, section: str, content: str, now: datetime, max_sections: int) -> tuple[Section, bool]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"UPDATE {SECTIONS} SET content = %s, updated_at = %s WHERE agent_id = %s AND section = %s",
                (content, now, scope.agent_id, section),
            )
            if cur.rowcount:
                return Section(section, content, now), False
            cur.execute(f"SELECT COUNT(*) AS n FROM {SECTIONS} WHERE agent_id = %s", (scope.agent_id,))
            counted = cur.fetchone()
            if counted is not None and int(counted["n"]) >= max_sections:
                raise InvalidArgument(f"working memory holds at most {max_sections} sections; update an existing one (nothing changed)")
            # Another writer may create the same section meanwhile: then this write replaces its content.
            cur.execute(
                f"INSERT INTO {SECTIONS} (agent_id, section, content, updated_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (agent_id, section) DO UPDATE SET content = EXCLUDED.content, updated_at = EXCLUDED.updated_at",
                (scope.agent_id, section, content, now),
            )
        return Section(section, content, now), True

    @retried
    def add_sections(self, scope: AgentScope, names: Sequence[str], now: datetime) -> int:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            return self._add_sections(cur, scope, names, now)

    @staticmethod
    def _add_sections(cur: Cursor, scope: AgentScope, names: Sequence[str], now: datetime) -> int:
        if not names:
            return 0
        cur.execute(
            f"INSERT INTO {SECTIONS} (agent_id, section, content, updated_at)"
            " SELECT %s, name, '', %s FROM unnest(%s::text[]) WITH ORDINALITY AS n(name, position) ORDER BY position"
            " ON CONFLICT (agent_id, section) DO NOTHING",
            (scope.agent_id, now, list(names)),
        )
        return cur.rowcount

    # ------------------------------------------------------------ workspaces

    @retried
    def open_workspace(self, scope: AgentScope, name: str, sections: Sequence[str], now: datetime) -> bool:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"INSERT INTO {WORKSPACES} (agent_id, name, created_at) VALUES (%s, %s, %s) ON CONFLICT (agent_id) DO NOTHING RETURNING seq",
                (scope.agent_id, name, now),
            )
            if cur.fetchone() is None:
                return False
            self._add_sections(cur, scope, sections, now)
            return True

    def workspace_of(self, scope: AgentScope) -> WorkspaceRecord | None:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT agent_id, name, created_at FROM {WORKSPACES} WHERE agent_id = %s", (scope.agent_id,))
            row = cur.fetchone()
        return None if row is None else _workspace(row)

    def list_workspaces(self, scope: AgentScope) -> list[WorkspaceRecord]:
        if scope.is_maintenance:
            where, params = "TRUE", []
        else:
            prefix = scope.agent_id + ":"
            where, params = "(agent_id = %s OR left(agent_id, %s) = %s)", [scope.agent_id, len(prefix), prefix]
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT agent_id, name, created_at FROM {WORKSPACES} WHERE {where} ORDER BY seq", params)
            rows = cur.fetchall()
        return [_workspace(r) for r in rows]

    # ------------------------------------------------------------ health

    def working_memory_summary(self, scope: AgentScope) -> WorkMemorySummary:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT status, category, COUNT(*) AS n, MAX(updated_at) AS latest FROM {ITEMS} WHERE agent_id = %s GROUP BY status, category",
                (scope.agent_id,),
            )
            counts = cur.fetchall()
            cur.execute(f"SELECT COUNT(*) AS n, MAX(updated_at) AS latest FROM {SECTIONS} WHERE agent_id = %s", (scope.agent_id,))
            sections = cur.fetchone()
        assert sections is not None
        return WorkMemorySummary(
            items={(r["status"], r["category"]): int(r["n"]) for r in counts},
            sections=int(sections["n"]),
            items_updated=max((r["latest"] for r in counts), default=None),
            sections_updated=sections["latest"],
        )
