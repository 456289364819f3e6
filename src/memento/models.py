"""Value types shared by every layer, and the typed inputs of the eleven operations.

The operation inputs use the parameter names of seed 000 §6 so that MCP schemas generated from
them match the specification; every input model forbids unknown fields and coerces nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, Strict, StrictBool, StringConstraints, WithJsonSchema, field_validator, model_validator

from .fields import MAX_INPUT_CHARS as MAX_INPUT_CHARS
from .fields import MAX_LIST_ITEMS as MAX_LIST_ITEMS
from .fields import AgentId, Budget, Content, FragmentId, Keyword, OperationInput, ShortText, Tag, Topic, Unit, aware, non_blank, small_json
from .graph import SearchMode


class FragmentType(StrEnum):
    FACT = "fact"
    DECISION = "decision"
    ERROR = "error"
    PREFERENCE = "preference"
    PROCEDURE = "procedure"
    RELATION = "relation"
    EPISODE = "episode"
    OBSERVATION = "observation"  # 001 §2.1: the entity face's default type
    LEARNING = "learning"
    PATTERN = "pattern"


class MemorySystem(StrEnum):
    """004 §3: which human memory system a memory belongs to."""

    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class PrivacyScope(StrEnum):
    """004 §3: who may be shown a memory beyond its agent (recorded; isolation is per agent)."""

    PRIVATE = "private"
    TEAM = "team"
    PUBLIC = "public"


_SYSTEM_OF_TYPE: dict[str, MemorySystem] = {
    "episode": MemorySystem.EPISODIC,
    "error": MemorySystem.EPISODIC,
    "procedure": MemorySystem.PROCEDURAL,
}


# 004 §5.1: remember's `type` may name a memory system; each maps onto the fragment type it
# stores as (and the system is recorded as given).
TYPE_OF_SYSTEM: dict[MemorySystem, FragmentType] = {
    MemorySystem.EPISODIC: FragmentType.EPISODE,
    MemorySystem.SEMANTIC: FragmentType.FACT,
    MemorySystem.PROCEDURAL: FragmentType.PROCEDURE,
    MemorySystem.WORKING: FragmentType.OBSERVATION,
}


def memory_system_for(type_: FragmentType, *, working: bool = False) -> MemorySystem:
    """The memory system a memory gets when none is given: working memory (session scope) is
    `working`; events (episode, error) are `episodic`; procedures `procedural`; the rest `semantic`."""
    if working:
        return MemorySystem.WORKING
    return _SYSTEM_OF_TYPE.get(type_.value, MemorySystem.SEMANTIC)


def privacy_for(agent_id: str, session_id: str | None, given: PrivacyScope | None) -> PrivacyScope:
    """The privacy scope a new memory gets when none is given: the shared pool's (non-session)
    rows are there to be shared, so `team`; every other row `private` (docs/privacy.md)."""
    if given is not None:
        return given
    return PrivacyScope.TEAM if agent_id == DEFAULT_AGENT and session_id is None else PrivacyScope.PRIVATE


KIND_OR_SYSTEM = [*(t.value for t in FragmentType), *(m.value for m in MemorySystem)]


class TTLTier(StrEnum):
    HOT = "hot"
    WARM = "warm"
    COLD = "cold"
    PERMANENT = "permanent"


class RelationType(StrEnum):
    RELATED = "related"
    CAUSED_BY = "caused_by"
    RESOLVED_BY = "resolved_by"
    PART_OF = "part_of"
    CONTRADICTS = "contradicts"
    SUPERSEDED_BY = "superseded_by"
    DERIVED_FROM = "derived_from"  # 004 §3: a memory drawn from another (sleep consolidation's semantic memory from its episodes)
    DUPLICATES = "duplicates"  # 004 §3: says the same as another


class Scope(StrEnum):
    PERMANENT = "permanent"
    SESSION = "session"


DEFAULT_AGENT = "default"
MAINTENANCE_AGENTS = frozenset({"system", "admin"})


class PoolWrites(StrEnum):
    """What a scope may change in the shared `default` pool (MEMENTO_SHARED_POOL)."""

    NONE = "none"  # read only: an agent credential under `read`
    UNANCHORED = "unanchored"  # non-anchored permanent fragments: an agent credential under `write`
    ALL = "all"  # everything: admin principals


@dataclass(frozen=True)
class AgentScope:
    """Whose fragments an operation may see; writes go to `agent_id`.

    Session-scoped rows (working memory) are visible only in their own namespace (or to the
    maintenance scope), never through the shared pool. `pool_writes` limits what the scope may
    change among the pool's fragments; stores check it again under every UPDATE and DELETE.
    """

    agent_id: str = DEFAULT_AGENT
    pool_writes: PoolWrites = PoolWrites.ALL

    @property
    def is_maintenance(self) -> bool:
        return self.agent_id in MAINTENANCE_AGENTS

    def visible_agents(self) -> tuple[str, ...] | None:
        """Agents whose rows are visible (000 §3.6); None means all (maintenance scope)."""
        if self.is_maintenance:
            return None
        if self.agent_id == DEFAULT_AGENT:
            return (DEFAULT_AGENT,)
        return (self.agent_id, DEFAULT_AGENT)

    def may_change(self, fragment: Fragment) -> bool:
        """Whether this scope may amend, link from or delete `fragment` (one it can see)."""
        if fragment.agent_id != DEFAULT_AGENT:
            return True
        return self.may_write_pool(anchored=fragment.is_anchor, working=fragment.session_id is not None)

    def may_write_pool(self, *, anchored: bool, working: bool = False) -> bool:
        """Whether this scope may add or change a pool fragment that is (or becomes) so."""
        if self.is_maintenance or self.pool_writes is PoolWrites.ALL:
            return True
        return self.pool_writes is PoolWrites.UNANCHORED and not anchored and not working

    def pool_refusal(self, ids: list[str]) -> str:
        """The Forbidden message for pool fragments this scope may not change."""
        listed = ", ".join(ids[:5])
        if self.pool_writes is PoolWrites.NONE:
            rule = "MEMENTO_SHARED_POOL=read: agent credentials only read the shared 'default' pool"
        else:
            rule = "anchored fragments of the shared 'default' pool are changed by admin credentials only"
        return f"{rule} ({len(ids)} fragment(s): {listed}); nothing changed" if ids else f"{rule}; nothing changed"


def session_refusal(session_id: str) -> str:
    """The Forbidden message for a session id that belongs to another namespace."""
    return f"session {session_id!r} belongs to another namespace; use your own session id (nothing changed)"


@dataclass
class Fragment:
    """One stored memory."""

    id: str
    content: str
    topic: str
    type: FragmentType
    keywords: list[str]
    importance: float
    content_hash: str
    agent_id: str
    ttl_tier: TTLTier
    created_at: datetime
    source: str | None = None
    linked_to: list[str] = field(default_factory=list)
    access_count: int = 0
    accessed_at: datetime | None = None
    estimated_tokens: int = 0
    utility_score: float = 1.0
    verified_at: datetime | None = None
    is_anchor: bool = False
    session_id: str | None = None
    has_embedding: bool = False
    seq: int = 0
    confidence: float = 1.0
    tags: list[str] = field(default_factory=list)
    context: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    expires_at: datetime | None = None
    pinned: bool = False
    memory_system: MemorySystem = MemorySystem.SEMANTIC
    privacy_scope: PrivacyScope = PrivacyScope.PRIVATE
    origin_trace: dict[str, Any] | None = None
    deleted_at: datetime | None = None
    detail: str | None = None  # the full (masked) text when content was cut at 300 characters
    memory_key: str | None = None  # 002: the key of a keyed memory (unique per agent and scope)
    client_embedding: bytes | None = None  # 002: the agent's own vector of it (float32, any dimension)
    judged_utility: float | None = None  # 000 §7: the evaluator's last judgement (None before one)

    def is_live(self, now: datetime) -> bool:
        """Neither soft-deleted nor past its expiry (a pinned memory never expires): what every read may show."""
        return self.deleted_at is None and (self.expires_at is None or self.expires_at > now or self.pinned)


@dataclass(frozen=True)
class RecordFields:
    """The fields every face shares beyond 000's (001 §2.1, 003, 004 §3), already validated.

    `memory_system` None means "derive from the type" (see memory_system_for)."""

    tags: tuple[str, ...] = ()
    confidence: float = 1.0
    context: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    expires_at: datetime | None = None
    pinned: bool = False
    memory_system: MemorySystem | None = None
    privacy_scope: PrivacyScope | None = None  # None: by namespace (see privacy_for)
    origin_trace: dict[str, Any] | None = None
    detail: str | None = None  # the full (masked) text when content was cut; set by the factory
    memory_key: str | None = None  # 002: a keyed memory (exempt from the content-hash dedupe)
    client_embedding: bytes | None = None  # 002: the agent's own vector (float32 bytes)


@dataclass(frozen=True)
class Draft:
    """A fragment ready to be stored (everything derived, nothing persisted yet)."""

    id: str
    content: str
    content_hash: str
    topic: str
    type: FragmentType
    keywords: list[str]
    importance: float
    ttl_tier: TTLTier
    estimated_tokens: int
    is_anchor: bool
    source: str | None
    created_at: datetime
    record: RecordFields = field(default_factory=RecordFields)
    entered_at: datetime | None = None  # when it entered its TTL tier (now); None: its created_at


@dataclass(frozen=True)
class Link:
    from_id: str
    to_id: str
    relation_type: RelationType
    created_at: datetime


# ---------------------------------------------------------------- operation inputs


AGENT_ID = "Namespace."
RECORD = "More record fields: confidence, context, metadata, expiresAt, pinned, memorySystem, privacyScope, originTrace."


class RecordInput(OperationInput):
    """The shared-record fields beyond seed 000's (001 confidence, 003 expiry, 004 pin, memory
    systems, privacy and provenance). On remember, an omitted one gets its default; on amend, an
    omitted one is left as it is."""

    confidence: Unit | None = Field(default=None, description="0-1 confidence in the memory (default 1).")
    context: ShortText | None = Field(default=None, description="The situation it came from.")
    metadata: dict[str, Any] | None = Field(default=None, description="Free-form JSON object.")
    expiresAt: datetime | None = Field(default=None, strict=False, description="Not recalled after this time.")
    pinned: StrictBool | None = Field(default=None, description="Kept by every lifecycle stage.")
    memorySystem: MemorySystem | None = Field(default=None, description="Derived from the type when omitted.")
    privacyScope: PrivacyScope | None = Field(default=None, description="Who may see it (default private).")
    originTrace: dict[str, Any] | None = Field(default=None, description="Free-form JSON: what it was derived from.")

    _json_small = field_validator("metadata", "originTrace")(small_json)
    _times_aware = field_validator("expiresAt")(aware)


VERBOSE = "All fields."


class RememberInput(OperationInput):
    """Store one typed knowledge fragment."""

    content: Content = Field(description="The knowledge (cut at 300 chars, full text kept; PII masked).")
    topic: Topic = Field(description="Category.")
    type: Annotated[FragmentType | MemorySystem, WithJsonSchema({"type": "string", "enum": KIND_OR_SYSTEM})] = Field(
        description="Kind, or a memory system (episodic: an episode, semantic: a fact)."
    )
    keywords: list[Keyword] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Keywords (default: extracted).")
    importance: Unit | None = Field(default=None, description="0-1 (default: by type).")
    source: ShortText | None = Field(default=None, description="Provenance.")
    linkedTo: list[FragmentId] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Ids to link.")
    scope: Scope = Field(default=Scope.PERMANENT, description="session: dropped at end.")
    isAnchor: StrictBool = Field(default=False, description="Never decays or expires.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)
    sessionId: ShortText | None = Field(default=None, description="Session for scope=session.")
    createdAt: datetime | None = Field(default=None, strict=False, description="Creation time (imports).")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Tags, e.g. project:x.")
    privacyScope: PrivacyScope | None = Field(default=None, description="private (default); team/public: in the shared pool.")
    record: RecordInput | None = Field(default=None, description=RECORD, json_schema_extra={"collapse": True})

    _content_not_blank = field_validator("content")(non_blank)
    _times_aware = field_validator("createdAt")(aware)

    @model_validator(mode="after")
    def _one_privacy(self) -> RememberInput:
        given = self.record.privacyScope if self.record else None
        if given is not None and self.privacyScope is not None and given is not self.privacyScope:
            raise ValueError("privacyScope and record.privacyScope disagree: give one")
        system = self.type if isinstance(self.type, MemorySystem) else None
        chosen = self.record.memorySystem if self.record else None
        if system is not None and chosen is not None and chosen is not system:
            raise ValueError(f"type {system.value!r} and record.memorySystem {chosen.value!r} disagree: give one")
        return self

    @property
    def fragment_type(self) -> FragmentType:
        """The fragment type stored: the given kind, or the one a memory system maps onto."""
        return TYPE_OF_SYSTEM[self.type] if isinstance(self.type, MemorySystem) else self.type

    @property
    def privacy(self) -> PrivacyScope | None:
        """The privacy scope asked for (top level or in record), None when not given."""
        return self.privacyScope or (self.record.privacyScope if self.record else None)

    def record_fields(self) -> RecordFields:
        """The shared-record fields of this input (privacy as given: the service settles it)."""
        r = self.record or RecordInput()
        system = self.type if isinstance(self.type, MemorySystem) else None
        return RecordFields(
            tags=tuple(dict.fromkeys(self.tags or ())),
            confidence=1.0 if r.confidence is None else r.confidence,
            context=r.context,
            metadata=dict(r.metadata or {}),
            expires_at=r.expiresAt,
            pinned=bool(r.pinned),
            memory_system=system or r.memorySystem,
            privacy_scope=self.privacy,
            origin_trace=r.originTrace,
        )


class RecallFilters(OperationInput):
    """004 §5.1 recall filters (each narrows; all apply together)."""

    type: list[MemorySystem | FragmentType] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Systems or kinds (any).")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Has every tag.")
    projectId: ShortText | None = Field(default=None, description="Tagged project:<id>.")
    timeFrom: datetime | None = Field(default=None, strict=False, description="Created at or after.")
    timeTo: datetime | None = Field(default=None, strict=False, description="Created at or before.")
    agent: AgentId | None = Field(default=None, description="Namespace (as agentId).")

    _times_aware = field_validator("timeFrom", "timeTo")(aware)

    @model_validator(mode="after")
    def _window(self) -> RecallFilters:
        if self.timeFrom is not None and self.timeTo is not None and self.timeFrom > self.timeTo:
            raise ValueError("timeFrom is after timeTo")
        return self


class RecallInput(OperationInput):
    """Find fragments by keywords, natural-language text, topic and type."""

    text: Content | None = Field(default=None, description="Query text.")
    query: Content | None = Field(default=None, description="Same as text.")
    filters: RecallFilters | None = Field(
        default=None, description="{type: [system|kind], tags, projectId, timeFrom, timeTo, agent}", json_schema_extra={"collapse": True}
    )
    keywords: list[Keyword] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Match any.")
    topic: Topic | None = Field(default=None, description="Only this topic.")
    type: FragmentType | None = Field(default=None, description="Only this type.")
    tokenBudget: Budget = Field(default=1000, description="Result token cap.")
    limit: Annotated[int, Strict(), Field(ge=1, le=200)] = Field(default=20, description="Most memories, before links.")
    includeLinks: StrictBool = Field(default=True, description="Add linked memories.")
    linkRelationType: RelationType | None = Field(default=None, description="Only this link type.")
    threshold: Unit | None = Field(default=None, description="Min similarity, 0-1.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Has every tag.")
    tagsAny: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Has any tag.")
    memorySystem: MemorySystem | None = Field(default=None, description="Only this system.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)
    sessionId: ShortText | None = Field(default=None, description="Plus its working memory.")
    verbose: StrictBool = Field(default=False, description=VERBOSE)
    mode: SearchMode | None = Field(default=None, description="Search mode.")

    @model_validator(mode="after")
    def _aliases(self) -> RecallInput:
        """004's `query` is `text`; its `filters.agent` is `agentId` (given twice, they must agree)."""
        if self.query is not None:
            if self.text is not None and self.text != self.query:
                raise ValueError("text and query are the same parameter: give one")
            self.text = self.query
        agent = self.filters.agent if self.filters else None
        if agent is not None:
            if self.agentId is not None and self.agentId != agent:
                raise ValueError("agentId and filters.agent disagree: give one")
            self.agentId = agent
        return self


