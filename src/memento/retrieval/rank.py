"""Fusion of the retrieval tiers and the composite score (000 §4.4, with query relevance)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..models import Fragment
from ..settings import RankingConfig
from ..storage.protocol import Hit, RankFeatures

RRF_K = 60
MIN_SPREAD = 0.1  # fuse_linear: the least similarity band of a semantic tier shorter than its pool


@dataclass
class Candidate:
    """A fragment id with what each tier said about it."""

    id: str
    relevance: float = 0.0
    matched: dict[str, int] = field(default_factory=dict)  # tier -> 1-based rank
    similarity: float | None = None
    superseded_by: str | None = None  # a visible successor (a superseded_by edge from this one)
    why: str | None = None  # the reason a search mode gave (retrieval/search.py)
    context: float = 0.0  # relevance added by the memories written beside it (retrieval/neighbours.py)
    in_time: bool = False  # created within the time the query names (retrieval/temporal.py)


def fuse(tiers: dict[str, list[Hit]], weights: dict[str, float] | None = None) -> dict[str, Candidate]:
    """Reciprocal-rank fusion: rank positions, not raw scores, so tiers need no calibration."""
    out: dict[str, Candidate] = {}
    for tier, hits in tiers.items():
        weight = (weights or {}).get(tier, 1.0)
        for rank, hit in enumerate(hits, start=1):
            cand = out.setdefault(hit.id, Candidate(hit.id))
            cand.relevance += weight / (RRF_K + rank)
            cand.matched[tier] = rank
            if tier == "semantic":
                cand.similarity = hit.score
    return out


def fuse_linear(
    tiers: dict[str, list[Hit]], weights: dict[str, float] | None = None, pool: int | None = None
) -> tuple[dict[str, Candidate], Scale]:
    """Score fusion: each tier's scores brought to [0, 1] and summed with the tier weights.

    Full-text and keyword scores are divided by the tier's best (a match half as strong as the
    best counts half); similarities are spread between the weakest and the strongest hit of the
    pool, since a dense model's cosines crowd in a narrow band whatever the query. Unlike rank
    fusion, a clear winner in one tier stays ahead of a near tie in another. Returns the
    candidates and the semantic tier's scale, to place vectors found later on the same footing."""
    out: dict[str, Candidate] = {}
    scale = Scale()
    for tier, hits in tiers.items():
        if not hits:
            continue
        weight = (weights or {}).get(tier, 1.0)
        if tier == "semantic":
            high, low = max(h.score for h in hits), min(h.score for h in hits)
            scale = Scale(low if pool is None or len(hits) >= pool else min(low, high - MIN_SPREAD), high, weight)
        top = max(h.score for h in hits)
        for rank, hit in enumerate(hits, start=1):
            cand = out.setdefault(hit.id, Candidate(hit.id))
            cand.relevance += scale.of(hit.score) if tier == "semantic" else weight * (hit.score / top if top > 0 else 1.0)
            cand.matched[tier] = rank
            if tier == "semantic":
                cand.similarity = hit.score
    return out, scale


@dataclass(frozen=True)
class Scale:
    """How fuse_linear placed the semantic tier: its weakest and strongest similarity, and its weight."""

    low: float = 0.0
    high: float = 0.0
    weight: float = 0.0

    def of(self, similarity: float) -> float:
        if self.high <= self.low:
            return self.weight if similarity >= self.high else 0.0
        return self.weight * max(0.0, (similarity - self.low) / (self.high - self.low))


def recency(created: datetime, now: datetime, half_life_days: float) -> float:
    """1.0 for a memory created now, halving every half-life. Access does not refresh it:
    recall itself touches what it returns, so access-based recency would feed on itself."""
    age_days = max(0.0, (now - created).total_seconds() / 86400)
    return float(0.5 ** (age_days / half_life_days))


def prior(fragment: Fragment | RankFeatures, now: datetime, cfg: RankingConfig) -> float:
    """importanceWeight·importance + recencyWeight·recency: the seed's composite rank."""
    return cfg.importanceWeight * fragment.importance + cfg.recencyWeight * recency(fragment.created_at, now, cfg.recencyHalfLifeDays)


def composite(candidate: Candidate, fragment: Fragment | RankFeatures, best: float, now: datetime, cfg: RankingConfig) -> float:
    """Relevance (normalised to the best candidate) blended with the prior."""
    relevance = candidate.relevance / best if best > 0 else 0.0
    return cfg.relevanceWeight * relevance + (1 - cfg.relevanceWeight) * prior(fragment, now, cfg)


def reason(candidate: Candidate) -> str:
    """A short human-readable account of why a fragment was recalled."""
    if candidate.why is not None:
        return candidate.why
    parts = []
    if "keywords" in candidate.matched:
        parts.append(f"keyword match (rank {candidate.matched['keywords']})")
    if "text" in candidate.matched:
        parts.append(f"full-text rank {candidate.matched['text']}")
    if "semantic" in candidate.matched and candidate.similarity is not None:
        parts.append(f"semantic similarity {candidate.similarity:.2f}")
    if candidate.in_time:
        parts.append("created in the time asked about")
    if candidate.context > 0:
        parts.append(f"conversation context {candidate.context:.2f}")
    why = ", ".join(parts) or "filter match"
    return f"{why}; superseded by {candidate.superseded_by}" if candidate.superseded_by else why
