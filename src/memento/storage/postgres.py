"""The scale-out backend: PostgreSQL with pgvector, schema `agent_memory` (000 §3).

Isolation. Every unit of work is one transaction that begins with
`set_config('app.current_agent_id', <agent>, true)` — the `SET LOCAL` of 000 §3.6 — so the
row-level security policy on `fragments` decides visibility per request, not per connection.
The application connects as a role that owns nothing and has no BYPASSRLS, so the policy
really binds it. Queries also carry the same scope predicate as the SQLite backend: results
stay right even if someone runs the store as a superuser (which RLS never binds). Under the
policy only leakproof conditions (text equality, not `@@` or `&&`) can use an index, so the
full-text and keyword tiers read trigger-maintained lookup tables with the same policy
(migration 0002) instead of the GIN indexes on `fragments`, and so do tag filters
(`fragment_tags`, 0029) and a delete looking for the rows that link to it
(`fragment_references`, 0030).

PostgresStore composes the parts: connections and transactions (postgres_db.py), fragment writes
(postgres_fragments.py), reads (postgres_queries.py), the retrieval tiers (postgres_search.py, their
statements in postgres_sql.py), the entity graph (postgres_entities.py), bulk copy (postgres_bulk.py);
migrations: postgres_schema.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np

from ..errors import Unavailable
from ..graph import Entity, EntityChanges, EntityLink, NewEntity, NewRelation, Relation
from ..models import AgentScope, Fragment, Link, RelationType
from . import terms as terms_policy
from .access import AccessBuffer, Pending
from .handles import SessionHandle
from .postgres_analytics import PostgresAnalytics
from .postgres_bulk import PostgresBulk
from .postgres_db import SYSTEM, Cursor, PostgresDatabase, retried
from .postgres_entities import PostgresEntities
from .postgres_erasure import PostgresErasure
from .postgres_evaluation import PostgresEvaluation
from .postgres_feedback import PostgresFeedback
from .postgres_fragments import PostgresFragments
from .postgres_handles import PostgresHandles
from .postgres_linkages import PostgresLinkages
from .postgres_queries import PostgresQueries
from .postgres_records import PostgresRecords
from .postgres_reviews import PostgresReviews
from .postgres_runs import AdvisoryRunLock, PostgresRuns
from .postgres_search import MAX_EF_SEARCH, PostgresSearch
from .postgres_skips import PostgresSkips
from .postgres_workmem import PostgresWorkMemory
from .protocol import (
    REINFORCEMENT,
    BreakdownField,
    ErasureTargets,
    EvaluationCounts,
    EvaluationJob,
    EvaluationOutcome,
    FeedbackTally,
    FragmentChanges,
    GrowthPeriod,
    Hit,
    JobStatus,
    Linkage,
    MemoryOverview,
    MergeProposal,
    NewFeedback,
    NewFragment,
    NewLinkage,
    NewSkip,
    ProposalStatus,
    RankFeatures,
    ReviewCard,
    ReviewTarget,
    SearchFilter,
    StoredIdentity,
    StoredReceipt,
    StoredSkip,
    VersionRecord,
)
from .records import RecordQuery, RestoreOutcome
from .runs import ConsolidationRun, NewRun, RunOutcome, RunQuery
from .sequence import SequenceNeighbours
from .workmem import ItemChanges, ItemQuery, Section, WorkItem, WorkMemorySummary, WorkspaceRecord

__all__ = ["SYSTEM", "PostgresStore", "retried"]

log = logging.getLogger(__name__)


class PostgresStore:
    """The Store protocol on PostgreSQL (pgvector, GIN, tsvector, row-level security)."""

    def __init__(
        self,
        dsn: str,
        *,
        embedding_model: str | None,
        dimensions: int | None,
        max_connections: int = 20,
        idle_timeout_ms: int = 30_000,
        conn_timeout_ms: int = 10_000,
        query_timeout_ms: int = 30_000,
        ef_search: int = 512,
        text_scoring: terms_policy.Scoring = terms_policy.DEFAULT_SCORING,
    ) -> None:
        self.embedding_model = embedding_model if dimensions else None
        self.dimensions = dimensions
        self.ef_search = max(1, min(ef_search, MAX_EF_SEARCH))
        self._access = AccessBuffer(self._write_access)
        self._closed = False
        self.db = PostgresDatabase(
            dsn,
            max_connections=max_connections,
            idle_timeout_ms=idle_timeout_ms,
            conn_timeout_ms=conn_timeout_ms,
            query_timeout_ms=query_timeout_ms,
        )
        self._tx = self.db.tx  # the short name benchmarks use
        self.fragments = PostgresFragments(self.db, self.embedding_model)
        self.queries = PostgresQueries(self.db, self.embedding_model)
        self.search = PostgresSearch(self.db, self.embedding_model, self.ef_search, text_scoring)
        self.bulk = PostgresBulk(self.db)
        self.entities = PostgresEntities(self.db, self.embedding_model)
        self.erasure = PostgresErasure(self.db)
        self.feedback = PostgresFeedback(self.db, self.embedding_model)
        self.linkages = PostgresLinkages(self.db)
        self.evaluation = PostgresEvaluation(self.db)
        self.skiplist = PostgresSkips(self.db)
        self.session_handles = PostgresHandles(self.db)
        self.records = PostgresRecords(self.db, self.embedding_model)
        self.workmem = PostgresWorkMemory(self.db)
        self.runs = PostgresRuns(self.db)
        self.reviews = PostgresReviews(self.db)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction around several store calls (a unit of work): all or nothing. The
        calls inside set their own row-level security context, as they would alone."""
        with self.db.tx(SYSTEM):
            yield

    @contextmanager
    def reading(self, scope: AgentScope) -> Iterator[None]:
        """The calls inside are `scope`'s reads (Store.reading)."""
        with self.db.reading(scope.agent_id, scope.pool_writes):
            yield

    def unit_of_work_open(self) -> bool:
        """Whether this thread is inside atomic() or rehearsal() (its reads stay on this thread)."""
        return self.db.in_transaction()

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        """The store calls inside run for real in one transaction that is rolled back (a dry run)."""
        with self.db.rehearsal():
            yield

    def ping(self) -> None:
        self.db.ping()

    def migrations(self) -> list[str]:
        return self.db.migrations()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.search.refresher.close()  # no count still reading the store
        try:
            self._access.close()
        except Unavailable as exc:  # shutting down during an outage: only access counts are lost
            log.warning("access statistics not saved: %s", exc)
        finally:
            self.db.close()

    # ------------------------------------------------------------ access statistics

    def record_access(self, ids: Sequence[str], at: datetime) -> None:
        """Buffer access statistics; they are written in batches (storage/access.py)."""
        self._access.record(ids, at)

    def flush_access(self) -> None:
        """Write the buffered access statistics now (views and consolidation read settled counts)."""
        self._access.flush()

    def _write_access(self, pending: Pending) -> Pending:
        """Rows another transaction holds locked are skipped and handed back for the next batch:
        waiting for them could deadlock with a writer that locks the same rows in another order
        (a forget cleaning the links of many agents' fragments), and statistics can wait."""
        ids = sorted(pending)
        with self.db.tx(SYSTEM) as cur:
            cur.execute(
                "WITH v AS (SELECT * FROM unnest(%s::text[], %s::int[], %s::timestamptz[]) AS v(id, n, at)),"
                " free AS (SELECT f.id FROM agent_memory.fragments f JOIN v ON f.id = v.id"
                " ORDER BY f.id FOR UPDATE OF f SKIP LOCKED)"
                " UPDATE agent_memory.fragments f SET access_count = f.access_count + v.n,"
                " accessed_at = GREATEST(f.accessed_at, v.at), confidence = LEAST(1.0, f.confidence + %s * v.n)"  # 001 §4.3
                " FROM v WHERE f.id = v.id AND f.id IN (SELECT id FROM free) RETURNING f.id",
                (ids, [pending[i][0] for i in ids], [pending[i][1] for i in ids], REINFORCEMENT),
            )
            done = {r["id"] for r in cur.fetchall()}
            skipped = [i for i in ids if i not in done]
            if not skipped:
                return {}
            # locked, or deleted meanwhile: only the live ones wait for the next batch
            cur.execute("SELECT id FROM agent_memory.fragments WHERE id = ANY(%s)", (skipped,))
            return {r["id"]: pending[r["id"]] for r in cur.fetchall()}

    # ------------------------------------------------------------ writes (postgres_fragments.py)

    def insert(self, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]:
        return self.fragments.insert(scope, new)

    def update(self, scope: AgentScope, fragment_id: str, changes: FragmentChanges, amended_by: str, now: datetime) -> Fragment:
        return self.fragments.update(scope, fragment_id, changes, amended_by, now)

    def supersede(self, scope: AgentScope, old_id: str, new: NewFragment, importance_factor: float, now: datetime) -> tuple[Fragment, bool]:
        return self.fragments.supersede(scope, old_id, new, importance_factor, now)

    def add_version(self, scope: AgentScope, fragment_id: str, version: VersionRecord, now: datetime) -> int:
        return self.fragments.add_version(scope, fragment_id, version, now)

    def delete(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        return self.fragments.delete(scope, ids)

    def soft_delete(self, scope: AgentScope, ids: Sequence[str], now: datetime) -> list[str]:
        return self.fragments.soft_delete(scope, ids, now)

    def restore(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        return self.fragments.restore(scope, ids)

    def expunge_session(self, session_id: str, agent_id: str) -> int:
        return self.fragments.expunge_session(session_id, agent_id)

    def add_link(self, scope: AgentScope, from_id: str, to_id: str, relation: RelationType, now: datetime) -> bool:
        return self.fragments.add_link(scope, from_id, to_id, relation, now)

    def set_embedding(self, fragment_id: str, vector: np.ndarray) -> None:
        self.fragments.set_embedding(fragment_id, vector)

    def clear_embeddings(self) -> int:
        return self.fragments.clear_embeddings()

    def reanalyse_text(self, after_seq: int, limit: int) -> tuple[int, int]:
        return self.fragments.reanalyse_text(after_seq, limit)

    def _insert(self, cur: Cursor, scope: AgentScope, new: NewFragment) -> tuple[Fragment, bool]:
        return self.fragments._insert(cur, scope, new)

    def _delete(self, cur: Cursor, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        return self.fragments._delete(cur, scope, ids)

    # ------------------------------------------------------------ reads (postgres_queries.py)

    def session_owners(self, session_id: str) -> list[str]:
        return self.queries.session_owners(session_id)

    def session_tokens(self, agent_id: str, session_id: str) -> int:
        return self.queries.session_tokens(agent_id, session_id)

    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
        return self.queries.get_many(scope, ids)

    def find_by_topic(self, scope: AgentScope, topic: str) -> list[Fragment]:
        return self.queries.find_by_topic(scope, topic)

    def list_fragments(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]:
        return self.queries.list_fragments(scope, filt, limit)

    def recent(self, scope: AgentScope, filt: SearchFilter, limit: int) -> list[Fragment]:
        return self.queries.recent(scope, filt, limit)

    def page(self, scope: AgentScope, filt: SearchFilter, before_seq: int | None, limit: int) -> list[Fragment]:
        return self.queries.page(scope, filt, before_seq, limit)

    def topics(self, scope: AgentScope, prefix: str, limit: int) -> list[tuple[str, int]]:
        return self.queries.topics(scope, prefix, limit)

    def ids_with_prefix(self, scope: AgentScope, prefix: str, limit: int) -> list[str]:
        return self.queries.ids_with_prefix(scope, prefix, limit)

    def sequence_neighbours(
        self, scope: AgentScope, ids: Sequence[str], filt: SearchFilter, window: timedelta, steps: int = 1
    ) -> dict[str, SequenceNeighbours]:
        return self.queries.sequence_neighbours(scope, ids, filt, window, steps)

    def rank_features(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, RankFeatures]:
        return self.queries.rank_features(scope, ids)

    def count(self, scope: AgentScope, filt: SearchFilter, at_most: int | None = None) -> int:
        return self.queries.count(scope, filt, at_most)

    def neighbours(
        self, scope: AgentScope, ids: Sequence[str], relations: Sequence[RelationType], limit: int
    ) -> list[tuple[Link, Fragment]]:
        return self.queries.neighbours(scope, ids, relations, limit)

    def versions(self, scope: AgentScope, fragment_id: str) -> list[dict[str, object]]:
        return self.queries.versions(scope, fragment_id)

    def merged_into(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, str]:
        return self.queries.merged_into(scope, ids)

    def hidden_states(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, tuple[datetime | None, datetime | None]]:
        return self.queries.hidden_states(scope, ids)

    def missing_embeddings(self, scope: AgentScope, limit: int, after_seq: int = 0) -> list[tuple[int, str, str]]:
        return self.queries.missing_embeddings(scope, limit, after_seq)

    def size_summary(self) -> dict[str, Any]:
        return self.queries.size_summary()

    def add_tool_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int:
        return self.queries.add_tool_feedback(agent_id, row, now)

    def add_task_feedback(self, agent_id: str, row: dict[str, object], now: datetime) -> int:
        return self.queries.add_task_feedback(agent_id, row, now)

    def task_feedback(self, session_id: str) -> list[dict[str, object]]:
        return self.queries.task_feedback(session_id)

    def tool_feedback(self, feedback_id: int) -> dict[str, object] | None:
        return self.queries.tool_feedback(feedback_id)

    def stats(self, scope: AgentScope) -> dict[str, object]:
        return self.queries.stats(scope)

    # ------------------------------------------------------------ 004 feedback (postgres_feedback.py)

    def add_feedback(self, scope: AgentScope, new: NewFeedback, now: datetime) -> int:
        return self.feedback.add_feedback(scope, new, now)

    def feedback_tallies(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, FeedbackTally]:
        return self.feedback.feedback_tallies(scope, ids)

    def feedback_counts(self, scope: AgentScope) -> dict[str, int]:
        return self.feedback.feedback_counts(scope)

    def embeddings_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self.feedback.embeddings_of(scope, ids)

    def recent_embeddings(self, scope: AgentScope, limit: int) -> list[tuple[str, np.ndarray]]:
        return self.feedback.recent_embeddings(scope, limit)

    # ------------------------------------------------------------ the evaluator's queue (postgres_evaluation.py)

    def enqueue_evaluations(self, scope: AgentScope, fragment_ids: Sequence[str], now: datetime) -> int:
        return self.evaluation.enqueue_evaluations(scope, fragment_ids, now)

    def enqueue_unevaluated(self, scope: AgentScope, now: datetime, limit: int) -> int:
        return self.evaluation.enqueue_unevaluated(scope, now, limit)

    def claim_evaluations(
        self, now: datetime, lease_until: datetime, limit: int, exclude_agents: Sequence[str] = ()
    ) -> list[EvaluationJob]:
        return self.evaluation.claim_evaluations(now, lease_until, limit, exclude_agents)

    def claim_evaluation(
        self, job_id: int, now: datetime, lease_until: datetime, exclude_agents: Sequence[str] = ()
    ) -> EvaluationJob | None:
        return self.evaluation.claim_evaluation(job_id, now, lease_until, exclude_agents)

    def queued_evaluation_ids(self, fragment_ids: Sequence[str]) -> list[int]:
        return self.evaluation.queued_evaluation_ids(fragment_ids)

    def finish_evaluation(self, job: EvaluationJob, outcome: EvaluationOutcome, now: datetime) -> bool:
        return self.evaluation.finish_evaluation(job, outcome, now)

    def fail_evaluation(self, job_id: int, error: str, now: datetime, retry_at: datetime | None) -> None:
        self.evaluation.fail_evaluation(job_id, error, now, retry_at)

    def defer_evaluation(self, job_id: int, until: datetime) -> None:
        self.evaluation.defer_evaluation(job_id, until)

    def evaluation_jobs(self, scope: AgentScope, status: JobStatus | None, limit: int) -> list[EvaluationJob]:
        return self.evaluation.evaluation_jobs(scope, status, limit)

    def requeue_evaluations(self, scope: AgentScope, ids: Sequence[int], now: datetime) -> int:
        return self.evaluation.requeue_evaluations(scope, ids, now)

    def evaluation_counts(self, scope: AgentScope, day: date) -> EvaluationCounts:
        return self.evaluation.evaluation_counts(scope, day)

    def add_evaluation_tokens(self, agent_id: str, day: date, provider: str, tokens: int) -> None:
        self.evaluation.add_evaluation_tokens(agent_id, day, provider, tokens)

    def evaluation_tokens(self, day: date) -> dict[str, int]:
        return self.evaluation.evaluation_tokens(day)

    def merge_proposals(self, scope: AgentScope, status: ProposalStatus | None, limit: int) -> list[MergeProposal]:
        return self.evaluation.merge_proposals(scope, status, limit)

    def set_proposal_status(self, scope: AgentScope, proposal_id: int, status: ProposalStatus) -> MergeProposal:
        return self.evaluation.set_proposal_status(scope, proposal_id, status)

    # ------------------------------------------------------------ 003 linkages (postgres_linkages.py)

    def add_linkages(self, scope: AgentScope, fragment_id: str, linkages: Sequence[NewLinkage], now: datetime) -> list[Linkage]:
        return self.linkages.add_linkages(scope, fragment_id, linkages, now)

    def linkages_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, list[Linkage]]:
        return self.linkages.linkages_of(scope, ids)

    def linkages_to(self, scope: AgentScope, ids: Sequence[str]) -> list[Linkage]:
        return self.linkages.linkages_to(scope, ids)

    # ------------------------------------------------------------ retrieval tiers (postgres_search.py)

    def keyword_search(self, scope: AgentScope, keywords: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        return self.search.keyword_search(scope, keywords, filt, limit)

    def text_search(self, scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        return self.search.text_search(scope, terms, filt, limit)

    def text_scores(self, scope: AgentScope, terms: Sequence[str], ids: Sequence[str]) -> dict[str, float]:
        return self.search.text_scores(scope, terms, ids)

    def vector_search(self, scope: AgentScope, vector: np.ndarray, filt: SearchFilter, limit: int) -> list[Hit]:
        return self.search.vector_search(scope, vector, filt, limit)

    def _selective_terms(self, cur: Cursor, scope: AgentScope, terms: list[str]) -> list[str]:
        return self.search.selective_terms(cur, scope, terms)

    def _scope_size(self, cur: Cursor, scope: AgentScope) -> int:
        return self.search.scope_size(cur, scope)

    # ------------------------------------------------------------ bulk copy (postgres_bulk.py)

    def embedding_shapes(self) -> list[tuple[str, int]]:
        return self.bulk.embedding_shapes()

    def count_rows(self, table: str) -> int:
        return self.bulk.count_rows(table)

    def export_rows(self, table: str, after: int, limit: int) -> list[dict[str, object]]:
        return self.bulk.export_rows(table, after, limit)

    def import_rows(self, table: str, rows: Sequence[dict[str, object]]) -> int:
        return self.bulk.import_rows(table, rows)

    def finish_import(self) -> None:
        self.bulk.finish_import()

    # ------------------------------------------------------------ entity graph (postgres_entities.py)

    def upsert_entities(self, scope: AgentScope, entities: Sequence[NewEntity], now: datetime) -> list[tuple[Entity, bool]]:
        return self.entities.upsert_entities(scope, entities, now)

    def get_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[Entity]:
        return self.entities.get_entities(scope, ids)

    def entities_named(self, scope: AgentScope, names: Sequence[str]) -> list[Entity]:
        return self.entities.entities_named(scope, names)

    def list_entities(
        self, scope: AgentScope, *, entity_type: str | None, name_contains: str | None, limit: int, offset: int
    ) -> tuple[list[Entity], int]:
        return self.entities.list_entities(scope, entity_type=entity_type, name_contains=name_contains, limit=limit, offset=offset)

    def update_entity(self, scope: AgentScope, entity_id: str, changes: EntityChanges, now: datetime) -> Entity:
        return self.entities.update_entity(scope, entity_id, changes, now)

    def delete_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        return self.entities.delete_entities(scope, ids)

    def entity_vectors(self, scope: AgentScope) -> list[tuple[str, np.ndarray]]:
        return self.entities.entity_vectors(scope)

    def upsert_relations(self, scope: AgentScope, relations: Sequence[NewRelation], now: datetime) -> list[tuple[Relation, bool]]:
        return self.entities.upsert_relations(scope, relations, now)

    def get_relations(self, scope: AgentScope, ids: Sequence[str]) -> list[Relation]:
        return self.entities.get_relations(scope, ids)

    def list_relations(
        self, scope: AgentScope, *, entity_id: str | None, relation_type: str | None, limit: int, offset: int
    ) -> tuple[list[Relation], int]:
        return self.entities.list_relations(scope, entity_id=entity_id, relation_type=relation_type, limit=limit, offset=offset)

    def relations_of(self, scope: AgentScope, entity_ids: Sequence[str], min_strength: float) -> list[Relation]:
        return self.entities.relations_of(scope, entity_ids, min_strength)

    def delete_relations(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        return self.entities.delete_relations(scope, ids)

    def link_entities(self, scope: AgentScope, links: Sequence[tuple[str, str, float]], now: datetime) -> int:
        return self.entities.link_entities(scope, links, now)

    def entity_links(self, scope: AgentScope, *, entity_ids: Sequence[str] = (), fragment_ids: Sequence[str] = ()) -> list[EntityLink]:
        return self.entities.entity_links(scope, entity_ids=entity_ids, fragment_ids=fragment_ids)

    def move_entity_links(self, scope: AgentScope, from_fragment: str, to_fragment: str, now: datetime) -> int:
        return self.entities.move_entity_links(scope, from_fragment, to_fragment, now)

    def graph_counts(self, scope: AgentScope) -> dict[str, int]:
        return self.entities.graph_counts(scope)

    # ------------------------------------------------------------ analytics (postgres_analytics.py)

    def memory_overview(self, scope: AgentScope, now: datetime, half_life_days: float, low_below: float) -> MemoryOverview:
        return PostgresAnalytics(self.db).memory_overview(scope, now, half_life_days, low_below)

    def memory_growth(self, scope: AgentScope, period: GrowthPeriod, limit: int) -> list[tuple[str, int]]:
        return PostgresAnalytics(self.db).memory_growth(scope, period, limit)

    def type_counts(self, scope: AgentScope) -> dict[str, int]:
        return PostgresAnalytics(self.db).type_counts(scope)

    def field_counts(self, scope: AgentScope, name: BreakdownField) -> dict[str, int]:
        return PostgresAnalytics(self.db).field_counts(scope, name)

    def tag_counts(self, scope: AgentScope, limit: int, offset: int) -> tuple[list[tuple[str, int]], int]:
        return PostgresAnalytics(self.db).tag_counts(scope, limit, offset)

    def confidence_histogram(self, scope: AgentScope, now: datetime, half_life_days: float, buckets: int) -> list[int]:
        return PostgresAnalytics(self.db).confidence_histogram(scope, now, half_life_days, buckets)

    # ------------------------------------------------------------ erasure (postgres_erasure.py)

    def erasure_targets(self, scope: AgentScope, ids: Sequence[str], topic: str | None = None) -> ErasureTargets:
        return self.erasure.erasure_targets(scope, ids, topic)

    def erase(self, scope: AgentScope, targets: ErasureTargets) -> dict[str, int]:
        return self.erasure.erase(scope, targets)

    def scrub(self, agents: Sequence[str]) -> dict[str, int]:
        return self.erasure.scrub(agents)

    def save_receipt(self, receipt: StoredReceipt) -> None:
        self.erasure.save_receipt(receipt)

    def get_receipt(self, scope: AgentScope, receipt_id: str) -> StoredReceipt | None:
        return self.erasure.get_receipt(scope, receipt_id)

    def erased_hashes(self, agent_id: str) -> set[str]:
        return self.erasure.erased_hashes(agent_id)

    def erasure_residue(self, scope: AgentScope, receipt: StoredReceipt, ids: Sequence[str]) -> dict[str, int]:
        return self.erasure.erasure_residue(scope, receipt, ids)

    # ------------------------------------------------------------ whole records (postgres_records.py)

    def record_owners(self, scope: AgentScope, query: RecordQuery) -> dict[str, int]:
        return self.records.record_owners(scope, query)

    def record_page(self, scope: AgentScope, table: str, query: RecordQuery, after: int, limit: int) -> list[dict[str, object]]:
        return self.records.record_page(scope, table, query, after, limit)

    def restore_records(self, scope: AgentScope, records: Sequence[tuple[str, dict[str, object]]]) -> RestoreOutcome:
        return self.records.restore_records(scope, records)

    # ------------------------------------------------------------ 003 skip list and identity crystal (postgres_skips.py)

    def add_skip(self, scope: AgentScope, new: NewSkip, now: datetime) -> StoredSkip:
        return self.skiplist.add_skip(scope, new, now)

    def skip_entries(self, scope: AgentScope, now: datetime) -> list[StoredSkip]:
        return self.skiplist.skip_entries(scope, now)

    def remove_skip(self, scope: AgentScope, skip_id: str, now: datetime) -> bool:
        return self.skiplist.remove_skip(scope, skip_id, now)

    def add_identity(self, scope: AgentScope, snapshot: StoredIdentity) -> StoredIdentity:
        return self.skiplist.add_identity(scope, snapshot)

    def identities(self, scope: AgentScope, limit: int) -> tuple[list[StoredIdentity], int]:
        return self.skiplist.identities(scope, limit)

    def drop_identities_quoting(self, scope: AgentScope, needles: Sequence[str]) -> int:
        return self.skiplist.drop_identities_quoting(scope, needles)

    # ------------------------------------------------------------ 003 working memory (postgres_workmem.py)

    def add_item(self, scope: AgentScope, item: WorkItem) -> None:
        self.workmem.add_item(scope, item)

    def get_item(self, scope: AgentScope, item_id: str) -> WorkItem | None:
        return self.workmem.get_item(scope, item_id)

    def update_item(self, scope: AgentScope, item_id: str, changes: ItemChanges, now: datetime) -> WorkItem | None:
        return self.workmem.update_item(scope, item_id, changes, now)

    def delete_item(self, scope: AgentScope, item_id: str) -> bool:
        return self.workmem.delete_item(scope, item_id)

    def list_items(self, scope: AgentScope, query: ItemQuery) -> tuple[list[WorkItem], int]:
        return self.workmem.list_items(scope, query)

    def sections(self, scope: AgentScope) -> list[Section]:
        return self.workmem.sections(scope)

    def put_section(self, scope: AgentScope, section: str, content: str, now: datetime, max_sections: int) -> tuple[Section, bool]:
        return self.workmem.put_section(scope, section, content, now, max_sections)

    def add_sections(self, scope: AgentScope, names: Sequence[str], now: datetime) -> int:
        return self.workmem.add_sections(scope, names, now)

    def open_workspace(self, scope: AgentScope, name: str, sections: Sequence[str], now: datetime) -> bool:
        return self.workmem.open_workspace(scope, name, sections, now)

    def workspace_of(self, scope: AgentScope) -> WorkspaceRecord | None:
        return self.workmem.workspace_of(scope)

    def list_workspaces(self, scope: AgentScope) -> list[WorkspaceRecord]:
        return self.workmem.list_workspaces(scope)

    def working_memory_summary(self, scope: AgentScope) -> WorkMemorySummary:
        return self.workmem.working_memory_summary(scope)

    # ------------------------------------------------------------ consolidation runs (migration 0016, postgres_runs.py)

    def start_consolidation_run(self, scope_agent: str, new: NewRun) -> str | None:
        return self.runs.start_consolidation_run(scope_agent, new)

    def finish_consolidation_run(
        self, scope_agent: str, run_id: str, finished_at: datetime, outcome: RunOutcome, stages: dict[str, Any] | None, error: str | None
    ) -> None:
        self.runs.finish_consolidation_run(scope_agent, run_id, finished_at, outcome, stages, error)

    def consolidation_runs(self, scope_agent: str, query: RunQuery) -> list[ConsolidationRun]:
        return self.runs.consolidation_runs(scope_agent, query)

    def consolidation_lock(self) -> AdvisoryRunLock:
        return self.runs.consolidation_lock()

    # ------------------------------------------------------------ 004 §4.2 review cards, the forget queue (postgres_reviews.py)

    def review_targets(self, scope: AgentScope, top: int) -> list[ReviewTarget]:
        return self.reviews.review_targets(scope, top)

    def review_cards(self, scope: AgentScope, due_before: datetime | None, limit: int) -> list[ReviewCard]:
        return self.reviews.review_cards(scope, due_before, limit)

    def put_reviews(self, scope: AgentScope, cards: Sequence[ReviewCard], drop: Sequence[str]) -> None:
        self.reviews.put_reviews(scope, cards, drop)

    def derived_sources(self, scope: AgentScope, ids: Sequence[str]) -> set[str]:
        return self.reviews.derived_sources(scope, ids)

    def forget_candidates(self, scope: AgentScope, unused_before: datetime, below_utility: float, limit: int) -> list[Fragment]:
        return self.reviews.forget_candidates(scope, unused_before, below_utility, limit)

    # ------------------------------------------------------------ server-wide secrets (migration 0024)

    @retried
    def server_secret(self, name: str, candidate: bytes, now: datetime) -> bytes:
        with self.db.tx(SYSTEM) as cur:  # one transaction: the first writer wins, everyone reads its value
            cur.execute(
                "INSERT INTO agent_memory.server_secrets (name, value, created_at) VALUES (%s, %s, %s) ON CONFLICT (name) DO NOTHING",
                (name, candidate, now),
            )
            cur.execute("SELECT value FROM agent_memory.server_secrets WHERE name = %s", (name,))
            row = cur.fetchone()
            assert row is not None
            return bytes(row["value"])

    # ------------------------------------------------------------ MCP 2026-07-28 session handles (postgres_handles.py)

    def add_handle(self, scope: AgentScope, handle: SessionHandle, now: datetime, limit: int) -> SessionHandle:
        return self.session_handles.add_handle(scope, handle, now, limit)

    def use_handle(self, scope: AgentScope, digest: str, principal: str, now: datetime) -> SessionHandle | None:
        return self.session_handles.use_handle(scope, digest, principal, now)

    def drop_handle(self, scope: AgentScope, digest: str, principal: str, *, expired_by: datetime | None = None) -> SessionHandle | None:
        return self.session_handles.drop_handle(scope, digest, principal, expired_by=expired_by)

    def expired_handles(self, now: datetime, limit: int) -> list[SessionHandle]:
        return self.session_handles.expired_handles(now, limit)
