"""PostgreSQL connections: the psycopg_pool pool (DB_MAX_CONNECTIONS, DB_IDLE_TIMEOUT_MS,
DB_CONN_TIMEOUT_MS, DB_QUERY_TIMEOUT as the statement timeout), transactions that carry the
row-level security context and nest, the retry of writes PostgreSQL rolled back, ping and close."""

from __future__ import annotations

import functools
import logging
import selectors
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import Unavailable
from ..models import PoolWrites
from .sqlfilter import CommonTags

log = logging.getLogger(__name__)

_thread = threading.local()  # .depth: transactions open on this thread (nested ones join the outermost)
P = ParamSpec("P")
R = TypeVar("R")
WRITE_ATTEMPTS = 3


def retried(method: Callable[P, R]) -> Callable[P, R]:
    """Run a write again when PostgreSQL rolled its transaction back to break a deadlock or a
    serialization conflict. The whole transaction was undone, so running it again is safe; two
    writers locking rows in opposite orders (a forget cleaning its neighbours' links, another
    forget or amend) then both succeed instead of one failing with "deadlock detected"."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if getattr(_thread, "depth", 0):  # part of a larger transaction: only its owner may rerun it
            return method(*args, **kwargs)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return method(*args, **kwargs)
            except Unavailable as exc:
                sqlstate = getattr(exc.__cause__, "sqlstate", None) or ""
                if attempt == WRITE_ATTEMPTS or not sqlstate.startswith("40"):  # class 40: transaction rollback
                    raise
                log.info("write rolled back by PostgreSQL (SQLSTATE %s); running it again", sqlstate)
        raise AssertionError("unreachable")

    return run


Cursor = psycopg.Cursor[dict[str, Any]]
SYSTEM = "system"


@contextmanager
def planned(cur: Cursor, **settings: str) -> Iterator[None]:
    """Planner settings (`enable_sort="off"`) for the statements run inside, then the values
    they replaced: the transaction may be a shared read session (`reading`) whose later
    statements must plan as configured. Nothing is restored when a statement failed: the
    transaction is aborted, and its settings end with it."""
    names = list(settings)
    columns = ", ".join(f"current_setting(%s) AS old{i}, set_config(%s, %s, true) AS new{i}" for i in range(len(names)))
    cur.execute(f"SELECT {columns}", [v for name in names for v in (name, name, settings[name])])
    row = cur.fetchone()
    assert row is not None
    yield
    cur.execute(
        "SELECT " + ", ".join(f"set_config(%s, %s, true) AS v{i}" for i in range(len(names))),
        [v for i, name in enumerate(names) for v in (name, row[f"old{i}"])],
    )


class _Rehearsed(Exception):
    """Ends a rehearsal: the transaction it unwinds is rolled back."""


def _as(cur: Cursor, agent: str) -> None:
    cur.execute("SELECT set_config('app.current_agent_id', %s, true)", (agent,))


class PostgresDatabase:
    """The connection pool of one PostgreSQL database (opened at once; Unavailable if unreachable)."""

    def __init__(
        self,
        dsn: str,
        *,
        max_connections: int = 20,
        idle_timeout_ms: int = 30_000,
        conn_timeout_ms: int = 10_000,
        query_timeout_ms: int = 30_000,
    ) -> None:
        self._local = threading.local()  # .open: this thread's transaction (cursor, agent, pool), if any
        self.common_tags = CommonTags()  # the tags many memories carry, as last counted (sqlfilter)
        self._pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
            dsn,
            min_size=1,
            max_size=max_connections,
            max_idle=idle_timeout_ms / 1000,
            timeout=conn_timeout_ms / 1000,
            # A background reconnection backs off exponentially until it gives up (psycopg_pool's
            # default: 5 minutes, so recovery could lag an outage by as long as it lasted). Giving
            # up early leaves reconnecting to the next request, which tries at once.
            reconnect_timeout=conn_timeout_ms / 1000,
            kwargs={
                "options": f"-c statement_timeout={int(query_timeout_ms)} -c timezone=UTC",
                "connect_timeout": max(1, conn_timeout_ms // 1000),
                "row_factory": dict_row,
            },
            configure=self._configure,
            open=False,
            name="memento",
        )
        try:
            self._pool.open(wait=True, timeout=conn_timeout_ms / 1000)
        except PoolTimeout as exc:
            self._pool.close()
            raise Unavailable(f"PostgreSQL is not reachable: {exc}") from exc

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        register_vector(conn)
        conn.commit()

    def in_transaction(self) -> bool:
        """Whether this thread is inside tx() or rehearsal() (a reading() session is not a unit of work)."""
        return getattr(self._local, "open", None) is not None and not getattr(self._local, "reading", False)

    @contextmanager
    def tx(self, agent: str, pool: PoolWrites = PoolWrites.ALL, *, read_only: bool = False) -> Iterator[Cursor]:
        """One transaction whose row-level security context is `agent`, allowed to change the
        shared pool as far as `pool` says (the restrictive policies of migration 0003). Inside
        another one on this thread it joins it (with its own context until it ends): the
        outermost commits or rolls back everything."""
        outer: tuple[Cursor, str, PoolWrites] | None = getattr(self._local, "open", None)
        if outer is not None:
            cur, outer_agent, outer_pool = outer
            same = (agent, pool) == (outer_agent, outer_pool)  # then no round trip to set it, nor to restore it
            if not same:
                self._set_context(cur, agent, pool)
            self._local.open = (cur, agent, pool)
            try:
                yield cur
            finally:
                self._local.open = outer
            if not same:
                self._set_context(cur, outer_agent, outer_pool)
            return
        try:
            conn = self._checkout()
            _thread.depth = getattr(_thread, "depth", 0) + 1
            try:
                with conn, conn.cursor() as cur:  # commits, or rolls back on an exception
                    self._set_context(cur, agent, pool, read_only)
                    self._local.open = (cur, agent, pool)
                    try:
                        yield cur
                    finally:
                        self._local.open = None
            finally:
                _thread.depth -= 1
                self._pool.putconn(conn)  # a broken connection is discarded and replaced
        except PoolTimeout as exc:
            raise Unavailable(f"the database is unavailable: no PostgreSQL connection within {self._pool.timeout:g}s") from exc
        except psycopg.OperationalError as exc:
            reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]  # libpq adds hint lines
            raise Unavailable(f"the database is unavailable: {reason}") from exc

    @contextmanager
    def reading(self, agent: str, pool: PoolWrites = PoolWrites.ALL) -> Iterator[None]:
        """One read-only transaction around the store calls made inside it on this thread: each
        joins it instead of opening its own, which saves it a connection checkout and the round
        trips of BEGIN, the security context and COMMIT (~0.4 ms a call on a local server; a
        recall makes ten). Each statement still sees what was committed before it (READ
        COMMITTED), as it would alone. Not a unit of work: in_transaction() stays False, so work
        beside it on other threads goes on; a write inside fails (read only) and changes nothing.
        Inside another transaction on this thread it is that one."""
        if getattr(self._local, "open", None) is not None:
            yield
            return
        with self.tx(agent, pool, read_only=True):
            self._local.reading = True
            try:
                yield
            finally:
                self._local.reading = False

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        """A transaction that is always rolled back: the store calls made inside it (on this
        thread) join it, run for real, read what they wrote, and leave nothing behind."""
        if getattr(self._local, "open", None) is not None:
            raise RuntimeError("rehearsal() inside a transaction")
        try:
            with self.tx(SYSTEM):
                yield
                raise _Rehearsed  # the connection's context manager rolls back on an exception
        except _Rehearsed:
            pass

    @contextmanager
    def autocommit(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A pooled connection in autocommit mode, for statements that cannot run inside a
        transaction (VACUUM); it goes back to the pool as it came."""
        try:
            conn = self._checkout()
        except PoolTimeout as exc:
            raise Unavailable(f"the database is unavailable: no PostgreSQL connection within {self._pool.timeout:g}s") from exc
        try:
            conn.autocommit = True
            yield conn
        finally:
            if not conn.closed:
                conn.autocommit = False
            self._pool.putconn(conn)

    @staticmethod
    def _set_context(cur: Cursor, agent: str, pool: PoolWrites, read_only: bool = False) -> None:
        """The transaction's row-level security context (and, `read_only`, its access mode: SET
        TRANSACTION READ ONLY in the same round trip)."""
        also = ", set_config('transaction_read_only', 'on', true)" if read_only else ""
        cur.execute(
            f"SELECT set_config('app.current_agent_id', %s, true), set_config('app.pool_writes', %s, true){also}", (agent, pool.value)
        )

    def _checkout(self) -> psycopg.Connection[dict[str, Any]]:
        """A pooled connection the server has not closed. One it closed while idle means
        PostgreSQL restarted: every connection from before is replaced at once (the pool's
        drain), so a restart between requests fails none of them."""
        conn = self._pool.getconn()
        if not self._closed_by_server(conn):
            return conn
        log.warning("PostgreSQL closed the pooled connections (restarted?); reconnecting")
        self._pool.putconn(conn)
        self._pool.drain()
        return self._pool.getconn()

    @staticmethod
    def _closed_by_server(conn: psycopg.Connection[Any]) -> bool:
        """Whether the server has closed this idle connection. An idle connection has nothing
        to read, so only a readable socket costs a round trip to find out."""
        if conn.closed or conn.broken:
            return True
        with selectors.DefaultSelector() as selector:
            selector.register(conn.fileno(), selectors.EVENT_READ)
            if not selector.select(0):
                return False
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            return True
        return False

    def ping(self) -> None:
        """One round trip to the server (health checks); raises Unavailable when it fails."""
        with self.tx(SYSTEM) as cur:
            cur.execute("SELECT 1")

    def migrations(self) -> list[str]:
        with self.tx(SYSTEM) as cur:
            cur.execute("SELECT name FROM agent_memory.schema_migrations ORDER BY name")
            return [r["name"] for r in cur.fetchall()]

    def close(self) -> None:
        self._pool.close()
