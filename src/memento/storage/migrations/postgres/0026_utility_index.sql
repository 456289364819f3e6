-- memory_stats lists the forget candidates of a namespace: its least useful memories, unused
-- for a while (utility below a threshold, lowest first). Without an index on utility the query
-- read every memory of the namespace; with it, the few rows under the threshold are found
-- directly, in the order the list wants.
CREATE INDEX IF NOT EXISTS fragments_utility ON agent_memory.fragments (agent_id, utility_score);
