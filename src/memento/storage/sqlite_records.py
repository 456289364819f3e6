"""Whole records on SQLite (the RecordStore protocol): pages of an agent's rows of every exported
table, and their lossless restore, one transaction per call (storage/records.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pysqlite3.dbapi2 as sqlite3

from ..graph import name_key
from ..models import AgentScope
from . import terms as terms_policy
from .records import (
    ALREADY_PRESENT,
    ENTITIES,
    FRAGMENTS,
    ITEMS,
    LINKS,
    NESTED,
    RecordQuery,
    RecordTable,
    RestoreOutcome,
    check_owner,
    named_fragments,
    owners_sql,
    page_sql,
    record_table,
    row_key,
    shared_with,
    split_nested,
)
from .sqlite_bulk import _export_row, _sqlite_value
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import SQLITE, _index_text
from .workmem import folded_text


class SQLiteRecords:
    """Reads on the calling thread's reader; a restore is one transaction on the writer."""

    def __init__(self, db: SQLiteDatabase, embedding_model: str | None, agents: terms_policy.CountCache[frozenset[str]]) -> None:
        self.db = db
        self.embedding_model = embedding_model
        self.agents = agents

    def record_owners(self, scope: AgentScope, query: RecordQuery) -> dict[str, int]:
        sql, params = owners_sql(scope, query, SQLITE)
        return {str(r["agent_id"]): int(r["n"]) for r in self.db.reader().execute(sql, params).fetchall()}

    def record_page(self, scope: AgentScope, table: str, query: RecordQuery, after: int, limit: int) -> list[dict[str, object]]:
        spec = record_table(table)
        conn = self.db.reader()
        sql, params = page_sql(spec, scope, query, SQLITE, after=after, limit=limit)
        rows = [_export_row(table, dict(r)) for r in conn.execute(sql, params).fetchall()]
        if spec is FRAGMENTS and rows:
            ids = [str(r["id"]) for r in rows]
            for child in NESTED:
                by_parent: dict[str, list[dict[str, object]]] = {}
                csql, cparams = page_sql(child, scope, query, SQLITE, after=0, limit=0, parents=ids)
                for r in conn.execute(csql, cparams).fetchall():
                    row = _export_row(child.table, dict(r))
                    by_parent.setdefault(str(row[child.fragments[0]]), []).append(row)
                for row in rows:
                    row[child.kind] = by_parent.get(str(row["id"]), [])
            if query.vectors:  # the page's own fragments (already scoped), joined by id
                found = conn.execute(
                    "SELECT f.id, e.model, e.vector FROM fragment_embeddings e JOIN fragments f ON f.seq = e.seq"
                    f" WHERE f.id IN ({_marks(ids)})",
                    ids,
                ).fetchall()
                stored = {str(r[0]): (str(r[1]), np.frombuffer(r[2], dtype=np.float32)) for r in found}
                for row in rows:
                    row["embedding_model"], row["embedding"] = stored.get(str(row["id"]), (None, None))
        return rows

    def restore_records(self, scope: AgentScope, records: Sequence[tuple[str, dict[str, object]]]) -> RestoreOutcome:
        outcome = RestoreOutcome()
        with self.db.tx() as conn:
            for table, row in records:
                spec = record_table(table)
                if spec.nested:
                    raise ValueError(f"{table} rows travel inside their fragment's record")
                if spec is FRAGMENTS:
                    self._fragment(conn, scope, row, outcome)
                else:
                    self._row(conn, scope, spec, row, outcome)
            if outcome.fragment_ids:
                self.agents.clear()  # perhaps a new namespace: the agents present changed
        return outcome

    # ------------------------------------------------------------ fragments

    def _fragment(self, conn: sqlite3.Connection, scope: AgentScope, row: dict[str, object], outcome: RestoreOutcome) -> None:
        agent = check_owner(scope, FRAGMENTS, row)
        own, nested = split_nested(row)
        fid, session = str(own["id"]), own.get("session_id")
        if session is not None:
            other = conn.execute("SELECT 1 FROM fragments WHERE session_id = ? AND agent_id != ? LIMIT 1", (session, agent)).fetchone()
            if other is not None:
                outcome.skip(FRAGMENTS.table, fid, f"session {session!r} belongs to another namespace")
                return
        values = [_sqlite_value(c, own.get(c)) for c in FRAGMENTS.columns]
        found = conn.execute(
            f"INSERT INTO fragments ({', '.join(FRAGMENTS.columns)}) VALUES ({_marks(values)}) ON CONFLICT DO NOTHING RETURNING seq", values
        ).fetchone()
        if found is None:
            outcome.skip(FRAGMENTS.table, fid, self._fragment_conflict(conn, own))
            return
        seq = int(found[0])
        _index_text(conn, seq, str(own["content"]), [str(k) for k in own["keywords"]], str(own["topic"]))  # type: ignore[attr-defined]
        vector = own.get("embedding")
        if vector is not None and self.embedding_model:
            vec = np.ascontiguousarray(vector, dtype=np.float32)  # the index follows through the change log
            conn.execute(
                "INSERT OR REPLACE INTO fragment_embeddings (seq, agent_id, model, dim, vector) VALUES (?, ?, ?, ?, ?)",
                (seq, agent, self.embedding_model, int(vec.shape[0]), vec.tobytes()),
            )
        for child, rows in nested.items():
            for child_row in rows:
                self._insert(conn, child, {**child_row, child.fragments[0]: fid})
                outcome.count(child.table)
        outcome.count(FRAGMENTS.table)
        outcome.fragment_ids.append(fid)

    @staticmethod
    def _fragment_conflict(conn: sqlite3.Connection, row: dict[str, object]) -> str:
        """Why a fragment's insert did nothing: which stored row holds its id, content or key."""
        if conn.execute("SELECT 1 FROM fragments WHERE id = ? AND agent_id = ?", (row["id"], row["agent_id"])).fetchone():
            return ALREADY_PRESENT
        if conn.execute("SELECT 1 FROM fragments WHERE id = ?", (row["id"],)).fetchone():
            return "the id is taken in another namespace"
        session = "session_id IS NULL" if row.get("session_id") is None else "session_id = ?"
        extra = [] if row.get("session_id") is None else [row["session_id"]]
        if row.get("memory_key") is not None:
            sql, params = f"agent_id = ? AND memory_key = ? AND {session}", [row["agent_id"], row["memory_key"], *extra]
            what = "its key"
        else:
            sql, params = (
                f"agent_id = ? AND content_hash = ? AND memory_key IS NULL AND {session}",
                [row["agent_id"], row["content_hash"], *extra],
            )
            what = "the same content"
        other = conn.execute(f"SELECT id FROM fragments WHERE {sql}", params).fetchone()
        return f"{what} is already stored as {other[0]}" if other else "conflicts with a stored memory"

    # ------------------------------------------------------------ the other tables

    def _row(self, conn: sqlite3.Connection, scope: AgentScope, spec: RecordTable, row: dict[str, object], outcome: RestoreOutcome) -> None:
        key = row_key(spec, row)
        named = named_fragments(spec, row)
        rows = conn.execute(f"SELECT id, agent_id, session_id, privacy_scope FROM fragments WHERE id IN ({_marks(named)})", named)
        found = {r[0]: (r[1], r[2], r[3]) for r in rows.fetchall()} if named else {}
        owners = {i: owner for i, (owner, _, _) in found.items()}
        if spec.owner is None:  # owned through the first fragment it names (a link: its source)
            agent = owners.get(named[0])
            if agent is None or not (scope.is_maintenance or agent == scope.agent_id):
                outcome.skip(spec.table, key, f"names memory {named[0]}, which this namespace does not hold")
                return
        else:
            agent = check_owner(scope, spec, row)
        missing = [i for i in named if i not in found or not (scope.is_maintenance or shared_with(agent, *found[i]))]
        if missing:
            outcome.skip(spec.table, key, f"names memory {missing[0]}, which this namespace does not hold")
            return
        entity_ids = [str(row[c]) for c in spec.entities]
        if entity_ids:
            held = {
                r[0]
                for r in conn.execute(f"SELECT id FROM entities WHERE id IN ({_marks(entity_ids)}) AND agent_id = ?", [*entity_ids, agent])
            }
            absent = [i for i in entity_ids if i not in held]
            if absent:
                outcome.skip(spec.table, key, f"names entity {absent[0]}, which this namespace does not hold")
                return
        if not self._insert(conn, spec, row):
            outcome.skip(spec.table, key, self._conflict(conn, spec, row))
            return
        if spec is LINKS:  # the source's linked_to lists its targets (as add_link keeps it)
            conn.execute(
                "UPDATE fragments SET linked_to = json_insert(linked_to, '$[#]', ?) WHERE id = ?"
                " AND NOT EXISTS (SELECT 1 FROM json_each(fragments.linked_to) WHERE value = ?)",
                (row["to_id"], row["from_id"], row["to_id"]),
            )
        outcome.count(spec.table)

    def _insert(self, conn: sqlite3.Connection, spec: RecordTable, row: dict[str, object]) -> bool:
        values: dict[str, object] = {c: _sqlite_value(c, row.get(c)) for c in spec.columns}
        if spec is ITEMS:  # the search text is derived, not carried
            values["folded"] = folded_text(str(row["title"]), str(row.get("content") or ""), _text(row.get("next_action")))
        if spec is ENTITIES:
            values["name_key"] = name_key(str(row["name"]))
            vector = row.get("embedding")
            if vector is not None and self.embedding_model:
                values["embedding"] = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
                values["embedding_model"] = self.embedding_model
        cursor = conn.execute(
            f"INSERT INTO {spec.table} ({', '.join(values)}) VALUES ({_marks(list(values))}) ON CONFLICT DO NOTHING", list(values.values())
        )
        return bool(cursor.rowcount > 0)

    @staticmethod
    def _conflict(conn: sqlite3.Connection, spec: RecordTable, row: dict[str, object]) -> str:
        if spec.unique_id and conn.execute(f"SELECT 1 FROM {spec.table} WHERE id = ?", (row["id"],)).fetchone() is None:
            if spec is ENTITIES:
                other = conn.execute(
                    "SELECT id FROM entities WHERE agent_id = ? AND name_key = ?", (row["agent_id"], name_key(str(row["name"])))
                ).fetchone()
                if other is not None:
                    return f"an entity of this name is already stored as {other[0]}"
            return "conflicts with a stored row"
        return ALREADY_PRESENT


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))
