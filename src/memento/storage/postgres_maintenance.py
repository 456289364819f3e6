"""Consolidation primitives (000 §8) for the PostgreSQL backend; same semantics as SQLite's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from ..models import AgentScope, MemorySystem, TTLTier
from .postgres import PostgresStore
from .postgres_db import SYSTEM, retried
from .postgres_fragments import PostgresFragments
from .postgres_sql import POSTGRES, scope_sql, write_sql
from .sqlfilter import live_sql
from .utility import CHANGED, utility

# Anchored, pinned (004: never expire, decay or get merged) and keyed (002: stay until pruned) memories
# are kept by every stage; working memory has its own life (expire_sessions).
_LIFECYCLE = "NOT f.is_anchor AND NOT f.pinned AND f.session_id IS NULL AND f.memory_key IS NULL"
# What retention (004 §4.2) may archive: any memory system's rows, working memory included, but
# never pinned, anchored, keyed or permanent-tier ones.
_RETAINED = "NOT f.is_anchor AND NOT f.pinned AND f.memory_key IS NULL AND f.ttl_tier <> 'permanent'"


def _changeable(scope: AgentScope) -> tuple[str, list[object]]:
    """Rows `scope` sees and may change: a consolidation run by an agent leaves the pool's
    rows alone unless MEMENTO_SHARED_POOL lets it change them."""
    where, params = scope_sql(scope)
    return f"{where} AND {write_sql(scope)}", list(params)


class PostgresMaintenance:
    """The MaintenanceStore protocol over a PostgresStore."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    @retried
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
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"UPDATE agent_memory.fragments f SET ttl_tier = %s, tier_since = %s WHERE {_LIFECYCLE} AND f.ttl_tier = %s"
                f" AND COALESCE(f.tier_since, f.created_at) < %s AND COALESCE(f.accessed_at, f.created_at) < %s AND {where}"
                " RETURNING f.id",
                [to_tier.value, now or datetime.now(UTC), from_tier.value, created_before, accessed_before or created_before, *params],
            )
            return [r["id"] for r in cur.fetchall()]

    @retried
    def expire_cold(self, scope: AgentScope, type_: str | None, exclude_types: Sequence[str], stale_before: datetime) -> list[str]:
        where, params = _changeable(scope)
        clauses, extra = "", list[object]()
        if type_ is not None:
            clauses += " AND f.type = %s"
            extra.append(type_)
        if exclude_types:
            clauses += " AND NOT (f.type = ANY(%s))"
            extra.append(list(exclude_types))
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT f.id FROM agent_memory.fragments f WHERE {_LIFECYCLE} AND f.ttl_tier = 'cold'"
                f" AND COALESCE(f.accessed_at, f.created_at) < %s AND COALESCE(f.tier_since, f.created_at) < %s{clauses} AND {where}"
                " FOR UPDATE OF f",  # a pin or a touch committed meanwhile is seen (the row is read again), one after waits
                [stale_before, stale_before, *extra, *params],
            )
            ids = [r["id"] for r in cur.fetchall()]
            return self.store._delete(cur, scope, ids) if ids else []

    @retried
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
        eff, eparams = POSTGRES.effective_confidence("f", now, half_life_days, since_tier=True)
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:  # chosen and written together (the write joins it)
            cur.execute(
                f"SELECT f.id FROM agent_memory.fragments f WHERE {_LIFECYCLE} AND f.ttl_tier NOT IN ('hot', 'permanent')"
                f" AND f.deleted_at IS NULL AND {eff} < %s AND {where} FOR UPDATE OF f",
                [*eparams, threshold, *params],
            )
            ids = [r["id"] for r in cur.fetchall()]
            if not ids:
                return []
            return self.store.soft_delete(scope, ids, now) if archive else self.store.delete(scope, ids)

    @retried
    def decay_importance(self, scope: AgentScope, factor: float, max_access: int, max_utility: float, older_than: datetime) -> list[str]:
        where, params = _changeable(scope)
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "UPDATE agent_memory.fragments f SET importance = ROUND((f.importance * %s)::numeric, 4)::float8"
                f" WHERE {_LIFECYCLE} AND f.ttl_tier <> 'permanent' AND f.access_count <= %s AND f.utility_score < %s"
                f" AND f.created_at < %s AND {where} RETURNING f.id",
                [factor, max_access, max_utility, older_than, *params],
            )
            return [r["id"] for r in cur.fetchall()]

    @retried
    def deduplicate(self, scope: AgentScope) -> list[str]:
        """Merge fragments sharing a content hash into the oldest (sums access counts, moves links).
        A pinned fragment is never merged away: it survives in preference to the oldest, and a
        second pinned copy stays as it is.

        The unique indexes already prevent duplicates within an agent; this stays for stores
        whose rows were loaded around them."""
        where, params = _changeable(scope)
        merged: list[str] = []
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT f.agent_id, f.content_hash FROM agent_memory.fragments f WHERE f.session_id IS NULL AND f.memory_key IS NULL AND {where}"
                " GROUP BY f.agent_id, f.content_hash HAVING COUNT(*) > 1",
                params,
            )
            for group in cur.fetchall():
                cur.execute(
                    "SELECT f.id, f.access_count, f.pinned FROM agent_memory.fragments f WHERE f.agent_id = %s AND f.content_hash = %s"
                    f" AND f.session_id IS NULL AND f.memory_key IS NULL AND {where} ORDER BY f.pinned DESC, f.created_at, f.seq"
                    " FOR UPDATE OF f",  # a copy pinned meanwhile is read as pinned (and stays)
                    (group["agent_id"], group["content_hash"], *params),
                )
                rows = cur.fetchall()
                merged_rows = [r for r in rows[1:] if not r["pinned"]]
                if not merged_rows:
                    continue
                survivor, duplicates = rows[0]["id"], [r["id"] for r in merged_rows]
                cur.execute(
                    "UPDATE agent_memory.fragments SET access_count = access_count + %s WHERE id = %s",
                    (sum(r["access_count"] for r in merged_rows), survivor),
                )
                for column, other in (("from_id", "to_id"), ("to_id", "from_id")):
                    cur.execute(
                        f"UPDATE agent_memory.fragment_links l SET {column} = %s WHERE l.{column} = ANY(%s)"
                        f" AND NOT EXISTS (SELECT 1 FROM agent_memory.fragment_links m WHERE m.{column} = %s AND m.{other} = l.{other})",
                        (survivor, duplicates, survivor),
                    )
                cur.execute("DELETE FROM agent_memory.fragment_links WHERE from_id = to_id")
                merged.extend(self.store._delete(cur, scope, duplicates))
        return merged

    def contradictions(self, scope: AgentScope) -> list[tuple[str, str]]:
        where, params = scope_sql(scope)
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT l.from_id, l.to_id FROM agent_memory.fragment_links l JOIN agent_memory.fragments f ON f.id = l.from_id"
                f" WHERE l.relation_type = 'contradicts' AND {where} ORDER BY l.id",
                params,
            )
            return [(r["from_id"], r["to_id"]) for r in cur.fetchall()]

    @retried
    def prune_orphan_links(self, scope: AgentScope) -> list[str]:
        """The links removed, each as `from_id>to_id`. Runs as the system so that targets in other
        namespaces count as alive; the scope predicate still limits which fragments' arrays are rewritten."""
        where, params = _changeable(scope)
        with self.store.db.tx(SYSTEM) as cur:
            cur.execute(
                "DELETE FROM agent_memory.fragment_links l WHERE NOT EXISTS (SELECT 1 FROM agent_memory.fragments f WHERE f.id = l.from_id)"
                " OR NOT EXISTS (SELECT 1 FROM agent_memory.fragments f WHERE f.id = l.to_id) RETURNING l.from_id, l.to_id"
            )
            removed = [f"{r['from_id']}>{r['to_id']}" for r in cur.fetchall()]
            cur.execute(
                "WITH fixed AS (SELECT f.id, f.linked_to AS before, COALESCE((SELECT array_agg(u.x ORDER BY u.o)"
                " FROM unnest(f.linked_to) WITH ORDINALITY AS u(x, o)"
                " WHERE EXISTS (SELECT 1 FROM agent_memory.fragments g WHERE g.id = u.x)), '{}') AS kept"
                f" FROM agent_memory.fragments f WHERE f.linked_to <> '{{}}' AND {where})"
                " UPDATE agent_memory.fragments f SET linked_to = fixed.kept FROM fixed"
                " WHERE f.id = fixed.id AND cardinality(fixed.kept) <> cardinality(fixed.before)"
                " RETURNING f.id, fixed.before, fixed.kept",
                params,
            )
            for r in cur.fetchall():
                removed.extend(f"{r['id']}>{t}" for t in r["before"] if t not in set(r["kept"]))
        return removed

    @retried
    def recompute_utility(self, scope: AgentScope, now: datetime, half_life_days: float) -> list[str]:
        """Each memory's utility by storage/utility.py (the evaluator's judgement blended in where
        there is one); verified_at is the evaluator's and stays."""
        where, params = _changeable(scope)
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT f.id, f.importance, f.access_count, COALESCE(f.accessed_at, f.created_at) AS last, f.utility_score,"
                f" f.judged_utility FROM agent_memory.fragments f WHERE {_LIFECYCLE} AND {where}",
                params,
            )
            ids, values = [], []
            for r in cur.fetchall():
                value = utility(r["importance"], r["access_count"], r["last"], now, half_life_days, r["judged_utility"])
                if abs(value - r["utility_score"]) > CHANGED:
                    ids.append(r["id"])
                    values.append(value)
            if ids:
                cur.execute(
                    "UPDATE agent_memory.fragments f SET utility_score = v.u FROM unnest(%s::text[], %s::float8[]) AS v(id, u) WHERE f.id = v.id",
                    (ids, values),
                )
        return ids

    @retried
    def purge_forgotten(self, scope: AgentScope, deleted_before: datetime) -> list[str]:
        """Delete for good the soft-deleted memories whose deletion is older than `deleted_before`."""
        where, params = _changeable(scope)
        where = where.replace(live_sql("f", "now()"), "TRUE", 1)
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT f.id FROM agent_memory.fragments f WHERE f.deleted_at IS NOT NULL AND f.deleted_at < %s AND {where}",
                [deleted_before, *params],
            )
            ids = [r["id"] for r in cur.fetchall()]
            if ids:
                PostgresFragments._remove(cur, scope, ids)
            return ids

    def expire_retention(self, scope: AgentScope, unused_since: Mapping[MemorySystem, datetime], now: datetime) -> list[str]:
        """004 §4.2: archive (soft-delete at `now`) each system's memories unused since its cutoff,
        in one statement; pinned, anchored, keyed and permanent-tier memories are kept."""
        if not unused_since:
            return []
        where, params = _changeable(scope)
        systems = " OR ".join(["(f.memory_system = %s AND GREATEST(f.created_at, f.accessed_at) < %s)"] * len(unused_since))
        values = [v for system, cutoff in unused_since.items() for v in (system.value, cutoff)]
        with self.store.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"UPDATE agent_memory.fragments f SET deleted_at = %s WHERE {_RETAINED} AND ({systems}) AND {where} RETURNING f.id",
                [now, *values, *params],
            )
            return [r["id"] for r in cur.fetchall()]

    @retried
    def expire_sessions(self, idle_before: datetime) -> list[str]:
        with self.store.db.tx(SYSTEM) as cur:
            # A session's rows go together, per owning namespace, when the newest of them is idle.
            cur.execute(
                "SELECT f.id FROM agent_memory.fragments f JOIN (SELECT agent_id, session_id FROM agent_memory.fragments"
                " WHERE session_id IS NOT NULL GROUP BY agent_id, session_id"
                " HAVING MAX(COALESCE(accessed_at, created_at)) < %s) s ON f.agent_id = s.agent_id AND f.session_id = s.session_id"
                " FOR UPDATE OF f",
                (idle_before,),
            )
            ids = [r["id"] for r in cur.fetchall()]
            return self.store._delete(cur, AgentScope(SYSTEM), ids) if ids else []

    def idle_sessions(self, idle_before: datetime) -> list[tuple[str, str]]:
        with self.store.db.tx(SYSTEM) as cur:
            cur.execute(
                "SELECT agent_id, session_id FROM agent_memory.fragments WHERE session_id IS NOT NULL GROUP BY agent_id, session_id"
                " HAVING MAX(COALESCE(accessed_at, created_at)) < %s ORDER BY agent_id, session_id",
                (idle_before,),
            )
            return [(r["agent_id"], r["session_id"]) for r in cur.fetchall()]
