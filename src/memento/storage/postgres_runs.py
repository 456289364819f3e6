"""Consolidation runs on PostgreSQL (migration 0016, row-level security per namespace) and the
advisory run lock shared by every replica on the database.

A claim runs under `pg_advisory_xact_lock`, so claims of replicas whose timers fire together
are serialised and an interval's run is recorded once. The run lock is a session-level
`pg_try_advisory_lock` on a pooled connection held (in autocommit) for the length of the run:
PostgreSQL releases it by itself if that connection dies, so a crashed replica never keeps it.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import ExitStack
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..errors import Unavailable
from ..models import MAINTENANCE_AGENTS
from .postgres_db import PostgresDatabase, retried
from .runs import ERROR_TEXT_LIMIT, RUN_HISTORY, ConsolidationRun, NewRun, RunOutcome, RunQuery

log = logging.getLogger(__name__)

_COLUMNS = "id, agent_id, trigger, started_at, finished_at, outcome, stages, error, replica"
CLAIM_LOCK = 0x6D656D0001  # the advisory lock key of claims (any constant other code does not use)
RUN_LOCK = 0x6D656D0002  # the advisory lock key of a run


def _run(row: dict[str, Any]) -> ConsolidationRun:
    return ConsolidationRun(
        id=row["id"],
        agent_id=row["agent_id"],
        trigger=row["trigger"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        outcome=row["outcome"],
        stages=row["stages"],
        error=row["error"],
        replica=row["replica"],
    )


class AdvisoryRunLock:
    """A session-level advisory lock on a connection taken from the pool while it is held."""

    def __init__(self, db: PostgresDatabase, key: int = RUN_LOCK) -> None:
        self.db = db
        self.key = key
        self._held: ExitStack | None = None
        self._conn: psycopg.Connection[Any] | None = None

    def acquire(self) -> bool:
        stack = ExitStack()
        try:
            conn = stack.enter_context(self.db.autocommit())
            row = conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (self.key,)).fetchone()
        except psycopg.Error as exc:
            stack.close()
            raise Unavailable(f"the database is unavailable: {type(exc).__name__}") from exc
        except BaseException:
            stack.close()
            raise
        if not row or not row["got"]:
            stack.close()
            return False
        self._held, self._conn = stack, conn
        return True

    def refresh(self) -> None:
        return None  # held as long as the session lives

    def release(self) -> None:
        stack, conn = self._held, self._conn
        self._held = self._conn = None
        if stack is None or conn is None:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        except psycopg.Error:
            # A pooled connection must never keep the lock: closing the session releases it.
            log.warning("could not release the consolidation lock; closing its connection", exc_info=True)
            conn.close()
        finally:
            stack.close()


class PostgresRuns:
    """The ConsolidationRunStore protocol, each call one transaction in the namespace's context."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    @retried
    def start_consolidation_run(self, scope_agent: str, new: NewRun) -> str | None:
        with self.db.tx(scope_agent) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK,))
            if new.due_since is not None:
                cur.execute(
                    "SELECT MAX(started_at) AS latest FROM agent_memory.consolidation_runs WHERE agent_id = %s AND outcome <> 'skipped'",
                    (scope_agent,),
                )
                row = cur.fetchone()
                latest = row["latest"] if row else None
                if latest is not None and latest >= new.due_since:
                    return None
            run_id = uuid.uuid4().hex
            cur.execute(
                "INSERT INTO agent_memory.consolidation_runs (id, agent_id, trigger, started_at, outcome, replica)"
                " VALUES (%s, %s, %s, %s, 'running', %s)",
                (run_id, scope_agent, new.trigger, new.started_at, new.replica),
            )
            cur.execute(
                "DELETE FROM agent_memory.consolidation_runs WHERE agent_id = %s AND seq <= "
                "(SELECT seq FROM agent_memory.consolidation_runs WHERE agent_id = %s ORDER BY seq DESC LIMIT 1 OFFSET %s)",
                (scope_agent, scope_agent, RUN_HISTORY),
            )
            return run_id

    @retried
    def finish_consolidation_run(
        self, scope_agent: str, run_id: str, finished_at: datetime, outcome: RunOutcome, stages: dict[str, Any] | None, error: str | None
    ) -> None:
        with self.db.tx(scope_agent) as cur:
            cur.execute(
                "UPDATE agent_memory.consolidation_runs SET finished_at = %s, outcome = %s, stages = %s, error = %s"
                " WHERE id = %s AND agent_id = %s",
                (
                    finished_at,
                    outcome,
                    Jsonb(stages) if stages is not None else None,
                    error[:ERROR_TEXT_LIMIT] if error is not None else None,
                    run_id,
                    scope_agent,
                ),
            )

    def consolidation_runs(self, scope_agent: str, query: RunQuery) -> list[ConsolidationRun]:
        where: list[str] = []
        params: list[object] = []
        if scope_agent not in MAINTENANCE_AGENTS:
            where.append("agent_id = ANY(%s)")
            params.append([scope_agent, *sorted(MAINTENANCE_AGENTS)])
        if query.trigger is not None:
            where.append("trigger = %s")
            params.append(query.trigger)
        if query.outcomes is not None:
            where.append("outcome = ANY(%s)")
            params.append(list(query.outcomes))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self.db.tx(scope_agent) as cur:
            cur.execute(
                f"SELECT {_COLUMNS} FROM agent_memory.consolidation_runs {clause} ORDER BY started_at DESC, seq DESC LIMIT %s",
                (*params, query.limit),
            )
            return [_run(r) for r in cur.fetchall()]

    def consolidation_lock(self) -> AdvisoryRunLock:
        return AdvisoryRunLock(self.db)
