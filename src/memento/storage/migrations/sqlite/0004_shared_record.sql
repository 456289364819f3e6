-- The one memory record every face reads and writes (001 §2.1, 003, 004 §3): confidence, user
-- tags (a JSON array), source context, a metadata object, expiry, pinning, the memory system,
-- the privacy scope, an origin trace and soft deletion. 001's types join 000's.
ALTER TABLE fragments ADD COLUMN confidence REAL NOT NULL DEFAULT 1.0 CHECK (confidence >= 0.0 AND confidence <= 1.0);
ALTER TABLE fragments ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE fragments ADD COLUMN context TEXT;
ALTER TABLE fragments ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE fragments ADD COLUMN expires_at TEXT;
ALTER TABLE fragments ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE fragments ADD COLUMN memory_system TEXT NOT NULL DEFAULT 'semantic'
    CHECK (memory_system IN ('working','episodic','semantic','procedural'));
ALTER TABLE fragments ADD COLUMN privacy_scope TEXT NOT NULL DEFAULT 'private'
    CHECK (privacy_scope IN ('private','team','public'));
ALTER TABLE fragments ADD COLUMN origin_trace TEXT;
ALTER TABLE fragments ADD COLUMN deleted_at TEXT;

-- Existing rows get the memory system their type and scope imply (memento.models.memory_system_for).
UPDATE fragments SET memory_system = CASE
    WHEN session_id IS NOT NULL THEN 'working'
    WHEN type IN ('episode','error') THEN 'episodic'
    WHEN type = 'procedure' THEN 'procedural'
    ELSE 'semantic' END;

CREATE INDEX fragments_system ON fragments(agent_id, memory_system);
CREATE INDEX fragments_expires ON fragments(expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX fragments_deleted ON fragments(deleted_at) WHERE deleted_at IS NOT NULL;

-- SQLite cannot alter a CHECK constraint. Widening one that every row already satisfies changes
-- nothing on disk, so the documented writable_schema edit applies (the runner bumps
-- schema_version afterwards, making every connection reload the schema).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
    SET sql = replace(sql, '''fact'',''decision'',''error'',''preference'',''procedure'',''relation'',''episode'')',
                      '''fact'',''decision'',''error'',''preference'',''procedure'',''relation'',''episode'',''observation'',''learning'',''pattern'')')
    WHERE type = 'table' AND name = 'fragments';
PRAGMA writable_schema = OFF;
