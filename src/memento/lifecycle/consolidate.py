"""The consolidation pipeline of 000 §8 (with 001's confidence floor and §6.2 merging, and 004
§4.2's retention), returning per-stage counts and the ids each stage changed. Anchored and pinned
memories are exempt.

A run may be limited to some stages (`stages`), and may be a dry run: a *rehearsal*, the real
stages run inside one transaction that is rolled back (Store.rehearsal), so what a dry run reports
is by construction what the real run would do. Work outside the store checks the flag instead:
the embedding backfill only lists what it would embed, and the caller emits no events."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic.alias_generators import to_camel, to_snake

from ..errors import InvalidArgument
from ..models import AgentScope, MemorySystem, TTLTier
from ..observe import Observer
from ..results import ConsolidateResult, FragmentPair, StageChanges, StoreStats
from ..settings import MemoryConfig
from ..storage.protocol import MaintenanceStore, Store
from .merge import Merger
from .review import Reviews
from .sleep import Sleep

log = logging.getLogger(__name__)

Backfill = Callable[[AgentScope, int | None], int]
Pending = Callable[[AgentScope], list[str]]  # the ids the backfill would embed now
Progress = Callable[[int, int, str], None]

# The stages, in the order they run (result field names; camelCase on the wire).
STAGES = (
    "confidence_pruned",
    "hot_to_warm",
    "warm_to_cold",
    "expired",
    "working_memory_expired",  # before retention, which would archive an idle session's rows instead of expunging them
    "retention_expired",
    "utility_recomputed",
    "decayed",
    "deduplicated",
    "merged",
    "contradictions",
    "forgotten_purged",
    "orphan_links_pruned",
    # Before the backfill: the semantic memories sleep consolidation makes are embedded by the same run.
    "sleep_consolidated",
    "reviews_scheduled",
    "embeddings_backfilled",
)
DEFAULT_ID_LIMIT = 20  # ids listed per stage unless the caller asks for more


def select_stages(names: Sequence[str] | None, default: Sequence[str] = STAGES) -> tuple[str, ...]:
    """The stages a run performs, in pipeline order: `names` (camelCase or snake_case), or
    `default` when None. An unknown name is refused, listing the known ones; nothing runs."""
    if names is None:
        return tuple(s for s in STAGES if s in default)
    known = ", ".join(to_camel(s) for s in STAGES)
    if not names:
        raise InvalidArgument(f"stages is empty: name one or more of {known}, or leave it out for all; nothing run")
    wanted = {to_snake(n) for n in names}
    unknown = [n[:40] for n in names if to_snake(n) not in STAGES]
    if unknown:
        raise InvalidArgument(f"unknown consolidation stage(s) {', '.join(map(repr, unknown))}; known: {known}; nothing run")
    return tuple(s for s in STAGES if s in wanted)


@dataclass(frozen=True)
class MergeStage:
    """001 §6.2 merging as a pipeline stage: the shared implementation and its threshold."""

    merger: Merger
    threshold: float = 0.85
    by_default: bool = True  # MEMENTO_MERGE_ON_CONSOLIDATE: in a run that names no stages


@dataclass(frozen=True)
class ConfidencePrune:
    """001 §4.5: memories below `threshold` effective confidence are archived (soft-deleted) or deleted."""

    threshold: float = 0.05
    half_life_days: float = 30.0
    archive: bool = True


@dataclass(frozen=True)
class Retention:
    """004 §4.2 / §7: how long each memory system's memories are kept unused (None: without limit)."""

    working: timedelta | None = timedelta(hours=48)
    episodic: timedelta | None = timedelta(days=90)
    semantic: timedelta | None = None
    procedural: timedelta | None = None

    def cutoffs(self, now: datetime) -> dict[MemorySystem, datetime]:
        """{system: the time before which its memories, unused since, are past retention}."""
        limits = {
            MemorySystem.WORKING: self.working,
            MemorySystem.EPISODIC: self.episodic,
            MemorySystem.SEMANTIC: self.semantic,
            MemorySystem.PROCEDURAL: self.procedural,
        }
        return {system: now - limit for system, limit in limits.items() if limit}


