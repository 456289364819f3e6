"""The evaluator's durable queue on SQLite (migration 0017): jobs, merge proposals and token
tallies. A claim is one write transaction (the single writer serialises claims, so two workers
never take one job); every other change is one transaction too."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import pysqlite3.dbapi2 as sqlite3

from ..errors import NotFound
from ..models import AgentScope
from .protocol import EvaluationCounts, EvaluationJob, EvaluationOutcome, JobStatus, MergeProposal, ProposalStatus
from .sqlfilter import live_sql
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import parse_ts, ts
from .utility import utility

MAX_ERROR = 500  # characters of a failure kept on the job


def _own(scope: AgentScope, alias: str) -> tuple[str, list[Any]]:
    """The queue rows a scope reads and changes: its agent's own (every row for maintenance)."""
    return ("1 = 1", []) if scope.is_maintenance else (f"{alias}.agent_id = ?", [scope.agent_id])


def _marks(items: Sequence[object]) -> str:
    return ",".join("?" * len(items))


def _job(row: sqlite3.Row) -> EvaluationJob:
    return EvaluationJob(
        id=row["id"],
        fragment_id=row["fragment_id"],
        agent_id=row["agent_id"],
        kind=row["kind"],
        status=row["status"],
        attempts=row["attempts"],
        next_attempt_at=parse_ts(row["next_attempt_at"]) or datetime.min,
        last_error=row["last_error"],
        enqueued_at=parse_ts(row["enqueued_at"]) or datetime.min,
        finished_at=parse_ts(row["finished_at"]),
        result=json.loads(row["result"]) if row["result"] else None,
    )


def _proposal(row: sqlite3.Row) -> MergeProposal:
    return MergeProposal(
        id=row["id"],
        agent_id=row["agent_id"],
        from_id=row["from_id"],
        to_id=row["to_id"],
        similarity=row["similarity"],
        reason=row["reason"],
        status=row["status"],
        created_at=parse_ts(row["created_at"]) or datetime.min,
    )


