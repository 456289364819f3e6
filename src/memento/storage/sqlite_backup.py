"""File-level copies of a SQLite store (`memento backup` and `memento restore`).

Both go through SQLite's online backup API, page by page, never through a file copy:

* A backup reads one snapshot of the database (a read transaction held across every step), so
  it is consistent while servers keep writing in WAL mode and is never restarted by their
  writes. The copy is a standalone file (rollback journal, no `-wal` beside it), checked with
  `PRAGMA integrity_check`, and appears under its name only when complete.
* A restore checks the file (a SQLite database that passes the integrity check and carries
  Memento's migrations table, none of them newer than this version), upgrades a copy of it to
  the current schema, keeps the database it replaces as `<name>.before-restore-<UTC time>`, and
  writes it into the live database with the backup API in reverse: one write transaction, so a
  server holding the file open sees the old database or the restored one, never a mixture.
  The restored file then gets a new vector-index identity and a vector change clock beyond
  both histories, with every vector (and every vector of the replaced database) marked
  changed: indexes saved beside the file are rebuilt, and a running server's in-memory index
  refreshes itself before its next search.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3

from ..errors import Conflict, InvalidArgument, NotFound
from .sqlite_db import SQLiteDatabase

HEADER = b"SQLite format 3\x00"
STEP_PAGES = 256  # pages per backup step: progress granularity; each step is short
BUSY_TIMEOUT_MS = 30_000
INTEGRITY_REPORT_LINES = 5

Progress = Callable[[int, int], None]  # (pages copied, pages in all)


@dataclass(frozen=True)
class CopyReport:
    """What a backup or restore wrote."""

    path: Path
    pages: int
    bytes: int
    migrations: list[str]
    replaced: Path | None = None  # restore: where the database it replaced is kept
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "pages": self.pages,
            "bytes": self.bytes,
            "schema": self.migrations[-1].removesuffix(".sql") if self.migrations else None,
            "replaced": str(self.replaced) if self.replaced else None,
            "notes": list(self.notes),
        }


def known_migrations() -> list[str]:
    """The SQLite migrations this version of Memento applies, in order."""
    folder = resources.files("memento.storage.migrations").joinpath("sqlite")
    return sorted(e.name for e in folder.iterdir() if e.name.endswith(".sql"))


def _connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection to an existing file (never creates one). Read-only, a WAL-mode file with no
    `-wal` beside it (a copy nobody has open) is read as immutable: a plain read-only open would
    leave a `-wal` and `-shm` next to it."""
    uri = path.resolve().as_uri() + ("?mode=ro" if read_only else "?mode=rw")
    if read_only and _wal_mode(path) and not path.with_name(path.name + "-wal").exists():
        uri += "&immutable=1"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL (its read and write format versions are 2)."""
    with path.open("rb") as f:
        header = f.read(20)
    return header.startswith(HEADER) and header[18:20] == b"\x02\x02"


def inspect(path: Path) -> list[str]:
    """The applied migrations of the Memento SQLite database at `path`, after SQLite's integrity
    check; InvalidArgument (naming the reason) when it is not one this version can open."""
    if not path.is_file():
        raise NotFound(f"{path} does not exist or is not a file")
    with path.open("rb") as f:
        if f.read(len(HEADER)) != HEADER:
            raise InvalidArgument(f"{path} is not a SQLite database")
    try:
        with closing(_connect(path, read_only=True)) as conn:
            problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                shown = "; ".join(problems[:INTEGRITY_REPORT_LINES])
                raise InvalidArgument(f"{path} fails SQLite's integrity check: {shown}")
            tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"schema_migrations", "fragments"} <= tables:
                raise InvalidArgument(f"{path} is a SQLite database but not a Memento store (no schema_migrations and fragments tables)")
            applied = [str(r[0]) for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
    except sqlite3.DatabaseError as exc:
        raise InvalidArgument(f"{path} cannot be read as a SQLite database: {exc}") from exc
    unknown = sorted(set(applied) - set(known_migrations()))
    if unknown:
        raise InvalidArgument(f"{path} was written by a newer Memento (unknown migrations: {', '.join(unknown)}); upgrade memento first")
    return applied


@contextmanager
def _partial(target: Path) -> Iterator[Path]:
    """A temporary file beside `target` (same file system, so the final rename is atomic),
    removed unless the caller moved it into place."""
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    try:
        yield tmp
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal"), tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)


def _copy(source: sqlite3.Connection, target: sqlite3.Connection, progress: Progress | None) -> int:
    """Copy every page of `source` into `target` from one snapshot of `source`: a read
    transaction is held across the steps, so other writers neither tear the copy nor restart it."""
    pages = 0

    def step(_status: int, remaining: int, total: int) -> None:
        nonlocal pages
        pages = total
        if progress is not None:
            progress(total - remaining, total)

    source.execute("BEGIN")
    try:
        source.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # the snapshot starts here
        source.backup(target, pages=STEP_PAGES, progress=step)
    finally:
        source.execute("COMMIT")
    return pages


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _place(tmp: Path, target: Path, *, overwrite: bool) -> None:
    """Move a complete file into place atomically; without `overwrite` never over an existing one."""
    _fsync(tmp)
    if overwrite:
        os.replace(tmp, target)
    else:
        try:
            os.link(tmp, target)  # fails if the name exists: no check-then-write race
        except FileExistsError as exc:
            raise Conflict(f"{target} already exists; nothing written (--force replaces it)") from exc
        tmp.unlink()
    _fsync(target.parent)


def _same_file(a: Path, b: Path) -> bool:
    return a.exists() and b.exists() and os.path.samefile(a, b)


def backup(database: Path, target: Path, *, overwrite: bool = False, progress: Progress | None = None) -> CopyReport:
    """Copy the live database at `database` to `target` (consistent while servers write), then
    check the copy. Refuses an existing `target` unless `overwrite`."""
    if not database.is_file():
        raise NotFound(f"no database at {database}")
    if _same_file(database, target):
        raise InvalidArgument(f"{target} is the database itself; choose another path")
    if target.is_dir():
        raise InvalidArgument(f"{target} is a directory; give a file name")
    if not target.parent.is_dir():
        raise NotFound(f"folder {target.parent} does not exist")
    if target.exists() and not overwrite:
        raise Conflict(f"{target} already exists; nothing written (--force replaces it)")
    with _partial(target) as tmp:
        with closing(_connect(database)) as source, closing(sqlite3.connect(str(tmp), isolation_level=None)) as copy:
            pages = _copy(source, copy, progress)
            copy.execute("PRAGMA journal_mode = DELETE")  # a standalone file: no -wal to carry along
        migrations = inspect(tmp)
        size = tmp.stat().st_size
        _place(tmp, target, overwrite=overwrite)
    return CopyReport(target, pages, size, migrations)


def restore(source: Path, database: Path, *, overwrite: bool = False, progress: Progress | None = None) -> CopyReport:
    """Replace the database at `database` with the Memento backup `source` (see the module doc).
    Refuses an existing database unless `overwrite`; the replaced one is kept beside it."""
    if _same_file(source, database):
        raise InvalidArgument(f"{source} is the database itself; nothing to restore")
    given = inspect(source)
    exists = database.exists()
    if exists and not overwrite:
        raise Conflict(f"a database already exists at {database}; nothing changed (--force replaces it and keeps a copy)")
    if not database.parent.is_dir():
        raise NotFound(f"folder {database.parent} does not exist")
    with _partial(database) as staged:
        with closing(_connect(source, read_only=True)) as src, closing(sqlite3.connect(str(staged), isolation_level=None)) as copy:
            pages = _copy(src, copy, None if exists else progress)
        SQLiteDatabase(staged).close()  # an older backup is upgraded here, never in the live file
        migrations = inspect(staged)
        notes = [f"upgraded the backup's schema from {_name(given)} to {_name(migrations)}"] if migrations != given else []
        if not exists:
            with closing(_connect(staged)) as conn:
                _renew_vector_log(conn, None)
            size = staged.stat().st_size
            _place(staged, database, overwrite=False)
            return CopyReport(database, pages, size, migrations, notes=notes)
        kept = _kept_name(database)
        try:
            inspect(database)
        except InvalidArgument as exc:  # a damaged database is set aside as it is (stop its servers first)
            _set_aside(database, kept)
            _place(staged, database, overwrite=False)
            notes.append(f"the replaced database could not be copied ({exc.message}); its files were moved to {kept}")
            return CopyReport(database, pages, database.stat().st_size, migrations, replaced=kept, notes=notes)
        backup(database, kept)  # the replaced database, consistent, before anything changes
        with closing(_connect(staged, read_only=True)) as src, closing(_connect(database)) as live:
            before = _vector_state(live)
            pages = _copy(src, live, progress)  # one write transaction on the live file
            _renew_vector_log(live, before, kept)
            problems = [str(r[0]) for r in live.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise InvalidArgument(f"the restored database fails SQLite's check ({'; '.join(problems[:5])}); the replaced one is kept at {kept}")
    return CopyReport(database, pages, database.stat().st_size, migrations, replaced=kept, notes=notes)


def _name(migrations: list[str]) -> str:
    return migrations[-1].removesuffix(".sql") if migrations else "none"


def _set_aside(database: Path, kept: Path) -> None:
    """Move a database's files (with its -wal and -shm) to `kept`, as they are."""
    for suffix in ("", "-wal", "-shm"):
        path = database.with_name(database.name + suffix)
        if path.exists():
            os.replace(path, kept.with_name(kept.name + suffix))


