"""Seed 004 §4.2 on PostgreSQL (migration 0018, row-level security per agent): the same semantics
as SQLite's (sqlite_reviews.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..errors import NotFound
from ..models import AgentScope, Fragment
from .postgres_db import PostgresDatabase, retried
from .postgres_rows import _COLUMNS, _row_to_fragment
from .postgres_sql import scope_sql
from .protocol import ReviewCard, ReviewTarget

# What the forget queue never lists: what every lifecycle stage keeps (lifecycle.md).
_PROTECTED = "NOT f.is_anchor AND NOT f.pinned AND f.session_id IS NULL AND f.memory_key IS NULL AND f.ttl_tier <> 'permanent'"


def own_sql(scope: AgentScope, alias: str) -> tuple[str, list[Any]]:
    """The rows of the scope's own namespace (every namespace's for the maintenance scope); the
    policy of memory_reviews allows no more, the predicate keeps fragments to the same rows."""
    return ("TRUE", []) if scope.is_maintenance else (f"{alias}.agent_id = %s", [scope.agent_id])


def _card(row: dict[str, Any]) -> ReviewCard:
    return ReviewCard(
        fragment_id=row["fragment_id"],
        agent_id=row["agent_id"],
        due_at=row["due_at"],
        interval_days=int(row["interval_days"]),
        reviews=int(row["reviews"]),
        last_reviewed_at=row["last_reviewed_at"],
        created_at=row["created_at"],
    )


class PostgresReviews:
    """Every statement in a transaction whose row-level security context is the scope's agent."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def review_targets(self, scope: AgentScope, top: int) -> list[ReviewTarget]:
        where, params = scope_sql(scope)
        own, oparams = own_sql(scope, "f")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT agent_id, id, last_used FROM (SELECT f.agent_id, f.id, COALESCE(f.accessed_at, f.created_at) AS last_used,"
                " ROW_NUMBER() OVER (PARTITION BY f.agent_id ORDER BY f.pinned DESC, f.importance * f.utility_score DESC,"
                " f.created_at DESC, f.id) AS rank"
                f" FROM agent_memory.fragments f WHERE {where} AND {own} AND f.session_id IS NULL) ranked"
                " WHERE rank <= %s ORDER BY agent_id, rank",
                [*params, *oparams, top],
            )
            return [ReviewTarget(r["agent_id"], r["id"], r["last_used"]) for r in cur.fetchall()]

    def review_cards(self, scope: AgentScope, due_before: datetime | None, limit: int) -> list[ReviewCard]:
        where, params = scope_sql(scope)
        own, oparams = own_sql(scope, "r")
        due, dparams = ("r.due_at < %s", [due_before]) if due_before is not None else ("TRUE", [])
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT r.* FROM agent_memory.memory_reviews r JOIN agent_memory.fragments f ON f.id = r.fragment_id"
                f" WHERE {where} AND {own} AND {due} ORDER BY r.due_at, r.fragment_id LIMIT %s",
                [*params, *oparams, *dparams, limit],
            )
            return [_card(r) for r in cur.fetchall()]

    @retried
    def put_reviews(self, scope: AgentScope, cards: Sequence[ReviewCard], drop: Sequence[str]) -> None:
        ids = list(dict.fromkeys(c.fragment_id for c in cards))
        own, oparams = own_sql(scope, "f")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT f.id, f.agent_id FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {own}", [ids, *oparams])
            owners: dict[str, str] = {r["id"]: r["agent_id"] for r in cur.fetchall()}
            missing = [i for i in ids if i not in owners]
            if missing:
                raise NotFound(f"fragment {missing[0]!r} not found; no review changed", missing=missing)
            for card in cards:
                cur.execute(
                    "INSERT INTO agent_memory.memory_reviews"
                    " (fragment_id, agent_id, due_at, interval_days, reviews, last_reviewed_at, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (fragment_id) DO UPDATE SET due_at = EXCLUDED.due_at,"
                    " interval_days = EXCLUDED.interval_days, reviews = EXCLUDED.reviews, last_reviewed_at = EXCLUDED.last_reviewed_at",
                    (
                        card.fragment_id,
                        owners[card.fragment_id],
                        card.due_at,
                        card.interval_days,
                        card.reviews,
                        card.last_reviewed_at,
                        card.created_at,
                    ),
                )
            if drop:
                rown, rparams = own_sql(scope, "r")
                cur.execute(f"DELETE FROM agent_memory.memory_reviews r WHERE r.fragment_id = ANY(%s) AND {rown}", [list(drop), *rparams])

    def derived_sources(self, scope: AgentScope, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        own, oparams = own_sql(scope, "f")
        # The deriving memory may be soft-deleted, or another namespace's (the maintenance role
        # reads it): the link row has no policy of its own, the source's row is checked.
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT DISTINCT l.to_id FROM agent_memory.fragment_links l JOIN agent_memory.fragments f ON f.id = l.to_id"
                f" WHERE l.relation_type = 'derived_from' AND l.to_id = ANY(%s) AND {own}",
                [list(ids), *oparams],
            )
            return {r["to_id"] for r in cur.fetchall()}

    def forget_candidates(self, scope: AgentScope, unused_before: datetime, below_utility: float, limit: int) -> list[Fragment]:
        where, params = scope_sql(scope)
        own, oparams = own_sql(scope, "f")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE {where} AND {own} AND {_PROTECTED}"
                " AND f.utility_score < %s AND COALESCE(f.accessed_at, f.created_at) < %s"
                " ORDER BY f.utility_score, COALESCE(f.accessed_at, f.created_at), f.id LIMIT %s",
                [*params, *oparams, below_utility, unused_before, limit],
            )
            return [_row_to_fragment(r) for r in cur.fetchall()]
