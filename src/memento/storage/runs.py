"""Consolidation runs (migration 0016): the durable record the scheduler reads and writes, and the
lock that lets one replica at a time run a scheduled consolidation (docs/lifecycle.md "Scheduling").

Every backend implements `ConsolidationRunStore`; its `consolidation_lock()` is the backend's
own lock (PostgreSQL: a session-level advisory lock; SQLite: a lock shared by every store of the
same file in this process). Redis adds its own (storage/redis_lock.py) when it is enabled.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

RunTrigger = Literal["interval", "inserts", "startup", "manual"]
RunOutcome = Literal["running", "ok", "error", "skipped"]
RUN_TRIGGERS: tuple[RunTrigger, ...] = ("interval", "inserts", "startup", "manual")
RUN_OUTCOMES: tuple[RunOutcome, ...] = ("running", "ok", "error", "skipped")
RUN_HISTORY = 1_000  # rows kept per namespace: older ones are deleted as new ones are claimed
ERROR_TEXT_LIMIT = 2_000  # characters of a failure kept


@dataclass(frozen=True)
class NewRun:
    """A run to claim. `due_since`: claim it only if no run over the same namespace (skipped
    ones aside, whatever their trigger) started at or after that moment (an interval's slot)."""

    trigger: RunTrigger
    started_at: datetime
    replica: str = ""
    due_since: datetime | None = None


@dataclass(frozen=True)
class RunQuery:
    """Which runs to list, newest first."""

    trigger: RunTrigger | None = None
    outcomes: tuple[RunOutcome, ...] | None = None
    limit: int = 20


@dataclass(frozen=True)
class ConsolidationRun:
    """One recorded run. `agent_id`: the namespace maintained ('system' or 'admin': every one)."""

    id: str
    agent_id: str
    trigger: RunTrigger
    started_at: datetime
    finished_at: datetime | None
    outcome: RunOutcome
    stages: dict[str, Any] | None
    error: str | None
    replica: str


class RunLock(Protocol):
    """A lock held for the length of one run; never waits."""

    def acquire(self) -> bool:
        """Take the lock if it is free (True), else False at once."""
        ...

    def refresh(self) -> None:
        """Keep holding it (a lock that expires extends its lease); between a run's stages."""
        ...

    def release(self) -> None:
        """Let it go (only if held)."""
        ...


class ConsolidationRunStore(Protocol):
    """Migration 0016's `consolidation_runs`: a scope reads its own runs and those over every
    namespace; a maintenance scope reads all. Row-level security on PostgreSQL."""

    def start_consolidation_run(self, scope_agent: str, new: NewRun) -> str | None:
        """Claim a run over namespace `scope_agent` ('running'), in one transaction that also
        drops that namespace's runs beyond the newest RUN_HISTORY; its id. None (nothing written):
        `new.due_since` is set and a run started since. Claims are serialised across
        processes (PostgreSQL: a transaction-level advisory lock; SQLite: the write lock)."""
        ...

    def finish_consolidation_run(
        self, scope_agent: str, run_id: str, finished_at: datetime, outcome: RunOutcome, stages: dict[str, Any] | None, error: str | None
    ) -> None:
        """Record how a claimed run ended (`error` cut to ERROR_TEXT_LIMIT characters)."""
        ...

    def consolidation_runs(self, scope_agent: str, query: RunQuery) -> list[ConsolidationRun]:
        """Runs over namespace `scope_agent` and over every namespace, newest first; every run
        for a maintenance agent."""
        ...

    def consolidation_lock(self) -> RunLock:
        """The backend's lock for one run at a time across the processes sharing the database."""
        ...


class ChainLock:
    """Several locks held together, taken in order; if one is busy the others are let go."""

    def __init__(self, *locks: RunLock) -> None:
        self.locks = locks
        self._held: list[RunLock] = []

    def acquire(self) -> bool:
        for lock in self.locks:
            if not lock.acquire():
                self.release()
                return False
            self._held.append(lock)
        return True

    def refresh(self) -> None:
        for lock in self._held:
            lock.refresh()

    def release(self) -> None:
        held, self._held = self._held, []
        for lock in reversed(held):
            lock.release()
