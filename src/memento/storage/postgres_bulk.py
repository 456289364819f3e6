"""Bulk copy on PostgreSQL (the BulkStore protocol, for `memento migrate`), as `system` so every
agent's rows are visible, and the conversion of plain Python column values to PostgreSQL's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from ..errors import InvalidArgument
from ..graph import name_key
from ..models import FragmentType, memory_system_for
from .postgres_db import SYSTEM, PostgresDatabase, retried
from .postgres_rows import _SEARCH
from .postgres_sql import search_vector
from .protocol import BULK_COLUMNS, BULK_KEYS, BULK_TABLES, FRAGMENT_DEFAULTS


class PostgresBulk:
    """Export and import of whole tables, in paging-key order."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def embedding_shapes(self) -> list[tuple[str, int]]:
        """The (model, dimensions) pairs of the stored vectors, for all agents."""
        with self.db.tx(SYSTEM) as cur:
            cur.execute(
                "SELECT DISTINCT embedding_model AS model, vector_dims(embedding) AS dim FROM agent_memory.fragments"
                " WHERE embedding IS NOT NULL ORDER BY 1, 2"
            )
            return [(str(r["model"]), int(r["dim"])) for r in cur.fetchall()]

    def count_rows(self, table: str) -> int:
        _bulk_table(table)
        with self.db.tx(SYSTEM) as cur:
            cur.execute(sql.SQL("SELECT COUNT(*) AS n FROM agent_memory.{}").format(sql.Identifier(table)))
            row = cur.fetchone()
            return int(row["n"]) if row else 0

    def export_rows(self, table: str, after: int, limit: int) -> list[dict[str, object]]:
        """Up to `limit` rows of `table` whose paging key is above `after`, in key order (as `system`,
        so every agent's rows are visible)."""
        key = _bulk_table(table)
        names = list(BULK_COLUMNS[table])
        if table == "fragments":
            names = ["seq", *names, "embedding", "embedding_model"]
        elif key == "seq":  # a table paged by its own seq carries it (the paging key), which import ignores
            names = ["seq", *names]
        query = sql.SQL("SELECT {cols} FROM agent_memory.{table} WHERE {key} > %s ORDER BY {key} LIMIT %s").format(
            cols=sql.SQL(", ").join(sql.Identifier(n) for n in names), table=sql.Identifier(table), key=sql.Identifier(key)
        )
        with self.db.tx(SYSTEM) as cur:
            cur.execute(query, (after, limit))
            rows = cur.fetchall()
        out: list[dict[str, object]] = []
        for r in rows:
            row = dict(r)
            for name in ("keywords", "linked_to", "tool_highlights", "tool_pain_points", "tags"):
                if row.get(name) is not None:  # a version's tags may be NULL (archived before 0007)
                    row[name] = list(row[name])
            if "embedding" in row and row["embedding"] is not None:
                value = row["embedding"]
                array = value if isinstance(value, np.ndarray) else value.to_numpy()  # pgvector's Vector
                row["embedding"] = np.asarray(array, dtype=np.float32)
            out.append(row)
        return out

    @retried
    def import_rows(self, table: str, rows: Sequence[dict[str, object]]) -> int:
        """Insert rows exported by any backend as `system`; rows already present are skipped.
        Returns how many were inserted. Fragments get their search vector computed here."""
        _bulk_table(table)
        names = list(BULK_COLUMNS[table])
        extra: list[str] = []
        if table == "fragments":
            extra = ["search", "embedding", "embedding_model"]
        keyed = table == "entities"  # the case-folded name key is derived, not copied
        marks = [sql.Placeholder()] * len(names) + ([sql.SQL(_SEARCH), sql.Placeholder(), sql.Placeholder()] if extra else [])
        if keyed:
            extra, marks = ["name_key"], [*marks, sql.Placeholder()]
        query = sql.SQL("INSERT INTO agent_memory.{table} ({cols}) VALUES ({marks}) ON CONFLICT DO NOTHING").format(
            table=sql.Identifier(table),
            cols=sql.SQL(", ").join(sql.Identifier(n) for n in [*names, *extra]),
            marks=sql.SQL(", ").join(marks),
        )
        inserted = 0
        with self.db.tx(SYSTEM) as cur:
            for row in rows:
                params: list[Any] = [_pg_value(n, _imported(table, n, row), nullable=table == "fragment_versions") for n in names]
                if keyed:
                    params.append(name_key(str(row["name"])))
                elif extra:
                    vector = row.get("embedding")
                    params += [
                        search_vector(str(row["content"]), [str(k) for k in row["keywords"]], str(row["topic"])),  # type: ignore[attr-defined]
                        None if vector is None else np.ascontiguousarray(vector, dtype=np.float32),
                        row.get("embedding_model") if vector is not None else None,
                    ]
                cur.execute(query, params)
                inserted += max(cur.rowcount, 0)
        return inserted

    def finish_import(self) -> None:
        """Move the id sequences past the copied ids, so new rows do not collide with them."""
        with self.db.tx(SYSTEM) as cur:
            for table in BULK_TABLES:
                if BULK_KEYS[table] != "id":
                    continue
                name = f"agent_memory.{table}"
                cur.execute(
                    sql.SQL(
                        "SELECT setval(pg_get_serial_sequence(%s, 'id'), GREATEST(COALESCE(MAX(id), 0), 1), MAX(id) IS NOT NULL)"
                        " FROM agent_memory.{}"
                    ).format(sql.Identifier(table)),
                    (name,),
                )


def _imported(table: str, name: str, row: dict[str, object]) -> object:
    """A column of an imported row, with the shared record's default when the row lacks it."""
    value = row.get(name)
    if value is None and table == "fragments":
        if name == "memory_system":
            return memory_system_for(FragmentType(str(row["type"])), working=row.get("session_id") is not None).value
        if name == "tier_since":  # a copy from an older exporter: its tier life starts now
            return datetime.now(UTC)
        return FRAGMENT_DEFAULTS.get(name)
    return value


def _bulk_table(table: str) -> str:
    if table not in BULK_KEYS:
        raise InvalidArgument(f"unknown table {table!r}")
    return BULK_KEYS[table]


def _pg_value(name: str, value: object, *, nullable: bool = False) -> object:
    """A plain Python column value as PostgreSQL takes it (`nullable`: a missing array stays NULL)."""
    if name in ("keywords", "linked_to", "tool_highlights", "tool_pain_points", "tags"):
        if value is None:
            return None if nullable else []
        return [str(v) for v in value]  # type: ignore[attr-defined]
    if name in ("is_anchor", "relevant", "sufficient", "overall_success", "pinned"):
        return bool(value)
    if name in ("metadata", "origin_trace"):
        return None if value is None else Jsonb(value)
    if name in (
        "accessed_at",
        "created_at",
        "updated_at",
        "verified_at",
        "amended_at",
        "expires_at",
        "deleted_at",
        "tier_since",
    ) and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value
