"""The SearchFilter as a SQL predicate, shared by the SQL backends (they differ in placeholders)."""

from __future__ import annotations

from typing import Any

from .protocol import SearchFilter


def filter_sql(filt: SearchFilter, alias: str, mark: str, any_of: bool) -> tuple[str, list[Any]]:
    """`mark` is the driver's placeholder (`?` or `%s`); `any_of` uses `= ANY(array)` for lists."""
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
    return " AND ".join(clauses), params


def live_sql(alias: str, now: str) -> str:
    """Rows that are neither soft-deleted nor past their expiry; `now` is an SQL expression."""
    return f"{alias}.deleted_at IS NULL AND ({alias}.expires_at IS NULL OR {alias}.expires_at > {now})"
