"""The scale-out backend: PostgreSQL with pgvector, schema `agent_memory` (000 §3).

Isolation. Every unit of work is one transaction that begins with
`set_config('app.current_agent_id', <agent>, true)` — the `SET LOCAL` of 000 §3.6 — so the
row-level security policy on `fragments` decides visibility per request, not per connection.
The application connects as a role that owns nothing and has no BYPASSRLS, so the policy
really binds it. Queries also carry the same scope predicate as the SQLite backend: results
stay right even if someone runs the store as a superuser (which RLS never binds). Under the
policy only leakproof conditions (text equality, not `@@` or `&&`) can use an index, so the
full-text and keyword tiers read trigger-maintained lookup tables with the same policy
(migration 0002) instead of the GIN indexes on `fragments`.

Migrations: postgres_schema.py; the statements of the retrieval tiers: postgres_sql.py.

Connections come from a psycopg_pool pool sized by DB_MAX_CONNECTIONS, with DB_IDLE_TIMEOUT_MS,
DB_CONN_TIMEOUT_MS and DB_QUERY_TIMEOUT (the statement timeout).
"""

from __future__ import annotations

import functools
import logging
import selectors
import threading
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Callable, Iterator, ParamSpec, Sequence, TypeVar

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import Conflict, Forbidden, InvalidArgument, NotFound, Unavailable
from ..models import (
    DEFAULT_AGENT, AgentScope, Fragment, FragmentType, Link, MemorySystem, PoolWrites, PrivacyScope, RelationType, TTLTier,
    memory_system_for, session_refusal,
)
from . import terms as terms_policy
from .access import AccessBuffer, Pending
from .protocol import (
    BULK_COLUMNS, BULK_KEYS, BULK_TABLES, FRAGMENT_DEFAULTS, RECORD_COLUMNS, FragmentChanges, Hit, NewFragment,
    RankFeatures, SearchFilter, changed_record, new_record,
)
from .postgres_sql import df_sql, filter_sql, keyword_sql, refuse_unwritable, scope_sql, search_vector, text_sql

log = logging.getLogger(__name__)

_thread = threading.local()  # .depth: transactions open on this thread (nested ones join the outermost)
P = ParamSpec("P")
R = TypeVar("R")
WRITE_ATTEMPTS = 3


