"""The consolidation pipeline of 000 §8 (and 004 §4.2's retention), returning per-stage counts.
Anchored and pinned memories are exempt."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..models import AgentScope, MemorySystem, TTLTier
from ..observe import Observer
from ..results import ConsolidateResult, FragmentPair, StoreStats
from ..settings import MemoryConfig
from ..storage.protocol import MaintenanceStore, Store

log = logging.getLogger(__name__)

Backfill = Callable[[AgentScope, int | None], int]
Progress = Callable[[int, int, str], None]

STAGES = (
    "confidence_pruned",
    "hot_to_warm",
    "warm_to_cold",
    "expired",
    "retention_expired",
    "utility_recomputed",
    "decayed",
    "deduplicated",
    "contradictions",
    "forgotten_purged",
    "orphan_links_pruned",
    "embeddings_backfilled",
    "statistics",
)


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
    """Runs the stages in order; each stage is one call on the maintenance store."""

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
    ) -> None:
        self.observers = observers or Observer()
        self.prune = prune or ConfidencePrune()
        self.retention = retention or Retention()
        self.config = config
        self.store = store
        self.maintenance = maintenance
        self.backfill = backfill
        self.clock = clock
        self.session_ttl = session_ttl
        self.forget_retention = forget_retention  # 004 §4.2: soft-forgotten memories kept this long (None: for ever)
        # 004 wm_buffer: ends idle sessions (summary, then expunge): (rows removed, summaries); None: expunge only
        self.end_sessions: Callable[[datetime], tuple[int, int]] | None = None

    def run(self, scope: AgentScope, progress: Progress | None = None) -> ConsolidateResult:
        """Every stage in order for `scope`; per-stage counts (observed as a consolidation run)."""
        started = time.perf_counter()
        outcome = "error"
        try:
            result = self._run(scope, progress)
            outcome = "ok"
            return result
        finally:
            self.observers.consolidation(outcome, time.perf_counter() - started)

    def _run(self, scope: AgentScope, progress: Progress | None) -> ConsolidateResult:
        self.store.flush_access()  # every stage reads access statistics: settle the pending ones first
        now = self.clock()
        cfg = self.config
        m = self.maintenance
        started = time.perf_counter()
        stale = cfg.staleThresholds
        special = ("procedure", "fact", "decision")

        def expire() -> int:
            removed = sum(m.expire_cold(scope, t, (), now - timedelta(days=stale.for_type(t))) for t in special)
            return removed + m.expire_cold(scope, None, special, now - timedelta(days=stale.default))

        def purge() -> int:
            retention = self.forget_retention
            return 0 if retention is None else m.purge_forgotten(scope, now - retention)

        steps: list[tuple[str, Callable[[], Any]]] = [
            # First: it judges each memory by the tier it has been in since the last run.
            (
                "confidence_pruned",
                lambda: m.prune_low_confidence(scope, self.prune.threshold, self.prune.half_life_days, now, archive=self.prune.archive),
            ),
            ("hot_to_warm", lambda: m.demote(scope, TTLTier.HOT, TTLTier.WARM, now - timedelta(days=cfg.hotDays), None, now)),
            (
                "warm_to_cold",
                lambda: m.demote(
                    scope,
                    TTLTier.WARM,
                    TTLTier.COLD,
                    now - timedelta(days=cfg.warmInactiveDays),
                    now - timedelta(days=cfg.warmInactiveDays),
                    now,
                ),
            ),
            ("expired", expire),
            ("retention_expired", lambda: m.expire_retention(scope, self.retention.cutoffs(now), now)),
            # Utility first: decay reads it, and a store's first run would otherwise decay nothing.
            ("utility_recomputed", lambda: m.recompute_utility(scope, now, cfg.ranking.recencyHalfLifeDays)),
            ("decayed", lambda: m.decay_importance(scope, cfg.decayFactor, 1, 0.5, now - timedelta(days=cfg.hotDays))),
            ("deduplicated", lambda: m.deduplicate(scope)),
            ("contradictions", lambda: m.contradictions(scope)),
            ("forgotten_purged", purge),
            ("orphan_links_pruned", lambda: m.prune_orphan_links(scope)),
            ("embeddings_backfilled", lambda: self.backfill(scope, None)),
        ]
        result: dict[str, Any] = {}
        for number, (name, step) in enumerate(steps, start=1):
            if progress:
                progress(number - 1, len(STAGES), name)
            value = step()
            if name == "contradictions":
                result["contradictions"] = len(value)
                result["contradiction_pairs"] = [FragmentPair(from_id=a, to_id=b) for a, b in value]
            else:
                result[name] = int(value)
        if self.end_sessions is not None:  # summarized, then expunged (summarize.py)
            result["working_memory_expired"], result["working_memory_summarized"] = self.end_sessions(now - self.session_ttl)
        else:
            result["working_memory_expired"] = m.expire_sessions(now - self.session_ttl)
        result["statistics"] = StoreStats.model_validate(self.store.stats(scope))
        result["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 1)
        if progress:
            progress(len(STAGES), len(STAGES), "done")
        return ConsolidateResult.model_validate(result)
