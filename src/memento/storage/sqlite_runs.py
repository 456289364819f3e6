"""Consolidation runs on SQLite (migration 0016) and the in-process run lock.

A claim is one write transaction (BEGIN IMMEDIATE), so processes sharing the file claim one at
a time and an interval's run is recorded once. The run lock is a `threading.Lock` per database
file, shared by every store this process opens on it (two apps on one file in a test, say):
it keeps two runs of this process apart; the claim keeps other processes' interval runs apart.
"""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from ..models import MAINTENANCE_AGENTS
from .runs import ERROR_TEXT_LIMIT, RUN_HISTORY, ConsolidationRun, NewRun, RunOutcome, RunQuery
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import parse_ts, ts

_COLUMNS = "id, agent_id, trigger, started_at, finished_at, outcome, stages, error, replica"

# One lock per database file for the whole process: it must be shared by every store opened on
# the file, which no single store owns (the one process-wide registry, on purpose).
_FILE_LOCKS: dict[str, threading.Lock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def _file_lock(path: Path) -> threading.Lock:
    key = str(path.resolve())
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(key, threading.Lock())


class ProcessRunLock:
    """The SQLite backend's run lock: free or held within this process, never waiting."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._held = False

    def acquire(self) -> bool:
        self._held = self._lock.acquire(blocking=False)
        return self._held

    def refresh(self) -> None:
        return None

    def release(self) -> None:
        if self._held:
            self._held = False
            self._lock.release()


def _run(row: Any) -> ConsolidationRun:
    started = parse_ts(row["started_at"])
    assert started is not None
    return ConsolidationRun(
        id=row["id"],
        agent_id=row["agent_id"],
        trigger=row["trigger"],
        started_at=started,
        finished_at=parse_ts(row["finished_at"]),
        outcome=row["outcome"],
        stages=json.loads(row["stages"]) if row["stages"] else None,
        error=row["error"],
        replica=row["replica"],
    )


class SQLiteRuns:
    """The ConsolidationRunStore protocol: writes on the writer, reads on the thread's reader."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    def start_consolidation_run(self, scope_agent: str, new: NewRun) -> str | None:
        with self.db.tx() as conn:
            if new.due_since is not None:
                latest = conn.execute(
                    "SELECT MAX(started_at) FROM consolidation_runs WHERE agent_id = ? AND outcome <> 'skipped'", (scope_agent,)
                ).fetchone()[0]
                if latest is not None and latest >= ts(new.due_since):
                    return None
            run_id = uuid.uuid4().hex
            conn.execute(
                "INSERT INTO consolidation_runs (id, agent_id, trigger, started_at, outcome, replica) VALUES (?, ?, ?, ?, 'running', ?)",
                (run_id, scope_agent, new.trigger, ts(new.started_at), new.replica),
            )
            conn.execute(
                "DELETE FROM consolidation_runs WHERE agent_id = ? AND seq <= "
                "(SELECT seq FROM consolidation_runs WHERE agent_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (scope_agent, scope_agent, RUN_HISTORY),
            )
            return run_id

    def finish_consolidation_run(
        self, scope_agent: str, run_id: str, finished_at: datetime, outcome: RunOutcome, stages: dict[str, Any] | None, error: str | None
    ) -> None:
        with self.db.tx() as conn:
            conn.execute(
                "UPDATE consolidation_runs SET finished_at = ?, outcome = ?, stages = ?, error = ? WHERE id = ? AND agent_id = ?",
                (
                    ts(finished_at),
                    outcome,
                    json.dumps(stages) if stages is not None else None,
                    error[:ERROR_TEXT_LIMIT] if error is not None else None,
                    run_id,
                    scope_agent,
                ),
            )

    def consolidation_runs(self, scope_agent: str, query: RunQuery) -> list[ConsolidationRun]:
        where: list[str] = []
        params: list[object] = []
        if scope_agent not in MAINTENANCE_AGENTS:
            where.append(f"agent_id IN (?, {', '.join('?' for _ in MAINTENANCE_AGENTS)})")
            params += [scope_agent, *sorted(MAINTENANCE_AGENTS)]
        if query.trigger is not None:
            where.append("trigger = ?")
            params.append(query.trigger)
        if query.outcomes is not None:
            where.append(f"outcome IN ({', '.join('?' for _ in query.outcomes)})")
            params += query.outcomes
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = (
            self.db.reader()
            .execute(
                f"SELECT {_COLUMNS} FROM consolidation_runs {clause} ORDER BY started_at DESC, seq DESC LIMIT ?", (*params, query.limit)
            )
            .fetchall()
        )
        return [_run(r) for r in rows]

    def consolidation_lock(self) -> ProcessRunLock:
        return ProcessRunLock(_file_lock(self.db.path))
