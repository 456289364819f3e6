"""MemoryService: the eleven operations of 000 §6, called by every face.

Methods are synchronous (SQLite and the embedding model block); async faces run them in
worker threads. Each returns a typed result (memento.results; faces serialise it with `dump()`)
and raises MementoError subclasses.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar, cast

import numpy as np

from .access import call_scope, refuse_foreign_session, refuse_unchangeable, writable_scope
from .embeddings.protocol import Embedder
from .entity_service import EntityService
from .erasure import Erased, Erasure
from .errors import Conflict, Forbidden, InvalidArgument, MementoError, NotFound, SessionRequired, Unavailable
from .factory import FragmentFactory, content_hash, infer_ttl
from .lifecycle.consolidate import ConfidencePrune, Consolidator, MergeStage, Retention
from .lifecycle.merge import Merger, MergeStore
from .lifecycle.review import Reviews
from .lifecycle.scheduler import Progress
from .lifecycle.sleep import Sleep, SleepPolicy
from .models import (
    DEFAULT_AGENT,
    MAINTENANCE_AGENTS,
    AgentScope,
    AmendInput,
    CallContext,
    ChangeEvent,
    ConsolidateInput,
    ContextInput,
    FeedbackInput,
    ForgetInput,
    ForgetMode,
    Fragment,
    FragmentType,
    GraphExploreInput,
    LinkInput,
    MemoryStatsInput,
    PinInput,
    PrivacyScope,
    RecallInput,
    RecordFields,
    RecordInput,
    ReflectInput,
    RememberInput,
    RestoreInput,
    Scope,
    SummarizeThreadInput,
    ToolFeedbackInput,
    TTLTier,
    VerifyErasureInput,
)
from .observe import Observer
from .outbox import EmbeddingOutbox
from .protocol_face import ProtocolFace
from .results import (
    AmendResult,
    ConsolidateResult,
    ConsolidationRunsResult,
    ConsolidationRunView,
    ContextResult,
    EvaluatorStats,
    FeedbackResult,
    ForgetCandidate,
    ForgetResult,
    FragmentView,
    GraphResult,
    LinkResult,
    PinResult,
    RecallResult,
    ReflectedFragment,
    ReflectResult,
    RememberResult,
    RestoreResult,
    StatsResult,
    SummarizeThreadResult,
    ToolFeedbackResult,
    VerifyErasureResult,
    preview,
)
from .retrieval.beside import Beside, workers_for
from .retrieval.context import explore, load_context
from .retrieval.profile import Profile003, Profile004, ScoreProfile
from .retrieval.recall import CANDIDATE_POOL, Recall, recall_filter  # noqa: F401 - CANDIDATE_POOL: benchmarks read it here
from .retrieval.search import Search, baseline_for
from .session_handles import SessionHandles
from .settings import Settings
from .storage.protocol import (
    EntityStore,
    ErasureStore,
    EvaluationStore,
    FragmentChanges,
    KeywordIndex,
    LinkageStore,
    MaintenanceStore,
    NewFeedback,
    NewFragment,
    ReviewStore,
    Store,
)
from .storage.runs import ConsolidationRun, ConsolidationRunStore, NewRun, RunQuery, RunTrigger
from .summarize import ThreadSummarizer
from .vault_service import VaultService
from .vectorizer import Vectorizer
from .views import MemoryViews

log = logging.getLogger(__name__)
T = TypeVar("T")

SUPERSEDED_IMPORTANCE_FACTOR = 0.5
SHARED_SCOPES = (PrivacyScope.TEAM, PrivacyScope.PUBLIC)
ERASE_ATTEMPTS = 3
MAINTENANCE_SCOPE = "system"  # sees every namespace (models.MAINTENANCE_AGENTS)
AMENDABLE = tuple(name for name in AmendInput.model_fields if name not in ("id", "supersedes", "agentId"))
# 004: a pinned memory never expires, but working memory ends with its session (docs/record.md).
PINNED_SESSION = "working memory (scope 'session') ends with its session and cannot be pinned: remember it with scope 'permanent'"


def utc_now() -> datetime:
    return datetime.now(UTC)


def retention_of(settings: Settings) -> Retention:
    """004 §4.2's retention per memory system, from the MEMENTO_RETENTION_* settings (0: no limit)."""

    def limit(value: int, unit: str) -> timedelta | None:
        return timedelta(**{unit: value}) if value > 0 else None

    return Retention(
        working=limit(settings.retention_working_hours, "hours"),
        episodic=limit(settings.retention_episodic_days, "days"),
        semantic=limit(settings.retention_semantic_days, "days"),
        procedural=limit(settings.retention_procedural_days, "days"),
    )


# 004 §4.2's soft-delete candidate queue in memory_stats: what the lifecycle would let go next.
FORGET_CANDIDATE_UTILITY = 0.2
FORGET_CANDIDATE_UNUSED = timedelta(days=30)
FORGET_CANDIDATES_SHOWN = 10


def sleep_policy(settings: Settings, embedding_model: str | None) -> SleepPolicy:
    """Sleep consolidation's settings (MEMENTO_SLEEP_*; a window of 0 turns the stage off)."""
    window = timedelta(days=settings.sleep_window_days) if settings.sleep_window_days > 0 else None
    baseline = baseline_for(embedding_model, settings.similarity_baseline)
    return SleepPolicy(window, settings.sleep_similarity, settings.sleep_min_cluster, baseline)


def score_profile(settings: Settings) -> ScoreProfile | None:
    """The score profile MEMENTO_SCORE_PROFILE chooses (004's, or 003's relevance decay); None: 000's ranking."""
    if settings.score_profile == "003":
        return Profile003()
    if settings.score_profile != "004":
        return None
    return Profile004(
        recency_lambda=settings.score_recency_lambda,
        duplication=settings.score_duplication_weight,
        duplicate_similarity=settings.score_duplicate_similarity,
    )


