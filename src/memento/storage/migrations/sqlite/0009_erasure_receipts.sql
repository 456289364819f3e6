-- Seed 004 §5.1 `forget` mode=hard (the right to erasure): one receipt per erasure. `receipt` is
-- the canonical JSON the caller was given (its `digest` covers it); `content_hashes` are the
-- content hashes of the erased texts (tombstones: an import skips a memory that matches one, and
-- verify_erasure checks that no memory or version holds such a text again); `memory_seqs` the
-- erased rows' internal numbers (verify_erasure looks them up in the full-text and vector indexes).
-- No text of an erased memory is kept here.
CREATE TABLE erasure_receipts (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    id             TEXT NOT NULL UNIQUE,
    agent_id       TEXT NOT NULL,
    erased_at      TEXT NOT NULL,
    receipt        TEXT NOT NULL,
    digest         TEXT NOT NULL,
    content_hashes TEXT NOT NULL DEFAULT '[]',
    memory_seqs    TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX erasure_receipts_agent ON erasure_receipts(agent_id, erased_at);

-- Free space that older versions left holding deleted or replaced text (they wrote without
-- PRAGMA secure_delete): a database that already holds memories is vacuumed once, by its first
-- hard erasure. A new database never needs it.
CREATE TABLE erasure_state (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO erasure_state (name, value) SELECT 'vacuum_pending', '1' WHERE EXISTS (SELECT 1 FROM fragments);
