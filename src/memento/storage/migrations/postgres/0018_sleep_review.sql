-- Seed 004 §3's memory_link types: fragment links may also say that a memory was derived from
-- another (`derived_from`: sleep consolidation's semantic memory from its episodes) or duplicates
-- it (`duplicates`). The CHECK constraint of migration 0001 (named by PostgreSQL) is replaced by
-- a wider one; existing rows satisfy both.
ALTER TABLE agent_memory.fragment_links DROP CONSTRAINT fragment_links_relation_type_check;
ALTER TABLE agent_memory.fragment_links ADD CONSTRAINT fragment_links_relation_type_check
    CHECK (relation_type IN ('related','caused_by','resolved_by','part_of','contradicts','superseded_by','derived_from','duplicates'));

-- Seed 004 §4.2's spaced review: a card per important memory, due at `due_at`; each review
-- (the memory shown by `context`, or recalled since its last review) moves it to the next,
-- longer interval (1, 3, 7, 14, 30 ... days). A card belongs to the agent whose memory it is and
-- is isolated by row-level security like feedback_events (the maintenance agents see every row);
-- deleting the memory deletes its card.
CREATE TABLE agent_memory.memory_reviews (
    fragment_id      TEXT        PRIMARY KEY REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    agent_id         TEXT        NOT NULL,
    due_at           TIMESTAMPTZ NOT NULL,
    interval_days    INTEGER     NOT NULL CHECK (interval_days >= 1),
    reviews          INTEGER     NOT NULL DEFAULT 0 CHECK (reviews >= 0),
    last_reviewed_at TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE INDEX memory_reviews_due ON agent_memory.memory_reviews (agent_id, due_at);

ALTER TABLE agent_memory.memory_reviews ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.memory_reviews FORCE ROW LEVEL SECURITY;
CREATE POLICY review_isolation_policy ON agent_memory.memory_reviews
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
