-- The evaluator's durable queue (000 §7, issue 13): one job per memory to evaluate, its status
-- (queued → running → done, or dead after MEMENTO_EVALUATOR_MAX_ATTEMPTS failures), its retries
-- and its result (scores and ids only, never memory text). A running job's next_attempt_at is its
-- lease: a worker that died holding it gives it up when the lease ends. Deleting the memory
-- deletes its jobs and proposals (cascade), on every delete path.
CREATE TABLE evaluation_jobs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    fragment_id     TEXT    NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    agent_id        TEXT    NOT NULL,
    kind            TEXT    NOT NULL DEFAULT 'evaluate',
    status          TEXT    NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT    NOT NULL,
    last_error      TEXT,
    enqueued_at     TEXT    NOT NULL,
    finished_at     TEXT,
    result          TEXT
);
-- A memory has at most one open job of a kind (enqueueing again is a no-op).
CREATE UNIQUE INDEX evaluation_jobs_open ON evaluation_jobs(fragment_id, kind) WHERE status IN ('queued', 'running');
CREATE INDEX evaluation_jobs_due ON evaluation_jobs(status, next_attempt_at);
CREATE INDEX evaluation_jobs_agent ON evaluation_jobs(agent_id, status);
CREATE INDEX evaluation_jobs_fragment ON evaluation_jobs(fragment_id);

-- Merges the evaluator proposes (001 §6.2 near-duplicates): `from_id` would be absorbed into
-- `to_id`. Applied with 001's merge, or dismissed, by the operator or the agent.
CREATE TABLE merge_proposals (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id   TEXT    NOT NULL,
    from_id    TEXT    NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    to_id      TEXT    NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    similarity REAL    NOT NULL,
    reason     TEXT    NOT NULL,
    status     TEXT    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'applied', 'dismissed')),
    created_at TEXT    NOT NULL,
    UNIQUE (from_id, to_id)
);
CREATE INDEX merge_proposals_agent ON merge_proposals(agent_id, status);
CREATE INDEX merge_proposals_to ON merge_proposals(to_id);

-- Tokens the evaluator's models used, per agent, UTC day and provider (the daily budget).
CREATE TABLE evaluation_tokens (
    agent_id TEXT    NOT NULL,
    day      TEXT    NOT NULL,
    provider TEXT    NOT NULL,
    tokens   INTEGER NOT NULL DEFAULT 0,
    calls    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, day, provider)
);
