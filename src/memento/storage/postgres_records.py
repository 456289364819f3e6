"""Whole records on PostgreSQL (the RecordStore protocol): pages of an agent's rows of every
exported table, and their lossless restore, one transaction per call under the agent's
row-level security context (storage/records.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..graph import name_key
from ..models import AgentScope
from .postgres_bulk import _pg_value
from .postgres_db import SYSTEM, Cursor, PostgresDatabase, _as, retried
from .postgres_rows import _SEARCH
from .postgres_sql import POSTGRES, search_vector
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
from .workmem import folded_text


class PostgresRecords:
    """Reads and restores, each in one transaction as the scope's agent."""

    def __init__(self, db: PostgresDatabase, embedding_model: str | None, *, pipelined: bool = True) -> None:
        self.db = db
        self.embedding_model = embedding_model
        self.pipelined = pipelined  # False: every fragment its own round trip (the path the tests compare against)

    def record_owners(self, scope: AgentScope, query: RecordQuery) -> dict[str, int]:
        sql, params = owners_sql(scope, query, POSTGRES)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(sql, params)
            return {str(r["agent_id"]): int(r["n"]) for r in cur.fetchall()}

    def record_page(self, scope: AgentScope, table: str, query: RecordQuery, after: int, limit: int) -> list[dict[str, object]]:
        spec = record_table(table)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            sql, params = page_sql(spec, scope, query, POSTGRES, after=after, limit=limit)
            cur.execute(sql, params)
            rows = [_plain(r) for r in cur.fetchall()]
            if spec is FRAGMENTS and rows:
                ids = [str(r["id"]) for r in rows]
                for child in NESTED:
                    by_parent: dict[str, list[dict[str, object]]] = {}
                    csql, cparams = page_sql(child, scope, query, POSTGRES, after=0, limit=0, parents=ids)
                    cur.execute(csql, cparams)
                    for r in cur.fetchall():
                        by_parent.setdefault(str(r[child.fragments[0]]), []).append(_plain(r))
                    for row in rows:
                        row[child.kind] = by_parent.get(str(row["id"]), [])
                if query.vectors:  # the page's own fragments (already scoped; RLS holds too)
                    cur.execute(
                        "SELECT id, embedding_model, embedding FROM agent_memory.fragments WHERE id = ANY(%s) AND embedding IS NOT NULL",
                        (ids,),
                    )
                    stored = {str(r["id"]): (str(r["embedding_model"]), _floats(r["embedding"])) for r in cur.fetchall()}
                    for row in rows:
                        row["embedding_model"], row["embedding"] = stored.get(str(row["id"]), (None, None))
        return rows

    @retried
    def restore_records(self, scope: AgentScope, records: Sequence[tuple[str, dict[str, object]]]) -> RestoreOutcome:
        outcome = RestoreOutcome()
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            run: dict[object, dict[str, object]] = {}  # consecutive fragments without a session, by id: sent together
            for table, row in records:
                spec = record_table(table)
                if spec.nested:
                    raise ValueError(f"{table} rows travel inside their fragment's record")
                if spec is FRAGMENTS and row.get("session_id") is None and self.pipelined:
                    if row["id"] in run:  # an id again: the first one's skip is explained before the second is written
                        self._fragments(cur, scope, list(run.values()), outcome)
                        run = {}
                    run[row["id"]] = row
                    continue
                self._fragments(cur, scope, list(run.values()), outcome)
                run = {}
                if spec is FRAGMENTS:
                    self._fragment(cur, scope, row, outcome)
                else:
                    self._row(cur, scope, spec, row, outcome)
            self._fragments(cur, scope, list(run.values()), outcome)
        return outcome

    # ------------------------------------------------------------ fragments

    def _fragment(self, cur: Cursor, scope: AgentScope, row: dict[str, object], outcome: RestoreOutcome) -> None:
        agent = check_owner(scope, FRAGMENTS, row)
        own, nested = split_nested(row)
        fid, session = str(own["id"]), own.get("session_id")
        if session is not None and _claimed_elsewhere(cur, scope, str(session), agent):
            outcome.skip(FRAGMENTS.table, fid, f"session {session!r} belongs to another namespace")
            return
        cur.execute(_FRAGMENT_INSERT, self._values(own))
        self._settle(cur, scope, own, nested, cur.fetchone() is not None, outcome)

    def _fragments(self, cur: Cursor, scope: AgentScope, rows: list[dict[str, object]], outcome: RestoreOutcome) -> None:
        """Fragments without a session (no namespace claim to check first), as `_fragment` writes
        them one by one, but in one pipelined round trip: the same statements in the same order,
        then each row's result read in turn (a conflict explained as before)."""
        if not rows:
            return
        for row in rows:
            check_owner(scope, FRAGMENTS, row)
        split = [split_nested(row) for row in rows]
        cur.executemany(_FRAGMENT_INSERT, [self._values(own) for own, _ in split], returning=True)
        written: list[bool] = []
        for _ in split:  # one result per row, in order
            written.append(cur.fetchone() is not None)
            cur.nextset()
        for (own, nested), stored in zip(split, written, strict=True):
            self._settle(cur, scope, own, nested, stored, outcome)

    def _values(self, own: dict[str, object]) -> list[object]:
        vector = own.get("embedding")
        embedded = vector is not None and self.embedding_model is not None
        keywords = [str(k) for k in own["keywords"]]  # type: ignore[attr-defined]
        return [
            *(_pg_value(c, own.get(c)) for c in FRAGMENTS.columns),
            search_vector(str(own["content"]), keywords, str(own["topic"])),
            np.ascontiguousarray(vector, dtype=np.float32) if embedded else None,
            self.embedding_model if embedded else None,
        ]

    def _settle(
        self, cur: Cursor, scope: AgentScope, own: dict[str, object], nested: NestedRows, stored: bool, outcome: RestoreOutcome
    ) -> None:
        """After a fragment's insert: its nested rows and its count, or why it was skipped."""
        fid = str(own["id"])
        if not stored:
            outcome.skip(FRAGMENTS.table, fid, _fragment_conflict(cur, scope, own))
            return
        for child, rows in nested.items():
            for child_row in rows:
                _insert(cur, child, {**child_row, child.fragments[0]: fid}, None)
                outcome.count(child.table)
        outcome.count(FRAGMENTS.table)
        outcome.fragment_ids.append(fid)

    # ------------------------------------------------------------ the other tables

    def _row(self, cur: Cursor, scope: AgentScope, spec: RecordTable, row: dict[str, object], outcome: RestoreOutcome) -> None:
        key = row_key(spec, row)
        named = named_fragments(spec, row)
        found: dict[str, tuple[str, object, object]] = {}
        owners: dict[str, str] = {}
        if named:
            cur.execute("SELECT id, agent_id, session_id, privacy_scope FROM agent_memory.fragments WHERE id = ANY(%s)", (named,))
            found = {r["id"]: (r["agent_id"], r["session_id"], r["privacy_scope"]) for r in cur.fetchall()}
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
            cur.execute("SELECT id FROM agent_memory.entities WHERE id = ANY(%s) AND agent_id = %s", (entity_ids, agent))
            held = {r["id"] for r in cur.fetchall()}
            absent = [i for i in entity_ids if i not in held]
            if absent:
                outcome.skip(spec.table, key, f"names entity {absent[0]}, which this namespace does not hold")
                return
        if not _insert(cur, spec, row, self.embedding_model):
            outcome.skip(spec.table, key, _conflict(cur, spec, row))
            return
        if spec is LINKS:  # the source's linked_to lists its targets (as add_link keeps it)
            cur.execute(
                "UPDATE agent_memory.fragments SET linked_to = array_append(linked_to, %s) WHERE id = %s AND NOT (%s = ANY(linked_to))",
                (row["to_id"], row["from_id"], row["to_id"]),
            )
        outcome.count(spec.table)


