"""The fragment row on PostgreSQL: the selected columns, the conversion to a Fragment, and the
look-ups by id that writes and reads make inside their transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import NotFound
from ..models import AgentScope, Fragment, FragmentType, MemorySystem, PrivacyScope, TTLTier
from .postgres_db import Cursor
from .postgres_sql import scope_sql

_COLUMNS = (
    "f.id, f.seq, f.content, f.topic, f.keywords, f.type, f.importance, f.content_hash, f.source,"
    " f.linked_to, f.agent_id, f.access_count, f.accessed_at, f.created_at, f.ttl_tier,"
    " f.estimated_tokens, f.utility_score, f.verified_at, f.is_anchor, f.session_id,"
    " f.confidence, f.tags, f.context, f.metadata, f.expires_at, f.pinned, f.memory_system, f.privacy_scope,"
    " f.origin_trace, f.deleted_at, f.detail, f.memory_key, f.client_embedding, f.judged_utility, (f.embedding IS NOT NULL) AS has_embedding"
)
_SEARCH = "CAST(%s AS tsvector)"


def _row_to_fragment(r: dict[str, Any]) -> Fragment:
    return Fragment(
        id=r["id"],
        content=r["content"],
        topic=r["topic"],
        type=FragmentType(r["type"]),
        keywords=list(r["keywords"]),
        importance=r["importance"],
        content_hash=r["content_hash"],
        agent_id=r["agent_id"],
        ttl_tier=TTLTier(r["ttl_tier"]),
        created_at=r["created_at"],
        source=r["source"],
        linked_to=list(r["linked_to"]),
        access_count=r["access_count"],
        accessed_at=r["accessed_at"],
        estimated_tokens=r["estimated_tokens"],
        utility_score=r["utility_score"],
        verified_at=r["verified_at"],
        is_anchor=r["is_anchor"],
        session_id=r["session_id"],
        has_embedding=r["has_embedding"],
        seq=r["seq"],
        confidence=r["confidence"],
        tags=list(r["tags"]),
        context=r["context"],
        metadata=dict(r["metadata"]),
        expires_at=r["expires_at"],
        pinned=r["pinned"],
        memory_system=MemorySystem(r["memory_system"]),
        privacy_scope=PrivacyScope(r["privacy_scope"]),
        origin_trace=r["origin_trace"],
        deleted_at=r["deleted_at"],
        detail=r["detail"],
        memory_key=r["memory_key"],
        client_embedding=None if r["client_embedding"] is None else bytes(r["client_embedding"]),
        judged_utility=r["judged_utility"],
    )


def _visible(cur: Cursor, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
    if not ids:
        return []
    where, params = scope_sql(scope)
    cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {where}", [list(ids), *params])
    by_id = {r["id"]: _row_to_fragment(r) for r in cur.fetchall()}
    return [by_id[i] for i in ids if i in by_id]


def _require(cur: Cursor, scope: AgentScope, fragment_id: str) -> Fragment:
    found = _visible(cur, scope, [fragment_id])
    if not found:
        raise NotFound(f"fragment {fragment_id!r} not found", missing=(fragment_id,))
    return found[0]


def _written(cur: Cursor, fragment_id: str) -> Fragment:
    """A row this transaction has just written (it may already be past its expiry)."""
    cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.id = %s", (fragment_id,))
    row = cur.fetchone()
    if row is None:
        raise NotFound(f"fragment {fragment_id!r} not found", missing=(fragment_id,))
    return _row_to_fragment(row)
