"""Consolidation primitives (000 §8) for the SQLite backend."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from ..models import AgentScope, MemorySystem, TTLTier
from .sqlfilter import live_sql
from .sqlite import SQLiteStore
from .sqlite_sql import _FRAGMENT_COLUMNS, SQLITE, _row_to_fragment, _scope_sql, _write_sql, parse_ts, ts
from .utility import CHANGED, utility

# Anchored, pinned (004: never expire, decay or get merged) and keyed (002: stay until pruned) memories
# are kept by every stage; working memory has its own life (expire_sessions).
_LIFECYCLE = "f.is_anchor = 0 AND f.pinned = 0 AND f.session_id IS NULL AND f.memory_key IS NULL"
# What retention (004 §4.2) may archive: any memory system's rows, working memory included, but
# never pinned, anchored, keyed or permanent-tier ones.
_RETAINED = "f.is_anchor = 0 AND f.pinned = 0 AND f.memory_key IS NULL AND f.ttl_tier != 'permanent'"


def _changeable(scope: AgentScope) -> tuple[str, list[object]]:
    """Rows `scope` sees and may change: a consolidation run by an agent leaves the pool's
    rows alone unless MEMENTO_SHARED_POOL lets it change them."""
    where, params = _scope_sql(scope)
    return f"{where} AND {_write_sql(scope)}", list(params)


class SQLiteMaintenance:
    """The MaintenanceStore protocol over a SQLiteStore."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def demote(
        self,
        scope: AgentScope,
        from_tier: TTLTier,
        to_tier: TTLTier,
        created_before: datetime,
        accessed_before: datetime | None,
        now: datetime | None = None,
    ) -> list[str]:
        where, params = _changeable(scope)
        cutoff = ts(accessed_before or created_before)
        entered = ts(now or datetime.now(UTC))
        with self.store.db.tx() as conn:
            rows = conn.execute(
                f"UPDATE fragments AS f SET ttl_tier = ?, tier_since = ? WHERE {_LIFECYCLE} AND f.ttl_tier = ?"
                f" AND COALESCE(f.tier_since, f.created_at) < ? AND COALESCE(f.accessed_at, f.created_at) < ? AND {where} RETURNING id",
                [to_tier.value, entered, from_tier.value, ts(created_before), cutoff, *params],
            ).fetchall()
        return [r[0] for r in rows]

    def expire_cold(self, scope: AgentScope, type_: str | None, exclude_types: Sequence[str], stale_before: datetime) -> list[str]:
        where, params = _changeable(scope)
        clauses, extra = [], []
        if type_ is not None:
            clauses.append("f.type = ?")
            extra.append(type_)
        if exclude_types:
            clauses.append(f"f.type NOT IN ({','.join('?' * len(exclude_types))})")
            extra.extend(exclude_types)
        type_sql = (" AND " + " AND ".join(clauses)) if clauses else ""
        chosen = (
            f"{_LIFECYCLE} AND f.ttl_tier = 'cold' AND COALESCE(f.accessed_at, f.created_at) < ?"
            f" AND COALESCE(f.tier_since, f.created_at) < ?{type_sql} AND {where}"
        )
        values = [ts(stale_before), ts(stale_before), *extra, *params]
        return self._delete_chosen(scope, chosen, values, lambda ids: self.store.delete(scope, ids))

    def _delete_chosen(
        self, scope: AgentScope, chosen: str, values: Sequence[object], write: Callable[[list[str]], list[str]]
    ) -> list[str]:
        """`write` the rows that `chosen` (a WHERE over `fragments f`) selects: found without the
        write lock (the scan may be long), then asked again by id inside the write's transaction,
        so a memory pinned, touched or changed in between is left alone."""
        ids = [r[0] for r in self.store.db.reader().execute(f"SELECT f.id FROM fragments f WHERE {chosen}", list(values))]
        if not ids:
            return []
        with self.store.db.tx() as conn:  # the write below joins it
            still = [
                r[0]
                for r in conn.execute(
                    f"SELECT f.id FROM fragments f WHERE f.id IN ({','.join('?' * len(ids))}) AND {chosen}", [*ids, *values]
                )
            ]
            return write(still) if still else []

    def prune_low_confidence(
        self, scope: AgentScope, threshold: float, half_life_days: float, now: datetime, *, archive: bool
    ) -> list[str]:
        """Memories whose effective confidence is below `threshold` (001 §4.5): soft-deleted
        (`archive`, restorable) or deleted. Gradual like every stage: hot (new), permanent, pinned
        and anchored memories are kept, and the decay counts from the latest of creation, last
        access and entry into the current tier."""
        if threshold <= 0:
            return []
        where, params = _changeable(scope)
        eff, eparams = SQLITE.effective_confidence("f", now, half_life_days, since_tier=True)
        chosen = f"{_LIFECYCLE} AND f.ttl_tier NOT IN ('hot', 'permanent') AND f.deleted_at IS NULL AND {eff} < ? AND {where}"
        return self._delete_chosen(
            scope,
            chosen,
            [*eparams, threshold, *params],
            lambda ids: self.store.soft_delete(scope, ids, now) if archive else self.store.delete(scope, ids),
        )

    def decay_importance(self, scope: AgentScope, factor: float, max_access: int, max_utility: float, older_than: datetime) -> list[str]:
        where, params = _changeable(scope)
        with self.store.db.tx() as conn:
            rows = conn.execute(
                f"UPDATE fragments AS f SET importance = ROUND(f.importance * ?, 4) WHERE {_LIFECYCLE}"
                " AND f.ttl_tier != 'permanent' AND f.access_count <= ? AND f.utility_score < ? AND f.created_at < ?"
                f" AND {where} RETURNING id",
                [factor, max_access, max_utility, ts(older_than), *params],
            ).fetchall()
        return [r[0] for r in rows]

    def deduplicate(self, scope: AgentScope) -> list[str]:
        """Merge fragments sharing a content hash into the oldest (sums access counts, moves links).
        A pinned fragment is never merged away: it survives in preference to the oldest, and a
        second pinned copy stays as it is."""
        where, params = _changeable(scope)
        groups = (
            self.store.db.reader()
            .execute(
                f"SELECT f.agent_id, f.content_hash FROM fragments f WHERE f.session_id IS NULL AND f.memory_key IS NULL AND {where}"
                " GROUP BY f.agent_id, f.content_hash HAVING COUNT(*) > 1",
                params,
            )
            .fetchall()
        )
        merged: list[str] = []
        for agent, digest in groups:
            with self.store.db.tx() as conn:  # the group read again under the write lock: a copy pinned meanwhile stays
                rows = conn.execute(
                    "SELECT f.id, f.access_count, f.pinned FROM fragments f WHERE f.agent_id = ? AND f.content_hash = ?"
                    " AND f.session_id IS NULL AND f.memory_key IS NULL"
                    f" AND {where} ORDER BY f.pinned DESC, f.created_at, f.seq",
                    (agent, digest, *params),
                ).fetchall()
                merged_rows = [r for r in rows[1:] if not r[2]]
                if not merged_rows:
                    continue
                survivor, duplicates = rows[0][0], [r[0] for r in merged_rows]
                marks = ",".join("?" * len(duplicates))
                conn.execute(
                    "UPDATE fragments SET access_count = access_count + ? WHERE id = ?", (sum(r[1] for r in merged_rows), survivor)
                )
                conn.execute(f"UPDATE OR IGNORE fragment_links SET from_id = ? WHERE from_id IN ({marks})", [survivor, *duplicates])
                conn.execute(f"UPDATE OR IGNORE fragment_links SET to_id = ? WHERE to_id IN ({marks})", [survivor, *duplicates])
                conn.execute("DELETE FROM fragment_links WHERE from_id = to_id")
                merged.extend(self.store.delete(scope, duplicates))  # in the same transaction: a crash never sums twice
        return merged

    def contradictions(self, scope: AgentScope) -> list[tuple[str, str]]:
        where, params = _scope_sql(scope)
        rows = (
            self.store.db.reader()
            .execute(
                "SELECT l.from_id, l.to_id FROM fragment_links l JOIN fragments f ON f.id = l.from_id"
                f" WHERE l.relation_type = 'contradicts' AND {where} ORDER BY l.id",
                params,
            )
            .fetchall()
        )
        return [(r[0], r[1]) for r in rows]

    def prune_orphan_links(self, scope: AgentScope) -> list[str]:
        """The links removed, each as `from_id>to_id`."""
        where, params = _changeable(scope)
        with self.store.db.tx() as conn:
            removed = [
                f"{r[0]}>{r[1]}"
                for r in conn.execute(
                    "DELETE FROM fragment_links WHERE from_id NOT IN (SELECT id FROM fragments)"
                    " OR to_id NOT IN (SELECT id FROM fragments) RETURNING from_id, to_id"
                ).fetchall()
            ]
            stale = conn.execute(f"SELECT f.id, f.linked_to FROM fragments f WHERE f.linked_to != '[]' AND {where}", params).fetchall()
            for fid, linked in stale:
                targets = json.loads(linked)
                if not targets:
                    continue
                alive = {r[0] for r in conn.execute(f"SELECT id FROM fragments WHERE id IN ({','.join('?' * len(targets))})", targets)}
                kept = [t for t in targets if t in alive]
                if len(kept) != len(targets):
                    conn.execute("UPDATE fragments SET linked_to = ? WHERE id = ?", (json.dumps(kept), fid))
                    removed.extend(f"{fid}>{t}" for t in targets if t not in alive)
        return removed

    def recompute_utility(self, scope: AgentScope, now: datetime, half_life_days: float) -> list[str]:
        """Each memory's utility by storage/utility.py (the evaluator's judgement blended in where
        there is one); verified_at is the evaluator's and stays."""
        where, params = _changeable(scope)
        rows = (
            self.store.db.reader()
            .execute(
                f"SELECT f.seq, f.importance, f.access_count, COALESCE(f.accessed_at, f.created_at), f.utility_score, f.id,"
                f" f.judged_utility FROM fragments f WHERE {_LIFECYCLE} AND {where}",
                params,
            )
            .fetchall()
        )
        updates, ids = [], []
        for seq, importance, accesses, last, old, fid, judged in rows:
            value = utility(importance, accesses, parse_ts(last) or now, now, half_life_days, judged)
            if abs(value - old) > CHANGED:
                updates.append((value, seq))
                ids.append(str(fid))
        if updates:
            with self.store.db.tx() as conn:
                conn.executemany("UPDATE fragments SET utility_score = ? WHERE seq = ?", updates)
        return ids

    def purge_forgotten(self, scope: AgentScope, deleted_before: datetime) -> list[str]:
        """Delete for good the soft-deleted memories whose deletion is older than `deleted_before`."""
        where, params = _changeable(scope)
        where = where.replace(live_sql("f", "?"), "1 = 1", 1)
        ids = [
            r[0]
            for r in self.store.db.reader().execute(
                f"SELECT f.id FROM fragments f WHERE f.deleted_at IS NOT NULL AND f.deleted_at < ? AND {where}",
                [ts(deleted_before), *params[1:]],
            )
        ]
        if not ids:
            return []
        with self.store.db.tx() as conn:
            found = [
                _row_to_fragment(r)
                for r in conn.execute(f"SELECT {_FRAGMENT_COLUMNS} FROM fragments f WHERE f.id IN ({','.join('?' * len(ids))})", ids)
            ]
            self.store.fragments.remove_rows(conn, found)
        return [f.id for f in found]

    def expire_retention(self, scope: AgentScope, unused_since: Mapping[MemorySystem, datetime], now: datetime) -> list[str]:
        """004 §4.2: archive (soft-delete at `now`) each system's memories unused since its cutoff,
        in one statement; pinned, anchored, keyed and permanent-tier memories are kept."""
        if not unused_since:
            return []
        where, params = _changeable(scope)
        systems = " OR ".join(
            ["(f.memory_system = ? AND MAX(f.created_at, COALESCE(f.accessed_at, f.created_at)) < ?)"] * len(unused_since)
        )
        values = [v for system, cutoff in unused_since.items() for v in (system.value, ts(cutoff))]
        with self.store.db.tx() as conn:
            rows = conn.execute(
                f"UPDATE fragments AS f SET deleted_at = ? WHERE {_RETAINED} AND ({systems}) AND {where} RETURNING id",
                [ts(now), *values, *params],
            ).fetchall()
        return [r[0] for r in rows]

    def expire_sessions(self, idle_before: datetime) -> list[str]:
        """Expunge the working memory of sessions idle since `idle_before`, per owning namespace
        (a session's rows go together, when the newest of them is idle)."""
        with self.store.db.tx() as conn:  # chosen and deleted together: a session written to meanwhile is not idle
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT f.id FROM fragments f JOIN (SELECT agent_id, session_id FROM fragments WHERE session_id IS NOT NULL"
                    " GROUP BY agent_id, session_id HAVING MAX(COALESCE(accessed_at, created_at)) < ?) s"
                    " ON f.agent_id = s.agent_id AND f.session_id = s.session_id",
                    (ts(idle_before),),
                )
            ]
            return self.store.delete(AgentScope("system"), ids) if ids else []

    def idle_sessions(self, idle_before: datetime) -> list[tuple[str, str]]:
        rows = self.store.db.reader().execute(
            "SELECT agent_id, session_id FROM fragments WHERE session_id IS NOT NULL GROUP BY agent_id, session_id"
            " HAVING MAX(COALESCE(accessed_at, created_at)) < ? ORDER BY agent_id, session_id",
            (ts(idle_before),),
        )
        return [(r[0], r[1]) for r in rows]


def utc_now() -> datetime:
    return datetime.now(UTC)
