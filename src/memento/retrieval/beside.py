"""Work a recall runs beside its lexical tiers: the query's embedding and the vector tier.

A recall's tiers do not depend on each other until fusion: the full-text tier needs only the
words, the vector tier only the query's vector. Both spend their time in C code that releases
the GIL (SQLite's or PostgreSQL's driver; the model's engine and usearch), so on a machine with a
second core a recall can embed its query and search the vectors on one thread while the calling
thread reads the full-text and keyword tiers, and pays for the longer of the two instead of
their sum (bench/recall_stdio.py, bench/million.py --stage time; docs/benchmarks.md).

`Beside` never queues work: when all its threads are busy (many recalls at once) the call runs
on the caller's thread when its result is asked for, as it would without threads at all. The
work carries the caller's context variables (log and trace context) to the thread. A query the
local model embeds on every core of an otherwise idle machine is embedded before the other tiers
instead, and only the vector search goes beside them (embeddings/cpu.py, retrieval/recall.py).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from ..embeddings.cpu import usable_cores

T = TypeVar("T")

MAX_AUTO_WORKERS = 4


def workers_for(setting: str) -> int:
    """Threads for `MEMENTO_RECALL_WORKERS`: `auto` is one per usable core beyond the first (at
    most MAX_AUTO_WORKERS; none on one core, where running beside gains nothing); a number is
    taken as it is (0: every recall runs its tiers one after another)."""
    value = setting.strip().lower()
    if value == "auto":
        return min(MAX_AUTO_WORKERS, usable_cores() - 1)
    if value.isdigit() and 0 <= int(value) <= 64:
        return int(value)
    raise ValueError(f"MEMENTO_RECALL_WORKERS must be auto or a number from 0 to 64, not {setting!r}")


class Pending(Generic[T]):
    """The result of work started beside the caller, or of work deferred to `result()`."""

    def __init__(self, future: Future[T] | None, call: Callable[[], T]) -> None:
        self._future = future
        self._call = call

    @property
    def beside(self) -> bool:
        """Whether the work runs on another thread (False: it runs when its result is asked for)."""
        return self._future is not None

    def done(self) -> bool:
        """Whether work started beside has finished (work run in the caller: not before result())."""
        return self._future is not None and self._future.done()

    def result(self) -> T:
        """The work's value (waiting for it); its exception is raised here."""
        if self._future is None:
            return self._call()
        return self._future.result()


class Beside:
    """A few threads that run one piece of a recall each while the caller does the rest."""

    def __init__(self, workers: int) -> None:
        self.workers = max(0, workers)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="memento-recall") if self.workers else None
        self._free = threading.BoundedSemaphore(self.workers) if self.workers else None

    def start(self, call: Callable[[], T], allowed: bool = True) -> Pending[T]:
        """Start `call` on a free thread; with none free, or not `allowed` (the caller's thread is
        inside a unit of work whose reads must stay on it), it runs when its result is asked for."""
        pool, free = self._pool, self._free
        if not allowed or pool is None or free is None or not free.acquire(blocking=False):
            return Pending(None, call)
        context = contextvars.copy_context()

        def run() -> T:
            try:
                return context.run(call)
            finally:
                free.release()

        try:
            return Pending(pool.submit(run), call)
        except RuntimeError:  # shut down while a recall was starting: run it in the caller
            free.release()
            return Pending(None, call)

    def close(self) -> None:
        """Stop the threads once the work they hold is done (new work then runs in the caller)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
