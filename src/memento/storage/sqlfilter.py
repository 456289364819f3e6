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
    return " AND ".join(clauses), params
