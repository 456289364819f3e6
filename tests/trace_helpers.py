"""The SQL statements a store call runs, on either backend: for tests that check which form of a
statement a store chose (a set of rows to start from, a bounded walk, a sort)."""

from __future__ import annotations

from typing import Any

from memento.storage.protocol import Store


def traced_statements(store: Store, call: Any, *, writer: bool = False) -> list[str]:
    """The SQL statements `call` ran on this store (SQLite: the reader's trace, or the writer's;
    PostgreSQL: the cursor's executions)."""
    seen: list[str] = []
    db = store.db  # type: ignore[attr-defined]
    if hasattr(db, "reader"):
        conn = db.writer if writer else db.reader()
        conn.set_trace_callback(seen.append)
        try:
            call()
        finally:
            conn.set_trace_callback(None)
        return seen
    import psycopg

    execute = psycopg.Cursor.execute

    def recorded(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(query))
        return execute(self, query, *args, **kwargs)

    psycopg.Cursor.execute = recorded  # type: ignore[method-assign]
    try:
        call()
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    return seen
