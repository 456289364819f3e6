-- Issue 13's scheduler: one row per consolidation run (docs/lifecycle.md "Scheduling"). A run
-- is claimed (`running`) before it starts and finished (`ok`, `error`) when it ends; `skipped`
-- records a scheduled run that did not happen (another run held the lock). The claim of a run
-- whose trigger has an interval reads the latest such run inside the claiming write
-- transaction (BEGIN IMMEDIATE: one writer at a time, across processes), so one run per
-- interval is recorded. `agent_id` is the namespace the run maintained; 'system' (or 'admin')
-- for a run over every namespace. `stages`: the per-stage counts of an `ok` run (JSON);
-- `error`: the failure of an `error` run (or why a run was skipped); `replica`: the host and
-- process that ran it. History is bounded per namespace by the store.
CREATE TABLE consolidation_runs (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    agent_id     TEXT NOT NULL,
    trigger      TEXT NOT NULL CHECK (trigger IN ('interval', 'inserts', 'startup', 'manual')),
    started_at   TEXT NOT NULL,
    finished_at  TEXT,
    outcome      TEXT NOT NULL CHECK (outcome IN ('running', 'ok', 'error', 'skipped')),
    stages       TEXT,
    error        TEXT,
    replica      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX consolidation_runs_agent ON consolidation_runs(agent_id, trigger, started_at);
