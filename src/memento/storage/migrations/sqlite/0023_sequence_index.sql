-- Recall's conversational context (storage/sequence.py) asks, for a memory, for the nearest
-- memory written before and after it in the same namespace and topic. On SQLite the index
-- fragments_topic (agent_id, topic) already ends with the row id, which is the writing order
-- (seq), so each such question walks a few index entries; nothing to add. The number is kept
-- so both backends list the same migrations.
SELECT 1;