class SQLiteEvaluation:
    """Writes in one transaction on the writer (joining the caller's); reads on this thread's reader."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    def enqueue_evaluations(self, scope: AgentScope, fragment_ids: Sequence[str], now: datetime) -> int:
        if not fragment_ids:
            return 0
        own, params = _own(scope, "f")
        with self.db.tx() as conn:
            cursor = conn.execute(
                "INSERT INTO evaluation_jobs (fragment_id, agent_id, next_attempt_at, enqueued_at)"
                f" SELECT f.id, f.agent_id, ?, ? FROM fragments f WHERE f.id IN ({_marks(fragment_ids)}) AND {own}"
                f" AND f.session_id IS NULL AND {live_sql('f', '?')} ON CONFLICT DO NOTHING",
                [ts(now), ts(now), *fragment_ids, *params, ts(now)],
            )
            return int(cursor.rowcount)

    def enqueue_unevaluated(self, scope: AgentScope, now: datetime, limit: int) -> int:
        own, params = _own(scope, "f")
        with self.db.tx() as conn:
            cursor = conn.execute(
                "INSERT INTO evaluation_jobs (fragment_id, agent_id, next_attempt_at, enqueued_at)"
                f" SELECT f.id, f.agent_id, ?, ? FROM fragments f WHERE {own} AND f.session_id IS NULL AND f.judged_utility IS NULL"
                f" AND {live_sql('f', '?')}"
                " AND NOT EXISTS (SELECT 1 FROM evaluation_jobs j WHERE j.fragment_id = f.id)"
                " ORDER BY f.seq LIMIT ? ON CONFLICT DO NOTHING",
                [ts(now), ts(now), *params, ts(now), int(limit)],
            )
            return int(cursor.rowcount)

    def claim_evaluations(
        self, now: datetime, lease_until: datetime, limit: int, exclude_agents: Sequence[str] = ()
    ) -> list[EvaluationJob]:
        skip = f" AND agent_id NOT IN ({_marks(exclude_agents)})" if exclude_agents else ""
        with self.db.tx() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM evaluation_jobs WHERE status IN ('queued', 'running') AND next_attempt_at <= ?"
                    f"{skip} ORDER BY next_attempt_at, id LIMIT ?",
                    [ts(now), *exclude_agents, int(limit)],
                )
            ]
            if not ids:
                return []
            conn.execute(
                f"UPDATE evaluation_jobs SET status = 'running', attempts = attempts + 1, next_attempt_at = ? WHERE id IN ({_marks(ids)})",
                [ts(lease_until), *ids],
            )
            rows = conn.execute(f"SELECT * FROM evaluation_jobs WHERE id IN ({_marks(ids)}) ORDER BY id", ids).fetchall()
            return [_job(r) for r in rows]

    def claim_evaluation(
        self, job_id: int, now: datetime, lease_until: datetime, exclude_agents: Sequence[str] = ()
    ) -> EvaluationJob | None:
        skip = f" AND agent_id NOT IN ({_marks(exclude_agents)})" if exclude_agents else ""
        with self.db.tx() as conn:
            changed = conn.execute(
                "UPDATE evaluation_jobs SET status = 'running', attempts = attempts + 1, next_attempt_at = ?"
                f" WHERE id = ? AND status IN ('queued', 'running') AND next_attempt_at <= ?{skip}",
                [ts(lease_until), int(job_id), ts(now), *exclude_agents],
            ).rowcount
            if not changed:
                return None
            row = conn.execute("SELECT * FROM evaluation_jobs WHERE id = ?", (int(job_id),)).fetchone()
            return _job(row)

    def queued_evaluation_ids(self, fragment_ids: Sequence[str]) -> list[int]:
        if not fragment_ids:
            return []
        rows = self.db.reader().execute(
            f"SELECT id FROM evaluation_jobs WHERE status = 'queued' AND fragment_id IN ({_marks(fragment_ids)}) ORDER BY id",
            list(fragment_ids),
        )
        return [int(r[0]) for r in rows]

    def finish_evaluation(self, job: EvaluationJob, outcome: EvaluationOutcome, now: datetime) -> bool:
        with self.db.tx() as conn:
            found = conn.execute("SELECT status FROM evaluation_jobs WHERE id = ?", (job.id,)).fetchone()
            if found is None or found[0] != "running":
                return False
            memory = conn.execute(
                "SELECT seq, importance, access_count, COALESCE(accessed_at, created_at) FROM fragments"
                " WHERE id = ? AND agent_id = ? AND deleted_at IS NULL",
                (job.fragment_id, job.agent_id),
            ).fetchone()
            if memory is None:
                return False
            judged = float(outcome.utility)
            score = utility(memory[1], memory[2], parse_ts(memory[3]) or now, now, outcome.half_life_days, judged)
            conn.execute(
                "UPDATE fragments SET utility_score = ?, judged_utility = ?, verified_at = ? WHERE seq = ?",
                (score, judged, ts(now), memory[0]),
            )
            own = set(self._own_live(conn, job.agent_id, [*outcome.contradicts, *(m[0] for m in outcome.merges)], now))
            for target in dict.fromkeys(outcome.contradicts):
                if target in own and target != job.fragment_id:
                    self._link(conn, job.fragment_id, target, now)
            for to_id, similarity, reason in outcome.merges:
                if to_id in own and to_id != job.fragment_id:
                    conn.execute(
                        "INSERT INTO merge_proposals (agent_id, from_id, to_id, similarity, reason, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                        (job.agent_id, job.fragment_id, to_id, float(similarity), reason, ts(now)),
                    )
            conn.execute(
                "UPDATE evaluation_jobs SET status = 'done', finished_at = ?, last_error = NULL, result = ? WHERE id = ?",
                (ts(now), json.dumps(outcome.result), job.id),
            )
            return True

    @staticmethod
    def _own_live(conn: sqlite3.Connection, agent_id: str, ids: Sequence[str], now: datetime) -> list[str]:
        if not ids:
            return []
        rows = conn.execute(
            f"SELECT f.id FROM fragments f WHERE f.id IN ({_marks(ids)}) AND f.agent_id = ? AND {live_sql('f', '?')}",
            [*ids, agent_id, ts(now)],
        )
        return [r[0] for r in rows]

    @staticmethod
    def _link(conn: sqlite3.Connection, from_id: str, to_id: str, now: datetime) -> None:
        """A `contradicts` link, unless the two are linked already (an existing relation stays)."""
        added = conn.execute(
            "INSERT INTO fragment_links (from_id, to_id, relation_type, created_at) VALUES (?, ?, 'contradicts', ?) ON CONFLICT DO NOTHING",
            (from_id, to_id, ts(now)),
        ).rowcount
        if added:
            row = conn.execute("SELECT linked_to FROM fragments WHERE id = ?", (from_id,)).fetchone()
            linked = json.loads(row[0]) if row else []
            if to_id not in linked:
                conn.execute("UPDATE fragments SET linked_to = ? WHERE id = ?", (json.dumps([*linked, to_id]), from_id))

    def fail_evaluation(self, job_id: int, error: str, now: datetime, retry_at: datetime | None) -> None:
        with self.db.tx() as conn:
            if retry_at is None:
                conn.execute(
                    "UPDATE evaluation_jobs SET status = 'dead', last_error = ?, finished_at = ? WHERE id = ?",
                    (error[:MAX_ERROR], ts(now), job_id),
                )
            else:
                conn.execute(
                    "UPDATE evaluation_jobs SET status = 'queued', last_error = ?, next_attempt_at = ? WHERE id = ?",
                    (error[:MAX_ERROR], ts(retry_at), job_id),
                )

    def defer_evaluation(self, job_id: int, until: datetime) -> None:
        with self.db.tx() as conn:
            conn.execute(
                "UPDATE evaluation_jobs SET status = 'queued', attempts = MAX(0, attempts - 1), next_attempt_at = ?"
                " WHERE id = ? AND status = 'running'",
                (ts(until), job_id),
            )

    def evaluation_jobs(self, scope: AgentScope, status: JobStatus | None, limit: int) -> list[EvaluationJob]:
        own, params = _own(scope, "j")
        where = f"{own} AND j.status = ?" if status else own
        rows = (
            self.db.reader()
            .execute(
                f"SELECT j.* FROM evaluation_jobs j WHERE {where} ORDER BY j.id DESC LIMIT ?",
                [*params, *([status] if status else []), limit],
            )
            .fetchall()
        )
        return [_job(r) for r in rows]

    def requeue_evaluations(self, scope: AgentScope, ids: Sequence[int], now: datetime) -> int:
        own, params = _own(scope, "evaluation_jobs")
        chosen = f" AND id IN ({_marks(ids)})" if ids else ""
        with self.db.tx() as conn:
            cursor = conn.execute(
                "UPDATE evaluation_jobs SET status = 'queued', attempts = 0, next_attempt_at = ?, finished_at = NULL"
                f" WHERE status = 'dead' AND {own}{chosen}",
                [ts(now), *params, *ids],
            )
            return int(cursor.rowcount)

    def evaluation_counts(self, scope: AgentScope, day: date) -> EvaluationCounts:
        reader = self.db.reader()
        own, params = _own(scope, "j")
        by_status = dict(
            reader.execute(f"SELECT j.status, COUNT(*) FROM evaluation_jobs j WHERE {own} GROUP BY j.status", params).fetchall()
        )
        pown, pparams = _own(scope, "p")
        proposals = reader.execute(f"SELECT COUNT(*) FROM merge_proposals p WHERE p.status = 'open' AND {pown}", pparams).fetchone()[0]
        town, tparams = _own(scope, "t")
        tokens = reader.execute(
            f"SELECT COALESCE(SUM(t.tokens), 0) FROM evaluation_tokens t WHERE t.day = ? AND {town}", [day.isoformat(), *tparams]
        ).fetchone()[0]
        return EvaluationCounts(
            queued=int(by_status.get("queued", 0)),
            running=int(by_status.get("running", 0)),
            done=int(by_status.get("done", 0)),
            dead=int(by_status.get("dead", 0)),
            proposals=int(proposals),
            tokens_today=int(tokens),
        )

    def add_evaluation_tokens(self, agent_id: str, day: date, provider: str, tokens: int) -> None:
        with self.db.tx() as conn:
            conn.execute(
                "INSERT INTO evaluation_tokens (agent_id, day, provider, tokens, calls) VALUES (?, ?, ?, ?, 1)"
                " ON CONFLICT (agent_id, day, provider) DO UPDATE SET tokens = tokens + excluded.tokens, calls = calls + 1",
                (agent_id, day.isoformat(), provider, max(0, int(tokens))),
            )

    def evaluation_tokens(self, day: date) -> dict[str, int]:
        rows = self.db.reader().execute(
            "SELECT agent_id, SUM(tokens) FROM evaluation_tokens WHERE day = ? GROUP BY agent_id", (day.isoformat(),)
        )
        return {r[0]: int(r[1]) for r in rows}

    def merge_proposals(self, scope: AgentScope, status: ProposalStatus | None, limit: int) -> list[MergeProposal]:
        own, params = _own(scope, "p")
        where = f"{own} AND p.status = ?" if status else own
        rows = (
            self.db.reader()
            .execute(
                f"SELECT p.* FROM merge_proposals p WHERE {where} ORDER BY p.id DESC LIMIT ?",
                [*params, *([status] if status else []), limit],
            )
            .fetchall()
        )
        return [_proposal(r) for r in rows]

    def set_proposal_status(self, scope: AgentScope, proposal_id: int, status: ProposalStatus) -> MergeProposal:
        own, params = _own(scope, "p")
        with self.db.tx() as conn:
            row = conn.execute(f"SELECT p.* FROM merge_proposals p WHERE p.id = ? AND {own}", [proposal_id, *params]).fetchone()
            if row is None:
                raise NotFound(f"merge proposal {proposal_id} not found")
            conn.execute("UPDATE merge_proposals SET status = ? WHERE id = ?", (status, proposal_id))
            return _proposal(conn.execute("SELECT * FROM merge_proposals WHERE id = ?", (proposal_id,)).fetchone())
