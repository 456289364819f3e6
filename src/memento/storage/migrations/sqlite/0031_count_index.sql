-- A count of an agent's memories with no selective filter (a REST listing's total, memory_stats,
-- /health) walked the agent's rows in the table itself: ~220 ms at a million memories. This
-- index holds every column such a count tests (visibility, expiry, the shared pool's privacy),
-- so the count reads the index alone (~45 ms at a million). Its WHERE names `pinned IN (0, 1)`,
-- a term only those counts write (sqlfilter.COUNT_INDEX_TERM), so that no other statement's plan
-- can take this index instead of the one it was written for.
CREATE INDEX IF NOT EXISTS fragments_live_count
    ON fragments(agent_id, session_id, expires_at, pinned, privacy_scope, deleted_at)
    WHERE deleted_at IS NULL AND pinned IN (0, 1);
