"""The embedded backend: one SQLite file (WAL), FTS5 for words, per-agent vector indexes.

One writer connection behind a lock; each reading thread has its own connection. Every
statement that touches fragments carries the agent scope, so isolation holds here and not
only in the faces.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pysqlite3.dbapi2 as sqlite3

from ..errors import Conflict, Forbidden, InvalidArgument, NotFound
from ..models import (
    DEFAULT_AGENT, AgentScope, Fragment, FragmentType, Link, MemorySystem, PoolWrites, PrivacyScope, RelationType, TTLTier,
    memory_system_for, session_refusal,
)
from ..analysis import index_terms
from .protocol import (
    BULK_COLUMNS, BULK_KEYS, FRAGMENT_DEFAULTS, RECORD_COLUMNS, FragmentChanges, changed_record, new_record,
)
from .protocol import Hit, NewFragment, RankFeatures, SearchFilter
from . import terms as terms_policy
from .access import AccessBuffer, Pending
from .sqlfilter import filter_sql, live_sql
from .sqlite_vectors import SQLiteVectorSource, clock as vector_clock
from .vectors import Span, VectorIndex

log = logging.getLogger(__name__)

EXACT_FALLBACK_LIMIT = 20_000


def ts(value: datetime) -> str:
    """The stored form of a timestamp: UTC ISO-8601 with microseconds (sorts as text)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def parse_ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _row_to_fragment(row: sqlite3.Row) -> Fragment:
    return Fragment(
        id=row["id"],
        content=row["content"],
        topic=row["topic"],
        type=FragmentType(row["type"]),
        keywords=json.loads(row["keywords"]),
        importance=row["importance"],
        content_hash=row["content_hash"],
        agent_id=row["agent_id"],
        ttl_tier=TTLTier(row["ttl_tier"]),
        created_at=parse_ts(row["created_at"]) or datetime.now(UTC),
        source=row["source"],
        linked_to=json.loads(row["linked_to"]),
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
        tags=json.loads(row["tags"]),
        context=row["context"],
        metadata=json.loads(row["metadata"]),
        expires_at=parse_ts(row["expires_at"]),
        pinned=bool(row["pinned"]),
        memory_system=MemorySystem(row["memory_system"]),
        privacy_scope=PrivacyScope(row["privacy_scope"]),
        origin_trace=json.loads(row["origin_trace"]) if row["origin_trace"] else None,
        deleted_at=parse_ts(row["deleted_at"]),
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
    # Working memory is never shared: another namespace's session rows stay out of sight.
    return f"{sql} AND ({alias}.session_id IS NULL OR {alias}.agent_id = ?)", [now, *agents, scope.agent_id]


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


def _filter_sql(filt: SearchFilter, alias: str = "f") -> tuple[str, list[Any]]:
    return filter_sql(filt, alias, "?", any_of=False)


def _fts_query(terms: Sequence[str]) -> str:
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


WAL_SWITCH_ATTEMPTS = 100
PING_TIMEOUT_S = 2.0


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch a new file to WAL. The switch needs the file to itself and SQLite answers "locked"
    at once, without its busy handler, while another process opens the same new file (servers
    started together): try again, briefly, as the busy handler would."""
    for attempt in range(WAL_SWITCH_ATTEMPTS):
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == WAL_SWITCH_ATTEMPTS - 1:
                raise
            time.sleep(0.01 + random.random() * 0.04)


class SQLiteStore:
    """The Store protocol on one SQLite file."""

    def __init__(
        self,
        path: Path,
        *,
        embedding_model: str | None,
        dimensions: int | None,
        synchronous: str = "FULL",
        ann_threshold: int = 5000,
        ef_search: int = 512,
    ) -> None:
        self.path = path
        self.embedding_model = embedding_model
        self.synchronous = synchronous
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write_lock = threading.RLock()
        self._depth = 0  # nesting of _tx on the writer (guarded by _write_lock)
        self._committed: list[Callable[[], None]] = []
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._writer = self._connect()
        self._migrate()
        self._access = AccessBuffer(self._write_access)
        self._closed = False
        self._sizes: terms_policy.CountCache[int] = terms_policy.CountCache()
        self._agents: terms_policy.CountCache[frozenset[str]] = terms_policy.CountCache()
        self.vectors: VectorIndex | None = None
        if embedding_model and dimensions:
            self.vectors = VectorIndex(
                dimensions,
                embedding_model,
                path.with_name(path.name + ".vectors"),
                SQLiteVectorSource(self._reader, self._connect, embedding_model, dimensions),
                ann_threshold=ann_threshold,
                ef_search=ef_search,
            )

    # ------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=30)
        conn.row_factory = sqlite3.Row
        _enable_wal(conn)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA cache_size = -65536")
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the single writer connection. Inside another one (on this
        thread: the writer lock is re-entrant) it joins it: the outermost commits or rolls back
        everything, so a multi-step write built from single-step ones stays one transaction."""
        with self._write_lock:
            conn = self._writer
            if self._depth:
                self._depth += 1
                try:
                    yield conn
                finally:
                    self._depth -= 1
                return
            conn.execute("BEGIN IMMEDIATE")
            self._depth, self._committed = 1, []
            try:
                yield conn
            except BaseException:
                self._depth, self._committed = 0, []
                conn.execute("ROLLBACK")
                raise
            self._depth = 0
            conn.execute("COMMIT")
            done, self._committed = self._committed, []
        for apply in done:  # this process's vector index follows only what was committed
            apply()

    def _on_commit(self, apply: Callable[[], None]) -> None:
        """Run `apply` once the current (outermost) write transaction has committed."""
        self._committed.append(apply)

    def _vector_added(self, agent: str, seq: int, vector: np.ndarray, span: tuple[int, int]) -> None:
        if self.vectors is not None:
            index = self.vectors
            self._on_commit(lambda: index.add(agent, seq, vector, span))

    def _vectors_removed(self, agent: str, seqs: list[int], span: tuple[int, int]) -> None:
        if self.vectors is not None:
            index = self.vectors
            self._on_commit(lambda: index.remove(agent, seqs, span))

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction around several store calls (a unit of work): all or nothing."""
        with self._tx():
            yield

    def _migrate(self) -> None:
        """Apply the named migrations not yet recorded, each in one transaction. The record is
        read inside that transaction, so processes starting together on one file apply each once."""
        folder = resources.files("memento.storage.migrations").joinpath("sqlite")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".sql"):
                continue
            with self._tx() as conn:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
                if conn.execute("SELECT 1 FROM schema_migrations WHERE name = ?", (entry.name,)).fetchone():
                    continue
                script = entry.read_text(encoding="utf-8")
                for statement in _statements(script):
                    conn.execute(statement)
                if "writable_schema" in script:  # a schema text edit: make every connection reload it
                    version = conn.execute("PRAGMA schema_version").fetchone()[0]
                    conn.execute(f"PRAGMA schema_version = {int(version) + 1}")
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (entry.name, ts(datetime.now(UTC))))
            log.info("applied migration %s", entry.name)

    def ping(self, timeout_s: float = PING_TIMEOUT_S) -> None:
        """A real query on a fresh connection to the configured file (`/health`); raises when the
        database cannot be reached. A fresh connection, because the long-lived ones keep working
        on an open file descriptor after the file or its volume is gone."""
        uri = self.path.expanduser().resolve().as_uri() + "?mode=rw"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout_s)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            conn.execute("SELECT 1 FROM schema_migrations LIMIT 1").fetchall()
        finally:
            conn.close()

    def size_summary(self) -> dict[str, Any]:
        """Fragments per TTL tier (working memory apart) and the number of agents, for metrics."""
        conn = self._reader()
        rows = conn.execute(
            "SELECT ttl_tier, session_id IS NOT NULL, COUNT(*) FROM fragments GROUP BY 1, 2"
        ).fetchall()
        by_tier = {t.value: 0 for t in TTLTier}
        working = 0
        for tier, in_session, count in rows:
            if in_session:
                working += int(count)
            else:
                by_tier[str(tier)] = by_tier.get(str(tier), 0) + int(count)
        agents = conn.execute("SELECT COUNT(DISTINCT agent_id) FROM fragments").fetchone()[0]
        return {"by_tier": by_tier, "working_memory": working, "agents": int(agents)}

    def migrations(self) -> list[str]:
        return [r[0] for r in self._reader().execute("SELECT name FROM schema_migrations ORDER BY name")]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._access.close()
        if self.vectors is not None:
            self.vectors.save()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        with self._write_lock:
            self._writer.execute("PRAGMA optimize")
            self._writer.close()

    # ------------------------------------------------------------ vectors

    def _load_vectors(self, agent: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every stored vector of the agent for the current model (benchmarks compare with it)."""
        assert self.vectors is not None
        return self.vectors.source.load(agent)

    def _store_vector(self, conn: sqlite3.Connection, seq: int, agent: str, vector: np.ndarray) -> Span:
        """Write a vector; returns the clock span of the write, for this process's index."""
        vec = np.ascontiguousarray(vector, dtype=np.float32)
        before = vector_clock(conn)
        conn.execute(
            "INSERT OR REPLACE INTO fragment_embeddings (seq, agent_id, model, dim, vector) VALUES (?, ?, ?, ?, ?)",
            (seq, agent, self.embedding_model, int(vec.shape[0]), vec.tobytes()),
        )
        return before, vector_clock(conn)

    # ------------------------------------------------------------ fragments

    def _visible(self, conn: sqlite3.Connection, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
        if not ids:
            return []
        where, params = _scope_sql(scope)
        rows = conn.execute(
            f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.id IN ({','.join('?' * len(ids))}) AND {where}",
            [*ids, *params],
        ).fetchall()
        by_id = {r["id"]: _row_to_fragment(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    def _require(self, conn: sqlite3.Connection, scope: AgentScope, fragment_id: str) -> Fragment:
        found = self._visible(conn, scope, [fragment_id])
        if not found:
            raise NotFound(f"fragment {fragment_id!r} not found")
        return found[0]

    def _index_text(self, conn: sqlite3.Connection, seq: int, content: str, keywords: list[str], topic: str) -> None:
        terms = " ".join(index_terms(content + " " + " ".join(keywords)))
        conn.execute(
            "INSERT INTO fragments_fts (rowid, terms, topic) VALUES (?, ?, ?)",
            (seq, terms, " ".join(index_terms(topic))),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO fragment_keywords (keyword, seq) VALUES (?, ?)",
            [(k, seq) for k in keywords],
        )

    def _unindex_text(self, conn: sqlite3.Connection, seq: int) -> None:
        conn.execute("DELETE FROM fragments_fts WHERE rowid = ?", (seq,))
        conn.execute("DELETE FROM fragment_keywords WHERE seq = ?", (seq,))

    @staticmethod
    def _same_content(conn: sqlite3.Connection, agent: str, digest: str, session: str | None) -> sqlite3.Row | None:
        # Spelled out per case so each uses its partial unique index (`IS ?` would scan).
        if session is None:
            sql, params = "f.session_id IS NULL", [agent, digest]
        else:
            sql, params = "f.session_id = ?", [agent, digest, session]
        return conn.execute(
            f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.agent_id = ? AND f.content_hash = ? AND {sql}",
            params,
        ).fetchone()

    def insert(self, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]:
        d = new.draft
        with self._tx() as conn:
            self._may_insert(conn, scope, new)
            existing = self._same_content(conn, new.agent_id, d.content_hash, new.session_id)
            if existing is not None and existing["deleted_at"] is None:
                return _row_to_fragment(existing), False
            if existing is not None:  # remembering soft-forgotten content again brings it back
                conn.execute("UPDATE fragments SET deleted_at = NULL WHERE seq = ?", (existing["seq"],))
                row = conn.execute(f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.seq = ?", (existing["seq"],)).fetchone()
                return _row_to_fragment(row), True
            targets = self._visible(conn, scope, list(dict.fromkeys(new.linked_to)))
            missing = set(new.linked_to) - {t.id for t in targets}
            if missing:
                raise NotFound(f"linkedTo fragment(s) not found: {', '.join(sorted(missing))}")
            created = ts(d.created_at)
            seq = conn.execute(
                "INSERT INTO fragments (id, content, topic, keywords, type, importance, content_hash, source,"
                " linked_to, agent_id, created_at, ttl_tier, estimated_tokens, verified_at, is_anchor, session_id,"
                f" {', '.join(RECORD_COLUMNS)})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                (
                    d.id, d.content, d.topic, json.dumps(d.keywords, ensure_ascii=False), d.type.value,
                    d.importance, d.content_hash, d.source,
                    json.dumps([t.id for t in targets]), new.agent_id, created, d.ttl_tier.value,
                    d.estimated_tokens, created, int(d.is_anchor), new.session_id,
                    *_record_values(new),
                ),
            ).fetchone()[0]
            self._index_text(conn, seq, d.content, d.keywords, d.topic)
            known = self._agents.peek("agents")
            if known is not None and new.agent_id not in known:  # a new namespace: scopes change
                self._on_commit(self._agents.clear)
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

    def session_owners(self, session_id: str) -> list[str]:
        """The namespaces whose working memory carries `session_id` (across every agent)."""
        rows = self._reader().execute(
            "SELECT DISTINCT agent_id FROM fragments WHERE session_id = ? ORDER BY agent_id", (session_id,)
        ).fetchall()
        return [r[0] for r in rows]

    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
        return self._visible(self._reader(), scope, list(ids))

    def update(self, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime) -> Fragment:
        with self._tx() as conn:
            old = self._require(conn, scope, fragment_id)
            _writable(scope, [old])
            conn.execute(
                "INSERT INTO fragment_versions (fragment_id, content, topic, keywords, type, importance, amended_at, amended_by)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (old.id, old.content, old.topic, json.dumps(old.keywords, ensure_ascii=False), old.type.value,
                 old.importance, ts(now), amended_by),
            )
            content = changes.content if changes.content is not None else old.content
            content_hash = changes.content_hash or old.content_hash
            if content_hash != old.content_hash:
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
                " metadata = ?, expires_at = ?, pinned = ?, memory_system = ?, privacy_scope = ? WHERE id = ?",  # changed_record's order
                (
                    content, content_hash,
                    changes.estimated_tokens if changes.estimated_tokens is not None else old.estimated_tokens,
                    topic, json.dumps(keywords, ensure_ascii=False),
                    (changes.type or old.type).value,
                    changes.importance if changes.importance is not None else old.importance,
                    (changes.ttl_tier or old.ttl_tier).value,
                    int(changes.is_anchor if changes.is_anchor is not None else old.is_anchor),
                    *_changed_record_values(old, changes),
                    old.id,
                ),
            )
            if (content, keywords, topic) != (old.content, old.keywords, old.topic):
                self._unindex_text(conn, old.seq)
                self._index_text(conn, old.seq, content, keywords, topic)
            if changes.embedding is not None and self.embedding_model:
                span = self._store_vector(conn, old.seq, old.agent_id, changes.embedding)
                self._vector_added(old.agent_id, old.seq, changes.embedding, span)
            elif changes.clear_embedding:
                before = vector_clock(conn)
                conn.execute("DELETE FROM fragment_embeddings WHERE seq = ?", (old.seq,))
                self._vectors_removed(old.agent_id, [old.seq], (before, vector_clock(conn)))
            row = conn.execute(f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.seq = ?", (old.seq,)).fetchone()
        return _row_to_fragment(row)

    def supersede(self, scope: AgentScope, old_id: str, new: NewFragment, importance_factor: float, now: datetime) -> tuple[Fragment, bool]:
        with self._tx():  # the three steps below join this one transaction
            old = self._require(self._writer, scope, old_id)
            fragment, created = self.insert(scope, new)
            if fragment.id == old.id:
                raise Conflict("the superseding content is identical to the original")
            self.add_link(scope, old.id, fragment.id, RelationType.SUPERSEDED_BY, now)
            self.update(
                scope, old.id,
                FragmentChanges(importance=round(old.importance * importance_factor, 4)),
                new.agent_id, now,
            )
        return fragment, created

    def find_by_topic(self, scope: AgentScope, topic: str) -> list[Fragment]:
        where, params = _scope_sql(scope)
        rows = self._reader().execute(
            f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.topic = ? AND f.session_id IS NULL AND {where}",
            [topic, *params],
        ).fetchall()
        return [_row_to_fragment(r) for r in rows]

    def delete(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        removed: dict[str, list[int]] = {}
        with self._tx() as conn:
            found = self._visible(conn, scope, list(ids))
            if not found:
                return []
            _writable(scope, found)
            before = vector_clock(conn)
            gone = [f.id for f in found]
            marks = ",".join("?" * len(gone))
            for f in found:
                self._unindex_text(conn, f.seq)
                removed.setdefault(f.agent_id, []).append(f.seq)
            conn.execute(
                "UPDATE fragments SET linked_to = (SELECT json_group_array(j.value) FROM json_each(fragments.linked_to) j"
                f" WHERE j.value NOT IN ({marks})) WHERE seq IN (SELECT f.seq FROM fragments f, json_each(f.linked_to) j"
                f" WHERE j.value IN ({marks}))",
                [*gone, *gone],
            )
            conn.execute(f"DELETE FROM fragments WHERE id IN ({marks})", gone)  # vectors go by cascade
            span = before, vector_clock(conn)
            for agent, seqs in removed.items():
                self._vectors_removed(agent, seqs, span)
        return gone

    def soft_delete(self, scope: AgentScope, ids: Sequence[str], now: datetime) -> list[str]:
        with self._tx() as conn:
            found = self._visible(conn, scope, list(ids))
            _writable(scope, found)
            gone = [f.id for f in found]
            if gone:
                marks = ",".join("?" * len(gone))
                conn.execute(f"UPDATE fragments SET deleted_at = ? WHERE id IN ({marks})", [ts(now), *gone])
        return gone

    def restore(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        where, params = _scope_sql(scope)
        where = where.replace("f.deleted_at IS NULL", "f.deleted_at IS NOT NULL", 1)
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.id IN ({','.join('?' * len(ids))}) AND {where}",
                [*ids, *params],
            ).fetchall() if ids else []
            found = [_row_to_fragment(r) for r in rows]
            _writable(scope, found)
            back = [f.id for f in found]
            if back:
                conn.execute(f"UPDATE fragments SET deleted_at = NULL WHERE id IN ({','.join('?' * len(back))})", back)
        return back

    def list_fragments(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]:
        """Anchors first, then by importance, newest first among equals."""
        return self._select(scope, filt, "f.is_anchor DESC, f.importance DESC, f.created_at DESC", limit)

    def recent(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]:
        """Newest first."""
        return self._select(scope, filt, "f.created_at DESC", limit)

    def _select(self, scope: AgentScope, filt: SearchFilter, order: str, limit: int) -> list[Fragment]:
        where, params = _scope_sql(scope, use_index=True)
        fwhere, fparams = _filter_sql(filt)
        rows = self._reader().execute(
            f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE {where} AND {fwhere} ORDER BY {order} LIMIT ?",
            [*params, *fparams, limit],
        ).fetchall()
        return [_row_to_fragment(r) for r in rows]

    def page(self, scope: AgentScope, filt: SearchFilter, before_seq: int | None, limit: int) -> list[Fragment]:
        """Newest first by insertion order, strictly before `before_seq` (a stable keyset page)."""
        where, params = _scope_sql(scope, use_index=True)
        fwhere, fparams = _filter_sql(filt)
        bound = "AND f.seq < ?" if before_seq is not None else ""
        extra = [before_seq] if before_seq is not None else []
        rows = self._reader().execute(
            f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE {where} AND {fwhere} {bound}"
            " ORDER BY f.seq DESC LIMIT ?",
            [*params, *fparams, *extra, limit],
        ).fetchall()
        return [_row_to_fragment(r) for r in rows]

    def topics(self, scope: AgentScope, prefix: str, limit: int) -> list[tuple[str, int]]:
        """Topics of permanent fragments starting with `prefix`, with their fragment counts."""
        where, params = _scope_sql(scope, use_index=True)
        rows = self._reader().execute(
            f"SELECT f.topic, COUNT(*) FROM fragments f WHERE {where} AND f.session_id IS NULL"
            " AND substr(f.topic, 1, ?) = ? GROUP BY f.topic ORDER BY f.topic LIMIT ?",
            [*params, len(prefix), prefix, limit],
        ).fetchall()
        return [(r[0], int(r[1])) for r in rows]

    def ids_with_prefix(self, scope: AgentScope, prefix: str, limit: int) -> list[str]:
        """Visible fragment ids (permanent or working memory) starting with `prefix`."""
        where, params = _scope_sql(scope, use_index=True)
        rows = self._reader().execute(
            f"SELECT f.id FROM fragments f WHERE {where} AND substr(f.id, 1, ?) = ? ORDER BY f.id LIMIT ?",
            [*params, len(prefix), prefix, limit],
        ).fetchall()
        return [r[0] for r in rows]

    def rank_features(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, RankFeatures]:
        if not ids:
            return {}
        where, params = _scope_sql(scope)
        rows = self._reader().execute(
            "SELECT f.id, f.importance, f.created_at, f.accessed_at FROM fragments f"
            f" WHERE f.id IN ({','.join('?' * len(ids))}) AND {where}",
            [*ids, *params],
        ).fetchall()
        return {
            r[0]: RankFeatures(r[1], parse_ts(r[2]) or datetime.now(UTC), parse_ts(r[3])) for r in rows
        }

    def count(self, scope: AgentScope, filt: SearchFilter) -> int:
        where, params = _scope_sql(scope, use_index=True)
        fwhere, fparams = _filter_sql(filt)
        return int(self._reader().execute(
            f"SELECT COUNT(*) FROM fragments f WHERE {where} AND {fwhere}", [*params, *fparams]
        ).fetchone()[0])

    def expunge_session(self, session_id: str, agent_id: str) -> int:
        """Delete the working memory `agent_id` keeps under `session_id` (never another's)."""
        ids = [r[0] for r in self._reader().execute(
            "SELECT id FROM fragments WHERE session_id = ? AND agent_id = ?", (session_id, agent_id)
        )]
        return len(self.delete(AgentScope("system"), ids))

    # ------------------------------------------------------------ links

    def add_link(self, scope: AgentScope, from_id: str, to_id: str, relation: RelationType, now: datetime) -> bool:
        if from_id == to_id:
            raise InvalidArgument("a fragment cannot link to itself")
        with self._tx() as conn:
            source = self._require(conn, scope, from_id)
            _writable(scope, [source])
            self._require(conn, scope, to_id)
            cursor = conn.execute(
                "INSERT INTO fragment_links (from_id, to_id, relation_type, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(from_id, to_id) DO UPDATE SET relation_type = excluded.relation_type",
                (from_id, to_id, relation.value, ts(now)),
            )
            if to_id not in source.linked_to:
                conn.execute(
                    "UPDATE fragments SET linked_to = ? WHERE id = ?",
                    (json.dumps([*source.linked_to, to_id]), from_id),
                )
            return bool(cursor.rowcount > 0)

    def neighbours(self, scope: AgentScope, ids: Sequence[str], relations: Sequence[RelationType], limit: int) -> list[tuple[Link, Fragment]]:
        if not ids or not relations or limit <= 0:
            return []
        where, params = _scope_sql(scope)
        id_marks = ",".join("?" * len(ids))
        rel_marks = ",".join("?" * len(relations))
        rels = [r.value for r in relations]
        rows = self._reader().execute(
            f"SELECT l.from_id AS l_from, l.to_id AS l_to, l.relation_type AS l_rel, l.created_at AS l_created,"
            f" {_FRAGMENT_COLUMNS} FROM fragment_links l JOIN fragments f"
            " ON (f.id = l.to_id AND l.from_id IN ({ids})) OR (f.id = l.from_id AND l.to_id IN ({ids}))"
            f" WHERE l.relation_type IN ({rel_marks}) AND {where} ORDER BY l.id LIMIT ?".replace("{ids}", id_marks),
            [*ids, *ids, *rels, *params, limit],
        ).fetchall()
        out = []
        for r in rows:
            link = Link(r["l_from"], r["l_to"], RelationType(r["l_rel"]), parse_ts(r["l_created"]) or datetime.now(UTC))
            out.append((link, _row_to_fragment(r)))
        return out

    def versions(self, scope: AgentScope, fragment_id: str) -> list[dict[str, object]]:
        conn = self._reader()
        self._require(conn, scope, fragment_id)
        rows = conn.execute(
            "SELECT content, topic, keywords, type, importance, amended_at, amended_by FROM fragment_versions"
            " WHERE fragment_id = ? ORDER BY id",
            (fragment_id,),
        ).fetchall()
        return [{**dict(r), "keywords": json.loads(r["keywords"])} for r in rows]

    # ------------------------------------------------------------ retrieval tiers

    def keyword_search(self, scope: AgentScope, keywords: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        if not keywords:
            return []
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt)
        rows = self._reader().execute(
            "SELECT f.id, COUNT(*) AS matched FROM fragment_keywords k JOIN fragments f ON f.seq = k.seq"
            f" WHERE k.keyword IN ({','.join('?' * len(keywords))}) AND {where} AND {fwhere}"
            " GROUP BY f.seq ORDER BY matched DESC, f.importance DESC, f.created_at DESC LIMIT ?",
            [*keywords, *params, *fparams, limit],
        ).fetchall()
        return [Hit(r[0], float(r[1])) for r in rows]

    def _selective_terms(self, scope: AgentScope, terms: Sequence[str]) -> list[str]:
        """The common-term policy (storage/terms.py) with counts taken within `scope`.

        FTS5's vocabulary table counts over every agent; it is exact for a scope that sees every
        agent present (one agent per store, or maintenance) and an upper bound otherwise: a term
        under the bound is rare in the scope too, the others are counted through the index."""
        conn = self._reader()
        agents = scope.visible_agents()
        present = self._agents.get("agents", lambda: frozenset(
            r[0] for r in conn.execute("SELECT DISTINCT agent_id FROM fragments")
        ))
        whole = agents is None or present <= set(agents)

        def vocab(words: Sequence[str]) -> dict[str, int]:
            marks = ",".join("?" * len(words))
            return dict(conn.execute(f"SELECT term, doc FROM fragments_fts_vocab WHERE term IN ({marks})", list(words)).fetchall())

        def scoped(word: str, cap: int | None) -> int:
            where, params = _scope_sql(scope)
            inner = (
                "SELECT 1 FROM fragments_fts m JOIN fragments f ON f.seq = m.rowid"
                f" WHERE fragments_fts MATCH ? AND {where}" + (" LIMIT ?" if cap is not None else "")
            )
            args = [_fts_query([word]), *params, *([cap] if cap is not None else [])]
            return int(conn.execute(f"SELECT COUNT(*) FROM ({inner})", args).fetchone()[0])

        def capped(words: Sequence[str], common: int) -> dict[str, int]:
            bound = vocab(words)
            if whole:
                return bound
            return {w: (n if n < common else scoped(w, common)) for w, n in bound.items()}

        def exact(words: Sequence[str]) -> dict[str, int]:
            return vocab(words) if whole else {w: scoped(w, None) for w in words}

        return terms_policy.choose(terms, self._scope_size(scope, whole), capped, exact)

    def _scope_size(self, scope: AgentScope, whole: bool) -> int:
        """Live fragments visible to `scope` (cached for a few seconds: the policy needs magnitudes)."""
        key = None if whole else scope.visible_agents()

        def count() -> int:
            where, params = _scope_sql(scope, use_index=True) if not whole else _scope_sql(AgentScope("system"))
            return int(self._reader().execute(f"SELECT COUNT(*) FROM fragments f WHERE {where}", params).fetchone()[0])

        return self._sizes.get(key, count)

    def text_search(self, scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        terms = self._selective_terms(scope, terms) if terms else []
        if not terms:
            return []
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt)
        rows = self._reader().execute(
            # Materialise the full-text matches first: joined directly, the planner may probe
            # the FTS index once per fragment row.
            "WITH m AS MATERIALIZED (SELECT rowid AS seq, bm25(fragments_fts, 1.0, 0.3) AS rank"
            " FROM fragments_fts WHERE fragments_fts MATCH ?)"
            f" SELECT f.id, m.rank FROM m JOIN fragments f ON f.seq = m.seq"
            f" WHERE {where} AND {fwhere} ORDER BY m.rank LIMIT ?",
            [_fts_query(terms), *params, *fparams, limit],
        ).fetchall()
        return [Hit(r[0], -float(r[1])) for r in rows]

    def vector_search(self, scope: AgentScope, vector: np.ndarray, filt: SearchFilter, limit: int) -> list[Hit]:
        if self.vectors is None:
            return []
        agents = scope.visible_agents()
        if agents is None:
            agents = tuple(r[0] for r in self._reader().execute("SELECT DISTINCT agent_id FROM vector_changes"))
        narrowed = filt.topic is not None or filt.type is not None or bool(filt.types) or filt.only_session
        candidates: list[tuple[int, float]] = []
        for agent in agents:
            candidates.extend(self.vectors.search(agent, vector, limit * (4 if narrowed else 2)))
        candidates.sort(key=lambda c: -c[1])
        hits = self._keep_visible(scope, filt, candidates)[:limit]
        if narrowed and len(hits) < limit:
            hits = self._exact_filtered(scope, filt, vector, limit) or hits
        return hits

    def _keep_visible(self, scope: AgentScope, filt: SearchFilter, candidates: list[tuple[int, float]]) -> list[Hit]:
        if not candidates:
            return []
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt)
        seqs = [c[0] for c in candidates]
        rows = self._reader().execute(
            f"SELECT f.seq, f.id FROM fragments f WHERE f.seq IN ({','.join('?' * len(seqs))}) AND {where} AND {fwhere}",
            [*seqs, *params, *fparams],
        ).fetchall()
        ids = {r[0]: r[1] for r in rows}
        return [Hit(ids[s], sim) for s, sim in candidates if s in ids]

    def _exact_filtered(self, scope: AgentScope, filt: SearchFilter, vector: np.ndarray, limit: int) -> list[Hit]:
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt)
        rows = self._reader().execute(
            "SELECT f.id, e.vector FROM fragment_embeddings e JOIN fragments f ON f.seq = e.seq"
            f" WHERE e.model = ? AND {where} AND {fwhere} LIMIT ?",
            [self.embedding_model, *params, *fparams, EXACT_FALLBACK_LIMIT],
        ).fetchall()
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        sims = matrix @ vector.astype(np.float32)
        order = np.argsort(-sims)[:limit]
        return [Hit(rows[i][0], float(sims[i])) for i in order]

    def record_access(self, ids: Sequence[str], at: datetime) -> None:
        """Buffer access statistics; they are written in batches (storage/access.py)."""
        self._access.record(ids, at)

    def flush_access(self) -> None:
        """Write the buffered access statistics now (views and consolidation read settled counts)."""
        self._access.flush()

    def _write_access(self, pending: Pending) -> Pending:
        with self._tx() as conn:
            conn.executemany(
                "UPDATE fragments SET access_count = access_count + ?, accessed_at = MAX(COALESCE(accessed_at, ''), ?) WHERE id = ?",
                [(count, ts(at), fid) for fid, (count, at) in pending.items()],
            )
        return {}

    # ------------------------------------------------------------ embeddings

    def set_embedding(self, fragment_id: str, vector: np.ndarray) -> None:
        with self._tx() as conn:
            row = conn.execute("SELECT seq, agent_id FROM fragments WHERE id = ?", (fragment_id,)).fetchone()
            if row is None:
                return  # deleted meanwhile
            span = self._store_vector(conn, row[0], row[1], vector)
            self._vector_added(row[1], row[0], vector, span)

    def missing_embeddings(self, scope: AgentScope, limit: int, after_seq: int = 0) -> list[tuple[int, str, str]]:
        where, params = _scope_sql(scope)
        rows = self._reader().execute(
            "SELECT f.seq, f.id, f.content FROM fragments f LEFT JOIN fragment_embeddings e"
            f" ON e.seq = f.seq AND e.model = ? WHERE e.seq IS NULL AND f.seq > ? AND {where} ORDER BY f.seq LIMIT ?",
            [self.embedding_model, after_seq, *params, limit],
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def clear_embeddings(self) -> int:
        """Drop every stored vector (before a full re-embedding); every index, in every process,
        notices through the change log and rebuilds."""
        with self._tx() as conn:
            count = conn.execute("DELETE FROM fragment_embeddings").rowcount
        return int(count)

    # ------------------------------------------------------------ feedback, statistics

    def add_tool_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int:
        with self._tx() as conn:
            return int(conn.execute(
                "INSERT INTO tool_feedback (agent_id, tool_name, relevant, sufficient, suggestion, context, session_id,"
                " trigger_type, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (agent_id, row["tool_name"], int(bool(row["relevant"])), int(bool(row["sufficient"])),
                 row.get("suggestion"), row.get("context"), row.get("session_id"),
                 row.get("trigger_type", "voluntary"), ts(now)),
            ).fetchone()[0])

    def add_task_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int:
        with self._tx() as conn:
            return int(conn.execute(
                "INSERT INTO task_feedback (agent_id, session_id, overall_success, tool_highlights, tool_pain_points,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (agent_id, row["session_id"], int(bool(row["overall_success"])),
                 json.dumps(row.get("tool_highlights", []), ensure_ascii=False),
                 json.dumps(row.get("tool_pain_points", []), ensure_ascii=False), ts(now)),
            ).fetchone()[0])

    def task_feedback(self, session_id: str) -> list[dict[str, object]]:
        """A session's task_feedback rows, oldest first, in plain Python values."""
        rows = self._reader().execute("SELECT * FROM task_feedback WHERE session_id = ? ORDER BY id", (session_id,)).fetchall()
        return [_export_row("task_feedback", dict(r)) for r in rows]

    def tool_feedback(self, feedback_id: int) -> dict[str, object] | None:
        """One tool_feedback row (for operators and tests), in plain Python values."""
        row = self._reader().execute("SELECT * FROM tool_feedback WHERE id = ?", (feedback_id,)).fetchone()
        return _export_row("tool_feedback", dict(row)) if row is not None else None

    def stats(self, scope: AgentScope) -> dict[str, object]:
        conn = self._reader()
        where, params = _scope_sql(scope, use_index=True)
        total = conn.execute(f"SELECT COUNT(*) FROM fragments f WHERE {where} AND f.session_id IS NULL", params).fetchone()[0]
        working = conn.execute(f"SELECT COUNT(*) FROM fragments f WHERE {where} AND f.session_id IS NOT NULL", params).fetchone()[0]
        tiers = dict(conn.execute(f"SELECT ttl_tier, COUNT(*) FROM fragments f WHERE {where} AND f.session_id IS NULL GROUP BY ttl_tier", params).fetchall())
        types = dict(conn.execute(f"SELECT type, COUNT(*) FROM fragments f WHERE {where} AND f.session_id IS NULL GROUP BY type", params).fetchall())
        embedded, indexed = self._embedded_and_indexed(scope)
        utility = conn.execute(f"SELECT AVG(utility_score), AVG(importance) FROM fragments f WHERE {where} AND f.session_id IS NULL", params).fetchone()
        anchors = conn.execute(f"SELECT COUNT(*) FROM fragments f WHERE {where} AND f.is_anchor = 1", params).fetchone()[0]
        links = conn.execute(
            f"SELECT COUNT(*) FROM fragment_links l JOIN fragments f ON f.id = l.from_id WHERE {where}", params
        ).fetchone()[0]
        return {
            "total": total,
            "working_memory": working,
            "by_tier": {t.value: int(tiers.get(t.value, 0)) for t in TTLTier},
            "by_type": {t.value: int(types.get(t.value, 0)) for t in FragmentType},
            "anchors": anchors,
            "links": links,
            "embedded": embedded,
            "indexed": indexed,
            # What recall can find by meaning: vectors in this process's index, not only rows on disk.
            "embedding_coverage": round(indexed / total, 4) if total else 1.0,
            "index_coverage": round(indexed / embedded, 4) if embedded else 1.0,
            "mean_utility_score": round(utility[0], 4) if utility[0] is not None else None,
            "mean_importance": round(utility[1], 4) if utility[1] is not None else None,
        }

    def _embedded_and_indexed(self, scope: AgentScope) -> tuple[int, int]:
        """Fragments (working memory apart) with a vector of the current model, and how many of
        those this process's vector index holds once caught up with the database."""
        where, params = _scope_sql(scope, use_index=True)
        rows = self._reader().execute(
            "SELECT f.agent_id, f.seq FROM fragments f JOIN fragment_embeddings e ON e.seq = f.seq AND e.model = ?"
            f" WHERE {where} AND f.session_id IS NULL",
            [self.embedding_model, *params],
        ).fetchall()
        if self.vectors is None:
            return len(rows), 0
        by_agent: dict[str, list[int]] = {}
        for agent, seq in rows:
            by_agent.setdefault(agent, []).append(seq)
        held = sum(self.vectors.held(agent, np.array(seqs, dtype=np.uint64)) for agent, seqs in by_agent.items())
        return len(rows), held

    # ------------------------------------------------------------ bulk copy (BulkStore)

    def embedding_shapes(self) -> list[tuple[str, int]]:
        """The (model, dimensions) pairs of the stored vectors."""
        rows = self._reader().execute("SELECT DISTINCT model, dim FROM fragment_embeddings ORDER BY model, dim").fetchall()
        return [(str(r[0]), int(r[1])) for r in rows]

    def count_rows(self, table: str) -> int:
        _bulk_table(table)
        return int(self._reader().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def export_rows(self, table: str, after: int, limit: int) -> list[dict[str, object]]:
        """Up to `limit` rows of `table` whose paging key is above `after`, in key order."""
        key = _bulk_table(table)
        conn = self._reader()
        columns = ", ".join(f"f.{c}" for c in BULK_COLUMNS[table])
        if table == "fragments":
            rows = conn.execute(
                f"SELECT f.seq, {columns}, e.model AS embedding_model, e.vector AS embedding FROM fragments f"
                " LEFT JOIN fragment_embeddings e ON e.seq = f.seq WHERE f.seq > ? ORDER BY f.seq LIMIT ?",
                (after, limit),
            ).fetchall()
        else:
            rows = conn.execute(
                f"SELECT {columns} FROM {table} f WHERE f.{key} > ? ORDER BY f.{key} LIMIT ?", (after, limit)
            ).fetchall()
        return [_export_row(table, dict(r)) for r in rows]

    def import_rows(self, table: str, rows: Sequence[dict[str, object]]) -> int:
        """Insert rows exported by any backend; rows already present are skipped. Returns how many
        were inserted. Fragments get their full-text and keyword entries and their vectors."""
        _bulk_table(table)
        inserted = 0
        self._agents.clear()
        with self._tx() as conn:  # vector indexes catch up through the change log
            for row in rows:
                if table == "fragments":
                    inserted += self._import_fragment(conn, row)
                    continue
                values = _import_values(table, row)
                columns = ", ".join(values)  # the fixed BULK_COLUMNS names, never the row's own keys
                cursor = conn.execute(
                    f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(values))}) ON CONFLICT DO NOTHING",
                    list(values.values()),
                )
                inserted += max(cursor.rowcount, 0)
        return inserted

    def _import_fragment(self, conn: sqlite3.Connection, row: dict[str, object]) -> int:
        keywords = [str(k) for k in row["keywords"]]  # type: ignore[attr-defined]
        values = _import_values("fragments", row)
        if values["memory_system"] is None:
            working = values["session_id"] is not None
            values["memory_system"] = memory_system_for(FragmentType(str(values["type"])), working=working).value
        found = conn.execute(
            f"INSERT INTO fragments ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})"
            " ON CONFLICT DO NOTHING RETURNING seq",
            list(values.values()),
        ).fetchone()
        if found is None:
            return 0
        seq = int(found[0])
        self._index_text(conn, seq, str(row["content"]), keywords, str(row["topic"]))
        vector = row.get("embedding")
        if vector is not None:
            vec = np.ascontiguousarray(vector, dtype=np.float32)
            conn.execute(
                "INSERT OR REPLACE INTO fragment_embeddings (seq, agent_id, model, dim, vector) VALUES (?, ?, ?, ?, ?)",
                (seq, row["agent_id"], row["embedding_model"], int(vec.shape[0]), vec.tobytes()),
            )
        return 1

    def finish_import(self) -> None:
        """Nothing to do: AUTOINCREMENT counters follow explicit ids, indexes are kept per batch."""


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration script, trigger bodies kept whole."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                yield pending
            pending = ""
    if pending.strip() and not all(ln.strip().startswith("--") or not ln.strip() for ln in pending.splitlines()):
        raise ValueError("a migration ends with an incomplete statement")


