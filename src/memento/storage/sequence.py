"""Sequence neighbours: the memories written just before and just after a memory in the same
conversation, for recall's context (retrieval/context_rank.py).

Two memories are in one conversation when they belong to the same namespace, carry the same
topic and the same session (or none), and were created within a window of each other; their
order is the order of writing (the store's insertion counter). Both backends answer with one
statement: for each asked id, the nearest earlier and later row of that kind which the caller
sees and which passes the recall's filter. The window is checked here, on the timestamps the
statement returns, so the SQL stays the same on both backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class SequenceNeighbours:
    """The visible memories written next to one memory, within the window (None: there is none)."""

    previous: str | None
    next: str | None


def within(created: datetime, other: datetime | None, window: timedelta) -> bool:
    return other is not None and abs(created - other) <= window


def pick(
    created: datetime, prev_id: str | None, prev_at: datetime | None, next_id: str | None, next_at: datetime | None, window: timedelta
) -> SequenceNeighbours:
    return SequenceNeighbours(
        prev_id if prev_id is not None and within(created, prev_at, window) else None,
        next_id if next_id is not None and within(created, next_at, window) else None,
    )
