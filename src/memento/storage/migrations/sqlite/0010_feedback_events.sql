-- Seed 004 §3's feedback_event: what an agent said about a memory it was given (used, edited,
-- neglected, helpful, not_helpful), with a 0-1 strength and an optional note (e.g. the correct
-- answer). A row belongs to the agent that gave it; deleting the memory deletes its feedback
-- (a soft deletion keeps it, for a restore). The score profile 004 reads it as usage.
CREATE TABLE feedback_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id    TEXT NOT NULL,
    fragment_id TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    event       TEXT NOT NULL CHECK (event IN ('used', 'edited', 'neglected', 'helpful', 'not_helpful')),
    score       REAL NOT NULL DEFAULT 1.0 CHECK (score >= 0.0 AND score <= 1.0),
    note        TEXT,
    session_id  TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX feedback_events_fragment ON feedback_events(fragment_id, agent_id);
CREATE INDEX feedback_events_agent ON feedback_events(agent_id);
