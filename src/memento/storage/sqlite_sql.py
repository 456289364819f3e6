"""The SQL pieces every SQLite module shares: the stored form of timestamps, the fragment row,
the visibility and write predicates of a scope, and the full-text entries beside each fragment."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pysqlite3.dbapi2 as sqlite3

from ..analysis import index_terms
from ..errors import Forbidden, NotFound
from ..models import DEFAULT_AGENT, AgentScope, Fragment, FragmentType, MemorySystem, PoolWrites, PrivacyScope, TTLTier
from .protocol import SearchFilter
from .sqlfilter import Dialect, count_index_term, filter_sql, live_sql

if TYPE_CHECKING:
    from .sqlite_db import SQLiteDatabase


def ts(value: datetime) -> str:
    """The stored form of a timestamp: UTC ISO-8601 with microseconds (sorts as text)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def parse_ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _json_list(text: str) -> list[Any]:
    """A JSON array column; most rows hold an empty one, which needs no parser."""
    return [] if text == "[]" else json.loads(text)


def _json_object(text: str) -> dict[str, Any]:
    return {} if text == "{}" else json.loads(text)


def _row_to_fragment(row: sqlite3.Row) -> Fragment:
    return Fragment(
        id=row["id"],
        content=row["content"],
        topic=row["topic"],
        type=FragmentType(row["type"]),
        keywords=_json_list(row["keywords"]),
        importance=row["importance"],
        content_hash=row["content_hash"],
        agent_id=row["agent_id"],
        ttl_tier=TTLTier(row["ttl_tier"]),
        created_at=parse_ts(row["created_at"]) or datetime.now(UTC),
        source=row["source"],
        linked_to=_json_list(row["linked_to"]),
        access_count=row["access_count"],
        accessed_at=parse_ts(row["accessed_at"]),
        estimated_tokens=row["estimated_tokens"],
        utility_score=row["utility_score"],
        verified_at=parse_ts(row["verified_at"]),
        is_anchor=bool(row["is_anchor"]),
        session_id=row["session_id"],
        has_embedding=bool(row["has_embedding"]),
        seq=row["seq"],
        confidence=row["confidence"],
        tags=_json_list(row["tags"]),
        context=row["context"],
        metadata=_json_object(row["metadata"]),
        expires_at=parse_ts(row["expires_at"]),
        pinned=bool(row["pinned"]),
        memory_system=MemorySystem(row["memory_system"]),
        privacy_scope=PrivacyScope(row["privacy_scope"]),
        origin_trace=json.loads(row["origin_trace"]) if row["origin_trace"] else None,
        deleted_at=parse_ts(row["deleted_at"]),
        detail=row["detail"],
        memory_key=row["memory_key"],
        client_embedding=row["client_embedding"],
        judged_utility=row["judged_utility"],
    )


_FRAGMENT_COLUMNS = "f.*, EXISTS(SELECT 1 FROM fragment_embeddings e WHERE e.seq = f.seq) AS has_embedding"


def _scope_sql(scope: AgentScope, alias: str = "f", *, use_index: bool = False) -> tuple[str, list[Any]]:
    """The visibility predicate: live rows (not soft-deleted, not expired) of the agents `scope`
    sees. Without use_index the agent column is a filter only (`+col`),
    so lookups by id or seq keep their own index instead of scanning the agent's rows."""
    live = live_sql(alias, "?")
    now = ts(datetime.now(UTC))
    agents = scope.visible_agents()
    if agents is None:
        return live, [now]
    column = f"{alias}.agent_id" if use_index else f"+{alias}.agent_id"
    sql = f"{live} AND {column} IN ({','.join('?' * len(agents))})"
    if len(agents) == 1:
        return sql, [now, *agents]
    # The pool shares only what is meant for others: another namespace's working memory and
    # private rows stay out of sight (models.SHARED_PRIVACY; the PostgreSQL policy says the same).
    shared = f"({alias}.session_id IS NULL AND {alias}.privacy_scope <> 'private')"
    return f"{sql} AND ({alias}.agent_id = ? OR {shared})", [now, *agents, scope.agent_id]


def _write_sql(scope: AgentScope, alias: str = "f") -> str:
    """The rows of the shared pool `scope` may change, as a predicate (MEMENTO_SHARED_POOL)."""
    if scope.is_maintenance or scope.pool_writes is PoolWrites.ALL:
        return "1 = 1"
    pool = f"{alias}.agent_id = '{DEFAULT_AGENT}'"
    if scope.pool_writes is PoolWrites.NONE:
        return f"NOT ({pool})"
    return f"NOT ({pool} AND ({alias}.is_anchor = 1 OR {alias}.session_id IS NOT NULL))"


