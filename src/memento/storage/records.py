"""Whole records of an agent, read and restored losslessly (the RecordStore protocol: `memento
export` format version 2, docs/export.md).

An exported table is described once here (`RecordTable`): its stored columns, its paging key,
who owns a row (an agent column, or the fragments it names) and whether it travels nested in
its fragment's record (a version trail). Both SQL backends build their statements from these
descriptions (`page_sql`, `restore_plan`), so adding a table to the export is a `RECORD_TABLES`
entry: its columns, its key and its owner.

Rows are dicts of plain Python values, as BulkStore's: lists, dicts, bools, aware datetimes;
a fragment row also carries `client_embedding` (bytes or None) and, when restored, may carry
`embedding` (the importing store's own vector of its content; an entity row, of its name and
description).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import Forbidden, InvalidArgument
from ..models import DEFAULT_AGENT, AgentScope
from .sqlfilter import Dialect, filter_sql, live_sql

if TYPE_CHECKING:
    from .protocol import SearchFilter


@dataclass(frozen=True)
class RecordTable:
    """One table an export carries."""

    table: str
    kind: str  # the `kind` of its lines (nested tables: the key it is listed under in its fragment's record)
    key: str  # the paging column: increasing, never exported (a serial id is the importing store's own)
    columns: tuple[str, ...]  # the stored columns carried, in order
    owner: str | None = "agent_id"  # the column naming the owning agent; None: owned through `fragments`
    fragments: tuple[str, ...] = ()  # columns naming fragments: a row is exported with the fragments it names
    entities: tuple[str, ...] = ()  # columns naming entities of the same agent (checked on restore)
    nested: bool = False  # travels inside its fragment's record (`fragments[0]` names it), not on its own line
    unique_id: bool = False  # `id` is the row's identity, kept across stores (a serial key is not exported)
    targets: tuple[str, ...] = ()  # columns that may name a fragment (NULL: none): restored only where it is held


FRAGMENT_COLUMNS: tuple[str, ...] = (
    "id",
    "agent_id",
    "session_id",
    "content",
    "detail",
    "topic",
    "type",
    "keywords",
    "importance",
    "content_hash",
    "source",
    "linked_to",
    "access_count",
    "accessed_at",
    "created_at",
    "ttl_tier",
    "tier_since",
    "estimated_tokens",
    "utility_score",
    "verified_at",
    "is_anchor",
    "confidence",
    "tags",
    "context",
    "metadata",
    "expires_at",
    "pinned",
    "memory_system",
    "privacy_scope",
    "origin_trace",
    "deleted_at",
    "memory_key",
    "client_embedding",
    "judged_utility",
)

FRAGMENTS = RecordTable("fragments", "fragment", "seq", FRAGMENT_COLUMNS, unique_id=True)
VERSIONS = RecordTable(
    "fragment_versions",
    "versions",
    "id",
    (
        "fragment_id",
        "content",
        "topic",
        "keywords",
        "type",
        "importance",
        "amended_at",
        "amended_by",
        "confidence",
        "metadata",
        "tags",
        "note",
    ),
    owner=None,
    fragments=("fragment_id",),
    nested=True,
)
LINKS = RecordTable(
    "fragment_links", "link", "id", ("from_id", "to_id", "relation_type", "created_at"), owner=None, fragments=("from_id", "to_id")
)
ENTITIES = RecordTable(
    "entities",
    "entity",
    "seq",
    ("id", "agent_id", "name", "entity_type", "description", "metadata", "created_at", "updated_at"),
    unique_id=True,
)
RELATIONS = RecordTable(
    "relations",
    "relation",
    "seq",
    (
        "id",
        "agent_id",
        "source_id",
        "target_id",
        "relation_type",
        "strength",
        "confidence",
        "context",
        "metadata",
        "created_at",
        "updated_at",
    ),
    entities=("source_id", "target_id"),
    unique_id=True,
)
ENTITY_LINKS = RecordTable(
    "entity_memories",
    "entityLink",
    "seq",
    ("agent_id", "entity_id", "fragment_id", "relevance", "created_at"),
    fragments=("fragment_id",),
    entities=("entity_id",),
)

LINKAGES = RecordTable(  # seed 003 (migration 0015): a memory's references to a memory, an item or a file
    "memory_linkages",
    "linkage",
    "id",
    ("agent_id", "fragment_id", "target_type", "memory_id", "item_id", "path", "label", "created_at"),
    fragments=("fragment_id",),
    targets=("memory_id",),
)

# Seed 003's skip list and identity crystal snapshots (migration 0014): rows of one agent each.
# A skip entry's vector is not exported (it is embedded again when checked).
SKIPS = RecordTable("skip_list", "skip", "seq", ("id", "agent_id", "item", "reason", "expires_at", "created_at"), unique_id=True)
IDENTITIES = RecordTable(
    "identity_snapshots", "identity", "seq", ("id", "agent_id", "crystal", "source", "source_count", "created_at"), unique_id=True
)

# Seed 003's working memory (migration 0013): a namespace's workspace record, its markdown
# sections (one per name) and its items (their `folded` search text is derived again on restore).
WORKSPACES = RecordTable("workspaces", "workspace", "seq", ("agent_id", "name", "created_at"))
SECTIONS = RecordTable("working_memory_sections", "section", "seq", ("agent_id", "section", "content", "updated_at"))
ITEMS = RecordTable(
    "working_memory_items",
    "item",
    "seq",
    ("id", "agent_id", "category", "title", "content", "status", "priority", "tags", "next_action", "created_at", "updated_at"),
    unique_id=True,
)

# In restore order: every table after the ones its rows name.
RECORD_TABLES: tuple[RecordTable, ...] = (
    FRAGMENTS,
    VERSIONS,
    LINKS,
    ENTITIES,
    RELATIONS,
    ENTITY_LINKS,
    LINKAGES,
    SKIPS,
    IDENTITIES,
    WORKSPACES,
    SECTIONS,
    ITEMS,
)
TABLES: dict[str, RecordTable] = {t.table: t for t in RECORD_TABLES}
NESTED: tuple[RecordTable, ...] = tuple(t for t in RECORD_TABLES if t.nested)


def record_table(table: str) -> RecordTable:
    """The description of an exported table; InvalidArgument for any other name."""
    if table not in TABLES:
        raise InvalidArgument(f"unknown record table {table!r}")
    return TABLES[table]


@dataclass(frozen=True)
class RecordQuery:
    """Which fragments an export holds, and so which rows of the other tables: the scope's own
    rows (every agent's for the maintenance scope) that pass `filt`, live ones only unless
    `include_forgotten` (soft-deleted and expired rows too)."""

    filt: SearchFilter
    include_forgotten: bool = False
    now: datetime | None = None  # what "expired" is measured against (None: the wall clock)
    agents: tuple[str, ...] | None = None  # the maintenance scope: only these agents' rows (None: every agent's)
    vectors: bool = False  # a fragment row also carries its stored vector: `embedding` (float32) and `embedding_model`


ALREADY_PRESENT = "already present"  # the reason of a skipped row that is stored already (same id, same owner)


@dataclass(frozen=True)
class RestoreSkip:
    """A record a restore left out, and why (it is already there, or what it names is not)."""

    table: str
    key: str
    reason: str


@dataclass
class RestoreOutcome:
    """What one restore_records call wrote: rows per table, and what it skipped."""

    restored: dict[str, int] = field(default_factory=dict)
    skipped: list[RestoreSkip] = field(default_factory=list)
    fragment_ids: list[str] = field(default_factory=list)  # the fragments written (their vectors may follow)

    def count(self, table: str) -> None:
        self.restored[table] = self.restored.get(table, 0) + 1

    def skip(self, table: str, key: str, reason: str) -> None:
        self.skipped.append(RestoreSkip(table, key, reason))


# ---------------------------------------------------------------- reading


def exported_sql(scope: AgentScope, query: RecordQuery, alias: str, dialect: Dialect) -> tuple[str, list[Any]]:
    """The fragments row `alias` belongs to the export: the scope's own, passing the filter, and
    live unless the query asks for forgotten rows too."""
    clauses, params = owner_sql(scope, query, f"{alias}.agent_id", dialect)
    if not query.include_forgotten:
        clauses.append(live_sql(alias, dialect.mark))
        params.append(dialect.timestamp(query.now or datetime.now(UTC)))
    fsql, fparams = filter_sql(query.filt, alias, dialect, None if scope.is_maintenance else scope.agent_id)
    clauses.append(fsql)
    params.extend(fparams)
    return " AND ".join(clauses), params


def owner_sql(scope: AgentScope, query: RecordQuery, column: str, dialect: Dialect) -> tuple[list[str], list[Any]]:
    """`column` names an agent whose rows the export holds: the scope's own agent, or for the
    maintenance scope the query's agents (every agent when it names none)."""
    agents = query.agents if scope.is_maintenance else (scope.agent_id,)
    if agents is None:
        return [], []
    if dialect.any_of:
        return [f"{column} = ANY({dialect.mark})"], [list(agents)]
    return [f"{column} IN ({','.join([dialect.mark] * len(agents))})"], list(agents)


def page_sql(
    spec: RecordTable, scope: AgentScope, query: RecordQuery, dialect: Dialect, *, after: int, limit: int, parents: Sequence[str] = ()
) -> tuple[str, list[Any]]:
    """The SELECT of one page of `spec`'s exported rows, in key order after `after` (the key is
    selected as `_key`; a table without an owner column gets its first fragment's agent as
    `agent_id`). With `parents`, only the rows of those fragments (a nested table), unpaged."""
    mark, prefix = dialect.mark, dialect.tables
    names = [f"t.{c}" for c in spec.columns]
    if spec.owner is None and "agent_id" not in spec.columns:
        names.append("f0.agent_id AS agent_id")
    joins: list[str] = []
    clauses: list[str] = []
    params: list[Any] = []
    if spec is FRAGMENTS:
        where, wparams = exported_sql(scope, query, "t", dialect)
        clauses.append(where)
        params.extend(wparams)
    else:
        for i, column in enumerate(spec.fragments):
            joins.append(f"JOIN {prefix}fragments f{i} ON f{i}.id = t.{column}")
            where, wparams = exported_sql(scope, query, f"f{i}", dialect)
            clauses.append(where)
            params.extend(wparams)
        if spec.owner is not None:
            oclauses, oparams = owner_sql(scope, query, f"t.{spec.owner}", dialect)
            clauses.extend(oclauses)
            params.extend(oparams)
    if parents:
        if dialect.any_of:
            clauses.append(f"t.{spec.fragments[0]} = ANY({mark})")
            params.append(list(parents))
        else:
            clauses.append(f"t.{spec.fragments[0]} IN ({','.join([mark] * len(parents))})")
            params.extend(parents)
        bound = ""
    else:
        clauses.append(f"t.{spec.key} > {mark}")
        params.append(after)
        bound = f" LIMIT {mark}"
    # A page walks the table in key order and stops at LIMIT. SQLite's planner, once it has
    # statistics, may prefer an index on agent_id and sort every later row for each page (pages
    # then cost more the earlier they start: quadratic in all); NOT INDEXED keeps it on the rowid
    # range (the paging keys are the tables' integer primary keys), joins still use their indexes.
    hint = " NOT INDEXED" if not dialect.any_of and not parents else ""
    sql = (
        f"SELECT t.{spec.key} AS _key, {', '.join(names)} FROM {prefix}{spec.table} t{hint} {' '.join(joins)}"
        f" WHERE {' AND '.join(clauses or ['1 = 1'])} ORDER BY t.{spec.key}{bound}"
    )
    return sql, params if parents else [*params, limit]


def owners_sql(scope: AgentScope, query: RecordQuery, dialect: Dialect) -> tuple[str, list[Any]]:
    """Each agent with exported fragments, and how many (the header's agents; a progress total)."""
    where, params = exported_sql(scope, query, "t", dialect)
    return f"SELECT t.agent_id AS agent_id, COUNT(*) AS n FROM {dialect.tables}fragments t WHERE {where} GROUP BY t.agent_id", params


# ---------------------------------------------------------------- restoring


def check_owner(scope: AgentScope, spec: RecordTable, row: dict[str, object]) -> str:
    """The agent a restored row belongs to; Forbidden (the whole batch refused) when the scope may
    not write it: another agent's row, or a shared-pool row the scope may not add."""
    agent = str(row.get("agent_id") or "")
    if not agent:
        raise InvalidArgument(f"a {spec.kind} record names no agent")
    if not scope.is_maintenance and agent != scope.agent_id:
        raise Forbidden(f"a {spec.kind} record of agent {agent!r} cannot be restored as agent {scope.agent_id!r}; nothing restored")
    if spec is FRAGMENTS and agent == DEFAULT_AGENT:
        anchored, working = bool(row.get("is_anchor")), row.get("session_id") is not None
        if not scope.may_write_pool(anchored=anchored, working=working):
            raise Forbidden(scope.pool_refusal([str(row.get("id"))]))
    return agent


def shared_with(agent: str, owner: str, session_id: object, privacy: object) -> bool:
    """Whether `agent` may name a fragment of `owner` in a restored row (a link's target, an
    association): its own, or a shared-pool row the pool shares (not working memory, not private),
    as the visibility rules say (storage/sqlite_sql.py; PostgreSQL's policy checks the same)."""
    if owner == agent:
        return True
    return owner == DEFAULT_AGENT and session_id is None and privacy != "private"


def named_fragments(spec: RecordTable, row: dict[str, object]) -> list[str]:
    """The fragments a restored row names: its fragment columns, and the target columns it fills."""
    return [str(row[c]) for c in spec.fragments] + [str(row[c]) for c in spec.targets if row.get(c) is not None]


def row_key(spec: RecordTable, row: dict[str, object]) -> str:
    """How a skipped row is named in a report: its id, else the ids it joins."""
    if spec.unique_id:
        return str(row.get("id"))
    return " -> ".join(str(row.get(c)) for c in (*spec.entities, *spec.fragments) if c != "agent_id")


def split_nested(row: dict[str, object]) -> tuple[dict[str, object], dict[RecordTable, list[dict[str, object]]]]:
    """A fragment row without its nested tables' rows, and those rows by table."""
    own = {k: v for k, v in row.items() if k not in {t.kind for t in NESTED}}
    nested = {t: list(row.get(t.kind) or []) for t in NESTED}  # type: ignore[call-overload]
    return own, nested