class Consolidator:
    """Runs the stages in order; each stage is one call on the maintenance store (or the merger,
    or the embedding backfill) returning the ids it changed, or a count."""

    def __init__(
        self,
        config: MemoryConfig,
        store: Store,
        maintenance: MaintenanceStore,
        backfill: Backfill,
        clock: Callable[[], datetime],
        session_ttl: timedelta = timedelta(hours=24),
        observers: Observer | None = None,
        prune: ConfidencePrune | None = None,
        forget_retention: timedelta | None = None,
        retention: Retention | None = None,
        merge: MergeStage | None = None,
        pending: Pending | None = None,
        sleep: Sleep | None = None,
        reviews: Reviews | None = None,
    ) -> None:
        self.sleep = sleep  # 004 §4.3 (lifecycle/sleep.py); None: the stage counts nothing
        self.reviews = reviews  # 004 §4.2 spaced review (lifecycle/review.py)
        self.observers = observers or Observer()
        self.prune = prune or ConfidencePrune()
        self.retention = retention or Retention()
        self.config = config
        self.store = store
        self.maintenance = maintenance
        self.backfill = backfill
        self.pending = pending
        self.merge = merge
        self.clock = clock
        self.session_ttl = session_ttl
        self.forget_retention = forget_retention  # 004 §4.2: soft-forgotten memories kept this long (None: for ever)
        # 004 wm_buffer: ends idle sessions (summary, then expunge): (rows removed, summaries); None: expunge only
        self.end_sessions: Callable[[datetime, bool], tuple[list[str], int]] | None = None
        # The embedding outbox (memento.outbox): vectors of writes acknowledged before the run,
        # waited for (bounded) before any stage reads vectors; set by the service.
        self.settle_embeddings: Callable[[], object] | None = None

    @property
    def default_stages(self) -> tuple[str, ...]:
        """What a run that names no stages performs (`merged` only with a merger that is on by default)."""
        merging = self.merge is not None and self.merge.by_default
        return tuple(s for s in STAGES if s != "merged" or merging)

    def run(
        self,
        scope: AgentScope,
        progress: Progress | None = None,
        *,
        stages: Sequence[str] | None = None,
        dry_run: bool = False,
        id_limit: int = DEFAULT_ID_LIMIT,
    ) -> ConsolidateResult:
        """The chosen stages (every default one when None) in order for `scope`: per-stage counts
        and ids. A dry run changes nothing (observed as a run only when real)."""
        chosen = select_stages(stages, self.default_stages)
        if dry_run:
            return self._run(scope, chosen, progress, dry_run=True, id_limit=id_limit)
        started = time.perf_counter()
        outcome = "error"
        try:
            result = self._run(scope, chosen, progress, dry_run=False, id_limit=id_limit)
            outcome = "ok"
            return result
        finally:
            self.observers.consolidation(outcome, time.perf_counter() - started)

    def _steps(self, scope: AgentScope, now: datetime, dry_run: bool) -> dict[str, Callable[[], Any]]:
        """Each stage's call. A stage returns the ids it changed (list[str]), a count (int), or,
        for `contradictions`, the pairs it found."""
        cfg = self.config
        m = self.maintenance
        stale = cfg.staleThresholds
        special = ("procedure", "fact", "decision")

        def expire() -> list[str]:
            removed = [i for t in special for i in m.expire_cold(scope, t, (), now - timedelta(days=stale.for_type(t)))]
            return removed + m.expire_cold(scope, None, special, now - timedelta(days=stale.default))

        def purge() -> list[str]:
            retention = self.forget_retention
            return [] if retention is None else m.purge_forgotten(scope, now - retention)

        def merge() -> list[str]:
            return [] if self.merge is None else self.merge.merger.run(scope, self.merge.threshold, now)

        def backfill() -> list[str] | int:
            if self.pending is None:  # no way to list them: the count only (never in a dry run)
                return 0 if dry_run else self.backfill(scope, None)
            before = self.pending(scope)
            if dry_run or not before:
                return before  # what it would embed; the provider is not called
            self.backfill(scope, None)
            left = set(self.pending(scope))
            return [i for i in before if i not in left]

        return {
            # First: it judges each memory by the tier it has been in since the last run.
            "confidence_pruned": lambda: m.prune_low_confidence(
                scope, self.prune.threshold, self.prune.half_life_days, now, archive=self.prune.archive
            ),
            "hot_to_warm": lambda: m.demote(scope, TTLTier.HOT, TTLTier.WARM, now - timedelta(days=cfg.hotDays), None, now),
            "warm_to_cold": lambda: m.demote(
                scope,
                TTLTier.WARM,
                TTLTier.COLD,
                now - timedelta(days=cfg.warmInactiveDays),
                now - timedelta(days=cfg.warmInactiveDays),
                now,
            ),
            "expired": expire,
            "retention_expired": lambda: m.expire_retention(scope, self.retention.cutoffs(now), now),
            # Utility first: decay reads it, and a store's first run would otherwise decay nothing.
            "utility_recomputed": lambda: m.recompute_utility(scope, now, cfg.ranking.recencyHalfLifeDays),
            "decayed": lambda: m.decay_importance(scope, cfg.decayFactor, 1, 0.5, now - timedelta(days=cfg.hotDays)),
            "deduplicated": lambda: m.deduplicate(scope),
            "merged": merge,
            "contradictions": lambda: m.contradictions(scope),
            "forgotten_purged": purge,
            "orphan_links_pruned": lambda: m.prune_orphan_links(scope),
            # a dry run asks no language model: the extractive statement stands in (same counts)
            "sleep_consolidated": lambda: (
                self.sleep.run(scope, now, use_model=not dry_run) if self.sleep else {"sleep_consolidated": 0, "sleep_contradictions": 0}
            ),
            "reviews_scheduled": lambda: self.reviews.schedule(scope, now) if self.reviews else 0,
            "embeddings_backfilled": backfill,
            "working_memory_expired": lambda: self._end_sessions(now, dry_run),
        }

    def _end_sessions(self, now: datetime, dry_run: bool) -> list[str] | dict[str, Any]:
        """Idle sessions end: summarized, then expunged (summarize.py), or only expunged."""
        if self.end_sessions is None:
            return self.maintenance.expire_sessions(now - self.session_ttl)
        removed, summaries = self.end_sessions(now - self.session_ttl, dry_run)
        return {"working_memory_expired": removed, "working_memory_summarized": summaries}

    def _run(
        self, scope: AgentScope, chosen: tuple[str, ...], progress: Progress | None, *, dry_run: bool, id_limit: int
    ) -> ConsolidateResult:
        self.store.flush_access()  # every stage reads access statistics: settle the pending ones first (dry run too)
        if self.settle_embeddings is not None:  # the merged stage reads stored vectors: the writes' own first
            self.settle_embeddings()
        now = self.clock()
        started = time.perf_counter()
        steps = self._steps(scope, now, dry_run)
        result: dict[str, Any] = {"stages": [to_camel(s) for s in chosen], "dry_run": dry_run}
        changed: dict[str, StageChanges] = {}
        with self.store.rehearsal() if dry_run else nullcontext():
            for number, name in enumerate(chosen):
                if progress:
                    progress(number, len(chosen), name)
                value = steps[name]()
                if name == "contradictions":
                    result["contradictions"] = len(value)
                    result["contradiction_pairs"] = [FragmentPair(from_id=a, to_id=b) for a, b in value]
                elif isinstance(value, dict):  # a stage with several results (sleep, working memory's end)
                    for key, part in value.items():
                        if isinstance(part, list):  # its ids
                            result[key] = len(part)
                            ids = sorted(set(part))
                            changed[to_camel(key)] = StageChanges(ids=ids[:id_limit], truncated=len(ids) > id_limit)
                        else:
                            result[key] = int(part)
                elif isinstance(value, list):
                    result[name] = len(value)
                    ids = sorted(set(value))
                    changed[to_camel(name)] = StageChanges(ids=ids[:id_limit], truncated=len(ids) > id_limit)
                else:
                    result[name] = int(value)
            # what the run leaves (in a dry run: would leave), read before any rollback
            result["statistics"] = StoreStats.model_validate(self.store.stats(scope))
        result["changed"] = changed
        result["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 1)
        if progress:
            progress(len(chosen), len(chosen), "done")
        return ConsolidateResult.model_validate(result)
