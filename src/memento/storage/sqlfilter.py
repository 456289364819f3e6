"""The SearchFilter as a SQL predicate, shared by the SQL backends (they differ in placeholders,
array support, table names and how they compute effective confidence)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..graph import effective_confidence
from .protocol import SearchFilter
from .terms import CountCache

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


# Up to how many tagged memories a tag filter, in a statement that may start from the rows it
# keeps, is the set of them (found from the tag index once per statement: ~0.3 us a row on SQLite)
# rather than a test of each row read (~1 us a row, and a walk that may read the whole namespace).
FEW_TAGGED = 20_000


COMMON_TAGS_TTL_S = 60.0  # how long a tag counted common is taken as common without counting again


class CommonTags:
    """The tags many memories carry (FEW_TAGGED or more) as last counted, per key, for
    COMMON_TAGS_TTL_S: counting a common tag up to the bound reads FEW_TAGGED index entries
    (~1 ms on SQLite, 6-8 ms on PostgreSQL) for every statement that asks. A rare tag is counted
    each time (its count stops early), so a tag that becomes common is seen at once; one that
    stops being common is seen within the TTL. A stale answer changes only how a tag filter is
    written (the set of the tagged memories, or a test of each row), never what it keeps."""

    def __init__(self, ttl_s: float = COMMON_TAGS_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._kept: CountCache[bool] = CountCache(ttl_s=ttl_s, clock=clock)

    def few(self, key: Hashable, count: Callable[[int], int]) -> bool:
        """Whether fewer than FEW_TAGGED memories carry the tags of `key`; `count(at_most)`
        counts them up to `at_most`."""
        if self._kept.fresh(key):
            return False
        if count(FEW_TAGGED) < FEW_TAGGED:
            return True
        self._kept.put(key, True, keep=10_000)
        return False


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


def filter_sql(
    filt: SearchFilter, alias: str, dialect: Dialect, agent: str | None, few_tagged: Callable[[Sequence[str]], bool] | None = None
) -> tuple[str, list[Any]]:
    """The filter over fragments row `alias`. `agent`: the owner of the entity of `entity_id`
    (the caller's agent; None for the maintenance scope, which sees every agent's entities).

    `few_tagged` is given for a statement that may start from the rows the filter keeps (a
    count, a sort of the filter's rows, an exact vector ranking): it says whether few memories
    carry any of these tags (fewer than FEW_TAGGED). Such tags, and an entity's memories, are
    then the set of their rows from their own tables, which the statement can start from;
    without it (a statement that tests rows found another way) each row is tested by itself
    (`_sqlite_tags`, `_postgres_tagged`, `_entity_clause`)."""
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
    if any_of:  # PostgreSQL: tags is TEXT[], one row per (memory, tag) in fragment_tags (migration 0029)
        if filt.tags_all:
            clauses.append(f"{alias}.tags @> {mark}::text[]")
            params.append(list(filt.tags_all))
            rare = next((tag for tag in filt.tags_all if few_tagged is not None and few_tagged([tag])), None)
            if rare is not None:  # the memories carrying all the tags are among those carrying this one
                clauses.append(_postgres_tagged(alias, dialect))
                params.append([rare])
        if filt.tags_any:
            if few_tagged is not None and few_tagged(filt.tags_any):
                clauses.append(_postgres_tagged(alias, dialect))
            else:
                clauses.append(f"{alias}.tags && {mark}::text[]")
            params.append(list(filt.tags_any))
    else:  # SQLite: tags is a JSON array, one row per (tag, memory) in fragment_tags (migration 0029)
        for tag in filt.tags_all:
            clauses.append(_sqlite_tags(alias, dialect, 1, few_tagged is not None and few_tagged([tag])))
            params.append(tag)
        if filt.tags_any:
            clauses.append(_sqlite_tags(alias, dialect, len(filt.tags_any), few_tagged is not None and few_tagged(filt.tags_any)))
            params.extend(filt.tags_any)
    _record_clauses(filt, alias, dialect, agent, clauses, params, starts=few_tagged is not None)
    return " AND ".join(clauses), params


def _postgres_tagged(alias: str, dialect: Dialect) -> str:
    """The row is one of the memories carrying a tag of the bound array, as the array of their
    seqs gathered once from fragment_tags by text equality (an index condition row-level security
    allows; the array operators on fragments.tags are not leakproof, so its GIN index could not
    serve them, and the planner's guess for them is a fixed share of the store)."""
    return f"{alias}.seq = ANY(ARRAY(SELECT t.seq FROM {dialect.tables}fragment_tags t WHERE t.tag = ANY({dialect.mark}::text[])))"


def _sqlite_tags(alias: str, dialect: Dialect, n: int, few: bool) -> str:
    """A row carries one of `n` tags (bound in order). Of few tagged rows, as the set of them from
    fragment_tags: the statement may start from it, and SQLite builds it once per statement (for a
    tag on half a million memories that took 0.5 s). Otherwise by the row's own JSON tags, read
    with the row (a lookup in fragment_tags per row cost more)."""
    marks = ",".join([dialect.mark] * n)
    if few:
        return f"{alias}.seq IN (SELECT t.seq FROM {dialect.tables}fragment_tags t WHERE t.tag IN ({marks}))"
    return f"EXISTS (SELECT 1 FROM json_each({alias}.tags) WHERE value IN ({marks}))"


def _entity_clause(alias: str, dialect: Dialect, owned: bool, starts: bool) -> str:
    """The row is associated with the bound entity (and, `owned`, through the bound agent's
    association). For a statement that may start from the filter's rows, as the set of the
    entity's memories (an entity's associations are few beside a large store: tested row by row,
    a count or a listing by a rare entity read the whole namespace, ~300 ms at a million);
    otherwise by a probe of the row's own associations."""
    m, table = dialect.mark, f"{dialect.tables}entity_memories"
    owner = f" AND em.agent_id = {m}" if owned else ""
    if not starts:
        return f"EXISTS (SELECT 1 FROM {table} em WHERE em.fragment_id = {alias}.id AND em.entity_id = {m}{owner})"
    if dialect.any_of:
        return f"{alias}.id = ANY(ARRAY(SELECT em.fragment_id FROM {table} em WHERE em.entity_id = {m}{owner}))"
    return f"{alias}.id IN (SELECT em.fragment_id FROM {table} em WHERE em.entity_id = {m}{owner})"


def _record_clauses(
    filt: SearchFilter, alias: str, dialect: Dialect, agent: str | None, clauses: list[str], params: list[Any], *, starts: bool = False
) -> None:
    """001 §5.6: creation window, source, entity, effective confidence (`starts`: as filter_sql's
    `few_tagged` is given)."""
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
        clauses.append(_entity_clause(alias, dialect, agent is not None, starts))
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
    if filt.pinned is not None:  # literal, so that the partial index of pinned rows serves it (migration 0029)
        if dialect.any_of:
            clauses.append(f"{alias}.pinned" if filt.pinned else f"NOT {alias}.pinned")
        else:
            clauses.append(f"{alias}.pinned = {1 if filt.pinned else 0}")
    if filt.min_confidence is not None:
        expr, eparams = dialect.effective_confidence(alias, filt.now or datetime.now(UTC), filt.half_life_days)
        clauses.append(f"{expr} >= {mark}")
        params.extend([*eparams, filt.min_confidence])


def count_index_term(filt: SearchFilter, alias: str, dialect: Dialect) -> str:
    """For a count under `filt`: " AND <term>" when the index of live rows' visibility columns
    (migration 0031, `fragments_live_count`) holds every column the count tests (sessions, the
    owner, unpinned rows, and the scope's own predicate), else "". The term is always true and
    named only here and in the index's WHERE, so only these counts can take that index."""
    selective = (
        filt.topic, filt.type, filt.types, filt.tags_all, filt.tags_any, filt.memory_system, filt.memory_systems,
        filt.created_after, filt.created_before, filt.source, filt.entity_id, filt.min_confidence, filt.memory_key, filt.ttl_tier,
    )  # fmt: skip
    if filt.keyed or filt.pinned or any(v is not None and v != () for v in selective):
        return ""  # pinned rows have their own index; the others test columns this one lacks
    return f" AND {alias}.pinned IN (true, false)" if dialect.any_of else f" AND {alias}.pinned IN (0, 1)"


def live_sql(alias: str, now: str) -> str:
    """Rows that are neither soft-deleted nor past their expiry; `now` is an SQL expression. A
    pinned row never expires (004: pin wins over expiresAt; unpinning lets the expiry apply)."""
    return f"{alias}.deleted_at IS NULL AND ({alias}.expires_at IS NULL OR {alias}.expires_at > {now} OR {alias}.pinned)"
