"""Seed 004 §4.2 on SQLite (migration 0018): spaced-review cards, the integrated-episode check of
sleep consolidation and the soft-delete candidate queue. The same semantics as PostgreSQL's
(postgres_reviews.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pysqlite3.dbapi2 as sqlite3

from ..errors import NotFound
from ..models import AgentScope, Fragment
from .protocol import ReviewCard, ReviewTarget
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import _FRAGMENT_COLUMNS, _row_to_fragment, _scope_sql, parse_ts, ts

# What the forget queue never lists: what every lifecycle stage keeps (lifecycle.md).
_PROTECTED = "f.is_anchor = 0 AND f.pinned = 0 AND f.session_id IS NULL AND f.memory_key IS NULL AND f.ttl_tier != 'permanent'"


def own_sql(scope: AgentScope, alias: str) -> tuple[str, list[Any]]:
    """The rows of the scope's own namespace (every namespace's for the maintenance scope)."""
    return ("1 = 1", []) if scope.is_maintenance else (f"{alias}.agent_id = ?", [scope.agent_id])


def _marks(items: Sequence[object]) -> str:
    return ",".join("?" * len(items))


def _card(row: sqlite3.Row) -> ReviewCard:
    return ReviewCard(
        fragment_id=row["fragment_id"],
        agent_id=row["agent_id"],
        due_at=parse_ts(row["due_at"]) or datetime.min,
        interval_days=int(row["interval_days"]),
        reviews=int(row["reviews"]),
        last_reviewed_at=parse_ts(row["last_reviewed_at"]),
        created_at=parse_ts(row["created_at"]) or datetime.min,
    )


class SQLiteReviews:
    """Writes in one transaction on the writer (joining the caller's); reads on this thread's reader."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    def review_targets(self, scope: AgentScope, top: int) -> list[ReviewTarget]:
        where, params = _scope_sql(scope, use_index=True)
        own, oparams = own_sql(scope, "f")
        rows = (
            self.db.reader()
            .execute(
                "SELECT agent_id, id, last_used FROM (SELECT f.agent_id, f.id, COALESCE(f.accessed_at, f.created_at) AS last_used,"
                " ROW_NUMBER() OVER (PARTITION BY f.agent_id ORDER BY f.pinned DESC, f.importance * f.utility_score DESC,"
                " f.created_at DESC, f.id) AS rank"
                f" FROM fragments f WHERE {where} AND {own} AND f.session_id IS NULL) WHERE rank <= ? ORDER BY agent_id, rank",
                [*params, *oparams, top],
            )
            .fetchall()
        )
        return [ReviewTarget(r["agent_id"], r["id"], parse_ts(r["last_used"]) or datetime.min) for r in rows]

    def review_cards(self, scope: AgentScope, due_before: datetime | None, limit: int) -> list[ReviewCard]:
        where, params = _scope_sql(scope)
        own, oparams = own_sql(scope, "r")
        due, dparams = ("r.due_at < ?", [ts(due_before)]) if due_before is not None else ("1 = 1", [])
        rows = (
            self.db.reader()
            .execute(
                f"SELECT r.* FROM memory_reviews r JOIN fragments f ON f.id = r.fragment_id WHERE {where} AND {own} AND {due}"
                " ORDER BY r.due_at, r.fragment_id LIMIT ?",
                [*params, *oparams, *dparams, limit],
            )
            .fetchall()
        )
        return [_card(r) for r in rows]

    def put_reviews(self, scope: AgentScope, cards: Sequence[ReviewCard], drop: Sequence[str]) -> None:
        with self.db.tx() as conn:
            ids = list(dict.fromkeys(c.fragment_id for c in cards))
            own, oparams = own_sql(scope, "f")
            found = conn.execute(f"SELECT f.id, f.agent_id FROM fragments f WHERE f.id IN ({_marks(ids)}) AND {own}", [*ids, *oparams])
            owners: dict[str, str] = {r[0]: r[1] for r in found.fetchall()} if ids else {}
            missing = [i for i in ids if i not in owners]
            if missing:
                raise NotFound(f"fragment {missing[0]!r} not found; no review changed", missing=missing)
            for card in cards:
                conn.execute(
                    "INSERT INTO memory_reviews (fragment_id, agent_id, due_at, interval_days, reviews, last_reviewed_at, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(fragment_id) DO UPDATE SET due_at = excluded.due_at,"
                    " interval_days = excluded.interval_days, reviews = excluded.reviews, last_reviewed_at = excluded.last_reviewed_at",
                    (
                        card.fragment_id,
                        owners[card.fragment_id],
                        ts(card.due_at),
                        card.interval_days,
                        card.reviews,
                        ts(card.last_reviewed_at) if card.last_reviewed_at else None,
                        ts(card.created_at),
                    ),
                )
            if drop:
                rown, rparams = own_sql(scope, "memory_reviews")
                conn.execute(f"DELETE FROM memory_reviews WHERE fragment_id IN ({_marks(drop)}) AND {rown}", [*drop, *rparams])

    def derived_sources(self, scope: AgentScope, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        own, oparams = own_sql(scope, "f")
        rows = (
            self.db.reader()
            .execute(
                "SELECT DISTINCT l.to_id FROM fragment_links l JOIN fragments f ON f.id = l.to_id"
                f" WHERE l.relation_type = 'derived_from' AND l.to_id IN ({_marks(ids)}) AND {own}",
                [*ids, *oparams],
            )
            .fetchall()
        )
        return {r[0] for r in rows}

    def forget_candidates(self, scope: AgentScope, unused_before: datetime, below_utility: float, limit: int) -> list[Fragment]:
        where, params = _scope_sql(scope, use_index=True)
        own, oparams = own_sql(scope, "f")
        rows = (
            self.db.reader()
            .execute(
                f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE {where} AND {own} AND {_PROTECTED}"
                " AND f.utility_score < ? AND COALESCE(f.accessed_at, f.created_at) < ?"
                " ORDER BY f.utility_score, COALESCE(f.accessed_at, f.created_at), f.id LIMIT ?",
                [*params, *oparams, below_utility, ts(unused_before), limit],
            )
            .fetchall()
        )
        return [_row_to_fragment(r) for r in rows]
