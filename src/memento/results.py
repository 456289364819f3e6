"""The typed results of the service operations, shared by every face.

Python attributes are snake_case; on the wire every field name is camelCase (the casing of the
seed's parameters, e.g. `tokenBudget`, `isAnchor`), generated from the attribute name. Maps whose
keys are data (counts keyed by tier or type names, `metadata`, `originTrace`) keep their keys.
Every face serialises a result with `dump()` (JSON mode, by alias), and the MCP tools advertise
`json_schema()` as their outputSchema.

Optional fields declared with `Omitted` are left out of the output when they are None (e.g.
`message` of remember, `similarity` of a recall item); every other field is always present,
null included.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .models import FeedbackEvent, Fragment, FragmentType, MemorySystem, PrivacyScope, RelationType, Scope, TTLTier


def _is_none(value: Any) -> bool:
    return value is None


def Omitted(**kwargs: Any) -> Any:
    """An optional field that is absent from the output when None (not required in the schema)."""
    return Field(default=None, exclude_if=_is_none, **kwargs)


class Result(BaseModel):
    """Base of every result: snake_case attributes, camelCase on the wire, one dump path."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True, extra="forbid", frozen=True)

    def dump(self) -> dict[str, Any]:
        """The JSON-ready wire form: camelCase field names, enums and values as JSON."""
        return self.model_dump(by_alias=True, mode="json")

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema of `dump()`'s output (serialization mode, by alias)."""
        return cls.model_json_schema(by_alias=True, mode="serialization")


def wire_text(payload: Any) -> str:
    """A result's JSON as a face sends it (a tool result's text block): compact, UTF-8 kept."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


# ---------------------------------------------------------------- fragments


class FragmentView(Result):
    """One stored memory as every face shows it."""

    id: str
    content: str
    topic: str
    type: FragmentType
    keywords: list[str]
    importance: float
    ttl_tier: TTLTier
    is_anchor: bool
    source: str | None
    agent_id: str
    linked_to: list[str]
    access_count: int
    created_at: str  # ISO-8601, as Python writes it (e.g. 2025-01-02T03:04:05.678901+00:00)
    accessed_at: str | None
    estimated_tokens: int
    utility_score: float
    scope: Scope
    has_embedding: bool
    confidence: float
    tags: list[str]
    memory_system: MemorySystem
    pinned: bool
    privacy_scope: PrivacyScope
    context: str | None
    metadata: dict[str, Any]
    expires_at: str | None
    origin_trace: dict[str, Any] | None
    detail: str | None  # the full (masked) text when content was cut at 300 characters

    @classmethod
    def of(cls, f: Fragment) -> FragmentView:
        return cls(**_fragment_fields(f))

    def brief(self) -> dict[str, Any]:
        """The compact wire view every face returns by default: what a model needs to use the
        memory (docs/mcp.md, "Compact results"); `verbose` asks for every field."""
        out: dict[str, Any] = {"id": self.id, "type": self.type.value, "topic": self.topic, "content": self.content}
        if self.detail is not None:
            out["truncated"] = True  # the full text is in `detail` (verbose, or memory://fragments/{id})
        return out


def _fragment_fields(f: Fragment) -> dict[str, Any]:
    return {
        "id": f.id,
        "content": f.content,
        "topic": f.topic,
        "type": f.type,
        "keywords": list(f.keywords),
        "importance": round(f.importance, 4),
        "ttl_tier": f.ttl_tier,
        "is_anchor": f.is_anchor,
        "source": f.source,
        "agent_id": f.agent_id,
        "linked_to": list(f.linked_to),
        "access_count": f.access_count,
        "created_at": f.created_at.isoformat(),
        "accessed_at": f.accessed_at.isoformat() if f.accessed_at else None,
        "estimated_tokens": f.estimated_tokens,
        "utility_score": round(f.utility_score, 4),
        "scope": Scope.SESSION if f.session_id else Scope.PERMANENT,
        "has_embedding": f.has_embedding,
        "confidence": round(f.confidence, 4),
        "tags": list(f.tags),
        "memory_system": f.memory_system,
        "pinned": f.pinned,
        "privacy_scope": f.privacy_scope,
        "context": f.context,
        "metadata": dict(f.metadata),
        "expires_at": f.expires_at.isoformat() if f.expires_at else None,
        "origin_trace": f.origin_trace,
        "detail": f.detail,
    }


def views(fragments: list[Fragment]) -> list[FragmentView]:
    return [FragmentView.of(f) for f in fragments]


class Edge(Result):
    """A directed, typed edge between two fragments."""

    from_: str = Field(alias="from")
    to: str
    relation: RelationType


class FragmentPair(Result):
    from_id: str
    to_id: str


# ---------------------------------------------------------------- storage cluster


class RememberResult(Result):
    """The seed's `{success, id, created}`, whether it was embedded, and what was cut; the stored
    fragment is for the caller in-process (the CLI), not sent."""

    success: bool = True
    id: str
    created: bool = Field(description="false: identical content already existed; nothing new stored")
    fragment: FragmentView = Field(exclude=True)
    embedded: bool
    truncated: bool | None = Omitted(description="true: content was cut at 300 characters (the full text is kept as detail)")
    original_length: int | None = Omitted(description="characters of the content as given, when it was cut")
    message: str | None = Omitted()


class DerivedMemory(Result):
    """A memory an erasure changed because it carried the erased text or named an erased memory."""

    id: str
    action: str  # "merged text removed" (its version trail held text merged from an erased memory) | "reference removed"


class ErasureReceipt(Result):
    """The receipt of a hard forget (004 §5.1; docs/erasure.md): what was erased, where from,
    when, by whom; `contentDigest` is the SHA-256 of the erased texts (so they need not be kept)
    and `digest` the SHA-256 of this receipt's canonical JSON without `digest` itself."""

    receipt_id: str
    agent_id: str
    erased_at: str
    memory_ids: list[str]
    derived: list[DerivedMemory]
    locations: dict[str, int]  # place -> how many entries were removed (or 1/0: a step done or not)
    backend: str
    content_digest: str
    digest: str


