"""Seed 004's feedback events on PostgreSQL (row-level security per agent, migration 0010), and
the stored vectors the score profile 004 compares; the same semantics as SQLite's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ..models import AgentScope
from .postgres_db import PostgresDatabase, retried
from .postgres_rows import _require
from .postgres_sql import scope_sql
from .protocol import FeedbackTally, NewFeedback


def _own(scope: AgentScope) -> tuple[str, list[Any]]:
    """The feedback rows a scope reads: its agent's own (every agent's for the maintenance scope).
    The policy allows no more; the predicate keeps the pool's readers to their own rows too."""
    return ("TRUE", []) if scope.is_maintenance else ("fe.agent_id = %s", [scope.agent_id])


class PostgresFeedback:
    """Feedback rows joined to the fragments the scope sees; vectors of visible fragments."""

    def __init__(self, db: PostgresDatabase, embedding_model: str | None) -> None:
        self.db = db
        self.embedding_model = embedding_model

    @retried
    def add_feedback(self, scope: AgentScope, new: NewFeedback, now: datetime) -> int:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            _require(cur, scope, new.fragment_id)  # another agent's memory is as unknown as a missing one
            cur.execute(
                "INSERT INTO agent_memory.feedback_events (agent_id, fragment_id, event, score, note, session_id, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (scope.agent_id, new.fragment_id, new.event.value, new.score, new.note, new.session_id, now),
            )
            row = cur.fetchone()
            assert row is not None
            return int(row["id"])

    def feedback_tallies(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, FeedbackTally]:
        if not ids:
            return {}
        where, params = scope_sql(scope)
        own, oparams = _own(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT fe.fragment_id, fe.event, COUNT(*) AS n, SUM(fe.score) AS total FROM agent_memory.feedback_events fe"
                f" JOIN agent_memory.fragments f ON f.id = fe.fragment_id WHERE fe.fragment_id = ANY(%s) AND {own} AND {where}"
                " GROUP BY fe.fragment_id, fe.event",
                [list(ids), *oparams, *params],
            )
            rows = cur.fetchall()
        out: dict[str, FeedbackTally] = {}
        for r in rows:
            tally = out.setdefault(r["fragment_id"], FeedbackTally({}, {}))
            tally.counts[r["event"]] = int(r["n"])
            tally.scores[r["event"]] = float(r["total"])
        return out

    def feedback_counts(self, scope: AgentScope) -> dict[str, int]:
        where, params = scope_sql(scope)
        own, oparams = _own(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT fe.event, COUNT(*) AS n FROM agent_memory.feedback_events fe"
                f" JOIN agent_memory.fragments f ON f.id = fe.fragment_id WHERE {own} AND {where} GROUP BY fe.event ORDER BY fe.event",
                [*oparams, *params],
            )
            return {str(r["event"]): int(r["n"]) for r in cur.fetchall()}

    def recent_embeddings(self, scope: AgentScope, limit: int) -> list[tuple[str, np.ndarray]]:
        """(id, vector) of the newest visible fragments with a vector of the current model,
        working memory and keyed ones apart (what 001 §6.2 merging compares)."""
        if self.embedding_model is None or limit <= 0:
            return []
        where, params = scope_sql(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT f.id, f.embedding FROM agent_memory.fragments f WHERE f.embedding IS NOT NULL AND f.embedding_model = %s"
                f" AND f.session_id IS NULL AND f.memory_key IS NULL AND {where} ORDER BY f.created_at DESC, f.seq DESC LIMIT %s",
                [self.embedding_model, *params, limit],
                binary=True,  # vectors as bytes, not text to parse
            )
            rows = cur.fetchall()
        out: list[tuple[str, np.ndarray]] = []
        for r in rows:
            value = r["embedding"]
            array = value if isinstance(value, np.ndarray) else value.to_numpy()  # pgvector's Vector
            out.append((str(r["id"]), np.asarray(array, dtype=np.float32)))
        return out

    def embeddings_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids or self.embedding_model is None:
            return {}
        where, params = scope_sql(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT f.id, f.embedding FROM agent_memory.fragments f"
                f" WHERE f.id = ANY(%s) AND f.embedding IS NOT NULL AND f.embedding_model = %s AND {where}",
                [list(ids), self.embedding_model, *params],
                binary=True,  # vectors as bytes: parsing ~100 of them from text took ~12 ms a recall
            )
            rows = cur.fetchall()
        out: dict[str, np.ndarray] = {}
        for r in rows:
            value = r["embedding"]
            array = value if isinstance(value, np.ndarray) else value.to_numpy()  # pgvector's Vector
            out[str(r["id"])] = np.asarray(array, dtype=np.float32)
        return out