_FRAGMENT_INSERT = (
    f"INSERT INTO agent_memory.fragments ({', '.join([*FRAGMENTS.columns, 'search', 'embedding', 'embedding_model'])})"
    f" VALUES ({', '.join(['%s'] * len(FRAGMENTS.columns) + [_SEARCH, '%s', '%s'])}) ON CONFLICT DO NOTHING RETURNING seq"
)
NestedRows = dict[RecordTable, list[dict[str, object]]]


def _plain(row: dict[str, Any]) -> dict[str, object]:
    """A row as plain Python values (bytea as bytes)."""
    return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}


def _insert(cur: Cursor, spec: RecordTable, row: dict[str, object], embedding_model: str | None) -> bool:
    values: dict[str, object] = {c: _pg_value(c, row.get(c), nullable=spec.nested) for c in spec.columns}
    if spec is ITEMS:  # the search text is derived, not carried
        action = row.get("next_action")
        values["folded"] = folded_text(str(row["title"]), str(row.get("content") or ""), None if action is None else str(action))
    if spec is ENTITIES:
        values["name_key"] = name_key(str(row["name"]))
        vector = row.get("embedding")
        if vector is not None and embedding_model:
            values["embedding"] = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
            values["embedding_model"] = embedding_model
    cur.execute(
        f"INSERT INTO agent_memory.{spec.table} ({', '.join(values)}) VALUES ({', '.join(['%s'] * len(values))}) ON CONFLICT DO NOTHING",
        list(values.values()),
    )
    return bool(cur.rowcount > 0)


