-- Seed 004 §3's feedback_event: what an agent said about a memory it was given (used, edited,
-- neglected, helpful, not_helpful), with a 0-1 strength and an optional note (e.g. the correct
-- answer). A row belongs to the agent that gave it and is isolated by row-level security like
-- the entity tables (the maintenance agents see every row); deleting the memory deletes its
-- feedback (a soft deletion keeps it, for a restore). The score profile 004 reads it as usage.
CREATE TABLE agent_memory.feedback_events (
    id          BIGSERIAL   PRIMARY KEY,
    agent_id    TEXT        NOT NULL,
    fragment_id TEXT        NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    event       TEXT        NOT NULL CHECK (event IN ('used', 'edited', 'neglected', 'helpful', 'not_helpful')),
    score       DOUBLE PRECISION NOT NULL DEFAULT 1.0 CHECK (score >= 0.0 AND score <= 1.0),
    note        TEXT,
    session_id  TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE INDEX feedback_events_fragment ON agent_memory.feedback_events (fragment_id, agent_id);
CREATE INDEX feedback_events_agent ON agent_memory.feedback_events (agent_id);

ALTER TABLE agent_memory.feedback_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.feedback_events FORCE ROW LEVEL SECURITY;
CREATE POLICY feedback_isolation_policy ON agent_memory.feedback_events
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
