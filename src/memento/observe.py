"""Observer hooks: what the engine and the faces report as they work (tool calls, recalls,
consolidation runs, embedding calls), for whoever listens — metrics and logs today.

The code that does the work calls the hooks explicitly; listeners never wrap or patch it.
A listener that fails is logged and skipped: observing must never break the work observed.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class Observer:
    """A listener; override the hooks of interest (each default does nothing)."""

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        """An MCP tools/call finished: outcome ok | error | task | invalid | cancelled | exception.
        `tool` is a served tool's name, or "unknown". Never arguments or results (memory content)."""

    def recall(self, seconds: float) -> None:
        """A recall finished (successfully or not)."""

    def consolidation(self, outcome: str, seconds: float) -> None:
        """A consolidation run finished: outcome ok | error."""

    def embedding(self, kind: str, seconds: float, error: BaseException | None) -> None:
        """An embedding provider call finished: kind passage | query; error None on success."""

    def embedding_batch(self, rows: int, seconds: float, error: BaseException | None) -> None:
        """The embedding worker finished a batch of `rows` pending vectors (error None: stored)."""

    def consolidation_run(self, trigger: str, outcome: str, seconds: float) -> None:
        """A recorded consolidation run ended: trigger interval | inserts | startup | manual,
        outcome ok | error | skipped."""

    def evaluation(self, outcome: str, provider: str, tokens: int) -> None:
        """The evaluator handled a job: outcome done | retried | dead | deferred; `tokens` the
        model tokens `provider` spent on it (0 for the heuristic)."""


class Observers(Observer):
    """Fans every hook out to the registered observers (thread-safe registration)."""

    def __init__(self) -> None:
        self._observers: tuple[Observer, ...] = ()
        self._lock = threading.Lock()

    def add(self, observer: Observer) -> None:
        with self._lock:
            if observer not in self._observers:
                self._observers = (*self._observers, observer)

    def remove(self, observer: Observer) -> None:
        with self._lock:
            self._observers = tuple(o for o in self._observers if o is not observer)

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        for observer in self._observers:
            try:
                observer.tool_call(tool, outcome, seconds)
            except Exception:
                log.exception("tool_call observer failed")

    def recall(self, seconds: float) -> None:
        for observer in self._observers:
            try:
                observer.recall(seconds)
            except Exception:
                log.exception("recall observer failed")

    def consolidation(self, outcome: str, seconds: float) -> None:
        for observer in self._observers:
            try:
                observer.consolidation(outcome, seconds)
            except Exception:
                log.exception("consolidation observer failed")

    def embedding(self, kind: str, seconds: float, error: BaseException | None) -> None:
        for observer in self._observers:
            try:
                observer.embedding(kind, seconds, error)
            except Exception:
                log.exception("embedding observer failed")

    def embedding_batch(self, rows: int, seconds: float, error: BaseException | None) -> None:
        for observer in self._observers:
            try:
                observer.embedding_batch(rows, seconds, error)
            except Exception:
                log.exception("embedding_batch observer failed")

    def consolidation_run(self, trigger: str, outcome: str, seconds: float) -> None:
        for observer in self._observers:
            try:
                observer.consolidation_run(trigger, outcome, seconds)
            except Exception:
                log.exception("consolidation_run observer failed")

    def evaluation(self, outcome: str, provider: str, tokens: int) -> None:
        for observer in self._observers:
            try:
                observer.evaluation(outcome, provider, tokens)
            except Exception:
                log.exception("evaluation observer failed")
