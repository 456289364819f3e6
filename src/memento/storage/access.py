"""Access statistics (000 §3.1 access_count/accessed_at), batched the same way on every backend.

Every recall records which fragments it returned. Writing the counts rewrites each fragment's
row, so they are buffered and written in batches by a background thread: when ACCESS_FLUSH_SIZE
fragments are pending, every ACCESS_FLUSH_SECONDS while anything is pending (so counts are not
held in memory when recalls stop), on `flush()` (views and the consolidation pipeline read
settled counts) and on close. A backend supplies the write; ids it could not write now (rows
locked by another transaction) come back and wait for the next batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

log = logging.getLogger(__name__)

ACCESS_FLUSH_SECONDS = 5.0
ACCESS_FLUSH_SIZE = 512

Pending = dict[str, tuple[int, datetime]]
"""fragment id -> (accesses since the last write, latest access time)."""


class AccessBuffer:
    """Pending access counts and the thread that writes them with `write(pending) -> leftovers`."""

    def __init__(
        self, write: Callable[[Pending], Pending], *, interval_s: float = ACCESS_FLUSH_SECONDS, name: str = "memento-access-flush"
    ) -> None:
        self._write = write
        self._interval = interval_s
        self._name = name
        self._pending: Pending = {}
        self._lock = threading.Lock()  # guards _pending and the thread's start
        self._flush_lock = threading.Lock()  # one write at a time
        self._due = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def record(self, ids: Sequence[str], at: datetime) -> None:
        """Count one access of each id at `at`; wakes the writer when a batch is full."""
        with self._lock:
            for fid in ids:
                count, latest = self._pending.get(fid, (0, at))
                self._pending[fid] = (count + 1, max(latest, at))
            full = len(self._pending) >= ACCESS_FLUSH_SIZE
            start = self._thread is None and not self._closed
            if start:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        if start and self._thread is not None:
            self._thread.start()
        if full:
            self._due.set()

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def flush(self) -> None:
        """Write everything recorded before the call. Returns once it is stored (or handed back
        as leftovers), even a batch the background thread took first."""
        with self._flush_lock:
            with self._lock:
                batch, self._pending = self._pending, {}
            if not batch:
                return
            try:
                leftovers = self._write(batch)
            except BaseException:
                self._requeue(batch)  # nothing was written: keep every count for the next try
                raise
            self._requeue(leftovers)

    def _requeue(self, counts: Pending) -> None:
        with self._lock:
            for fid, (count, at) in counts.items():
                more, later = self._pending.get(fid, (0, at))
                self._pending[fid] = (count + more, max(at, later))

    def _loop(self) -> None:
        while not self._closed:
            self._due.wait(self._interval)
            self._due.clear()
            if self._closed:
                return
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - statistics only: log, keep the counts, go on
                log.warning("access statistics not saved yet: %s", exc)

    def close(self) -> None:
        """Stop the thread and write what is pending (errors propagate to the caller)."""
        self._closed = True
        self._due.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10.0)
        self.flush()
