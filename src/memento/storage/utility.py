"""A memory's utility (000 §8 with 000 §7's judgement): the one formula both backends' consolidation
stage `utility_recomputed` and the evaluator's write use, so neither can drift from the other and
a run right after a judgement changes nothing.

    utility = 0.4·base + 0.3·recency + 0.3·usage

base is the importance, or — once the evaluator judged the memory — the mean of the importance
and the judged utility; recency halves every half-life since the last use (or the creation);
usage grows with the log of the accesses, full at 10. Rounded to 4 places, as stored.
"""

from __future__ import annotations

import math
from datetime import datetime

CHANGED = 1e-4  # a recomputed utility differing less than this is no change


def utility(importance: float, access_count: int, last_used: datetime, now: datetime, half_life_days: float, judged: float | None) -> float:
    """The utility of a memory with these statistics at `now` (`judged`: the evaluator's score, None before)."""
    base = importance if judged is None else (importance + judged) / 2
    age_days = max(0.0, (now - last_used).total_seconds() / 86400)
    recency = float(0.5 ** (age_days / half_life_days))
    usage = min(1.0, math.log1p(access_count) / math.log1p(10))
    return round(0.4 * base + 0.3 * recency + 0.3 * usage, 4)
