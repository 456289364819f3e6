"""Hard erasure on SQLite (004 §5.1 forget mode=hard): the rows in one transaction, then the file.

In the transaction: the fragments with their full-text entries, keyword rows, vectors, version
trails, links and entity associations (by cascade), version rows that hold text merged from them
into other memories, and the references derived memories hold; the receipt joins it
(`save_receipt`). After it (`scrub`): FTS5 `optimize` rewrites the full-text index into one
segment, so no deleted term stays in an old one; the query planner's index samples
(`sqlite_stat4`, which may quote an indexed keyword) are dropped; a database that older versions
wrote without `secure_delete` is vacuumed once; `wal_checkpoint(TRUNCATE)` moves every page into
the main file and empties the WAL; the agents' vector indexes are rebuilt and their saved files
rewritten. Every connection runs with `PRAGMA secure_delete = ON` (sqlite_db.py), so what a
delete frees is zeroed rather than left in free space.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pysqlite3.dbapi2 as sqlite3

from ..analysis import content_hash
from ..models import AgentScope, Fragment
from .merged import MERGED, merged_from
from .protocol import ErasedVersion, ErasureTargets, StoredReceipt, names_any, strip_reference
from .sqlfilter import live_sql
from .sqlite_db import SQLiteDatabase
from .sqlite_fragments import SQLiteFragments
from .sqlite_sql import _FRAGMENT_COLUMNS, _row_to_fragment, _scope_sql, _write_sql, ts
from .vectors import VectorIndex

log = logging.getLogger(__name__)

CHECKPOINT_ATTEMPTS = 5


def any_state_sql(scope: AgentScope, alias: str = "f") -> tuple[str, list[Any]]:
    """The rows of the agents `scope` sees, soft-deleted and expired ones included."""
    where, params = _scope_sql(scope, alias)
    live = live_sql(alias, "?")
    return "1 = 1" + where[len(live) :], params[1:]


def _marks(items: Sequence[object]) -> str:
    return ",".join("?" * len(items))


class SQLiteErasure:
    """The ErasureStore protocol on one SQLite file."""

    def __init__(self, db: SQLiteDatabase, fragments: SQLiteFragments, vectors: VectorIndex | None) -> None:
        self.db = db
        self.fragments = fragments
        self.vectors = vectors

    # ------------------------------------------------------------ in the transaction

    def erasure_targets(self, scope: AgentScope, ids: Sequence[str], topic: str | None = None) -> ErasureTargets:
        with self.db.tx() as conn:  # joins the caller's transaction: its own writes are seen
            where, params = any_state_sql(scope)
            if topic is not None:
                rows = conn.execute(f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.topic = ? AND {where}", [topic, *params])
            elif ids:
                rows = conn.execute(
                    f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.id IN ({_marks(ids)}) AND {where}", [*ids, *params]
                )
            else:
                rows = conn.execute("SELECT 1 WHERE 0")
            fragments = [_row_to_fragment(r) for r in rows.fetchall()]
            found = [f.id for f in fragments]
            named = found if topic is not None else list(dict.fromkeys(ids))
            versions = [
                ErasedVersion(r[0], r[1], r[2])
                for r in (
                    conn.execute(f"SELECT id, fragment_id, content FROM fragment_versions WHERE fragment_id IN ({_marks(found)})", found)
                    if found
                    else []
                )
            ]
            wanted = set(named)
            for r in conn.execute(  # one scan for every id named: the notes are read in Python (storage/merged.py)
                "SELECT v.id, v.fragment_id, v.note FROM fragment_versions v JOIN fragments f ON f.id = v.fragment_id"
                f" WHERE instr(v.note, ?) > 0 AND {where} AND {_write_sql(scope)}",
                [MERGED, *params],
            ).fetchall():
                source = merged_from(r[2], wanted) if r[1] not in found else None
                if source is not None:
                    (content,) = conn.execute("SELECT content FROM fragment_versions WHERE id = ?", (r[0],)).fetchone()
                    versions.append(ErasedVersion(r[0], r[1], content, merged_from=source))
            derived = [
                f
                for f in (
                    _row_to_fragment(r)
                    for r in conn.execute(
                        f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE {where} AND {_write_sql(scope)} AND (f.source LIKE 'supersedes:%'"
                        " OR f.origin_trace IS NOT NULL OR f.metadata != '{}')",
                        params,
                    )
                )
                if f.id not in found and names_any(f, named)
            ]
        return ErasureTargets(tuple(fragments), tuple(versions), tuple(derived))

    def erase(self, scope: AgentScope, targets: ErasureTargets) -> dict[str, int]:
        ids = targets.ids
        seqs = [f.seq for f in targets.fragments]
        named = list(dict.fromkeys([*ids, *(v.merged_from for v in targets.versions if v.merged_from)]))
        with self.db.tx() as conn:
            conn.execute("PRAGMA secure_delete = ON")  # on for every connection; restated where it matters
            counts = {
                "row": len(ids),
                "fullText": _count(conn, "fragments_fts_docsize", "id", seqs) + _count(conn, "fragment_keywords", "seq", seqs),
                "vectors": _count(conn, "fragment_embeddings", "seq", seqs),
                "versions": len(targets.versions),
                "links": _links(conn, ids),
                "entityLinks": _count(conn, "entity_memories", "fragment_id", ids),
                "linkages": _linkages(conn, ids),
                "derived": len(targets.derived) + len({v.fragment_id for v in targets.versions if v.merged_from}),
            }
            merged = [v.id for v in targets.versions if v.merged_from]
            if merged:
                conn.execute(f"DELETE FROM fragment_versions WHERE id IN ({_marks(merged)})", merged)
            for f in targets.derived:
                _strip(conn, f, named)
            if targets.fragments:
                counts["links"] += self.fragments.remove_rows(conn, targets.fragments)
        return counts

    def save_receipt(self, receipt: StoredReceipt) -> None:
        with self.db.tx() as conn:
            conn.execute(
                "INSERT INTO erasure_receipts (id, agent_id, erased_at, receipt, digest, content_hashes, memory_seqs)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET receipt = excluded.receipt, digest = excluded.digest",
                (
                    receipt.id,
                    receipt.agent_id,
                    ts(receipt.erased_at),
                    receipt.receipt,
                    receipt.digest,
                    json.dumps(list(receipt.content_hashes)),
                    json.dumps(list(receipt.memory_seqs)),
                ),
            )

    # ------------------------------------------------------------ after the commit

    def scrub(self, agents: Sequence[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self.db.tx() as conn:
            conn.execute("INSERT INTO fragments_fts (fragments_fts) VALUES ('optimize')")
            counts["ftsOptimized"] = 1
            if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_stat4'").fetchone():
                counts["statSamples"] = conn.execute("DELETE FROM sqlite_stat4").rowcount
            pending = conn.execute("SELECT 1 FROM erasure_state WHERE name = 'vacuum_pending'").fetchone() is not None
        with self.db.exclusive() as writer:
            if pending:
                writer.execute("VACUUM")
                writer.execute("DELETE FROM erasure_state WHERE name = 'vacuum_pending'")
                log.info("vacuumed %s once: it held free space written without secure_delete", self.db.path)
            counts["vacuum"] = int(pending)
            counts["walCheckpoint"] = self._checkpoint(writer)
        files = 0
        if self.vectors is not None:
            for agent in dict.fromkeys(agents):
                files += self.vectors.rebuild(agent)
        counts["vectorIndexFiles"] = files
        return counts

    @staticmethod
    def _checkpoint(writer: sqlite3.Connection) -> int:
        """Copy every WAL page into the file and truncate the WAL; 1 when done. A reader in the
        middle of a read keeps the checkpoint from finishing: it is tried again (the busy
        handler waits for readers on each try)."""
        for _ in range(CHECKPOINT_ATTEMPTS):
            busy, _log, _done = writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return 1
        log.warning("the WAL could not be truncated after an erasure (a long read held it); the next checkpoint will")
        return 0

    # ------------------------------------------------------------ receipts and checks

    def get_receipt(self, scope: AgentScope, receipt_id: str) -> StoredReceipt | None:
        sql, params = "SELECT * FROM erasure_receipts WHERE id = ?", [receipt_id]
        if not scope.is_maintenance:
            sql, params = sql + " AND agent_id = ?", [receipt_id, scope.agent_id]
        row = self.db.reader().execute(sql, params).fetchone()
        if row is None:
            return None
        return StoredReceipt(
            id=row["id"],
            agent_id=row["agent_id"],
            erased_at=datetime.fromisoformat(row["erased_at"]),
            receipt=row["receipt"],
            digest=row["digest"],
            content_hashes=tuple(json.loads(row["content_hashes"])),
            memory_seqs=tuple(json.loads(row["memory_seqs"])),
        )

    def erased_hashes(self, agent_id: str) -> set[str]:
        rows = self.db.reader().execute("SELECT content_hashes FROM erasure_receipts WHERE agent_id = ?", (agent_id,))
        return {h for (raw,) in rows for h in json.loads(raw)}

    def erasure_residue(self, scope: AgentScope, receipt: StoredReceipt, ids: Sequence[str]) -> dict[str, int]:
        conn = self.db.reader()
        seqs = list(receipt.memory_seqs)
        versions = _count(conn, "fragment_versions", "fragment_id", ids)
        erased = set(ids)
        notes = conn.execute("SELECT note FROM fragment_versions WHERE instr(note, ?) > 0", (MERGED,))
        versions += sum(1 for (note,) in notes if merged_from(note, erased) is not None)
        held = 0
        if self.vectors is not None and seqs:
            keys = np.array(seqs, dtype=np.uint64)
            held = sum(self.vectors.held(agent, keys) for agent in self._agents())
        hashes = set(receipt.content_hashes)
        where, params = any_state_sql(scope)
        texts = 0
        if hashes:
            texts = conn.execute(
                f"SELECT COUNT(*) FROM fragments f WHERE f.content_hash IN ({_marks(list(hashes))}) AND {where}", [*hashes, *params]
            ).fetchone()[0]
            trail = conn.execute(
                f"SELECT v.content FROM fragment_versions v JOIN fragments f ON f.id = v.fragment_id WHERE {where}", params
            )
            texts += sum(1 for (content,) in trail if content_hash(content) in hashes)
        return {
            "rows": _count(conn, "fragments", "id", ids)
            + _count(conn, "fragments", "seq", seqs)
            + _count(conn, "fragment_tags", "seq", seqs)
            + _count(conn, "fragment_references", "seq", seqs)
            + _count(conn, "fragment_references", "target", ids),
            "versions": int(versions),
            "fullText": _count(conn, "fragments_fts_docsize", "id", seqs) + _count(conn, "fragment_keywords", "seq", seqs),
            "vectors": _count(conn, "fragment_embeddings", "seq", seqs) + held,
            "contentHashes": int(texts),
        }

    def _agents(self) -> list[str]:
        return [r[0] for r in self.db.reader().execute("SELECT DISTINCT agent_id FROM fragment_embeddings")]


def _count(conn: sqlite3.Connection, table: str, column: str, values: Sequence[object]) -> int:
    if not values:
        return 0
    return int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} IN ({_marks(values)})", list(values)).fetchone()[0])


def _links(conn: sqlite3.Connection, ids: Sequence[str]) -> int:
    if not ids:
        return 0
    marks = _marks(ids)
    return int(
        conn.execute(f"SELECT COUNT(*) FROM fragment_links WHERE from_id IN ({marks}) OR to_id IN ({marks})", [*ids, *ids]).fetchone()[0]
    )


def _strip(conn: sqlite3.Connection, f: Fragment, named: Sequence[str]) -> None:
    """Remove a derived memory's references to erased ones: its source, and the entries of its
    origin trace and metadata that name them."""
    source = None if f.source and any(i in f.source for i in named) else f.source
    trace = strip_reference(f.origin_trace, named) if f.origin_trace is not None else None
    metadata = strip_reference(f.metadata, named)
    conn.execute(
        "UPDATE fragments SET source = ?, origin_trace = ?, metadata = ? WHERE seq = ?",
        (source, json.dumps(trace, ensure_ascii=False) if trace else None, json.dumps(metadata or {}, ensure_ascii=False), f.seq),
    )


def _linkages(conn: sqlite3.Connection, ids: Sequence[str]) -> int:
    """Seed 003 linkages the erasure removes by cascade: those its memories hold, and those naming them."""
    if not ids:
        return 0
    marks = _marks(ids)
    return int(
        conn.execute(
            f"SELECT COUNT(*) FROM memory_linkages WHERE fragment_id IN ({marks}) OR memory_id IN ({marks})", [*ids, *ids]
        ).fetchone()[0]
    )