class ForgetResult(Result):
    success: bool = True
    deleted: list[str]
    count: int
    kept: list[str] | None = Omitted(description="shared-pool fragments of the topic the caller may not change")
    message: str | None = Omitted()
    mode: str = "soft"  # soft (restorable) | hard (erased)
    restorable_until: str | None = Omitted(description="soft: restore works until then (ISO 8601); absent: kept until restored")
    receipt: ErasureReceipt | None = Omitted(description="hard: the erasure receipt (verify_erasure checks it)")


class RestoreResult(Result):
    """A soft-forgotten memory brought back."""

    success: bool = True
    id: str
    fragment: FragmentView


class ErasureCheck(Result):
    name: str  # digest | onFile | rows | versions | fullText | vectors | contentHashes | redis | ...
    ok: bool
    detail: str


class VerifyErasureResult(Result):
    """Whether an erasure receipt holds: every named check passed."""

    verified: bool
    receipt_id: str | None
    checks: list[ErasureCheck]


class ForgetPreview(Result):
    """What forget would delete: the target ids and the protected (permanent or anchored) ones."""

    ids: list[str]
    protected: list[str]


class LinkResult(Result):
    success: bool = True
    from_id: str
    to_id: str
    relation_type: RelationType


class PinResult(Result):
    """A pin or unpin: the memory's pin state now, and whether this call changed it."""

    success: bool = True
    id: str
    pinned: bool
    changed: bool


class AmendResult(Result):
    """An amendment in place (versionArchived), or a superseding fragment (supersededId, original)."""

    success: bool = True
    id: str
    fragment: FragmentView = Field(exclude=True)  # in-process callers only, like original
    version_archived: bool | None = Omitted()
    superseded_id: str | None = Omitted()
    original: FragmentView | None = Field(default=None, exclude=True)
    message: str | None = Omitted()


# ---------------------------------------------------------------- retrieval cluster


class RecallTiers(Result):
    """Candidates per tier; `semantic` is a count or why the tier did not run; `l1` the keyword
    index's verified matches or why it did not answer."""

    keywords: int
    text: int
    semantic: int | str
    l1: int | str | None = Omitted()


COVERAGE = "0-1: how likely the answer is among the results (docs/search.md); absent for a listing without a query"
NO_GOOD_MATCH = "true: coverage is below MEMENTO_COVERAGE_THRESHOLD; the results are probably not about the query"


