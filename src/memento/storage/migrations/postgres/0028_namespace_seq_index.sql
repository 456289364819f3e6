-- A page of a namespace's memories newest first by insertion order (MCP resources/list, the
-- REST and dashboard listings) read and sorted every memory of the namespace to keep 50. With
-- this index each namespace is walked in that order and stops.
CREATE INDEX IF NOT EXISTS fragments_namespace_seq ON agent_memory.fragments (agent_id, seq);
