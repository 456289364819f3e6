"""The analytics of 001 §8.4 on PostgreSQL: overview, growth per period, types, tags and the
effective confidence histogram, each in one transaction in the caller's row-level security context,
over the memories the scope sees (working memory apart)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..models import AgentScope
from .postgres_db import PostgresDatabase
from .postgres_sql import scope_sql
from .protocol import BREAKDOWN_COLUMNS, BreakdownField, GrowthPeriod, MemoryOverview

_TRUNC = {"day": "day", "week": "week", "month": "month"}  # date_trunc('week') starts on Monday

# graph.effective_confidence as SQL over fragments `f`; parameters: now, half-life in days.
EFFECTIVE = (
    "(f.confidence * power(0.5, GREATEST(0.0, EXTRACT(EPOCH FROM (%s::timestamptz - GREATEST(f.created_at, f.accessed_at)))"
    " / 86400.0) / %s))"
)


class PostgresAnalytics:
    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    @staticmethod
    def _memories(scope: AgentScope) -> tuple[str, list[Any]]:
        where, params = scope_sql(scope)
        return f"{where} AND f.session_id IS NULL", params

    def memory_overview(self, scope: AgentScope, now: datetime, half_life_days: float, low_below: float) -> MemoryOverview:
        where, params = self._memories(scope)
        graph, gparams = ("TRUE", []) if scope.is_maintenance else ("agent_id = %s", [scope.agent_id])
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT COUNT(*) AS n, AVG(f.confidence) AS avg, AVG({EFFECTIVE}) AS eff,"
                f" COUNT(*) FILTER (WHERE {EFFECTIVE} < %s) AS low, MIN(f.created_at) AS oldest, MAX(f.created_at) AS newest"
                f" FROM agent_memory.fragments f WHERE {where}",
                [now, half_life_days, now, half_life_days, low_below, *params],
            )
            row = cur.fetchone() or {}
            cur.execute(
                f"SELECT (SELECT COUNT(*) FROM agent_memory.entities WHERE {graph}) AS entities,"
                f" (SELECT COUNT(*) FROM agent_memory.relations WHERE {graph}) AS relations",
                [*gparams, *gparams],
            )
            graph_row = cur.fetchone() or {}
        return MemoryOverview(
            total_memories=int(row.get("n") or 0),
            total_entities=int(graph_row.get("entities") or 0),
            total_relations=int(graph_row.get("relations") or 0),
            average_confidence=None if row.get("avg") is None else float(row["avg"]),
            average_effective_confidence=None if row.get("eff") is None else float(row["eff"]),
            low_confidence_count=int(row.get("low") or 0),
            oldest_memory=row.get("oldest"),
            newest_memory=row.get("newest"),
        )

    def memory_growth(self, scope: AgentScope, period: GrowthPeriod, limit: int) -> list[tuple[str, int]]:
        where, params = self._memories(scope)
        start = f"to_char(date_trunc('{_TRUNC[period]}', f.created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD')"
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT {start} AS p, COUNT(*) AS n FROM agent_memory.fragments f WHERE {where} GROUP BY p ORDER BY p DESC LIMIT %s",
                [*params, limit],
            )
            rows = cur.fetchall()
        return [(str(r["p"]), int(r["n"])) for r in reversed(rows)]

    def type_counts(self, scope: AgentScope) -> dict[str, int]:
        where, params = self._memories(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT f.type AS t, COUNT(*) AS n FROM agent_memory.fragments f WHERE {where} GROUP BY f.type ORDER BY f.type", params
            )
            return {str(r["t"]): int(r["n"]) for r in cur.fetchall()}

    def field_counts(self, scope: AgentScope, name: BreakdownField) -> dict[str, int]:
        column = BREAKDOWN_COLUMNS[name]
        where, params = self._memories(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT {column} AS v, COUNT(*) AS n FROM agent_memory.fragments f WHERE {where} GROUP BY v", params)
            rows = cur.fetchall()
        return {str(bool(r["v"])).lower() if name == "pinned" else str(r["v"]): int(r["n"]) for r in rows}

    def tag_counts(self, scope: AgentScope, limit: int, offset: int) -> tuple[list[tuple[str, int]], int]:
        where, params = self._memories(scope)
        tags = f"SELECT t.tag, COUNT(*) AS n FROM agent_memory.fragments f, unnest(f.tags) AS t(tag) WHERE {where} GROUP BY t.tag"
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"{tags} ORDER BY n DESC, t.tag LIMIT %s OFFSET %s", [*params, limit, offset])
            rows = cur.fetchall()
            cur.execute(f"SELECT COUNT(*) AS total FROM ({tags}) g", params)
            total = (cur.fetchone() or {}).get("total") or 0
        return [(str(r["tag"]), int(r["n"])) for r in rows], int(total)

    def confidence_histogram(self, scope: AgentScope, now: datetime, half_life_days: float, buckets: int) -> list[int]:
        where, params = self._memories(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT LEAST(FLOOR({EFFECTIVE} * %s)::int, %s) AS b, COUNT(*) AS n FROM agent_memory.fragments f WHERE {where} GROUP BY b",
                [now, half_life_days, buckets, buckets - 1, *params],
            )
            rows = cur.fetchall()
        counts = [0] * buckets
        for r in rows:
            counts[max(0, int(r["b"]))] += int(r["n"])
        return counts
