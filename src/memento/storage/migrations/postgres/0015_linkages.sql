-- Seed 003's linkages: a memory's typed references to another memory, a working-memory item or
-- a file, each with an optional label (at most 100 characters). A row belongs to the agent whose
-- memory it is and is isolated by row-level security like feedback_events (the maintenance
-- agents see every row). Deleting the memory deletes its linkages, and deleting a memory that a
-- linkage names deletes that linkage too (both by cascade, which row-level security does not
-- stop, on every delete path); a soft deletion keeps them, for a restore.
CREATE TABLE agent_memory.memory_linkages (
    id          BIGSERIAL   PRIMARY KEY,
    agent_id    TEXT        NOT NULL,
    fragment_id TEXT        NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    target_type TEXT        NOT NULL CHECK (target_type IN ('memory', 'item', 'file')),
    memory_id   TEXT        REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    item_id     TEXT,
    path        TEXT,
    label       TEXT        CHECK (label IS NULL OR char_length(label) <= 100),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CHECK ((target_type = 'memory') = (memory_id IS NOT NULL)),
    CHECK ((target_type = 'item') = (item_id IS NOT NULL)),
    CHECK ((target_type = 'file') = (path IS NOT NULL))
);
-- A memory holds a linkage once (stores and restores skip a repeat).
CREATE UNIQUE INDEX memory_linkages_unique ON agent_memory.memory_linkages (fragment_id, target_type, COALESCE(memory_id, item_id, path), COALESCE(label, ''));
CREATE INDEX memory_linkages_memory ON agent_memory.memory_linkages (memory_id) WHERE memory_id IS NOT NULL;
CREATE INDEX memory_linkages_agent ON agent_memory.memory_linkages (agent_id);

ALTER TABLE agent_memory.memory_linkages ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.memory_linkages FORCE ROW LEVEL SECURITY;
CREATE POLICY linkage_isolation_policy ON agent_memory.memory_linkages
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
