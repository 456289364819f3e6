"""The common-term policy of the full-text tier, shared by every backend.

In a large store a term found in more than COMMON_TERM_SHARE of the fragments acts as a stop
word: it carries almost no ranking weight, yet scoring every fragment that contains it is what
makes a question like "what did X say" slow. Such terms are dropped while rarer ones remain;
when every term is common, the two rarest are kept.

Both the store size and the document frequencies are counted within the caller's scope (its own
rows and the shared pool it sees), so another agent's data never changes which of your terms
are dropped. Backends supply the counts; `choose` applies the policy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")

COMMON_TERM_SHARE = 0.02
COMMON_TERM_MIN_DOCS = 2_000
COUNT_TTL_S = 10.0  # scope sizes are magnitudes for a heuristic: a few seconds old is fine


def common_df(total: int) -> int:
    """The document frequency from which a term is common: df <= total * share  <=>  df < this."""
    return int(total * COMMON_TERM_SHARE) + 1


def choose(
    terms: Sequence[str],
    total: int,
    capped_df: Callable[[Sequence[str], int], Mapping[str, int]],
    exact_df: Callable[[Sequence[str]], Mapping[str, int]],
) -> list[str]:
    """The query terms to search with, for a scope of `total` live fragments.

    `capped_df(terms, common)` gives each term's document frequency in the scope, which may stop
    counting at `common`; `exact_df(terms)` gives exact figures, asked only when every present
    term is common (to keep the two rarest). Terms absent from the scope are dropped."""
    terms = list(dict.fromkeys(terms))
    if total < COMMON_TERM_MIN_DOCS:
        return terms
    common = common_df(total)
    df = capped_df(terms, common)
    present = [t for t in terms if df.get(t, 0) > 0]
    kept = [t for t in present if df[t] < common]
    if kept or not present:
        return kept
    exact = exact_df(present)
    return sorted(present, key=lambda t: exact.get(t, 0))[:2]


class CountCache(Generic[T]):
    """Values (counts) computed on demand and kept for COUNT_TTL_S, per key (thread-safe)."""

    def __init__(self, ttl_s: float = COUNT_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl, self._clock = ttl_s, clock
        self._values: dict[Hashable, tuple[float, T]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        now = self._clock()
        with self._lock:
            hit = self._values.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        value = compute()
        with self._lock:
            self._values[key] = (now + self._ttl, value)
        return value

    def peek(self, key: Hashable) -> T | None:
        """The cached value (fresh or not), without computing one."""
        with self._lock:
            hit = self._values.get(key)
        return None if hit is None else hit[1]

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
