"""Search control of seed 001 (§5, §11.1): one engine for the keyword, semantic, hybrid and graph
modes, used by every face (000's `recall` with `mode`, 001's `recall_memories`, REST search).

Scores are on one 0-1 scale: keyword scores are BM25 min-max normalised within the result set,
semantic scores are cosines calibrated to the embedding model (`calibrate`) and floored at
`search_min_similarity`, graph scores are products of relation strengths and confidences. Every
mode multiplies by the memory's effective confidence (§11.1 step 8) and breaks ties by id.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..analysis import search_terms
from ..errors import InvalidArgument
from ..graph import SearchMode, effective_confidence
from ..models import AgentScope, Fragment
from ..settings import Settings
from ..storage.protocol import EntityStore, Hit, SearchFilter, Store
from .beside import Beside
from .coverage import Assessment, Evidence, assess

MAX_LIMIT = 100  # 001 §5.6
DEFAULT_LIMIT = 20
POOL = 200  # candidates asked of each tier for the first pages: the same pool, so the same order
MARGIN = 50  # beyond the pool: offset + limit + this
MAX_NGRAM = 5  # words in the longest entity name looked for in a query
MAX_NAME_CANDIDATES = 400

# Raw cosine of unrelated texts per embedding model (the stored vectors' model name). e5 cosines
# are compressed: unrelated texts score 0.73-0.82, related ones 0.86-0.90 (docs/search.md).
BASELINES: dict[str, float] = {"local:multilingual-e5-small-q4": 0.7, "local:e5-small-enpt-q4": 0.7}


def baseline_for(model: str | None, override: float | None = None) -> float:
    """The cosine of unrelated texts for `model`: the setting when given, else the known figure
    (0.0 for the hashing embedder and unknown models)."""
    if override is not None:
        return override
    return BASELINES.get(model or "", 0.0)


def calibrate(cosine: float, baseline: float) -> float:
    """A raw cosine on the 0-1 scale of 001's similarity settings: clip((cos - b) / (1 - b), 0, 1)."""
    return float(min(1.0, max(0.0, (cosine - baseline) / (1.0 - baseline))))


@dataclass(frozen=True)
class SearchRequest:
    """One search: the query, its mode, the §5.6 filters (as a SearchFilter) and the page."""

    query: str
    mode: SearchMode = SearchMode.HYBRID
    filt: SearchFilter = field(default_factory=SearchFilter)
    limit: int = DEFAULT_LIMIT
    offset: int = 0
    depth: int = 1  # graph mode: relation hops from the entities the query names

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidArgument(f"limit must be 1-{MAX_LIMIT}, got {self.limit}")
        if self.offset < 0:
            raise InvalidArgument(f"offset must be >= 0, got {self.offset}")
        if self.depth < 1:
            raise InvalidArgument(f"depth must be >= 1, got {self.depth}")


@dataclass(frozen=True)
class ScoredMemory:
    """A memory found by a search, its final score and the parts it was made of."""

    fragment: Fragment
    score: float
    keyword_score: float | None
    semantic_score: float | None
    graph_score: float | None
    effective_confidence: float
    why: str


@dataclass(frozen=True)
class SearchPage:
    """The requested page of hits, and how many matches were found in all."""

    hits: list[ScoredMemory]
    total: int
    coverage: Assessment | None = None  # how likely the answer is among `hits` (retrieval/coverage.py)


@dataclass
class _Parts:
    keyword: float | None = None
    semantic: float | None = None
    graph: float | None = None
    via: str | None = None  # graph: the entity the best path reached the memory through


@dataclass
class _Seen:
    """What the tiers of one search said, for its coverage: calibrated cosines, hits by tier."""

    similarities: list[float] = field(default_factory=list)
    tiers: list[list[str]] = field(default_factory=list)


