-- An mcp-memory-service database (doobidoo/mcp-memory-service, sqlite_vec backend), as its
-- SqliteVecMemoryStorage creates it: the metadata and memories tables, the vec0 embeddings table
-- (needs the sqlite-vec extension loaded) and the knowledge-graph table of migrations 008-010.
-- tests/test_import.py builds the .db file from this script.
CREATE TABLE IF NOT EXISTS metadata (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    content_hash TEXT UNIQUE NOT NULL,
    content TEXT NOT NULL,
    tags TEXT,
    memory_type TEXT,
    metadata TEXT,
    created_at REAL,
    updated_at REAL,
    created_at_iso TEXT,
    updated_at_iso TEXT,
    deleted_at REAL DEFAULT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_embeddings USING vec0(
    content_embedding FLOAT[384] distance_metric=cosine
);
CREATE INDEX IF NOT EXISTS idx_content_hash ON memories(content_hash);
CREATE INDEX IF NOT EXISTS idx_created_at ON memories(created_at);
CREATE INDEX IF NOT EXISTS idx_memory_type ON memories(memory_type);
CREATE INDEX IF NOT EXISTS idx_deleted_at ON memories(deleted_at);
CREATE TABLE IF NOT EXISTS memory_graph (
    source_hash TEXT NOT NULL,
    target_hash TEXT NOT NULL,
    similarity REAL NOT NULL,
    connection_types TEXT NOT NULL DEFAULT '[]',
    metadata TEXT,
    created_at REAL NOT NULL,
    relationship_type TEXT DEFAULT 'related',
    PRIMARY KEY (source_hash, target_hash)
);
INSERT INTO metadata (key, value) VALUES ('distance_metric', 'cosine');

INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at, updated_at, created_at_iso, updated_at_iso, deleted_at) VALUES ('d969227f0d5f57c4a6f74523e0f2bef9d52e62d08b448e854952f882042ddaac', 'Decided to run the nightly ETL with Airflow instead of cron; retries and backfills come for free.', 'etl,airflow,architecture', 'decision', '{"source": "claude-desktop"}', 1736843400.0, 1736843400.0, '2025-01-14T08:30:00Z', '2025-01-14T08:30:00Z', NULL);
INSERT INTO memory_embeddings (rowid, content_embedding) VALUES (1, zeroblob(1536));
INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at, updated_at, created_at_iso, updated_at_iso, deleted_at) VALUES ('85e483f3dab63f7492d6f9db441686536355d9bf6302b94fe57c06642631cb11', 'ETL job failed with ''FATAL: too many connections'' because each task opened its own pool.', 'etl,postgres', 'bug', '{}', 1737410700.0, 1737410700.0, '2025-01-20T22:05:00Z', '2025-01-20T22:05:00Z', NULL);
INSERT INTO memory_embeddings (rowid, content_embedding) VALUES (2, zeroblob(1536));
INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at, updated_at, created_at_iso, updated_at_iso, deleted_at) VALUES ('381aee1e1ec767df4358e0fd1087c6817e7d7e5df30ac3f544eae6b604ebf5fa', 'Fixed the connection storm by sharing one pgbouncer pool across Airflow tasks (pool_mode=transaction).', 'etl,postgres,fix', 'learning', '{"confidence": 0.9}', 1737450720.0, 1737450720.0, '2025-01-21T09:12:00Z', '2025-01-21T09:12:00Z', NULL);
INSERT INTO memory_embeddings (rowid, content_embedding) VALUES (3, zeroblob(1536));
INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at, updated_at, created_at_iso, updated_at_iso, deleted_at) VALUES ('5d10617a35e0c12325c9f465bbcf2302f5029c958e80eb2c8e514e642940bcc8', 'Staging database password is hunter2hunter2 and the admin login is etl-admin@example.org', 'etl,credentials', 'note', '{}', 1737540000.0, 1737540000.0, '2025-01-22T10:00:00Z', '2025-01-22T10:00:00Z', NULL);
INSERT INTO memory_embeddings (rowid, content_embedding) VALUES (4, zeroblob(1536));
INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at, updated_at, created_at_iso, updated_at_iso, deleted_at) VALUES ('66b21dd30e37bfbf64b0b76d58b911b6b29d8cc8e53aa3533bffcc319e455f35', 'Der nächtliche Export läuft um 02:00 Uhr MEZ — 毎晩2時に実行されます.', 'etl,schedule', 'observation', '{}', 1737630000.0, 1737630000.0, '2025-01-23T11:00:00Z', '2025-01-23T11:00:00Z', NULL);
INSERT INTO memory_embeddings (rowid, content_embedding) VALUES (5, zeroblob(1536));
INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at, updated_at, created_at_iso, updated_at_iso, deleted_at) VALUES ('dfd5a4cee87e57bc409a20992faa0cdd2661f66ef430619354588dd4f7fa2f47', 'Weekly review notes: the ETL platform moved to Airflow 2.9 this quarter. The migration took three sprints because every DAG had to be rewritten for the TaskFlow API. Backfills now run in parallel per partition, which cut the January rebuild from nine hours to ninety minutes. Next quarter the team wants to move the warehouse loads to incremental merges and retire the full reloads entirely.', 'etl,review', 'session', '{"session_id": "weekly-2025-03"}', 1743436800.0, 1743436800.0, '2025-03-31T16:00:00Z', '2025-03-31T16:00:00Z', NULL);
INSERT INTO memory_embeddings (rowid, content_embedding) VALUES (6, zeroblob(1536));
INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at, updated_at, created_at_iso, updated_at_iso, deleted_at) VALUES ('086182511acbe363cf2da5452464b4ec324b1b3531db32bc85ca3484c2ea7a24', 'Old cron-based ETL schedule (retired)', 'etl', 'note', '{}', 1730419200.0, 1730419200.0, '2024-11-01T00:00:00Z', '2024-11-01T00:00:00Z', 1736899200.0);
INSERT INTO memory_embeddings (rowid, content_embedding) VALUES (7, zeroblob(1536));
INSERT INTO memory_graph (source_hash, target_hash, similarity, connection_types, metadata, created_at, relationship_type) VALUES ('381aee1e1ec767df4358e0fd1087c6817e7d7e5df30ac3f544eae6b604ebf5fa', '85e483f3dab63f7492d6f9db441686536355d9bf6302b94fe57c06642631cb11', 0.82, '["semantic"]', '{}', 1737500000.0, 'fixes');
INSERT INTO memory_graph (source_hash, target_hash, similarity, connection_types, metadata, created_at, relationship_type) VALUES ('d969227f0d5f57c4a6f74523e0f2bef9d52e62d08b448e854952f882042ddaac', '85e483f3dab63f7492d6f9db441686536355d9bf6302b94fe57c06642631cb11', 0.82, '["semantic"]', '{}', 1737500000.0, 'causes');
INSERT INTO memory_graph (source_hash, target_hash, similarity, connection_types, metadata, created_at, relationship_type) VALUES ('d969227f0d5f57c4a6f74523e0f2bef9d52e62d08b448e854952f882042ddaac', 'dfd5a4cee87e57bc409a20992faa0cdd2661f66ef430619354588dd4f7fa2f47', 0.82, '["semantic"]', '{}', 1737500000.0, 'related');
INSERT INTO memory_graph (source_hash, target_hash, similarity, connection_types, metadata, created_at, relationship_type) VALUES ('dfd5a4cee87e57bc409a20992faa0cdd2661f66ef430619354588dd4f7fa2f47', 'd969227f0d5f57c4a6f74523e0f2bef9d52e62d08b448e854952f882042ddaac', 0.82, '["semantic"]', '{}', 1737500000.0, 'related');
INSERT INTO memory_graph (source_hash, target_hash, similarity, connection_types, metadata, created_at, relationship_type) VALUES ('086182511acbe363cf2da5452464b4ec324b1b3531db32bc85ca3484c2ea7a24', 'd969227f0d5f57c4a6f74523e0f2bef9d52e62d08b448e854952f882042ddaac', 0.82, '["semantic"]', '{}', 1737500000.0, 'related');
