"""The SearchFilter as a SQL predicate, shared by the SQL backends (they differ in placeholders,
array support, table names and how they compute effective confidence)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..graph import effective_confidence
from .protocol import SearchFilter

# The SQLite function every connection registers (sqlite_db.py): graph.effective_confidence itself,
# so SQL and SearchFilter.matches agree to the bit.
SQLITE_CONFIDENCE_FUNCTION = "memento_effective_confidence"


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL backends in a filter."""

    mark: str  # the driver's placeholder
    any_of: bool  # arrays: `= ANY(array)` and TEXT[] tags (PostgreSQL); else IN lists and JSON tags
    tables: str  # the schema prefix of table names
    timestamp: Callable[[datetime], object]  # a datetime as bound for comparison with a stored timestamp

    def effective_confidence(self, alias: str, now: datetime, half_life_days: float, *, since_tier: bool = False) -> tuple[str, list[Any]]:
        """graph.effective_confidence of row `alias` at `now`, as an SQL expression. `since_tier`:
        the decay starts no earlier than when the row entered its TTL tier (the lifecycle's view:
        an import with old creation dates is not faded on arrival)."""
        m = self.mark
        if not self.any_of:
            start = f"MAX({alias}.created_at, COALESCE({alias}.tier_since, {alias}.created_at))" if since_tier else f"{alias}.created_at"
            sql = f"{SQLITE_CONFIDENCE_FUNCTION}({alias}.confidence, {start}, {alias}.accessed_at, {m}, {m})"
            return sql, [self.timestamp(now), half_life_days]
        if half_life_days <= 0:
            return f"{alias}.confidence", []
        # float8 throughout, in the order Python computes it: seconds (exact, then rounded once),
        # days, the exponent, C pow(); GREATEST ignores a NULL accessed_at as Python does.
        tier = f", {alias}.tier_since" if since_tier else ""
        seconds = (
            f"CAST(EXTRACT(EPOCH FROM (CAST({m} AS timestamptz) - GREATEST({alias}.created_at, {alias}.accessed_at{tier}))) AS float8)"
        )
        days = f"GREATEST(CAST(0.0 AS float8), {seconds} / CAST(86400.0 AS float8))"
        return f"({alias}.confidence * power(CAST(0.5 AS float8), {days} / CAST({m} AS float8)))", [now, half_life_days]


def sqlite_effective_confidence(confidence: float, created_at: str, accessed_at: str | None, now: str, half_life_days: float) -> float:
    """The SQLite function SQLITE_CONFIDENCE_FUNCTION (timestamps in the stored ISO form)."""
    created = datetime.fromisoformat(created_at)
    accessed = datetime.fromisoformat(accessed_at) if accessed_at else None
    return effective_confidence(confidence, created, accessed, datetime.fromisoformat(now), half_life_days)


def narrowing(filt: SearchFilter) -> bool:
    """Whether the filter may keep only a small part of the scope's rows (the vector tiers then
    search wider, or exactly among the matching rows)."""
    return bool(
        filt.topic is not None
        or filt.type is not None
        or filt.types
        or filt.memory_system is not None
        or filt.memory_systems
        or bool(filt.tags_all)
        or bool(filt.tags_any)
        or filt.only_session
        or filt.created_after is not None
        or filt.created_before is not None
        or filt.source is not None
        or filt.entity_id is not None
        or filt.min_confidence is not None
        or filt.keyed
        or filt.memory_key is not None
        or filt.ttl_tier is not None
        or filt.pinned is not None
    )


# A listing's order: anchors first, then by importance, newest first among equals (migration 0027
# indexes it per namespace and per namespace and topic).
LISTING_ORDER = "f.is_anchor DESC, f.importance DESC, f.created_at DESC"
RECENT_ORDER = "f.created_at DESC"  # newest first (the fragments' (agent, created_at) index)
SEQ_ORDER = "f.seq DESC"  # newest first by insertion: keyset pages (migration 0028's (agent, seq) index)

# How far a filtered listing walks a namespace's index in its order before it sorts the filter's
# rows instead: rows per row asked, and at least. A filter passed by one row in 16 or more is met
# within the walk; a rarer one costs the walk (~0.8 ms for 3,200 rows at a million memories)
# and then a sort of its few rows.
LISTING_WALK_PER_ROW = 16
LISTING_WALK_MIN = 1_000


def walked_in_order(filt: SearchFilter, order: str) -> bool:
    """Whether a listing of `filt` in `order` needs the bounded walk (`listing_walk`): a filter
    that narrows more than a topic, unless it is a time range listed newest first, which the
    namespace's (agent, created_at) index serves in that order, range and all."""
    if order == RECENT_ORDER and filt.topic is None:
        filt = replace(filt, created_after=None, created_before=None)
    return narrowing(replace(filt, topic=None))


def listing_walk(limit: int) -> int:
    """The rows a filtered listing of `limit` rows walks in order before it sorts instead."""
    return max(LISTING_WALK_MIN, LISTING_WALK_PER_ROW * limit)


def listing_walk_sql(filt: SearchFilter, order: str, table: str, mark: str, before: int | None = None) -> tuple[str, list[Any]]:
    """A filtered listing's bounded walk of one namespace's index in `order` (its parameters: the
    namespace, these, the rows to walk): by namespace, and by topic too when the filter has one
    and an index has both in that order (migration 0027's listing, the (agent, topic) index's
    insertion order); with `before`, only rows inserted before that seq (a keyset page)."""
    keys = f"w.agent_id = {mark}"
    params: list[Any] = []
    if filt.topic is not None and order in (LISTING_ORDER, SEQ_ORDER):
        keys += f" AND w.topic = {mark}"
        params.append(filt.topic)
    if before is not None:
        keys += f" AND w.seq < {mark}"
        params.append(before)
    return f"SELECT w.seq FROM {table} w WHERE {keys} ORDER BY {order.replace('f.', 'w.')} LIMIT {mark}", params


