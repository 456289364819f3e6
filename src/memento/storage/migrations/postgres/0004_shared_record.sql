-- The one memory record every face reads and writes (001 §2.1, 003, 004 §3): confidence, user
-- tags, source context, a metadata object, expiry, pinning, the memory system, the privacy
-- scope, an origin trace and soft deletion. 001's types join 000's. No new table: the row-level
-- security policies of fragments cover every new column.
ALTER TABLE agent_memory.fragments
    ADD COLUMN confidence    DOUBLE PRECISION NOT NULL DEFAULT 1.0 CHECK (confidence >= 0.0 AND confidence <= 1.0),
    ADD COLUMN tags          TEXT[]      NOT NULL DEFAULT '{}',
    ADD COLUMN context       TEXT,
    ADD COLUMN metadata      JSONB       NOT NULL DEFAULT '{}',
    ADD COLUMN expires_at    TIMESTAMPTZ,
    ADD COLUMN pinned        BOOLEAN     NOT NULL DEFAULT FALSE,
    ADD COLUMN memory_system TEXT        NOT NULL DEFAULT 'semantic'
        CHECK (memory_system IN ('working','episodic','semantic','procedural')),
    ADD COLUMN privacy_scope TEXT        NOT NULL DEFAULT 'private'
        CHECK (privacy_scope IN ('private','team','public')),
    ADD COLUMN origin_trace  JSONB,
    ADD COLUMN deleted_at    TIMESTAMPTZ;

ALTER TABLE agent_memory.fragments DROP CONSTRAINT fragments_type_check;
ALTER TABLE agent_memory.fragments ADD CONSTRAINT fragments_type_check CHECK (type IN (
    'fact','decision','error','preference','procedure','relation','episode','observation','learning','pattern'));

-- Existing rows get the memory system their type and scope imply (memento.models.memory_system_for).
SELECT set_config('app.current_agent_id', 'system', true);
UPDATE agent_memory.fragments SET memory_system = CASE
    WHEN session_id IS NOT NULL THEN 'working'
    WHEN type IN ('episode','error') THEN 'episodic'
    WHEN type = 'procedure' THEN 'procedural'
    ELSE 'semantic' END;

CREATE INDEX fragments_tags ON agent_memory.fragments USING gin (tags);
CREATE INDEX fragments_system ON agent_memory.fragments (agent_id, memory_system);
CREATE INDEX fragments_expires ON agent_memory.fragments (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX fragments_deleted ON agent_memory.fragments (deleted_at) WHERE deleted_at IS NOT NULL;