class Search:
    """The four search modes over the store's tiers and the entity graph."""

    def __init__(
        self,
        store: Store,
        entities: EntityStore,
        settings: Settings,
        embed_query: Callable[[str], np.ndarray | None],
        beside: Beside | None = None,
        query_first: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.beside = beside or Beside(0)  # hybrid: the vector tier beside the keyword tier (beside.py)
        self.query_first = query_first  # the query's embedding takes every core: embed it first (recall.py)
        self.entities = entities
        self.settings = settings
        self.embed_query = embed_query

    @property
    def baseline(self) -> float:
        return baseline_for(self.store.embedding_model, self.settings.similarity_baseline)

    def run(self, scope: AgentScope, request: SearchRequest, now: datetime, vector: np.ndarray | None = None) -> SearchPage:
        """Answer `request` within `scope`; `vector` is the query's embedding when the caller has it."""
        pool = max(POOL, request.offset + request.limit + MARGIN)
        seen = _Seen()
        parts = self._parts(scope, request, pool, vector, seen)
        with self.store.reading(scope):  # one read-only session (Store.reading)
            scored = self._score(scope, request.mode, request.filt, parts, now)
        scored.sort(key=lambda m: (-m.score, m.fragment.id))
        hits = scored[request.offset : request.offset + request.limit]
        results = [(m.fragment.id, m.fragment.detail or m.fragment.content) for m in hits]
        covered = assess(Evidence(request.query, seen.similarities, seen.tiers, results), self.settings.coverage_threshold)
        return SearchPage(hits, len(scored), covered)

    # ------------------------------------------------------------ candidates per mode

    def _parts(self, scope: AgentScope, request: SearchRequest, pool: int, vector: np.ndarray | None, seen: _Seen) -> dict[str, _Parts]:
        mode, query, filt = request.mode, request.query, request.filt
        out: dict[str, _Parts] = {}
        if mode is SearchMode.GRAPH:
            for fid, (score, via) in self._graph(scope, query, request.depth, vector).items():
                out[fid] = _Parts(graph=score, via=via)
            return out
        nearest = None
        embed = True
        if mode is SearchMode.HYBRID and vector is None and query.strip() and self.query_first():
            vector, embed = self.embed_query(query), False  # on every core: before the keyword tier, not beside it
        if mode in (SearchMode.SEMANTIC, SearchMode.HYBRID):  # beside the keyword tier when a thread is free
            allowed = mode is SearchMode.HYBRID and not self.store.unit_of_work_open()
            nearest = self.beside.start(lambda: self._nearest(scope, query, filt, pool, vector, embed), allowed=allowed)
        if mode in (SearchMode.KEYWORD, SearchMode.HYBRID):
            with self.store.reading(scope):  # the full-text tier's statements share one read-only session
                keyword = self._keyword(scope, query, filt, pool, seen)
            for fid, kw in keyword.items():
                out.setdefault(fid, _Parts()).keyword = kw
        if nearest is not None:
            for fid, sem in self._semantic(nearest.result(), seen).items():
                out.setdefault(fid, _Parts()).semantic = sem
        return out

    def _keyword(self, scope: AgentScope, query: str, filt: SearchFilter, pool: int, seen: _Seen) -> dict[str, float]:
        """Full-text hits, BM25 min-max normalised within the result set (§11.1 step 3)."""
        terms = search_terms(query)
        hits = self.store.text_search(scope, terms, filt, pool) if terms else []
        seen.tiers.append([h.id for h in hits])
        return min_max(hits)

    def _nearest(
        self, scope: AgentScope, query: str, filt: SearchFilter, pool: int, vector: np.ndarray | None, embed: bool = True
    ) -> list[Hit] | None:
        """The vector tier's hits for the query (embedded here without `vector` when `embed`); None without a vector."""
        if vector is None and embed and query.strip():
            vector = self.embed_query(query)
        if vector is None:
            return None
        return self.store.vector_search(scope, vector, filt, pool)

    def _semantic(self, hits: list[Hit] | None, seen: _Seen) -> dict[str, float]:
        """Vector hits whose calibrated similarity reaches the floor (§5.3)."""
        if hits is None:
            return {}
        floor, base = self.settings.search_min_similarity, self.baseline
        out: dict[str, float] = {}
        seen.similarities.extend(calibrate(h.score, base) for h in hits)
        seen.tiers.append([h.id for h in hits])
        for hit in hits:
            s = calibrate(hit.score, base)
            if s >= floor and s > 0:
                out[hit.id] = s
        return out

    def _graph(self, scope: AgentScope, query: str, depth: int, vector: np.ndarray | None) -> dict[str, tuple[float, str]]:
        """§5.5: memories of the entities the query names (or the nearest by meaning) and of their
        neighbours up to `depth` hops; {fragment id: (best path score × relevance, entity name)}."""
        starts = self.entities.entities_named(scope, name_candidates(query))
        if not starts:
            nearest = self._nearest_entity(scope, query, vector)
            starts = self.entities.get_entities(scope, [nearest]) if nearest else []
        if not starts:
            return {}
        best = {e.id: 1.0 for e in starts}
        names = {e.id: e.name for e in starts}
        frontier = dict(best)
        for _ in range(depth):
            reached: dict[str, float] = {}
            for rel in self.entities.relations_of(scope, sorted(frontier), 0.0):
                for end in (rel.source_id, rel.target_id):
                    if end not in frontier:
                        continue
                    other = rel.other_end(end)
                    score = frontier[end] * rel.strength * rel.confidence
                    if score > best.get(other, -1.0):
                        best[other] = score
                        reached[other] = max(reached.get(other, 0.0), score)
                        names[other] = rel.target_name if other == rel.target_id else rel.source_name
            if not reached:
                break
            frontier = reached
        out: dict[str, tuple[float, str]] = {}
        for link in self.entities.entity_links(scope, entity_ids=sorted(best)):
            score = best[link.entity_id] * link.relevance
            if link.fragment_id not in out or score > out[link.fragment_id][0]:
                out[link.fragment_id] = (score, names.get(link.entity_id) or link.entity_id)
        return out

    def _nearest_entity(self, scope: AgentScope, query: str, vector: np.ndarray | None) -> str | None:
        """The entity closest in meaning to the query, when its calibrated similarity reaches the floor."""
        if vector is None and query.strip():
            vector = self.embed_query(query)
        if vector is None:
            return None
        best_id, best_s = None, 0.0
        base, floor = self.baseline, self.settings.search_min_similarity
        for entity_id, ev in self.entities.entity_vectors(scope):
            if ev.shape != vector.shape:
                continue
            s = calibrate(float(np.dot(ev, vector)), base)
            if s >= floor and s > best_s:
                best_id, best_s = entity_id, s
        return best_id

    # ------------------------------------------------------------ scoring

    def _score(
        self, scope: AgentScope, mode: SearchMode, filt: SearchFilter, parts: dict[str, _Parts], now: datetime
    ) -> list[ScoredMemory]:
        """Combine the parts (§11.1 step 6), keep what the filter admits, × effective confidence."""
        if not parts:
            return []
        allowed = self._entity_members(scope, filt.entity_id)
        alpha = self.settings.hybrid_keyword_weight
        half_life = self.settings.confidence_half_life_days
        out: list[ScoredMemory] = []
        for fragment in self.store.get_many(scope, list(parts)):
            p = parts.get(fragment.id)
            if p is None or not filt.matches(fragment) or (allowed is not None and fragment.id not in allowed):
                continue
            base = combine(mode, p, alpha)
            eff = effective_confidence(fragment.confidence, fragment.created_at, fragment.accessed_at, filt.now or now, half_life)
            out.append(ScoredMemory(fragment, round(base * eff, 6), p.keyword, p.semantic, p.graph, eff, _why(p, eff)))
        return out

    def _entity_members(self, scope: AgentScope, entity_id: str | None) -> set[str] | None:
        """The memories associated with `entity_id` (the §5.6 filter), None when not filtered.
        The stores apply it in SQL too; candidates of the graph mode come from elsewhere."""
        if entity_id is None:
            return None
        return {link.fragment_id for link in self.entities.entity_links(scope, entity_ids=[entity_id])}


def combine(mode: SearchMode, p: _Parts, alpha: float) -> float:
    """The score before confidence: §11.1 step 6 in hybrid mode (a memory found by one tier only
    is scaled by that tier's weight), the one tier's score in the other modes."""
    if mode is SearchMode.GRAPH:
        return p.graph or 0.0
    if mode is SearchMode.KEYWORD:
        return p.keyword or 0.0
    if mode is SearchMode.SEMANTIC:
        return p.semantic or 0.0
    return alpha * (p.keyword or 0.0) + (1 - alpha) * (p.semantic or 0.0)


def min_max(hits: Sequence[Hit]) -> dict[str, float]:
    """Scores normalised to [0, 1] within `hits` (all 1.0 when they are equal)."""
    if not hits:
        return {}
    low = min(h.score for h in hits)
    high = max(h.score for h in hits)
    span = high - low
    return {h.id: (h.score - low) / span if span > 0 else 1.0 for h in hits}


def _why(p: _Parts, eff: float) -> str:
    out = []
    if p.keyword is not None:
        out.append(f"keyword {p.keyword:.2f}")
    if p.semantic is not None:
        out.append(f"semantic {p.semantic:.2f}")
    if p.graph is not None:
        out.append(f"graph {p.graph:.2f} via {p.via}")
    out.append(f"confidence {eff:.2f}")
    return "; ".join(out)


_EDGE_PUNCT = "\"'`.,;:!?()[]{}<>"
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


def name_candidates(query: str) -> list[str]:
    """Word n-grams of the query (up to MAX_NGRAM words), surrounding punctuation and a
    possessive 's removed: the strings an entity name must equal to be named by the query."""
    words = [w for w in (_clean_word(raw) for raw in query.split()) if w]
    out: dict[str, None] = {}
    for size in range(1, MAX_NGRAM + 1):
        for start in range(len(words) - size + 1):
            out[" ".join(words[start : start + size])] = None
            if len(out) >= MAX_NAME_CANDIDATES:
                return list(out)
    return list(out)


def _clean_word(raw: str) -> str:
    word = raw.strip(_EDGE_PUNCT)
    return _POSSESSIVE.sub("", word).strip(_EDGE_PUNCT) if word else word
