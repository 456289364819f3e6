-- Working memory is never shared: the pool's session rows are visible in `default` itself (and
-- to maintenance) only, like every other namespace's.
DROP POLICY fragment_isolation_policy ON agent_memory.fragments;
CREATE POLICY fragment_isolation_policy ON agent_memory.fragments
    USING (
        agent_id = current_setting('app.current_agent_id', true)
        OR (agent_id = 'default' AND session_id IS NULL)
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
    )
    WITH CHECK (
        agent_id = current_setting('app.current_agent_id', true)
        OR agent_id = 'default'
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
    );

-- The shared pool's write rule (MEMENTO_SHARED_POOL), as restrictive policies on every write:
-- a transaction that sets app.pool_writes to 'none' adds, changes or deletes no pool row, one
-- that sets 'unanchored' only the pool's non-anchored permanent rows. Unset means 'all'
-- (admins, maintenance, and callers that predate the setting).
CREATE FUNCTION agent_memory.pool_writable(agent TEXT, anchored BOOLEAN, session TEXT) RETURNS BOOLEAN
    LANGUAGE sql STABLE AS $$
    SELECT agent <> 'default'
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
        OR COALESCE(NULLIF(current_setting('app.pool_writes', true), ''), 'all') = 'all'
        OR (current_setting('app.pool_writes', true) = 'unanchored' AND NOT anchored AND session IS NULL)
$$;
CREATE POLICY fragment_pool_insert ON agent_memory.fragments AS RESTRICTIVE FOR INSERT
    WITH CHECK (agent_memory.pool_writable(agent_id, is_anchor, session_id));
CREATE POLICY fragment_pool_update ON agent_memory.fragments AS RESTRICTIVE FOR UPDATE
    USING (agent_memory.pool_writable(agent_id, is_anchor, session_id))
    WITH CHECK (agent_memory.pool_writable(agent_id, is_anchor, session_id));
CREATE POLICY fragment_pool_delete ON agent_memory.fragments AS RESTRICTIVE FOR DELETE
    USING (agent_memory.pool_writable(agent_id, is_anchor, session_id));