def retried(method: Callable[P, R]) -> Callable[P, R]:
    """Run a write again when PostgreSQL rolled its transaction back to break a deadlock or a
    serialization conflict. The whole transaction was undone, so running it again is safe; two
    writers locking rows in opposite orders (a forget cleaning its neighbours' links, another
    forget or amend) then both succeed instead of one failing with "deadlock detected"."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if getattr(_thread, "depth", 0):  # part of a larger transaction: only its owner may rerun it
            return method(*args, **kwargs)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return method(*args, **kwargs)
            except Unavailable as exc:
                sqlstate = getattr(exc.__cause__, "sqlstate", None) or ""
                if attempt == WRITE_ATTEMPTS or not sqlstate.startswith("40"):  # class 40: transaction rollback
                    raise
                log.info("write rolled back by PostgreSQL (SQLSTATE %s); running it again", sqlstate)
        raise AssertionError("unreachable")

    return run

Cursor = psycopg.Cursor[dict[str, Any]]

MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
SYSTEM = "system"

_COLUMNS = (
    "f.id, f.seq, f.content, f.topic, f.keywords, f.type, f.importance, f.content_hash, f.source,"
    " f.linked_to, f.agent_id, f.access_count, f.accessed_at, f.created_at, f.ttl_tier,"
    " f.estimated_tokens, f.utility_score, f.verified_at, f.is_anchor, f.session_id,"
    " f.confidence, f.tags, f.context, f.metadata, f.expires_at, f.pinned, f.memory_system, f.privacy_scope,"
    " f.origin_trace, f.deleted_at, (f.embedding IS NOT NULL) AS has_embedding"
)
_SEARCH = "CAST(%s AS tsvector)"


# ---------------------------------------------------------------- SQL pieces


def _row_to_fragment(r: dict[str, Any]) -> Fragment:
    return Fragment(
        id=r["id"], content=r["content"], topic=r["topic"], type=FragmentType(r["type"]),
        keywords=list(r["keywords"]), importance=r["importance"], content_hash=r["content_hash"],
        agent_id=r["agent_id"], ttl_tier=TTLTier(r["ttl_tier"]), created_at=r["created_at"],
        source=r["source"], linked_to=list(r["linked_to"]), access_count=r["access_count"],
        accessed_at=r["accessed_at"], estimated_tokens=r["estimated_tokens"],
        utility_score=r["utility_score"], verified_at=r["verified_at"], is_anchor=r["is_anchor"],
        session_id=r["session_id"], has_embedding=r["has_embedding"], seq=r["seq"],
        confidence=r["confidence"], tags=list(r["tags"]), context=r["context"], metadata=dict(r["metadata"]),
        expires_at=r["expires_at"], pinned=r["pinned"], memory_system=MemorySystem(r["memory_system"]),
        privacy_scope=PrivacyScope(r["privacy_scope"]), origin_trace=r["origin_trace"], deleted_at=r["deleted_at"],
    )


class PostgresStore:
    """The Store protocol on PostgreSQL (pgvector, GIN, tsvector, row-level security)."""

    def __init__(
        self,
        dsn: str,
        *,
        embedding_model: str | None,
        dimensions: int | None,
        max_connections: int = 20,
        idle_timeout_ms: int = 30_000,
        conn_timeout_ms: int = 10_000,
        query_timeout_ms: int = 30_000,
        ef_search: int = 512,
    ) -> None:
        self.embedding_model = embedding_model if dimensions else None
        self.dimensions = dimensions
        self.ef_search = max(1, min(ef_search, MAX_EF_SEARCH))
        self._sizes: terms_policy.CountCache[int] = terms_policy.CountCache()
        self._access = AccessBuffer(self._write_access)
        self._closed = False
        self._local = threading.local()  # .open: this thread's transaction (cursor, agent, pool), if any
        self._pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
            dsn,
            min_size=1,
            max_size=max_connections,
            max_idle=idle_timeout_ms / 1000,
            timeout=conn_timeout_ms / 1000,
            # A background reconnection backs off exponentially until it gives up (psycopg_pool's
            # default: 5 minutes, so recovery could lag an outage by as long as it lasted). Giving
            # up early leaves reconnecting to the next request, which tries at once.
            reconnect_timeout=conn_timeout_ms / 1000,
            kwargs={
                "options": f"-c statement_timeout={int(query_timeout_ms)} -c timezone=UTC",
                "connect_timeout": max(1, conn_timeout_ms // 1000),
                "row_factory": dict_row,
            },
            configure=self._configure,
            open=False,
            name="memento",
        )
        try:
            self._pool.open(wait=True, timeout=conn_timeout_ms / 1000)
        except PoolTimeout as exc:
            self._pool.close()
            raise Unavailable(f"PostgreSQL is not reachable: {exc}") from exc

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        register_vector(conn)
        conn.commit()

    @contextmanager
    def _tx(self, agent: str, pool: PoolWrites = PoolWrites.ALL) -> Iterator[Cursor]:
        """One transaction whose row-level security context is `agent`, allowed to change the
        shared pool as far as `pool` says (the restrictive policies of migration 0003). Inside
        another one on this thread it joins it (with its own context until it ends): the
        outermost commits or rolls back everything."""
        outer: tuple[Cursor, str, PoolWrites] | None = getattr(self._local, "open", None)
        if outer is not None:
            cur, outer_agent, outer_pool = outer
            self._set_context(cur, agent, pool)
            self._local.open = (cur, agent, pool)
            try:
                yield cur
            finally:
                self._local.open = outer
            self._set_context(cur, outer_agent, outer_pool)
            return
        try:
            conn = self._checkout()
            _thread.depth = getattr(_thread, "depth", 0) + 1
            try:
                with conn, conn.cursor() as cur:  # commits, or rolls back on an exception
                    self._set_context(cur, agent, pool)
                    self._local.open = (cur, agent, pool)
                    try:
                        yield cur
                    finally:
                        self._local.open = None
            finally:
                _thread.depth -= 1
                self._pool.putconn(conn)  # a broken connection is discarded and replaced
        except PoolTimeout as exc:
            raise Unavailable(f"the database is unavailable: no PostgreSQL connection within {self._pool.timeout:g}s") from exc
        except psycopg.OperationalError as exc:
            reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]  # libpq adds hint lines
            raise Unavailable(f"the database is unavailable: {reason}") from exc

    @staticmethod
    def _set_context(cur: Cursor, agent: str, pool: PoolWrites) -> None:
        cur.execute(
            "SELECT set_config('app.current_agent_id', %s, true), set_config('app.pool_writes', %s, true)",
            (agent, pool.value),
        )

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction around several store calls (a unit of work): all or nothing. The
        calls inside set their own row-level security context, as they would alone."""
        with self._tx(SYSTEM):
            yield

    def _checkout(self) -> psycopg.Connection[dict[str, Any]]:
        """A pooled connection the server has not closed. One it closed while idle means
        PostgreSQL restarted: every connection from before is replaced at once (the pool's
        drain), so a restart between requests fails none of them."""
        conn = self._pool.getconn()
        if not self._closed_by_server(conn):
            return conn
        log.warning("PostgreSQL closed the pooled connections (restarted?); reconnecting")
        self._pool.putconn(conn)
        self._pool.drain()
        return self._pool.getconn()

    @staticmethod
    def _closed_by_server(conn: psycopg.Connection[Any]) -> bool:
        """Whether the server has closed this idle connection. An idle connection has nothing
        to read, so only a readable socket costs a round trip to find out."""
        if conn.closed or conn.broken:
            return True
        with selectors.DefaultSelector() as selector:
            selector.register(conn.fileno(), selectors.EVENT_READ)
            if not selector.select(0):
                return False
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            return True
        return False

    @staticmethod
    def _as(cur: Cursor, agent: str) -> None:
        cur.execute("SELECT set_config('app.current_agent_id', %s, true)", (agent,))

    def ping(self) -> None:
        """One round trip to the server (health checks); raises Unavailable when it fails."""
        with self._tx(SYSTEM) as cur:
            cur.execute("SELECT 1")

    def size_summary(self) -> dict[str, Any]:
        """Fragments per TTL tier (working memory apart) and the number of agents, for metrics."""
        with self._tx(SYSTEM) as cur:
            cur.execute(
                "SELECT ttl_tier, session_id IS NOT NULL AS working, COUNT(*) AS n FROM agent_memory.fragments GROUP BY 1, 2"
            )
            by_tier = {t.value: 0 for t in TTLTier}
            working = 0
            for r in cur.fetchall():
                if r["working"]:
                    working += int(r["n"])
                else:
                    by_tier[str(r["ttl_tier"])] = by_tier.get(str(r["ttl_tier"]), 0) + int(r["n"])
            cur.execute("SELECT COUNT(DISTINCT agent_id) AS n FROM agent_memory.fragments")
            row = cur.fetchone()
            return {"by_tier": by_tier, "working_memory": working, "agents": int(row["n"]) if row else 0}

    def migrations(self) -> list[str]:
        with self._tx(SYSTEM) as cur:
            cur.execute("SELECT name FROM agent_memory.schema_migrations ORDER BY name")
            return [r["name"] for r in cur.fetchall()]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._access.close()
        except Unavailable as exc:  # shutting down during an outage: only access counts are lost
            log.warning("access statistics not saved: %s", exc)
        finally:
            self._pool.close()

    # ------------------------------------------------------------ fragments

    def _visible(self, cur: Cursor, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
        if not ids:
            return []
        where, params = scope_sql(scope)
        cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {where}", [list(ids), *params])
        by_id = {r["id"]: _row_to_fragment(r) for r in cur.fetchall()}
        return [by_id[i] for i in ids if i in by_id]

    def _require(self, cur: Cursor, scope: AgentScope, fragment_id: str) -> Fragment:
        found = self._visible(cur, scope, [fragment_id])
        if not found:
            raise NotFound(f"fragment {fragment_id!r} not found")
        return found[0]

    @staticmethod
    def _written(cur: Cursor, fragment_id: str) -> Fragment:
        """A row this transaction has just written (it may already be past its expiry)."""
        cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.id = %s", (fragment_id,))
        row = cur.fetchone()
        if row is None:
            raise NotFound(f"fragment {fragment_id!r} not found")
        return _row_to_fragment(row)

    @staticmethod
    def _same_content(cur: Cursor, agent: str, digest: str, session: str | None) -> Fragment | None:
        if session is None:
            cond, params = "f.session_id IS NULL", [agent, digest]
        else:
            cond, params = "f.session_id = %s", [agent, digest, session]
        cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.agent_id = %s AND f.content_hash = %s AND {cond}", params)
        row = cur.fetchone()
        return _row_to_fragment(row) if row else None

    def _embedding_value(self, vector: np.ndarray | None) -> tuple[np.ndarray | None, str | None]:
        if vector is None or self.embedding_model is None:
            return None, None
        return np.ascontiguousarray(vector, dtype=np.float32), self.embedding_model

    def _may_insert(self, cur: Cursor, scope: AgentScope, new: NewFragment) -> None:
        """The pool rule and session ownership, checked in the inserting transaction."""
        if new.agent_id == DEFAULT_AGENT and not scope.may_write_pool(anchored=new.draft.is_anchor, working=new.session_id is not None):
            raise Forbidden(scope.pool_refusal([new.draft.id]))
        if new.session_id is None or new.own_session:
            return
        # One claimant of a session id at a time (held to commit), then a look across every
        # namespace as the system, back to the caller's context.
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 17))", (new.session_id,))
        self._as(cur, SYSTEM)
        cur.execute(
            "SELECT 1 FROM agent_memory.fragments WHERE session_id = %s AND agent_id <> %s LIMIT 1",
            (new.session_id, new.agent_id),
        )
        taken = cur.fetchone() is not None
        self._as(cur, scope.agent_id)
        if taken:
            raise Forbidden(session_refusal(new.session_id))

    def session_owners(self, session_id: str) -> list[str]:
        """The namespaces whose working memory carries `session_id` (across every agent)."""
        with self._tx(SYSTEM) as cur:
            cur.execute(
                "SELECT DISTINCT agent_id FROM agent_memory.fragments WHERE session_id = %s ORDER BY agent_id", (session_id,)
            )
            return [r["agent_id"] for r in cur.fetchall()]

    def _insert(self, cur: Cursor, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]:
        d = new.draft
        self._may_insert(cur, scope, new)
        existing = self._same_content(cur, new.agent_id, d.content_hash, new.session_id)
        if existing is not None and existing.deleted_at is None:
            return existing, False
        if existing is not None:  # remembering soft-forgotten content again brings it back
            cur.execute("UPDATE agent_memory.fragments SET deleted_at = NULL WHERE id = %s", (existing.id,))
            return self._require(cur, scope, existing.id), True
        targets = self._visible(cur, scope, list(dict.fromkeys(new.linked_to)))
        missing = set(new.linked_to) - {t.id for t in targets}
        if missing:
            raise NotFound(f"linkedTo fragment(s) not found: {', '.join(sorted(missing))}")
        vector, model = self._embedding_value(new.embedding)
        cur.execute(
            "INSERT INTO agent_memory.fragments (id, content, topic, keywords, type, importance, content_hash, source,"
            " linked_to, agent_id, created_at, ttl_tier, estimated_tokens, verified_at, is_anchor, session_id,"
            f" search, embedding, embedding_model, {', '.join(RECORD_COLUMNS)}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
            f" %s, %s, %s, %s, %s, %s, %s, %s, {_SEARCH}, %s, %s, {', '.join(['%s'] * len(RECORD_COLUMNS))})"
            " ON CONFLICT DO NOTHING RETURNING id",
            (
                d.id, d.content, d.topic, list(d.keywords), d.type.value, d.importance, d.content_hash, d.source,
                [t.id for t in targets], new.agent_id, d.created_at, d.ttl_tier.value, d.estimated_tokens,
                d.created_at, d.is_anchor, new.session_id, search_vector(d.content, d.keywords, d.topic), vector, model,
                *(_pg_value(n, v) for n, v in new_record(new).items()),
            ),
        )
        if cur.fetchone() is None:  # a concurrent writer stored the same content first
            existing = self._same_content(cur, new.agent_id, d.content_hash, new.session_id)
            if existing is None:
                raise Conflict(f"fragment id {d.id} is already taken")
            return existing, False
        for target in targets:
            cur.execute(
                "INSERT INTO agent_memory.fragment_links (from_id, to_id, relation_type, created_at)"
                " VALUES (%s, %s, 'related', %s) ON CONFLICT DO NOTHING",
                (d.id, target.id, d.created_at),
            )
        return self._written(cur, d.id), True

    @retried
    def insert(self, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]:
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            return self._insert(cur, scope, new)

    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            return self._visible(cur, scope, list(ids))

    def _update(self, cur: Cursor, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime) -> Fragment:
        old = self._require(cur, scope, fragment_id)
        refuse_unwritable(scope, [old])
        if changes.is_anchor and old.agent_id == DEFAULT_AGENT and not scope.may_write_pool(anchored=True):
            raise Forbidden(scope.pool_refusal([old.id]))
        cur.execute(
            "INSERT INTO agent_memory.fragment_versions (fragment_id, content, topic, keywords, type, importance, amended_at, amended_by)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (old.id, old.content, old.topic, old.keywords, old.type.value, old.importance, now, amended_by),
        )
        content = changes.content if changes.content is not None else old.content
        content_hash = changes.content_hash or old.content_hash
        if content_hash != old.content_hash:
            clash = self._same_content(cur, old.agent_id, content_hash, old.session_id)
            if clash is not None and clash.id != old.id:
                raise Conflict(f"fragment {clash.id} already holds this content")
        keywords = changes.keywords if changes.keywords is not None else old.keywords
        topic = changes.topic if changes.topic is not None else old.topic
        assignments = (
            "content = %s, content_hash = %s, estimated_tokens = %s, topic = %s, keywords = %s, type = %s,"
            f" importance = %s, ttl_tier = %s, is_anchor = %s, search = {_SEARCH}"
        )
        params: list[Any] = [
            content, content_hash,
            changes.estimated_tokens if changes.estimated_tokens is not None else old.estimated_tokens,
            topic, keywords, (changes.type or old.type).value,
            changes.importance if changes.importance is not None else old.importance,
            (changes.ttl_tier or old.ttl_tier).value,
            changes.is_anchor if changes.is_anchor is not None else old.is_anchor,
            search_vector(content, keywords, topic),
        ]
        for name, value in changed_record(old, changes).items():
            assignments += f", {name} = %s"
            params.append(_pg_value(name, value))
        if changes.embedding is not None and self.embedding_model:
            assignments += ", embedding = %s, embedding_model = %s"
            params.extend(self._embedding_value(changes.embedding))
        elif changes.clear_embedding:
            assignments += ", embedding = NULL, embedding_model = NULL"
        try:
            cur.execute(f"UPDATE agent_memory.fragments SET {assignments} WHERE id = %s", [*params, old.id])
        except psycopg.errors.UniqueViolation as exc:
            raise Conflict("another fragment already holds this content") from exc
        return self._written(cur, old.id)

    @retried
    def update(self, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime) -> Fragment:
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            return self._update(cur, scope, fragment_id, changes, amended_by, now)

    @retried
    def supersede(self, scope: AgentScope, old_id: str, new: NewFragment, importance_factor: float, now: datetime) -> tuple[Fragment, bool]:
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            old = self._require(cur, scope, old_id)
            fragment, created = self._insert(cur, scope, new)
            if fragment.id == old.id:
                raise Conflict("the superseding content is identical to the original")
            self._add_link(cur, scope, old.id, fragment.id, RelationType.SUPERSEDED_BY, now)
            self._update(cur, scope, old.id, FragmentChanges(importance=round(old.importance * importance_factor, 4)), new.agent_id, now)
        return fragment, created

    def find_by_topic(self, scope: AgentScope, topic: str) -> list[Fragment]:
        return self._select(scope, SearchFilter(topic=topic), "f.seq", None)

    def _delete(self, cur: Cursor, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        found = self._visible(cur, scope, list(ids))
        if not found:
            return []
        refuse_unwritable(scope, found)
        gone = [f.id for f in found]
        cur.execute("DELETE FROM agent_memory.fragments f WHERE f.id = ANY(%s)", (gone,))
        # Other agents' fragments may point at the deleted ones: clean their arrays as the
        # system, then return to the caller's context.
        self._as(cur, SYSTEM)
        cur.execute(
            "UPDATE agent_memory.fragments f SET linked_to = COALESCE((SELECT array_agg(u.x ORDER BY u.o)"
            " FROM unnest(f.linked_to) WITH ORDINALITY AS u(x, o) WHERE u.x <> ALL(%s)), '{}')"
            " WHERE f.linked_to && %s",
            (gone, gone),
        )
        self._as(cur, scope.agent_id)
        return gone

    @retried
    def delete(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            return self._delete(cur, scope, ids)

    @retried
    def soft_delete(self, scope: AgentScope, ids: Sequence[str], now: datetime) -> list[str]:
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            found = self._visible(cur, scope, list(ids))
            refuse_unwritable(scope, found)
            gone = [f.id for f in found]
            if gone:
                cur.execute("UPDATE agent_memory.fragments SET deleted_at = %s WHERE id = ANY(%s)", (now, gone))
            return gone

    @retried
    def restore(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        where, params = scope_sql(scope)
        where = where.replace("f.deleted_at IS NULL", "f.deleted_at IS NOT NULL", 1)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {where}", [list(ids), *params])
            found = [_row_to_fragment(r) for r in cur.fetchall()]
            refuse_unwritable(scope, found)
            back = [f.id for f in found]
            if back:
                cur.execute("UPDATE agent_memory.fragments SET deleted_at = NULL WHERE id = ANY(%s)", (back,))
            return back

    def list_fragments(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]:
        """Anchors first, then by importance, newest first among equals."""
        return self._select(scope, filt, "f.is_anchor DESC, f.importance DESC, f.created_at DESC", limit)

    def recent(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]:
        """Newest first."""
        return self._select(scope, filt, "f.created_at DESC", limit)

    def _select(self, scope: AgentScope, filt: SearchFilter, order: str, limit: int | None, extra: str = "", extra_params: Sequence[Any] = ()) -> list[Fragment]:
        where, params = scope_sql(scope)
        fwhere, fparams = filter_sql(filt)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE {where} AND {fwhere} {extra} ORDER BY {order} LIMIT %s",
                [*params, *fparams, *extra_params, limit],
            )
            return [_row_to_fragment(r) for r in cur.fetchall()]

    def page(self, scope: AgentScope, filt: SearchFilter, before_seq: int | None, limit: int) -> list[Fragment]:
        """Newest first by insertion order, strictly before `before_seq` (a stable keyset page)."""
        if before_seq is None:
            return self._select(scope, filt, "f.seq DESC", limit)
        return self._select(scope, filt, "f.seq DESC", limit, "AND f.seq < %s", [before_seq])

    def topics(self, scope: AgentScope, prefix: str, limit: int) -> list[tuple[str, int]]:
        """Topics of permanent fragments starting with `prefix`, with their fragment counts."""
        where, params = scope_sql(scope)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT f.topic, COUNT(*) AS n FROM agent_memory.fragments f WHERE {where} AND f.session_id IS NULL"
                " AND starts_with(f.topic, %s) GROUP BY f.topic ORDER BY f.topic COLLATE \"C\" LIMIT %s",
                [*params, prefix, limit],
            )
            return [(r["topic"], int(r["n"])) for r in cur.fetchall()]

    def ids_with_prefix(self, scope: AgentScope, prefix: str, limit: int) -> list[str]:
        """Visible fragment ids (permanent or working memory) starting with `prefix`."""
        where, params = scope_sql(scope)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT f.id FROM agent_memory.fragments f WHERE {where} AND starts_with(f.id, %s)"
                " ORDER BY f.id COLLATE \"C\" LIMIT %s",
                [*params, prefix, limit],
            )
            return [r["id"] for r in cur.fetchall()]

    def rank_features(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, RankFeatures]:
        if not ids:
            return {}
        where, params = scope_sql(scope)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT f.id, f.importance, f.created_at, f.accessed_at FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {where}",
                [list(ids), *params],
            )
            return {r["id"]: RankFeatures(r["importance"], r["created_at"], r["accessed_at"]) for r in cur.fetchall()}

    def count(self, scope: AgentScope, filt: SearchFilter) -> int:
        where, params = scope_sql(scope)
        fwhere, fparams = filter_sql(filt)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT COUNT(*) AS n FROM agent_memory.fragments f WHERE {where} AND {fwhere}", [*params, *fparams])
            row = cur.fetchone()
            return int(row["n"]) if row else 0

    @retried
    def expunge_session(self, session_id: str, agent_id: str) -> int:
        """Delete the working memory `agent_id` keeps under `session_id` (never another's)."""
        with self._tx(SYSTEM) as cur:
            cur.execute("SELECT id FROM agent_memory.fragments WHERE session_id = %s AND agent_id = %s", (session_id, agent_id))
            ids = [r["id"] for r in cur.fetchall()]
            return len(self._delete(cur, AgentScope(SYSTEM), ids))

    # ------------------------------------------------------------ links

    def _add_link(self, cur: Cursor, scope: AgentScope, from_id: str, to_id: str, relation: RelationType, now: datetime) -> bool:
        if from_id == to_id:
            raise InvalidArgument("a fragment cannot link to itself")
        source = self._require(cur, scope, from_id)
        refuse_unwritable(scope, [source])
        self._require(cur, scope, to_id)
        cur.execute(
            "INSERT INTO agent_memory.fragment_links (from_id, to_id, relation_type, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (from_id, to_id) DO UPDATE SET relation_type = excluded.relation_type",
            (from_id, to_id, relation.value, now),
        )
        changed = cur.rowcount > 0
        if to_id not in source.linked_to:
            cur.execute("UPDATE agent_memory.fragments SET linked_to = array_append(linked_to, %s) WHERE id = %s", (to_id, from_id))
        return changed

    @retried
    def add_link(self, scope: AgentScope, from_id: str, to_id: str, relation: RelationType, now: datetime) -> bool:
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            return self._add_link(cur, scope, from_id, to_id, relation, now)

    def neighbours(self, scope: AgentScope, ids: Sequence[str], relations: Sequence[RelationType], limit: int) -> list[tuple[Link, Fragment]]:
        if not ids or not relations or limit <= 0:
            return []
        where, params = scope_sql(scope)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT l.from_id AS l_from, l.to_id AS l_to, l.relation_type AS l_rel, l.created_at AS l_created,"
                f" {_COLUMNS} FROM agent_memory.fragment_links l JOIN agent_memory.fragments f"
                " ON (f.id = l.to_id AND l.from_id = ANY(%s)) OR (f.id = l.from_id AND l.to_id = ANY(%s))"
                f" WHERE l.relation_type = ANY(%s) AND {where} ORDER BY l.id LIMIT %s",
                [list(ids), list(ids), [r.value for r in relations], *params, limit],
            )
            rows = cur.fetchall()
        return [
            (Link(r["l_from"], r["l_to"], RelationType(r["l_rel"]), r["l_created"]), _row_to_fragment(r)) for r in rows
        ]

    def versions(self, scope: AgentScope, fragment_id: str) -> list[dict[str, object]]:
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            self._require(cur, scope, fragment_id)
            cur.execute(
                "SELECT content, topic, keywords, type, importance, amended_at, amended_by FROM agent_memory.fragment_versions"
                " WHERE fragment_id = %s ORDER BY id",
                (fragment_id,),
            )
            rows = cur.fetchall()
        return [{**r, "keywords": list(r["keywords"]), "amended_at": r["amended_at"].isoformat()} for r in rows]

    # ------------------------------------------------------------ retrieval tiers

    def keyword_search(self, scope: AgentScope, keywords: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        """Fragments holding any of `keywords`: most matched first, then by importance, newest."""
        if not keywords:
            return []
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(*keyword_sql(scope, keywords, filt, limit))
            return [Hit(r["id"], float(r["matched"])) for r in cur.fetchall()]

    def _selective_terms(self, cur: Cursor, scope: AgentScope, terms: list[str]) -> list[str]:
        """The common-term policy (storage/terms.py) with counts taken within `scope`."""

        def capped(words: Sequence[str], common: int) -> dict[str, int]:
            cur.execute(*df_sql(scope, words, common))
            return {r["term"]: int(r["n"]) for r in cur.fetchall()}

        def exact(words: Sequence[str]) -> dict[str, int]:
            where, params = scope_sql(scope, "t")
            cur.execute(
                f"SELECT t.term, COUNT(*) AS n FROM agent_memory.fragment_terms t WHERE t.term = ANY(%s) AND {where} GROUP BY t.term",
                [list(words), *params],
            )
            return {r["term"]: int(r["n"]) for r in cur.fetchall()}

        return terms_policy.choose(terms, self._scope_size(cur, scope), capped, exact)

    def _scope_size(self, cur: Cursor, scope: AgentScope) -> int:
        """Live fragments visible to `scope` (cached for a few seconds: the policy needs magnitudes)."""

        def count() -> int:
            where, params = scope_sql(scope)
            cur.execute(f"SELECT COUNT(*) AS n FROM agent_memory.fragments f WHERE {where}", params)
            row = cur.fetchone()
            return int(row["n"]) if row else 0

        return self._sizes.get(scope.visible_agents(), count)

    def text_search(self, scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        """The query's selective terms OR-ed, ranked by ts_rank (see text_sql)."""
        if not terms:
            return []
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            wanted = self._selective_terms(cur, scope, list(dict.fromkeys(terms)))
            if not wanted:
                return []
            cur.execute(*text_sql(scope, wanted, filt, limit))
            return [Hit(r["id"], float(r["rank"])) for r in cur.fetchall()]

    def vector_search(self, scope: AgentScope, vector: np.ndarray, filt: SearchFilter, limit: int) -> list[Hit]:
        if self.embedding_model is None:
            return []
        where, params = scope_sql(scope)
        fwhere, fparams = filter_sql(filt)
        query = np.ascontiguousarray(vector, dtype=np.float32)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            # Iterative scans (pgvector 0.8) keep walking the HNSW graph until enough rows pass
            # the filters; relaxed order is re-sorted below.
            # For an unfiltered search the planner prices the HNSW scan of a small store (~10k
            # rows) above an exact scan + sort, underpricing the distances on out-of-line
            # (TOASTed) vectors: 30 ms instead of 2 at 10k. Sorting is then ruled out, so the
            # ordered HNSW scan wins (ef_search >= the store size keeps small stores exact).
            # With a topic/type/session filter the planner keeps its choice: an exact scan of
            # the few matching rows beats walking the graph for them.
            broad = not (filt.topic or filt.type or filt.types or filt.only_session)
            cur.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('enable_sort', %s, true)",
                (str(self.ef_search), "off" if broad else "on"),
            )
            cur.execute(
                "SELECT f.id, 1 - (f.embedding <=> %s) AS sim FROM agent_memory.fragments f"
                f" WHERE f.embedding IS NOT NULL AND f.embedding_model = %s AND {where} AND {fwhere}"
                " ORDER BY f.embedding <=> %s LIMIT %s",
                [query, self.embedding_model, *params, *fparams, query, limit],
            )
            hits = [Hit(r["id"], float(r["sim"])) for r in cur.fetchall()]
        hits.sort(key=lambda h: -h.score)
        return hits

    def record_access(self, ids: Sequence[str], at: datetime) -> None:
        """Buffer access statistics; they are written in batches (storage/access.py)."""
        self._access.record(ids, at)

    def flush_access(self) -> None:
        """Write the buffered access statistics now (views and consolidation read settled counts)."""
        self._access.flush()

    def _write_access(self, pending: Pending) -> Pending:
        """Rows another transaction holds locked are skipped and handed back for the next batch:
        waiting for them could deadlock with a writer that locks the same rows in another order
        (a forget cleaning the links of many agents' fragments), and statistics can wait."""
        ids = sorted(pending)
        with self._tx(SYSTEM) as cur:
            cur.execute(
                "WITH v AS (SELECT * FROM unnest(%s::text[], %s::int[], %s::timestamptz[]) AS v(id, n, at)),"
                " free AS (SELECT f.id FROM agent_memory.fragments f JOIN v ON f.id = v.id"
                " ORDER BY f.id FOR UPDATE OF f SKIP LOCKED)"
                " UPDATE agent_memory.fragments f SET access_count = f.access_count + v.n,"
                " accessed_at = GREATEST(f.accessed_at, v.at)"
                " FROM v WHERE f.id = v.id AND f.id IN (SELECT id FROM free) RETURNING f.id",
                (ids, [pending[i][0] for i in ids], [pending[i][1] for i in ids]),
            )
            done = {r["id"] for r in cur.fetchall()}
            skipped = [i for i in ids if i not in done]
            if not skipped:
                return {}
            # locked, or deleted meanwhile: only the live ones wait for the next batch
            cur.execute("SELECT id FROM agent_memory.fragments WHERE id = ANY(%s)", (skipped,))
            return {r["id"]: pending[r["id"]] for r in cur.fetchall()}

    # ------------------------------------------------------------ embeddings

    @retried
    def set_embedding(self, fragment_id: str, vector: np.ndarray) -> None:
        value, model = self._embedding_value(vector)
        if value is None:
            return
        with self._tx(SYSTEM) as cur:
            cur.execute(
                "UPDATE agent_memory.fragments SET embedding = %s, embedding_model = %s WHERE id = %s",
                (value, model, fragment_id),
            )

    def missing_embeddings(self, scope: AgentScope, limit: int, after_seq: int = 0) -> list[tuple[int, str, str]]:
        where, params = scope_sql(scope)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT f.seq, f.id, f.content FROM agent_memory.fragments f"
                " WHERE (f.embedding IS NULL OR f.embedding_model IS DISTINCT FROM %s) AND f.seq > %s"
                f" AND {where} ORDER BY f.seq LIMIT %s",
                [self.embedding_model, after_seq, *params, limit],
            )
            return [(r["seq"], r["id"], r["content"]) for r in cur.fetchall()]

    @retried
    def clear_embeddings(self) -> int:
        """Drop every stored vector (before a full re-embedding)."""
        with self._tx(SYSTEM) as cur:
            cur.execute("UPDATE agent_memory.fragments SET embedding = NULL, embedding_model = NULL WHERE embedding IS NOT NULL")
            return int(cur.rowcount)

    # ------------------------------------------------------------ feedback, statistics

    def add_tool_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int:
        with self._tx(agent_id) as cur:
            cur.execute(
                "INSERT INTO agent_memory.tool_feedback (agent_id, tool_name, relevant, sufficient, suggestion, context,"
                " session_id, trigger_type, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (agent_id, row["tool_name"], bool(row["relevant"]), bool(row["sufficient"]), row.get("suggestion"),
                 row.get("context"), row.get("session_id"), row.get("trigger_type", "voluntary"), now),
            )
            created = cur.fetchone()
            assert created is not None
            return int(created["id"])

    def add_task_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int:
        with self._tx(agent_id) as cur:
            cur.execute(
                "INSERT INTO agent_memory.task_feedback (agent_id, session_id, overall_success, tool_highlights,"
                " tool_pain_points, created_at) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (agent_id, row["session_id"], bool(row["overall_success"]), list(row.get("tool_highlights") or []),  # type: ignore[call-overload]
                 list(row.get("tool_pain_points") or []), now),  # type: ignore[call-overload]
            )
            created = cur.fetchone()
            assert created is not None
            return int(created["id"])

    def task_feedback(self, session_id: str) -> list[dict[str, object]]:
        with self._tx(SYSTEM) as cur:
            cur.execute("SELECT * FROM agent_memory.task_feedback WHERE session_id = %s ORDER BY id", (session_id,))
            return [dict(r) for r in cur.fetchall()]

    def tool_feedback(self, feedback_id: int) -> dict[str, object] | None:
        """One tool_feedback row (for operators and tests)."""
        with self._tx(SYSTEM) as cur:
            cur.execute("SELECT * FROM agent_memory.tool_feedback WHERE id = %s", (feedback_id,))
            row = cur.fetchone()
            return dict(row) if row else None

    def stats(self, scope: AgentScope) -> dict[str, object]:
        where, params = scope_sql(scope)
        with self._tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT COUNT(*) FILTER (WHERE f.session_id IS NULL) AS total,"
                " COUNT(*) FILTER (WHERE f.session_id IS NOT NULL) AS working,"
                " COUNT(*) FILTER (WHERE f.session_id IS NULL AND f.embedding IS NOT NULL AND f.embedding_model = %s) AS embedded,"
                " AVG(f.utility_score) FILTER (WHERE f.session_id IS NULL) AS utility,"
                " AVG(f.importance) FILTER (WHERE f.session_id IS NULL) AS importance,"
                " COUNT(*) FILTER (WHERE f.is_anchor) AS anchors"
                f" FROM agent_memory.fragments f WHERE {where}",
                [self.embedding_model, *params],
            )
            totals = cur.fetchone() or {}
            cur.execute(
                f"SELECT 'tier' AS kind, f.ttl_tier AS name, COUNT(*) AS n FROM agent_memory.fragments f WHERE {where} AND f.session_id IS NULL GROUP BY f.ttl_tier"
                f" UNION ALL SELECT 'type', f.type, COUNT(*) FROM agent_memory.fragments f WHERE {where} AND f.session_id IS NULL GROUP BY f.type",
                [*params, *params],
            )
            groups = {(r["kind"], r["name"]): int(r["n"]) for r in cur.fetchall()}
            cur.execute(
                f"SELECT COUNT(*) AS n FROM agent_memory.fragment_links l JOIN agent_memory.fragments f ON f.id = l.from_id WHERE {where}",
                params,
            )
            links = cur.fetchone() or {"n": 0}
        total, embedded = int(totals.get("total", 0)), int(totals.get("embedded", 0))
        utility, importance = totals.get("utility"), totals.get("importance")
        return {
            "total": total,
            "working_memory": int(totals.get("working", 0)),
            "by_tier": {t.value: groups.get(("tier", t.value), 0) for t in TTLTier},
            "by_type": {t.value: groups.get(("type", t.value), 0) for t in FragmentType},
            "anchors": int(totals.get("anchors", 0)),
            "links": int(links["n"]),
            "embedded": embedded,
            "embedding_coverage": round(embedded / total, 4) if total else 1.0,
            "mean_utility_score": round(float(utility), 4) if utility is not None else None,
            "mean_importance": round(float(importance), 4) if importance is not None else None,
        }

    # ------------------------------------------------------------ bulk copy (BulkStore)

    def embedding_shapes(self) -> list[tuple[str, int]]:
        """The (model, dimensions) pairs of the stored vectors, for all agents."""
        with self._tx(SYSTEM) as cur:
            cur.execute(
                "SELECT DISTINCT embedding_model AS model, vector_dims(embedding) AS dim FROM agent_memory.fragments"
                " WHERE embedding IS NOT NULL ORDER BY 1, 2"
            )
            return [(str(r["model"]), int(r["dim"])) for r in cur.fetchall()]

    def count_rows(self, table: str) -> int:
        _bulk_table(table)
        with self._tx(SYSTEM) as cur:
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
        query = sql.SQL("SELECT {cols} FROM agent_memory.{table} WHERE {key} > %s ORDER BY {key} LIMIT %s").format(
            cols=sql.SQL(", ").join(sql.Identifier(n) for n in names),
            table=sql.Identifier(table),
            key=sql.Identifier(key),
        )
        with self._tx(SYSTEM) as cur:
            cur.execute(query, (after, limit))
            rows = cur.fetchall()
        out: list[dict[str, object]] = []
        for r in rows:
            row = dict(r)
            for name in ("keywords", "linked_to", "tool_highlights", "tool_pain_points", "tags"):
                if name in row:
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
        marks = [sql.Placeholder()] * len(names) + ([sql.SQL(_SEARCH), sql.Placeholder(), sql.Placeholder()] if extra else [])
        query = sql.SQL("INSERT INTO agent_memory.{table} ({cols}) VALUES ({marks}) ON CONFLICT DO NOTHING").format(
            table=sql.Identifier(table),
            cols=sql.SQL(", ").join(sql.Identifier(n) for n in [*names, *extra]),
            marks=sql.SQL(", ").join(marks),
        )
        inserted = 0
        with self._tx(SYSTEM) as cur:
            for row in rows:
                params: list[Any] = [_pg_value(n, _imported(table, n, row)) for n in names]
                if extra:
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
        with self._tx(SYSTEM) as cur:
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
        return FRAGMENT_DEFAULTS.get(name)
    return value


def _bulk_table(table: str) -> str:
    if table not in BULK_KEYS:
        raise InvalidArgument(f"unknown table {table!r}")
    return BULK_KEYS[table]


def _pg_value(name: str, value: object) -> object:
    if name in ("keywords", "linked_to", "tool_highlights", "tool_pain_points", "tags"):
        return [str(v) for v in value] if value is not None else []  # type: ignore[attr-defined]
    if name in ("is_anchor", "relevant", "sufficient", "overall_success", "pinned"):
        return bool(value)
    if name in ("metadata", "origin_trace"):
        return None if value is None else Jsonb(value)
    if name in ("accessed_at", "created_at", "verified_at", "amended_at", "expires_at", "deleted_at") and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value
