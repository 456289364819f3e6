-- The entity graph of seed 001 (§2.2-§2.4): entities with unique names per agent, directed typed
-- relations with strength and confidence (one per source, target and type), and the associations
-- between entities and memories. Deleting an entity deletes its relations and associations, never
-- a memory; deleting a memory deletes its associations. `seq` is the paging key of bulk copies.
CREATE TABLE entities (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    agent_id        TEXT NOT NULL,
    name            TEXT NOT NULL,
    name_key        TEXT NOT NULL,  -- lower(name): names are unique per agent regardless of case
    entity_type     TEXT NOT NULL DEFAULT 'unknown',
    description     TEXT,
    metadata        TEXT NOT NULL DEFAULT '{}',
    embedding       BLOB,           -- float32, of name + ' ' + description (001 §3.3)
    embedding_model TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (agent_id, name_key)
);
CREATE INDEX entities_type ON entities(agent_id, entity_type);

CREATE TABLE relations (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    agent_id      TEXT NOT NULL,
    source_id     TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    target_id     TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    relation_type TEXT NOT NULL,
    strength      REAL NOT NULL DEFAULT 0.5 CHECK (strength >= 0.0 AND strength <= 1.0),
    confidence    REAL NOT NULL DEFAULT 1.0 CHECK (confidence >= 0.0 AND confidence <= 1.0),
    context       TEXT,
    metadata      TEXT NOT NULL DEFAULT '{}',
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (source_id, target_id, relation_type)
);
CREATE INDEX relations_source ON relations(source_id);
CREATE INDEX relations_target ON relations(target_id);
CREATE INDEX relations_type ON relations(agent_id, relation_type);

CREATE TABLE entity_memories (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id    TEXT NOT NULL,
    entity_id   TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    fragment_id TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    relevance   REAL NOT NULL DEFAULT 1.0 CHECK (relevance >= 0.0 AND relevance <= 1.0),
    created_at  TEXT NOT NULL,
    UNIQUE (entity_id, fragment_id)
);
CREATE INDEX entity_memories_fragment ON entity_memories(fragment_id);

-- 001 §2.5: a version keeps confidence, metadata and tags too; `note` says why it was archived
-- (e.g. `merged:frag-…` for the text of a memory merged into this one).
ALTER TABLE fragment_versions ADD COLUMN confidence REAL;
ALTER TABLE fragment_versions ADD COLUMN metadata TEXT;
ALTER TABLE fragment_versions ADD COLUMN tags TEXT;
ALTER TABLE fragment_versions ADD COLUMN note TEXT;
