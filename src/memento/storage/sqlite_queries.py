"""The read side of SQLiteStore: fragments by id, topic and listing order, links and versions,
embedding backlog and statistics; plus the feedback tables (rows beside the fragment model)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pysqlite3.dbapi2 as sqlite3

from ..models import AgentScope, Fragment, FragmentType, Link, RelationType, TTLTier
from .merged import EXPLAINED, MERGED, absorbed_into
from .protocol import RankFeatures, SearchFilter
from .sequence import FILTERED_REACH, SequenceNeighbours, pick, two_steps
from .sqlfilter import LISTING_ORDER, RECENT_ORDER, SEQ_ORDER, listing_walk, listing_walk_sql, narrowing, selective, walked_in_order
from .sqlite_bulk import _export_row
from .sqlite_db import SQLiteDatabase
from .sqlite_erasure import any_state_sql
from .sqlite_sql import _FRAGMENT_COLUMNS, _count, _filter_sql, _require, _row_to_fragment, _scope_sql, _visible, parse_ts, ts
from .vectors import VectorIndex


def _bounded_filter(filt: SearchFilter, scope: AgentScope, before: int | None, db: SQLiteDatabase | None = None) -> tuple[str, list[Any]]:
    """The filter over fragments row `f`, and with `before` only rows inserted before that seq
    (`db`: as `_filter_sql`'s, for a statement that may start from the filter's rows)."""
    fwhere, fparams = _filter_sql(filt, scope, db=db)
    return (fwhere, fparams) if before is None else (f"{fwhere} AND f.seq < ?", [*fparams, before])


class SQLiteQueries:
    """Reads on the reader connection of the calling thread (the feedback inserts use the writer)."""

    def __init__(self, db: SQLiteDatabase, vectors: VectorIndex | None, embedding_model: str | None) -> None:
        self.db = db
        self.vectors = vectors
        self.embedding_model = embedding_model

    def session_owners(self, session_id: str) -> list[str]:
        """The namespaces whose working memory carries `session_id` (across every agent)."""
        rows = (
            self.db.reader()
            .execute("SELECT DISTINCT agent_id FROM fragments WHERE session_id = ? ORDER BY agent_id", (session_id,))
            .fetchall()
        )
        return [r[0] for r in rows]

    def session_tokens(self, agent_id: str, session_id: str) -> int:
        row = (
            self.db.reader()
            .execute(
                "SELECT COALESCE(SUM(estimated_tokens), 0) FROM fragments"
                " WHERE session_id = ? AND agent_id = ? AND memory_key IS NULL AND deleted_at IS NULL",
                (session_id, agent_id),
            )
            .fetchone()
        )
        return int(row[0])

    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
        return _visible(self.db.reader(), scope, list(ids))

    def sequence_neighbours(
        self, scope: AgentScope, ids: Sequence[str], filt: SearchFilter, window: timedelta, steps: int = 1
    ) -> dict[str, SequenceNeighbours]:
        """storage/sequence.py: the visible rows written just before and after each of `ids` (with
        `steps=2`, and the entries of those rows, from the same statement)."""
        if not ids:
            return {}
        out: dict[str, SequenceNeighbours] = {}
        extra: dict[str, SequenceNeighbours] = {}
        conn = self.db.reader()
        where, params = _scope_sql(scope, "n")
        fwhere, fparams = _filter_sql(filt, scope, "n")
        cwhere, cparams = _scope_sql(scope, "c")
        same = "n.agent_id = c.agent_id AND n.topic = c.topic AND n.session_id IS c.session_id"
        probe = [*params, *fparams]

        bounded = narrowing(filt)

        def nearest(direction: str, than: str = "c", what: str = "n.id || ' ' || n.created_at") -> str:
            """The nearest row (before or after `than`, in c's conversation) in one probe; by
            default its id and creation time as 'id created_at' (an id has no space). With a
            narrowing filter, among the FILTERED_REACH nearest rows only."""
            order = "DESC" if direction == "<" else "ASC"
            if bounded:
                return (
                    f"(SELECT {what} FROM (SELECT * FROM fragments n WHERE {same} AND n.seq {direction} {than}.seq"
                    f" ORDER BY n.seq {order} LIMIT {FILTERED_REACH}) AS n WHERE {where} AND {fwhere} ORDER BY n.seq {order} LIMIT 1)"
                )
            return (
                f"(SELECT {what} FROM fragments n WHERE {same} AND n.seq {direction} {than}.seq AND {where} AND {fwhere}"
                f" ORDER BY n.seq {order} LIMIT 1)"
            )

        def split(found: str | None) -> tuple[str | None, datetime | None]:
            if found is None:
                return None, None
            fid, _, at = found.partition(" ")
            return fid, parse_ts(at)

        for i in range(0, len(ids), 400):
            part = list(ids[i : i + 400])
            marks = ",".join("?" * len(part))
            if steps < 2:
                sql = f"SELECT c.id, c.created_at, {nearest('<')}, {nearest('>')} FROM fragments c WHERE c.id IN ({marks}) AND {cwhere}"
                for row in conn.execute(sql, [*probe, *probe, *part, *cparams]):
                    created = parse_ts(row[1])
                    assert created is not None
                    out[row[0]] = pick(created, *split(row[2]), *split(row[3]), window)
                continue
            # The first neighbours as rows (p, x), found by their seq; the second ones beside them.
            passes, pparams = _filter_sql(filt, scope, "c")
            sql = (
                f"SELECT c.id, c.created_at, ({passes}), p.id || ' ' || p.created_at, {nearest('<', 'p')},"
                f" x.id || ' ' || x.created_at, {nearest('>', 'x')}"
                f" FROM fragments c LEFT JOIN fragments p ON p.seq = {nearest('<', what='n.seq')}"
                f" LEFT JOIN fragments x ON x.seq = {nearest('>', what='n.seq')}"
                f" WHERE c.id IN ({marks}) AND {cwhere}"
            )
            args = [*pparams, *probe, *probe, *probe, *probe, *part, *cparams]
            for row in conn.execute(sql, args):
                created = parse_ts(row[1])
                assert created is not None
                found = two_steps(row[0], created, bool(row[2]), split(row[3]), split(row[4]), split(row[5]), split(row[6]), window)
                out[row[0]] = found.pop(row[0])
                extra.update(found)
        return {**extra, **out}

    def find_by_topic(self, scope: AgentScope, topic: str) -> list[Fragment]:
        where, params = _scope_sql(scope)
        rows = (
            self.db.reader()
            .execute(
                f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.topic = ? AND f.session_id IS NULL AND {where}", [topic, *params]
            )
            .fetchall()
        )
        return [_row_to_fragment(r) for r in rows]

    def list_fragments(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]:
        """Anchors first, then by importance, newest first among equals."""
        return self._select(scope, filt, LISTING_ORDER, limit)

    def recent(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]:
        """Newest first."""
        return self._select(scope, filt, RECENT_ORDER, limit)

    def _select(self, scope: AgentScope, filt: SearchFilter, order: str, limit: int, before: int | None = None) -> list[Fragment]:
        """The first `limit` rows in `order`: chosen by their sort keys alone, then read whole (a
        topic's 20,000 rows at a million memories were sorted with their content: 89 ms, 35 now).

        A scope that sees several namespaces (its own and the shared pool) takes the first rows
        of each namespace by its own ordered walk, then the first of those: an index in `order`
        (migration 0027) serves `agent_id = ?`, not `agent_id IN (...)`, which read and sorted
        every row of the namespace (360 ms at a million memories). A filter that narrows more
        than a topic is `_chosen`'s. `before`: only rows inserted before that seq (keyset pages)."""
        if limit <= 0:
            return []
        where, params = _scope_sql(scope, use_index=True)
        agents = scope.visible_agents()
        conn = self.db.reader()
        walks = agents is not None and walked_in_order(filt, order)
        seqs = self._chosen(conn, scope, agents or (), filt, order, limit, before) if walks else None
        fwhere, fparams = _bounded_filter(filt, scope, before, None if seqs is not None else self.db)
        if seqs is not None:
            # chosen by statements of their own: a row deleted meanwhile stays out all the same
            visible, vparams = _scope_sql(scope)
            chosen = f"f.seq IN (SELECT value FROM json_each(?)) AND {visible}"
            args = [json.dumps(seqs), *vparams]
        elif walks:
            # One statement over the scope, as the planner likes it best: from the filter's own
            # index (a rare type, a tier, a source); `+` on the sort keys keeps it from walking the
            # index in `order` instead. Per namespace, an equality on it drew the planner to the
            # namespace's indexes (a tier no memory has: 225 ms at a million memories, not 0.1).
            unordered = ", ".join(f"+{term}" for term in order.split(", "))
            chosen = f"f.seq IN (SELECT f.seq FROM fragments f WHERE {where} AND {fwhere} ORDER BY {unordered} LIMIT ?)"
            args = [*params, *fparams, limit]
        elif agents is not None and len(agents) > 1:
            arm = f"SELECT * FROM (SELECT f.seq FROM fragments f WHERE f.agent_id = ? AND {where} AND {fwhere} ORDER BY {order} LIMIT ?)"
            chosen = f"f.seq IN ({' UNION ALL '.join([arm] * len(agents))})"
            args = [a for agent in agents for a in (agent, *params, *fparams, limit)]
        else:
            chosen = f"f.seq IN (SELECT f.seq FROM fragments f WHERE {where} AND {fwhere} ORDER BY {order} LIMIT ?)"
            args = [*params, *fparams, limit]
        rows = conn.execute(
            f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE {chosen} ORDER BY {order} LIMIT ?", [*args, limit]
        ).fetchall()
        return [_row_to_fragment(r) for r in rows]

    def _chosen(
        self,
        conn: sqlite3.Connection,
        scope: AgentScope,
        agents: Sequence[str],
        filt: SearchFilter,
        order: str,
        limit: int,
        before: int | None,
    ) -> list[int] | None:
        """The seqs of each namespace's first `limit` rows in `order` that pass a filter narrowing
        more than a topic. Which index serves that depends on how many rows pass, which SQLite
        does not know: walking the index in `order` and testing each row stops early when most
        rows pass (a listing of facts where every memory is one: 360 ms to sort them all, 0.1 ms
        walked) and walks the whole namespace when none does (a rare type: 250 ms walked, at once
        from its own index). So the walk is bounded (`listing_walk`): when its rows hold `limit`
        that pass, or are all the namespace has, they are the answer — any row past the walk
        comes after them in `order`. None when a walk does not (or the filter keeps few rows by
        its nature): the rows that pass are then sorted, in one statement (`_select`)."""
        if selective(filt):
            return None
        where, params = _scope_sql(scope, use_index=True)
        fwhere, fparams = _bounded_filter(filt, scope, before)
        walk, kparams = listing_walk_sql(filt, order, "fragments", "?", before)
        walked = f"SELECT f.seq FROM fragments f WHERE f.seq IN ({walk}) AND {where} AND {fwhere} ORDER BY {order} LIMIT ?"
        span = listing_walk(limit)
        seqs: list[int] = []
        for agent in agents:
            found = [r[0] for r in conn.execute(walked, [agent, *kparams, span, *params, *fparams, limit])]
            if len(found) < limit and conn.execute(f"SELECT COUNT(*) FROM ({walk})", [agent, *kparams, span]).fetchone()[0] == span:
                return None  # the walk ended before the namespace did: the rest may hold earlier rows that pass
            seqs.extend(found)
        return seqs

    def page(self, scope: AgentScope, filt: SearchFilter, before_seq: int | None, limit: int) -> list[Fragment]:
        """Newest first by insertion order, strictly before `before_seq` (a stable keyset page):
        each namespace walked in that order (migration 0028), as `_select` walks any order. In
        one statement every row of the scope was read and sorted: 2.4 s for the first page of a
        million memories (MCP resources/list)."""
        return self._select(scope, filt, SEQ_ORDER, limit, before_seq)

    def topics(self, scope: AgentScope, prefix: str, limit: int) -> list[tuple[str, int]]:
        """Topics of permanent fragments starting with `prefix`, with their fragment counts."""
        where, params = _scope_sql(scope, use_index=True)
        rows = (
            self.db.reader()
            .execute(
                f"SELECT f.topic, COUNT(*) FROM fragments f WHERE {where} AND f.session_id IS NULL"
                " AND substr(f.topic, 1, ?) = ? GROUP BY f.topic ORDER BY f.topic LIMIT ?",
                [*params, len(prefix), prefix, limit],
            )
            .fetchall()
        )
        return [(r[0], int(r[1])) for r in rows]

    def ids_with_prefix(self, scope: AgentScope, prefix: str, limit: int) -> list[str]:
        """Visible fragment ids (permanent or working memory) starting with `prefix`."""
        where, params = _scope_sql(scope, use_index=True)
        rows = (
            self.db.reader()
            .execute(
                f"SELECT f.id FROM fragments f WHERE {where} AND substr(f.id, 1, ?) = ? ORDER BY f.id LIMIT ?",
                [*params, len(prefix), prefix, limit],
            )
            .fetchall()
        )
        return [r[0] for r in rows]

    def rank_features(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, RankFeatures]:
        if not ids:
            return {}
        where, params = _scope_sql(scope)
        rows = (
            self.db.reader()
            .execute(
                "SELECT f.id, f.importance, f.created_at, f.accessed_at, f.access_count FROM fragments f"
                f" WHERE f.id IN ({','.join('?' * len(ids))}) AND {where}",
                [*ids, *params],
            )
            .fetchall()
        )
        return {r[0]: RankFeatures(r[1], parse_ts(r[2]) or datetime.now(UTC), parse_ts(r[3]), r[4]) for r in rows}

    def count(self, scope: AgentScope, filt: SearchFilter, at_most: int | None = None) -> int:
        return _count(self.db, scope, filt, at_most)

    def neighbours(
        self, scope: AgentScope, ids: Sequence[str], relations: Sequence[RelationType], limit: int
    ) -> list[tuple[Link, Fragment]]:
        if not ids or not relations or limit <= 0:
            return []
        where, params = _scope_sql(scope)
        id_marks = ",".join("?" * len(ids))
        rel_marks = ",".join("?" * len(relations))
        rels = [r.value for r in relations]
        # CROSS JOIN keeps the links outside: found through the ids, they are few. Left to choose,
        # SQLite scanned every fragment of a small store once ~200 ids were asked (recall's check of
        # its candidates' successors: 9.6 ms at 1,000 memories and no link at all, 0.4 this way).
        rows = (
            self.db.reader()
            .execute(
                f"SELECT l.from_id AS l_from, l.to_id AS l_to, l.relation_type AS l_rel, l.created_at AS l_created,"
                f" {_FRAGMENT_COLUMNS} FROM fragment_links l CROSS JOIN fragments f"
                " ON (f.id = l.to_id AND l.from_id IN ({ids})) OR (f.id = l.from_id AND l.to_id IN ({ids}))"
                f" WHERE l.relation_type IN ({rel_marks}) AND {where} ORDER BY l.id LIMIT ?".replace("{ids}", id_marks),
                [*ids, *ids, *rels, *params, limit],
            )
            .fetchall()
        )
        out = []
        for r in rows:
            link = Link(r["l_from"], r["l_to"], RelationType(r["l_rel"]), parse_ts(r["l_created"]) or datetime.now(UTC))
            out.append((link, _row_to_fragment(r)))
        return out

    def versions(self, scope: AgentScope, fragment_id: str) -> list[dict[str, object]]:
        conn = self.db.reader()
        _require(conn, scope, fragment_id)
        rows = conn.execute(
            "SELECT content, topic, keywords, type, importance, amended_at, amended_by, confidence, metadata, tags, note"
            " FROM fragment_versions WHERE fragment_id = ? ORDER BY id",
            (fragment_id,),
        ).fetchall()
        return [
            {
                **dict(r),
                "keywords": json.loads(r["keywords"]),
                "metadata": None if r["metadata"] is None else json.loads(r["metadata"]),
                "tags": None if r["tags"] is None else json.loads(r["tags"]),
            }
            for r in rows
        ]

    def merged_into(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, str]:
        asked = list(dict.fromkeys(ids))[:EXPLAINED]
        if not asked:
            return {}
        where, params = _scope_sql(scope)
        named = " OR ".join(["instr(v.note, ?) > 0"] * len(asked))  # one scan; only the rows naming one of them come back
        rows = self.db.reader().execute(
            f"SELECT v.note, v.fragment_id, v.id FROM fragment_versions v JOIN fragments f ON f.id = v.fragment_id WHERE ({named}) AND {where}",
            [*(MERGED + i for i in asked), *params],
        )
        return absorbed_into(asked, ((r[0], r[1], r[2]) for r in rows))

    def hidden_states(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, tuple[datetime | None, datetime | None]]:
        asked = list(dict.fromkeys(ids))[:EXPLAINED]
        if not asked:
            return {}
        where, params = any_state_sql(scope)
        rows = self.db.reader().execute(
            f"SELECT f.id, f.deleted_at, f.expires_at, f.pinned FROM fragments f WHERE f.id IN ({','.join('?' * len(asked))}) AND {where}",
            [*asked, *params],
        )
        return {r[0]: (parse_ts(r[1]), None if r[3] else parse_ts(r[2])) for r in rows}

    def missing_embeddings(self, scope: AgentScope, limit: int, after_seq: int = 0) -> list[tuple[int, str, str]]:
        where, params = _scope_sql(scope)
        rows = (
            self.db.reader()
            .execute(
                "SELECT f.seq, f.id, f.content FROM fragments f LEFT JOIN fragment_embeddings e"
                f" ON e.seq = f.seq AND e.model = ? WHERE e.seq IS NULL AND f.seq > ? AND {where} ORDER BY f.seq LIMIT ?",
                [self.embedding_model, after_seq, *params, limit],
            )
            .fetchall()
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def size_summary(self) -> dict[str, Any]:
        """Fragments per TTL tier (working memory apart) and the number of agents, for metrics."""
        conn = self.db.reader()
        rows = conn.execute("SELECT ttl_tier, session_id IS NOT NULL, COUNT(*) FROM fragments GROUP BY 1, 2").fetchall()
        by_tier = {t.value: 0 for t in TTLTier}
        working = 0
        for tier, in_session, count in rows:
            if in_session:
                working += int(count)
            else:
                by_tier[str(tier)] = by_tier.get(str(tier), 0) + int(count)
        agents = conn.execute("SELECT COUNT(DISTINCT agent_id) FROM fragments").fetchone()[0]
        return {"by_tier": by_tier, "working_memory": working, "agents": int(agents)}

    def add_tool_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int:
        with self.db.tx() as conn:
            return int(
                conn.execute(
                    "INSERT INTO tool_feedback (agent_id, tool_name, relevant, sufficient, suggestion, context, session_id,"
                    " trigger_type, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        agent_id,
                        row["tool_name"],
                        int(bool(row["relevant"])),
                        int(bool(row["sufficient"])),
                        row.get("suggestion"),
                        row.get("context"),
                        row.get("session_id"),
                        row.get("trigger_type", "voluntary"),
                        ts(now),
                    ),
                ).fetchone()[0]
            )

    def add_task_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int:
        with self.db.tx() as conn:
            return int(
                conn.execute(
                    "INSERT INTO task_feedback (agent_id, session_id, overall_success, tool_highlights, tool_pain_points,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        agent_id,
                        row["session_id"],
                        int(bool(row["overall_success"])),
                        json.dumps(row.get("tool_highlights", []), ensure_ascii=False),
                        json.dumps(row.get("tool_pain_points", []), ensure_ascii=False),
                        ts(now),
                    ),
                ).fetchone()[0]
            )

    def task_feedback(self, session_id: str) -> list[dict[str, object]]:
        """A session's task_feedback rows, oldest first, in plain Python values."""
        rows = self.db.reader().execute("SELECT * FROM task_feedback WHERE session_id = ? ORDER BY id", (session_id,)).fetchall()
        return [_export_row("task_feedback", dict(r)) for r in rows]

    def tool_feedback(self, feedback_id: int) -> dict[str, object] | None:
        """One tool_feedback row (for operators and tests), in plain Python values."""
        row = self.db.reader().execute("SELECT * FROM tool_feedback WHERE id = ?", (feedback_id,)).fetchone()
        return _export_row("tool_feedback", dict(row)) if row is not None else None

    def stats(self, scope: AgentScope) -> dict[str, object]:
        """memory_stats' counts. The counts by tier and type, the means and the total come from
        one pass over the scope's rows (they were four: ~0.3 s each at a million memories)."""
        conn = self.db.reader()
        where, params = _scope_sql(scope, use_index=True)
        tiers: dict[str, int] = {}
        types: dict[str, int] = {}
        total, utility_sum, utility_n, importance_sum, importance_n = 0, 0.0, 0, 0.0, 0
        for tier, kind, n, usum, un, isum, inn in conn.execute(
            "SELECT ttl_tier, type, COUNT(*), SUM(utility_score), COUNT(utility_score), SUM(importance), COUNT(importance)"
            f" FROM fragments f WHERE {where} AND f.session_id IS NULL GROUP BY ttl_tier, type",
            params,
        ):
            tiers[tier] = tiers.get(tier, 0) + n
            types[kind] = types.get(kind, 0) + n
            total += n
            utility_sum, utility_n = utility_sum + (usum or 0.0), utility_n + un
            importance_sum, importance_n = importance_sum + (isum or 0.0), importance_n + inn
        working = conn.execute(f"SELECT COUNT(*) FROM fragments f WHERE {where} AND f.session_id IS NOT NULL", params).fetchone()[0]
        embedded, indexed = self._embedded_and_indexed(scope)
        anchors = conn.execute(f"SELECT COUNT(*) FROM fragments f WHERE {where} AND f.is_anchor = 1", params).fetchone()[0]
        lwhere, lparams = _scope_sql(scope)  # from the links: a store has far fewer of them than memories
        links = conn.execute(
            f"SELECT COUNT(*) FROM fragment_links l CROSS JOIN fragments f ON f.id = l.from_id WHERE {lwhere}", lparams
        ).fetchone()[0]
        utility = (utility_sum / utility_n if utility_n else None, importance_sum / importance_n if importance_n else None)
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
        where, params = _scope_sql(scope)
        conn = self.db.reader()
        agents = scope.visible_agents()
        if agents is None:
            agents = tuple(r[0] for r in conn.execute("SELECT DISTINCT agent_id FROM fragments"))
        embedded = held = 0
        for agent in agents:
            # From the embeddings' (agent, model) index, which holds their seqs in order, to the
            # fragments by seq: from the fragments' side each embedding row was read with its
            # vector, ~1.5 GB at a million memories (1.2 s warm, 8 s from a cold cache). The seqs
            # come back as one text parsed in C: a million rows through Python took 0.7 s more.
            listed = conn.execute(
                "SELECT group_concat(f.seq) FROM fragment_embeddings e CROSS JOIN fragments f ON f.seq = e.seq"
                f" WHERE e.agent_id = ? AND e.model = ? AND f.agent_id = ? AND {where} AND f.session_id IS NULL",
                [agent, self.embedding_model, agent, *params],
            ).fetchone()[0]
            seqs = np.fromstring(listed, dtype=np.uint64, sep=",") if listed else np.empty(0, dtype=np.uint64)
            embedded += len(seqs)
            if self.vectors is not None and len(seqs):
                held += self.vectors.held(agent, seqs)
        return embedded, held