class MemoryService:
    """The operations every face calls."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        maintenance: MaintenanceStore,
        embedder: Embedder | None,
        factory: FragmentFactory | None = None,
        clock: Callable[[], datetime] = utc_now,
        keyword_index: KeywordIndex | None = None,
        observers: Observer | None = None,
    ) -> None:
        self.observers = observers or Observer()
        self.settings = settings
        self.store = store
        self._keyword_index = keyword_index
        self.factory = factory or FragmentFactory()
        self.clock = clock
        self.vectors = Vectorizer(embedder, store, self.observers)
        # Writes never wait for the provider: their rows are embedded by this worker (memento.outbox).
        self.outbox = EmbeddingOutbox(self.vectors, store, self.observers, clock, max_backoff_s=settings.embed_max_backoff_s)
        prune = ConfidencePrune(
            settings.confidence_prune_threshold, settings.confidence_half_life_days, settings.confidence_prune_action == "archive"
        )
        forget_retention = timedelta(days=settings.forget_retention_days) if settings.forget_retention_days > 0 else None
        # Every backend is an AppStore, so the store keeps the review cards too (004 §4.2).
        self.review_store = cast(ReviewStore, store)
        self.reviews = Reviews(store, self.review_store, settings.review_top)
        # The operator's language model drafts the semantic memories when there is one (docs/llm.md).
        sleep = Sleep(store, self.review_store, self.factory, sleep_policy(settings, store.embedding_model), lambda: self.protocol.llm)
        self.consolidator = Consolidator(
            settings.memory,
            store,
            maintenance,
            self._backfill,
            clock,
            observers=self.observers,
            prune=prune,
            retention=retention_of(settings),
            forget_retention=forget_retention,
            merge=MergeStage(
                Merger(cast(MergeStore, store), lambda: self.searcher.baseline),
                settings.consolidation_similarity,
                settings.merge_on_consolidate,
            ),
            pending=self.vectors.pending,
            sleep=sleep,
            reviews=self.reviews,
        )
        self.views = MemoryViews(store, settings, self._scope, self._own_session)
        # Every backend is an AppStore (storage/protocol.py), so the store is its entity store too.
        # The threads a recall runs its query's embedding and vector tier on (retrieval/beside.py).
        self.beside = Beside(workers_for(settings.recall_workers))
        self.searcher = Search(store, cast(EntityStore, store), settings, self.vectors.query, self.beside, self.vectors.query_first)
        self.recaller = Recall(
            store,
            settings.memory,
            self.vectors.query,
            self.search_mode,
            self.factory.tokens,
            keyword_index,
            self.searcher,
            profile=score_profile(settings),
            coverage_threshold=settings.coverage_threshold,
            beside=self.beside,
            query_first=self.vectors.query_first,
        )
        self._listeners: list[Callable[[ChangeEvent], None]] = []
        self._held = threading.local()  # a unit of work's change events, sent when it commits (held_events)
        # Queues a new memory's evaluation in the transaction that stores it (the evaluator's
        # `queue_in_write`, wired by app.py): one commit a remember, and never a memory without a job.
        self.queue_in_write: Callable[[str, Sequence[str]], int] | None = None
        # Every backend is an AppStore, so the store is its erasure store too (004 §5.1 forget mode=hard).
        self.erasure_store = cast(ErasureStore, store)
        self.erasure = Erasure(self.erasure_store, settings.backend, clock)
        self.entities = EntityService(self)  # seed 001's face over this engine
        self.vault = VaultService(self)  # seed 002's face over this engine
        self.protocol = ProtocolFace(self)  # seed 003's face over this engine
        # Every backend is an AppStore, so the store records consolidation runs too (migration 0016).
        self.runs = cast(ConsolidationRunStore, store)
        self.replica = f"{socket.gethostname()}:{os.getpid()}"  # who ran a recorded run
        self.threads = ThreadSummarizer(self)  # 004's working memory's end (summarize.py)
        self.handles = SessionHandles(self)  # MCP 2026-07-28's sessions: server-minted handles
        # idle sessions are summarized, then expunged (quietly in a dry run); expired handles first
        self.consolidator.end_sessions = lambda before, dry: self._end_idle(before, dry)
        self.consolidator.settle_embeddings = self._settle_before_maintenance

    @property
    def embedder(self) -> Embedder | None:
        """The embedding provider (None: keyword-only mode)."""
        return self.vectors.embedder

    @property
    def keyword_index(self) -> KeywordIndex | None:
        """The L1 keyword index recall consults (None: recall starts at the store's keyword tier)."""
        return self._keyword_index

    @keyword_index.setter
    def keyword_index(self, index: KeywordIndex | None) -> None:
        self._keyword_index = self.recaller.keyword_index = index

    # ------------------------------------------------------------ change events

    def add_listener(self, listener: Callable[[ChangeEvent], None]) -> None:
        """Call `listener` after every committed change (from the calling worker thread)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[ChangeEvent], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @contextmanager
    def held_events(self) -> Iterator[None]:
        """Hold the change events of the calls inside (in this thread) until the block ends: sent
        then if it ends normally, dropped if it raises. Wrap a unit of work (`store.atomic()`)
        in it, so a rollback announces nothing that did not happen. Nested, the outer one decides."""
        if getattr(self._held, "events", None) is not None:
            yield
            return
        self._held.events = []
        try:
            yield
        except BaseException:
            self._held.events = None
            raise
        events, self._held.events = self._held.events, None
        for event in events:
            self._emit(event)

    def _emit(self, event: ChangeEvent) -> None:
        held = getattr(self._held, "events", None)
        if held is not None:
            held.append(event)
            return
        if event.kind in ("created", "amended") and event.fragment_ids:  # committed: the worker embeds what has no vector
            self.outbox.fragments_owed(event.agent_id, event.fragment_ids)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("change listener failed")

    # ------------------------------------------------------------ helpers

    def _writable(self, agent_id: str | None, ctx: CallContext, *, pool: bool = False) -> AgentScope:
        """The scope of a call that changes memory (access.writable_scope); `pool`: the
        operation may change the shared pool as far as MEMENTO_SHARED_POOL allows."""
        return writable_scope(agent_id, ctx, self.settings.shared_pool, pool=pool)

    @staticmethod
    def _scope(agent_id: str | None, ctx: CallContext) -> AgentScope:
        """The namespace of a call: an agentId argument may narrow a credential, never widen it."""
        return call_scope(agent_id, ctx)

    def _own_session(self, scope: AgentScope, session_id: str | None, ctx: CallContext) -> None:
        refuse_foreign_session(self.store, scope, session_id, ctx)

    def _backfill(self, scope: AgentScope, limit: int | None = None) -> int:
        """Embed fragments stored without a vector (the consolidator's backfill stage)."""
        return self.vectors.backfill(scope, limit)

    def search_mode(self) -> str:
        return self.vectors.search_mode()

    def settle(self, timeout_s: float = 30.0) -> bool:
        """Wait at most `timeout_s` until every write acknowledged so far is embedded (tests, the
        CLI before it exits); False when some are still pending (the provider is failing, say)."""
        return self.outbox.drain(timeout_s)

    def _settle_before_maintenance(self) -> bool:
        """Before a consolidation (or 001's merge) reads stored vectors: the worker drained of what
        this process acknowledged and of its sweep for leftovers, for at most MEMENTO_EMBED_DRAIN_S
        (one failed try ends it); the backfill stage embeds what is left."""
        return self.embedder is None or self.outbox.drain(self.settings.embed_drain_s)

    def settle_for(self, scope: AgentScope) -> None:
        """Read-your-writes by meaning: wait at most MEMENTO_EMBED_SETTLE_MS for the embeddings
        of writes acknowledged in `scope`'s namespaces; never while the provider fails or hangs."""
        if self.embedder is not None and self.settings.embed_settle_ms > 0:
            self.outbox.settle(scope.visible_agents(), self.settings.embed_settle_ms / 1000)

    def explain(self, exc: MementoError, ctx: CallContext, agent_id: str | None = None) -> MementoError:
        """`exc` as a face sends it: a NotFound naming memories says, for those the call's
        namespace holds or held (`agent_id`: the call's own argument), why they are not there: a
        merge took them (consolidation, a merge proposal: which memory holds their text now,
        storage/merged.py), they are soft-forgotten (`restore` brings them back) or expired. A
        memory never stored, erased or deleted for good gets the plain message, as does any
        other error or a failed lookup."""
        if not isinstance(exc, NotFound) or not exc.missing or exc.explained:
            return exc
        try:
            scope = self._scope(agent_id, ctx)
            moved = self.store.merged_into(scope, exc.missing)
            hidden = self.store.hidden_states(scope, [i for i in exc.missing if i not in moved])
        except Exception:  # boundary: the hint must never hide the error it explains
            log.warning("looking up why a memory is missing failed", exc_info=True)
            return exc
        now = utc_now()  # stores hide expired rows by the wall clock
        told = [f"{old} was merged into {new} (its text is in {new}'s version history): use {new}" for old, new in moved.items()]
        for fid, (forgotten, expires) in hidden.items():
            if forgotten is not None:
                told.append(
                    f"{fid} was forgotten at {forgotten.isoformat(timespec='seconds')} (`restore` brings it back until it is purged)"
                )
            elif expires is not None and expires <= now:
                told.append(f"{fid} expired at {expires.isoformat(timespec='seconds')}")
        if not told:
            return exc
        return NotFound(f"{exc.message}: {'; '.join(told)}", missing=exc.missing, merged_into=moved, explained=True)

    def embed_within(self, text: str) -> np.ndarray | None:
        """The passage vector of `text` for a write-time decision, if the provider answers within
        MEMENTO_EMBED_WRITE_WAIT_MS (else None: decided without it, embedded in the background)."""
        return self.vectors.within(text, self.settings.embed_write_wait_ms / 1000)

    # ------------------------------------------------------------ storage cluster

    def remember(self, inp: RememberInput, ctx: CallContext, *, fragment_id: str | None = None) -> RememberResult:
        """Store a fragment; a duplicate returns the existing id with created=false. `fragment_id`
        (imports of Memento's own export) is the id to use when no fragment holds it yet."""
        scope = self._writable(self._home(inp, ctx), ctx, pool=True)
        self._own_session(scope, inp.sessionId, ctx)
        expires = inp.record.expiresAt if inp.record else None
        if expires is not None and expires <= utc_now():  # stores hide rows by the wall clock
            raise InvalidArgument(f"expiresAt {expires.isoformat()} is not in the future; nothing stored")
        if inp.scope is Scope.SESSION and inp.record and inp.record.pinned:
            raise InvalidArgument(PINNED_SESSION + "; nothing stored")
        prepared = self._prepare(
            scope,
            ctx,
            content=inp.content,
            topic=inp.topic,
            type_=inp.fragment_type,
            keywords=inp.keywords,
            importance=inp.importance,
            source=inp.source,
            linked_to=inp.linkedTo or [],
            scope_kind=inp.scope,
            is_anchor=inp.isAnchor,
            session_id=inp.sessionId,
            created_at=inp.createdAt,
            record=self._shared_by(inp, ctx),
        )
        details: dict[str, object] | None = None
        if fragment_id is None and self.queue_in_write is not None:
            with self.store.atomic():  # the memory and its evaluation job: one transaction, one commit
                fragment, created = self.store.insert(scope, prepared)
                details = self.queued_with(fragment) if created else None
        else:
            fragment, created = self._insert(scope, prepared, fragment_id)
        if created:
            self._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,), fragment.session_id, details=details))
        message = None
        if not created:
            message = f"duplicate of existing fragment {fragment.id}; nothing new stored"
        elif self.embedder is not None and not fragment.has_embedding:
            message = "stored; embedding pending (queued for the background worker): found by keyword now, by meaning once embedded"
        if created and fragment.session_id is not None:  # 004 wm_buffer: the session's token budget
            folded, summary = self.threads.fold_overflow(fragment.agent_id, fragment.session_id)
            if folded:
                note = f"working memory over its {self.settings.working_memory_token_budget}-token budget: {folded} oldest item(s) folded"
                note += f" into episodic summary {summary}" if summary else " (already summarized) and removed"
                message = f"{message}; {note}" if message else note
        cut = fragment.detail is not None
        return RememberResult(
            id=fragment.id,
            created=created,
            fragment=FragmentView.of(fragment),
            embedded=fragment.has_embedding,
            truncated=True if cut else None,
            original_length=len(inp.content) if cut else None,
            message=message,
        )

    def queued_with(self, fragment: Fragment) -> dict[str, object] | None:
        """Called inside the transaction that created `fragment`: queue its evaluation there
        (queue_in_write). The details its `created` event carries (None: nothing was queued, the
        evaluator's listener queues it after the commit)."""
        if self.queue_in_write is None:
            return None
        return {"evaluationsQueued": self.queue_in_write(fragment.agent_id, [fragment.id])}

    @staticmethod
    def _home(inp: RememberInput, ctx: CallContext) -> str | None:
        """The namespace a remember writes to: its agentId, except that a `team` or `public`
        memory goes to the shared pool, the one place every agent reads (docs/privacy.md)."""
        if inp.privacy not in SHARED_SCOPES:
            return inp.agentId
        if inp.scope is Scope.SESSION:
            raise InvalidArgument(
                "working memory (scope 'session') is never shared: privacyScope team/public needs scope 'permanent'; nothing stored"
            )
        if inp.agentId not in (None, DEFAULT_AGENT):
            raise InvalidArgument(
                f"privacyScope {inp.privacy} memories live in the shared pool 'default', which every agent reads:"
                " omit agentId (or give 'default'); nothing stored"
            )
        return DEFAULT_AGENT

    @staticmethod
    def _shared_by(inp: RememberInput, ctx: CallContext) -> RecordFields:
        """The record of a remember; a memory an agent shares into the pool names that agent in
        its origin trace (unless the caller gave one)."""
        record = inp.record_fields()
        if inp.privacy in SHARED_SCOPES and ctx.agent_id and ctx.agent_id != DEFAULT_AGENT and record.origin_trace is None:
            return replace(record, origin_trace={"sharedBy": ctx.agent_id})
        return record

    def _insert(self, scope: AgentScope, new: NewFragment, fragment_id: str | None) -> tuple[Fragment, bool]:
        """Insert under the draft's own id, or under `fragment_id` while no fragment holds it."""
        if fragment_id is None:
            return self.store.insert(scope, new)
        try:
            return self.store.insert(scope, replace(new, draft=replace(new.draft, id=fragment_id)))
        except Conflict:  # taken, maybe by a fragment this scope cannot see: the draft's fresh id
            return self.store.insert(scope, new)

    def _prepare(
        self,
        scope: AgentScope,
        ctx: CallContext,
        *,
        content: str,
        topic: str,
        type_: FragmentType,
        keywords: list[str] | None = None,
        importance: float | None = None,
        source: str | None = None,
        linked_to: list[str] | None = None,
        scope_kind: Scope = Scope.PERMANENT,
        is_anchor: bool = False,
        session_id: str | None = None,
        created_at: datetime | None = None,
        record: RecordFields | None = None,
        embed: bool = True,
    ) -> NewFragment:
        """A fragment ready to insert: redacted and analysed (outside any transaction). It carries no
        vector: once committed, the embedding worker embeds it (memento.outbox); `embed` false (a
        summary a consolidation run writes) leaves it to that run's backfill stage instead."""
        session = None
        if scope_kind is Scope.SESSION:
            session = session_id or ctx.session_id
            if not session:
                raise SessionRequired("scope 'session' needs a sessionId (none was given and the transport has no session)")
        if created_at is not None and created_at.tzinfo is None:
            created_at = created_at.replace(tzinfo=UTC)
        draft = self.factory.draft(
            content=content,
            topic=topic,
            type_=type_,
            keywords=keywords,
            importance=importance,
            source=source,
            is_anchor=is_anchor,
            created_at=created_at or self.clock(),
            record=record,
        )
        if not draft.content:
            raise InvalidArgument("content is empty after redaction")
        # A tier's days count from creation, except that a memory born cold (an import with an old
        # createdAt, say) starts its cold stay now: the first consolidation must not expire it.
        draft = replace(draft, entered_at=self.clock() if draft.ttl_tier is TTLTier.COLD else draft.created_at)
        own = session is not None and session == ctx.session_id
        return NewFragment(draft, scope.agent_id, session, None, tuple(linked_to or ()), own_session=own)

    def forget(self, inp: ForgetInput, ctx: CallContext) -> ForgetResult:
        """Forget by id or by topic; permanent-tier fragments need force. All or nothing. By
        topic, shared-pool fragments the caller may not change are kept (and reported).
        mode=soft (the default) hides them, restorable for MEMENTO_FORGET_RETENTION_DAYS;
        mode=hard erases them (004 §5.1, docs/erasure.md) and returns the receipt."""
        scope = self._writable(inp.agentId, ctx, pool=True)
        if (inp.id is None) == (inp.topic is None):
            raise InvalidArgument("give exactly one of 'id' or 'topic'")
        if inp.mode is ForgetMode.HARD:
            return self._erase(scope, inp)
        kept: list[str] = []
        if inp.id is not None:
            targets = self.store.get_many(scope, [inp.id])
            if not targets:
                raise NotFound(f"fragment {inp.id!r} not found", missing=(inp.id,))
            refuse_unchangeable(scope, targets)  # force never overrides the pool rule
        else:
            found = self.store.find_by_topic(scope, inp.topic or "")
            targets = [f for f in found if scope.may_change(f)]
            kept = [f.id for f in found if not scope.may_change(f)]
            if kept and not targets:
                raise Forbidden(scope.pool_refusal(kept))
        self._refuse_protected(targets, inp.force)
        now = self.clock()
        deleted = self.store.soft_delete(scope, [f.id for f in targets], now)
        if deleted:
            self._emit(ChangeEvent("deleted", scope.agent_id, tuple(deleted), tuple({f.topic for f in targets})))
        days = self.settings.forget_retention_days
        until = (now + timedelta(days=days)).isoformat() if days > 0 else None
        message = scope.pool_refusal(kept).replace("nothing changed", "these were kept") if kept else None
        return ForgetResult(deleted=deleted, count=len(deleted), kept=kept or None, message=message, mode="soft", restorable_until=until)

    @staticmethod
    def _refuse_protected(targets: list[Fragment], force: bool) -> None:
        protected = [f.id for f in targets if f.ttl_tier is TTLTier.PERMANENT or f.is_anchor]
        if protected and not force:
            raise Forbidden(
                f"{len(protected)} permanent or anchored fragment(s) ({', '.join(protected[:5])}) need force=true; nothing deleted"
            )

    def _erase(self, scope: AgentScope, inp: ForgetInput) -> ForgetResult:
        """forget mode=hard: one transaction for the rows and the receipt, then the clean-up. A
        transaction the database rolled back (a deadlock with another writer) runs again whole."""
        for attempt in range(1, ERASE_ATTEMPTS + 1):
            try:
                return self._erase_once(scope, inp)
            except Unavailable as exc:
                sqlstate = str(getattr(exc.__cause__, "sqlstate", None) or "")
                if attempt == ERASE_ATTEMPTS or not sqlstate.startswith("40"):  # class 40: transaction rollback
                    raise
                log.info("erasure rolled back by the database (SQLSTATE %s); running it again", sqlstate)
        raise AssertionError("unreachable")

    def _erase_once(self, scope: AgentScope, inp: ForgetInput) -> ForgetResult:
        kept: list[str] = []
        with self.store.atomic():
            targets = self.erasure_store.erasure_targets(scope, [inp.id] if inp.id else [], inp.topic)
            if inp.topic is not None:
                kept = [f.id for f in targets.fragments if not scope.may_change(f)]
                if kept and len(kept) == len(targets.fragments):
                    raise Forbidden(scope.pool_refusal(kept))
                if kept:  # the changeable ones, with their traces
                    chosen = [f.id for f in targets.fragments if scope.may_change(f)]
                    targets = self.erasure_store.erasure_targets(scope, chosen)
            if not targets.fragments and not targets.versions:
                if inp.id is not None:
                    raise NotFound(f"fragment {inp.id!r} not found", missing=(inp.id,))
                return ForgetResult(deleted=[], count=0, mode="hard")  # as a soft forget of an empty topic
            refuse_unchangeable(scope, list(targets.fragments))  # force never overrides the pool rule
            self._refuse_protected(list(targets.fragments), inp.force)
            erased = Erased(targets, self.erasure_store.erase(scope, targets))
            receipt, stored = self.erasure.receipt(scope.agent_id, erased)
            self.erasure_store.save_receipt(stored)
        receipt = self.erasure.finish(receipt, stored, list({f.agent_id for f in targets.fragments}), erased.texts())
        ids = targets.ids
        if ids:
            self._emit(ChangeEvent("deleted", scope.agent_id, tuple(ids), tuple({f.topic for f in targets.fragments})))
        changed = [d.id for d in receipt.derived]
        if changed:
            self._emit(ChangeEvent("amended", scope.agent_id, tuple(changed)))
        message = scope.pool_refusal(kept).replace("nothing changed", "these were kept") if kept else None
        return ForgetResult(
            deleted=receipt.memory_ids, count=len(receipt.memory_ids), kept=kept or None, message=message, mode="hard", receipt=receipt
        )

    def restore(self, inp: RestoreInput, ctx: CallContext) -> RestoreResult:
        """Undo a soft forget (004 §5.1): the memory is seen again by every read."""
        scope = self._writable(inp.agentId, ctx, pool=True)
        back = self.store.restore(scope, [inp.id])
        if not back:
            raise NotFound(f"fragment {inp.id!r} is not a soft-forgotten memory of yours", missing=(inp.id,))
        fragment = self.store.get_many(scope, back)[0]  # soft_delete dropped its vector: the "created" event queues it
        self._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,), fragment.session_id))
        return RestoreResult(id=fragment.id, fragment=FragmentView.of(fragment))

    def restore_many(self, ids: list[str], ctx: CallContext) -> list[str]:
        """Undo the soft forget of several memories in one transaction: all of them, or none when
        any is not a soft-forgotten memory of the caller's (NotFound). The dashboard's bulk undo."""
        scope = self._writable(None, ctx, pool=True)
        with self.store.atomic():
            back = self.store.restore(scope, ids)
            missing = [i for i in ids if i not in set(back)]
            if missing:
                raise NotFound(f"fragment {missing[0]!r} is not a soft-forgotten memory of yours; nothing restored", missing=missing)
        for fragment in self.store.get_many(scope, back):  # committed: each "created" event queues its vector
            self._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,), fragment.session_id))
        return back

    def verify_erasure(self, inp: VerifyErasureInput, ctx: CallContext) -> VerifyErasureResult:
        """Check an erasure receipt: its digest, that it is this agent's, that nothing is left."""
        return self.erasure.verify(self._scope(inp.agentId, ctx), inp)

    def stored_hash(self, content: str) -> str:
        """The content hash `content` would be stored under (redacted, as remember stores it): what
        an erasure's tombstones are compared with (an import skips what was erased)."""
        return content_hash(self.factory.clean_detail(content) or self.factory.clean_content(content))

    def link(self, inp: LinkInput, ctx: CallContext) -> LinkResult:
        """Create (or retype) a directed edge between two visible fragments."""
        scope = self._writable(inp.agentId, ctx, pool=True)
        ends = {f.id: f for f in self.store.get_many(scope, [inp.fromId, inp.toId])}
        if inp.fromId in ends:
            refuse_unchangeable(scope, [ends[inp.fromId]])  # the edge and linked_to belong to the source
            pooled = ends[inp.fromId].agent_id == DEFAULT_AGENT
            if pooled and inp.toId in ends and ends[inp.toId].agent_id != DEFAULT_AGENT and not scope.is_maintenance:
                raise Forbidden("a shared-pool fragment may link only to shared-pool fragments; nothing changed")
        self.store.add_link(scope, inp.fromId, inp.toId, inp.relationType, self.clock())
        self._emit(ChangeEvent("linked", scope.agent_id, (inp.fromId, inp.toId)))
        return LinkResult(from_id=inp.fromId, to_id=inp.toId, relation_type=inp.relationType)

    def amend(self, inp: AmendInput, ctx: CallContext, *, emit: bool = True) -> AmendResult:
        """Change a fragment in place (version archived, id and links kept), or supersede it.
        `emit` false: the caller announces the change (a face that changes more in one step)."""
        scope = self._writable(inp.agentId, ctx, pool=True)
        found = self.store.get_many(scope, [inp.id])
        if not found:
            raise NotFound(f"fragment {inp.id!r} not found", missing=(inp.id,))
        old = found[0]
        refuse_unchangeable(scope, [old])  # superseding lowers the original's importance: a change too
        if inp.isAnchor and old.agent_id == DEFAULT_AGENT and not scope.may_write_pool(anchored=True):
            raise Forbidden(scope.pool_refusal([old.id]))
        record = inp.record or RecordInput()
        if record.pinned and old.session_id is not None:
            raise InvalidArgument(PINNED_SESSION + "; nothing changed")
        if record.privacyScope in SHARED_SCOPES and old.agent_id != DEFAULT_AGENT:
            raise InvalidArgument(
                f"privacyScope {record.privacyScope} memories live in the shared pool 'default'; {old.id} is in namespace"
                f" {old.agent_id!r}: remember it again with privacyScope {record.privacyScope} to share it; nothing changed"
            )
        if record.privacyScope is not None and record.privacyScope is not PrivacyScope.PRIVATE and old.session_id is not None:
            raise InvalidArgument("working memory (scope 'session') is never shared; nothing changed")
        fields = {k: getattr(inp, k) for k in AMENDABLE if k != "record"} | record.model_dump()
        if all(v is None for v in fields.values()):
            raise InvalidArgument(f"nothing to amend: give at least one of {', '.join(AMENDABLE)}")
        if inp.supersedes:  # the successor joins the original's namespace (a pool fact stays shared)
            return self._supersede(AgentScope(old.agent_id, scope.pool_writes), old, inp)
        type_ = inp.type or old.type
        importance = inp.importance if inp.importance is not None else old.importance
        content = self.factory.clean_content(inp.content) if inp.content is not None else None
        if content is not None and not content:
            raise InvalidArgument("content is empty after redaction")
        detail = self.factory.clean_detail(inp.content) if inp.content is not None else None
        content_changed = content is not None and (content != old.content or detail != old.detail)
        full = detail or content or old.detail or old.content
        keywords = self.factory.keywords_for(full, inp.keywords) if inp.keywords is not None or content_changed else None
        changes = FragmentChanges(
            content=content if content_changed else None,
            content_hash=content_hash(detail or content) if content_changed and content else None,
            estimated_tokens=self.factory.tokens.count(content) if content_changed and content else None,
            topic=inp.topic,
            keywords=keywords,
            type=inp.type,
            importance=inp.importance,
            ttl_tier=infer_ttl(type_, importance) if (inp.type or inp.importance is not None) else None,
            is_anchor=inp.isAnchor,
            clear_embedding=content_changed,  # the new text's vector is the worker's to make
            tags=self.factory.clean_tags(inp.tags) if inp.tags is not None else None,
            confidence=record.confidence,
            context=self.factory.clean_text(record.context) if record.context is not None else None,
            metadata=record.metadata,
            expires_at=record.expiresAt,
            pinned=record.pinned,
            memory_system=record.memorySystem,
            privacy_scope=record.privacyScope,
            origin_trace=record.originTrace,
            detail=detail,
        )
        fragment = self.store.update(scope, old.id, changes, scope.agent_id, self.clock())
        if emit:
            self._emit(ChangeEvent("amended", fragment.agent_id, (fragment.id,), tuple({old.topic, fragment.topic})))
        return AmendResult(id=fragment.id, fragment=FragmentView.of(fragment), version_archived=True)

    def pin(self, inp: PinInput, ctx: CallContext) -> PinResult:
        """004 §5.1: a pinned memory never expires, decays or gets merged (every lifecycle stage
        keeps it); the change is archived as a version like any amend."""
        return self._set_pin(inp, ctx, pinned=True)

    def unpin(self, inp: PinInput, ctx: CallContext) -> PinResult:
        """Undo pin: the lifecycle treats the memory as any other again."""
        return self._set_pin(inp, ctx, pinned=False)

    def _set_pin(self, inp: PinInput, ctx: CallContext, *, pinned: bool) -> PinResult:
        scope = self._writable(inp.agentId, ctx, pool=True)
        found = self.store.get_many(scope, [inp.id])
        if not found:
            raise NotFound(f"fragment {inp.id!r} not found", missing=(inp.id,))
        refuse_unchangeable(scope, found)
        if found[0].pinned is pinned:
            return PinResult(id=inp.id, pinned=pinned, changed=False)
        if pinned and found[0].session_id is not None:
            raise InvalidArgument(PINNED_SESSION + "; nothing changed")
        fragment = self.store.update(scope, inp.id, FragmentChanges(pinned=pinned), scope.agent_id, self.clock())
        self._emit(ChangeEvent("amended", fragment.agent_id, (fragment.id,), (fragment.topic,), details={"pinned": pinned}))
        return PinResult(id=fragment.id, pinned=fragment.pinned, changed=True)

    def _supersede(self, scope: AgentScope, old: Fragment, inp: AmendInput) -> AmendResult:
        now = self.clock()
        draft = self.factory.draft(
            content=inp.content if inp.content is not None else old.content,
            topic=inp.topic or old.topic,
            type_=inp.type or old.type,
            created_at=now,
            keywords=inp.keywords,
            importance=inp.importance,
            source=f"supersedes:{old.id}",
            is_anchor=bool(inp.isAnchor),
        )
        fragment, _ = self.store.supersede(scope, old.id, NewFragment(draft, scope.agent_id, None, None), SUPERSEDED_IMPORTANCE_FACTOR, now)
        original = self.store.get_many(scope, [old.id])[0]
        self._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,)))
        self._emit(ChangeEvent("amended", original.agent_id, (original.id,), (original.topic,)))
        return AmendResult(
            id=fragment.id,
            superseded_id=old.id,
            fragment=FragmentView.of(fragment),
            original=FragmentView.of(original),
            message=f"{fragment.id} supersedes {old.id} (superseded_by edge; original importance lowered)",
        )

    # ------------------------------------------------------------ retrieval cluster

    def recall(self, inp: RecallInput, ctx: CallContext) -> RecallResult:
        """The cascade of 000 §4: keyword tiers, full text, vectors; fused, ranked, budgeted."""
        started = time.perf_counter()
        try:
            return self.recall_with_vector(inp, ctx, None)
        finally:
            self.observers.recall(time.perf_counter() - started)

    def recall_with_vector(self, inp: RecallInput, ctx: CallContext, vector: np.ndarray | None, *, embed: bool = True) -> RecallResult:
        """recall with the query vector already computed (lets benchmarks time the store alone);
        without one, a text query is embedded here (unless `embed` is false; with a search mode,
        only when the mode needs it)."""
        scope = self._scope(inp.agentId, ctx)
        self._own_session(scope, inp.sessionId, ctx)
        filt = recall_filter(inp, inp.sessionId or ctx.session_id, self.settings.confidence_half_life_days)
        return self.recaller.run(
            scope,
            inp,
            filt,
            vector,
            self.clock(),
            ctx.payload_copies,
            embed=embed,
            settle=lambda: self.settle_for(scope),  # the vector tier runs: its own writes first
        )

    def context(self, inp: ContextInput, ctx: CallContext) -> ContextResult:
        """Core memory (important fragments of the given types) plus the session's working memory."""
        scope = self._scope(inp.agentId, ctx)
        self._own_session(scope, inp.sessionId, ctx)
        now = self.clock()
        due = self.reviews.due(scope, now, self.settings.review_shown)
        result = load_context(self.store, scope, inp, inp.sessionId or ctx.session_id, now, self.factory.tokens, ctx.payload_copies, due)
        shown = {r.id for r in result.reviews or ()}
        self.reviews.shown(scope, [card for card, f in due if f.id in shown], now)  # showing a due review is a review
        return result

    def graph_explore(self, inp: GraphExploreInput, ctx: CallContext) -> GraphResult:
        """Follow caused_by / resolved_by edges (both directions) from a fragment."""
        return explore(self.store, self._scope(inp.agentId, ctx), inp, cast(LinkageStore, self.store))

    # ------------------------------------------------------------ maintenance and telemetry

    def reflect(self, inp: ReflectInput, ctx: CallContext) -> ReflectResult:
        """Turn a session summary into typed fragments, and task feedback into a row."""
        self._own_session(self._scope(inp.agentId, ctx), inp.sessionId, ctx)
        scope = self._writable(inp.agentId, ctx)
        session = inp.sessionId or ctx.session_id
        # The session id stays out of the fragments: they may be read by others (the shared pool).
        plan: list[tuple[str, FragmentType]] = [(inp.summary, FragmentType.FACT)]
        for items, type_ in (
            (inp.decisions, FragmentType.DECISION),
            (inp.errorsResolved, FragmentType.ERROR),
            (inp.newProcedures, FragmentType.PROCEDURE),
            (inp.openQuestions, FragmentType.FACT),
        ):
            plan += [(text, type_) for text in items or [] if text.strip()]
        news = [self._prepare(scope, ctx, content=text, topic=inp.topic, type_=type_, source="reflect") for text, type_ in plan]
        feedback_id: int | None = None
        with self.store.atomic():  # all the fragments and the feedback row, or nothing
            stored = [self.store.insert(scope, new) for new in news]
            if (effect := inp.taskEffectiveness) is not None:
                row = {
                    "session_id": session or "unspecified",
                    "overall_success": effect.overallSuccess,
                    "tool_highlights": effect.toolHighlights,
                    "tool_pain_points": effect.toolPainPoints,
                }
                feedback_id = self.store.add_task_feedback(scope.agent_id, row, self.clock())
        for fragment, is_new in stored:
            if is_new:
                self._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,)))
        created = [ReflectedFragment(id=f.id, type=type_, created=is_new) for (f, is_new), (_, type_) in zip(stored, plan)]
        return ReflectResult(task_feedback_id=feedback_id, fragments=created, count=len(created))

    def tool_feedback(self, inp: ToolFeedbackInput, ctx: CallContext) -> ToolFeedbackResult:
        """Record a utility assessment of a tool call."""
        scope = self._writable(None, ctx)
        self._own_session(scope, inp.sessionId, ctx)
        row = {
            "tool_name": inp.toolName,
            "relevant": inp.relevant,
            "sufficient": inp.sufficient,
            "suggestion": inp.suggestion,
            "context": inp.context,
            "session_id": inp.sessionId or ctx.session_id,
            "trigger_type": inp.triggerType,
        }
        feedback_id = self.store.add_tool_feedback(scope.agent_id, row, self.clock())
        return ToolFeedbackResult(id=feedback_id)

    def feedback(self, inp: FeedbackInput, ctx: CallContext) -> FeedbackResult:
        """004 §5.1: record how a visible memory served (the caller's own row); the score profile 004
        reads it as usage. A memory of another namespace is not found."""
        scope = self._writable(inp.agentId, ctx, pool=True)  # a row of the caller's; the memory itself is not changed
        note = self.factory.clean_text(inp.note) if inp.note is not None else None
        new = NewFeedback(inp.id, inp.event, 1.0 if inp.score is None else inp.score, note or None, ctx.session_id)
        feedback_id = self.store.add_feedback(scope, new, self.clock())
        tally = self.store.feedback_tallies(scope, [inp.id]).get(inp.id)
        return FeedbackResult(id=feedback_id, memory_id=inp.id, event=inp.event, counts=dict(tally.counts) if tally else {})

    def memory_stats(self, inp: MemoryStatsInput, ctx: CallContext) -> StatsResult:
        """Counts by tier and type, embedding coverage, mean utility, feedback, search mode, and
        the last consolidation run that maintained the caller's namespace."""
        scope = self._scope(inp.agentId, ctx)
        feedback = self.store.feedback_counts(scope) or None
        extra: dict[str, object] = {
            "search_mode": self.search_mode(),
            "embedding_model": self.embedder.name if self.embedder else None,
            "feedback": feedback,
        }
        queue = self.review_store.forget_candidates(
            scope, self.clock() - FORGET_CANDIDATE_UNUSED, FORGET_CANDIDATE_UTILITY, FORGET_CANDIDATES_SHOWN
        )
        extra["forget_candidates"] = [
            ForgetCandidate(
                id=f.id,
                preview=preview(f.content),
                utility_score=round(f.utility_score, 4),
                last_used=max(f.created_at, f.accessed_at or f.created_at).isoformat(),
            )
            for f in queue
        ] or None
        queue_counts = cast(EvaluationStore, self.store).evaluation_counts(scope, self.clock().astimezone(UTC).date())
        extra["evaluator"] = EvaluatorStats.model_validate(queue_counts.__dict__)
        last = self.runs.consolidation_runs(scope.agent_id, RunQuery(outcomes=("ok", "error"), limit=1))
        extra |= {"last_consolidation": _run_view(last[0], ctx) if last else None}
        counts = self.store.stats(scope)
        if self.embedder is not None:  # stored without a vector of the current model, working memory apart
            extra["embeddings_pending"] = max(0, int(cast(int, counts["total"])) - int(cast(int, counts["embedded"])))
        return StatsResult.model_validate(counts | extra)

    def memory_consolidate(
        self, inp: ConsolidateInput, ctx: CallContext, progress: Callable[[int, int, str], None] | None = None
    ) -> ConsolidateResult:
        """Run the consolidation pipeline (or the stages named, or a dry run that changes nothing and
        announces nothing); per-stage counts and ids. `progress(done, total, stage)` is optional."""
        scope = self._writable(inp.agentId, ctx, pool=True)  # the pool's rows only as far as the rule allows
        if inp.agentId is None and ctx.agent_id is None:  # an unbound caller (the operator): every namespace
            scope = AgentScope(MAINTENANCE_SCOPE)
        if inp.dryRun:  # a rehearsal, not a run: neither recorded nor announced
            return self.consolidator.run(scope, progress, stages=inp.stages, dry_run=True)
        result = self._recorded_run(scope, "manual", lambda: self.consolidator.run(scope, progress, stages=inp.stages))
        assert result is not None  # a manual run is always due
        return result

    def run_consolidation(
        self, agent: str | None, trigger: RunTrigger, *, due_since: datetime | None = None, progress: Progress | None = None
    ) -> ConsolidateResult | None:
        """A scheduled run (docs/lifecycle.md "Scheduling"): every namespace (`agent` None), or one
        namespace as its own credential's run would change it. Recorded like every run; None:
        not due (a run over that scope started at or after `due_since`)."""
        scope = self._namespace_scope(agent)
        return self._recorded_run(scope, trigger, lambda: self.consolidator.run(scope, progress), due_since)

    def skip_consolidation(self, agent: str | None, trigger: RunTrigger, reason: str) -> None:
        """Record a scheduled run that did not happen (another run held the lock), and count it."""
        scope = self._namespace_scope(agent)
        now = self.clock()
        with self.store.atomic():  # one record, never a run left "running" by a crash in between
            run_id = self.runs.start_consolidation_run(scope.agent_id, NewRun(trigger, now, self.replica))
            if run_id is not None:
                self.runs.finish_consolidation_run(scope.agent_id, run_id, now, "skipped", None, reason)
        self.observers.consolidation_run(trigger, "skipped", 0.0)

    def consolidation_runs(self, limit: int, ctx: CallContext, agent_id: str | None = None) -> ConsolidationRunsResult:
        """The recent runs the caller may see, newest first: its namespace's and the whole-store
        ones (every run for an operator without agentId); a whole-store run's counts, error and
        replica are shown to unbound and maintenance callers only."""
        scope = self._scope(agent_id, ctx)
        if agent_id is None and ctx.agent_id is None:
            scope = AgentScope(MAINTENANCE_SCOPE)
        runs = self.runs.consolidation_runs(scope.agent_id, RunQuery(limit=limit))
        return ConsolidationRunsResult(runs=[_run_view(r, ctx) for r in runs], count=len(runs))

    def _namespace_scope(self, agent: str | None) -> AgentScope:
        if agent is None:
            return AgentScope(MAINTENANCE_SCOPE)
        if agent == DEFAULT_AGENT:  # the pool is its own namespace: the operator's run over it
            return AgentScope(DEFAULT_AGENT)
        return self._writable(agent, CallContext(agent_id=agent), pool=True)

    def _recorded_run(
        self, scope: AgentScope, trigger: RunTrigger, work: Callable[[], ConsolidateResult], due_since: datetime | None = None
    ) -> ConsolidateResult | None:
        """Claim a run in the run record, do `work`, record how it ended, count it, announce it."""
        run_id = self.runs.start_consolidation_run(scope.agent_id, NewRun(trigger, self.clock(), self.replica, due_since))
        if run_id is None:
            return None
        began = time.perf_counter()
        try:
            result = work()
        except Exception as exc:
            self.observers.consolidation_run(trigger, "error", time.perf_counter() - began)
            try:
                self.runs.finish_consolidation_run(scope.agent_id, run_id, self.clock(), "error", None, f"{type(exc).__name__}: {exc}")
            except Exception:
                log.warning("could not record the failed consolidation run %s", run_id, exc_info=True)
            raise
        self.runs.finish_consolidation_run(scope.agent_id, run_id, self.clock(), "ok", stage_counts(result), None)
        self.observers.consolidation_run(trigger, "ok", time.perf_counter() - began)
        # A whole-store run is announced as the shared pool's change: every namespace sees that one.
        agent = DEFAULT_AGENT if scope.is_maintenance else scope.agent_id
        merged = (result.deduplicated or 0) + (result.merged or 0)
        deleted = (result.expired or 0) + (result.confidence_pruned or 0) + (result.retention_expired or 0)
        self._emit(ChangeEvent("consolidated", agent, details={"merged": merged, "deleted": deleted}))
        # The run also embedded what was stored without a vector: 001's "background sync done".
        self._emit(ChangeEvent("synced", agent, details={"timestamp": self.clock().isoformat()}))
        return result

    def summarize_thread(self, inp: SummarizeThreadInput, ctx: CallContext) -> SummarizeThreadResult:
        """004 §5.1: the caller's session's working memory as one episodic memory (summarize.py)."""
        return self.threads.summarize_thread(inp, ctx)

    def _end_idle(self, idle_before: datetime, dry_run: bool) -> tuple[list[str], int]:
        """The consolidation's `working_memory_expired`: expired session handles end (not in a
        dry run), then every idle session (summarize.py)."""
        if not dry_run:
            self.handles.sweep()
        return self.threads.expire_idle(idle_before, quiet=dry_run)

    def end_session(self, session_id: str, ctx: CallContext) -> int:
        """Expunge a finished session's working memory: the caller's own, never another
        namespace's rows that carry the same id. What no summary covers yet becomes one episodic
        summary first, in the same transaction (MEMENTO_SUMMARIZE_ON_SESSION_END)."""
        owner = self._scope(None, ctx).agent_id
        removed = self.threads.end(session_id, owner).removed
        if removed:
            self._emit(ChangeEvent("session_ended", owner, session_id=session_id))
        return removed


def stage_counts(result: ConsolidateResult) -> dict[str, int | float]:
    """A run's per-stage counts as recorded (wire names; the contradiction pairs and statistics left out)."""
    return {k: v for k, v in result.dump().items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _run_view(run: ConsolidationRun, ctx: CallContext) -> ConsolidationRunView:
    """A recorded run as a caller sees it: an agent-bound caller sees that a whole-store run
    happened, not its store-wide counts, error text or replica."""
    whole = run.agent_id in MAINTENANCE_AGENTS
    hidden = whole and ctx.agent_id is not None and not AgentScope(ctx.agent_id).is_maintenance
    return ConsolidationRunView(
        id=run.id,
        trigger=run.trigger,
        agent_id=run.agent_id,
        whole_store=whole,
        started_at=run.started_at.isoformat(),
        finished_at=run.finished_at.isoformat() if run.finished_at else None,
        outcome=run.outcome,
        stages=None if hidden else run.stages,
        error=None if hidden else run.error,
        replica=None if hidden else run.replica,
    )
