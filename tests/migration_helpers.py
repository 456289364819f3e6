"""A SQLite store as an older release left it: the migrations before a given one, applied as the
runner applies them (storage/sqlite_db.py), for tests of an upgrade."""

from __future__ import annotations

from pathlib import Path

import pysqlite3.dbapi2 as sqlite3

from memento.storage import migrations
from memento.storage.sqlite_db import _statements


def sqlite_store_before(path: Path, first_missing: str, *, foreign_keys: bool = False) -> sqlite3.Connection:
    """An autocommit connection to a new store at `path` with every migration whose name sorts
    before `first_missing` (e.g. "0018") applied and recorded."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    if foreign_keys:
        conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    folder = Path(str(migrations.__file__)).parent / "sqlite"
    for script in sorted(p for p in folder.glob("*.sql") if p.name < first_missing):
        text = script.read_text()
        conn.execute("BEGIN")
        for statement in _statements(text):
            conn.execute(statement)
        if "writable_schema" in text:
            conn.execute(f"PRAGMA schema_version = {conn.execute('PRAGMA schema_version').fetchone()[0] + 1}")
        conn.execute("INSERT INTO schema_migrations VALUES (?, '2026-01-01')", (script.name,))
        conn.execute("COMMIT")
    return conn
