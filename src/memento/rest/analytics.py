"""001 §8.4: `/api/analytics/*` — overview, growth per day/week/month, types, tags and the effective
confidence histogram of the memories the caller sees (computed in SQL by the AnalyticsStore)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from ..access import call_scope
from ..models import FragmentType, MemorySystem, TTLTier
from ..service import MemoryService
from ..storage.protocol import AnalyticsStore
from .routing import Ctx, json_response, run

LOW_CONFIDENCE = 0.3  # an overview's "low confidence": effective confidence below this
BUCKETS = 10


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Overview(Out):
    """Memory statistics."""

    total_memories: int
    total_entities: int
    total_relations: int
    memories_by_type: dict[str, int] = Field(description="Every memory type, with 0 for the absent ones.")
    average_confidence: float | None = Field(description="Mean stored confidence (null: no memories).")
    average_effective_confidence: float | None = Field(description="Mean confidence after decay, now.")
    low_confidence_count: int = Field(description="Memories whose effective confidence is below low_confidence_below.")
    low_confidence_below: float
    oldest_memory: datetime | None
    newest_memory: datetime | None
    half_life_days: float


class GrowthPoint(Out):
    period_start: str = Field(description="First day of the period (ISO date, UTC; weeks start on Monday).")
    count: int = Field(description="Memories created in the period.")


class Growth(Out):
    """New memories per period, oldest first (periods without any are left out)."""

    period: Literal["day", "week", "month"]
    points: list[GrowthPoint]
    total: int = Field(description="Memories in the periods shown.")


class TypeShare(Out):
    memory_type: str
    count: int
    share: float = Field(description="Fraction of all memories, 0-1.")


class TypeDistribution(Out):
    total: int
    types: list[TypeShare] = Field(description="Every memory type, most frequent first.")


class TagCount(Out):
    tag: str
    count: int


class TagPage(Out):
    items: list[TagCount] = Field(description="Tags by frequency, most used first.")
    total: int = Field(description="Distinct tags in all.")
    limit: int
    offset: int


class Bucket(Out):
    lower: float
    upper: float
    count: int


class ConfidenceHistogram(Out):
    """Effective confidence (stored confidence halved every half_life_days since the last access) in 10 bins."""

    buckets: list[Bucket] = Field(description="[0, 0.1), [0.1, 0.2), ... [0.9, 1.0].")
    total: int
    half_life_days: float


class Breakdown(Out):
    """Memories (working memory apart) per TTL tier, per memory system and pinned or not; every value listed, 0 for the absent."""

    tiers: dict[str, int]
    memory_systems: dict[str, int]
    pinned: dict[str, int] = Field(description='{"true": n, "false": m}.')


def router(store: AnalyticsStore, service: MemoryService) -> APIRouter:
    """The analytics routes over `store`, measured at the service's clock."""
    api = APIRouter(prefix="/analytics", tags=["analytics"])
    settings = service.settings

    @api.get("/overview", response_model=Overview, summary="Memory statistics")
    async def overview(ctx: Ctx) -> object:
        def compute() -> Overview:
            scope = call_scope(None, ctx)
            now = service.clock()
            o = store.memory_overview(scope, now, settings.confidence_half_life_days, LOW_CONFIDENCE)
            types = store.type_counts(scope)
            return Overview(
                total_memories=o.total_memories,
                total_entities=o.total_entities,
                total_relations=o.total_relations,
                memories_by_type={t.value: types.get(t.value, 0) for t in FragmentType},
                average_confidence=_round(o.average_confidence),
                average_effective_confidence=_round(o.average_effective_confidence),
                low_confidence_count=o.low_confidence_count,
                low_confidence_below=LOW_CONFIDENCE,
                oldest_memory=o.oldest_memory,
                newest_memory=o.newest_memory,
                half_life_days=settings.confidence_half_life_days,
            )

        return json_response(await run(compute))

    @api.get("/breakdown", response_model=Breakdown, summary="Counts by tier, memory system and pin")
    async def breakdown(ctx: Ctx) -> object:
        def compute() -> Breakdown:
            scope = call_scope(None, ctx)
            tiers, systems, pins = (store.field_counts(scope, name) for name in ("ttl_tier", "memory_system", "pinned"))
            return Breakdown(
                tiers={t.value: tiers.get(t.value, 0) for t in TTLTier},
                memory_systems={m.value: systems.get(m.value, 0) for m in MemorySystem},
                pinned={"true": pins.get("true", 0), "false": pins.get("false", 0)},
            )

        return json_response(await run(compute))

    @api.get("/growth", response_model=Growth, summary="Growth over time")
    async def growth(
        ctx: Ctx,
        period: Annotated[Literal["day", "week", "month"], Query(description="Bucket size.")] = "day",
        limit: Annotated[int, Query(ge=1, le=1000, description="The newest this many periods.")] = 90,
    ) -> object:
        rows = await run(store.memory_growth, call_scope(None, ctx), period, limit)
        points = [GrowthPoint(period_start=p, count=n) for p, n in rows]
        return json_response(Growth(period=period, points=points, total=sum(p.count for p in points)))

    @api.get("/types", response_model=TypeDistribution, summary="Distribution by memory type")
    async def types(ctx: Ctx) -> object:
        counts = await run(store.type_counts, call_scope(None, ctx))
        total = sum(counts.values())
        every = {t.value: counts.get(t.value, 0) for t in FragmentType} | counts
        shares = [TypeShare(memory_type=t, count=n, share=round(n / total, 4) if total else 0.0) for t, n in every.items()]
        shares.sort(key=lambda s: (-s.count, s.memory_type))
        return json_response(TypeDistribution(total=total, types=shares))

    @api.get("/tags", response_model=TagPage, summary="Tag frequency")
    async def tags(
        ctx: Ctx,
        limit: Annotated[int, Query(ge=1, le=100, description="Tags per page.")] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000, description="Skip this many tags.")] = 0,
    ) -> object:
        rows, total = await run(store.tag_counts, call_scope(None, ctx), limit, offset)
        return json_response(TagPage(items=[TagCount(tag=t, count=n) for t, n in rows], total=total, limit=limit, offset=offset))

    @api.get("/confidence", response_model=ConfidenceHistogram, summary="Confidence distribution histogram")
    async def confidence(ctx: Ctx) -> object:
        def compute() -> list[int]:
            return store.confidence_histogram(call_scope(None, ctx), service.clock(), settings.confidence_half_life_days, BUCKETS)

        counts = await run(compute)
        buckets = [Bucket(lower=round(i / BUCKETS, 2), upper=round((i + 1) / BUCKETS, 2), count=n) for i, n in enumerate(counts)]
        return json_response(ConfidenceHistogram(buckets=buckets, total=sum(counts), half_life_days=settings.confidence_half_life_days))

    return api


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
