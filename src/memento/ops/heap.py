"""The server's long-lived objects kept out of Python's full garbage collections.

A full (oldest-generation) collection walks every container object the process tracks. After
start-up that is ~65,000 of them (the modules, classes and functions of Memento, pydantic,
numpy, the MCP and web stacks), and walking them took 13-45 ms, once every few seconds of steady
recalls: at 300k memories a minute of back-to-back recalls met 21 full collections, and they made
nearly every recall that took more than three times the median (docs/benchmarks.md, "Pauses").
Those objects live as long as the process, so after start-up they are collected once and moved
to the permanent generation (`gc.freeze`), which the collector no longer walks. Reference
counting still frees what they stop referring to; only cycles among them stay, as they would
have anyway. Objects made later (caches, requests) are collected as before.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)


def settle() -> int:
    """Collect what start-up left behind, then freeze what remains; how many objects are frozen
    in all. Called by `memento serve` once the model has loaded (app.start_warm_up) and again
    when the HTTP stack is ready (web.serve_http): each call moves what came since."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("heap settled: %d objects frozen (%.1f ms)", frozen, (time.perf_counter() - started) * 1000)
    return frozen