def selective(filt: SearchFilter) -> bool:
    """Whether the filter keeps few rows by its nature (one session's working memory, one key):
    a listing then reads them from their index at once, without walking the namespace first."""
    return filt.only_session or filt.memory_key is not None


def filter_sql(filt: SearchFilter, alias: str, dialect: Dialect, agent: str | None) -> tuple[str, list[Any]]:
    """The filter over fragments row `alias`. `agent`: the owner of the entity of `entity_id`
    (the caller's agent; None for the maintenance scope, which sees every agent's entities)."""
    mark, any_of = dialect.mark, dialect.any_of
    clauses: list[str] = []
    params: list[Any] = []
    if filt.only_session:
        clauses.append(f"{alias}.session_id = {mark}")
        params.append(filt.session_id)
    elif filt.all_sessions:  # every session's rows the scope sees (another namespace's working memory never is)
        clauses.append("1 = 1")
    elif filt.session_id:
        clauses.append(f"({alias}.session_id IS NULL OR {alias}.session_id = {mark})")
        params.append(filt.session_id)
    else:
        clauses.append(f"{alias}.session_id IS NULL")
    if filt.topic is not None:
        clauses.append(f"{alias}.topic = {mark}")
        params.append(filt.topic)
    if filt.type is not None:
        clauses.append(f"{alias}.type = {mark}")
        params.append(filt.type.value)
    if filt.types:
        values = [t.value for t in filt.types]
        if any_of:
            clauses.append(f"{alias}.type = ANY({mark})")
            params.append(values)
        else:
            clauses.append(f"{alias}.type IN ({','.join([mark] * len(values))})")
            params.extend(values)
    if filt.memory_system is not None:
        clauses.append(f"{alias}.memory_system = {mark}")
        params.append(filt.memory_system.value)
    if filt.memory_systems:
        systems = [m.value for m in filt.memory_systems]
        clauses.append(f"{alias}.memory_system IN ({','.join([mark] * len(systems))})")
        params.extend(systems)
    if any_of:  # PostgreSQL: tags is TEXT[] (GIN-indexed)
        if filt.tags_all:
            clauses.append(f"{alias}.tags @> {mark}::text[]")
            params.append(list(filt.tags_all))
        if filt.tags_any:
            clauses.append(f"{alias}.tags && {mark}::text[]")
            params.append(list(filt.tags_any))
    else:  # SQLite: tags is a JSON array
        for tag in filt.tags_all:
            clauses.append(f"EXISTS (SELECT 1 FROM json_each({alias}.tags) WHERE value = {mark})")
            params.append(tag)
        if filt.tags_any:
            marks = ",".join([mark] * len(filt.tags_any))
            clauses.append(f"EXISTS (SELECT 1 FROM json_each({alias}.tags) WHERE value IN ({marks}))")
            params.extend(filt.tags_any)
    _record_clauses(filt, alias, dialect, agent, clauses, params)
    return " AND ".join(clauses), params


def _record_clauses(filt: SearchFilter, alias: str, dialect: Dialect, agent: str | None, clauses: list[str], params: list[Any]) -> None:
    """001 §5.6: creation window, source, entity, effective confidence."""
    mark = dialect.mark
    if filt.created_after is not None:
        clauses.append(f"{alias}.created_at > {mark}")
        params.append(dialect.timestamp(filt.created_after))
    if filt.created_before is not None:
        clauses.append(f"{alias}.created_at < {mark}")
        params.append(dialect.timestamp(filt.created_before))
    if filt.source is not None:
        clauses.append(f"{alias}.source = {mark}")
        params.append(filt.source)
    if filt.entity_id is not None:
        owner = f" AND em.agent_id = {mark}" if agent is not None else ""
        clauses.append(
            f"EXISTS (SELECT 1 FROM {dialect.tables}entity_memories em WHERE em.fragment_id = {alias}.id AND em.entity_id = {mark}{owner})"
        )
        params.extend([filt.entity_id, *([agent] if agent is not None else [])])
    if filt.keyed or filt.memory_key is not None:
        clauses.append(f"{alias}.memory_key IS NOT NULL")
    if filt.memory_key is not None:
        clauses.append(f"{alias}.memory_key = {mark}")
        params.append(filt.memory_key)
    if filt.owner is not None:
        clauses.append(f"{alias}.agent_id = {mark}")
        params.append(filt.owner)
    if filt.ttl_tier is not None:
        clauses.append(f"{alias}.ttl_tier = {mark}")
        params.append(filt.ttl_tier.value)
    if filt.pinned is not None:
        clauses.append(f"{alias}.pinned = {mark}")
        params.append(filt.pinned)  # a bool: 0/1 in SQLite, boolean in PostgreSQL
    if filt.min_confidence is not None:
        expr, eparams = dialect.effective_confidence(alias, filt.now or datetime.now(UTC), filt.half_life_days)
        clauses.append(f"{expr} >= {mark}")
        params.extend([*eparams, filt.min_confidence])


def live_sql(alias: str, now: str) -> str:
    """Rows that are neither soft-deleted nor past their expiry; `now` is an SQL expression. A
    pinned row never expires (004: pin wins over expiresAt; unpinning lets the expiry apply)."""
    return f"{alias}.deleted_at IS NULL AND ({alias}.expires_at IS NULL OR {alias}.expires_at > {now} OR {alias}.pinned)"
