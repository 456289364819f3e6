"""The write side of SQLiteStore: insert (dedupe by content hash, links, vector), amend with a
version row, supersede, delete with its cascade, soft delete and restore, links; and the stored
vectors, which this process's vector index follows once their transaction has committed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pysqlite3.dbapi2 as sqlite3

from ..errors import Conflict, Forbidden, InvalidArgument, NotFound
from ..models import DEFAULT_AGENT, AgentScope, Fragment, RelationType, session_refusal
from . import terms as terms_policy
from .protocol import RECORD_COLUMNS, FragmentChanges, NewFragment, VersionRecord, archived
from .sqlite_bulk import _changed_record_values, _record_values
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import (
    _FRAGMENT_COLUMNS,
    _index_text,
    _require,
    _row_to_fragment,
    _scope_sql,
    _unindex_text,
    _visible,
    _writable,
    fts_terms,
    ts,
)
from .sqlite_vectors import clock as vector_clock
from .vectors import Span, VectorIndex


class SQLiteFragments:
    """Fragment writes, each one transaction on the writer (nested calls join the outer one)."""

    def __init__(
        self, db: SQLiteDatabase, vectors: VectorIndex | None, embedding_model: str | None, agents: terms_policy.CountCache[frozenset[str]]
    ) -> None:
        self.db = db
        self.vectors = vectors
        self.embedding_model = embedding_model
        self.agents = agents

    @staticmethod
    def _same_content(conn: sqlite3.Connection, agent: str, digest: str, session: str | None) -> sqlite3.Row | None:
        # Spelled out per case so each uses its partial unique index (`IS ?` would scan). Keyed
        # memories (002) are not deduplicated by content.
        if session is None:
            sql, params = "f.session_id IS NULL", [agent, digest]
        else:
            sql, params = "f.session_id = ?", [agent, digest, session]
        return conn.execute(
            f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.agent_id = ? AND f.content_hash = ? AND {sql} AND f.memory_key IS NULL",
            params,
        ).fetchone()

    @staticmethod
    def _same_key(conn: sqlite3.Connection, agent: str, key: str, session: str | None) -> sqlite3.Row | None:
        """The agent's memory of this key in the same scope (002: vault, or the session)."""
        if session is None:
            sql, params = "f.session_id IS NULL", [agent, key]
        else:
            sql, params = "f.session_id = ?", [agent, key, session]
        return conn.execute(
            f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.agent_id = ? AND f.memory_key = ? AND {sql}", params
        ).fetchone()

    def insert(self, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]:
        d = new.draft
        key = d.record.memory_key
        with self.db.tx() as conn:
            self._may_insert(conn, scope, new)
            if key is None:
                row = self._same_content(conn, new.agent_id, d.content_hash, new.session_id)
            else:
                row = self._same_key(conn, new.agent_id, key, new.session_id)
            existing = _row_to_fragment(row) if row is not None else None
            if existing is not None and existing.is_live(datetime.now(UTC)):
                return existing, False
            if existing is not None and key is not None:  # a keyed memory archived or expired: back, for the caller to update
                conn.execute("UPDATE fragments SET deleted_at = NULL, expires_at = NULL WHERE seq = ?", (existing.seq,))
                row = conn.execute(f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.seq = ?", (existing.seq,)).fetchone()
                return _row_to_fragment(row), False
            if existing is not None:  # remembering forgotten or expired content again brings it back
                expires = ts(d.record.expires_at) if d.record.expires_at else None
                conn.execute("UPDATE fragments SET deleted_at = NULL, expires_at = ? WHERE seq = ?", (expires, existing.seq))
                row = conn.execute(f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.seq = ?", (existing.seq,)).fetchone()
                return _row_to_fragment(row), True
            targets = _visible(conn, scope, list(dict.fromkeys(new.linked_to)))
            missing = set(new.linked_to) - {t.id for t in targets}
            if missing:
                raise NotFound(f"linkedTo fragment(s) not found: {', '.join(sorted(missing))}", missing=sorted(missing))
            created = ts(d.created_at)
            if conn.execute("SELECT 1 FROM fragments WHERE id = ?", (d.id,)).fetchone() is not None:
                raise Conflict(f"fragment id {d.id} is already taken")  # as PostgreSQL reports it
            seq = conn.execute(
                "INSERT INTO fragments (id, content, topic, keywords, type, importance, content_hash, source,"
                " linked_to, agent_id, created_at, ttl_tier, estimated_tokens, verified_at, is_anchor, session_id,"
                f" {', '.join(RECORD_COLUMNS)})"
                f" VALUES ({', '.join('?' * (16 + len(RECORD_COLUMNS)))}) RETURNING seq",
                (
                    d.id,
                    d.content,
                    d.topic,
                    json.dumps(d.keywords, ensure_ascii=False),
                    d.type.value,
                    d.importance,
                    d.content_hash,
                    d.source,
                    json.dumps([t.id for t in targets]),
                    new.agent_id,
                    created,
                    d.ttl_tier.value,
                    d.estimated_tokens,
                    created,
                    int(d.is_anchor),
                    new.session_id,
                    *_record_values(new),
                ),
            ).fetchone()[0]
            _index_text(conn, seq, d.content, d.keywords, d.topic)
            known = self.agents.peek("agents")
            if known is not None and new.agent_id not in known:  # a new namespace: scopes change
                self.db.on_commit(self.agents.clear)
            for target in targets:
                conn.execute(
                    "INSERT OR IGNORE INTO fragment_links (from_id, to_id, relation_type, created_at) VALUES (?, ?, 'related', ?)",
                    (d.id, target.id, created),
                )
            if new.embedding is not None and self.embedding_model:
                span = self._store_vector(conn, seq, new.agent_id, new.embedding)
                self._vector_added(new.agent_id, seq, new.embedding, span)
            row = conn.execute(f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.seq = ?", (seq,)).fetchone()
        return _row_to_fragment(row), True

    @staticmethod
    def _may_insert(conn: sqlite3.Connection, scope: AgentScope, new: NewFragment) -> None:
        """The pool rule and session ownership, checked in the inserting transaction (one writer,
        so two namespaces cannot both claim a new session id)."""
        if new.agent_id == DEFAULT_AGENT and not scope.may_write_pool(anchored=new.draft.is_anchor, working=new.session_id is not None):
            raise Forbidden(scope.pool_refusal([new.draft.id]))
        if new.session_id is not None and not new.own_session:
            other = conn.execute(
                "SELECT 1 FROM fragments WHERE session_id = ? AND agent_id != ? LIMIT 1", (new.session_id, new.agent_id)
            ).fetchone()
            if other is not None:
                raise Forbidden(session_refusal(new.session_id))

    def update(self, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime) -> Fragment:
        with self.db.tx() as conn:
            old = _require(conn, scope, fragment_id)
            _writable(scope, [old])
            _archive(conn, old.id, archived(old, amended_by), now)
            content = changes.content if changes.content is not None else old.content
            content_hash = changes.content_hash or old.content_hash
            if content_hash != old.content_hash and old.memory_key is None:
                clash = self._same_content(conn, old.agent_id, content_hash, old.session_id)
                if clash is not None and clash["id"] != old.id:
                    raise Conflict(f"fragment {clash['id']} already holds this content")
            keywords = changes.keywords if changes.keywords is not None else old.keywords
            topic = changes.topic if changes.topic is not None else old.topic
            if changes.is_anchor and old.agent_id == DEFAULT_AGENT and not scope.may_write_pool(anchored=True):
                raise Forbidden(scope.pool_refusal([old.id]))
            conn.execute(
                "UPDATE fragments SET content = ?, content_hash = ?, estimated_tokens = ?, topic = ?, keywords = ?,"
                " type = ?, importance = ?, ttl_tier = ?, is_anchor = ?, confidence = ?, tags = ?, context = ?,"
                " metadata = ?, expires_at = ?, pinned = ?, memory_system = ?, privacy_scope = ?, origin_trace = ?, detail = ?, client_embedding = ? WHERE id = ?",  # changed_record's order
                (
                    content,
                    content_hash,
                    changes.estimated_tokens if changes.estimated_tokens is not None else old.estimated_tokens,
                    topic,
                    json.dumps(keywords, ensure_ascii=False),
                    (changes.type or old.type).value,
                    changes.importance if changes.importance is not None else old.importance,
                    (changes.ttl_tier or old.ttl_tier).value,
                    int(changes.is_anchor if changes.is_anchor is not None else old.is_anchor),
                    *_changed_record_values(old, changes),
                    old.id,
                ),
            )
            if (content, keywords, topic) != (old.content, old.keywords, old.topic):
                _unindex_text(conn, old.seq)
                _index_text(conn, old.seq, content, keywords, topic)
            if changes.embedding is not None and self.embedding_model:
                span = self._store_vector(conn, old.seq, old.agent_id, changes.embedding)
                self._vector_added(old.agent_id, old.seq, changes.embedding, span)
            elif changes.clear_embedding:
                before = vector_clock(conn)
                conn.execute("DELETE FROM fragment_embeddings WHERE seq = ?", (old.seq,))
                self._vectors_removed(old.agent_id, [old.seq], (before, vector_clock(conn)))
            row = conn.execute(f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.seq = ?", (old.seq,)).fetchone()
        return _row_to_fragment(row)

    def add_version(self, scope: AgentScope, fragment_id: str, version: VersionRecord, now: datetime) -> int:
        with self.db.tx() as conn:
            _writable(scope, [_require(conn, scope, fragment_id)])
            return _archive(conn, fragment_id, version, now)

    def supersede(self, scope: AgentScope, old_id: str, new: NewFragment, importance_factor: float, now: datetime) -> tuple[Fragment, bool]:
        with self.db.tx():  # the three steps below join this one transaction
            old = _require(self.db.writer, scope, old_id)
            fragment, created = self.insert(scope, new)
            if fragment.id == old.id:
                raise Conflict("the superseding content is identical to the original")
            self.add_link(scope, old.id, fragment.id, RelationType.SUPERSEDED_BY, now)
            self.update(scope, old.id, FragmentChanges(importance=round(old.importance * importance_factor, 4)), new.agent_id, now)
        return fragment, created

    def delete(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        with self.db.tx() as conn:
            found = _visible(conn, scope, list(ids))
            if not found:
                return []
            _writable(scope, found)
            self.remove_rows(conn, found)
        return [f.id for f in found]

    def remove_rows(self, conn: sqlite3.Connection, found: Sequence[Fragment]) -> int:
        """Delete these rows (in the caller's transaction) with their full-text entries, the
        references other rows' linked_to hold, and by cascade their vectors, versions, links and
        entity associations; this process's vector index follows on commit. How many references
        to them were removed from linked_to."""
        removed: dict[str, list[int]] = {}
        before = vector_clock(conn)
        gone = [f.id for f in found]
        marks = ",".join("?" * len(gone))
        for f in found:
            _unindex_text(conn, f.seq)
            removed.setdefault(f.agent_id, []).append(f.seq)
        # the rows referring to them, from fragment_references (migration 0030), not a read of
        # every row's linked_to
        referring = f"SELECT r.seq FROM fragment_references r WHERE r.target IN ({marks})"
        references = conn.execute(
            f"SELECT COUNT(*) FROM fragments f, json_each(f.linked_to) j WHERE f.seq IN ({referring})"
            f" AND j.value IN ({marks}) AND f.id NOT IN ({marks})",
            [*gone, *gone, *gone],
        ).fetchone()[0]
        conn.execute(
            "UPDATE fragments SET linked_to = (SELECT json_group_array(j.value) FROM json_each(fragments.linked_to) j"
            f" WHERE j.value NOT IN ({marks})) WHERE seq IN ({referring})",
            [*gone, *gone],
        )
        conn.execute(f"DELETE FROM fragments WHERE id IN ({marks})", gone)  # vectors go by cascade
        span = before, vector_clock(conn)
        for agent, seqs in removed.items():
            self._vectors_removed(agent, seqs, span)
        return int(references)

    def soft_delete(self, scope: AgentScope, ids: Sequence[str], now: datetime) -> list[str]:
        with self.db.tx() as conn:
            found = _visible(conn, scope, list(ids))
            _writable(scope, found)
            gone = [f.id for f in found]
            if gone:
                marks = ",".join("?" * len(gone))
                conn.execute(f"UPDATE fragments SET deleted_at = ? WHERE id IN ({marks})", [ts(now), *gone])
                # A hidden memory takes no place among the nearest neighbours (it would crowd out
                # live ones); restore embeds it again.
                before = vector_clock(conn)
                seqs = [f.seq for f in found]
                conn.execute(f"DELETE FROM fragment_embeddings WHERE seq IN ({','.join('?' * len(seqs))})", seqs)
                span = before, vector_clock(conn)
                for agent in {f.agent_id for f in found}:
                    self._vectors_removed(agent, [f.seq for f in found if f.agent_id == agent], span)
        return gone

    def restore(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        where, params = _scope_sql(scope)
        where = where.replace("f.deleted_at IS NULL", "f.deleted_at IS NOT NULL", 1)
        with self.db.tx() as conn:
            rows = (
                conn.execute(
                    f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.id IN ({','.join('?' * len(ids))}) AND {where}", [*ids, *params]
                ).fetchall()
                if ids
                else []
            )
            found = [_row_to_fragment(r) for r in rows]
            _writable(scope, found)
            back = [f.id for f in found]
            if back:
                conn.execute(f"UPDATE fragments SET deleted_at = NULL WHERE id IN ({','.join('?' * len(back))})", back)
        return back

    def expunge_session(self, session_id: str, agent_id: str) -> int:
        """Delete the working memory `agent_id` keeps under `session_id` (never another's)."""
        ids = [
            r[0] for r in self.db.reader().execute("SELECT id FROM fragments WHERE session_id = ? AND agent_id = ?", (session_id, agent_id))
        ]
        return len(self.delete(AgentScope("system"), ids))

    def add_link(self, scope: AgentScope, from_id: str, to_id: str, relation: RelationType, now: datetime) -> bool:
        if from_id == to_id:
            raise InvalidArgument("a fragment cannot link to itself")
        with self.db.tx() as conn:
            source = _require(conn, scope, from_id)
            _writable(scope, [source])
            _require(conn, scope, to_id)
            cursor = conn.execute(
                "INSERT INTO fragment_links (from_id, to_id, relation_type, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(from_id, to_id) DO UPDATE SET relation_type = excluded.relation_type",
                (from_id, to_id, relation.value, ts(now)),
            )
            if to_id not in source.linked_to:
                conn.execute("UPDATE fragments SET linked_to = ? WHERE id = ?", (json.dumps([*source.linked_to, to_id]), from_id))
            return bool(cursor.rowcount > 0)

    def set_embedding(self, fragment_id: str, vector: np.ndarray) -> None:
        with self.db.tx() as conn:
            row = conn.execute("SELECT seq, agent_id FROM fragments WHERE id = ?", (fragment_id,)).fetchone()
            if row is None:
                return  # deleted meanwhile
            span = self._store_vector(conn, row[0], row[1], vector)
            self._vector_added(row[1], row[0], vector, span)

    def clear_embeddings(self) -> int:
        """Drop every stored vector (before a full re-embedding); every index, in every process,
        notices through the change log and rebuilds."""
        with self.db.tx() as conn:
            count = conn.execute("DELETE FROM fragment_embeddings").rowcount
        return int(count)

    def reanalyse_text(self, after_seq: int, limit: int) -> tuple[int, int]:
        """Store.reanalyse_text: every fragment with FTS5 entries (the table is contentless, so
        the old terms cannot be read back to compare: each one is written again)."""
        with self.db.tx() as conn:
            rows = conn.execute(
                "SELECT f.seq, f.content, f.keywords, f.topic FROM fragments_fts m JOIN fragments f ON f.seq = m.rowid"
                " WHERE m.rowid > ? ORDER BY m.rowid LIMIT ?",
                (after_seq, limit),
            ).fetchall()
            conn.executemany(
                "UPDATE fragments_fts SET terms = ?, topic = ? WHERE rowid = ?",
                [(*fts_terms(content, json.loads(keywords), topic), seq) for seq, content, keywords, topic in rows],
            )
        return len(rows), int(rows[-1][0]) if rows else 0

    def _store_vector(self, conn: sqlite3.Connection, seq: int, agent: str, vector: np.ndarray) -> Span:
        """Write a vector; returns the clock span of the write, for this process's index."""
        vec = np.ascontiguousarray(vector, dtype=np.float32)
        before = vector_clock(conn)
        conn.execute(
            "INSERT OR REPLACE INTO fragment_embeddings (seq, agent_id, model, dim, vector) VALUES (?, ?, ?, ?, ?)",
            (seq, agent, self.embedding_model, int(vec.shape[0]), vec.tobytes()),
        )
        return before, vector_clock(conn)

    def _vector_added(self, agent: str, seq: int, vector: np.ndarray, span: tuple[int, int]) -> None:
        if self.vectors is not None:
            index = self.vectors
            self.db.on_commit(lambda: index.add(agent, seq, vector, span))

    def _vectors_removed(self, agent: str, seqs: list[int], span: tuple[int, int]) -> None:
        if self.vectors is not None:
            index = self.vectors
            self.db.on_commit(lambda: index.remove(agent, seqs, span))


def _archive(conn: sqlite3.Connection, fragment_id: str, v: VersionRecord, now: datetime) -> int:
    """One row of a fragment's version trail; its id."""
    return int(
        conn.execute(
            "INSERT INTO fragment_versions (fragment_id, content, topic, keywords, type, importance, amended_at, amended_by,"
            " confidence, metadata, tags, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                fragment_id,
                v.content,
                v.topic,
                json.dumps(list(v.keywords), ensure_ascii=False),
                v.type.value,
                v.importance,
                ts(now),
                v.amended_by,
                v.confidence,
                None if v.metadata is None else json.dumps(v.metadata, ensure_ascii=False),
                None if v.tags is None else json.dumps(list(v.tags), ensure_ascii=False),
                v.note,
            ),
        ).fetchone()[0]
    )
