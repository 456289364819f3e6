"""Sequence neighbours: the memories written just before and just after a memory in the same
conversation, for recall's context (retrieval/context_rank.py).

Two memories are in one conversation when they belong to the same namespace, carry the same
topic and the same session (or none), and were created within a window of each other; their
order is the order of writing (the store's insertion counter). Both backends answer with one
statement: for each asked id, the nearest earlier and later row of that kind which the caller
sees and which passes the recall's filter. The window is checked here, on the timestamps the
statement returns, so the SQL stays the same on both backends.

With `steps=2` the statement also reads each row's second neighbour on either side, and the
entries of the first neighbours come back along with those asked for (`two_steps`): recall's
context reaches two memories each way in one statement instead of two.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# With a recall filter that may keep few rows (a time range, a type, tags), the nearest row that
# passes it can lie anywhere in the conversation, and a probe walking to it read every earlier
# row of a topic (~0.1 s a recall at a million memories). Such a probe looks at this many rows of
# the conversation on either side, nearest first, and takes the first that passes; context only
# lends across a few turns anyway. Without such a filter the nearest visible row is taken as before.
FILTERED_REACH = 8


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


Found = tuple[str | None, datetime | None]  # a neighbour's id and creation time (None, None: there is none)


def two_steps(
    asked: str, created: datetime, passes: bool, before: Found, before_that: Found, after: Found, after_that: Found, window: timedelta
) -> dict[str, SequenceNeighbours]:
    """The entries of one asked row and of its neighbours, from the rows next to it in writing
    order: `before` (the nearest visible row before it that passes the filter) and `before_that`
    (the same, before `before`), `after` and `after_that`. `passes`: whether the asked row passes
    the filter itself; if not, it is nobody's neighbour, and its two neighbours are each other's.
    Each entry is what asking for that row alone gives (`pick`)."""
    out = {asked: pick(created, *before, *after, window)}
    prev_id, prev_at = before
    next_id, next_at = after
    if prev_id is not None and prev_at is not None:
        follower = (asked, created) if passes else after
        out[prev_id] = pick(prev_at, *before_that, *follower, window)
    if next_id is not None and next_at is not None:
        leader = (asked, created) if passes else before
        out[next_id] = pick(next_at, *leader, *after_that, window)
    return out
