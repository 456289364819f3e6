"""Bulk copy on SQLite (the BulkStore protocol, for `memento migrate`) and the conversion between
plain Python column values and the forms SQLite stores them in."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pysqlite3.dbapi2 as sqlite3

from ..errors import InvalidArgument
from ..graph import name_key
from ..models import Fragment, FragmentType, memory_system_for
from . import terms as terms_policy
from .protocol import BULK_COLUMNS, BULK_KEYS, FRAGMENT_DEFAULTS, FragmentChanges, NewFragment, changed_record, new_record
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import _index_text, parse_ts, ts


class SQLiteBulk:
    """Export and import of whole tables, in paging-key order."""

    def __init__(self, db: SQLiteDatabase, agents: terms_policy.CountCache[frozenset[str]]) -> None:
        self.db = db
        self.agents = agents

    def embedding_shapes(self) -> list[tuple[str, int]]:
        """The (model, dimensions) pairs of the stored vectors."""
        rows = self.db.reader().execute("SELECT DISTINCT model, dim FROM fragment_embeddings ORDER BY model, dim").fetchall()
        return [(str(r[0]), int(r[1])) for r in rows]

    def count_rows(self, table: str) -> int:
        _bulk_table(table)
        return int(self.db.reader().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def export_rows(self, table: str, after: int, limit: int) -> list[dict[str, object]]:
        """Up to `limit` rows of `table` whose paging key is above `after`, in key order."""
        key = _bulk_table(table)
        conn = self.db.reader()
        columns = ", ".join(f"f.{c}" for c in BULK_COLUMNS[table])
        if table == "fragments":
            rows = conn.execute(
                f"SELECT f.seq, {columns}, e.model AS embedding_model, e.vector AS embedding FROM fragments f"
                " LEFT JOIN fragment_embeddings e ON e.seq = f.seq WHERE f.seq > ? ORDER BY f.seq LIMIT ?",
                (after, limit),
            ).fetchall()
        else:  # a table paged by its own seq carries it (the paging key), which import ignores
            paged = "f.seq, " if key == "seq" else ""
            rows = conn.execute(
                f"SELECT {paged}{columns} FROM {table} f WHERE f.{key} > ? ORDER BY f.{key} LIMIT ?", (after, limit)
            ).fetchall()
        return [_export_row(table, dict(r)) for r in rows]

    def import_rows(self, table: str, rows: Sequence[dict[str, object]]) -> int:
        """Insert rows exported by any backend; rows already present are skipped. Returns how many
        were inserted. Fragments get their full-text and keyword entries and their vectors."""
        _bulk_table(table)
        inserted = 0
        self.agents.clear()
        with self.db.tx() as conn:  # vector indexes catch up through the change log
            for row in rows:
                if table == "fragments":
                    inserted += self._import_fragment(conn, row)
                    continue
                values = _import_values(table, row)
                if table == "entities":  # names are unique per agent regardless of case
                    values["name_key"] = name_key(str(values["name"]))
                columns = ", ".join(values)  # the fixed BULK_COLUMNS names, never the row's own keys
                cursor = conn.execute(
                    f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(values))}) ON CONFLICT DO NOTHING", list(values.values())
                )
                inserted += max(cursor.rowcount, 0)
        return inserted

    def _import_fragment(self, conn: sqlite3.Connection, row: dict[str, object]) -> int:
        keywords = [str(k) for k in row["keywords"]]  # type: ignore[attr-defined]
        values = _import_values("fragments", row)
        if values["memory_system"] is None:
            working = values["session_id"] is not None
            values["memory_system"] = memory_system_for(FragmentType(str(values["type"])), working=working).value
        found = conn.execute(
            f"INSERT INTO fragments ({', '.join(values)}) VALUES ({', '.join('?' * len(values))}) ON CONFLICT DO NOTHING RETURNING seq",
            list(values.values()),
        ).fetchone()
        if found is None:
            return 0
        seq = int(found[0])
        _index_text(conn, seq, str(row["content"]), keywords, str(row["topic"]))
        vector = row.get("embedding")
        if vector is not None:
            vec = np.ascontiguousarray(vector, dtype=np.float32)
            conn.execute(
                "INSERT OR REPLACE INTO fragment_embeddings (seq, agent_id, model, dim, vector) VALUES (?, ?, ?, ?, ?)",
                (seq, row["agent_id"], row["embedding_model"], int(vec.shape[0]), vec.tobytes()),
            )
        return 1

    def finish_import(self) -> None:
        """Nothing to do: AUTOINCREMENT counters follow explicit ids, indexes are kept per batch."""


def _bulk_table(table: str) -> str:
    if table not in BULK_KEYS:
        raise InvalidArgument(f"unknown table {table!r}")
    return BULK_KEYS[table]


def _ts_or_none(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return ts(value)
    return ts(datetime.fromisoformat(str(value)))


_JSON_COLUMNS = {"keywords", "linked_to", "tool_highlights", "tool_pain_points", "tags", "metadata", "origin_trace"}
_BOOL_COLUMNS = {"is_anchor", "relevant", "sufficient", "overall_success", "pinned"}
_TIME_COLUMNS = {"accessed_at", "created_at", "updated_at", "verified_at", "amended_at", "expires_at", "deleted_at", "tier_since"}


def _record_values(new: NewFragment) -> list[object]:
    """The shared-record columns of an insert, in RECORD_COLUMNS order."""
    return [_sqlite_value(n, v) for n, v in new_record(new).items()]


def _changed_record_values(old: Fragment, changes: FragmentChanges) -> list[object]:
    """The record columns of an amend's UPDATE, in changed_record's order."""
    return [_sqlite_value(n, v) for n, v in changed_record(old, changes).items()]


def _sqlite_value(name: str, value: object) -> object:
    """A plain Python column value as SQLite stores it."""
    if name in _JSON_COLUMNS:
        return None if value is None else json.dumps(value, ensure_ascii=False, default=list)
    if name in _BOOL_COLUMNS:
        return int(bool(value))
    if name in _TIME_COLUMNS:
        return _ts_or_none(value)
    return value


def _export_row(table: str, row: dict[str, Any]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, value in row.items():
        if name in _JSON_COLUMNS:
            out[name] = None if value is None else json.loads(value)
        elif name in _BOOL_COLUMNS:
            out[name] = bool(value)
        elif name in _TIME_COLUMNS:
            out[name] = parse_ts(value)
        elif name == "embedding":
            out[name] = None if value is None else np.frombuffer(value, dtype=np.float32).copy()
        else:
            out[name] = value
    return out


def _import_values(table: str, row: dict[str, object]) -> dict[str, object]:
    values: dict[str, object] = {}
    for name in BULK_COLUMNS[table]:
        value = row.get(name)
        if value is None and table == "fragments":
            value = datetime.now(UTC) if name == "tier_since" else FRAGMENT_DEFAULTS.get(name)
        values[name] = _sqlite_value(name, value)
    return values
