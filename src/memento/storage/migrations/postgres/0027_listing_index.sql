-- A recall without a question lists a namespace's memories anchors first, then by importance,
-- newest first among equals, and keeps the first few. Without an index in that order every
-- memory of the namespace (or of the topic asked for) was read and sorted to keep 200 of them.
-- With these the listing walks the index in order and stops.
CREATE INDEX IF NOT EXISTS fragments_listing ON agent_memory.fragments (agent_id, is_anchor DESC, importance DESC, created_at DESC);
CREATE INDEX IF NOT EXISTS fragments_topic_listing ON agent_memory.fragments (agent_id, topic, is_anchor DESC, importance DESC, created_at DESC);
