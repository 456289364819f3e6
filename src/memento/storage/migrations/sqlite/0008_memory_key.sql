-- Seed 002's keyed memory: a fragment may carry a key, unique per agent in the vault (session_id
-- NULL) and per agent and session in the session scope, and the vector the agent computed itself
-- (float32 bytes, any dimension; search_memories blends it with the query's). Keyed rows are
-- exempt from the content-hash dedupe: two keys may hold the same text.
ALTER TABLE fragments ADD COLUMN memory_key TEXT;
ALTER TABLE fragments ADD COLUMN client_embedding BLOB;

DROP INDEX fragments_hash_permanent;
DROP INDEX fragments_hash_session;
CREATE UNIQUE INDEX fragments_hash_permanent ON fragments(agent_id, content_hash)
    WHERE session_id IS NULL AND memory_key IS NULL;
CREATE UNIQUE INDEX fragments_hash_session ON fragments(agent_id, session_id, content_hash)
    WHERE session_id IS NOT NULL AND memory_key IS NULL;
CREATE UNIQUE INDEX fragments_key_vault ON fragments(agent_id, memory_key)
    WHERE session_id IS NULL AND memory_key IS NOT NULL;
CREATE UNIQUE INDEX fragments_key_session ON fragments(agent_id, session_id, memory_key)
    WHERE session_id IS NOT NULL AND memory_key IS NOT NULL;
