"""Coverage: how likely the answer to a query is among the results of a recall (docs/search.md).

A recall always returns its best candidates, even when nothing stored is about the question.
`assess` turns what the tiers already said into one calibrated probability, without a model
call: a small logistic model over six features of the evidence,

- `similarity`: the best calibrated cosine of the vector tier (0 when it did not run);
- `margin`: that cosine minus the calibrated cosine of the MARGIN_RANK-th vector hit (0 beyond
  the hits): a stand-out top hit is a specific match, a flat list is a vague one;
- `terms`: the IDF-weighted share of the query's terms found in the top TERM_WINDOW results,
  with document frequencies counted within those results: a query term none of them holds
  weighs most, so a rare word of the question that matched nothing pulls coverage down;
- `focus`: the best share (weighted the same way) that one single result holds: a question whose
  words are spread over several results, none holding them together, is often not answered;
- `agreement`: the share of the tiers that ran whose first hit is the top result;
- `consensus`: the share of the top TERM_WINDOW results that two tiers both rank in their top
  TERM_WINDOW.

Without a vector tier (no embedder, the keyword-only mode) a second set of constants applies,
fitted the same way on the text tiers alone (`--embedder none`). Each model is linear in the
features and no weight is negative, so more evidence never lowers coverage and an exact match
(far beyond anything in the fitting data) scores near 1; products of features fitted slightly
better but bend down there (docs/search.md). The coefficients are constants, fitted by
`bench/coverage.py --fit` (leave-one-conversation-out figures in docs/benchmarks.md); every face
reports the same number, rounded to 2 decimals. Nothing is cached: a result's terms are read
from its text each time, so an erased memory leaves nothing behind here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis import index_terms, query_terms

MARGIN_RANK = 10
TERM_WINDOW = 10
DEFAULT_THRESHOLD = 0.2  # MEMENTO_COVERAGE_THRESHOLD: below it a result says noGoodMatch (bench/coverage.py)

FEATURES = ("similarity", "margin", "terms", "focus", "agreement", "consensus")
# bench/coverage.py --fit (begin)
INTERCEPT = -7.229
WEIGHTS = (8.289, 3.738, 0.273, 3.798, 1.026, 5.376)
# bench/coverage.py --fit (end)
# bench/coverage.py --fit --embedder none (begin)
LEXICAL_INTERCEPT = -2.849
LEXICAL_WEIGHTS = (0.000, 0.000, 1.375, 5.047, 0.000, 0.000)
# bench/coverage.py --fit --embedder none (end)


@dataclass(frozen=True)
class Evidence:
    """What one recall's tiers said about a query: the inputs of `assess`."""

    query: str
    similarities: Sequence[float]  # calibrated cosines of the vector tier's hits (empty: it did not run)
    tiers: Sequence[Sequence[str]]  # each tier that ran: the ids of its hits, best first
    results: Sequence[tuple[str, str]]  # (id, text) of the results, best first


@dataclass(frozen=True)
class Assessment:
    """A recall's coverage, its features and whether it falls below the threshold."""

    coverage: float
    features: dict[str, float]
    no_good_match: bool


def features(evidence: Evidence) -> dict[str, float]:
    """The model's inputs, each in [0, 1]."""
    sims = sorted((min(1.0, max(0.0, s)) for s in evidence.similarities), reverse=True)
    best = sims[0] if sims else 0.0
    kth = sims[MARGIN_RANK - 1] if len(sims) >= MARGIN_RANK else 0.0
    window = evidence.results[:TERM_WINDOW]
    top = window[0][0] if window else None
    ran = len(evidence.tiers)
    agreeing = sum(1 for hits in evidence.tiers if hits and hits[0] == top)
    heads = [set(hits[:TERM_WINDOW]) for hits in evidence.tiers]
    shared = sum(1 for rid, _ in window if sum(rid in h for h in heads) >= 2)
    terms, focus = term_shares(evidence.query, [text for _, text in window])
    return {
        "similarity": best,
        "margin": max(0.0, best - kth),
        "terms": terms,
        "focus": focus,
        "agreement": agreeing / ran if ran else 0.0,
        "consensus": shared / len(window) if window else 0.0,
    }


def term_shares(query: str, texts: Sequence[str]) -> tuple[float, float]:
    """The IDF-weighted share of the query's terms that occur in any of `texts`, and the best
    share one text holds; a term's IDF is counted within `texts` (smoothed), so a term none of
    them holds weighs most."""
    terms = query_terms(query)
    if not terms or not texts:
        return 0.0, 0.0
    held = [frozenset(index_terms(t)) for t in texts]
    n = len(held)
    weights = {term: math.log((n + 1) / (sum(1 for h in held if term in h) + 0.5)) for term in terms}
    total = sum(weights.values())
    if total <= 0:
        return 0.0, 0.0
    found = sum(w for term, w in weights.items() if any(term in h for h in held))
    best = max(sum(w for term, w in weights.items() if term in h) for h in held)
    return found / total, best / total


def probability(values: dict[str, float], intercept: float = INTERCEPT, weights: Sequence[float] = WEIGHTS) -> float:
    """The logistic model: sigmoid(intercept + Σ weight·feature)."""
    z = intercept + sum(w * values[name] for name, w in zip(FEATURES, weights, strict=True))
    return 1.0 / (1.0 + math.exp(-z)) if z >= -50 else 0.0


def assess(evidence: Evidence, threshold: float = DEFAULT_THRESHOLD) -> Assessment:
    """The coverage of one recall (2 decimals), its features and the noGoodMatch verdict."""
    values = features(evidence)
    # no vector tier: the constants fitted without one
    fitted = (INTERCEPT, WEIGHTS) if evidence.similarities else (LEXICAL_INTERCEPT, LEXICAL_WEIGHTS)
    coverage = round(probability(values, *fitted), 2) if evidence.results else 0.0
    return Assessment(coverage, {k: round(v, 2) for k, v in values.items()}, coverage < threshold)
