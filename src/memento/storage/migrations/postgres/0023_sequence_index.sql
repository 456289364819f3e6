-- Recall's conversational context (storage/sequence.py) asks, for a memory, for the nearest
-- memory written before and after it in the same namespace and topic. This index lets each
-- such question walk a few rows in writing order instead of sorting the whole topic.
CREATE INDEX IF NOT EXISTS fragments_sequence ON agent_memory.fragments (agent_id, topic, seq);
