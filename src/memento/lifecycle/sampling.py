"""The live MCP sessions whose client lends its model (sampling), by namespace, for the evaluator.

The MCP server registers a session the first time it makes a call after declaring the `sampling`
capability, and removes it when the session closes. Each entry is a blocking `Complete` that
sends `sampling/createMessage` through the session's event loop, and a check of whether the
session can be reached now (stdio: always; Streamable HTTP: while its GET stream is open here).
An agent's memory is judged by a session of that agent's namespace, or by an admin session
(which may read every namespace anyway); never by another agent's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..models import Complete


@dataclass(frozen=True)
class LentModel:
    """One session's model: `namespace` None for an admin session (serves every namespace)."""

    namespace: str | None
    complete: Complete
    reachable: Callable[[], bool]


class SamplingSessions:
    """A thread-safe registry: the MCP server adds and removes, the evaluator's worker asks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, LentModel] = {}

    def add(self, session_id: str, lent: LentModel) -> bool:
        """Register a session's model; False when it was registered already."""
        with self._lock:
            if session_id in self._sessions:
                return False
            self._sessions[session_id] = lent
            return True

    def discard(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._sessions

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def model_for(self, agent_id: str) -> Complete | None:
        """A reachable model for a memory of `agent_id`: the agent's own sessions first (latest
        registered first), then admin ones."""
        with self._lock:
            entries = list(reversed(self._sessions.values()))
        for wanted in (agent_id, None):
            for lent in entries:
                if lent.namespace == wanted and lent.reachable():
                    return lent.complete
        return None