def _claimed_elsewhere(cur: Cursor, scope: AgentScope, session: str, agent: str) -> bool:
    """Whether another namespace has working memory under `session` (looked up as the system,
    then back to the scope's context)."""
    _as(cur, SYSTEM)
    try:
        cur.execute("SELECT 1 FROM agent_memory.fragments WHERE session_id = %s AND agent_id <> %s LIMIT 1", (session, agent))
        return cur.fetchone() is not None
    finally:
        _as(cur, scope.agent_id)


def _fragment_conflict(cur: Cursor, scope: AgentScope, row: dict[str, object]) -> str:
    """Why a fragment's insert did nothing: which stored row holds its id, content or key."""
    _as(cur, SYSTEM)  # the id may be held in a namespace the scope cannot see
    try:
        cur.execute("SELECT agent_id FROM agent_memory.fragments WHERE id = %s", (row["id"],))
        holder = cur.fetchone()
    finally:
        _as(cur, scope.agent_id)
    if holder is not None:
        return ALREADY_PRESENT if holder["agent_id"] == row["agent_id"] else "the id is taken in another namespace"
    session = "session_id IS NULL" if row.get("session_id") is None else "session_id = %s"
    extra = [] if row.get("session_id") is None else [row["session_id"]]
    if row.get("memory_key") is not None:
        sql, params, what = f"agent_id = %s AND memory_key = %s AND {session}", [row["agent_id"], row["memory_key"], *extra], "its key"
    else:
        sql = f"agent_id = %s AND content_hash = %s AND memory_key IS NULL AND {session}"
        params, what = [row["agent_id"], row["content_hash"], *extra], "the same content"
    cur.execute(f"SELECT id FROM agent_memory.fragments WHERE {sql}", params)
    other = cur.fetchone()
    return f"{what} is already stored as {other['id']}" if other else "conflicts with a stored memory"


def _conflict(cur: Cursor, spec: RecordTable, row: dict[str, object]) -> str:
    if spec.unique_id:
        cur.execute(f"SELECT 1 FROM agent_memory.{spec.table} WHERE id = %s", (row["id"],))
        if cur.fetchone() is None:
            if spec is ENTITIES:
                cur.execute(
                    "SELECT id FROM agent_memory.entities WHERE agent_id = %s AND name_key = %s",
                    (row["agent_id"], name_key(str(row["name"]))),
                )
                other = cur.fetchone()
                if other is not None:
                    return f"an entity of this name is already stored as {other['id']}"
            return "conflicts with a stored row"
    return ALREADY_PRESENT


def _floats(value: Any) -> np.ndarray:
    """A stored vector (pgvector's Vector, or an array) as float32."""
    array = value if isinstance(value, np.ndarray) else value.to_numpy()
    return np.asarray(array, dtype=np.float32)
