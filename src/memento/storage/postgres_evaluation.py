"""The evaluator's durable queue on PostgreSQL (migration 0017, row-level security per agent):
the same semantics as SQLite's (sqlite_evaluation.py). Workers on every replica claim with
`FOR UPDATE SKIP LOCKED`: a job one worker holds is skipped by the others, never waited for."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from psycopg.types.json import Jsonb

from ..errors import NotFound
from ..models import AgentScope
from .postgres_db import SYSTEM, Cursor, PostgresDatabase, retried
from .protocol import EvaluationCounts, EvaluationJob, EvaluationOutcome, JobStatus, MergeProposal, ProposalStatus
from .sqlfilter import live_sql
from .utility import utility

MAX_ERROR = 500
JOB_COLUMNS = "id, fragment_id, agent_id, kind, status, attempts, next_attempt_at, last_error, enqueued_at, finished_at, result"


def _own(scope: AgentScope, alias: str) -> tuple[str, list[Any]]:
    """The queue rows a scope reads and changes (the policy allows no more; said again here)."""
    return ("TRUE", []) if scope.is_maintenance else (f"{alias}.agent_id = %s", [scope.agent_id])


def _job(row: dict[str, Any]) -> EvaluationJob:
    return EvaluationJob(**{k: row[k] for k in JOB_COLUMNS.split(", ")})


def _proposal(row: dict[str, Any]) -> MergeProposal:
    return MergeProposal(
        id=row["id"],
        agent_id=row["agent_id"],
        from_id=row["from_id"],
        to_id=row["to_id"],
        similarity=float(row["similarity"]),
        reason=row["reason"],
        status=row["status"],
        created_at=row["created_at"],
    )


class PostgresEvaluation:
    """Every statement in a transaction whose row-level security context is the scope's agent
    (the maintenance agent for the worker's claims)."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    @retried
    def enqueue_evaluations(self, scope: AgentScope, fragment_ids: Sequence[str], now: datetime) -> int:
        if not fragment_ids:
            return 0
        own, params = _own(scope, "f")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "INSERT INTO agent_memory.evaluation_jobs (fragment_id, agent_id, next_attempt_at, enqueued_at)"
                f" SELECT f.id, f.agent_id, %s, %s FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {own}"
                f" AND f.session_id IS NULL AND {live_sql('f', '%s')} ON CONFLICT DO NOTHING",
                [now, now, list(fragment_ids), *params, now],
            )
            return int(cur.rowcount)

    @retried
    def enqueue_unevaluated(self, scope: AgentScope, now: datetime, limit: int) -> int:
        own, params = _own(scope, "f")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "INSERT INTO agent_memory.evaluation_jobs (fragment_id, agent_id, next_attempt_at, enqueued_at)"
                f" SELECT f.id, f.agent_id, %s, %s FROM agent_memory.fragments f WHERE {own} AND f.session_id IS NULL AND f.judged_utility IS NULL"
                f" AND {live_sql('f', '%s')}"
                " AND NOT EXISTS (SELECT 1 FROM agent_memory.evaluation_jobs j WHERE j.fragment_id = f.id)"
                " ORDER BY f.seq LIMIT %s ON CONFLICT DO NOTHING",
                [now, now, *params, now, int(limit)],
            )
            return int(cur.rowcount)

    @retried
    def claim_evaluations(
        self, now: datetime, lease_until: datetime, limit: int, exclude_agents: Sequence[str] = ()
    ) -> list[EvaluationJob]:
        with self.db.tx(SYSTEM) as cur:
            cur.execute(
                f"UPDATE agent_memory.evaluation_jobs SET status = 'running', attempts = attempts + 1, next_attempt_at = %s"
                " WHERE id IN (SELECT id FROM agent_memory.evaluation_jobs WHERE status IN ('queued', 'running')"
                " AND next_attempt_at <= %s AND NOT (agent_id = ANY(%s)) ORDER BY next_attempt_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
                f" RETURNING {JOB_COLUMNS}",
                (lease_until, now, list(exclude_agents), int(limit)),
            )
            return sorted((_job(r) for r in cur.fetchall()), key=lambda j: j.id)

    @retried
    def claim_evaluation(
        self, job_id: int, now: datetime, lease_until: datetime, exclude_agents: Sequence[str] = ()
    ) -> EvaluationJob | None:
        with self.db.tx(SYSTEM) as cur:
            cur.execute(
                "UPDATE agent_memory.evaluation_jobs SET status = 'running', attempts = attempts + 1, next_attempt_at = %s"
                " WHERE id = (SELECT id FROM agent_memory.evaluation_jobs WHERE id = %s AND status IN ('queued', 'running')"
                " AND next_attempt_at <= %s AND NOT (agent_id = ANY(%s)) FOR UPDATE SKIP LOCKED)"
                f" RETURNING {JOB_COLUMNS}",
                (lease_until, int(job_id), now, list(exclude_agents)),
            )
            row = cur.fetchone()
            return _job(row) if row is not None else None

    def queued_evaluation_ids(self, fragment_ids: Sequence[str]) -> list[int]:
        if not fragment_ids:
            return []
        with self.db.tx(SYSTEM) as cur:
            cur.execute(
                "SELECT id FROM agent_memory.evaluation_jobs WHERE status = 'queued' AND fragment_id = ANY(%s) ORDER BY id",
                (list(fragment_ids),),
            )
            return [int(r["id"]) for r in cur.fetchall()]

    @retried
    def finish_evaluation(self, job: EvaluationJob, outcome: EvaluationOutcome, now: datetime) -> bool:
        with self.db.tx(job.agent_id) as cur:
            cur.execute("SELECT status FROM agent_memory.evaluation_jobs WHERE id = %s FOR UPDATE", (job.id,))
            found = cur.fetchone()
            if found is None or found["status"] != "running":
                return False
            cur.execute(
                "SELECT importance, access_count, COALESCE(accessed_at, created_at) AS last FROM agent_memory.fragments"
                " WHERE id = %s AND agent_id = %s AND deleted_at IS NULL FOR UPDATE",
                (job.fragment_id, job.agent_id),
            )
            memory = cur.fetchone()
            if memory is None:
                return False
            judged = float(outcome.utility)
            score = utility(memory["importance"], memory["access_count"], memory["last"], now, outcome.half_life_days, judged)
            cur.execute(
                "UPDATE agent_memory.fragments SET utility_score = %s, judged_utility = %s, verified_at = %s WHERE id = %s",
                (score, judged, now, job.fragment_id),
            )
            own = set(self._own_live(cur, job.agent_id, [*outcome.contradicts, *(m[0] for m in outcome.merges)], now))
            for target in dict.fromkeys(outcome.contradicts):
                if target in own and target != job.fragment_id:
                    self._link(cur, job.fragment_id, target, now)
            for to_id, similarity, reason in outcome.merges:
                if to_id in own and to_id != job.fragment_id:
                    cur.execute(
                        "INSERT INTO agent_memory.merge_proposals (agent_id, from_id, to_id, similarity, reason, created_at)"
                        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (job.agent_id, job.fragment_id, to_id, float(similarity), reason, now),
                    )
            cur.execute(
                "UPDATE agent_memory.evaluation_jobs SET status = 'done', finished_at = %s, last_error = NULL, result = %s WHERE id = %s",
                (now, Jsonb(outcome.result), job.id),
            )
            return True

    @staticmethod
    def _own_live(cur: Cursor, agent_id: str, ids: Sequence[str], now: datetime) -> list[str]:
        if not ids:
            return []
        cur.execute(
            f"SELECT f.id FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND f.agent_id = %s AND {live_sql('f', '%s')}",
            (list(ids), agent_id, now),
        )
        return [r["id"] for r in cur.fetchall()]

    @staticmethod
    def _link(cur: Cursor, from_id: str, to_id: str, now: datetime) -> None:
        """A `contradicts` link, unless the two are linked already (an existing relation stays)."""
        cur.execute(
            "INSERT INTO agent_memory.fragment_links (from_id, to_id, relation_type, created_at) VALUES (%s, %s, 'contradicts', %s)"
            " ON CONFLICT DO NOTHING",
            (from_id, to_id, now),
        )
        if cur.rowcount:
            cur.execute(
                "UPDATE agent_memory.fragments SET linked_to = array_append(linked_to, %s) WHERE id = %s AND NOT (%s = ANY(linked_to))",
                (to_id, from_id, to_id),
            )

    @retried
    def fail_evaluation(self, job_id: int, error: str, now: datetime, retry_at: datetime | None) -> None:
        with self.db.tx(SYSTEM) as cur:
            if retry_at is None:
                cur.execute(
                    "UPDATE agent_memory.evaluation_jobs SET status = 'dead', last_error = %s, finished_at = %s WHERE id = %s",
                    (error[:MAX_ERROR], now, job_id),
                )
            else:
                cur.execute(
                    "UPDATE agent_memory.evaluation_jobs SET status = 'queued', last_error = %s, next_attempt_at = %s WHERE id = %s",
                    (error[:MAX_ERROR], retry_at, job_id),
                )

    @retried
    def defer_evaluation(self, job_id: int, until: datetime) -> None:
        with self.db.tx(SYSTEM) as cur:
            cur.execute(
                "UPDATE agent_memory.evaluation_jobs SET status = 'queued', attempts = GREATEST(0, attempts - 1), next_attempt_at = %s"
                " WHERE id = %s AND status = 'running'",
                (until, job_id),
            )

    def evaluation_jobs(self, scope: AgentScope, status: JobStatus | None, limit: int) -> list[EvaluationJob]:
        own, params = _own(scope, "j")
        where = f"{own} AND j.status = %s" if status else own
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT {', '.join('j.' + c for c in JOB_COLUMNS.split(', '))} FROM agent_memory.evaluation_jobs j"
                f" WHERE {where} ORDER BY j.id DESC LIMIT %s",
                [*params, *([status] if status else []), limit],
            )
            return [_job(r) for r in cur.fetchall()]

    @retried
    def requeue_evaluations(self, scope: AgentScope, ids: Sequence[int], now: datetime) -> int:
        own, params = _own(scope, "j")
        chosen, cparams = (" AND j.id = ANY(%s)", [list(ids)]) if ids else ("", [])
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "UPDATE agent_memory.evaluation_jobs j SET status = 'queued', attempts = 0, next_attempt_at = %s, finished_at = NULL"
                f" WHERE j.status = 'dead' AND {own}{chosen}",
                [now, *params, *cparams],
            )
            return int(cur.rowcount)

    def evaluation_counts(self, scope: AgentScope, day: date) -> EvaluationCounts:
        own, params = _own(scope, "j")
        pown, pparams = _own(scope, "p")
        town, tparams = _own(scope, "t")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT j.status, COUNT(*) AS n FROM agent_memory.evaluation_jobs j WHERE {own} GROUP BY j.status", params)
            by_status = {r["status"]: int(r["n"]) for r in cur.fetchall()}
            cur.execute(f"SELECT COUNT(*) AS n FROM agent_memory.merge_proposals p WHERE p.status = 'open' AND {pown}", pparams)
            proposals = int(cur.fetchone()["n"])  # type: ignore[index]
            cur.execute(
                f"SELECT COALESCE(SUM(t.tokens), 0) AS n FROM agent_memory.evaluation_tokens t WHERE t.day = %s AND {town}", [day, *tparams]
            )
            tokens = int(cur.fetchone()["n"])  # type: ignore[index]
        return EvaluationCounts(
            queued=by_status.get("queued", 0),
            running=by_status.get("running", 0),
            done=by_status.get("done", 0),
            dead=by_status.get("dead", 0),
            proposals=proposals,
            tokens_today=tokens,
        )

    @retried
    def add_evaluation_tokens(self, agent_id: str, day: date, provider: str, tokens: int) -> None:
        with self.db.tx(agent_id) as cur:
            cur.execute(
                "INSERT INTO agent_memory.evaluation_tokens AS t (agent_id, day, provider, tokens, calls) VALUES (%s, %s, %s, %s, 1)"
                " ON CONFLICT (agent_id, day, provider) DO UPDATE SET tokens = t.tokens + excluded.tokens, calls = t.calls + 1",
                (agent_id, day, provider, max(0, int(tokens))),
            )

    def evaluation_tokens(self, day: date) -> dict[str, int]:
        with self.db.tx(SYSTEM) as cur:
            cur.execute("SELECT agent_id, SUM(tokens) AS n FROM agent_memory.evaluation_tokens WHERE day = %s GROUP BY agent_id", (day,))
            return {r["agent_id"]: int(r["n"]) for r in cur.fetchall()}

    def merge_proposals(self, scope: AgentScope, status: ProposalStatus | None, limit: int) -> list[MergeProposal]:
        own, params = _own(scope, "p")
        where = f"{own} AND p.status = %s" if status else own
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT p.* FROM agent_memory.merge_proposals p WHERE {where} ORDER BY p.id DESC LIMIT %s",
                [*params, *([status] if status else []), limit],
            )
            return [_proposal(r) for r in cur.fetchall()]

    @retried
    def set_proposal_status(self, scope: AgentScope, proposal_id: int, status: ProposalStatus) -> MergeProposal:
        own, params = _own(scope, "p")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"UPDATE agent_memory.merge_proposals p SET status = %s WHERE p.id = %s AND {own} RETURNING p.*",
                [status, proposal_id, *params],
            )
            row = cur.fetchone()
            if row is None:
                raise NotFound(f"merge proposal {proposal_id} not found")
            return _proposal(row)
