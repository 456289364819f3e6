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
from typing import Protocol, Self, TypeVar

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


class ScoreTerms(Protocol):
    """One candidate's score under a profile, with what its `why` says."""

    @property
    def total(self) -> float: ...
    def why(self) -> str: ...
    def penalised(self, duplication: float) -> Self:
        """These terms less a duplication penalty (a near copy of a better-ranked result)."""
        ...


class ScoreProfile(Protocol):
    """A way to rank recall's cascade that the operator picks (MEMENTO_SCORE_PROFILE): 004's or 003's."""

    @property
    def duplication(self) -> float:
        """ε of the duplicate penalty (0: none, and no vectors are read for it)."""
        ...

    @property
    def duplicate_similarity(self) -> float: ...
    @property
    def reads_feedback(self) -> bool:
        """Whether `terms` reads the caller's feedback tallies (else they are not fetched)."""
        ...

    def terms(self, relevance: float | None, features: RankFeatures, tally: FeedbackTally | None, now: datetime) -> ScoreTerms:
        """The score of one candidate; `relevance` is the fused relevance over the best candidate's
        (0-1), None for a listing without a query."""
        ...


T = TypeVar("T", bound=ScoreTerms)


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

    reads_feedback: bool = True  # usage is moved by the caller's feedback events

    def terms(self, relevance: float | None, features: RankFeatures, tally: FeedbackTally | None, now: datetime) -> Terms:
        """The weighted terms of one candidate (before the duplication penalty); relevance None
        (a listing without a query) counts as 0."""
        return Terms(
            relevance=self.relevance * (relevance or 0.0),
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

    def penalised(self, duplication: float) -> Terms:
        """These terms with the duplication penalty `duplication`."""
        return replace(self, duplication=duplication)

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
    order: Sequence[str], terms: Mapping[str, T], vectors: Mapping[str, np.ndarray], profile: ScoreProfile
) -> dict[str, T]:
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
            out[fid] = terms[fid].penalised(profile.duplication * min(1.0, closest))
        seen.append(unit)
    return out


# ---------------------------------------------------------------- seed 003's relevance decay

HOURS_PER_DAY = 24.0


@dataclass(frozen=True)
class Profile003:
    """Seed 003's relevance decay (its "Memories": a 7-day half-life; frequent access resists
    decay through access_count and last_accessed_at), chosen with MEMENTO_SCORE_PROFILE=003:

        S = relevance × recency × access × touch

    - relevance: the fused relevance over the best candidate's (0-1), as 000's ranking has it; a
      listing without a query counts every memory as 1;
    - recency: 0.5^(age / half-life), age from creation (7 days: a memory two weeks old keeps a
      quarter of a fresh one's);
    - access: 1 + 0.3·log2(1 + accesses), at most 2: each doubling of the accesses adds 0.3;
    - touch: 1 + 0.5·0.5^(hours since the last access / 48): a memory recalled lately is lifted by
      up to half, the lift halving every two days.

    The product has no importance or feedback term and no duplicate penalty (003 has neither).
    """

    half_life_days: float = 7.0
    access_step: float = 0.3
    access_cap: float = 2.0
    touch_lift: float = 0.5
    touch_half_life_hours: float = 48.0
    duplication: float = 0.0
    duplicate_similarity: float = 1.0
    reads_feedback: bool = False

    def terms(self, relevance: float | None, features: RankFeatures, tally: FeedbackTally | None, now: datetime) -> DecayTerms:
        """The factors of one candidate (the feedback tally is not read)."""
        return DecayTerms(
            relevance=1.0 if relevance is None else relevance,
            recency=half_life_decay(features.created_at, now, self.half_life_days * HOURS_PER_DAY),
            access=min(self.access_cap, 1.0 + self.access_step * math.log2(1 + max(0, features.access_count))),
            touch=1.0
            if features.accessed_at is None
            else 1.0 + self.touch_lift * half_life_decay(features.accessed_at, now, self.touch_half_life_hours),
        )


@dataclass(frozen=True)
class DecayTerms:
    """The factors of S under the profile 003, and S."""

    relevance: float
    recency: float
    access: float
    touch: float
    duplication: float = 0.0

    @property
    def total(self) -> float:
        return self.relevance * self.recency * self.access * self.touch - self.duplication

    def penalised(self, duplication: float) -> DecayTerms:
        return replace(self, duplication=duplication)

    def why(self) -> str:
        """The factors as a result's `why`, e.g. `relevance 0.83 × recency 0.71 × access 1.30 × touch 1.12`."""
        return f"relevance {self.relevance:.2f} × recency {self.recency:.2f} × access {self.access:.2f} × touch {self.touch:.2f}"


def half_life_decay(since: datetime, now: datetime, half_life_hours: float) -> float:
    """0.5^(hours from `since` to `now` / half-life): 1.0 at `since` (and for a time after `now`)."""
    hours = max(0.0, (now - since).total_seconds() / 3600)
    return float(0.5 ** (hours / half_life_hours))
