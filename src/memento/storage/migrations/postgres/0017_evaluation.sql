-- The evaluator's durable queue (000 §7, issue 13), as on SQLite: one job per memory to
-- evaluate, its status (queued → running → done, or dead after MEMENTO_EVALUATOR_MAX_ATTEMPTS
-- failures), retries and result (scores and ids only, never memory text). A running job's
-- next_attempt_at is its lease. Workers of every replica claim with FOR UPDATE SKIP LOCKED.
-- Row-level security isolates every table per agent like memory_linkages (the maintenance
-- agents, which the worker claims as, see every row). Deleting the memory deletes its jobs and
-- proposals (cascade).
CREATE TABLE agent_memory.evaluation_jobs (
    id              BIGSERIAL   PRIMARY KEY,
    fragment_id     TEXT        NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    agent_id        TEXT        NOT NULL,
    kind            TEXT        NOT NULL DEFAULT 'evaluate',
    status          TEXT        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'dead')),
    attempts        INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    last_error      TEXT,
    enqueued_at     TIMESTAMPTZ NOT NULL,
    finished_at     TIMESTAMPTZ,
    result          JSONB
);
CREATE UNIQUE INDEX evaluation_jobs_open ON agent_memory.evaluation_jobs (fragment_id, kind) WHERE status IN ('queued', 'running');
CREATE INDEX evaluation_jobs_due ON agent_memory.evaluation_jobs (status, next_attempt_at);
CREATE INDEX evaluation_jobs_agent ON agent_memory.evaluation_jobs (agent_id, status);
CREATE INDEX evaluation_jobs_fragment ON agent_memory.evaluation_jobs (fragment_id);

CREATE TABLE agent_memory.merge_proposals (
    id         BIGSERIAL        PRIMARY KEY,
    agent_id   TEXT             NOT NULL,
    from_id    TEXT             NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    to_id      TEXT             NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    similarity DOUBLE PRECISION NOT NULL,
    reason     TEXT             NOT NULL,
    status     TEXT             NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'applied', 'dismissed')),
    created_at TIMESTAMPTZ      NOT NULL,
    UNIQUE (from_id, to_id)
);
CREATE INDEX merge_proposals_agent ON agent_memory.merge_proposals (agent_id, status);
CREATE INDEX merge_proposals_to ON agent_memory.merge_proposals (to_id);

CREATE TABLE agent_memory.evaluation_tokens (
    agent_id TEXT    NOT NULL,
    day      DATE    NOT NULL,
    provider TEXT    NOT NULL,
    tokens   BIGINT  NOT NULL DEFAULT 0,
    calls    BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, day, provider)
);

ALTER TABLE agent_memory.evaluation_jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.evaluation_jobs FORCE ROW LEVEL SECURITY;
CREATE POLICY evaluation_job_isolation_policy ON agent_memory.evaluation_jobs
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));

ALTER TABLE agent_memory.merge_proposals ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.merge_proposals FORCE ROW LEVEL SECURITY;
CREATE POLICY merge_proposal_isolation_policy ON agent_memory.merge_proposals
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));

ALTER TABLE agent_memory.evaluation_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.evaluation_tokens FORCE ROW LEVEL SECURITY;
CREATE POLICY evaluation_token_isolation_policy ON agent_memory.evaluation_tokens
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
