"""Value types shared by every layer, and the typed inputs of the eleven operations.

The operation inputs use the parameter names of seed 000 §6 so that MCP schemas generated from
them match the specification; every input model forbids unknown fields and coerces nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, Strict, StrictBool, StringConstraints, field_validator

from .fields import MAX_INPUT_CHARS as MAX_INPUT_CHARS
from .fields import MAX_LIST_ITEMS as MAX_LIST_ITEMS
from .fields import AgentId, Budget, Content, FragmentId, Keyword, OperationInput, ShortText, Tag, Topic, Unit, aware, non_blank, small_json


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


def memory_system_for(type_: FragmentType, *, working: bool = False) -> MemorySystem:
    """The memory system a memory gets when none is given: working memory (session scope) is
    `working`; events (episode, error) are `episodic`; procedures `procedural`; the rest `semantic`."""
    if working:
        return MemorySystem.WORKING
    return _SYSTEM_OF_TYPE.get(type_.value, MemorySystem.SEMANTIC)


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

    def is_live(self, now: datetime) -> bool:
        """Neither soft-deleted nor past its expiry: what every read may show."""
        return self.deleted_at is None and (self.expires_at is None or self.expires_at > now)


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
    privacy_scope: PrivacyScope = PrivacyScope.PRIVATE
    origin_trace: dict[str, Any] | None = None


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


class RememberInput(OperationInput):
    """Store one typed knowledge fragment."""

    content: Content = Field(description="The knowledge to store. Longer than 300 characters is truncated with an ellipsis; PII is masked.")
    topic: Topic = Field(description="Categorical label, e.g. database, deployment, security.")
    type: FragmentType = Field(
        description="fact, decision, error, preference, procedure, relation, episode, observation, learning or pattern."
    )
    keywords: list[Keyword] | None = Field(
        default=None, max_length=MAX_LIST_ITEMS, description="Search keywords; extracted by term frequency when omitted."
    )
    importance: Unit | None = Field(default=None, description="0.0-1.0; a default per type when omitted.")
    source: ShortText | None = Field(default=None, description="Provenance: session id, tool name, file path.")
    linkedTo: list[FragmentId] | None = Field(
        default=None, max_length=MAX_LIST_ITEMS, description="Fragment ids to link (related) at creation."
    )
    scope: Scope = Field(default=Scope.PERMANENT, description="permanent (default) or session (working memory, expunged at session end).")
    isAnchor: StrictBool = Field(default=False, description="Exempt from decay, demotion and expiry.")
    agentId: AgentId | None = Field(default=None, description="Agent namespace; 'default' when omitted.")
    sessionId: ShortText | None = Field(default=None, description="Session for scope=session; the MCP session when omitted.")
    createdAt: datetime | None = Field(default=None, strict=False, description="ISO-8601 creation time, for imports; now when omitted.")
    tags: list[Tag] | None = Field(
        default=None, max_length=MAX_LIST_ITEMS, description="User tags (lower-cased), e.g. project:atlas; recall filters on them."
    )
    confidence: Unit | None = Field(default=None, description="0.0-1.0 confidence in this memory; 1.0 when omitted.")
    context: ShortText | None = Field(default=None, description="The situation the memory came from.")
    metadata: dict[str, Any] | None = Field(default=None, description="Free-form JSON object kept with the memory.")
    expiresAt: datetime | None = Field(
        default=None, strict=False, description="ISO-8601 time after which the memory is no longer recalled."
    )
    pinned: StrictBool = Field(default=False, description="Pinned memories are kept by every lifecycle stage.")
    memorySystem: MemorySystem | None = Field(
        default=None, description="working, episodic, semantic or procedural; derived from the type when omitted."
    )
    privacyScope: PrivacyScope = Field(default=PrivacyScope.PRIVATE, description="private (default), team or public.")
    originTrace: dict[str, Any] | None = Field(default=None, description="Free-form JSON: where this memory was derived from.")

    _content_not_blank = field_validator("content")(non_blank)
    _json_small = field_validator("metadata", "originTrace")(small_json)
    _times_aware = field_validator("createdAt", "expiresAt")(aware)

    def record(self) -> RecordFields:
        """The shared-record fields of this input."""
        return RecordFields(
            tags=tuple(dict.fromkeys(self.tags or ())),
            confidence=1.0 if self.confidence is None else self.confidence,
            context=self.context,
            metadata=dict(self.metadata or {}),
            expires_at=self.expiresAt,
            pinned=self.pinned,
            memory_system=self.memorySystem,
            privacy_scope=self.privacyScope,
            origin_trace=self.originTrace,
        )


class RecallInput(OperationInput):
    """Find fragments by keywords, natural-language text, topic and type."""

    keywords: list[Keyword] | None = Field(
        default=None, max_length=MAX_LIST_ITEMS, description="Keywords; fragments sharing any are found, more shared ranks higher."
    )
    topic: Topic | None = Field(default=None, description="Only fragments with this topic.")
    type: FragmentType | None = Field(default=None, description="Only fragments of this type.")
    text: Content | None = Field(
        default=None, description="A natural-language query (a question is fine); runs full-text and semantic search."
    )
    tokenBudget: Budget = Field(default=1000, description="Maximum total estimated tokens returned.")
    limit: Annotated[int, Strict(), Field(ge=1, le=200)] = Field(
        default=20, description="Maximum fragments returned before linked neighbours."
    )
    includeLinks: StrictBool = Field(default=True, description="Append 1-hop linked neighbours.")
    linkRelationType: RelationType | None = Field(
        default=None, description="Only follow this edge type; default caused_by, resolved_by, related."
    )
    threshold: Unit | None = Field(
        default=None, description="Minimum cosine similarity for semantic-only results; keyword results are unaffected."
    )
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Only memories carrying ALL of these tags.")
    tagsAny: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Only memories carrying ANY of these tags.")
    memorySystem: MemorySystem | None = Field(default=None, description="Only memories of this memory system.")
    agentId: AgentId | None = None
    sessionId: ShortText | None = Field(default=None, description="Also search this session's working memory.")


class ForgetInput(OperationInput):
    """Delete a fragment by id, or every fragment of a topic."""

    id: FragmentId | None = Field(default=None, description="Fragment to delete.")
    topic: Topic | None = Field(default=None, description="Delete every fragment with this topic.")
    force: StrictBool = Field(default=False, description="Allow deleting permanent-tier fragments.")
    agentId: AgentId | None = None


class LinkInput(OperationInput):
    """Create a typed directed edge between two fragments."""

    fromId: FragmentId
    toId: FragmentId
    relationType: RelationType = Field(default=RelationType.RELATED)
    agentId: AgentId | None = None


class AmendInput(OperationInput):
    """Change a fragment in place; the previous state is archived as a version."""

    id: FragmentId
    content: Content | None = None
    topic: Topic | None = None
    keywords: list[Keyword] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    type: FragmentType | None = None
    importance: Unit | None = None
    isAnchor: StrictBool | None = None
    tags: list[Tag] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Replace the tags ([] clears them).")
    confidence: Unit | None = None
    context: ShortText | None = None
    metadata: dict[str, Any] | None = Field(default=None, description="Replace the metadata object.")
    expiresAt: datetime | None = Field(default=None, strict=False)
    pinned: StrictBool | None = None
    memorySystem: MemorySystem | None = None
    privacyScope: PrivacyScope | None = None
    supersedes: StrictBool = Field(
        default=False,
        description="Store the change as a new fragment that supersedes this one (superseded_by edge, original importance lowered).",
    )
    agentId: AgentId | None = None

    _content_not_blank = field_validator("content")(non_blank)
    _json_small = field_validator("metadata")(small_json)
    _times_aware = field_validator("expiresAt")(aware)


class TaskEffectiveness(OperationInput):
    overall_success: StrictBool
    tool_highlights: list[ShortText] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    tool_pain_points: list[ShortText] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)


class ReflectInput(OperationInput):
    """Turn a session summary into typed fragments."""

    summary: Content
    sessionId: ShortText | None = None
    decisions: list[Content] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    errors_resolved: list[Content] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    new_procedures: list[Content] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    open_questions: list[Content] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    task_effectiveness: TaskEffectiveness | None = None
    topic: Topic = Field(default="session", description="Topic given to the created fragments.")
    agentId: AgentId | None = None

    _summary_not_blank = field_validator("summary")(non_blank)


class ContextInput(OperationInput):
    """Load core memory (and a session's working memory) at session start."""

    tokenBudget: Budget = Field(default=2000)
    types: list[FragmentType] = Field(
        default_factory=lambda: [FragmentType.PREFERENCE, FragmentType.ERROR, FragmentType.PROCEDURE], max_length=len(FragmentType)
    )
    sessionId: ShortText | None = None
    agentId: AgentId | None = None


class ToolFeedbackInput(OperationInput):
    """Record whether a tool's results were relevant and sufficient."""

    tool_name: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
    relevant: StrictBool
    sufficient: StrictBool
    suggestion: ShortText | None = None
    context: ShortText | None = None
    session_id: ShortText | None = None
    trigger_type: Annotated[str, Strict(), Field(pattern="^(sampled|voluntary)$")] = "voluntary"


class MemoryStatsInput(OperationInput):
    """Aggregate statistics of the store."""

    agentId: AgentId | None = None


class ConsolidateInput(OperationInput):
    """Run the maintenance pipeline and return per-stage counts."""

    agentId: AgentId | None = None


class GraphExploreInput(OperationInput):
    """Follow caused_by / resolved_by edges from a fragment (root-cause analysis)."""

    startId: FragmentId
    depth: Annotated[int, Strict(), Field(ge=1, le=3)] = Field(default=1, description="Hops to follow (1 = the seed's one-hop traversal).")
    agentId: AgentId | None = None


@dataclass(frozen=True)
class CallContext:
    """Who is calling and from which session; handed by every face to the service."""

    session_id: str | None = None
    agent_id: str | None = None  # bound by a credential; an agentId argument may only narrow it
    read_only: bool = False  # a read-only credential: search, recall and context only (002 §7)


@dataclass(frozen=True)
class ChangeEvent:
    """What a write changed; faces turn it into notifications (e.g. MCP resources/updated)."""

    kind: str  # created | amended | deleted | linked | consolidated | session_ended
    agent_id: str
    fragment_ids: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    session_id: str | None = None