class ForgetMode(StrEnum):
    """004 §5.1: how `forget` forgets."""

    SOFT = "soft"  # hidden from every read, restorable within MEMENTO_FORGET_RETENTION_DAYS
    HARD = "hard"  # the right to erasure: the text gone from every place, with a receipt


class ForgetInput(OperationInput):
    """Forget a fragment by id, or every fragment of a topic."""

    id: FragmentId | None = Field(default=None, description="Memory id.")
    topic: Topic | None = Field(default=None, description="Delete this whole topic.")
    force: StrictBool = Field(default=False, description="Allow permanent ones.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)
    mode: ForgetMode = Field(default=ForgetMode.SOFT, description="soft: restorable; hard: erased for good, with a receipt.")


MAX_RECEIPT_CHARS = 200_000  # a receipt of a large topic lists every id


class RestoreInput(OperationInput):
    """Bring back a soft-forgotten memory."""

    id: FragmentId = Field(description="Memory id.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)


class VerifyErasureInput(OperationInput):
    """Check an erasure receipt: its digest, that it is on file, that nothing of it is left."""

    receipt: dict[str, Any] | None = Field(default=None, description="The receipt forget returned.")
    receiptId: ShortText | None = Field(default=None, description="Or just its id.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)

    @field_validator("receipt")
    @classmethod
    def _receipt_size(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and len(json.dumps(value, default=str)) > MAX_RECEIPT_CHARS:
            raise ValueError(f"must serialise to at most {MAX_RECEIPT_CHARS} characters of JSON")
        return value


class LinkInput(OperationInput):
    """Create a typed directed edge between two fragments."""

    fromId: FragmentId = Field(description="Source id.")
    toId: FragmentId = Field(description="Target id.")
    relationType: RelationType = Field(default=RelationType.RELATED, description="fromId <relation> toId.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)


class AmendInput(OperationInput):
    """Change a fragment in place; the previous state is archived as a version."""

    id: FragmentId = Field(description="Memory id.")
    content: Content | None = Field(default=None, description="New content.")
    topic: Topic | None = Field(default=None, description="New topic.")
    keywords: list[Keyword] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="New keywords.")
    type: FragmentType | None = Field(default=None, description="New type.")
    importance: Unit | None = Field(default=None, description="New importance.")
    isAnchor: StrictBool | None = Field(default=None, description="New anchor flag.")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="New tags ([] clears).")
    record: RecordInput | None = Field(default=None, description=RECORD, json_schema_extra={"collapse": True})
    supersedes: StrictBool = Field(default=False, description="Replace with a new memory.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)

    _content_not_blank = field_validator("content")(non_blank)


class PinInput(OperationInput):
    """Pin or unpin a memory (004 §5.1)."""

    id: FragmentId = Field(description="Memory id.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)


class TaskEffectiveness(OperationInput):
    overallSuccess: StrictBool = Field(description="Did the task succeed?")
    toolHighlights: list[ShortText] = Field(default_factory=list, max_length=MAX_LIST_ITEMS, description="Tools that helped.")
    toolPainPoints: list[ShortText] = Field(default_factory=list, max_length=MAX_LIST_ITEMS, description="Tools that hindered.")


class ReflectInput(OperationInput):
    """Turn a session summary into typed fragments."""

    summary: Content = Field(description="What the session did.")
    decisions: list[Content] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Decisions made.")
    errorsResolved: list[Content] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Errors and their fixes.")
    newProcedures: list[Content] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="New procedures.")
    openQuestions: list[Content] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Open questions.")
    taskEffectiveness: TaskEffectiveness | None = Field(
        default=None,
        description="{overallSuccess: bool, toolHighlights: [str], toolPainPoints: [str]}",
        json_schema_extra={"collapse": True},
    )
    topic: Topic = Field(default="session", description="Topic to store under.")
    sessionId: ShortText | None = Field(default=None, description="Session id.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)

    _summary_not_blank = field_validator("summary")(non_blank)


class ContextInput(OperationInput):
    """Load core memory (and a session's working memory) at session start."""

    tokenBudget: Budget = Field(default=2000, description="Result token cap.")
    types: list[FragmentType] = Field(
        default_factory=lambda: [FragmentType.PREFERENCE, FragmentType.ERROR, FragmentType.PROCEDURE],
        max_length=len(FragmentType),
        description="Core memory types.",
    )
    sessionId: ShortText | None = Field(default=None, description="Add its working memory.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)
    verbose: StrictBool = Field(default=False, description=VERBOSE)


class ToolFeedbackInput(OperationInput):
    """Record whether a tool's results were relevant and sufficient."""

    toolName: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)] = Field(description="Tool judged.")
    relevant: StrictBool = Field(description="Results relevant?")
    sufficient: StrictBool = Field(description="Results enough?")
    suggestion: ShortText | None = Field(default=None, description="Improvement idea.")
    context: ShortText | None = Field(default=None, description="The task.")
    sessionId: ShortText | None = Field(default=None, description="Session id.")
    triggerType: Literal["sampled", "voluntary"] = Field(default="voluntary", description="Why given.")


class MemoryStatsInput(OperationInput):
    """Aggregate statistics of the store."""

    agentId: AgentId | None = Field(default=None, description=AGENT_ID)


class ConsolidateInput(OperationInput):
    """Run the maintenance pipeline and return per-stage counts."""

    agentId: AgentId | None = Field(default=None, description=AGENT_ID)
    stages: list[str] | None = Field(default=None, max_length=20, description="Only these (default all).")
    dryRun: StrictBool = Field(default=False, description="Change nothing; report.")


class GraphExploreInput(OperationInput):
    """Follow caused_by / resolved_by edges from a fragment (root-cause analysis)."""

    startId: FragmentId = Field(description="Start memory id.")
    depth: Annotated[int, Strict(), Field(ge=1, le=3)] = Field(default=1, description="Hops to follow.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)
    verbose: StrictBool = Field(default=False, description=VERBOSE)


class FeedbackEvent(StrEnum):
    """004 §3 feedback_event: what happened to a memory the agent was given."""

    USED = "used"  # it went into an answer (a reuse, counted as usage)
    EDITED = "edited"  # it had to be corrected
    NEGLECTED = "neglected"  # it was recalled but ignored
    HELPFUL = "helpful"
    NOT_HELPFUL = "not_helpful"


class FeedbackInput(OperationInput):
    """Say how a memory served (004 §5.1 feedback); the score profile 004 ranks by it."""

    id: FragmentId = Field(description="Memory id.")
    event: FeedbackEvent = Field(description="What happened.")
    score: Unit | None = Field(default=None, description="Strength 0-1 (default 1).")
    note: ShortText | None = Field(default=None, description="E.g. the correct answer.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)


class SummarizeThreadInput(OperationInput):
    """004 §5.1 summarize_thread: a session's working memory into one episodic memory."""

    sessionId: ShortText | None = Field(default=None, description="Default: this session.")
    agentId: AgentId | None = Field(default=None, description=AGENT_ID)
    title: ShortText | None = Field(default=None, description="Summary's first line.")
    keep: StrictBool = Field(default=True, description="false: remove the items.")


# A language model lent for one call: complete(prompt, system, max_tokens) -> text; raises
# errors.Unavailable when it cannot answer. MCP sampling lends the client's own model this way.
Complete = Callable[[str, "str | None", int], str]


@dataclass(frozen=True)
class CallContext:
    """Who is calling and from which session; handed by every face to the service."""

    session_id: str | None = None
    agent_id: str | None = None  # bound by a credential; an agentId argument may only narrow it
    read_only: bool = False  # a read-only credential: search, recall and context only (002 §7)
    payload_copies: int = 1  # how often the face sends a result's JSON (2: MCP text + structuredContent); budgets count each
    # 002 §4: the id of the session scope when the client named one (MEMORY_MCP_SESSION_ID on
    # stdio, clientInfo.extra.sessionId at initialize); None: session_id
    memory_session_id: str | None = None
    # 003's workspace the caller named (X-Memento-Workspace, MEMENTO_WORKSPACE); agent_id is
    # already its namespace (auth.principal.workspace_namespace). None: no workspace named.
    workspace: str | None = None
    # The client's own model for this call (MCP sampling, when the client declared it); None: none lent.
    complete: Complete | None = field(default=None, compare=False)
    # The credential calling (kind:subject): MCP 2026-07-28 session handles are bound to it
    # (session_handles.py); None: the face names none.
    principal: str | None = None

    @property
    def memory_session(self) -> str | None:
        """The session the 002 session scope writes to and reads."""
        return self.memory_session_id or self.session_id


@dataclass(frozen=True)
class ChangeEvent:
    """What a write changed; faces turn it into notifications (e.g. MCP resources/updated)."""

    kind: str  # created | amended | deleted | linked | consolidated | session_ended | entity_created | entity_deleted
    agent_id: str
    fragment_ids: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    session_id: str | None = None
    entity_ids: tuple[str, ...] = ()
    details: dict[str, Any] | None = None  # e.g. a consolidation's counts; the changed fields of an amend
