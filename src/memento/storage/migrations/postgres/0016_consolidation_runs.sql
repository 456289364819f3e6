-- Issue 13's scheduler: one row per consolidation run (docs/lifecycle.md "Scheduling"). A run
-- is claimed (`running`) before it starts and finished (`ok`, `error`) when it ends; `skipped`
-- records a scheduled run that did not happen (another replica's run held the lock). The claim
-- of a run whose trigger has an interval reads the latest such run inside the claiming
-- transaction, under a transaction-level advisory lock, so replicas whose timers fire at
-- different moments still record one run per interval. `agent_id` is the namespace the run
-- maintained; 'system' (or 'admin') for a run over every namespace. `stages` holds the per-stage
-- counts of an `ok` run, `error` the failure of an `error` run (or why a run was skipped),
-- `replica` the host and process that ran it. History is bounded per namespace by the store.
CREATE TABLE agent_memory.consolidation_runs (
    seq          BIGSERIAL   PRIMARY KEY,
    id           TEXT        NOT NULL UNIQUE,
    agent_id     TEXT        NOT NULL,
    trigger      TEXT        NOT NULL CHECK (trigger IN ('interval', 'inserts', 'startup', 'manual')),
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    outcome      TEXT        NOT NULL CHECK (outcome IN ('running', 'ok', 'error', 'skipped')),
    stages       JSONB,
    error        TEXT,
    replica      TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX consolidation_runs_agent ON agent_memory.consolidation_runs (agent_id, trigger, started_at);

-- A namespace reads and writes its own runs; the maintenance agents every row. A run over every
-- namespace also maintained each agent's, so every agent may read (only read) those rows.
ALTER TABLE agent_memory.consolidation_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.consolidation_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY consolidation_run_isolation_policy ON agent_memory.consolidation_runs
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
CREATE POLICY consolidation_run_whole_store_read_policy ON agent_memory.consolidation_runs
    FOR SELECT USING (agent_id IN ('system', 'admin'));
