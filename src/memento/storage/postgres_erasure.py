"""Hard erasure on PostgreSQL (004 §5.1 forget mode=hard).

In one transaction: the fragments (their `search` vector and `embedding` are columns of the row;
the term and keyword lookup tables, versions, links and entity associations go by cascade),
version rows holding text merged from them into other memories, the references derived memories
hold, and the receipt. After the commit `scrub` runs a VACUUM of the touched tables, which takes
the dead rows out of the tables and their indexes so no query plan, index-only scan or
`pageinspect` of a live page reaches them. What PostgreSQL does not do: zero the space a dead
row leaves (it is overwritten when reused), or touch its WAL, a replica's copy, a base backup
or a WAL archive; those are the operator's (docs/erasure.md). VACUUM needs the tables' owner,
or the MAINTAIN privilege (PostgreSQL 17+, granted to the application role by the migrations):
without it the step is skipped and the receipt says so (`vacuumed: 0`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..analysis import content_hash
from ..models import AgentScope, Fragment
from .merged import MERGED, merged_from
from .postgres_db import SYSTEM, Cursor, PostgresDatabase, _as, retried
from .postgres_fragments import PostgresFragments
from .postgres_rows import _COLUMNS, _row_to_fragment
from .postgres_sql import scope_sql, write_sql
from .protocol import ErasedVersion, ErasureTargets, StoredReceipt, names_any, strip_reference
from .sqlfilter import live_sql

log = logging.getLogger(__name__)

VACUUMED = (
    "fragments",
    "fragment_versions",
    "fragment_links",
    "fragment_terms",
    "fragment_keywords",
    "fragment_tags",
    "fragment_references",
    "entity_memories",
    "memory_linkages",
)


def any_state_sql(scope: AgentScope) -> tuple[str, list[Any]]:
    """The rows of the agents `scope` sees, soft-deleted and expired ones included."""
    where, params = scope_sql(scope)
    return where.replace(live_sql("f", "now()"), "TRUE", 1), params


class PostgresErasure:
    """The ErasureStore protocol on PostgreSQL."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def erasure_targets(self, scope: AgentScope, ids: Sequence[str], topic: str | None = None) -> ErasureTargets:
        where, params = any_state_sql(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            if topic is not None:
                cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.topic = %s AND {where}", [topic, *params])
            else:
                cur.execute(f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {where}", [list(ids), *params])
            fragments = [_row_to_fragment(r) for r in cur.fetchall()]
            found = [f.id for f in fragments]
            named = found if topic is not None else list(dict.fromkeys(ids))
            cur.execute("SELECT id, fragment_id, content FROM agent_memory.fragment_versions WHERE fragment_id = ANY(%s)", (found,))
            versions = [ErasedVersion(int(r["id"]), r["fragment_id"], r["content"]) for r in cur.fetchall()]
            wanted = set(named)
            cur.execute(  # one scan for every id named: the notes are read in Python (storage/merged.py)
                "SELECT v.id, v.fragment_id, v.note FROM agent_memory.fragment_versions v"
                " JOIN agent_memory.fragments f ON f.id = v.fragment_id"
                f" WHERE strpos(v.note, %s) > 0 AND {where} AND {write_sql(scope)}",
                [MERGED, *params],
            )
            sources = {
                int(r["id"]): (r["fragment_id"], merged_from(r["note"], wanted)) for r in cur.fetchall() if r["fragment_id"] not in found
            }
            chosen = [i for i, (_, source) in sources.items() if source is not None]
            if chosen:
                cur.execute("SELECT id, content FROM agent_memory.fragment_versions WHERE id = ANY(%s) ORDER BY id", (chosen,))
                for r in cur.fetchall():
                    fragment_id, source = sources[int(r["id"])]
                    versions.append(ErasedVersion(int(r["id"]), fragment_id, r["content"], merged_from=source))
            cur.execute(
                f"SELECT {_COLUMNS} FROM agent_memory.fragments f WHERE {where} AND {write_sql(scope)} AND (f.source LIKE 'supersedes:%%'"
                " OR f.origin_trace IS NOT NULL OR f.metadata <> '{}'::jsonb)",
                params,
            )
            derived = [f for f in (_row_to_fragment(r) for r in cur.fetchall()) if f.id not in found and names_any(f, named)]
        return ErasureTargets(tuple(fragments), tuple(versions), tuple(derived))

    def erase(self, scope: AgentScope, targets: ErasureTargets) -> dict[str, int]:
        ids = targets.ids
        seqs = [f.seq for f in targets.fragments]
        named = list(dict.fromkeys([*ids, *(v.merged_from for v in targets.versions if v.merged_from)]))
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            _as(cur, SYSTEM)  # counted in every namespace: a cascade reaches rows the caller cannot see
            counts = {
                "row": len(ids),
                "fullText": _count(cur, "fragment_terms", "seq", seqs) + _count(cur, "fragment_keywords", "seq", seqs),
                "vectors": sum(1 for f in targets.fragments if f.has_embedding),
                "versions": len(targets.versions),
                "links": _links(cur, ids),
                "entityLinks": _count(cur, "entity_memories", "fragment_id", ids),
                "linkages": _linkages(cur, ids),
                "derived": len(targets.derived) + len({v.fragment_id for v in targets.versions if v.merged_from}),
            }
            _as(cur, scope.agent_id)
            merged = [v.id for v in targets.versions if v.merged_from]
            if merged:
                cur.execute("DELETE FROM agent_memory.fragment_versions WHERE id = ANY(%s)", (merged,))
            for f in targets.derived:
                _strip(cur, f, named)
            if ids:
                counts["links"] += PostgresFragments._remove(cur, scope, ids)
        return counts

    @retried
    def save_receipt(self, receipt: StoredReceipt) -> None:
        with self.db.tx(receipt.agent_id) as cur:
            cur.execute(
                "INSERT INTO agent_memory.erasure_receipts (id, agent_id, erased_at, receipt, digest, content_hashes, memory_seqs)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET receipt = excluded.receipt, digest = excluded.digest",
                (
                    receipt.id,
                    receipt.agent_id,
                    receipt.erased_at,
                    receipt.receipt,
                    receipt.digest,
                    list(receipt.content_hashes),
                    list(receipt.memory_seqs),
                ),
            )

    def scrub(self, agents: Sequence[str]) -> dict[str, int]:
        """VACUUM the touched tables (outside any transaction, as VACUUM must run); the tables
        this role may not vacuum are skipped."""
        done = 0
        try:
            with self.db.autocommit() as conn:
                for table in VACUUMED:
                    name = f"agent_memory.{table}"
                    row = conn.execute(
                        "SELECT pg_has_role(c.relowner, 'USAGE') OR (current_setting('server_version_num')::int >= 170000"
                        " AND has_table_privilege(%s, 'MAINTAIN')) AS may FROM pg_class c WHERE c.oid = %s::regclass",
                        (name, name),
                    ).fetchone()
                    if row and row["may"]:
                        conn.execute(f"VACUUM {name}")
                        done += 1
        except psycopg.Error as exc:  # best effort: the erasure itself is committed
            log.warning("VACUUM after an erasure failed: %s", exc)
        if done < len(VACUUMED):
            log.info("VACUUM after an erasure: %d of %d tables (the others need their owner or MAINTAIN)", done, len(VACUUMED))
        return {"vacuumed": done}

    @retried
    def get_receipt(self, scope: AgentScope, receipt_id: str) -> StoredReceipt | None:
        with self.db.tx(scope.agent_id) as cur:
            sql, params = "SELECT * FROM agent_memory.erasure_receipts r WHERE r.id = %s", [receipt_id]
            if not scope.is_maintenance:
                sql, params = sql + " AND r.agent_id = %s", [receipt_id, scope.agent_id]
            cur.execute(sql, params)
            row = cur.fetchone()
        if row is None:
            return None
        return StoredReceipt(
            id=row["id"],
            agent_id=row["agent_id"],
            erased_at=row["erased_at"],
            receipt=row["receipt"],
            digest=row["digest"],
            content_hashes=tuple(row["content_hashes"]),
            memory_seqs=tuple(int(s) for s in row["memory_seqs"]),
        )

    @retried
    def erased_hashes(self, agent_id: str) -> set[str]:
        with self.db.tx(agent_id) as cur:
            cur.execute("SELECT content_hashes FROM agent_memory.erasure_receipts WHERE agent_id = %s", (agent_id,))
            return {h for r in cur.fetchall() for h in r["content_hashes"]}

    @retried
    def erasure_residue(self, scope: AgentScope, receipt: StoredReceipt, ids: Sequence[str]) -> dict[str, int]:
        seqs = list(receipt.memory_seqs)
        hashes = sorted(receipt.content_hashes)
        with self.db.tx(SYSTEM) as cur:
            rows = _count(cur, "fragments", "id", ids) + _count(cur, "fragments", "seq", seqs) + _count(cur, "fragment_tags", "seq", seqs)
            rows += _count(cur, "fragment_references", "seq", seqs) + _count(cur, "fragment_references", "target", ids)
            versions = _count(cur, "fragment_versions", "fragment_id", ids)
            erased = set(ids)
            cur.execute("SELECT note FROM agent_memory.fragment_versions WHERE strpos(note, %s) > 0", (MERGED,))
            versions += sum(1 for r in cur.fetchall() if merged_from(r["note"], erased) is not None)
            full_text = _count(cur, "fragment_terms", "seq", seqs) + _count(cur, "fragment_keywords", "seq", seqs)
            _as(cur, scope.agent_id)
            where, params = any_state_sql(scope)
            texts = 0
            if hashes:
                cur.execute(
                    f"SELECT COUNT(*) AS n FROM agent_memory.fragments f WHERE f.content_hash = ANY(%s) AND {where}", [hashes, *params]
                )
                texts = _n(cur)
                cur.execute(
                    "SELECT v.content FROM agent_memory.fragment_versions v JOIN agent_memory.fragments f ON f.id = v.fragment_id"
                    f" WHERE {where}",
                    params,
                )
                texts += sum(1 for r in cur.fetchall() if content_hash(r["content"]) in receipt.content_hashes)
        # The vectors are a column of the row: no row, no vector.
        return {"rows": rows, "versions": versions, "fullText": full_text, "vectors": rows, "contentHashes": texts}


def _n(cur: Cursor) -> int:
    row = cur.fetchone()
    return int(row["n"]) if row else 0


def _count(cur: Cursor, table: str, column: str, values: Sequence[object]) -> int:
    if not values:
        return 0
    cur.execute(f"SELECT COUNT(*) AS n FROM agent_memory.{table} WHERE {column} = ANY(%s)", (list(values),))
    return _n(cur)


def _links(cur: Cursor, ids: Sequence[str]) -> int:
    if not ids:
        return 0
    cur.execute("SELECT COUNT(*) AS n FROM agent_memory.fragment_links WHERE from_id = ANY(%s) OR to_id = ANY(%s)", (list(ids), list(ids)))
    return _n(cur)


def _strip(cur: Cursor, f: Fragment, named: Sequence[str]) -> None:
    """Remove a derived memory's references to erased ones: its source, and the entries of its
    origin trace and metadata that name them."""
    source = None if f.source and any(i in f.source for i in named) else f.source
    trace = strip_reference(f.origin_trace, named) if f.origin_trace is not None else None
    metadata = strip_reference(f.metadata, named)
    cur.execute(
        "UPDATE agent_memory.fragments SET source = %s, origin_trace = %s, metadata = %s WHERE id = %s",
        (source, Jsonb(trace) if trace else None, Jsonb(metadata or {}), f.id),
    )


def _linkages(cur: Cursor, ids: Sequence[str]) -> int:
    """Seed 003 linkages the erasure removes by cascade: those its memories hold, and those naming them."""
    cur.execute(
        "SELECT COUNT(*) AS n FROM agent_memory.memory_linkages WHERE fragment_id = ANY(%s) OR memory_id = ANY(%s)", (list(ids), list(ids))
    )
    row = cur.fetchone()
    return int(row["n"]) if row else 0