def _writable(scope: AgentScope, found: Sequence[Fragment]) -> None:
    """Refuse (changing nothing) when `found` holds pool fragments `scope` may not change."""
    refused = [f.id for f in found if not scope.may_change(f)]
    if refused:
        raise Forbidden(scope.pool_refusal(refused))


SQLITE = Dialect(mark="?", any_of=False, tables="", timestamp=ts)


def _filter_sql(filt: SearchFilter, scope: AgentScope, alias: str = "f", db: SQLiteDatabase | None = None) -> tuple[str, list[Any]]:
    """The filter over fragments row `alias`. With `db`, for a statement that may start from the
    rows the filter keeps (a count, a sort of them, an exact vector ranking): a tag few memories
    carry (fewer than sqlfilter.FEW_TAGGED, db.common_tags) is then the set of its memories."""

    def few(tags: Sequence[str]) -> bool:
        assert db is not None
        return db.common_tags.few(tuple(tags), lambda at_most: _tagged(db.reader(), tags, at_most))

    return filter_sql(filt, alias, SQLITE, None if scope.is_maintenance else scope.agent_id, None if db is None else few)


def _tagged(conn: sqlite3.Connection, tags: Sequence[str], at_most: int) -> int:
    """The memories (any agent's, any state) carrying one of `tags`, counted up to `at_most`."""
    marks = ",".join("?" * len(tags))
    inner = f"SELECT 1 FROM fragment_tags WHERE tag IN ({marks}) LIMIT ?"
    return int(conn.execute(f"SELECT COUNT(*) FROM ({inner})", [*tags, at_most]).fetchone()[0])


def _fts_query(terms: Sequence[str]) -> str:
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _count(db: SQLiteDatabase, scope: AgentScope, filt: SearchFilter, at_most: int | None = None) -> int:
    """The rows of `scope` that pass `filt`, counted through the fragments' own indexes (up to
    `at_most`: only which side of it)."""
    where, params = _scope_sql(scope, use_index=True)
    fwhere, fparams = _filter_sql(filt, scope, db=db)
    rows = f"FROM fragments f WHERE {where} AND {fwhere}{count_index_term(filt, 'f', SQLITE)}"
    if at_most is None:
        return int(db.reader().execute(f"SELECT COUNT(*) {rows}", [*params, *fparams]).fetchone()[0])
    return int(db.reader().execute(f"SELECT COUNT(*) FROM (SELECT 1 {rows} LIMIT ?)", [*params, *fparams, at_most]).fetchone()[0])


def _visible(conn: sqlite3.Connection, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
    if not ids:
        return []
    where, params = _scope_sql(scope)
    rows = conn.execute(
        f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.id IN ({','.join('?' * len(ids))}) AND {where}", [*ids, *params]
    ).fetchall()
    by_id = {r["id"]: _row_to_fragment(r) for r in rows}
    return [by_id[i] for i in ids if i in by_id]


def _require(conn: sqlite3.Connection, scope: AgentScope, fragment_id: str) -> Fragment:
    found = _visible(conn, scope, [fragment_id])
    if not found:
        raise NotFound(f"fragment {fragment_id!r} not found", missing=(fragment_id,))
    return found[0]


def fts_terms(content: str, keywords: Sequence[str], topic: str) -> tuple[str, str]:
    """A fragment's two FTS5 columns: the analyser's terms of its content and keywords, and of its topic."""
    return " ".join(index_terms(content + " " + " ".join(keywords))), " ".join(index_terms(topic))


def _index_text(conn: sqlite3.Connection, seq: int, content: str, keywords: list[str], topic: str) -> None:
    conn.execute("INSERT INTO fragments_fts (rowid, terms, topic) VALUES (?, ?, ?)", (seq, *fts_terms(content, keywords, topic)))
    conn.executemany("INSERT OR IGNORE INTO fragment_keywords (keyword, seq) VALUES (?, ?)", [(k, seq) for k in keywords])


def _unindex_text(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM fragments_fts WHERE rowid = ?", (seq,))
    conn.execute("DELETE FROM fragment_keywords WHERE seq = ?", (seq,))