def _bulk_table(table: str) -> str:
    if table not in BULK_KEYS:
        raise InvalidArgument(f"unknown table {table!r}")
    return BULK_KEYS[table]


def _ts_or_none(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return ts(value)
    return ts(datetime.fromisoformat(str(value)))


_JSON_COLUMNS = {"keywords", "linked_to", "tool_highlights", "tool_pain_points", "tags", "metadata", "origin_trace"}
_BOOL_COLUMNS = {"is_anchor", "relevant", "sufficient", "overall_success", "pinned"}
_TIME_COLUMNS = {"accessed_at", "created_at", "verified_at", "amended_at", "expires_at", "deleted_at"}


def _record_values(new: NewFragment) -> list[object]:
    """The shared-record columns of an insert, in RECORD_COLUMNS order."""
    return [_sqlite_value(n, v) for n, v in new_record(new).items()]


def _changed_record_values(old: Fragment, changes: FragmentChanges) -> list[object]:
    """The record columns of an amend's UPDATE, in changed_record's order."""
    return [_sqlite_value(n, v) for n, v in changed_record(old, changes).items()]


def _sqlite_value(name: str, value: object) -> object:
    """A plain Python column value as SQLite stores it."""
    if name in _JSON_COLUMNS:
        return None if value is None else json.dumps(value, ensure_ascii=False, default=list)
    if name in _BOOL_COLUMNS:
        return int(bool(value))
    if name in _TIME_COLUMNS:
        return _ts_or_none(value)
    return value


def _export_row(table: str, row: dict[str, Any]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, value in row.items():
        if name in _JSON_COLUMNS:
            out[name] = None if value is None else json.loads(value)
        elif name in _BOOL_COLUMNS:
            out[name] = bool(value)
        elif name in _TIME_COLUMNS:
            out[name] = parse_ts(value)
        elif name == "embedding":
            out[name] = None if value is None else np.frombuffer(value, dtype=np.float32).copy()
        else:
            out[name] = value
    return out


def _import_values(table: str, row: dict[str, object]) -> dict[str, object]:
    values: dict[str, object] = {}
    for name in BULK_COLUMNS[table]:
        value = row.get(name)
        if value is None and table == "fragments":
            value = FRAGMENT_DEFAULTS.get(name)
        values[name] = _sqlite_value(name, value)
    return values
