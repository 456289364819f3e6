-- Seed 004 §5.1 `forget` mode=hard (the right to erasure): one receipt per erasure. `receipt` is
-- the canonical JSON the caller was given, as text (its `digest` covers exactly these bytes);
-- `content_hashes` are the content hashes of the erased texts (tombstones: an import skips a
-- memory that matches one, and verify_erasure checks that no memory or version holds such a text
-- again); `memory_seqs` the erased rows' internal numbers. No text of an erased memory is kept.
-- Isolated per agent by row-level security, as the entity tables are (maintenance sees all).
CREATE TABLE agent_memory.erasure_receipts (
    seq            BIGSERIAL   UNIQUE,
    id             TEXT        PRIMARY KEY,
    agent_id       TEXT        NOT NULL,
    erased_at      TIMESTAMPTZ NOT NULL,
    receipt        TEXT        NOT NULL,
    digest         TEXT        NOT NULL,
    content_hashes TEXT[]      NOT NULL DEFAULT '{}',
    memory_seqs    BIGINT[]    NOT NULL DEFAULT '{}'
);
CREATE INDEX erasure_receipts_agent ON agent_memory.erasure_receipts (agent_id, erased_at);

ALTER TABLE agent_memory.erasure_receipts ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.erasure_receipts FORCE ROW LEVEL SECURITY;
CREATE POLICY erasure_receipt_isolation_policy ON agent_memory.erasure_receipts
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
