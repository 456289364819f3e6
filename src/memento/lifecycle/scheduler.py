"""The scheduler (issue 13; docs/lifecycle.md "Scheduling"): consolidation that runs by itself.

Triggers: an interval (every namespace, once per interval across replicas), every N memories
stored in a namespace (001 §6.3: that namespace), and a run shortly after the server starts
(every namespace). The manual trigger (tool, CLI, REST) goes straight to the service.

One run at a time across replicas: a run happens only while its lock is held (PostgreSQL's
advisory lock, a Redis lock when Redis is on, a process lock on SQLite), and an interval run
is claimed in the durable run record only when no interval run started within the interval,
so replicas whose timers fire at different moments still run it once. A failing run is logged
and recorded by the service; the scheduler carries on.

`tick()` does whatever is due now by the injected clock, so tests drive the scheduler without
a thread or any sleeping; `start()` runs ticks on a daemon thread until `stop()`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

from ..models import ChangeEvent
from ..storage.runs import RunLock, RunTrigger

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]
Status = Literal["ok", "error", "not_due", "busy", "skipped", "unavailable"]
STOP_TIMEOUT_S = 30.0


class Runner(Protocol):
    """What the scheduler calls (MemoryService provides it)."""

    def run_consolidation(
        self, agent: str | None, trigger: RunTrigger, *, due_since: datetime | None = None, progress: Progress | None = None
    ) -> object | None:
        """One recorded run over namespace `agent` (None: every namespace); None if a run over
        it started at or after `due_since`."""
        ...

    def skip_consolidation(self, agent: str | None, trigger: RunTrigger, reason: str) -> None:
        """Record a scheduled run that did not happen, and why."""
        ...


def slot_start(now: datetime, interval: timedelta) -> datetime:
    """The start of the interval-long slot holding `now`, slots counted from the Unix epoch (a
    daily interval: midnight UTC). Whichever replica's clock enters a slot first runs it; a
    replica whose clock lags still finds that run at or after its own slot's start."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((now - epoch) // interval) * interval


class Interrupted(Exception):
    """The scheduler was stopped during a run (between two stages)."""


@dataclass(frozen=True)
class Schedule:
    """When runs are due. interval None / every_inserts 0 / on_start False: that trigger is off."""

    interval: timedelta | None = timedelta(days=1)
    every_inserts: int = 50
    on_start: bool = True
    start_delay: timedelta = timedelta(seconds=5)
    poll_s: float = 30.0  # how often the thread looks (an insert trigger wakes it at once)


@dataclass(frozen=True)
class Fired:
    """What one trigger did in a tick."""

    trigger: RunTrigger
    agent: str | None
    status: Status


class Scheduler:
    """Fires the due triggers; a thread calls `tick()` until stopped."""

    def __init__(self, runner: Runner, lock: RunLock, schedule: Schedule, clock: Callable[[], datetime]) -> None:
        self.runner = runner
        self.lock = lock
        self.schedule = schedule
        self.clock = clock
        self._startup_at: datetime | None = clock() + schedule.start_delay if schedule.on_start else None
        self._counts: dict[str, int] = {}
        self._pending: dict[str, None] = {}  # namespaces due by inserts, in order
        self._guard = threading.Lock()
        self._ticking = threading.Lock()  # one tick at a time (the thread, a test)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ triggers

    def on_change(self, event: ChangeEvent) -> None:
        """The service's change listener: count memories stored per namespace."""
        every = self.schedule.every_inserts
        if event.kind != "created" or every <= 0:
            return
        with self._guard:
            count = self._counts.get(event.agent_id, 0) + max(1, len(event.fragment_ids))
            if count >= every:
                self._pending[event.agent_id] = None
                count = 0
            self._counts[event.agent_id] = count
            due = bool(self._pending)
        if due:
            self._wake.set()

    def pending(self) -> list[str]:
        """Namespaces whose insert-triggered run is waiting for the next tick."""
        with self._guard:
            return list(self._pending)

    def tick(self) -> list[Fired]:
        """Fire every trigger due now: the start-up run, the interval run, the insert runs."""
        with self._ticking:
            fired: list[Fired] = []
            now = self.clock()
            if self._startup_at is not None and now >= self._startup_at:
                status = self._fire("startup", None, skip_when_busy=True)
                if status != "unavailable":
                    self._startup_at = None  # done (or recorded as skipped); retried while the database is away
                fired.append(Fired("startup", None, status))
            # The start-up run counts for its interval: no interval run before it (never two at boot).
            if self.schedule.interval is not None and self._startup_at is None and not self._stop.is_set():
                slot = slot_start(now, self.schedule.interval)
                fired.append(Fired("interval", None, self._fire("interval", None, due_since=slot)))
            with self._guard:
                due, self._pending = list(self._pending), {}
            for agent in due:
                status = self._fire("inserts", agent) if not self._stop.is_set() else "busy"
                if status in ("busy", "unavailable"):
                    with self._guard:
                        self._pending.setdefault(agent, None)  # another run holds the lock: next tick
                fired.append(Fired("inserts", agent, status))
            return fired

    def _fire(self, trigger: RunTrigger, agent: str | None, *, due_since: datetime | None = None, skip_when_busy: bool = False) -> Status:
        try:
            held = self.lock.acquire()
        except Exception as exc:  # noqa: BLE001 - the database or Redis is away: try at the next tick
            log.warning("consolidation lock unavailable (%s); %s run postponed", type(exc).__name__, trigger)
            return "unavailable"
        if not held:
            if not skip_when_busy:
                return "busy"
            try:
                self.runner.skip_consolidation(agent, trigger, "another consolidation run held the lock")
            except Exception:
                log.warning("could not record a skipped %s run", trigger, exc_info=True)
            return "skipped"
        try:
            done = self.runner.run_consolidation(agent, trigger, due_since=due_since, progress=self._between_stages)
        except Interrupted as exc:  # the server is stopping: recorded as an error run, not a failure to report
            log.info("scheduled consolidation (%s, %s) ended: %s", trigger, agent or "every namespace", exc)
            return "error"
        except Exception:
            log.exception("scheduled consolidation (%s, %s) failed", trigger, agent or "every namespace")
            return "error"
        finally:
            self.lock.release()
        if done is None:
            return "not_due"
        log.info("scheduled consolidation done (%s, %s)", trigger, agent or "every namespace")
        return "ok"

    def _between_stages(self, done: int, total: int, stage: str) -> None:
        if self._stop.is_set() and done < total:
            raise Interrupted(f"the server stopped before stage {stage!r}")
        self.lock.refresh()

    # ------------------------------------------------------------ the thread

    def start(self) -> None:
        """Tick on a daemon thread until `stop()`."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="memento-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop the thread; a run in progress ends at its next stage (recorded as an error)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("the scheduler did not stop within %gs", timeout_s)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:
                log.exception("scheduler tick failed")
            self._wake.wait(self._wait_s())
            self._wake.clear()

    def _wait_s(self) -> float:
        wait = self.schedule.poll_s
        if self._startup_at is not None:
            wait = min(wait, max(0.0, (self._startup_at - self.clock()).total_seconds()))
        return wait
