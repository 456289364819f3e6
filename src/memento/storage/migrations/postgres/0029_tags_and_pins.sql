-- A tag filter could not use the GIN index on fragments.tags: under row-level security only
-- leakproof operators may be index conditions ahead of the policy, and the array operators
-- (@>, &&) are not. So every tag filter read the namespace (~100 ms at 200,000 memories for a
-- tag no memory has). fragment_tags holds one row per (memory, tag), kept by the trigger below;
-- a filter by a tag few memories carry finds them here by text equality (storage/sqlfilter.py).
CREATE TABLE agent_memory.fragment_tags (
    seq      BIGINT NOT NULL REFERENCES agent_memory.fragments (seq) ON DELETE CASCADE,
    tag      TEXT   NOT NULL,
    agent_id TEXT   NOT NULL
);
-- The tags every memory holds (fragments' own row-level security binds the owner too).
SELECT set_config('app.current_agent_id', 'system', true);
INSERT INTO agent_memory.fragment_tags (seq, tag, agent_id)
    SELECT DISTINCT f.seq, t.tag, f.agent_id
    FROM agent_memory.fragments f, pg_catalog.unnest(f.tags) AS t(tag)
    WHERE cardinality(f.tags) > 0;
-- Index-only scans count a tag's memories and list their seqs.
CREATE INDEX fragment_tags_lookup ON agent_memory.fragment_tags (tag, agent_id) INCLUDE (seq);
CREATE INDEX fragment_tags_seq ON agent_memory.fragment_tags (seq);
ANALYZE agent_memory.fragment_tags;

CREATE FUNCTION agent_memory.fragment_tags_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM agent_memory.fragment_tags WHERE seq = OLD.seq;
    END IF;
    INSERT INTO agent_memory.fragment_tags (seq, tag, agent_id)
        SELECT DISTINCT NEW.seq, t.tag, NEW.agent_id FROM pg_catalog.unnest(NEW.tags) AS t(tag);
    RETURN NULL;
END
$$;
CREATE TRIGGER fragment_tags_insert AFTER INSERT ON agent_memory.fragments
    FOR EACH ROW WHEN (cardinality(NEW.tags) > 0)
    EXECUTE FUNCTION agent_memory.fragment_tags_write();
CREATE TRIGGER fragment_tags_update AFTER UPDATE OF tags, agent_id ON agent_memory.fragments
    FOR EACH ROW WHEN (OLD.tags IS DISTINCT FROM NEW.tags OR OLD.agent_id IS DISTINCT FROM NEW.agent_id)
    EXECUTE FUNCTION agent_memory.fragment_tags_write();

-- The policy of the other search tables (0002), so this one reveals no more than they do.
ALTER TABLE agent_memory.fragment_tags ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.fragment_tags FORCE ROW LEVEL SECURITY;
CREATE POLICY fragment_tags_isolation_policy ON agent_memory.fragment_tags
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

-- Pinned memories are few: listing or counting them read the whole namespace. The filter names
-- `pinned` literally (not a bound parameter) so that this partial index serves it.
CREATE INDEX IF NOT EXISTS fragments_pinned ON agent_memory.fragments (agent_id, seq) WHERE pinned;
