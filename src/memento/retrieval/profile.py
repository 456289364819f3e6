"""The score profile 004 (seed 004 §4.1 with §7's weights), chosen with MEMENTO_SCORE_PROFILE=004:

    S = 0.5·relevance + 0.2·recency + 0.2·importance + 0.1·usage − ε·duplication

- relevance: the fused relevance of the tiers, normalised to the best candidate (0-1), as 000's
  ranking has it;
- recency: exp(−λ·age in days), age from creation (recall touches what it returns, so an
  access-based age would feed on itself);
- importance: the memory's importance (0-1);
- usage: min(1, ln(1 + accesses) / ln(11)) + 0.5·tanh(net / 2), where net sums the caller's
  feedback events, each weighted by its kind (helpful +1, used +0.25, edited 0, neglected −0.25,
  not_helpful −1) times its 0-1 score: in (−0.5, 1.5), 0 for an unused memory without feedback;
- duplication: a result whose raw cosine to a higher-ranked result of the same list reaches the
  duplicate similarity is penalised by ε times that cosine (0 otherwise, and without vectors).

Every term's weighted share is reported in the result's `why` (docs/search.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from ..models import FeedbackEvent
from ..storage.protocol import FeedbackTally, RankFeatures

USAGE_SATURATION = 10  # accesses at which the access part of usage reaches 1
FEEDBACK_SPAN = 0.5  # the feedback part of usage lies in (−FEEDBACK_SPAN, FEEDBACK_SPAN)
FEEDBACK_WEIGHTS: Mapping[str, float] = {
    FeedbackEvent.HELPFUL.value: 1.0,
    FeedbackEvent.USED.value: 0.25,  # a reuse: usage, as an access is
    FeedbackEvent.EDITED.value: 0.0,  # corrected: says nothing about its use
    FeedbackEvent.NEGLECTED.value: -0.25,  # recalled and ignored: a little less useful
    FeedbackEvent.NOT_HELPFUL.value: -1.0,
}


@dataclass(frozen=True)
class Profile004:
    """The weights of 004 §7 and the operator's settings (λ, ε, the duplicate similarity)."""

    recency_lambda: float = 0.0231  # ln 2 / 30: recency halves every 30 days
    duplication: float = 0.1  # ε
    duplicate_similarity: float = 0.95  # raw cosine
    relevance: float = 0.5
    recency: float = 0.2
    importance: float = 0.2
    usage: float = 0.1

    def terms(self, relevance: float, features: RankFeatures, tally: FeedbackTally | None, now: datetime) -> Terms:
        """The weighted terms of one candidate (before the duplication penalty)."""
        return Terms(
            relevance=self.relevance * relevance,
            recency=self.recency * recency(features.created_at, now, self.recency_lambda),
            importance=self.importance * features.importance,
            usage=self.usage * usage(features.access_count, tally),
        )


@dataclass(frozen=True)
class Terms:
    """Each term's share of S (already weighted), and S."""

    relevance: float
    recency: float
    importance: float
    usage: float
    duplication: float = 0.0

    @property
    def total(self) -> float:
        return self.relevance + self.recency + self.importance + self.usage - self.duplication

    def why(self) -> str:
        """The shares as a result's `why`, e.g. `relevance 0.41 + recency 0.12 + ... - dup 0.00`."""
        return (
            f"relevance {self.relevance:.2f} + recency {self.recency:.2f} + importance {self.importance:.2f}"
            f" + usage {self.usage:.2f} - dup {self.duplication:.2f}"
        )


def recency(created: datetime, now: datetime, lam: float) -> float:
    """exp(−λ·age in days): 1.0 for a memory created now."""
    age_days = max(0.0, (now - created).total_seconds() / 86400)
    return math.exp(-lam * age_days)


def usage(access_count: int, tally: FeedbackTally | None) -> float:
    """Accesses on a log scale (saturating at USAGE_SATURATION), moved by the caller's feedback."""
    accessed = min(1.0, math.log1p(max(0, access_count)) / math.log1p(USAGE_SATURATION))
    if tally is None:
        return accessed
    net = sum(FEEDBACK_WEIGHTS.get(event, 0.0) * total for event, total in tally.scores.items())
    return accessed + FEEDBACK_SPAN * math.tanh(net / 2)


def penalise_duplicates(
    order: Sequence[str], terms: Mapping[str, Terms], vectors: Mapping[str, np.ndarray], profile: Profile004
) -> dict[str, Terms]:
    """`terms` with the duplication penalty: walking `order` (best first), a result whose cosine to
    an earlier one reaches the duplicate similarity gets ε·cosine. Results without a vector are
    compared by nothing (no penalty)."""
    out = dict(terms)
    if profile.duplication <= 0:
        return out
    seen: list[np.ndarray] = []
    for fid in order:
        vector = vectors.get(fid)
        if vector is None:
            continue
        norm = float(np.linalg.norm(vector))
        if norm == 0:
            continue
        unit = vector / norm
        closest = max((float(np.dot(unit, other)) for other in seen), default=0.0)
        if closest >= profile.duplicate_similarity:
            out[fid] = replace(terms[fid], duplication=profile.duplication * min(1.0, closest))
        seen.append(unit)
    return out
