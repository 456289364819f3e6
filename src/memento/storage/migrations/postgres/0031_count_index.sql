-- A count of an agent's memories with no selective filter (a REST listing's total, memory_stats,
-- /health) read every row of the agent from the table. This index holds every column such a
-- count and the row-level security policy test, so the count is an index-only scan. Its WHERE
-- names `pinned IN (true, false)`, a term only those counts write (sqlfilter.COUNT_INDEX_TERM),
-- so that no other statement's plan can take this index instead of the one it was written for.
CREATE INDEX IF NOT EXISTS fragments_live_count
    ON agent_memory.fragments (agent_id, session_id, expires_at, pinned, privacy_scope, deleted_at)
    WHERE deleted_at IS NULL AND pinned IN (true, false);
