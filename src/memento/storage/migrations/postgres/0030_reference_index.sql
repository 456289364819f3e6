-- Deleting a memory removes its id from every other memory's linked_to, and counts those
-- references: both read every memory (the GIN index on linked_to cannot serve a role bound by
-- row-level security: `&&` is not leakproof). fragment_references holds one row per (memory
-- referring, id referenced), kept by the trigger below, so a delete finds the memories that
-- refer to it by text equality.
SELECT set_config('app.current_agent_id', 'system', true);
CREATE TABLE agent_memory.fragment_references (
    seq      BIGINT NOT NULL REFERENCES agent_memory.fragments (seq) ON DELETE CASCADE,
    target   TEXT   NOT NULL,
    agent_id TEXT   NOT NULL
);
INSERT INTO agent_memory.fragment_references (seq, target, agent_id)
    SELECT DISTINCT f.seq, r.target, f.agent_id
    FROM agent_memory.fragments f, pg_catalog.unnest(f.linked_to) AS r(target)
    WHERE cardinality(f.linked_to) > 0;
CREATE INDEX fragment_references_target ON agent_memory.fragment_references (target) INCLUDE (seq);
CREATE INDEX fragment_references_seq ON agent_memory.fragment_references (seq);
ANALYZE agent_memory.fragment_references;

CREATE FUNCTION agent_memory.fragment_references_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM agent_memory.fragment_references WHERE seq = OLD.seq;
    END IF;
    INSERT INTO agent_memory.fragment_references (seq, target, agent_id)
        SELECT DISTINCT NEW.seq, r.target, NEW.agent_id FROM pg_catalog.unnest(NEW.linked_to) AS r(target);
    RETURN NULL;
END
$$;
CREATE TRIGGER fragment_references_insert AFTER INSERT ON agent_memory.fragments
    FOR EACH ROW WHEN (cardinality(NEW.linked_to) > 0)
    EXECUTE FUNCTION agent_memory.fragment_references_write();
CREATE TRIGGER fragment_references_update AFTER UPDATE OF linked_to, agent_id ON agent_memory.fragments
    FOR EACH ROW WHEN (OLD.linked_to IS DISTINCT FROM NEW.linked_to OR OLD.agent_id IS DISTINCT FROM NEW.agent_id)
    EXECUTE FUNCTION agent_memory.fragment_references_write();

-- The policy of the other search tables (0002), so this one reveals no more than they do.
ALTER TABLE agent_memory.fragment_references ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.fragment_references FORCE ROW LEVEL SECURITY;
CREATE POLICY fragment_references_isolation_policy ON agent_memory.fragment_references
    USING (
        agent_id = current_setting('app.current_agent_id', true)
        OR agent_id = 'default'
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
    )
    WITH CHECK (
        agent_id = current_setting('app.current_agent_id', true)
        OR agent_id = 'default'
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
    );
