"""SQLite connections: one writer connection behind a re-entrant lock, whose write transactions
nest and run after-commit hooks; a reader connection per thread; a rehearsal (a write transaction
rolled back at the end, its thread reading what it wrote); migrations, ping and close."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3

from .protocol import ReadOnlySession
from .sqlfilter import SQLITE_CONFIDENCE_FUNCTION, CommonTags, sqlite_effective_confidence
from .sqlite_sql import ts

log = logging.getLogger(__name__)

WAL_SWITCH_ATTEMPTS = 100
PING_TIMEOUT_S = 2.0


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch a new file to WAL. The switch needs the file to itself and SQLite answers "locked"
    at once, without its busy handler, while another process opens the same new file (servers
    started together): try again, briefly, as the busy handler would."""
    for attempt in range(WAL_SWITCH_ATTEMPTS):
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == WAL_SWITCH_ATTEMPTS - 1:
                raise
            time.sleep(0.01 + random.random() * 0.04)


class SQLiteDatabase:
    """The connections to one SQLite file (WAL). Opening it applies the pending migrations."""

    def __init__(self, path: Path, synchronous: str = "FULL") -> None:
        self.path = path
        self.synchronous = synchronous
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write_lock = threading.RLock()
        self._depth = 0  # nesting of tx on the writer (guarded by _write_lock)
        self._committed: list[Callable[[], None]] = []
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self.common_tags = CommonTags()  # the tags many memories carry, as last counted (sqlfilter)
        self.writer = self.connect()
        self.migrate()

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=30)
        conn.row_factory = sqlite3.Row
        _enable_wal(conn)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        # What SQLite frees (a deleted row, the old copy of a changed one, a page) is zeroed, so
        # no text outlives its row in free space: the physical half of a hard erasure (004 §5.1).
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA cache_size = -65536")
        # SearchFilter.min_confidence in SQL (sqlfilter.py): Python's own formula, on every connection
        conn.create_function(SQLITE_CONFIDENCE_FUNCTION, 5, sqlite_effective_confidence, deterministic=True)
        return conn

    def reader(self) -> sqlite3.Connection:
        """This thread's reader connection (the last commit); in a rehearsal on this thread, the
        writer, so the rehearsed stages read what the earlier ones wrote, as a real run would."""
        if getattr(self._local, "rehearsing", False):
            return self.writer
        return self.committed_reader()

    def committed_reader(self) -> sqlite3.Connection:
        """This thread's reader connection, rehearsal or not (what an in-process cache such as the
        vector index may learn from: only committed rows)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self.connect()
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def in_transaction(self) -> bool:
        """Whether this thread is inside tx() or rehearsal()."""
        return getattr(self._local, "tx_depth", 0) > 0

    @contextmanager
    def _on_this_thread(self) -> Iterator[None]:
        self._local.tx_depth = getattr(self._local, "tx_depth", 0) + 1
        try:
            yield
        finally:
            self._local.tx_depth -= 1

    @contextmanager
    def reading(self) -> Iterator[None]:
        """The store calls made inside it on this thread are reads (Store.reading): each reads the
        last commit as it would alone (SQLite gains nothing from sharing a read transaction), and
        a write inside fails before it begins, as it does in PostgreSQL's read-only transaction."""
        before = getattr(self._local, "reading", False)
        self._local.reading = not self.in_transaction()  # inside a unit of work it is that unit
        try:
            yield
        finally:
            self._local.reading = before

    def _refuse_in_reading(self) -> None:
        if getattr(self._local, "reading", False):
            raise ReadOnlySession("a write inside a read-only session (Store.reading)")

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the single writer connection. Inside another one (on this
        thread: the writer lock is re-entrant) it joins it: the outermost commits or rolls back
        everything, so a multi-step write built from single-step ones stays one transaction."""
        self._refuse_in_reading()
        with self._write_lock, self._on_this_thread():
            conn = self.writer
            if self._depth:
                self._depth += 1
                try:
                    yield conn
                finally:
                    self._depth -= 1
                return
            conn.execute("BEGIN IMMEDIATE")
            self._depth, self._committed = 1, []
            try:
                yield conn
            except BaseException:
                self._depth, self._committed = 0, []
                conn.execute("ROLLBACK")
                raise
            self._depth = 0
            conn.execute("COMMIT")
            done, self._committed = self._committed, []
        for apply in done:  # this process's vector index follows only what was committed
            apply()

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        """A write transaction that is always rolled back: the store calls made inside it (on this
        thread) run for real, read what they wrote, and leave nothing behind — no row, and no
        after-commit hook (the vector index is never told). Holds the write lock throughout: other
        writers wait until it ends."""
        self._refuse_in_reading()
        with self._write_lock, self._on_this_thread():
            if self._depth:
                raise RuntimeError("rehearsal() inside a write transaction")
            conn = self.writer
            conn.execute("BEGIN IMMEDIATE")
            self._depth, self._committed = 1, []
            self._local.rehearsing = True
            try:
                yield
            finally:
                self._local.rehearsing = False
                self._depth, self._committed = 0, []
                conn.execute("ROLLBACK")

    @contextmanager
    def exclusive(self) -> Iterator[sqlite3.Connection]:
        """The writer connection outside any transaction, other writers held off (statements
        that cannot run in one: VACUUM, a WAL checkpoint)."""
        with self._write_lock:
            if self._depth:
                raise RuntimeError("exclusive() inside a write transaction")
            yield self.writer

    def on_commit(self, apply: Callable[[], None]) -> None:
        """Run `apply` once the current (outermost) write transaction has committed."""
        self._committed.append(apply)

    def migrate(self) -> None:
        """Apply the named migrations not yet recorded, each in one transaction. The record is
        read inside that transaction, so processes starting together on one file apply each once."""
        folder = resources.files("memento.storage.migrations").joinpath("sqlite")
        applied: list[str] = []
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".sql"):
                continue
            with self.tx() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
                if conn.execute("SELECT 1 FROM schema_migrations WHERE name = ?", (entry.name,)).fetchone():
                    continue
                script = entry.read_text(encoding="utf-8")
                for statement in _statements(script):
                    conn.execute(statement)
                if "writable_schema" in script:  # a schema text edit: make every connection reload it
                    version = conn.execute("PRAGMA schema_version").fetchone()[0]
                    conn.execute(f"PRAGMA schema_version = {int(version) + 1}")
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (entry.name, ts(datetime.now(UTC))))
            applied.append(entry.name)
        if applied:  # one line, not one per migration: a first run creates the whole schema
            created = applied[0].startswith("0001_")
            log.info(
                "%s %s: applied %s",
                "created database" if created else "upgraded database",
                self.path,
                ", ".join(n.removesuffix(".sql") for n in applied),
            )

    def ping(self, timeout_s: float = PING_TIMEOUT_S) -> None:
        """A real query on a fresh connection to the configured file (`/health`); raises when the
        database cannot be reached. A fresh connection, because the long-lived ones keep working
        on an open file descriptor after the file or its volume is gone."""
        uri = self.path.expanduser().resolve().as_uri() + "?mode=rw"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout_s)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            conn.execute("SELECT 1 FROM schema_migrations LIMIT 1").fetchall()
        finally:
            conn.close()

    def migrations(self) -> list[str]:
        return [r[0] for r in self.reader().execute("SELECT name FROM schema_migrations ORDER BY name")]

    def close(self) -> None:
        """Close every reader connection, then optimise and close the writer."""
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        with self._write_lock:
            self.writer.execute("PRAGMA optimize")
            self.writer.close()


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration script, trigger bodies kept whole."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                yield pending
            pending = ""
    if pending.strip() and not all(ln.strip().startswith("--") or not ln.strip() for ln in pending.splitlines()):
        raise ValueError("a migration ends with an incomplete statement")
