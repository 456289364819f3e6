"""The write side of PostgresStore: insert (dedupe by content hash, session claims, links,
vector), amend with a version row, supersede, delete with its link clean-up, soft delete and
restore, links and vectors. Each public write is retried when PostgreSQL rolled it back."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ..errors import Conflict, Forbidden, InvalidArgument, NotFound
from ..models import DEFAULT_AGENT, AgentScope, Fragment, RelationType, session_refusal
from .postgres_bulk import _pg_value
from .postgres_db import SYSTEM, Cursor, PostgresDatabase, _as, retried
from .postgres_rows import _COLUMNS, _SEARCH, _require, _row_to_fragment, _visible, _written
from .postgres_sql import refuse_unwritable, scope_sql, search_vector
from .protocol import RECORD_COLUMNS, FragmentChanges, NewFragment, VersionRecord, archived, changed_record, new_record


class PostgresFragments:
    """Fragment writes; the `_`-named ones run inside a caller's transaction (`cur`)."""

    def __init__(self, db: PostgresDatabase, embedding_model: str | None) -> None:
        self.db = db
        self.embedding_model = embedding_model

    @staticmethod
    def _same_content(cur: Cursor, agent: str, digest: str, session: str | None) -> Fragment | None:
        if session is None:
            cond, params = "f.session_id IS NULL", [agent, digest]
        else:
            cond, params = "f.session_id = %s", [agent, digest, session]
        cur.execute(
            f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.agent_id = %s AND f.content_hash = %s AND {cond}"
            " AND f.memory_key IS NULL",  # keyed memories (002) are not deduplicated by content
            params,
        )
        row = cur.fetchone()
        return _row_to_fragment(row) if row else None

    @staticmethod
    def _same_key(cur: Cursor, agent: str, key: str, session: str | None) -> Fragment | None:
        """The agent's memory of this key in the same scope (002: vault, or the session)."""
        if session is None:
            cond, params = "f.session_id IS NULL", [agent, key]
        else:
            cond, params = "f.session_id = %s", [agent, key, session]
        cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.agent_id = %s AND f.memory_key = %s AND {cond}", params)
        row = cur.fetchone()
        return _row_to_fragment(row) if row else None

    def _existing(self, cur: Cursor, new: NewFragment) -> Fragment | None:
        """What the new fragment would duplicate: the same key (keyed memory) or the same content."""
        key = new.draft.record.memory_key
        if key is not None:
            return self._same_key(cur, new.agent_id, key, new.session_id)
        return self._same_content(cur, new.agent_id, new.draft.content_hash, new.session_id)

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
        _as(cur, SYSTEM)
        cur.execute("SELECT 1 FROM agent_memory.fragments WHERE session_id = %s AND agent_id <> %s LIMIT 1", (new.session_id, new.agent_id))
        taken = cur.fetchone() is not None
        _as(cur, scope.agent_id)
        if taken:
            raise Forbidden(session_refusal(new.session_id))

    def _insert(self, cur: Cursor, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]:
        d = new.draft
        self._may_insert(cur, scope, new)
        existing = self._existing(cur, new)
        if existing is not None and existing.is_live(datetime.now(UTC)):
            return existing, False
        if existing is not None and d.record.memory_key is not None:  # a keyed memory archived or expired: back, for the caller to update
            cur.execute("UPDATE agent_memory.fragments SET deleted_at = NULL, expires_at = NULL WHERE id = %s", (existing.id,))
            return _written(cur, existing.id), False
        if existing is not None:  # remembering forgotten or expired content again brings it back
            cur.execute(
                "UPDATE agent_memory.fragments SET deleted_at = NULL, expires_at = %s WHERE id = %s", (d.record.expires_at, existing.id)
            )
            return _written(cur, existing.id), True
        targets = _visible(cur, scope, list(dict.fromkeys(new.linked_to)))
        missing = set(new.linked_to) - {t.id for t in targets}
        if missing:
            raise NotFound(f"linkedTo fragment(s) not found: {', '.join(sorted(missing))}", missing=sorted(missing))
        vector, model = self._embedding_value(new.embedding)
        cur.execute(
            "INSERT INTO agent_memory.fragments (id, content, topic, keywords, type, importance, content_hash, source,"
            " linked_to, agent_id, created_at, ttl_tier, estimated_tokens, verified_at, is_anchor, session_id,"
            f" search, embedding, embedding_model, {', '.join(RECORD_COLUMNS)}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
            f" %s, %s, %s, %s, %s, %s, %s, %s, {_SEARCH}, %s, %s, {', '.join(['%s'] * len(RECORD_COLUMNS))})"
            " ON CONFLICT DO NOTHING RETURNING id",
            (
                d.id,
                d.content,
                d.topic,
                list(d.keywords),
                d.type.value,
                d.importance,
                d.content_hash,
                d.source,
                [t.id for t in targets],
                new.agent_id,
                d.created_at,
                d.ttl_tier.value,
                d.estimated_tokens,
                d.created_at,
                d.is_anchor,
                new.session_id,
                search_vector(d.content, d.keywords, d.topic),
                vector,
                model,
                *(_pg_value(n, v) for n, v in new_record(new).items()),
            ),
        )
        if cur.fetchone() is None:  # a concurrent writer stored the same content (or key) first
            existing = self._existing(cur, new)
            if existing is None:
                raise Conflict(f"fragment id {d.id} is already taken")
            return existing, False
        for target in targets:
            cur.execute(
                "INSERT INTO agent_memory.fragment_links (from_id, to_id, relation_type, created_at)"
                " VALUES (%s, %s, 'related', %s) ON CONFLICT DO NOTHING",
                (d.id, target.id, d.created_at),
            )
        return _written(cur, d.id), True

    @retried
    def insert(self, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            return self._insert(cur, scope, new)

    def _update(
        self, cur: Cursor, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime
    ) -> Fragment:
        old = _require(cur, scope, fragment_id)
        refuse_unwritable(scope, [old])
        if changes.is_anchor and old.agent_id == DEFAULT_AGENT and not scope.may_write_pool(anchored=True):
            raise Forbidden(scope.pool_refusal([old.id]))
        _archive(cur, old.id, archived(old, amended_by), now)
        content = changes.content if changes.content is not None else old.content
        content_hash = changes.content_hash or old.content_hash
        if content_hash != old.content_hash and old.memory_key is None:
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
            content,
            content_hash,
            changes.estimated_tokens if changes.estimated_tokens is not None else old.estimated_tokens,
            topic,
            keywords,
            (changes.type or old.type).value,
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
        return _written(cur, old.id)

    @retried
    def update(self, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime) -> Fragment:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            return self._update(cur, scope, fragment_id, changes, amended_by, now)

    @retried
    def add_version(self, scope: AgentScope, fragment_id: str, version: VersionRecord, now: datetime) -> int:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            refuse_unwritable(scope, [_require(cur, scope, fragment_id)])
            return _archive(cur, fragment_id, version, now)

    @retried
    def supersede(self, scope: AgentScope, old_id: str, new: NewFragment, importance_factor: float, now: datetime) -> tuple[Fragment, bool]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            old = _require(cur, scope, old_id)
            fragment, created = self._insert(cur, scope, new)
            if fragment.id == old.id:
                raise Conflict("the superseding content is identical to the original")
            self._add_link(cur, scope, old.id, fragment.id, RelationType.SUPERSEDED_BY, now)
            self._update(cur, scope, old.id, FragmentChanges(importance=round(old.importance * importance_factor, 4)), new.agent_id, now)
        return fragment, created

    def _delete(self, cur: Cursor, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        found = _visible(cur, scope, list(ids))
        if not found:
            return []
        refuse_unwritable(scope, found)
        gone = [f.id for f in found]
        self._remove(cur, scope, gone)
        return gone

    @staticmethod
    def _remove(cur: Cursor, scope: AgentScope, gone: Sequence[str]) -> int:
        """Delete these rows (their terms, keywords, versions, links and entity associations go
        by cascade) and the references other rows' linked_to hold; how many references."""
        cur.execute("DELETE FROM agent_memory.fragments f WHERE f.id = ANY(%s)", (list(gone),))
        # Other agents' fragments may point at the deleted ones: clean their arrays as the
        # system, then return to the caller's context.
        # The rows referring to them from fragment_references (migration 0030): under row-level
        # security `linked_to && ...` cannot use the GIN index and read every row.
        _as(cur, SYSTEM)
        referring = "f.seq = ANY(ARRAY(SELECT r.seq FROM agent_memory.fragment_references r WHERE r.target = ANY(%s)))"
        cur.execute(
            f"SELECT COUNT(*) AS n FROM agent_memory.fragments f, unnest(f.linked_to) AS u(x) WHERE {referring} AND u.x = ANY(%s)",
            (list(gone), list(gone)),
        )
        row = cur.fetchone()
        cur.execute(
            "UPDATE agent_memory.fragments f SET linked_to = COALESCE((SELECT array_agg(u.x ORDER BY u.o)"
            " FROM unnest(f.linked_to) WITH ORDINALITY AS u(x, o) WHERE u.x <> ALL(%s)), '{}')"
            f" WHERE {referring} AND f.linked_to && %s",
            (list(gone), list(gone), list(gone)),
        )
        _as(cur, scope.agent_id)
        return int(row["n"]) if row else 0

    @retried
    def delete(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            return self._delete(cur, scope, ids)

    @retried
    def soft_delete(self, scope: AgentScope, ids: Sequence[str], now: datetime) -> list[str]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            found = _visible(cur, scope, list(ids))
            refuse_unwritable(scope, found)
            gone = [f.id for f in found]
            if gone:
                # A hidden memory takes no place among the nearest neighbours; restore embeds it again.
                cur.execute(
                    "UPDATE agent_memory.fragments SET deleted_at = %s, embedding = NULL, embedding_model = NULL WHERE id = ANY(%s)",
                    (now, gone),
                )
            return gone

    @retried
    def restore(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        where, params = scope_sql(scope)
        where = where.replace("f.deleted_at IS NULL", "f.deleted_at IS NOT NULL", 1)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {where}", [list(ids), *params])
            found = [_row_to_fragment(r) for r in cur.fetchall()]
            refuse_unwritable(scope, found)
            back = [f.id for f in found]
            if back:
                cur.execute("UPDATE agent_memory.fragments SET deleted_at = NULL WHERE id = ANY(%s)", (back,))
            return back

    @retried
    def expunge_session(self, session_id: str, agent_id: str) -> int:
        """Delete the working memory `agent_id` keeps under `session_id` (never another's)."""
        with self.db.tx(SYSTEM) as cur:
            cur.execute("SELECT id FROM agent_memory.fragments WHERE session_id = %s AND agent_id = %s", (session_id, agent_id))
            ids = [r["id"] for r in cur.fetchall()]
            return len(self._delete(cur, AgentScope(SYSTEM), ids))

    def _add_link(self, cur: Cursor, scope: AgentScope, from_id: str, to_id: str, relation: RelationType, now: datetime) -> bool:
        if from_id == to_id:
            raise InvalidArgument("a fragment cannot link to itself")
        source = _require(cur, scope, from_id)
        refuse_unwritable(scope, [source])
        _require(cur, scope, to_id)
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
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            return self._add_link(cur, scope, from_id, to_id, relation, now)

    @retried
    def set_embedding(self, fragment_id: str, vector: np.ndarray) -> None:
        value, model = self._embedding_value(vector)
        if value is None:
            return
        with self.db.tx(SYSTEM) as cur:
            cur.execute("UPDATE agent_memory.fragments SET embedding = %s, embedding_model = %s WHERE id = %s", (value, model, fragment_id))

    @retried
    def clear_embeddings(self) -> int:
        """Drop every stored vector (before a full re-embedding)."""
        with self.db.tx(SYSTEM) as cur:
            cur.execute("UPDATE agent_memory.fragments SET embedding = NULL, embedding_model = NULL WHERE embedding IS NOT NULL")
            return int(cur.rowcount)

    @retried
    def reanalyse_text(self, after_seq: int, limit: int) -> tuple[int, int]:
        """Store.reanalyse_text: the `search` column of fragments that have one; the term rows
        follow by trigger, only for the fragments whose terms changed."""
        with self.db.tx(SYSTEM) as cur:
            cur.execute(
                "SELECT seq, content, keywords, topic FROM agent_memory.fragments WHERE seq > %s AND search IS NOT NULL ORDER BY seq LIMIT %s",
                (after_seq, limit),
            )
            rows = cur.fetchall()
            if rows:
                cur.execute(
                    "UPDATE agent_memory.fragments f SET search = CAST(v.s AS tsvector)"
                    " FROM unnest(CAST(%s AS bigint[]), CAST(%s AS text[])) AS v(seq, s)"
                    " WHERE f.seq = v.seq AND f.search IS DISTINCT FROM CAST(v.s AS tsvector)",
                    ([r["seq"] for r in rows], [search_vector(r["content"], r["keywords"] or [], r["topic"]) for r in rows]),
                )
        return len(rows), int(rows[-1]["seq"]) if rows else 0


def _archive(cur: Cursor, fragment_id: str, v: VersionRecord, now: datetime) -> int:
    """One row of a fragment's version trail; its id."""
    cur.execute(
        "INSERT INTO agent_memory.fragment_versions (fragment_id, content, topic, keywords, type, importance, amended_at, amended_by,"
        " confidence, metadata, tags, note) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            fragment_id,
            v.content,
            v.topic,
            list(v.keywords),
            v.type.value,
            v.importance,
            now,
            v.amended_by,
            v.confidence,
            None if v.metadata is None else Jsonb(v.metadata),
            None if v.tags is None else list(v.tags),
            v.note,
        ),
    )
    row = cur.fetchone()
    assert row is not None
    return int(row["id"])
