-- Seed 004's privacy scopes on the shared pool: the pool shares with every agent only its
-- `team` and `public` rows; a `private` pool row is seen by the pool's own principal alone.
-- Every pool row stored so far was shared with every agent, so it is `team` now (its reach
-- does not change); rows of other namespaces keep their scope.
UPDATE fragments SET privacy_scope = 'team' WHERE agent_id = 'default' AND session_id IS NULL AND privacy_scope = 'private';
