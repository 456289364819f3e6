-- Seed 004's privacy scopes on the shared pool: the pool shares with every agent only its
-- `team` and `public` rows; a `private` pool row is seen by the pool's own principal alone
-- (as its working memory is). Every pool row stored so far was shared with every agent, so it
-- is `team` now (its reach does not change); rows of other namespaces keep their scope.
UPDATE agent_memory.fragments SET privacy_scope = 'team'
    WHERE agent_id = 'default' AND session_id IS NULL AND privacy_scope = 'private';

DROP POLICY fragment_isolation_policy ON agent_memory.fragments;
CREATE POLICY fragment_isolation_policy ON agent_memory.fragments
    USING (
        agent_id = current_setting('app.current_agent_id', true)
        OR (agent_id = 'default' AND session_id IS NULL AND privacy_scope <> 'private')
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
    )
    WITH CHECK (
        agent_id = current_setting('app.current_agent_id', true)
        OR agent_id = 'default'
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
    );