def _kept_name(database: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    kept = database.with_name(f"{database.name}.before-restore-{stamp}")
    n = 1
    while kept.exists():
        n += 1
        kept = database.with_name(f"{database.name}.before-restore-{stamp}-{n}")
    return kept


@dataclass(frozen=True)
class _VectorState:
    clock: int
    max_seq: int


def _vector_state(conn: sqlite3.Connection) -> _VectorState:
    """The live database's vector clock and highest fragment seq, read just before a restore."""
    clock = conn.execute("SELECT value FROM vector_clock WHERE id = 1").fetchone()
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'fragments'").fetchone()
    return _VectorState(int(clock[0]) if clock else 0, int(seq[0]) if seq else 0)


def _renew_vector_log(conn: sqlite3.Connection, before: _VectorState | None, replaced: Path | None = None) -> None:
    """Make every vector index derived from either database notice the change (see the module
    doc): a new identity, a clock past both histories, every vector and every vector of the
    replaced database (`replaced`, as tombstones) stamped with it, and fragment seqs that never
    reuse one of the replaced database's (an index may still hold its keys)."""
    if replaced is not None:  # ATTACH is refused inside a transaction
        conn.execute("ATTACH DATABASE ? AS replaced", (replaced.resolve().as_uri() + "?mode=ro",))
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = int(conn.execute("SELECT value FROM vector_clock WHERE id = 1").fetchone()[0])
            clock = max(current, before.clock if before else 0) + 1
            conn.execute("UPDATE vector_clock SET value = ?, instance = lower(hex(randomblob(16))) WHERE id = 1", (clock,))
            conn.execute("UPDATE vector_changes SET change = ?", (clock,))
            if replaced is not None:
                conn.execute(
                    "INSERT OR IGNORE INTO main.vector_changes (seq, agent_id, change)"
                    " SELECT seq, agent_id, ? FROM replaced.vector_changes",
                    (clock,),
                )
            if before is not None and before.max_seq:
                bumped = conn.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'fragments'", (before.max_seq,))
                if not bumped.rowcount:
                    conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('fragments', ?)", (before.max_seq,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        if replaced is not None:
            conn.execute("DETACH DATABASE replaced")
