-- Seed 003's linkages: a memory's typed references to another memory, a working-memory item or
-- a file, each with an optional label (at most 100 characters). A row belongs to the agent whose
-- memory it is. Deleting the memory deletes its linkages, and deleting a memory that a linkage
-- names deletes that linkage too (both by cascade, on every delete path: forget, erasure,
-- consolidation, purge); a soft deletion keeps them, for a restore.
CREATE TABLE memory_linkages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id    TEXT NOT NULL,
    fragment_id TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    target_type TEXT NOT NULL CHECK (target_type IN ('memory', 'item', 'file')),
    memory_id   TEXT REFERENCES fragments(id) ON DELETE CASCADE,
    item_id     TEXT,
    path        TEXT,
    label       TEXT CHECK (label IS NULL OR length(label) <= 100),
    created_at  TEXT NOT NULL,
    CHECK ((target_type = 'memory') = (memory_id IS NOT NULL)),
    CHECK ((target_type = 'item') = (item_id IS NOT NULL)),
    CHECK ((target_type = 'file') = (path IS NOT NULL))
);
-- A memory holds a linkage once (stores and restores skip a repeat).
CREATE UNIQUE INDEX memory_linkages_unique ON memory_linkages(fragment_id, target_type, COALESCE(memory_id, item_id, path), COALESCE(label, ''));
CREATE INDEX memory_linkages_memory ON memory_linkages(memory_id) WHERE memory_id IS NOT NULL;
CREATE INDEX memory_linkages_agent ON memory_linkages(agent_id);
