"""Seed 004's feedback events on SQLite, and the stored vectors the score profile 004 compares."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ..models import AgentScope
from .protocol import FeedbackTally, NewFeedback
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import _require, _scope_sql, ts


def _own(scope: AgentScope) -> tuple[str, list[Any]]:
    """The feedback rows a scope reads: its agent's own (every agent's for the maintenance scope)."""
    return ("1 = 1", []) if scope.is_maintenance else ("fe.agent_id = ?", [scope.agent_id])


class SQLiteFeedback:
    """Feedback rows joined to the fragments the scope sees; vectors of visible fragments."""

    def __init__(self, db: SQLiteDatabase, embedding_model: str | None) -> None:
        self.db = db
        self.embedding_model = embedding_model

    def add_feedback(self, scope: AgentScope, new: NewFeedback, now: datetime) -> int:
        with self.db.tx() as conn:
            _require(conn, scope, new.fragment_id)  # another agent's memory is as unknown as a missing one
            cursor = conn.execute(
                "INSERT INTO feedback_events (agent_id, fragment_id, event, score, note, session_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (scope.agent_id, new.fragment_id, new.event.value, new.score, new.note, new.session_id, ts(now)),
            )
            return int(cursor.lastrowid or 0)

    def feedback_tallies(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, FeedbackTally]:
        if not ids:
            return {}
        where, params = _scope_sql(scope)
        own, oparams = _own(scope)
        rows = (
            self.db.reader()
            .execute(
                "SELECT fe.fragment_id, fe.event, COUNT(*), SUM(fe.score) FROM feedback_events fe JOIN fragments f ON f.id = fe.fragment_id"
                f" WHERE fe.fragment_id IN ({','.join('?' * len(ids))}) AND {own} AND {where} GROUP BY fe.fragment_id, fe.event",
                [*ids, *oparams, *params],
            )
            .fetchall()
        )
        out: dict[str, FeedbackTally] = {}
        for fid, event, count, total in rows:
            tally = out.setdefault(fid, FeedbackTally({}, {}))
            tally.counts[event] = int(count)
            tally.scores[event] = float(total)
        return out

    def feedback_counts(self, scope: AgentScope) -> dict[str, int]:
        where, params = _scope_sql(scope)
        own, oparams = _own(scope)
        rows = (
            self.db.reader()
            .execute(
                "SELECT fe.event, COUNT(*) FROM feedback_events fe JOIN fragments f ON f.id = fe.fragment_id"
                f" WHERE {own} AND {where} GROUP BY fe.event ORDER BY fe.event",
                [*oparams, *params],
            )
            .fetchall()
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def recent_embeddings(self, scope: AgentScope, limit: int) -> list[tuple[str, np.ndarray]]:
        """(id, vector) of the newest visible fragments with a vector of the current model,
        working memory and keyed ones apart (what 001 §6.2 merging compares)."""
        if self.embedding_model is None or limit <= 0:
            return []
        where, params = _scope_sql(scope)
        rows = (
            self.db.reader()
            .execute(
                "SELECT f.id, e.vector FROM fragments f JOIN fragment_embeddings e ON e.seq = f.seq AND e.model = ?"
                f" WHERE f.session_id IS NULL AND f.memory_key IS NULL AND {where} ORDER BY f.created_at DESC, f.seq DESC LIMIT ?",
                [self.embedding_model, *params, limit],
            )
            .fetchall()
        )
        return [(str(r[0]), np.frombuffer(r[1], dtype=np.float32)) for r in rows]

    def embeddings_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids or self.embedding_model is None:
            return {}
        where, params = _scope_sql(scope)
        rows = (
            self.db.reader()
            .execute(
                "SELECT f.id, e.vector FROM fragments f JOIN fragment_embeddings e ON e.seq = f.seq"
                f" WHERE f.id IN ({','.join('?' * len(ids))}) AND e.model = ? AND {where}",
                [*ids, self.embedding_model, *params],
            )
            .fetchall()
        )
        return {str(r[0]): np.frombuffer(r[1], dtype=np.float32) for r in rows}
