"""The analytics of 001 §8.4 on SQLite: overview, growth per period, types, tags and the effective
confidence histogram, each one query over the memories the scope sees (working memory apart)."""

from __future__ import annotations

from datetime import datetime

from ..models import AgentScope
from .protocol import BREAKDOWN_COLUMNS, BreakdownField, GrowthPeriod, MemoryOverview
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import _scope_sql, parse_ts, ts

# SQLite keeps timestamps as UTC ISO-8601 text, which julianday() reads.
_PERIOD_START = {
    "day": "substr(f.created_at, 1, 10)",
    "week": "date(f.created_at, '-6 days', 'weekday 1')",  # the Monday on or before
    "month": "substr(f.created_at, 1, 7) || '-01'",
}


def effective_sql(now_param: str = "?", half_life_param: str = "?") -> str:
    """graph.effective_confidence as an SQL expression over fragments `f`."""
    last = "MAX(f.created_at, COALESCE(f.accessed_at, f.created_at))"
    days = f"MAX(0.0, julianday({now_param}) - julianday({last}))"
    return f"(f.confidence * pow(0.5, {days} / {half_life_param}))"


class SQLiteAnalytics:
    """Reads on the reader connection of the calling thread."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    def _memories(self, scope: AgentScope) -> tuple[str, list[object]]:
        where, params = _scope_sql(scope, use_index=True)
        return f"FROM fragments f WHERE {where} AND f.session_id IS NULL", list(params)

    @staticmethod
    def _graph_where(scope: AgentScope) -> tuple[str, list[object]]:
        return ("1 = 1", []) if scope.is_maintenance else ("agent_id = ?", [scope.agent_id])

    def memory_overview(self, scope: AgentScope, now: datetime, half_life_days: float, low_below: float) -> MemoryOverview:
        conn = self.db.reader()
        source, params = self._memories(scope)
        eff = effective_sql()
        row = conn.execute(
            f"SELECT COUNT(*), AVG(f.confidence), AVG({eff}), SUM(CASE WHEN {eff} < ? THEN 1 ELSE 0 END),"
            f" MIN(f.created_at), MAX(f.created_at) {source}",
            [ts(now), half_life_days, ts(now), half_life_days, low_below, *params],
        ).fetchone()
        graph, gparams = self._graph_where(scope)
        entities = conn.execute(f"SELECT COUNT(*) FROM entities WHERE {graph}", gparams).fetchone()[0]
        relations = conn.execute(f"SELECT COUNT(*) FROM relations WHERE {graph}", gparams).fetchone()[0]
        return MemoryOverview(
            total_memories=int(row[0]),
            total_entities=int(entities),
            total_relations=int(relations),
            average_confidence=None if row[1] is None else float(row[1]),
            average_effective_confidence=None if row[2] is None else float(row[2]),
            low_confidence_count=int(row[3] or 0),
            oldest_memory=parse_ts(row[4]),
            newest_memory=parse_ts(row[5]),
        )

    def memory_growth(self, scope: AgentScope, period: GrowthPeriod, limit: int) -> list[tuple[str, int]]:
        source, params = self._memories(scope)
        start = _PERIOD_START[period]
        rows = (
            self.db.reader()
            .execute(f"SELECT {start} AS p, COUNT(*) {source} GROUP BY p ORDER BY p DESC LIMIT ?", [*params, limit])
            .fetchall()
        )
        return [(str(r[0]), int(r[1])) for r in reversed(rows)]

    def type_counts(self, scope: AgentScope) -> dict[str, int]:
        source, params = self._memories(scope)
        rows = self.db.reader().execute(f"SELECT f.type, COUNT(*) {source} GROUP BY f.type ORDER BY f.type", params).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def field_counts(self, scope: AgentScope, name: BreakdownField) -> dict[str, int]:
        column = BREAKDOWN_COLUMNS[name]
        source, params = self._memories(scope)
        rows = self.db.reader().execute(f"SELECT {column} AS v, COUNT(*) {source} GROUP BY v", params).fetchall()
        return {str(bool(r[0])).lower() if name == "pinned" else str(r[0]): int(r[1]) for r in rows}

    def tag_counts(self, scope: AgentScope, limit: int, offset: int) -> tuple[list[tuple[str, int]], int]:
        where, params = _scope_sql(scope, use_index=True)
        tags = f"SELECT t.value AS tag, COUNT(*) AS n FROM fragments f, json_each(f.tags) t WHERE {where} AND f.session_id IS NULL GROUP BY t.value"
        conn = self.db.reader()
        rows = conn.execute(f"{tags} ORDER BY n DESC, tag LIMIT ? OFFSET ?", [*params, limit, offset]).fetchall()
        total = conn.execute(f"SELECT COUNT(*) FROM ({tags})", params).fetchone()[0]
        return [(str(r[0]), int(r[1])) for r in rows], int(total)

    def confidence_histogram(self, scope: AgentScope, now: datetime, half_life_days: float, buckets: int) -> list[int]:
        source, params = self._memories(scope)
        bucket = f"MIN(CAST({effective_sql()} * ? AS INTEGER), ?)"
        rows = (
            self.db.reader()
            .execute(f"SELECT {bucket} AS b, COUNT(*) {source} GROUP BY b", [ts(now), half_life_days, buckets, buckets - 1, *params])
            .fetchall()
        )
        counts = [0] * buckets
        for b, n in rows:
            counts[max(0, int(b))] += int(n)
        return counts