class RecallItem(FragmentView):
    """A recalled fragment: ranked (score, matched) or a linked neighbour (linked, via)."""

    recall_reason: str
    score: float | None = Omitted()
    matched: list[str] | None = Omitted()
    similarity: float | None = Omitted()
    linked: bool | None = Omitted()
    via: Edge | None = Omitted()
    superseded_by: str | None = Omitted()  # the id of the memory that replaced this one
    feedback: dict[str, int] | None = Omitted()  # the caller's feedback on it, by event (verbose view)

    @classmethod
    def of_recalled(cls, f: Fragment, **extra: Any) -> RecallItem:
        return cls(**_fragment_fields(f), **extra)

    def compact(self) -> dict[str, Any]:
        """id, type, topic, content, score and why (and supersededBy when replaced)."""
        out = self.brief()
        if self.score is not None:
            out["score"] = self.score
        out["why"] = self.recall_reason
        if self.superseded_by is not None:
            out["supersededBy"] = self.superseded_by
        return out

    def wire(self, verbose: bool) -> dict[str, Any]:
        return self.dump() if verbose else self.compact()


class RecallResult(Result):
    """Recalled memories, compact unless `verbose` (which adds every field, tiers and searchMode);
    `totalTokens` is the whole result's size as sent, which `tokenBudget` bounds."""

    fragments: list[RecallItem]
    count: int
    total_tokens: int
    token_budget: int
    truncated: bool
    tiers: RecallTiers | None = Omitted()
    search_mode: str | None = Omitted()
    verbose: bool = Field(default=False, exclude=True)
    coverage: float | None = Omitted(description=COVERAGE)
    no_good_match: bool | None = Omitted(description=NO_GOOD_MATCH)
    coverage_features: dict[str, float] | None = Omitted(description="verbose: the features coverage was computed from")

    def dump(self) -> dict[str, Any]:
        out = super().dump()
        out["fragments"] = [f.wire(self.verbose) for f in self.fragments]
        return out


PREVIEW_CHARS = 80


def preview(text: str) -> str:
    """The start of a memory's text (at most PREVIEW_CHARS, an ellipsis when cut)."""
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1].rstrip() + "…"


class ReviewView(Result):
    """A due spaced review (004 §4.2): the memory to look at again, and its reviews so far."""

    id: str
    preview: str
    reviews: int


class ContextResult(Result):
    """Core and working memory, compact unless `verbose` (every field, and `rendered` markdown);
    `totalTokens` is the whole result's size as sent, which `tokenBudget` bounds."""

    core_memory: list[FragmentView]
    working_memory: list[FragmentView]
    total_tokens: int
    token_budget: int
    rendered: str | None = Omitted()
    reviews: list[ReviewView] | None = Omitted(description="due spaced reviews shown (004 §4.2); absent when none is due")
    verbose: bool = Field(default=False, exclude=True)

    def dump(self) -> dict[str, Any]:
        out = super().dump()
        if not self.verbose:
            out["coreMemory"] = [f.brief() for f in self.core_memory]
            out["workingMemory"] = [f.brief() for f in self.working_memory]
        return out


class NodeLinkage(Result):
    """A seed 003 linkage held by a node of the walk: to a memory or an item by id, to a file by path."""

    from_: str = Field(alias="from")
    type: str
    id: str | None = Omitted()
    path: str | None = Omitted()
    label: str | None = Omitted()


class GraphResult(Result):
    """The walk's start, nodes and edges; nodes compact unless `verbose`; `linkages`: the 003
    linkages its memories hold (absent when none does)."""

    start: FragmentView
    nodes: list[FragmentView]
    edges: list[Edge]
    linkages: list[NodeLinkage] | None = Omitted()
    verbose: bool = Field(default=False, exclude=True)

    def dump(self) -> dict[str, Any]:
        out = super().dump()
        if not self.verbose:
            out["start"] = self.start.brief()
            out["nodes"] = [f.brief() for f in self.nodes]
        return out


class TopicCount(Result):
    topic: str
    count: int


# ---------------------------------------------------------------- maintenance and telemetry


class ReflectedFragment(Result):
    id: str
    type: FragmentType
    created: bool


class ReflectResult(Result):
    success: bool = True
    task_feedback_id: int | None = Omitted()
    fragments: list[ReflectedFragment]
    count: int


class ToolFeedbackResult(Result):
    success: bool = True
    id: int


class StoreStats(Result):
    """The store's aggregate counts; `byTier` and `byType` are keyed by tier and type names."""

    total: int
    working_memory: int
    by_tier: dict[str, int]
    by_type: dict[str, int]
    anchors: int
    links: int
    embedded: int
    indexed: int | None = Omitted(description="vectors in this process's index (SQLite)")
    embedding_coverage: float
    index_coverage: float | None = Omitted()
    mean_utility_score: float | None
    mean_importance: float | None
    feedback: dict[str, int] | None = Omitted(description="the caller's feedback events by kind (004)")


