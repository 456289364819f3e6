"""`GET /ui/latency`: recall and embedding latency of this server process, from its metrics (the
histograms /metrics exports), for the dashboard's analytics page. Admin sessions only, as /metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from prometheus_client import Histogram

    from ..app import App


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Latency(Out):
    """One histogram of this process since it started: calls, mean, and the bucket bounds the median
    and the 95th percentile fall under (the metrics keep buckets, not every timing)."""

    name: str
    count: int
    mean_ms: float | None
    p50_under_ms: float | None = Field(description="The median is at most this (the upper bound of its bucket).")
    p95_under_ms: float | None = Field(description="The 95th percentile is at most this.")


class LatencyReport(Out):
    """Recall and embedding latency from this process's metrics (what /metrics exports)."""

    latencies: list[Latency]


def _under(buckets: list[tuple[float, float]], count: float, share: float) -> float | None:
    for bound, cumulative in buckets:
        if cumulative >= share * count:
            return None if bound == float("inf") else round(bound * 1000, 3)
    return None


def latencies(histogram: Histogram, name: str) -> list[Latency]:
    """Each labelled series of `histogram`, summarised."""
    series: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for metric in histogram.collect():
        for sample in metric.samples:
            key = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
            entry = series.setdefault(key, {"buckets": [], "count": 0.0, "sum": 0.0})
            if sample.name.endswith("_bucket"):
                entry["buckets"].append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_count"):
                entry["count"] = sample.value
            elif sample.name.endswith("_sum"):
                entry["sum"] = sample.value
    found = []
    for key, entry in sorted(series.items()):
        count, buckets = entry["count"], sorted(entry["buckets"])
        label = name + "".join(f" ({v})" for _, v in key)
        found.append(
            Latency(
                name=label,
                count=int(count),
                mean_ms=round(entry["sum"] / count * 1000, 3) if count else None,
                p50_under_ms=_under(buckets, count, 0.5) if count else None,
                p95_under_ms=_under(buckets, count, 0.95) if count else None,
            )
        )
    return found


def report(app: App) -> LatencyReport:
    """The recall histogram and the embedding one (per kind) of `app`'s process."""
    from ..ops.metrics import ops_state

    state = ops_state(app)
    return LatencyReport(latencies=latencies(state.recall_duration, "recall") + latencies(state.embedding_duration, "embedding"))
