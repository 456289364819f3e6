-- The entity graph of seed 001 (§2.2-§2.4): entities with unique names per agent, directed typed
-- relations with strength and confidence (one per source, target and type), and the associations
-- between entities and memories. Deleting an entity deletes its relations and associations, never
-- a memory; deleting a memory deletes its associations. Every table is isolated per agent by
-- row-level security, as fragments are (the maintenance agents see every row).
CREATE TABLE agent_memory.entities (
    seq             BIGSERIAL   UNIQUE,
    id              TEXT        PRIMARY KEY,
    agent_id        TEXT        NOT NULL,
    name            TEXT        NOT NULL,
    name_key        TEXT        NOT NULL,  -- graph.name_key(name): unique per agent regardless of case
    entity_type     TEXT        NOT NULL DEFAULT 'unknown',
    description     TEXT,
    metadata        JSONB       NOT NULL DEFAULT '{}',
    embedding       BYTEA,      -- float32, of name + ' ' + description (001 §3.3)
    embedding_model TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE UNIQUE INDEX entities_name ON agent_memory.entities (agent_id, name_key);
CREATE INDEX entities_type ON agent_memory.entities (agent_id, entity_type);

CREATE TABLE agent_memory.relations (
    seq           BIGSERIAL   UNIQUE,
    id            TEXT        PRIMARY KEY,
    agent_id      TEXT        NOT NULL,
    source_id     TEXT        NOT NULL REFERENCES agent_memory.entities (id) ON DELETE CASCADE,
    target_id     TEXT        NOT NULL REFERENCES agent_memory.entities (id) ON DELETE CASCADE,
    relation_type TEXT        NOT NULL,
    strength      DOUBLE PRECISION NOT NULL DEFAULT 0.5 CHECK (strength >= 0.0 AND strength <= 1.0),
    confidence    DOUBLE PRECISION NOT NULL DEFAULT 1.0 CHECK (confidence >= 0.0 AND confidence <= 1.0),
    context       TEXT,
    metadata      JSONB       NOT NULL DEFAULT '{}',
    created_at    TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    UNIQUE (source_id, target_id, relation_type)
);
CREATE INDEX relations_source ON agent_memory.relations (source_id);
CREATE INDEX relations_target ON agent_memory.relations (target_id);
CREATE INDEX relations_type ON agent_memory.relations (agent_id, relation_type);

CREATE TABLE agent_memory.entity_memories (
    seq         BIGSERIAL   UNIQUE,
    agent_id    TEXT        NOT NULL,
    entity_id   TEXT        NOT NULL REFERENCES agent_memory.entities (id) ON DELETE CASCADE,
    fragment_id TEXT        NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    relevance   DOUBLE PRECISION NOT NULL DEFAULT 1.0 CHECK (relevance >= 0.0 AND relevance <= 1.0),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    PRIMARY KEY (entity_id, fragment_id)
);
CREATE INDEX entity_memories_fragment ON agent_memory.entity_memories (fragment_id);

ALTER TABLE agent_memory.entities ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.entities FORCE ROW LEVEL SECURITY;
CREATE POLICY entity_isolation_policy ON agent_memory.entities
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
ALTER TABLE agent_memory.relations ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.relations FORCE ROW LEVEL SECURITY;
CREATE POLICY relation_isolation_policy ON agent_memory.relations
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
ALTER TABLE agent_memory.entity_memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.entity_memories FORCE ROW LEVEL SECURITY;
CREATE POLICY entity_memory_isolation_policy ON agent_memory.entity_memories
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));

-- 001 §2.5: a version keeps confidence, metadata and tags too; `note` says why it was archived
-- (e.g. `merged:frag-…` for the text of a memory merged into this one).
ALTER TABLE agent_memory.fragment_versions
    ADD COLUMN confidence DOUBLE PRECISION,
    ADD COLUMN metadata   JSONB,
    ADD COLUMN tags       TEXT[],
    ADD COLUMN note       TEXT;
