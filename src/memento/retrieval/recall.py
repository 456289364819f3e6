"""The recall cascade of 000 §4 over the store protocol: the L1 keyword index (checked against the
store), the keyword tier, full text and vectors; fused, ranked with the composite score, cut to the
token budget, with linked neighbours appended. MemoryService decides who may see what (the
scope and filter); this engine decides what comes back and in which order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

import numpy as np

from ..analysis import normalise_keyword, search_terms
from ..models import AgentScope, Fragment, FragmentType, MemorySystem, RecallFilters, RecallInput, RelationType
from ..results import Edge, RecallItem, RecallResult, RecallTiers
from ..settings import MemoryConfig
from ..storage.protocol import Hit, KeywordIndex, RankFeatures, SearchFilter, Store
from ..storage.terms import sharing_plans
from .beside import Beside, Pending
from .budget import Counter, WireBudget
from .coverage import DEFAULT_THRESHOLD, Assessment, Evidence, assess
from .neighbours import add_context
from .profile import ScoreProfile, penalise_duplicates
from .rank import Candidate, Scale, composite, fuse, fuse_linear, prior, reason
from .readahead import ReadAhead
from .search import MAX_LIMIT, Search, SearchPage, SearchRequest, baseline_for, calibrate
from .temporal import named_span

CANDIDATE_POOL = 40  # per tier; fusion only needs the head of each list
L1_VERIFY_LIMIT = 5000  # L1 candidates checked against the store; more falls back to L2
DEFAULT_LINK_RELATIONS = (RelationType.CAUSED_BY, RelationType.RESOLVED_BY, RelationType.RELATED)
SUPERSEDED_FACTOR = 0.5  # a superseded memory's score, relative to what it would be

Ranked = list[tuple[Fragment, Candidate, float]]
INSTANT = timedelta(microseconds=1)  # SearchFilter's creation window is strict; 004's is inclusive


def recall_filter(inp: RecallInput, session_id: str | None, half_life_days: float) -> SearchFilter:
    """The SearchFilter of a recall: 000's parameters and 004's `filters` object, all applied
    together (memory systems and kinds in `filters.type`: any of the systems given and any of
    the kinds given; `projectId` is the tag `project:<id>`; the time window is inclusive)."""
    f = inp.filters or RecallFilters()
    chosen = f.type or []
    systems = tuple(dict.fromkeys(t for t in chosen if isinstance(t, MemorySystem)))
    kinds = tuple(dict.fromkeys(t for t in chosen if isinstance(t, FragmentType)))
    tags = [*(inp.tags or ()), *(f.tags or ()), *([f"project:{f.projectId}"] if f.projectId else [])]
    return SearchFilter(
        topic=inp.topic,
        type=inp.type,
        types=kinds or None,
        session_id=session_id,
        tags_all=tuple(dict.fromkeys(tags)),
        tags_any=tuple(inp.tagsAny or ()),
        memory_system=inp.memorySystem,
        memory_systems=systems or None,
        created_after=f.timeFrom - INSTANT if f.timeFrom else None,
        created_before=f.timeTo + INSTANT if f.timeTo else None,
        half_life_days=half_life_days,
    )


class Recall:
    """One recall: tiers, fusion, ranking and assembly within the budget."""

    def __init__(
        self,
        store: Store,
        config: MemoryConfig,
        embed_query: Callable[[str], np.ndarray | None],
        search_mode: Callable[[], str],
        tokens: Counter,
        keyword_index: KeywordIndex | None = None,
        search: Search | None = None,
        profile: ScoreProfile | None = None,
        coverage_threshold: float = DEFAULT_THRESHOLD,
        beside: Beside | None = None,
        query_first: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.beside = beside or Beside(0)  # the threads the vector tier runs on beside the others
        # Whether a query's embedding takes every core (the local model): then it comes before the
        # other tiers, and only the vector search runs beside them (vectorizer.py).
        self.query_first = query_first
        self.coverage_threshold = coverage_threshold  # MEMENTO_COVERAGE_THRESHOLD: below it, noGoodMatch
        self.profile = profile  # the score profile 004 or 003 (MEMENTO_SCORE_PROFILE); None: 000's ranking
        self.search = search
        self.tokens = tokens
        self.config = config
        self.embed_query = embed_query
        self.search_mode = search_mode
        self.keyword_index = keyword_index

    @sharing_plans
    def run(
        self,
        scope: AgentScope,
        inp: RecallInput,
        filt: SearchFilter,
        vector: np.ndarray | None,
        now: datetime,
        copies: int = 1,
        *,
        embed: bool = False,
        settle: Callable[[], None] | None = None,
    ) -> RecallResult:
        """Answer `inp` within `scope` and `filt`; `vector` is the query's embedding when there is one;
        `copies`: how often the face sends the result (the budget counts each). With `inp.mode`
        and a query, the search mode answers (retrieval/search.py) instead of the cascade.

        `embed`: without a `vector`, embed the query text here; `settle`: called before the
        vector tier reads a text query's neighbours (read-your-writes by meaning). Both run with
        the vector tier beside the keyword and full-text tiers when a thread is free (beside.py).
        The tiers weigh the query's terms once between them (storage/terms.shared_plans)."""
        searched = inp.text or " ".join(normalise_keyword(k) for k in inp.keywords or [])
        if inp.mode is not None and searched and self.search is not None:
            if inp.text and settle is not None:
                settle()
            return self._searched(scope, inp, searched, filt, vector, now, copies)
        pool = max(CANDIDATE_POOL, inp.limit * 3)
        keywords = [normalise_keyword(k) for k in inp.keywords or []]
        tiers: dict[str, list[Hit]] = {}
        semantic = "unused"
        l1: int | str | None = None
        if keywords:
            from_l1, l1 = self._l1_keywords(scope, keywords, filt, pool)
            tiers["keywords"] = from_l1 if from_l1 is not None else self.store.keyword_search(scope, keywords, filt, pool)
        # Keywords alone escalate to the vector tier only when they found nothing; the full-text
        # tier matches them against the whole content either way (the keyword tier sees only
        # each memory's few keywords).
        query = inp.text or (" ".join(keywords) if keywords and not tiers["keywords"] else None)
        lexical = inp.text or " ".join(keywords)
        nearest: Pending[tuple[np.ndarray | None, list[Hit], dict[str, float] | None]] | None = None
        found_text: int | None = None
        text_terms = search_terms(lexical) if lexical else []
        if query:
            text = query
            caller = threading.current_thread()
            embedding = vector is None and bool(embed or (inp.text is None and keywords))
            if embedding and self.query_first():
                # The model takes every core: beside it the lexical reads would only slow its
                # threads at every barrier, so it embeds first (docs/embeddings.md, "Local embedder and threads").
                vector, embedding = self.embed_query(text), False

            def by_meaning() -> tuple[np.ndarray | None, list[Hit], dict[str, float] | None]:
                found = self.embed_query(text) if embedding else vector
                if found is None:
                    return None, [], None
                if inp.text and settle is not None:
                    settle()
                # On a helper thread, the text scores of what it found come along (the caller is
                # reading ahead meanwhile); in the caller, only those the text tier misses are asked.
                beside = threading.current_thread() is not caller and bool(text_terms)
                with self.store.reading(scope):
                    hits = self.store.vector_search(scope, found, filt, pool)
                    return found, hits, self.store.text_scores(scope, text_terms, [h.id for h in hits]) if beside else None

            nearest = self.beside.start(by_meaning, allowed=not self.store.unit_of_work_open())
        # The caller's reads share a read-only session (Store.reading: on PostgreSQL one transaction
        # instead of one per call), but not while it waits for the vector tier, whose settling for
        # read-your-writes may take a while: a session holds a pooled connection.
        reads = ReadAhead(self.store, scope, filt)
        with self.store.reading(scope):
            if lexical:
                tiers["text"] = self.store.text_search(scope, text_terms, filt, pool)
            if nearest is not None and nearest.beside and not nearest.done():  # read ahead while the query embeds
                cfg = self.config.ranking
                context = cfg.contextBefore > 0 or cfg.contextAfter > 0
                window = timedelta(minutes=cfg.contextWindowMinutes) if context else None
                ahead = [h.id for hits in tiers.values() for h in hits]
                reads.prefetch(ahead, cfg.contextReach, window, stop=nearest.done, limit=inp.limit)
        text_scores: dict[str, float] | None = None
        if nearest is not None:
            vector, hits, text_scores = nearest.result()
            if vector is not None:
                semantic = "used"
                exempt = {h.id for found in tiers.values() for h in found}
                tiers["semantic"] = [
                    h for h in hits if h.id in exempt or (h.score > 0 and (inp.threshold is None or h.score >= inp.threshold))
                ]
                found_text = len(tiers.get("text", []))
            elif self.search_mode() == "keyword-only":
                semantic = "disabled (keyword-only mode)"
            else:
                semantic = "unavailable (embedding provider failed; keyword tiers only)"
        with self.store.reading(scope):
            if found_text is not None and found_text >= pool:
                self._complete_text(scope, tiers, text_terms, text_scores)
            ranked = (
                self._rank_query(scope, tiers, now, inp.limit, filt, vector, query, inp.threshold, inp.text is not None, reads)
                if tiers
                else self._rank_listing(scope, filt, now, inp.limit)
            )
            report = RecallTiers(
                keywords=len(tiers.get("keywords", [])),
                text=found_text if found_text is not None else len(tiers.get("text", [])),
                semantic=len(tiers["semantic"]) if "semantic" in tiers else semantic,
                l1=l1,
            )
            covered = self._coverage(searched, tiers, ranked[: inp.limit]) if tiers else None
            return self._assemble(scope, inp, ranked[: inp.limit], now, report, copies, assessment=covered)

    def _complete_text(self, scope: AgentScope, tiers: dict[str, list[Hit]], terms: list[str], known: dict[str, float] | None) -> None:
        """Give the full-text tier's score to what the vector tier found beyond the full-text
        tier's pool. When the words match more memories than the pool holds (a large store, or
        unrelated memories sharing a common word), a memory close in meaning that also holds the
        words would otherwise be fused as if it held none of them (docs/retrieval.md)."""
        have = {h.id for h in tiers["text"]}
        missing = [h.id for h in tiers["semantic"] if h.id not in have]
        if not missing or not terms:
            return
        scores = self.store.text_scores(scope, terms, missing) if known is None else {i: known[i] for i in missing if i in known}
        tiers["text"] = tiers["text"] + sorted((Hit(i, s) for i, s in scores.items()), key=lambda h: -h.score)

    def _searched(
        self, scope: AgentScope, inp: RecallInput, query: str, filt: SearchFilter, vector: np.ndarray | None, now: datetime, copies: int
    ) -> RecallResult:
        """recall with a search mode: the mode's hits, in its order, through the same budget."""
        assert self.search is not None and inp.mode is not None
        request = SearchRequest(query=query, mode=inp.mode, filt=filt, limit=min(inp.limit, MAX_LIMIT))
        page: SearchPage = self.search.run(scope, request, now, vector)
        ranked: Ranked = []
        for hit in page.hits:
            parts = {"keyword": hit.keyword_score, "semantic": hit.semantic_score, "graph": hit.graph_score}
            cand = Candidate(hit.fragment.id, matched={k: 1 for k, v in parts.items() if v is not None}, why=hit.why)
            cand.similarity = hit.semantic_score
            ranked.append((hit.fragment, cand, hit.score))
        report = RecallTiers(
            keywords=0,
            text=sum(h.keyword_score is not None for h in page.hits),
            semantic=sum(h.semantic_score is not None for h in page.hits),
        )
        return self._assemble(scope, inp, ranked, now, report, copies, mode=inp.mode.value, assessment=page.coverage)

    def _coverage(self, query: str, tiers: dict[str, list[Hit]], ranked: Ranked) -> Assessment:
        """How likely the answer is among `ranked`, from what the tiers said (retrieval/coverage.py)."""
        base = self.search.baseline if self.search is not None else baseline_for(self.store.embedding_model)
        sims = [calibrate(h.score, base) for h in tiers.get("semantic", [])]
        ids = [[h.id for h in hits] for hits in tiers.values()]
        results = [(f.id, f.detail or f.content) for f, _, _ in ranked]
        return assess(Evidence(query, sims, ids, results), self.coverage_threshold)

    def _l1_keywords(
        self, scope: AgentScope, keywords: list[str], filt: SearchFilter, pool: int
    ) -> tuple[list[Hit] | None, int | str | None]:
        """The L1 tier (000 §4.1): the keyword index's intersection, checked against the store.

        Returns (hits, report). hits is None when the store's keyword tier (L2) must answer:
        no index, index unavailable, nothing found, too many candidates to check, or several
        keywords with fewer full matches than the pool (L2 then adds the partial matches). So
        the keyword tier's result is the same with and without L1.
        """
        if self.keyword_index is None:
            return None, None
        ids = self.keyword_index.lookup(scope, keywords)
        if ids is None:
            return None, "unavailable"
        if not ids:
            return None, "empty"
        if len(ids) > L1_VERIFY_LIMIT:
            return None, "too broad"
        found = self.store.get_many(scope, ids)
        present = {f.id for f in found}
        stale = [i for i in ids if i not in present]
        if stale:
            self.keyword_index.discard(stale)  # deleted behind the index's back (e.g. consolidation)
        matches = [f for f in found if filt.matches(f)]
        distinct = len(set(keywords))
        if not matches:
            return None, "empty"
        if distinct > 1 and len(matches) < pool:
            return None, "insufficient"
        # The keyword tier's order (storage): every full match scores the same; then the larger
        # share of the fragment's keywords matched, importance, the id.
        matches.sort(key=lambda f: (-distinct / max(len(set(f.keywords)), 1), -f.importance, f.id))
        return [Hit(f.id, float(distinct)) for f in matches[:pool]], len(matches)

    def _rank_query(
        self,
        scope: AgentScope,
        tiers: dict[str, list[Hit]],
        now: datetime,
        limit: int,
        filt: SearchFilter,
        vector: np.ndarray | None,
        query: str | None,
        threshold: float | None = None,
        free_text: bool = True,
        reads: ReadAhead | None = None,
    ) -> Ranked:
        """Fuse the tiers, add conversational context (neighbours.py) and the time the query
        names (temporal.py), then rank with the composite score or the score profile."""
        cfg = self.config.ranking
        weights = {"semantic": cfg.semanticWeight, "keywords": cfg.keywordWeight}
        scale: Scale | None = None
        if cfg.fusion == "rrf":
            cands = fuse(tiers, weights)
        else:
            cands, scale = fuse_linear(tiers, weights, max(CANDIDATE_POOL, limit * 3))
        reads = reads or ReadAhead(self.store, scope, filt)
        add_context(reads, scope, cands, filt, vector, scale, cfg, limit, threshold, admit=free_text)
        if not cands:
            return []
        features = reads.rank_features(scope, list(cands))
        present = [c for c in cands.values() if c.id in features]
        span = named_span(query, now) if query and cfg.temporalBoost > 0 else None
        if span is not None:
            for c in present:
                if span.holds(features[c.id].created_at, cfg.temporalSlackDays):
                    c.relevance *= 1 + cfg.temporalBoost
                    c.in_time = True
        best = max((c.relevance for c in present), default=0.0)
        successors = self._successors(scope, present)
        if self.profile is not None:
            relevance = {c.id: c.relevance / best if best > 0 else 0.0 for c in present}
            scored = self._profiled(scope, self.profile, present, relevance, features, successors, now, limit)
        else:
            scored = [
                (c, composite(c, features[c.id], best, now, cfg) * (SUPERSEDED_FACTOR if c.id in successors else 1.0)) for c in present
            ]
            scored.sort(key=lambda t: -t[1])
        top = scored[:limit]
        fragments = {f.id: f for f in reads.get_many(scope, [c.id for c, _ in top])}
        return [(fragments[c.id], c, score) for c, score in top if c.id in fragments]

    def _profiled(
        self,
        scope: AgentScope,
        profile: ScoreProfile,
        cands: list[Candidate],
        relevance: dict[str, float] | None,
        features: Mapping[str, RankFeatures],
        successors: Mapping[str, str],
        now: datetime,
        limit: int,
    ) -> list[tuple[Candidate, float]]:
        """The candidates scored by the profile, best first, each with its terms as its `why`;
        `relevance` None: a listing without a query. The duplication penalty is judged among the
        best 2·limit (at least 40) before it."""
        tallies = self.store.feedback_tallies(scope, [c.id for c in cands]) if profile.reads_feedback else {}
        terms = {
            c.id: profile.terms(None if relevance is None else relevance.get(c.id, 0.0), features[c.id], tallies.get(c.id), now)
            for c in cands
        }

        def factor(c: Candidate) -> float:
            return SUPERSEDED_FACTOR if c.id in successors else 1.0

        cands = sorted(cands, key=lambda c: -terms[c.id].total * factor(c))
        window = [c.id for c in cands[: max(2 * limit, CANDIDATE_POOL)]]
        vectors = self.store.embeddings_of(scope, window) if profile.duplication > 0 else {}
        terms = penalise_duplicates(window, terms, vectors, profile)
        scored = []
        for c in cands:
            why = terms[c.id].why()
            c.why = f"{why}; superseded by {c.superseded_by}" if c.superseded_by else why
            scored.append((c, terms[c.id].total * factor(c)))
        scored.sort(key=lambda t: -t[1])
        return scored

    def _successors(self, scope: AgentScope, cands: list[Candidate]) -> dict[str, str]:
        """Candidates that a visible memory supersedes, marked (`superseded_by`) and returned as
        {old id: new id}: a superseded memory ranks below what replaced it and says so."""
        ids = {c.id for c in cands}
        found = {
            link.from_id: link.to_id
            for link, _ in self.store.neighbours(scope, sorted(ids), (RelationType.SUPERSEDED_BY,), 2 * len(ids) + 10)
            if link.from_id in ids
        }
        for cand in cands:
            cand.superseded_by = found.get(cand.id)
        return found

    def _rank_listing(self, scope: AgentScope, filt: SearchFilter, now: datetime, limit: int) -> Ranked:
        """No query: newest first for small stores, the seed's composite rank above the threshold."""
        cfg = self.config.ranking
        total = self.store.count(scope, filt, at_most=cfg.activationThreshold + 1)  # only which side of it
        if total <= cfg.activationThreshold:
            rows = self.store.recent(scope, filt, limit)
            return [(f, Candidate(f.id), prior(f, now, cfg)) for f in rows]
        rows = self.store.list_fragments(scope, filt, max(limit * 5, 200))
        if self.profile is not None:  # no query: no relevance
            features = {f.id: RankFeatures(f.importance, f.created_at, f.accessed_at, f.access_count) for f in rows}
            by_id = {f.id: f for f in rows}
            profiled = self._profiled(scope, self.profile, [Candidate(f.id) for f in rows], None, features, {}, now, limit)
            return [(by_id[c.id], c, score) for c, score in profiled]
        scored = [(f, Candidate(f.id), prior(f, now, cfg)) for f in rows]
        scored.sort(key=lambda t: -t[2])
        return scored

    def _assemble(
        self,
        scope: AgentScope,
        inp: RecallInput,
        ranked: Ranked,
        now: datetime,
        tiers: RecallTiers,
        copies: int,
        mode: str | None = None,
        assessment: Assessment | None = None,
    ) -> RecallResult:
        """The ranked fragments, then linked neighbours, while the whole result as sent (in the
        view asked for) fits the token budget; `mode`: the search mode that ranked them;
        `assessment`: the coverage of a query (none for a listing)."""
        verbose = inp.verbose
        mode = mode or self.search_mode()
        covered = coverage_fields(assessment, verbose)
        envelope = RecallResult(
            fragments=[],
            count=inp.limit,
            total_tokens=inp.tokenBudget,
            token_budget=inp.tokenBudget,
            truncated=False,
            tiers=tiers if verbose else None,
            search_mode=mode if verbose else None,
            verbose=verbose,
            **covered,
        )
        budget = WireBudget(self.tokens, inp.tokenBudget, copies, envelope.dump())
        if budget.used > inp.tokenBudget and covered.get("coverage_features") is not None:
            covered["coverage_features"] = None  # a budget too small for the features keeps the number
            budget = WireBudget(self.tokens, inp.tokenBudget, copies, envelope.model_copy(update=covered).dump())
        out: list[RecallItem] = []
        truncated = False
        tallies = self.store.feedback_tallies(scope, [f.id for f, _, _ in ranked]) if verbose else {}
        for fragment, cand, score in ranked:
            tally = tallies.get(fragment.id)
            item = RecallItem.of_recalled(
                fragment,
                score=round(score, 4),
                recall_reason=reason(cand),
                matched=sorted(cand.matched),
                similarity=round(cand.similarity, 4) if cand.similarity is not None else None,
                superseded_by=cand.superseded_by,
                feedback=dict(tally.counts) if tally else None,
            )
            if not budget.take(item.wire(verbose)):
                truncated = True
                break
            out.append(item)
        if inp.includeLinks and out and not truncated:
            relations = (inp.linkRelationType,) if inp.linkRelationType else DEFAULT_LINK_RELATIONS
            present = {i.id for i in out}
            limit = self.config.linkedFragmentLimit
            for link, neighbour in self.store.neighbours(scope, list(present), relations, limit * 3):
                if neighbour.id in present or limit <= 0:
                    continue
                item = RecallItem.of_recalled(
                    neighbour,
                    linked=True,
                    via=Edge(from_=link.from_id, to=link.to_id, relation=link.relation_type),
                    recall_reason=f"linked ({link.relation_type.value}) to {link.to_id if neighbour.id == link.from_id else link.from_id}",
                )
                if not budget.take(item.wire(verbose)):
                    truncated = True
                    break
                present.add(neighbour.id)
                limit -= 1
                out.append(item)
        self.store.record_access([i.id for i in out], now)
        return RecallResult(
            fragments=out,
            count=len(out),
            total_tokens=budget.used,
            token_budget=inp.tokenBudget,
            truncated=truncated,
            tiers=tiers if verbose else None,
            search_mode=mode if verbose else None,
            verbose=verbose,
            **covered,
        )


def coverage_fields(assessment: Assessment | None, verbose: bool) -> dict[str, object]:
    """RecallResult's coverage fields: the number, noGoodMatch only when true, features when verbose."""
    if assessment is None:
        return {}
    return {
        "coverage": assessment.coverage,
        "no_good_match": True if assessment.no_good_match else None,
        "coverage_features": assessment.features if verbose else None,
    }