class ConsolidationRunView(Result):
    """One recorded consolidation run (docs/lifecycle.md "Scheduling"). `agentId`: the namespace
    maintained (`wholeStore`: every namespace); `stages`: per-stage counts of an ok run."""

    id: str
    trigger: str  # interval | inserts | startup | manual
    agent_id: str
    whole_store: bool
    started_at: str
    finished_at: str | None
    outcome: str  # running | ok | error | skipped
    stages: dict[str, int | float] | None
    error: str | None = Omitted(description="why it failed (or was skipped)")
    replica: str | None = Omitted(description="host:pid that ran it")


class ConsolidationRunsResult(Result):
    """Recent consolidation runs, newest first."""

    runs: list[ConsolidationRunView]
    count: int


class ForgetCandidate(Result):
    """A memory the lifecycle would let go next (004 §4.2's soft-delete candidate queue)."""

    id: str
    preview: str
    utility_score: float
    last_used: str  # ISO-8601: the latest of creation and last access


class EvaluatorStats(Result):
    """The evaluator's queue for the caller (000 §7): jobs by status, open merge proposals and
    model tokens used today (UTC)."""

    queued: int
    running: int
    done: int
    dead: int
    proposals: int
    tokens_today: int


class StatsResult(StoreStats):
    search_mode: str
    embedding_model: str | None
    last_consolidation: ConsolidationRunView | None = Omitted(description="the last finished consolidation run over this namespace")
    forget_candidates: list[ForgetCandidate] | None = Omitted(
        description="004 §4.2: low-utility memories unused for 30 days, not pinned, anchored, keyed or permanent (at most 10)"
    )
    evaluator: EvaluatorStats | None = Omitted(description="the evaluator's queue, proposals and tokens today")
    embeddings_pending: int | None = Omitted(
        description="memories stored without a vector of the current model yet (the embedding worker's queue, working memory apart)"
    )


class StageChanges(Result):
    """The ids one consolidation stage changed (or, in a dry run, would change), sorted and capped."""

    ids: list[str]
    truncated: bool  # more were changed than listed (20 per stage)


class ConsolidateResult(Result):
    """Per-stage counts of one consolidation run. A stage the run did not perform (`stages`) is
    null, never 0; `changed` lists the ids of every performed stage that changes memories."""

    stages: list[str] = Field(default_factory=list)  # the stages performed, in order (camelCase)
    dry_run: bool = False  # a rehearsal: the counts and ids of what a real run would do; nothing changed
    hot_to_warm: int | None = None
    warm_to_cold: int | None = None
    expired: int | None = None
    confidence_pruned: int | None = None  # below the effective-confidence floor (001 §4.5): archived or deleted
    decayed: int | None = None
    deduplicated: int | None = None
    merged: int | None = None  # absorbed into a cluster's primary (001 §6.2), their text in its version trail
    contradictions: int | None = None
    contradiction_pairs: list[FragmentPair] | None = None
    orphan_links_pruned: int | None = None
    utility_recomputed: int | None = None
    embeddings_backfilled: int | None = None
    working_memory_expired: int | None = None
    working_memory_summarized: int | None = None  # episodic summaries the idle sessions' ends left (docs/lifecycle.md)
    forgotten_purged: int | None = None  # soft-forgotten longer than MEMENTO_FORGET_RETENTION_DAYS: deleted for good
    retention_expired: int | None = None  # past its memory system's retention (004 §4.2): archived, restorable
    sleep_consolidated: int | None = None  # 004 §4.3: semantic memories made from clusters of recent episodes
    sleep_contradictions: int | None = None  # contradicts links added between episodes of a cluster (not integrated)
    reviews_scheduled: int | None = None  # 004 §4.2: review cards made, or moved on by a use since their last review
    changed: dict[str, StageChanges] = Field(default_factory=dict)  # by stage (camelCase); links as fromId>toId
    statistics: StoreStats
    elapsed_ms: float


class FeedbackResult(Result):
    """The recorded feedback event, and the caller's feedback on the memory so far, by event."""

    success: bool = True
    id: int
    memory_id: str
    event: FeedbackEvent
    counts: dict[str, int]


class SummarizeThreadResult(Result):
    """004 §5.1 summarize_thread: the episodic memory a session's working memory became."""

    success: bool = True
    id: str
    session_id: str
    item_count: int  # working-memory items the summary covers
    removed: int  # items taken out of working memory (keep: false)
    method: Literal["extractive", "llm", "sampling"]
    fallback: str | None = Omitted(description="Why a model's answer was not used.")
    summary: str  # the whole text (the memory's content is its first 300 characters)
